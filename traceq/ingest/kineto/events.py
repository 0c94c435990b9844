"""The msgspec model of a Kineto/Chrome trace: the document (`Trace`), its events (`Event`,
and the typed decode `EVENTS`) and the event args translation reads (`Args`).

`EVENTS` decodes a JSON list of events into structs of a union tagged by `ph`: the kept
phases (X, B, E) and instant events (i: the `[memory]` events) in full, every other phase of the Trace Event Format as a struct without
fields, whose values msgspec skips unread (a third of a Kineto trace's events are flows).
Any other `ph` (missing, unknown, not text, or a key repeated with another value) fails the
typed decode; the decoders then coerce that chunk event by event (`recover`),
keeping only X, B, E and `[memory]` instants too.
"""
from __future__ import annotations

from typing import Any, ClassVar, Union

import msgspec


Num = Union[int, float, str, None]
Text = Union[str, int, float, None]
NO_RAW = msgspec.Raw()   # an arg the event does not have (empty text, false)


class Args(msgspec.Struct, gc=False):
    external_id: Num = msgspec.field(default=None, name="External id")
    external_id_lc: Num = msgspec.field(default=None, name="external id")
    correlation: Num = None
    stream: Num = None
    device: Num = None
    bytes: Num = None
    grid: Union[list[int], None] = None
    block: Union[list[int], None] = None
    registers: Num = msgspec.field(default=None, name="registers per thread")
    # kernels: the launch facts Kineto writes beside grid/block (from the device's properties)
    shared_memory: Num = msgspec.field(default=None, name="shared memory")
    blocks_per_sm: Num = msgspec.field(default=None, name="blocks per SM")
    warps_per_sm: Num = msgspec.field(default=None, name="warps per SM")
    occupancy: Num = msgspec.field(default=None, name="est. achieved occupancy %")
    finished: Union[str, bool, int, None] = None
    kind: Union[str, int, None] = None
    # PyTorch >= 2.2 on NCCL kernels: message size of the collective (-> gpu_ops.bytes)
    in_nelems: Num = msgspec.field(default=None, name="In msg nelems")
    out_nelems: Num = msgspec.field(default=None, name="Out msg nelems")
    dtype: Union[str, None] = None
    # collective identity (PyTorch >= 2.1, NCCL kernels and record_param_comms)
    collective: Text = msgspec.field(default=None, name="Collective name")
    pg_name: Text = msgspec.field(default=None, name="Process Group Name")
    # older PyTorch (2.0: record_param_comms of ns_resolution_trace) writes the group's id, whose
    # text is the group's name (distributedInfo pg_config: uid 0 -> pg_name "0"): pg_name's fallback
    pg_id: Text = msgspec.field(default=None, name="Process Group ID")
    pg_desc: Text = msgspec.field(default=None, name="Process Group Description")
    group_size: Num = msgspec.field(default=None, name="Group size")
    seq: Num = msgspec.field(default=None, name="Seq")
    # record_shapes=True on CPU ops: the JSON text of each arg as written, unparsed (msgspec
    # skips it as fast as an unknown key); rows.shape_columns makes it compact JSON
    input_dims: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input Dims")
    input_dims_lc: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input dims")   # older PyTorch
    input_types: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input type")
    input_strides: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input Strides")
    concrete_inputs: msgspec.Raw = msgspec.field(default=NO_RAW, name="Concrete Inputs")
    # runtime/driver launch calls (ROCm): the name of the kernel the call launches; the one
    # record of a kernel launched into a graph under capture (it does not run then)
    kernel: Text = None


class MemoryArgs(msgspec.Struct, gc=False):
    """The args of a `[memory]` instant event: the allocator's record of one allocation or free
    (a struct of its own: the events' other args stay unread)."""
    device_type: Num = msgspec.field(default=None, name="Device Type")
    device_id: Num = msgspec.field(default=None, name="Device Id")
    addr: Num = msgspec.field(default=None, name="Addr")
    bytes: Num = msgspec.field(default=None, name="Bytes")
    total_allocated: Num = msgspec.field(default=None, name="Total Allocated")
    total_reserved: Num = msgspec.field(default=None, name="Total Reserved")


class Fields(msgspec.Struct, gc=False):
    """The fields of a trace event that translation reads, besides its phase."""
    cat: Union[str, None] = None
    name: Union[str, None] = None
    pid: Union[int, str, None] = None
    tid: Union[int, str, None] = None
    ts: Num = None
    dur: Num = None
    args: Union[Args, None] = None


class Event(Fields):
    """An event of the coercion path (`recover`): any phase, or none (`args`: a MemoryArgs for
    a `[memory]` instant event)."""
    ph: Union[str, None] = None


# The typed decode: a union tagged by `ph`. The kept phases (X, B, E) are decoded in full;
# every other phase of the Trace Event Format is a struct without fields, whose values msgspec
# skips unread (a third of a Kineto trace's events are flows: 15 % less decode time). Each
# class has its phase as a class attribute `ph`, as `Event` has it as a field. Any other
# `ph` (a missing, unknown or non-text one, or a key repeated with another value) fails the
# typed decode, and its chunk goes the coercion path, which keeps only X, B and E too.
class _Kept(Fields, tag_field="ph"):
    pass


class _X(_Kept, tag="X"):
    ph: ClassVar[str] = "X"


class _B(_Kept, tag="B"):
    ph: ClassVar[str] = "B"


class _E(_Kept, tag="E"):
    ph: ClassVar[str] = "E"


class Instant(msgspec.Struct, tag_field="ph", tag="i", gc=False):
    """Instant events, for the `[memory]` ones (rows.RawWriter keeps those apart, as memory
    events; the raw relation has no instant events): their fields and the memory args only."""
    ph: ClassVar[str] = "i"
    cat: Union[str, None] = None
    name: Union[str, None] = None
    pid: Union[int, str, None] = None
    tid: Union[int, str, None] = None
    ts: Num = None
    args: Union[MemoryArgs, None] = None


OTHER_PHASES = "ICbneSTpFstfPNODMVvRc()="   # chrome://tracing's Trace Event Format, all but X, B, E and i
_SKIPPED = tuple(msgspec.defstruct(f"_Phase{i}", [], gc=False, tag_field="ph", tag=ph, namespace={"ph": ph})
                 for i, ph in enumerate(OTHER_PHASES))


class Device(msgspec.Struct, gc=False):
    id: Any = None
    name: Any = None
    numSms: Any = None
    multiProcessorCount: Any = None
    totalGlobalMem: Any = None
    # the properties of occupancy (runs.devices keys: reader.DEVICE_PROPERTIES)
    computeMajor: Any = None
    computeMinor: Any = None
    maxThreadsPerBlock: Any = None
    maxThreadsPerMultiprocessor: Any = None
    regsPerBlock: Any = None
    regsPerMultiprocessor: Any = None
    warpSize: Any = None
    sharedMemPerBlock: Any = None
    sharedMemPerMultiprocessor: Any = None
    maxSharedMemoryPerMultiProcessor: Any = None   # ROCm's name of sharedMemPerMultiprocessor
    sharedMemPerBlockOptin: Any = None


class Trace(msgspec.Struct, gc=False):
    traceEvents: Union[list[msgspec.Raw], None] = None
    deviceProperties: Union[list[Device], None] = None
    computeProperties: Union[list[Device], None] = None
    distributedInfo: Union[dict, None] = None
    baseTimeNanoseconds: Union[int, None] = None
    schemaVersion: Any = None
    host_name: Any = None
    hostname: Any = None


EVENTS = msgspec.json.Decoder(list[Union[(_X, _B, _E, Instant, *_SKIPPED)]])
ANY_LIST = msgspec.json.Decoder(list[Any])
