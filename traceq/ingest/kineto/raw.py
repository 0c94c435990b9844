"""The raw event relation: the interface between decoding a Kineto/Chrome trace and
translating it into the canonical tables.

Decoding (the text of the file -> rows) writes the events as Parquet *parts* with exactly
`RAW_SCHEMA`, in file order, in a scratch folder (row groups of at most ~64 k rows:
translation reads one row group at a time), and beside each part the facts of translation's
first pass (`SpanFacts`: the sane start times, the times of the sane host B/E events),
taken while the rows are at hand so that translation does not read the parts twice;
translation (routing by category, ns times, validation, B/E pairing, launch linking,
classification) reads those parts back.
Two decoders produce the same rows for the same input:

- the fast path (`decode`): the event array split at validated event boundaries
  and decoded in parallel by forked processes (msgspec, typed);
- the robust path (`windows`, `recover`: msgspec, chunk by chunk, coercing odd types per
  event): every input the fast path refuses (odd types, truncated files, hostile values) ends up here.

Rows: one per item of the event list that is a JSON object with `ph` in X/B/E and a
category other than `Trace`. Values as the trace wrote them, with these conversions:
`pid`/`tid`/`stream`/`device` and the ids to int64 (numeric or hex strings, `"stream 7"` ->
7, null when no integer or beyond int64); `ts`/`dur` to float64 µs (numeric strings too;
null when not a number; beyond float range -> ±inf); `external_id` = `External id`, else
`external id`; `unfinished` = args.finished is "false" (any case); `bytes` = args.bytes,
else the collective message size (max(In, Out msg nelems) x dtype size); `grid_*`/`block_*`
= the first three integers of args.grid/args.block; `shared_memory` (int64), `blocks_per_sm`,
`warps_per_sm`, `est_occupancy_pct` (float64) = args "shared memory", "blocks per SM", "warps per
SM", "est. achieved occupancy %" (numbers or numeric strings, as `pid`/`ts` are converted);
`arg_kind` = args.kind when a string;
`collective`/`pg_name`/`pg_desc` = args "Collective name"/"Process Group Name"/"Process Group
Description" when strings (numbers as their text; `pg_name` falls back on the older "Process
Group ID", as text); `group_size` = args "Group size";
`seq` = args "Seq" (the collective's sequence number in its process group);
`launch_kernel` = args "kernel" of runtime/driver calls (`LAUNCH_CATS`; null elsewhere).
The arg columns from `stream` to `seq` are read only for events of `ARG_CATS` (GPU activity and
GPU-side annotations: the only rows translation takes them from) and are null elsewhere;
building them for every host event cost as much as all the other columns together.
`input_dims`/`input_types`/`input_strides`/`concrete_inputs` (CPU ops recorded with
`record_shapes=True`) = args "Input Dims" (older PyTorch: "Input dims")/"Input type"/"Input
Strides"/"Concrete Inputs" as compact JSON text (whitespace outside strings removed), null when
absent or not a JSON array; read only for events of `OP_CATS`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ... import arrow_kernels as ak
from ..ns_times import Times

RAW_SCHEMA = pa.schema([
    ("ph", pa.string()), ("cat", pa.string()), ("name", pa.string()),
    ("pid", pa.int64()), ("tid", pa.int64()),
    ("ts", pa.float64()), ("dur", pa.float64()),
    ("external_id", pa.int64()), ("correlation", pa.int64()), ("unfinished", pa.bool_()),
    ("stream", pa.int64()), ("device", pa.int64()), ("bytes", pa.int64()), ("registers", pa.int64()),
    ("grid_x", pa.int64()), ("grid_y", pa.int64()), ("grid_z", pa.int64()),
    ("block_x", pa.int64()), ("block_y", pa.int64()), ("block_z", pa.int64()),
    # kernels' launch facts: args "shared memory", "blocks per SM", "warps per SM", "est. achieved occupancy %"
    ("shared_memory", pa.int64()), ("blocks_per_sm", pa.float64()), ("warps_per_sm", pa.float64()),
    ("est_occupancy_pct", pa.float64()),
    ("arg_kind", pa.string()),
    # collectives (PyTorch >= 2.1 writes these in the args of NCCL kernels and record_param_comms)
    ("collective", pa.string()), ("pg_name", pa.string()), ("pg_desc", pa.string()),
    ("group_size", pa.int64()), ("seq", pa.int64()),
    # record_shapes=True on CPU ops: the args as compact JSON arrays (-> host_ops as is)
    ("input_dims", pa.string()), ("input_types", pa.string()), ("input_strides", pa.string()),
    ("concrete_inputs", pa.string()),
    # runtime/driver calls only (`LAUNCH_CATS`): args.kernel, the kernel a launch call launches
    # (ROCm writes it; traceq.ingest.graph_capture matches the launches of a graph capture by it)
    ("launch_kernel", pa.string()),
])
SHAPE_COLS = ("input_dims", "input_types", "input_strides", "concrete_inputs")

# `[memory]` instant events (ph "i", name "[memory]"): not rows of the raw relation; each raw
# part has them, in file order, in its own file beside it (`memory_path`), values as the trace
# wrote them: pid/tid and the int args to int64 as `pid` is (numbers, numeric or hex strings),
# ts to float64 µs, `device_type` = "Device Type" (an int in Kineto: 0 CPU, 1 CUDA).
MEMORY_RAW_SCHEMA = pa.schema([
    ("pid", pa.int64()), ("tid", pa.int64()), ("ts", pa.float64()),
    ("device_type", pa.int64()), ("device", pa.int64()), ("addr", pa.int64()), ("bytes", pa.int64()),
    ("total_allocated", pa.int64()), ("total_reserved", pa.int64()),
])


# Routing categories (exact, as torch.profiler writes them; the routing of `tables`):
# category (lower-cased) of device activity -> gpu_ops kind. Device activity of other
# accelerators goes to gpu_ops too: MTIA's on-device events are `mtia_ccp_events` (Kineto
# MTIA_CCP_EVENTS, an alias of CONCURRENT_KERNEL; HTA's kernel and GPU-event patterns list it).
GPU_KIND = {"kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy",
            "gpu_memset": "memset", "memset": "memset", "cuda_sync": "sync",
            "mtia_ccp_events": "kernel"}
GPU_CATS = frozenset(GPU_KIND) | {"Kernel", "Memcpy", "Memset"}   # + the 2021 capitalised ones
ANNOTATION_CATS = ("user_annotation", "gpu_user_annotation", "User_annotation", "Gpu_user_annotation")
# events whose arg columns (stream, device, bytes, ..., seq) translation reads
ARG_CATS = GPU_CATS | {"gpu_user_annotation", "Gpu_user_annotation"}
# CPU ops (the categories torch.profiler has written them under): the events with SHAPE_COLS
OP_CATS = ("cpu_op", "Operator", "operator", "CPU_OP")
# events whose `launch_kernel` translation's graph matching reads: the runtime/driver calls
LAUNCH_CATS = frozenset({"cuda_runtime", "Runtime", "runtime", "cuda_driver", "Driver", "driver"})


@dataclass
class Decoded:
    """What decoding one trace file produced (either decoder): the raw parts plus the facts
    translation and its messages need.

    `parts`: Parquet files with `RAW_SCHEMA`, rows in file order across the parts (B/E pairing
    and every "first" pick depend on it). `meta`: the outer metadata (`events.Trace`, its
    `traceEvents` emptied). `n_items`: items of the event list (objects or not); `not_objects`:
    how many of them are no JSON object; `first`: the first 4096 bytes of the first item (for
    the "no events" message); `warnings`: decoding's own (truncated file, odd metadata)."""

    parts: list[Path]
    meta: Any
    n_items: int
    not_objects: int = 0
    first: bytes | None = None
    warnings: list[str] = field(default_factory=list)


# ------------------------------------------------------------------ pass 1's facts, by the decoders
def starts_path(part: Path) -> Path:
    """The sane start times (int64 ns, in row order) of the rows of a raw part."""
    return part.with_suffix(".starts.npy")


def memory_path(part: Path) -> Path:
    """The `[memory]` events (`MEMORY_RAW_SCHEMA`) of the stretch of the file a raw part holds;
    absent when there are none."""
    return part.with_suffix(".memory.parquet")


def host_be_path(part: Path) -> Path:
    """start/end (int64 ns, shape (n, 2)) of the sane host B/E rows of a raw part; absent
    when there are none."""
    return part.with_suffix(".host-be.npy")


class SpanFacts:
    """What translation's first pass needs of a raw part, collected batch by batch as the
    decoder writes it (`rows.RawWriter`) and saved beside the part: the sane start times
    (for `validate.bounds_of`) and the times of the sane host B/E events (whether any B/E
    pair is completed on the host side). 8 bytes per row, as pass 1 held them anyway."""

    def __init__(self) -> None:
        self.starts: list[np.ndarray] = []
        self.host_be: list[np.ndarray] = []

    def add(self, ph, cat, ts, dur) -> None:
        """The Arrow columns ph, cat, ts and dur of a batch of raw rows."""
        t = Times(ts.to_numpy(zero_copy_only=False), dur.to_numpy(zero_copy_only=False),
                  ak.is_null(dur).to_numpy(zero_copy_only=False))
        sane = t.sane()
        self.starts.append(t.start[sane])
        # host B/E: ph B or E and no GPU category (a null category is the host's)
        be = ak.call("and_not", ak.is_in(ph, _BE), ak.is_in(cat, _GPU)).to_numpy(zero_copy_only=False)
        be &= sane
        if be.any():
            self.host_be.append(np.stack([t.start[be], t.end[be]], axis=1))

    def save(self, part: Path) -> None:
        np.save(starts_path(part), np.concatenate(self.starts) if self.starts else np.empty(0, np.int64))
        if self.host_be:
            np.save(host_be_path(part), np.concatenate(self.host_be))
        self.starts, self.host_be = [], []


def remove_part(part: Path) -> None:
    """A raw part and the facts saved beside it."""
    for p in (part, starts_path(part), host_be_path(part), memory_path(part)):
        p.unlink(missing_ok=True)


def _arrow_set(values) -> pa.Array:
    return pa.array(sorted(values), pa.string())


_BE = _arrow_set(("B", "E"))
_GPU = _arrow_set(GPU_CATS)
ARG_CAT_SET = _arrow_set(ARG_CATS)   # ARG_CATS as an Arrow value set (`arrow_kernels.is_in`)
OP_CAT_SET = _arrow_set(OP_CATS)
LAUNCH_CAT_SET = _arrow_set(LAUNCH_CATS)
