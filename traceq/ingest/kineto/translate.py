"""Kineto raw parts -> the canonical tables gpu_ops, host_ops and regions, in bounded memory.

Reads the raw event relation (`raw`) that decoding wrote and writes the tables through
`open_table(name).write(arrow_table)` (the store's staging files, see `Store.stage`), chunk by
chunk of `TCHUNK` rows, in file order (the work on each chunk: `tables`). Only small global
facts are held in memory:

1. a first pass finds the trace's span (`validate.bounds_of`: the start times of the sane
   events, 8 bytes each) and whether any host B/E event survives validation, from the facts
   the decoders saved beside the raw parts (`raw.SpanFacts`);
2. the main pass routes each chunk into host, GPU and region events (by category, as
   torch.profiler writes them), converts times to ns, drops invalid times (one warning, one
   example), writes host_ops, and keeps the correlation -> launching pid map of the runtime
   calls, the host event count per pid, the GPU events (to a scratch file), the B/E events
   (paired at the end: they need their whole thread) and the regions (small; their nesting
   depth needs them all);
3. gpu_ops: the scratch GPU events in pieces of at most `_GPU_ROWS` rows, each op linked
   to the pid of the runtime call with the same correlation (else the busiest host pid),
   classified (and its memcpy kinds read from its name) once per distinct (name, kind);
4. memory_events: the `[memory]` instant events the decoders kept beside the parts.

Row order and values are those of translating the whole trace at once: host and GPU rows in
file order, then the ones completed from B/E pairs; regions on the CPU, then on the GPU.
"""
from __future__ import annotations

from functools import partial
from itertools import chain, groupby
from pathlib import Path
from typing import Callable, Iterable, Iterator

import msgspec
import numpy as np
import polars as pl
import pyarrow.parquet as pq

from ...errors import BadInput
from ...schema import TRUNCATED_WARNING
from ...threads import ordered_map
from .. import memory
from ..common import NotATrace
from ..ns_times import to_ns
from ..validate import bounds_of, keep_expr
from .raw import RAW_SCHEMA, Decoded, host_be_path, memory_path, starts_path
from .tables import (GPU, GPU_COLS, HOST, Checks, Chunk, Classes, Last, Launches, gpu_ops_of, host_rows,
                     pair_begin_end, prepared, regions_of, route_chunk, series, with_end, with_ns)

TCHUNK = 1 << 16   # rows per translation chunk
_GPU_ROWS = 1 << 14  # GPU events per piece of the gpu_ops pass, at most (and at most TCHUNK)
_THREADS = 2        # threads routing the chunks of the main pass (traceq.threads.ordered_map)

OpenTable = Callable[[str], "object"]   # table name -> a writer with .write(pa.Table)


# ------------------------------------------------------------------ reading the raw parts
def scan(parts: list[Path], columns: list[str] | None = None) -> Iterator[pl.DataFrame]:
    """The raw rows in file order, at most `TCHUNK` rows at a time (`_readers`)."""
    return (read() for read in _readers(parts, columns))


def _readers(parts: list[Path], columns: list[str] | None = None) -> Iterator[Callable[[], pl.DataFrame]]:
    """Readers of the raw rows in file order, at most `TCHUNK` rows each, to call on any
    thread (the main pass reads its chunks on the threads that route them). Consecutive small
    parts (the parallel decoder's, of one chunk or less each) are read together as one chunk
    (`_grouped`: 40 % faster than by slices); a bigger part a row group slice at a time (polars
    reads each slice on its own: less memory than pyarrow's batch reader, which buffers)."""
    sized = ((part, pq.read_metadata(part)) for part in parts)
    for big, run in groupby(sized, key=lambda pm: pm[1].num_rows > TCHUNK):
        if not big:
            for group in _grouped(((part, meta.num_rows) for part, meta in run), TCHUNK):
                yield partial(_read_group, group, columns)
            continue
        for part, meta in run:
            lazy = pl.scan_parquet(part, glob=False)
            if columns is not None:
                lazy = lazy.select(columns)
            at = 0
            for i in range(meta.num_row_groups):
                n = meta.row_group(i).num_rows
                for lo in range(0, n, TCHUNK):
                    yield lazy.slice(at + lo, min(TCHUNK, n - lo)).collect
                at += n


def _grouped(sized: Iterable[tuple[Path, int]], cap: int) -> Iterator[list[Path]]:
    """Consecutive files (each with its row count) in groups of at most `cap` rows, a bigger
    file alone; files without rows left out."""
    group: list[Path] = []
    rows = 0
    for path, n in sized:
        if group and rows + n > cap:
            yield group
            group, rows = [], 0
        if n:
            group.append(path)
            rows += n
    if group:
        yield group


def _read_group(parts: list[Path], columns: list[str] | None) -> pl.DataFrame:
    """Small parts as one frame, each read on its own and kept as a chunk of it (polars'
    reading of a list of files at once held ~15 MB more at the peak)."""
    frames = [pl.read_parquet(p, columns=columns, glob=False) for p in parts]
    return frames[0] if len(frames) == 1 else pl.concat(frames, rechunk=False)



def _no_events(n_items: int, not_objects: int, dropped: str | None, first: bytes | None, source: Path) -> BadInput:
    """The error for a document with an event list that still holds no event to store:
    NotATrace when none of its items is a trace event."""
    if n_items == 0:
        return BadInput("no trace events (the event list is empty)", source)
    if dropped:
        return BadInput(f"no trace events left: {dropped}", source)
    if not_objects == n_items:
        return NotATrace(f"not a trace: a JSON list of {n_items} items, none of them a JSON object", source)
    keys = ""
    if first is not None:
        try:
            item = msgspec.json.decode(first, type=dict[str, msgspec.Raw])
            keys = " (the first has keys " + ", ".join(repr(k[:40]) for k in list(item)[:8]) + ")"
        except (msgspec.ValidationError, msgspec.DecodeError):
            pass
    return NotATrace(f"no trace events: a list of {n_items} JSON records{keys}, none of them a trace event "
                     '(an object with "ph" X, B or E and a numeric "ts")', source)



# ------------------------------------------------------------------ the passes
def span(parts: list[Path]) -> tuple[tuple[int, int, int] | None, pl.DataFrame]:
    """Pass 1: the trace's bounds (validate) and the times of the sane host B/E events, from
    the facts the decoders saved beside the parts (`raw.SpanFacts`).

    The sane start times go into one array sized for all of them (8 bytes per event, the one
    thing here that grows with the trace), filled in place: no list of pieces to concatenate."""
    sizes = [np.load(starts_path(p), mmap_mode="r").shape[0] for p in parts]
    starts = np.empty(sum(sizes), np.int64)
    at = 0
    for p, n in zip(parts, sizes):
        starts[at:at + n] = np.load(starts_path(p))
        at += n
    bounds = bounds_of(starts)
    host_be = [np.load(host_be_path(p)) for p in parts if host_be_path(p).exists()]
    times = np.concatenate(host_be) if host_be else np.empty((0, 2), np.int64)
    return bounds, pl.DataFrame([series(times[:, 0]).alias("start_ns"), series(times[:, 1]).alias("end_ns")])



def translate(decoded: Decoded, source: Path, open_table: OpenTable, warnings: list[str]) -> None:
    """Write gpu_ops, host_ops and regions of the decoded trace (module doc); append the
    warnings (items that are no objects, dropped times, CPU-only, open spans)."""
    parts = decoded.parts
    bounds, host_be_times = span(parts)
    memory.release()   # the start times of pass 1
    paired = bool(host_be_times.height) and bool(host_be_times.select(keep_expr(bounds).any()).item())
    check = Checks(bounds)
    host_out, launches = open_table("host_ops"), Launches()
    scratch = (parts[0].parent if parts else Path(".")) / "gpu-events"
    gpu_files: list[Path] = []
    be = {HOST: [], GPU: []}
    last = {HOST: Last(), GPU: Last()}
    region_rows: list[pl.DataFrame] = []
    moved: list[pl.DataFrame] = []
    kept = n_open = n_gpu = 0

    def write_host(host: pl.DataFrame, moved_rows: pl.DataFrame | None) -> None:
        nonlocal n_open
        if moved_rows is not None:
            moved.append(moved_rows)
        if host.height:
            host_out.write(host.to_arrow())
            launches.add(host)
            n_open += int(host["unfinished"].sum() or 0)

    def route(item: tuple[int, Callable[[], pl.DataFrame]]) -> Chunk:
        i, read = item
        return route_chunk(read(), check, paired, scratch.with_name(f"gpu-events-{i:04d}.parquet"))

    for chunk in ordered_map(route, enumerate(_readers(parts)), _THREADS, in_flight=2):   # taken in file order
        for table, n_bad, example in chunk.dropped:
            check.count_dropped(table, n_bad, example)
        kept += chunk.kept
        for table, value in chunk.last.items():
            last[table].see(value)
        for table, rows in chunk.be.items():
            be[table].append(rows)
        if chunk.regions is not None:
            region_rows.append(chunk.regions)
        if chunk.host is not None:
            write_host(chunk.host, chunk.moved)
        if chunk.gpu_file is not None:
            gpu_files.append(chunk.gpu_file)
    dropped = check.message()
    if not kept:
        raise _no_events(decoded.n_items, decoded.not_objects, dropped, decoded.first, source)
    if decoded.not_objects:
        warnings.append(f"skipped {decoded.not_objects} items of the event list that are not JSON objects")
    if dropped:
        warnings.append(dropped)
    if be[HOST]:
        write_host(*host_rows(with_end(pair_begin_end(pl.concat(be[HOST]), last[HOST].value)), paired))
    be[HOST] = []
    launches.finish()
    main_pid = launches.main_pid()
    memory.release()   # the main pass's chunks

    gpu_out, classes = open_table("gpu_ops"), Classes()
    pieces: Iterator[pl.DataFrame] = _gpu_pieces(gpu_files)
    if be[GPU]:
        pieces = chain(pieces, [with_end(pair_begin_end(pl.concat(be[GPU]), last[GPU].value))])
    gpu_ops = partial(gpu_ops_of, launches=launches, main_pid=main_pid, classes=classes)
    for out in ordered_map(gpu_ops, pieces, _THREADS, in_flight=2):   # in file order
        n_gpu += out.height
        if out.height:
            gpu_out.write(out.to_arrow())
    for f in gpu_files:
        f.unlink(missing_ok=True)

    region_ev = pl.concat([*region_rows, *moved], how="diagonal_relaxed") if region_rows or moved else \
        with_end(prepared(with_ns(pl.from_arrow(RAW_SCHEMA.empty_table()).select(GPU_COLS))))
    regions = regions_of(region_ev)
    if regions.height:
        open_table("regions").write(regions.to_arrow())
    n_open += int(regions["unfinished"].sum() or 0)
    _memory_events(parts, open_table)
    if n_gpu == 0:
        cut = any(w.startswith(TRUNCATED_WARNING) for w in warnings)
        warnings.append("no GPU activity in the events before the cut (its GPU events may be missing): GPU analyses "
                        "will be empty" if cut else "no GPU activity in this trace (CPU-only): GPU analyses will be empty")
    if n_open:
        warnings.append(f"{n_open} spans were still open when the capture ended (flagged unfinished)")


_DEVICE_TYPES = {0: "cpu", 1: "cuda"}   # c10::DeviceType; other types keep their number as text


def _memory_events(parts: list[Path], open_table: OpenTable) -> None:
    """memory_events: the `[memory]` instant events the decoders kept beside the raw parts, in
    file order, their times in ns (events without a representable time are left out)."""
    files = [memory_path(p) for p in parts if memory_path(p).exists()]
    if not files:
        return
    ev = pl.concat([pl.read_parquet(f, glob=False) for f in files])
    start, ok = to_ns(ev["ts"].to_numpy())
    ev = ev.with_columns(start_ns=series(start, ok)).filter(pl.col("start_ns").is_not_null())
    types = pl.col("device_type")
    out = ev.select(
        "pid", "tid",
        pl.when(types == 0).then(pl.lit("cpu")).when(types == 1).then(pl.lit("cuda"))
          .otherwise(types.cast(pl.String)).alias("device_type"),
        pl.col("device").cast(pl.Int32, strict=False), "start_ns", "addr", "bytes", "total_allocated", "total_reserved")
    if out.height:
        open_table("memory_events").write(out.to_arrow())


def _gpu_pieces(files: list[Path]) -> Iterator[pl.DataFrame]:
    """The scratch GPU events in file order, consecutive files read together up to `_GPU_ROWS`
    rows (the main pass writes one file per chunk, often of a few thousand rows, and each
    `gpu_ops_of` call costs ~2 ms whatever its size; bigger pieces than 16 k rows cost memory:
    +27 MB peak RSS at 64 k rows on the 8x replica)."""
    sized = ((f, pq.read_metadata(f).num_rows) for f in files)
    return (_read_group(group, None) for group in _grouped(sized, min(_GPU_ROWS, TCHUNK)))
