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

import polars as pl
import pyarrow as pa

from ..errors import BadInput
from .common import Parsed

LOG_FORMAT_VERSION = 1   # newest traceq.timer log version this reader understands

_LOG_SCHEMA = {
    # region records
    "key": pl.String, "start_ns": pl.Int64, "end_ns": pl.Int64, "pid": pl.Int64, "tid": pl.Int64,
    "gpu": pl.Int64,
    # GPU duration records (linked to a region by pid + gpu id)
    "gpu_id": pl.Int64, "gpu_dur_ns": pl.Int64,
    # GPU info records
    "gpu_timing": pl.String, "device_index": pl.Int64, "device_name": pl.String,
    "sm_count": pl.Int64, "memory_bytes": pl.Int64,
}


# ------------------------------------------------------------------------------- JSONL
def read_log(path: str | Path) -> Parsed:
    """A `traceq.timer` JSONL log -> `regions` rows (source "timer")."""
    path = Path(path)
    data = _read_bytes(path)
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if not data.strip():
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
        if tail.strip():
            try:
                json.loads(tail)
                body += b"\n"              # a whole record that only lacks its newline
            except ValueError:
                body = body[:cut]
                warnings.append(f"last line is truncated (the writer stopped mid-record); skipped "
                                f"{len(tail)} bytes")

    try:
        df = pl.read_ndjson(io.BytesIO(body), schema=_LOG_SCHEMA) if body.strip() else \
            pl.DataFrame(schema=_LOG_SCHEMA)
    except Exception as exc:   # polars does not say which line: find it
        raise BadInput(_locate_bad_line(body, exc), path) from None

    regions = df.filter(pl.col("key").is_not_null())
    gpu_durs = df.filter(pl.col("gpu_id").is_not_null())
    infos = df.filter(pl.col("gpu_timing").is_not_null())
    n_other = df.height - regions.height - gpu_durs.height - infos.height
    if n_other:
        warnings.append(f"{n_other} records of unknown kind ignored")

    missing = regions.select(pl.any_horizontal(pl.col("start_ns", "end_ns", "pid", "tid").is_null()))
    if missing.height and missing.to_series().any():
        raise BadInput("a region record lacks start_ns, end_ns, pid or tid", path)
    if regions.height and (regions["end_ns"] < regions["start_ns"]).any():
        raise BadInput("a region record ends before it starts (end_ns < start_ns)", path)
    if gpu_durs["gpu_dur_ns"].null_count():
        raise BadInput("a gpu_id record lacks gpu_dur_ns", path)

    # GPU durations, and the device that timed them (per process)
    gpu_durs = gpu_durs.select("pid", pl.col("gpu_id").alias("gpu"), "gpu_dur_ns").unique(
        ["pid", "gpu"], keep="last", maintain_order=True)
    cuda = infos.filter(pl.col("gpu_timing") == "cuda_events")
    proc_dev = cuda.select("pid", pl.col("device_index").cast(pl.Int32).alias("device")).unique(
        "pid", keep="last")
    regions = (
        regions.select("key", "start_ns", "end_ns", "pid", "tid", "gpu")
        .join(gpu_durs, on=["pid", "gpu"], how="left")
        .join(proc_dev, on="pid", how="left")
    )
    n_unresolved = regions.filter(pl.col("gpu").is_not_null() & pl.col("gpu_dur_ns").is_null()).height
    if n_unresolved:
        warnings.append(f"{n_unresolved} GPU-timed regions have no GPU duration (the process ended "
                        "before complete_all() resolved their CUDA events)")

    offset = epoch_ns - perf_ns
    regions = regions.with_columns(
        (pl.col("start_ns") + offset).alias("start_ns"),
        (pl.col("end_ns") + offset).alias("end_ns"),
        pl.when(pl.col("gpu").is_not_null()).then(pl.col("device")).otherwise(None).alias("device"),
    )
    regions = regions.with_columns(_depth(regions)).sort(["start_ns", "pid", "tid", "depth"])
    if not regions.height:
        warnings.append("the log holds no completed regions")
    table = regions.select(
        "pid", "tid",
        pl.lit("timer").alias("source"),
        pl.col("key").alias("name"),
        "start_ns", "end_ns", "depth", "device", "gpu_dur_ns",
        pl.lit(False).alias("unfinished"),
    ).to_arrow()

    devices = [
        {"id": r["device_index"], "name": r["device_name"], "sm_count": r["sm_count"],
         "memory_bytes": r["memory_bytes"]}
        for r in cuda.unique(["device_index", "device_name"], maintain_order=True).iter_rows(named=True)
    ]
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


def _depth(regions: pl.DataFrame) -> pl.Expr | pl.Series:
    """Nesting level of each region on its thread, by a sort-and-sweep (no Python loop).

    Each region gives a +1 event at its start and a -1 event at its end; events are sorted per
    (pid, tid) by time with ends before starts at equal times (adjacent regions do not nest),
    longer regions first among equal starts (the parent opens first), and the ends of
    zero-length regions last. The running sum at a region's start event, minus one, is the
    number of regions still open around it.
    """
    if not regions.height:
        return pl.Series("depth", [], dtype=pl.Int32)
    r = regions.select("pid", "tid", "start_ns", "end_ns").with_row_index("i")
    zero = pl.col("end_ns") == pl.col("start_ns")
    opens = r.select("i", "pid", "tid", pl.col("start_ns").alias("t"), pl.lit(1, pl.Int8).alias("order"),
                     (-pl.col("end_ns")).alias("tie"), pl.lit(1, pl.Int32).alias("delta"))
    closes = r.select("i", "pid", "tid", pl.col("end_ns").alias("t"),
                      pl.when(zero).then(2).otherwise(0).cast(pl.Int8).alias("order"),
                      pl.lit(0, pl.Int64).alias("tie"), pl.lit(-1, pl.Int32).alias("delta"))
    ev = (pl.concat([opens, closes])
          .sort(["pid", "tid", "t", "order", "tie", "i"])
          .with_columns(pl.col("delta").cum_sum().over(["pid", "tid"]).alias("level")))
    depth = (ev.filter(pl.col("delta") == 1).sort("i")
             .select((pl.col("level") - 1).clip(lower_bound=0).cast(pl.Int32).alias("depth")))
    return depth.to_series()


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
        for k, typ in _LOG_SCHEMA.items():
            v = obj.get(k)
            if v is None:
                continue
            if typ == pl.Int64 and (not isinstance(v, int) or isinstance(v, bool) or not -2**63 <= v < 2**63):
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
