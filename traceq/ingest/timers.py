"""Ingest timer logs (DESIGN §3): traceq's own JSONL log and Deep500 `print_all_time_stats` text.

`read_log(path)` translates the JSONL log written by `traceq.timer` (format described in that
module) into `regions` rows with source "timer": name = the key, start_ns/end_ns = the
region's perf_counter times moved to the epoch clock with the header's anchor
(`t - perf_ns + epoch_ns`, so `clock_offset_ns` is 0), pid/tid, gpu_dur_ns from the CUDA
events when the region was timed on the GPU (device = that process's GPU), and depth = how
many other timer regions of the same thread are open when the region starts (0 = outermost).
Only whitelisted header facts (host, rank, world size, devices, format version) leave this
module; whatever else a header holds is never stored. A last line cut short by a crash is
skipped with a warning; anything else malformed raises BadInput.

`read_stats(path)` parses the text of Deep500's `print_all_time_stats` / `save_all_time_stats`
(plain `Timer`: one section ending in `---`; `CPUGPUTimer`: `CPU` and `GPU` sections) into
`timer_stats` rows (key, clock cpu|gpu, min/mean/median/max/stdev in seconds).
"""
from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from ..errors import BadInput
from .common import Parsed, nesting_depth

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
    data = _read_bytes(path)
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


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except IsADirectoryError:
        raise BadInput("is a directory", path) from None
    except OSError as exc:
        raise BadInput(exc.strerror or str(exc), path) from None


# ------------------------------------------------------------------------ Deep500 text
_NUM = r"(\S+)"
_STATS_LINE = re.compile(rf"^min:\s*{_NUM}\s+mean:\s*{_NUM}\s+median:\s*{_NUM}\s+max:\s*{_NUM}\s+stdev:\s*{_NUM}$")
_FIELDS = ("min_s", "mean_s", "median_s", "max_s", "stdev_s")


def read_stats(path: str | Path) -> Parsed:
    """Deep500 `print_all_time_stats` text -> `timer_stats` rows (one per key and clock).

    Grammar (blank lines ignored): a key line is any line followed by a stats line
    `min: x mean: x median: x max: x stdev: x`; `CPU` / `GPU` lines open a clock section
    (CPUGPUTimer); `---` closes a section. A plain Timer's section is the CPU clock. When a key
    appears more than once on a clock (stats printed repeatedly), the last one is kept.
    """
    path = Path(path)
    raw = _read_bytes(path)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BadInput("not a Deep500 stats file (not UTF-8 text)", path) from None
    lines = [(n, s.strip()) for n, s in enumerate(text.splitlines(), start=1) if s.strip()]
    if not lines:
        raise BadInput("empty file", path)
    truncated_tail = not text.endswith(("\n", "\r"))
    warnings: list[str] = []
    rows: dict[tuple[str, str], tuple] = {}
    repeated = 0
    clock = "cpu"
    closed = True
    i = 0
    while i < len(lines):
        n, line = lines[i]
        nxt = lines[i + 1][1] if i + 1 < len(lines) else None
        if line.startswith("min:"):
            if i == len(lines) - 1 and truncated_tail and not _STATS_LINE.match(line):
                warnings.append(f"line {n}: truncated stats line skipped (the file ends mid-line)")
                break
            raise BadInput(f"line {n}: stats line without a key line before it", path)
        if line == "---":
            closed = True
            i += 1
            continue
        if nxt is not None and nxt.startswith("min:"):
            m = _STATS_LINE.match(nxt)
            if m is None:
                if i + 1 == len(lines) - 1 and truncated_tail:
                    warnings.append(f"line {lines[i + 1][0]}: truncated stats line of key {line!r} skipped "
                                    "(the file ends mid-line)")
                    break
                raise BadInput(f"line {lines[i + 1][0]}: expected 'min: x mean: x median: x max: x "
                               "stdev: x'", path)
            values = []
            for field, s in zip(_FIELDS, m.groups()):
                try:
                    values.append(float(s))
                except ValueError:
                    raise BadInput(f"line {lines[i + 1][0]}: {field[:-2]} value {s!r} is not a number",
                                   path) from None
            if (line, clock) in rows:
                repeated += 1
                del rows[(line, clock)]
            rows[(line, clock)] = tuple(values)
            closed = False
            i += 2
            continue
        if line in ("CPU", "GPU"):
            clock = line.lower()
            closed = False
            i += 1
            continue
        if nxt is None:
            warnings.append(f"line {n}: key {line!r} has no stats line (file truncated?); skipped")
            closed = True
            break
        raise BadInput(f"line {n}: unexpected {line[:60]!r} (expected CPU, GPU, a key line followed by "
                       "its 'min: .. stdev: ..' line, or ---)", path)
    if not closed:
        warnings.append("the last section has no closing '---' (file truncated?)")
    if repeated:
        warnings.append(f"{repeated} key stats appear more than once (stats printed repeatedly?); "
                        "kept the last of each")
    if not rows:
        warnings.append("the file holds no key statistics")
    keys = [k for k, _ in rows]
    clocks = [c for _, c in rows]
    cols = list(zip(*rows.values())) if rows else [[] for _ in _FIELDS]
    table = pa.table({
        "key": pa.array(keys, pa.string()),
        "clock": pa.array(clocks, pa.string()),
        **{f: pa.array(list(c), pa.float64()) for f, c in zip(_FIELDS, cols)},
    })
    return Parsed(tables={"timer_stats": table}, format="deep500_stats", warnings=warnings)
