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

Hostile input: invalid UTF-8 is replaced by U+FFFD (counted in a warning); a line nested
deeper than 64 levels is refused before it is decoded; header clock anchors beyond int64
refuse the file, a record with an integer beyond int64 (or whose times leave int64 on the
epoch clock) is skipped and counted. The log is streamed: memory does not grow with its size.
"""
from __future__ import annotations

import io
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from ...errors import BadInput
from ..common import Collected, Parsed
from ..safe_text import MAX_DEPTH, TooDeep, check_utf8, clean_text, json_depth, loads_capped, repair_utf8

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
CHUNK_BYTES = 16 << 20     # the log is read this much at a time (at line boundaries)
MAX_LINE_BYTES = 16 << 20  # a longer line is no timer record
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def read_log(path: str | Path, workdir: str | Path | None = None) -> Parsed:
    """A `traceq.timer` JSONL log -> `regions` rows (source "timer").

    Streams: the log is read CHUNK_BYTES at a time; each chunk's records are parsed by Arrow's
    JSON reader, checked and written as Parquet parts in `workdir` (a scratch folder its
    caller removes); `Parsed.fill` then orders them and computes depth, GPU durations and
    devices (`log_order`: in memory up to 2^20 records, out of core beyond). Memory stays
    bounded at any log size. Without
    `workdir` (tests, tools) a temporary folder is used and the table comes back in
    `Parsed.tables`. (Not polars on purpose: `ingest()` parses files in forked workers, and
    polars' thread pool, once used in the parent, deadlocks in a forked child.)
    """
    path = Path(path)
    if workdir is None:
        return _read_in_memory(path)
    workdir = Path(workdir)
    try:
        f = open(path, "rb")
    except IsADirectoryError:
        raise BadInput("is a directory", path) from None
    except OSError as exc:
        raise BadInput(exc.strerror or str(exc), path) from None
    with f:
        scan = _Scan(path, workdir)
        header = scan.header(f)
        scan.body(f, header["epoch_ns"] - header["perf_ns"])
    warnings = scan.warnings
    parsed = Parsed(
        tables={},
        format="timer_log",
        format_version=str(header["traceq_timer"]),
        rank=_opt_int(header.get("rank")),
        world_size=_opt_int(header.get("world_size")),
        host=clean_text(header["host"]) if isinstance(header.get("host"), str) else None,
        devices=scan.devices,
        clock_offset_ns=0,
        warnings=warnings,
    )

    def fill(open_table) -> None:
        from .log_order import write_regions

        write_regions(scan.parts, workdir, open_table("regions"), warnings)

    parsed.fill = fill
    return parsed


class _Scan:
    """The first pass: header, then the body chunk by chunk into Parquet parts."""

    def __init__(self, path: Path, workdir: Path):
        self.path, self.workdir = path, workdir
        self.warnings: list[str] = []
        self.devices: list[dict] = []
        self.n_replaced = self.n_other = self.n_range = self.n_records = 0
        self.parts: dict[str, Path] = {}
        self._seen: set = set()

    def fail(self, problem: str):
        return BadInput(problem, self.path)

    def header(self, f) -> dict:
        first = f.readline(MAX_LINE_BYTES)
        if first.startswith(b"\xef\xbb\xbf"):
            first = first[3:]
        if not first or (first.isspace() and not f.read(1)):
            raise self.fail("empty file")
        if not first.endswith(b"\n") and len(first) >= MAX_LINE_BYTES:
            raise self.fail(f"line 1: longer than {MAX_LINE_BYTES >> 20} MB (not a timer log header)")
        first, n = repair_utf8(first)
        self.n_replaced += n
        return _parse_header(first, self.path)

    def body(self, f, offset: int) -> None:
        import pyarrow.parquet as pq

        from .log_order import PARTS

        writers = {}
        try:
            for name, schema in PARTS.items():
                self.parts[name] = self.workdir / f"timer_{name}.parquet"
                writers[name] = pq.ParquetWriter(self.parts[name], schema)
            line_no, carry = 2, b""
            while True:
                block = f.read(CHUNK_BYTES)
                data = carry + block if carry else block
                if block:
                    cut = data.rfind(b"\n") + 1
                    if not cut:
                        if len(data) > MAX_LINE_BYTES:
                            raise self.fail(f"line {line_no}: longer than {MAX_LINE_BYTES >> 20} MB "
                                            "(not a timer record)")
                        carry = data
                        continue
                    chunk, carry = data[:cut], data[cut:]
                else:
                    chunk, carry = self._last(data, line_no), b""
                if chunk and not chunk.isspace():
                    self._chunk(chunk, line_no, offset, writers)
                line_no += chunk.count(b"\n")
                if not block:
                    break
        finally:
            for w in writers.values():
                w.close()
        if self.n_other:
            self.warnings.append(f"{self.n_other} records of unknown kind ignored")
        if self.n_range:
            self.warnings.append(f"{self.n_range} records skipped: an integer out of range (beyond "
                                 "int64, or start_ns/end_ns past it on the epoch clock)")
        if self.n_replaced:
            self.warnings.append(f"{self.n_replaced} invalid UTF-8 sequence(s) replaced by U+FFFD")

    def _last(self, data: bytes, line_no: int) -> bytes:
        """The file's last chunk: a last line cut short (no newline, not JSON) is skipped."""
        if not data or data.endswith(b"\n"):
            return data
        cut = data.rfind(b"\n") + 1
        tail = data[cut:]
        if tail.isspace():
            return data
        try:
            loads_capped(repair_utf8(tail)[0])
            return data + b"\n"              # a whole record that only lacks its newline
        except ValueError:
            self.warnings.append(f"last line is truncated (the writer stopped mid-record); skipped "
                                 f"{len(tail)} bytes")
            return data[:cut]

    def _chunk(self, chunk: bytes, line_no: int, offset: int, writers) -> None:
        chunk, n = repair_utf8(chunk)
        self.n_replaced += n
        deep = _deep_lines(chunk)
        if deep:
            raise self.fail(f"line {line_no + deep[0]}: nested deeper than {MAX_DEPTH} levels")
        try:
            recs = _parse(chunk)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:   # Arrow does not say which line: find it
            skip = _bad_lines(chunk, line_no, exc, self.path)
            self.n_range += len(skip)
            lines = chunk.split(b"\n")
            for i in skip:
                lines[i] = b""
            recs = _parse(b"\n".join(lines))
        self._records(recs, offset, writers)

    def _records(self, recs: pa.Table, offset: int, writers) -> None:
        col = {name: recs.column(name) for name in _LOG_SCHEMA.names}
        is_region = col["key"].is_valid().to_numpy(zero_copy_only=False)
        is_gpu = col["gpu_id"].is_valid().to_numpy(zero_copy_only=False) & ~is_region
        is_info = col["gpu_timing"].is_valid().to_numpy(zero_copy_only=False) & ~is_region & ~is_gpu
        self.n_other += recs.num_rows - int(is_region.sum() + is_gpu.sum() + is_info.sum())
        idx = np.arange(self.n_records, self.n_records + recs.num_rows, dtype=np.int64)
        self.n_records += recs.num_rows

        regions = recs.filter(pa.array(is_region)).select(["key", "start_ns", "end_ns", "pid", "tid", "gpu"])
        for name in ("start_ns", "end_ns", "pid", "tid"):
            if regions.column(name).null_count:
                raise self.fail("a region record lacks start_ns, end_ns, pid or tid")
        start, end = _np(regions, "start_ns"), _np(regions, "end_ns")
        if (end < start).any():
            raise self.fail("a region record ends before it starts (end_ns < start_ns)")
        # on the epoch clock (t + offset) the times must stay int64: exact bounds, no wrap
        lo, hi = max(INT64_MIN, INT64_MIN - offset), min(INT64_MAX, INT64_MAX - offset)
        ok = (start >= lo) & (end <= hi)
        if not ok.all():
            self.n_range += int((~ok).sum())
            regions, start, end = regions.filter(pa.array(ok)), start[ok], end[ok]
        check_utf8(regions.select(["key"]), f"{self.path}: timer regions")
        writers["regions"].write_table(pa.table({
            "idx": idx[is_region][ok] if not ok.all() else idx[is_region], "key": regions.column("key"),
            "start_ns": start + offset, "end_ns": end + offset, "pid": regions.column("pid"),
            "tid": regions.column("tid"), "gpu": regions.column("gpu")}, schema=writers["regions"].schema))

        gpu = recs.filter(pa.array(is_gpu))
        if gpu.column("gpu_dur_ns").null_count or gpu.column("pid").null_count:
            raise self.fail("a gpu_id record lacks gpu_dur_ns or pid")
        writers["gpu"].write_table(pa.table({
            "idx": idx[is_gpu], "pid": gpu.column("pid"), "gpu_id": gpu.column("gpu_id"),
            "gpu_dur_ns": gpu.column("gpu_dur_ns")}, schema=writers["gpu"].schema))

        # the GPU of each process that timed on one (from its gpu_timing record)
        info = recs.filter(pa.array(is_info))
        cuda_mask = pc.and_(pc.equal(info.column("gpu_timing"), "cuda_events").fill_null(False),
                            info.column("pid").is_valid())
        cuda = info.filter(cuda_mask)
        writers["device"].write_table(pa.table({
            "idx": idx[is_info][cuda_mask.to_numpy(zero_copy_only=False)], "pid": cuda.column("pid"),
            "device_index": cuda.column("device_index")}, schema=writers["device"].schema))
        for r in cuda.select(["device_index", "device_name", "sm_count", "memory_bytes"]).to_pylist():
            ident = (r["device_index"], r["device_name"])
            if ident not in self._seen:   # one row per process at most: a handful
                self._seen.add(ident)
                self.devices.append({"id": r["device_index"], "name": r["device_name"],
                                     "sm_count": r["sm_count"], "memory_bytes": r["memory_bytes"]})


def _parse(chunk: bytes) -> pa.Table:
    return pa_json.read_json(
        io.BytesIO(chunk),
        read_options=pa_json.ReadOptions(use_threads=False, block_size=1 << 24),
        parse_options=pa_json.ParseOptions(explicit_schema=_LOG_SCHEMA, unexpected_field_behavior="ignore"))


def _deep_lines(chunk: bytes) -> list[int]:
    """Indexes of the chunk's lines nested deeper than MAX_DEPTH. Cheap for sane records: only a
    line with more than MAX_DEPTH opening brackets is measured (`json_depth`)."""
    a = np.frombuffer(chunk, np.uint8)
    opens = np.flatnonzero((a == ord("[")) | (a == ord("{")))
    if len(opens) <= MAX_DEPTH:
        return []
    newlines = np.flatnonzero(a == ord("\n"))
    per_line = np.bincount(np.searchsorted(newlines, opens), minlength=len(newlines) + 1)
    out = []
    for i in np.flatnonzero(per_line > MAX_DEPTH):
        lo = newlines[i - 1] + 1 if i else 0
        hi = newlines[i] if i < len(newlines) else len(chunk)
        if json_depth(chunk[lo:hi]) > MAX_DEPTH:
            out.append(int(i))
    return out


def _read_in_memory(path: Path) -> Parsed:
    from .log_order import OUT_SCHEMA

    tmp = Path(tempfile.mkdtemp(prefix="traceq-timer-"))
    try:
        parsed = read_log(path, tmp)
        out = Collected()
        parsed.fill(lambda table: out)
        parsed.tables = {"regions": pa.concat_tables(out.pieces) if out.pieces else OUT_SCHEMA.empty_table()}
        parsed.fill = None
        return parsed
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _np(table: pa.Table, name: str) -> np.ndarray:
    return table.column(name).to_numpy().astype(np.int64, copy=False)


def _parse_header(line: bytes, path: Path) -> dict:
    not_log = 'not a traceq timer log (the first line is not a {"traceq_timer": ...} header)'
    try:
        header = loads_capped(line)
    except TooDeep as exc:
        raise BadInput(f"line 1: {exc} (not a timer log header)", path) from None
    except ValueError:
        raise BadInput(not_log, path) from None
    if not isinstance(header, dict) or "traceq_timer" not in header:
        raise BadInput(not_log, path)
    version = header["traceq_timer"]
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BadInput(f"timer log header: bad format version {_short(version)}", path)
    if version > LOG_FORMAT_VERSION:
        raise BadInput(f"timer log format version {_short(version)} is newer than this traceq reads "
                       f"({LOG_FORMAT_VERSION}); upgrade traceq", path)
    for k in ("epoch_ns", "perf_ns"):
        v = header.get(k)
        if not isinstance(v, int) or isinstance(v, bool):
            raise BadInput(f"timer log header: missing the clock anchor {k!r} (an integer)", path)
        if not INT64_MIN <= v <= INT64_MAX:
            raise BadInput(f"line 1: timer log header: {k} {_short(v)} is out of the int64 range", path)
    if not INT64_MIN <= header["epoch_ns"] - header["perf_ns"] <= INT64_MAX:
        raise BadInput("line 1: timer log header: epoch_ns - perf_ns (the clock offset) is out of "
                       "the int64 range", path)
    return header


def _short(v) -> str:
    """A value for a one-line message (an int of 5,000 digits has no repr in Python 3.11+)."""
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10 ** 30:
        return ("-" if v < 0 else "") + "a " + str(v.bit_length()) + "-bit integer"
    return repr(v)[:60]


_INT_FIELDS = [f.name for f in _LOG_SCHEMA if f.type == pa.int64()]


def _bad_lines(chunk: bytes, line_no: int, exc: Exception, path: Path) -> list[int]:
    """Error path only: the chunk's lines (indexes) to skip, records with an integer beyond
    int64; raises BadInput naming the first line that is no valid record otherwise."""
    skip = []
    for i, line in enumerate(chunk.split(b"\n")):
        if not line.strip():
            continue
        n = line_no + i
        try:
            obj = loads_capped(line)
        except ValueError:
            raise BadInput(f"line {n}: not a JSON record", path) from None
        if not isinstance(obj, dict):
            raise BadInput(f"line {n}: not a JSON object", path)
        for field in _LOG_SCHEMA:
            k, v = field.name, obj.get(field.name)
            if v is None:
                continue
            if field.type == pa.string():
                if not isinstance(v, str):
                    raise BadInput(f"line {n}: {k} is not a string ({_short(v)})", path)
                if any("\ud800" <= c <= "\udfff" for c in v):
                    raise BadInput(f"line {n}: {k} holds an unpaired surrogate escape", path)
            elif not isinstance(v, int) or isinstance(v, bool):
                raise BadInput(f"line {n}: {k} is not a 64-bit integer ({_short(v)})", path)
        if any(isinstance(obj.get(k), int) and not INT64_MIN <= obj[k] <= INT64_MAX for k in _INT_FIELDS):
            skip.append(i)
    if not skip:
        raise BadInput(f"cannot read the records ({str(exc).splitlines()[0][:200]})", path)
    return skip


def _opt_int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None
