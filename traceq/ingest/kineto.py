"""Kineto / PyTorch-profiler Chrome traces (`*.json`, `*.json.gz`) -> canonical tables.

Owns every quirk of the format (REFERENCE.md D1): object with `traceEvents` or a bare
array; 2021 capitalised categories (`Kernel`, `Runtime`, `Operator`, ...); `ts`/`dur` as
int, float or numeric string µs, relative to `baseTimeNanoseconds` in newer traces; string
pids/tids (`"stream 7"`, `"1890023232"`, ROCm hex `"0x0"`); `External id`/`external id`;
`B`/`E` pairs; spans still open at capture end (`args.finished == "false"`); files cut
mid-event by a crashed writer (every complete event is kept, with a warning).

Speed/memory: the file is parsed once by msgspec into raw event slices (no Python
objects per field), then decoded in chunks of typed structs that are turned into Arrow
columns and dropped, so peak memory stays near the size of the JSON text. Everything
after that (routing by category, ns conversion, launch linking) is vectorised in polars.
"""
from __future__ import annotations

import mmap
import os
import re
import zlib
from pathlib import Path
from typing import Any, Union

import msgspec
import numpy as np
import polars as pl
import pyarrow as pa

from ..categories import classify
from ..errors import BadInput
from .common import Parsed, nesting_depth
from .validate import LIMIT_NS, check_times, fmt_value, representable

Num = Union[int, float, str, None]
_CHUNK = 16384


class _Args(msgspec.Struct, gc=False):
    external_id: Num = msgspec.field(default=None, name="External id")
    external_id_lc: Num = msgspec.field(default=None, name="external id")
    correlation: Num = None
    stream: Num = None
    device: Num = None
    bytes: Num = None
    grid: Union[list[int], None] = None
    block: Union[list[int], None] = None
    registers: Num = msgspec.field(default=None, name="registers per thread")
    finished: Union[str, bool, int, None] = None
    kind: Union[str, int, None] = None
    # PyTorch >= 2.2 on NCCL kernels: message size of the collective (-> gpu_ops.bytes)
    in_nelems: Num = msgspec.field(default=None, name="In msg nelems")
    out_nelems: Num = msgspec.field(default=None, name="Out msg nelems")
    dtype: Union[str, None] = None
    # PyTorch >= 2.1 on NCCL kernels: the collective's identity (-> gpu_ops.collective, ...; kineto_raw)
    collective: Union[str, int, float, None] = msgspec.field(default=None, name="Collective name")
    pg_name: Union[str, int, float, None] = msgspec.field(default=None, name="Process Group Name")
    pg_desc: Union[str, int, float, None] = msgspec.field(default=None, name="Process Group Description")
    group_size: Num = msgspec.field(default=None, name="Group size")
    seq: Num = msgspec.field(default=None, name="Seq")


class _Event(msgspec.Struct, gc=False):
    ph: Union[str, None] = None
    cat: Union[str, None] = None
    name: Union[str, None] = None
    pid: Union[int, str, None] = None
    tid: Union[int, str, None] = None
    ts: Num = None
    dur: Num = None
    args: Union[_Args, None] = None


class _Device(msgspec.Struct, gc=False):
    id: Any = None
    name: Any = None
    numSms: Any = None
    multiProcessorCount: Any = None
    totalGlobalMem: Any = None


class _Trace(msgspec.Struct, gc=False):
    traceEvents: Union[list[msgspec.Raw], None] = None
    deviceProperties: Union[list[_Device], None] = None
    computeProperties: Union[list[_Device], None] = None
    distributedInfo: Union[dict, None] = None
    baseTimeNanoseconds: Union[int, None] = None
    schemaVersion: Any = None
    host_name: Any = None
    hostname: Any = None


_EVENTS = msgspec.json.Decoder(list[_Event])
_ANY_LIST = msgspec.json.Decoder(list[Any])

# category (lower-cased) -> (table, kind)
# Device activity of other accelerators goes to gpu_ops too: MTIA's on-device events are
# `mtia_ccp_events` (Kineto MTIA_CCP_EVENTS, an alias of CONCURRENT_KERNEL; HTA's kernel and
# GPU-event patterns list it). Their device is the trace pid ("MTIA 9"), their stream the tid
# when args carry none; `_MTIA_KIND` refines the kind by name.
_GPU_KIND = {"kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy",
             "gpu_memset": "memset", "memset": "memset", "cuda_sync": "sync",
             "mtia_ccp_events": "kernel"}
# MTIA on-device names: `dma_request` (DMA copies, HTA's "MTIA Memory" pattern ^dma),
# `event_wait`/`event_record` (stream-event waits and markers); the rest are kernels
_MTIA_KIND = ((r"^dma", "memcpy"), (r"^event_(wait|record)$", "sync"))
_HOST_KIND = {"cuda_runtime": "runtime", "runtime": "runtime", "xpu_runtime": "runtime",
              "mtia_runtime": "runtime", "privateuse1_runtime": "runtime", "glow_runtime": "runtime",
              "cuda_driver": "driver", "xpu_driver": "driver",
              "cpu_op": "cpu_op", "operator": "cpu_op", "python_function": "python"}
_REGION_CATS = ("user_annotation", "gpu_user_annotation")
SYNC_APIS = r"^(cuda|hip|cu)(Stream|Device|Event|Ctx)Synchronize|^(cuda|hip)StreamWaitEvent|^cuStreamWaitEvent"
_STEP = r"^ProfilerStep#(\d+)$"
_DATALOADER = r"^enumerate\((DataLoader|DataPipe)\)#"


# ------------------------------------------------------------------ file -> buffer
def _open_buffer(path: Path) -> mmap.mmap:
    """The JSON text as a memory map: the file itself, or a .gz decompressed into anonymous
    memory. Mapped pages can be released chunk by chunk once decoded (see `_release`)."""
    try:
        with open(path, "rb") as f:
            magic = f.read(2)
            f.seek(0)
            if magic != b"\x1f\x8b":
                size = os.fstat(f.fileno()).st_size
                if size == 0:
                    raise BadInput("empty file", path)
                return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            return _gunzip_to_map(f, path)
    except OSError as exc:
        raise BadInput(exc.strerror or str(exc), path) from None


# Decompression limits (bombs): expanded text with no trace event in its first NO_EVENT_LIMIT
# bytes is refused, and so is an expansion beyond max(RATIO_FLOOR, MAX_RATIO x compressed
# size) -- JSON traces compress 5-30x; 200x is whitespace or repetition, not events.
NO_EVENT_LIMIT = 64 << 20
MAX_RATIO = 200
RATIO_FLOOR = 256 << 20


def _gunzip_to_map(f, path: Path) -> mmap.mmap:
    compressed = os.fstat(f.fileno()).st_size
    f.seek(-4, os.SEEK_END)
    hint = int.from_bytes(f.read(4), "little") or (1 << 20)   # ISIZE: size mod 2**32
    f.seek(0)
    limit = max(RATIO_FLOOR, MAX_RATIO * compressed)
    mm = mmap.mmap(-1, max(min(hint, limit), 1 << 16))
    d = zlib.decompressobj(wbits=47)
    pos, seen_event, tail = 0, False, b""
    try:
        while chunk := f.read(1 << 22):
            while chunk:
                out = d.decompress(chunk, 1 << 24)
                if not seen_event:   # an event has a "ph" key; look across chunk borders too
                    seen_event = b'"ph"' in tail + out[:8] or b'"ph"' in out
                    tail = out[-8:]
                    if not seen_event and pos + len(out) > NO_EVENT_LIMIT:
                        raise BadInput(f"no trace events in the first {NO_EVENT_LIMIT >> 20} MB of decompressed "
                                       f"data ({compressed / 1e6:.1f} MB compressed): not a trace, refused", path)
                if pos + len(out) > limit:
                    raise BadInput(f"expands beyond {limit >> 20} MB ({MAX_RATIO}x its compressed size "
                                   f"{compressed / 1e6:.1f} MB): not a plausible trace, refused", path)
                chunk = d.unconsumed_tail
                if d.eof and d.unused_data:            # concatenated gzip members
                    chunk = d.unused_data + chunk
                    d = zlib.decompressobj(wbits=47)
                if pos + len(out) > len(mm):
                    mm.resize(max(2 * len(mm), pos + len(out)))
                mm[pos:pos + len(out)] = out
                pos += len(out)
    except zlib.error as exc:
        raise BadInput(f"corrupt .gz file ({exc})", path) from None
    if not d.eof:
        raise BadInput("truncated .gz file (compressed stream ends early)", path)
    if pos == 0:
        raise BadInput("empty file", path)
    if pos != len(mm):
        mm.resize(pos)
    return mm


def _trim_heap() -> None:
    """Hand the freed per-event Python objects back to the OS (glibc keeps them otherwise)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _address(buf) -> int:
    return np.frombuffer(buf, dtype=np.uint8).ctypes.data


def _release(mm: mmap.mmap, base: int, upto: int, done: int) -> int:
    """Drop the mapped pages of [done, upto) from memory (they are decoded already)."""
    page = mmap.PAGESIZE
    lo, hi = (done // page) * page, (upto // page) * page
    if hi > lo:
        mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
        return hi
    return done


def _parse_outer(raw: mmap.mmap, path: Path) -> tuple[_Trace, list[msgspec.Raw], list[str]]:
    """Split the document into metadata and raw event slices; recover truncated files."""
    warnings: list[str] = []
    head = bytes(raw[:4096]).lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    if not head:
        raise BadInput("empty file", path)
    text = memoryview(raw)[3:] if raw[:3] == b"\xef\xbb\xbf" else raw   # a UTF-8 BOM is not JSON
    try:
        if head == b"[":
            return _Trace(), msgspec.json.decode(text, type=list[msgspec.Raw]), warnings
        trace = msgspec.json.decode(text, type=_Trace)
    except msgspec.ValidationError as exc:
        if head != b"{":
            raise BadInput(f"not a Chrome trace ({exc})", path) from None
        trace = _parse_loose(text, path, warnings)
    except msgspec.DecodeError:
        if head not in (b"{", b"["):
            raise BadInput("not a Chrome trace (not JSON)", path) from None
        trace, events = _recover_truncated(raw, head, path)
        warnings.append(f"file is truncated or malformed after {len(events)} complete events; "
                        "ingested those (was the writer killed?)")
        return trace, events, warnings
    if trace.traceEvents is None:
        raise BadInput(_what_object(text), path)
    return trace, trace.traceEvents, warnings


def _what_object(text) -> str:
    """Say what a JSON object without "traceEvents" is (its first keys)."""
    try:
        keys = list(msgspec.json.decode(text, type=dict[str, msgspec.Raw]))
    except (msgspec.ValidationError, msgspec.DecodeError):
        keys = []
    if "traceEvents" in keys:
        return 'not a Chrome trace ("traceEvents" is not a list of events)'
    shown = ", ".join(repr(k[:40]) for k in keys[:8]) + (", ..." if len(keys) > 8 else "")
    return (f"not a trace: a JSON object with keys {shown}" if keys else "not a trace: an empty JSON object") + \
        '; a Chrome/Kineto trace is an object with a "traceEvents" list (or a list of events)'


def _parse_loose(text, path: Path, warnings: list[str]) -> _Trace:
    """The document is a JSON object but some metadata has an unexpected type: take the
    event list, and each metadata field that is valid; name the fields ignored."""
    try:
        fields = msgspec.json.decode(text, type=dict[str, msgspec.Raw])
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise BadInput(f"not a Chrome trace ({exc})", path) from None
    trace, bad = _Trace(), []
    import typing

    for key, typ in typing.get_type_hints(_Trace).items():
        if key not in fields:
            continue
        try:
            setattr(trace, key, msgspec.json.decode(fields[key], type=typ))
        except (msgspec.ValidationError, msgspec.DecodeError):
            if key == "traceEvents":
                raise BadInput('not a Chrome trace ("traceEvents" is not a list of events)', path) from None
            bad.append(key)
    if bad:
        warnings.append(f"ignored metadata of an unexpected type: {', '.join(bad)}")
    return trace


def _recover_truncated(raw: mmap.mmap, head: bytes, path: Path) -> tuple[_Trace, list[msgspec.Raw]]:
    """Stream-parse a broken document with ijson and keep every complete event."""
    import typing

    import ijson

    prefix = "item" if head == b"[" else "traceEvents.item"
    events: list[msgspec.Raw] = []
    try:
        raw.seek(0)
        for ev in ijson.items(raw, prefix, use_float=True):
            events.append(msgspec.Raw(msgspec.json.encode(ev)))
    except (ijson.JSONError, ijson.IncompleteJSONError, ValueError):
        pass
    if not events:
        raise BadInput("not a Chrome trace (invalid JSON, no complete event found)", path)
    meta = _Trace()
    try:  # metadata written before traceEvents (deviceProperties, distributedInfo) is still usable
        raw.seek(0)
        for key, value in ijson.kvitems(raw, "", use_float=True):
            if key == "traceEvents":
                break
            if key in ("deviceProperties", "distributedInfo", "baseTimeNanoseconds", "host_name", "hostname"):
                setattr(meta, key, msgspec.convert(value, type=typing.get_type_hints(_Trace)[key]))
    except Exception:  # noqa: BLE001 - metadata is optional; events are what matter
        pass
    return meta, events


# ------------------------------------------------------------------ events -> columns
_I64 = 2**63


def _to_int(v):
    """pid/tid/stream values: int, numeric or hex string, or `"stream 7"`; None when the
    value is no integer or does not fit int64 (ids beyond int64 point nowhere)."""
    if v is None:
        return None
    if type(v) is float:
        v = int(v) if v == v and abs(v) < _I64 else None
    elif type(v) is not int:
        s = str(v).strip()[:64]
        try:
            v = int(s, 0) if s.lower().startswith(("0x", "-0x")) else int(s)
        except ValueError:
            m = re.search(r"-?\d{1,19}", s)
            v = int(m.group()) if m else None
    return int(v) if v is not None and -_I64 <= v < _I64 else None


def _num(v):
    """A time/size value as float (µs for ts/dur): numbers and numeric strings; None otherwise.
    Integers beyond float range become inf (dropped later as not representable)."""
    if v is None or type(v) is float:
        return v
    if type(v) is int:
        try:
            return float(v)
        except OverflowError:
            return float("inf") if v > 0 else float("-inf")
    if type(v) is str:
        try:
            return float(v[:64])
        except ValueError:
            return None
    return None


def _int_list(v):
    return [x for x in v if type(x) is int] if isinstance(v, list) else None


def _decode_any(chunk: list[msgspec.Raw]) -> list:
    """Generic decode of a chunk; events msgspec refuses (numbers beyond float range) are
    decoded one by one by the standard library (1e400 -> inf, big ints stay ints)."""
    try:
        return _ANY_LIST.decode(b"[" + b",".join(chunk) + b"]")
    except (msgspec.ValidationError, msgspec.DecodeError):
        import json

        out = []
        for raw in chunk:
            try:
                out.append(msgspec.json.decode(raw))
            except (msgspec.ValidationError, msgspec.DecodeError):
                try:
                    out.append(json.loads(bytes(raw)))
                except (ValueError, RecursionError):
                    out.append(None)
        return out


def _coerce_chunk(chunk: list[msgspec.Raw]) -> list[_Event]:
    """Slow path for a chunk with unexpected types: decode generically, coerce per event.
    Items that are not JSON objects are kept as None (counted, then skipped)."""
    out = []
    for item in _decode_any(chunk):
        if not isinstance(item, dict):
            out.append(None)
            continue
        a = item.get("args") if isinstance(item.get("args"), dict) else None
        args = None
        if a is not None:
            args = _Args(
                external_id=_num(a.get("External id")), external_id_lc=_num(a.get("external id")),
                correlation=_num(a.get("correlation")), stream=a.get("stream") if type(a.get("stream")) in (int, float, str) else None, device=_num(a.get("device")),
                bytes=_num(a.get("bytes")), grid=_int_list(a.get("grid")), block=_int_list(a.get("block")),
                registers=_num(a.get("registers per thread")), finished=str(a.get("finished")) if "finished" in a else None,
                kind=a.get("kind") if type(a.get("kind")) in (str, int) else None,
                in_nelems=_num(a.get("In msg nelems")), out_nelems=_num(a.get("Out msg nelems")),
                dtype=a.get("dtype") if type(a.get("dtype")) is str else None,
                **{f: v if type(v) in (str, int, float) else None
                   for f, key in _IDENTITY_ARGS.items() for v in [a.get(key)]},
                group_size=_num(a.get("Group size")), seq=_num(a.get("Seq")))
        text = lambda v: v if v is None or type(v) is str else str(v)  # noqa: E731
        ident = lambda v: v if v is None or type(v) in (int, str) else _to_int(v)  # noqa: E731
        out.append(_Event(ph=text(item.get("ph")), cat=text(item.get("cat")), name=text(item.get("name")),
                          pid=ident(item.get("pid")), tid=ident(item.get("tid")), ts=_num(item.get("ts")),
                          dur=_num(item.get("dur")), args=args))
    return out


def _int_col(values) -> pa.Array:
    """int64 column; the fast path is pyarrow's own conversion, odd values are coerced only if present."""
    try:
        return pa.array(values, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        return pa.array([_to_int(v) for v in values], pa.int64())


def _float_col(values) -> pa.Array:
    try:
        return pa.array(values, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        return pa.array([_num(v) for v in values], pa.float64())


def _str_col(values) -> pa.Array:
    try:
        return pa.array(values, pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([v if v is None or type(v) is str else str(v) for v in values], pa.string())


def _dims(values, i) -> pa.Array:
    return pa.array([v[i] if type(v) is list and len(v) > i and type(v[i]) is int else None for v in values], pa.int64())


_GPU_CATS = frozenset(_GPU_KIND) | {"Kernel", "Memcpy", "Memset"}
_ANNOTATION_CATS = frozenset({"user_annotation", "gpu_user_annotation", "User_annotation", "Gpu_user_annotation"})
_OP_CATS = frozenset({"cpu_op", "Operator", "operator", "CPU_OP"})
_TRACE_CATS = frozenset({"Trace", "trace"})
_REGION_PREFIXES = ("ProfilerStep#", "enumerate(DataLoader)#", "enumerate(DataPipe)#")
_KEPT_PH = frozenset(("X", "B", "E"))
_NO_ARGS = _Args()
_IDENTITY_ARGS = {"collective": "Collective name", "pg_name": "Process Group Name",
                  "pg_desc": "Process Group Description"}


# element sizes of the `dtype` names PyTorch writes in record_param_comms / NCCL kernel args
_DTYPE_BYTES = {"float": 4, "float32": 4, "double": 8, "float64": 8, "half": 2, "float16": 2, "bfloat16": 2,
                "int": 4, "int32": 4, "long": 8, "int64": 8, "short": 2, "int16": 2, "char": 1, "int8": 1,
                "byte": 1, "uint8": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1}


def _msg_bytes(a: _Args):
    """Message size of a collective kernel: max(in, out) elements x element size (the size
    NCCL-tests' bus bandwidth formulas use: the full output of AllGather, the full input of
    ReduceScatter). None unless the trace gives elements and a known dtype."""
    if a.dtype is None or (a.in_nelems is None and a.out_nelems is None):
        return None
    size = _DTYPE_BYTES.get(a.dtype.lower())
    if size is None:
        return None
    try:
        return int(max(float(a.in_nelems or 0), float(a.out_nelems or 0))) * size
    except (TypeError, ValueError):
        return None


def _columns(evs: list[_Event], gpu: bool) -> dict[str, pa.Array]:
    """Arrow columns of one group of events; GPU-only fields are filled for GPU events only."""
    args = [e.args or _NO_ARGS for e in evs]
    cols = {
        "ph": _str_col([e.ph for e in evs]),
        "cat": _str_col([e.cat for e in evs]),
        "name": _str_col([e.name for e in evs]),
        "pid": _int_col([e.pid for e in evs]),
        "tid": _int_col([e.tid for e in evs]),
        "ts": _float_col([e.ts for e in evs]),
        "dur": _float_col([e.dur for e in evs]),
        "external_id": _int_col([a.external_id if a.external_id is not None else a.external_id_lc for a in args]),
        "correlation": _int_col([a.correlation for a in args]),
        "unfinished": pa.array([a.finished is not None and str(a.finished).lower() == "false" for a in args]),
    }
    if gpu:
        cols.update({
            "stream": _int_col([a.stream for a in args]),
            "device": _int_col([a.device for a in args]),
            "bytes": _int_col([a.bytes if a.bytes is not None else _msg_bytes(a) for a in args]),
            "registers": _int_col([a.registers for a in args]),
            "grid_x": _dims([a.grid for a in args], 0), "grid_y": _dims([a.grid for a in args], 1),
            "grid_z": _dims([a.grid for a in args], 2), "block_x": _dims([a.block for a in args], 0),
            "block_y": _dims([a.block for a in args], 1), "block_z": _dims([a.block for a in args], 2),
            "arg_kind": _str_col([a.kind if type(a.kind) is str else None for a in args]),
            **{f: _str_col([getattr(a, f) for a in args]) for f in _IDENTITY_ARGS},
            "group_size": _int_col([a.group_size for a in args]),
            "seq": _int_col([a.seq for a in args]),
        })
    return cols


def _batches(evs: list[_Event | None]) -> tuple[pa.RecordBatch | None, ...]:
    """(host, GPU, region) batches of one chunk, routed here so that no table needs a filtered
    copy later. GPU-only columns exist in the GPU and region batches only. B/E events all stay
    with the host batch (an E carries no category); `read` moves paired regions out.
    Duration events without a usable `ts` are kept here (null) so that they are counted."""
    kept = [e for e in evs if e is not None and e.ph in _KEPT_PH and e.cat not in _TRACE_CATS]
    gpu = [e for e in kept if e.cat in _GPU_CATS]
    rest = [e for e in kept if e.cat not in _GPU_CATS] if gpu else kept
    marks = [e.ph == "X" and (e.cat in _ANNOTATION_CATS or (e.cat in _OP_CATS and e.name is not None
                                                          and e.name.startswith(_REGION_PREFIXES)))
             for e in rest]
    if any(marks):
        region = [e for e, m in zip(rest, marks) if m]
        host = [e for e, m in zip(rest, marks) if not m]
    else:
        region, host = [], rest
    return tuple(pa.RecordBatch.from_pydict(_columns(group, gpu_cols)) if group else None
                 for group, gpu_cols in ((host, False), (gpu, True), (region, True)))


def _events_frames(raws: list[msgspec.Raw], mm: mmap.mmap | None = None) -> tuple[tuple[pl.DataFrame, ...], int]:
    """Decode the raw event slices chunk by chunk into (host, GPU, region) event frames, and
    count the items of the list that are not JSON objects. Each chunk's slices and (when the
    events live in `mm`) its mapped pages are released once decoded, so the JSON text and the
    columns are never both fully in memory."""
    groups: tuple[list, list, list] = ([], [], [])
    not_objects = 0
    base = _address(mm) if mm is not None else 0
    done = 0
    for i in range(0, len(raws), _CHUNK):
        chunk = raws[i:i + _CHUNK]
        try:
            evs = _EVENTS.decode(b"[" + b",".join(chunk) + b"]")
        except msgspec.ValidationError:
            evs = _coerce_chunk(chunk)
            not_objects += sum(e is None for e in evs)
        for group, batch in zip(groups, _batches(evs)):
            if batch is not None:
                group.append(batch)
        if mm is not None:
            end = _address(chunk[-1]) + len(chunk[-1]) - base
            if 0 <= end <= len(mm):
                done = _release(mm, base, end, done)
        del chunk, evs
        raws[i:i + _CHUNK] = [None] * min(_CHUNK, len(raws) - i)   # free the slices as we go
    frames = []
    for batches, gpu in zip(groups, (False, True, True)):
        table = pa.Table.from_batches(batches) if batches else pa.Table.from_pydict(_columns([], gpu))
        frames.append(pl.from_arrow(table, rechunk=False))
    return tuple(frames), not_objects


def _ns(ts_us: pl.Expr) -> pl.Expr:
    """µs (float64) -> int64 ns, exact for integer µs and for relative ns-decimal µs; null
    where the value is not representable (validate.representable)."""
    ts_us = pl.when(representable(ts_us * 1000)).then(ts_us)
    whole = ts_us.floor()
    return whole.cast(pl.Int64) * 1000 + ((ts_us - whole) * 1000).round().cast(pl.Int64)


def _with_ns(ev: pl.DataFrame) -> pl.DataFrame:
    """start_ns/end_ns (null when not representable; a negative `dur` ends before the start,
    and is dropped as inverted), keeping the raw ts/dur for the validation warning."""
    dur = pl.col("dur")
    dur_ns = (pl.when(dur.is_null()).then(pl.lit(0, pl.Int64))
              .when(representable(dur * 1000)).then(_ns(pl.when(representable(dur * 1000)).then(dur))))
    return ev.with_columns(start_ns=_ns(pl.col("ts")), dur_ns=dur_ns).with_columns(
        end_ns=pl.when(pl.col("start_ns").abs() <= LIMIT_NS).then(pl.col("start_ns") + pl.col("dur_ns")))


def _describe(row: dict) -> str:
    name = row.get("name")
    return (f"{str(name)[:60]!r} (ph {str(row.get('ph'))[:4]!r}) at ts {fmt_value(row.get('ts'))} µs, "
            f"dur {fmt_value(row.get('dur'))} µs")


# ------------------------------------------------------------------ pairing B/E
def _pair_begin_end(ev: pl.DataFrame) -> pl.DataFrame:
    """Turn B/E pairs into complete (X-like) events: the k-th B at a stack level of a
    thread pairs with the k-th E that closes that level. Unmatched B's stay open until
    the last timestamp of the trace and are flagged unfinished."""
    be = ev.filter(pl.col("ph").is_in(["B", "E"]))
    if be.height == 0:
        return ev
    t_end = ev.select((pl.col("start_ns") + pl.col("dur_ns")).max()).item()
    be = be.with_row_index("_i").sort(["pid", "tid", "start_ns", "_i"])
    step = pl.when(pl.col("ph") == "B").then(1).otherwise(-1)
    be = be.with_columns(_after=step.cum_sum().over(["pid", "tid"]))
    be = be.with_columns(_level=pl.when(pl.col("ph") == "B").then(pl.col("_after") - 1).otherwise(pl.col("_after")))
    be = be.with_columns(_k=pl.int_range(pl.len()).over(["pid", "tid", "_level", "ph"]))
    begins = be.filter(pl.col("ph") == "B")
    ends = be.filter(pl.col("ph") == "E").select("pid", "tid", "_level", "_k", _end=pl.col("start_ns"))
    paired = begins.join(ends, on=["pid", "tid", "_level", "_k"], how="left", nulls_equal=True)
    paired = paired.with_columns(
        unfinished=pl.col("_end").is_null(),
        dur_ns=(pl.col("_end").fill_null(t_end) - pl.col("start_ns")).clip(lower_bound=0),
        ph=pl.lit("X"),
    ).select(ev.columns)
    return pl.concat([ev.filter(~pl.col("ph").is_in(["B", "E"])), paired], how="vertical_relaxed")


# ------------------------------------------------------------------ routing
def _copy_kinds(name: pl.Expr, arg_kind: pl.Expr) -> list[pl.Expr]:
    direction = name.str.extract(r"Memcpy\s+(\w+)", 1)
    return [
        pl.coalesce(direction, arg_kind).alias("copy_kind"),
        name.str.extract(r"\((\w+)\s*->", 1).alias("src_kind"),
        name.str.extract(r"->\s*(\w+)\)", 1).alias("dst_kind"),
    ]


def _gpu_ops(ev: pl.DataFrame, host: pl.DataFrame, main_pid: int | None) -> pl.DataFrame:
    g = ev.filter(pl.col("_cat").is_in(list(_GPU_KIND)))
    g = g.with_columns(kind=pl.col("_cat").replace_strict(_GPU_KIND, default="kernel"))
    mtia = pl.col("_cat") == "mtia_ccp_events"
    for pattern, kind in _MTIA_KIND:
        g = g.with_columns(kind=pl.when(mtia & pl.col("name").str.contains(pattern)).then(pl.lit(kind))
                           .otherwise("kind"))
    g = g.with_columns(
        device=pl.coalesce("device", pl.col("pid")).cast(pl.Int32),
        stream=pl.coalesce("stream", pl.col("tid")),
        *_copy_kinds(pl.col("name"), pl.col("arg_kind")),
    )
    g = g.with_columns(
        copy_kind=pl.when(pl.col("kind") == "memcpy").then("copy_kind"),
        src_kind=pl.when(pl.col("kind") == "memcpy").then("src_kind"),
        dst_kind=pl.when(pl.col("kind") == "memcpy").then("dst_kind"),
    )
    # The launching process: the runtime/driver call with the same correlation id.
    launch = (host.select("pid", "kind", "correlation")
              .filter(pl.col("kind").is_in(["runtime", "driver", "sync_api"]) & pl.col("correlation").is_not_null())
              .group_by("correlation").agg(pl.col("pid").first().alias("_host_pid")))
    g = g.join(launch, on="correlation", how="left")
    g = g.with_columns(pid=pl.coalesce("_host_pid", pl.lit(main_pid, pl.Int64)))
    g = pl.concat([g, classify(g["name"], g["kind"])], how="horizontal")
    # MTIA on-device events carry plain names (pe_exe, dma_request): the category says the device
    g = g.with_columns(library=pl.when(mtia).then(pl.lit("MTIA")).otherwise("library"))
    return g.select("pid", "device", "stream", "kind", "name", "start_ns", "end_ns", "correlation",
                    "external_id", "bytes", "copy_kind", "src_kind", "dst_kind", "grid_x", "grid_y", "grid_z",
                    "block_x", "block_y", "block_z", "registers", "category", "identity", "library",
                    *[c for c in _COLLECTIVE_ID if c in g.columns])


# Collective identity (kineto_raw.RAW_SCHEMA -> gpu_ops as is; traceq.clocks matches by it)
_COLLECTIVE_ID = ("collective", "pg_name", "pg_desc", "group_size", "seq")


def _is_region(ev: pl.DataFrame) -> pl.Expr:
    named = pl.col("name").str.contains(_STEP) | pl.col("name").str.contains(_DATALOADER)
    return pl.col("_cat").is_in(list(_REGION_CATS)) | (pl.col("_cat").is_in(["cpu_op", "operator"]) & named)


def _prepare(ev: pl.DataFrame) -> pl.DataFrame:
    """Validated ns times -> lower-cased category, B/E pairs -> complete events, end_ns."""
    ev = ev.with_columns(
        dur_ns=pl.col("end_ns") - pl.col("start_ns"),
        _cat=pl.col("cat").str.to_lowercase().fill_null(""),
    ).drop("ts", "dur", "end_ns")
    ev = _pair_begin_end(ev)
    return ev.with_columns(end_ns=pl.col("start_ns") + pl.col("dur_ns"))


def _host_ops(ev: pl.DataFrame) -> pl.DataFrame:
    """Host events (already routed: no GPU, region or Trace events) -> host_ops."""
    h = ev.select("pid", "tid", "name", "_cat", "start_ns", "end_ns", "correlation", "external_id", "unfinished")
    if h["pid"].null_count():   # pids like "Spans" are not processes
        h = h.filter(pl.col("pid").is_not_null())
    kind = pl.col("_cat").replace_strict(_HOST_KIND, default="other")
    kind = pl.when(kind.is_in(["runtime", "driver"]) & pl.col("name").str.contains(SYNC_APIS)).then(pl.lit("sync_api")).otherwise(kind)
    return h.with_columns(kind=kind).select("pid", "tid", "kind", "name", "start_ns", "end_ns", "correlation",
                                             "external_id", "unfinished")


def _regions(r: pl.DataFrame) -> pl.DataFrame:
    for col in ("device", "stream"):
        if col not in r.columns:
            r = r.with_columns(pl.lit(None, pl.Int64).alias(col))
    on_gpu = pl.col("_cat") == "gpu_user_annotation"
    source = (pl.when(pl.col("name").str.contains(_STEP)).then(pl.lit("step"))
              .when(pl.col("name").str.contains(_DATALOADER)).then(pl.lit("dataloader"))
              .otherwise(pl.lit("annotation")))
    r = r.with_columns(
        source=source,
        domain=pl.when(on_gpu).then(pl.lit("gpu")),
        step=pl.col("name").str.extract(_STEP, 1).cast(pl.Int64),
        device=pl.when(on_gpu).then(pl.coalesce("device", "pid")).cast(pl.Int32),
        stream=pl.when(on_gpu).then(pl.coalesce("stream", "tid")),
        gpu_start_ns=pl.when(on_gpu).then("start_ns"),
        gpu_end_ns=pl.when(on_gpu).then("end_ns"),
    )
    r = r.with_columns(gpu_dur_ns=pl.col("gpu_end_ns") - pl.col("gpu_start_ns"))
    cpu = r.filter(~on_gpu)
    depth = nesting_depth(cpu["pid"].fill_null(-1).to_numpy(), cpu["tid"].fill_null(-1).to_numpy(),
                          cpu["start_ns"].to_numpy(), cpu["end_ns"].to_numpy())
    cpu = cpu.with_columns(depth=pl.Series(depth, dtype=pl.Int32))
    gpu = r.filter(on_gpu).with_columns(depth=pl.lit(None, pl.Int32))
    r = pl.concat([cpu, gpu])
    return r.select("pid", "tid", "source", "name", "domain", "start_ns", "end_ns", "depth", "step", "device",
                    "stream", "gpu_start_ns", "gpu_end_ns", "gpu_dur_ns", "unfinished")


def _devices(trace: _Trace) -> list[dict]:
    out = []
    for d in (trace.deviceProperties or trace.computeProperties or []):
        out.append({"id": _to_int(d.id), "name": d.name if isinstance(d.name, str) else None,
                    "sm_count": _to_int(d.numSms if d.numSms is not None else d.multiProcessorCount),
                    "memory_bytes": _to_int(d.totalGlobalMem)})
    return out


def _no_events(n_items: int, not_objects: int, dropped: str | None, first: bytes | None) -> str:
    """Why a document with a trace event list still holds no event to store."""
    if n_items == 0:
        return "no trace events (the event list is empty)"
    if dropped:
        return f"no trace events left: {dropped}"
    if not_objects == n_items:
        return f"not a trace: a JSON list of {n_items} items, none of them a JSON object"
    keys = ""
    if first is not None:
        try:
            item = msgspec.json.decode(first, type=dict[str, msgspec.Raw])
            keys = " (the first has keys " + ", ".join(repr(k[:40]) for k in list(item)[:8]) + ")"
        except (msgspec.ValidationError, msgspec.DecodeError):
            pass
    return (f"no trace events: a list of {n_items} JSON records{keys}, none of them a trace event "
            '(an object with "ph" X, B or E and a numeric "ts")')


def _clock_offset(base, warnings: list[str]) -> int:
    if base is None or abs(base) <= LIMIT_NS:
        return int(base or 0)
    warnings.append(f"ignored baseTimeNanoseconds {fmt_value(base)}: not representable as int64 ns")
    return 0


def read(path: Path) -> Parsed:
    path = Path(path)
    raw = _open_buffer(path)
    trace, raws, warnings = _parse_outer(raw, path)
    trace.traceEvents = None
    n_events = len(raws)
    first = bytes(raws[0])[:4096] if n_events else None
    recovered = bool(warnings)   # recovered slices are copies, not views of `raw`
    frames, not_objects = _events_frames(raws, None if recovered else raw)
    del raws
    _trim_heap()
    checked, dropped = check_times(dict(zip(("host", "gpu", "region"), map(_with_ns, frames))), _describe)
    host_ev, gpu_ev, region_ev = checked.values()
    if not (host_ev.height or gpu_ev.height or region_ev.height):
        raise BadInput(_no_events(n_events, not_objects, dropped, first), path)
    if not_objects:
        warnings.append(f"skipped {not_objects} items of the event list that are not JSON objects")
    if dropped:
        warnings.append(dropped)
    paired = host_ev["ph"].is_in(["B", "E"]).any()
    host_ev, gpu_ev, region_ev = _prepare(host_ev), _prepare(gpu_ev), _prepare(region_ev)
    if paired:   # B/E pairs were completed on the host side; annotations among them are regions
        moved = _is_region(host_ev)
        region_ev = pl.concat([region_ev, host_ev.filter(moved)], how="diagonal_relaxed")
        host_ev = host_ev.filter(~moved)

    host = _host_ops(host_ev)
    del host_ev
    main_pid = None
    if host.height:
        main_pid = host.group_by("pid").len().sort("len", descending=True)["pid"][0]
    regions = _regions(region_ev)
    gpu = _gpu_ops(gpu_ev, host, main_pid)
    del gpu_ev, region_ev

    info = trace.distributedInfo or {}
    if gpu.height == 0:
        warnings.append("no GPU activity in this trace (CPU-only): GPU analyses will be empty")
    n_open = int(host["unfinished"].sum() or 0) + int(regions["unfinished"].sum() or 0)
    if n_open:
        warnings.append(f"{n_open} spans were still open when the capture ended (flagged unfinished)")
    host_name = trace.host_name if isinstance(trace.host_name, str) else trace.hostname if isinstance(trace.hostname, str) else None
    return Parsed(
        tables={"gpu_ops": gpu.to_arrow(), "host_ops": host.to_arrow(), "regions": regions.to_arrow()},
        format="kineto",
        format_version=None if trace.schemaVersion is None else str(trace.schemaVersion),
        rank=_to_int(info.get("rank")) if isinstance(info, dict) else None,
        world_size=_to_int(info.get("world_size")) if isinstance(info, dict) else None,
        host=host_name,
        devices=_devices(trace),
        clock_offset_ns=_clock_offset(trace.baseTimeNanoseconds, warnings),
        warnings=warnings,
    )
