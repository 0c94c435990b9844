"""traceq's own timer log: the JSONL written by `traceq.timer`.

`read_log(path)` translates the log (format described in `traceq.timer`) into `regions` rows
with source "timer": name = the key, start_ns/end_ns = the
region's perf_counter times moved to the epoch clock with the header's anchor
(`t - perf_ns + epoch_ns`, so `clock_offset_ns` is 0), pid/tid, gpu_dur_ns from the CUDA
events when the region was timed on the GPU (device = that process's GPU), and depth = how
many other timer regions of the same thread are open when the region starts (0 = outermost).
Only whitelisted header facts (host, rank, world size, devices, format version) leave this
module; whatever else a header holds is never stored. A last line cut short by a crash is
skipped with a warning; anything else malformed raises BadInput.
"""
from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from ...errors import BadInput
from ..common import Parsed, nesting_depth, read_bytes

LOG_FORMAT_VERSION = 1   # newest traceq.timer log version this reader understands

_LOG_SCHEMA = pa.schema([
    # region records
    ("key", pa.string()), ("start_ns", pa.int64()), ("end_ns", pa.int64()), ("pid", pa.int64()),
    ("tid", pa.int64()), ("gpu", pa.int64()),
    # GPU duration records (linked to a region by pid + gpu id)
    ("gpu_id", pa.int64()), ("gpu_dur_ns", pa.int64()),
    # GPU info records
    ("gpu_timing", pa.string()), ("device_index", pa.int64()), ("device_name", pa.string()),
    ("sm_count", pa.int64()), ("memory_bytes", pa.int64()),
])


# ------------------------------------------------------------------------------- JSONL
def read_log(path: str | Path) -> Parsed:
    """A `traceq.timer` JSONL log -> `regions` rows (source "timer").

    Records are parsed by Arrow's JSON reader and joined/sorted with numpy. (Not polars on
    purpose: `ingest()` parses files in forked workers, and polars' thread pool, once used in
    the parent, deadlocks in a forked child; Arrow re-creates its pool after fork.)
    """
    path = Path(path)
    data = read_bytes(path)
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if not data or data.isspace():
        raise BadInput("empty file", path)
    nl = data.find(b"\n")
    header = _parse_header(data if nl < 0 else data[:nl], path)
    version = header["traceq_timer"]
    epoch_ns, perf_ns = header["epoch_ns"], header["perf_ns"]
    body = b"" if nl < 0 else data[nl + 1:]
    warnings: list[str] = []

    if body and not body.endswith(b"\n"):
        cut = body.rfind(b"\n") + 1
        tail = body[cut:]
        if tail and not tail.isspace():
            try:
                json.loads(tail)
                body += b"\n"              # a whole record that only lacks its newline
            except ValueError:
                body = body[:cut]
                warnings.append(f"last line is truncated (the writer stopped mid-record); skipped "
                                f"{len(tail)} bytes")

    if body and not body.isspace():
        try:
            recs = pa_json.read_json(
                io.BytesIO(body),
                read_options=pa_json.ReadOptions(use_threads=False, block_size=1 << 24),
                parse_options=pa_json.ParseOptions(explicit_schema=_LOG_SCHEMA,
                                                   unexpected_field_behavior="ignore"))
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:   # Arrow does not say which line: find it
            raise BadInput(_locate_bad_line(body, exc), path) from None
    else:
        recs = _LOG_SCHEMA.empty_table()
    col = {name: recs.column(name) for name in _LOG_SCHEMA.names}
    is_region = col["key"].is_valid().to_numpy(zero_copy_only=False)
    is_gpu = col["gpu_id"].is_valid().to_numpy(zero_copy_only=False) & ~is_region
    is_info = col["gpu_timing"].is_valid().to_numpy(zero_copy_only=False) & ~is_region & ~is_gpu
    n_other = recs.num_rows - int(is_region.sum() + is_gpu.sum() + is_info.sum())
    if n_other:
        warnings.append(f"{n_other} records of unknown kind ignored")

    regions = recs.filter(pa.array(is_region)).select(["key", "start_ns", "end_ns", "pid", "tid", "gpu"])
    for name in ("start_ns", "end_ns", "pid", "tid"):
        if regions.column(name).null_count:
            raise BadInput("a region record lacks start_ns, end_ns, pid or tid", path)
    start = _np(regions, "start_ns")
    end = _np(regions, "end_ns")
    pid = _np(regions, "pid")
    tid = _np(regions, "tid")
    if (end < start).any():
        raise BadInput("a region record ends before it starts (end_ns < start_ns)", path)

    # GPU durations: region (pid, gpu) -> duration record (pid, gpu_id); the last one wins
    gpu_recs = recs.filter(pa.array(is_gpu))
    if gpu_recs.column("gpu_dur_ns").null_count or gpu_recs.column("pid").null_count:
        raise BadInput("a gpu_id record lacks gpu_dur_ns or pid", path)
    gpu = regions.column("gpu")
    has_gpu = gpu.is_valid().to_numpy(zero_copy_only=False)
    gpu_id = gpu.fill_null(-1).to_numpy()
    gpu_dur = _lookup(pid, gpu_id, has_gpu, _np(gpu_recs, "pid"), _np(gpu_recs, "gpu_id"),
                      _np(gpu_recs, "gpu_dur_ns"))
    n_unresolved = int((has_gpu & (gpu_dur < 0)).sum())
    if n_unresolved:
        warnings.append(f"{n_unresolved} GPU-timed regions have no GPU duration (the process ended "
                        "before complete_all() resolved their CUDA events)")

    # the GPU of each process that timed on one (from its gpu_timing record)
    info = recs.filter(pa.array(is_info))
    cuda_mask = pc.equal(info.column("gpu_timing"), "cuda_events").fill_null(False)
    cuda = info.filter(cuda_mask).filter(pc.is_valid(info.filter(cuda_mask).column("pid")))
    dev_idx = cuda.column("device_index").fill_null(-1).to_numpy()
    device = _lookup(pid, np.zeros_like(pid), has_gpu, _np(cuda, "pid"), np.zeros(cuda.num_rows, np.int64),
                     dev_idx)

    offset = epoch_ns - perf_ns
    start = start + offset
    end = end + offset
    depth = nesting_depth(pid, tid, start, end)
    order = np.lexsort((depth, tid, pid, start))
    n = len(order)
    if not n:
        warnings.append("the log holds no completed regions")
    table = pa.table({
        "pid": pa.array(pid[order]),
        "tid": pa.array(tid[order]),
        "source": pa.repeat(pa.scalar("timer", pa.string()), n),
        "name": regions.column("key").take(pa.array(order)),
        "start_ns": pa.array(start[order]),
        "end_ns": pa.array(end[order]),
        "depth": pa.array(depth[order], pa.int32()),
        "device": pa.array(device[order], pa.int32(), mask=device[order] < 0),
        "gpu_dur_ns": pa.array(gpu_dur[order], pa.int64(), mask=gpu_dur[order] < 0),
        "unfinished": pa.array(np.zeros(n, bool)),
    })

    devices, seen = [], set()
    for r in cuda.select(["device_index", "device_name", "sm_count", "memory_bytes"]).to_pylist():
        ident = (r["device_index"], r["device_name"])
        if ident not in seen:   # one row per process at most: a handful
            seen.add(ident)
            devices.append({"id": r["device_index"], "name": r["device_name"], "sm_count": r["sm_count"],
                            "memory_bytes": r["memory_bytes"]})
    return Parsed(
        tables={"regions": table},
        format="timer_log",
        format_version=str(version),
        rank=_opt_int(header.get("rank")),
        world_size=_opt_int(header.get("world_size")),
        host=header["host"] if isinstance(header.get("host"), str) else None,
        devices=devices,
        clock_offset_ns=0,
        warnings=warnings,
    )


def _np(table: pa.Table, name: str) -> np.ndarray:
    return table.column(name).to_numpy().astype(np.int64, copy=False)


def _lookup(a: np.ndarray, b: np.ndarray, want: np.ndarray,
            ref_a: np.ndarray, ref_b: np.ndarray, ref_value: np.ndarray) -> np.ndarray:
    """For rows where `want`, the ref_value of the last ref row with (ref_a, ref_b) == (a, b); else -1."""
    out = np.full(len(a), -1, np.int64)
    if not len(ref_a) or not want.any():
        return out
    ref = np.stack([ref_a, ref_b], axis=1)
    last = np.lexsort((np.arange(len(ref_a)), ref_b, ref_a))            # by key, then file order
    ref_s = ref[last]
    keep = np.r_[(ref_s[1:] != ref_s[:-1]).any(axis=1), True]          # last row of each key
    keys, values = ref_s[keep], ref_value[last][keep]
    # binary search on the composite key: rank a row's key among the ref keys
    keys_v = np.ascontiguousarray(keys).view([("a", np.int64), ("b", np.int64)]).ravel()
    q = np.ascontiguousarray(np.stack([a, b], axis=1)).view([("a", np.int64), ("b", np.int64)]).ravel()
    pos = np.searchsorted(keys_v, q)
    found = want & (pos < len(keys_v))
    found[found] &= keys_v[pos[found]] == q[found]
    out[found] = values[pos[found]]
    return out

def _parse_header(line: bytes, path: Path) -> dict:
    not_log = 'not a traceq timer log (the first line is not a {"traceq_timer": ...} header)'
    try:
        header = json.loads(line)
    except ValueError:
        raise BadInput(not_log, path) from None
    if not isinstance(header, dict) or "traceq_timer" not in header:
        raise BadInput(not_log, path)
    version = header["traceq_timer"]
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BadInput(f"timer log header: bad format version {version!r}", path)
    if version > LOG_FORMAT_VERSION:
        raise BadInput(f"timer log format version {version} is newer than this traceq reads "
                       f"({LOG_FORMAT_VERSION}); upgrade traceq", path)
    for k in ("epoch_ns", "perf_ns"):
        v = header.get(k)
        if not isinstance(v, int) or isinstance(v, bool):
            raise BadInput(f"timer log header: missing the clock anchor {k!r} (an integer)", path)
    return header


def _locate_bad_line(body: bytes, exc: Exception) -> str:
    """Error path only: name the first line of the body that is not a valid record."""
    for n, line in enumerate(body.split(b"\n"), start=2):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            return f"line {n}: not a JSON record"
        if not isinstance(obj, dict):
            return f"line {n}: not a JSON object"
        for field in _LOG_SCHEMA:
            k, v = field.name, obj.get(field.name)
            if v is None:
                continue
            if field.type == pa.string() and not isinstance(v, str):
                return f"line {n}: {k} is not a string ({v!r})"
            if field.type == pa.int64() and (not isinstance(v, int) or isinstance(v, bool) or not -2**63 <= v < 2**63):
                return f"line {n}: {k} is not a 64-bit integer ({v!r})"
    return f"cannot read the records ({str(exc).splitlines()[0][:200]})"


def _opt_int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None
