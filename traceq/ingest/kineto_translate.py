"""Kineto raw parts -> the canonical tables gpu_ops, host_ops and regions, in bounded memory.

Reads the raw event relation (`kineto_raw`) that decoding wrote and writes the tables through
`open_table(name).write(arrow_table)` (the store's staging files, see `Store.stage`), chunk by
chunk of `_TCHUNK` rows, in file order. Only small global facts are held in memory:

1. a first pass finds the trace's span (`validate.bounds_of`: the start times of the sane
   events, 8 bytes each) and whether any host B/E event survives validation, from the facts
   the decoders saved beside the raw parts (`kineto_raw.SpanFacts`);
2. the main pass routes each chunk into host, GPU and region events (by category, as
   torch.profiler writes them), converts times to ns, drops invalid times (one warning, one
   example), writes host_ops, and keeps the correlation -> launching pid map of the runtime
   calls, the host event count per pid, the GPU events (to a scratch file), the B/E events
   (paired at the end: they need their whole thread) and the regions (small; their nesting
   depth needs them all);
3. gpu_ops: the scratch GPU events in pieces of at most `_GPU_ROWS` rows, each op linked
   to the pid of the runtime call with the same correlation (else the busiest host pid),
   classified (and its memcpy kinds read from its name) once per distinct (name, kind).

Row order and values are those of translating the whole trace at once: host and GPU rows in
file order, then the ones completed from B/E pairs; regions on the CPU, then on the GPU.
"""
from __future__ import annotations

import threading
from functools import partial
from itertools import chain, groupby
from pathlib import Path
from typing import Callable, Iterable, Iterator

import msgspec
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from ..rules.categories import classify
from ..errors import BadInput
from ..schema import TRUNCATED_WARNING
from ..threads import ordered_map
from . import memory
from .common import nesting_depth
from .first_by_key import coded, first_by_key, joined
from .kineto_raw import ANNOTATION_CATS, GPU_CATS, GPU_KIND, RAW_SCHEMA, Decoded, host_be_path, starts_path
from .ns_times import Times
from .validate import bounds_of, dropped_message, fmt_value, keep_expr

_TCHUNK = 1 << 16   # rows per translation chunk
_GPU_ROWS = 1 << 14  # GPU events per piece of the gpu_ops pass, at most (and at most _TCHUNK)
_THREADS = 2        # threads routing the chunks of the main pass (traceq.threads.ordered_map)

# category (lower-cased) -> gpu_ops kind: kineto_raw.GPU_KIND. Device activity of MTIA: its
# device is the trace pid ("MTIA 9"), its stream the tid when args carry none; `_MTIA_KIND`
# refines the kind by name.
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

# routing of the raw rows (exact categories, as written): GPU ops, regions, host events
_GPU_CATS = sorted(GPU_CATS)
_ANNOTATION_CATS = list(ANNOTATION_CATS)
_OP_CATS = ["cpu_op", "Operator", "operator", "CPU_OP"]
_REGION_PREFIXES = ("ProfilerStep#", "enumerate(DataLoader)#", "enumerate(DataPipe)#")
_HOST_COLS = ["ph", "cat", "name", "pid", "tid", "ts", "dur", "external_id", "correlation", "unfinished"]
_GPU_COLS = [*_HOST_COLS, "stream", "device", "bytes", "registers", "grid_x", "grid_y", "grid_z",
             "block_x", "block_y", "block_z", "arg_kind",
             "collective", "pg_name", "pg_desc", "group_size", "seq"]
_BE = ["B", "E"]
HOST, GPU, REGION = 0, 1, 2

OpenTable = Callable[[str], "object"]   # table name -> a writer with .write(pa.Table)


# ------------------------------------------------------------------ rows
def _scan(parts: list[Path], columns: list[str] | None = None) -> Iterator[pl.DataFrame]:
    """The raw rows in file order, at most `_TCHUNK` rows at a time (`_readers`)."""
    return (read() for read in _readers(parts, columns))


def _readers(parts: list[Path], columns: list[str] | None = None) -> Iterator[Callable[[], pl.DataFrame]]:
    """Readers of the raw rows in file order, at most `_TCHUNK` rows each, to call on any
    thread (the main pass reads its chunks on the threads that route them). Consecutive small
    parts (the parallel decoder's, of one chunk or less each) are read together as one chunk
    (`_grouped`: 40 % faster than by slices); a bigger part a row group slice at a time (polars
    reads each slice on its own: less memory than pyarrow's batch reader, which buffers)."""
    sized = ((part, pq.read_metadata(part)) for part in parts)
    for big, run in groupby(sized, key=lambda pm: pm[1].num_rows > _TCHUNK):
        if not big:
            for group in _grouped(((part, meta.num_rows) for part, meta in run), _TCHUNK):
                yield partial(_read_group, group, columns)
            continue
        for part, meta in run:
            lazy = pl.scan_parquet(part)
            if columns is not None:
                lazy = lazy.select(columns)
            at = 0
            for i in range(meta.num_row_groups):
                n = meta.row_group(i).num_rows
                for lo in range(0, n, _TCHUNK):
                    yield lazy.slice(at + lo, min(_TCHUNK, n - lo)).collect
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
    frames = [pl.read_parquet(p, columns=columns) for p in parts]
    return frames[0] if len(frames) == 1 else pl.concat(frames, rechunk=False)


def _routes(ev: pl.DataFrame) -> pl.Series:
    """HOST, GPU or REGION per raw row: GPU by category; regions are complete (X) annotations,
    steps and data-loader spans; every other event (all B/E without a GPU category) is host's."""
    gpu = pl.col("cat").is_in(_GPU_CATS).fill_null(False)
    prefixed = pl.any_horizontal([pl.col("name").str.starts_with(p) for p in _REGION_PREFIXES]).fill_null(False)
    region = ((pl.col("ph") == "X") & (pl.col("cat").is_in(_ANNOTATION_CATS)
                                      | (pl.col("cat").is_in(_OP_CATS) & prefixed))).fill_null(False)
    return ev.select(pl.when(gpu).then(GPU).when(region).then(REGION).otherwise(HOST).alias("r"))["r"]


def _series(values: np.ndarray, valid: np.ndarray | None = None) -> pl.Series:
    """A 1-d NumPy array of numbers as a polars Series of its type, null where not `valid`.
    Made from Arrow buffers: polars' and pyarrow's conversions of NumPy arrays import
    `numpy.ma`, and polars' of an Arrow array `pyarrow.compute` (~30 ms of the start-up of an
    ingest, together), and a validity bitmap replaces polars' masked `set` (0.1 ms per 64 k
    rows)."""
    values = np.ascontiguousarray(values)
    bitmap = None if valid is None or valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    array = pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [bitmap, pa.py_buffer(values)])
    return pl.from_arrow(pa.table({"": array})).to_series()


def _with_ns(ev: pl.DataFrame) -> pl.DataFrame:
    """start_ns/end_ns (null when not representable; a negative `dur` ends before the start,
    and is dropped as inverted), keeping the raw ts/dur for the validation warning. A null
    `dur` is 0 ns; end_ns is null unless both are representable and |start_ns| <= LIMIT_NS
    (`ns_times.Times`)."""
    t = Times(ev["ts"].to_numpy(), ev["dur"].to_numpy(), ev["dur"].is_null().to_numpy())
    return ev.with_columns(start_ns=_series(t.start, t.start_ok), dur_ns=_series(t.dur, t.dur_ok),
                           end_ns=_series(t.end, t.end_ok))


def _describe(row: dict) -> str:
    name = row.get("name")
    return (f"{str(name)[:60]!r} (ph {str(row.get('ph'))[:4]!r}) at ts {fmt_value(row.get('ts'))} µs, "
            f"dur {fmt_value(row.get('dur'))} µs")


def _compact(ev: pl.DataFrame) -> pl.DataFrame:
    """A copy of a few rows kept across chunks that holds only their own strings (a filtered
    frame's strings are views that keep the whole chunk's text alive)."""
    return pl.from_arrow(ev.to_arrow(compat_level=pl.CompatLevel.oldest()))


def _prepared(ev: pl.DataFrame) -> pl.DataFrame:
    """Validated ns times -> lower-cased category and dur_ns (end_ns comes back after pairing)."""
    return ev.with_columns(
        dur_ns=pl.col("end_ns") - pl.col("start_ns"),
        _cat=pl.col("cat").str.to_lowercase().fill_null(""),
    ).drop("ts", "dur", "end_ns")


def _with_end(ev: pl.DataFrame) -> pl.DataFrame:
    return ev.with_columns(end_ns=pl.col("start_ns") + pl.col("dur_ns"))


# ------------------------------------------------------------------ pairing B/E
def _pair_begin_end(be: pl.DataFrame, t_end: int | None) -> pl.DataFrame:
    """Turn B/E pairs (all B/E events of a table, in file order) into complete (X-like)
    events: the k-th B at a stack level of a thread pairs with the k-th E that closes that
    level. Unmatched B's stay open until `t_end` (the last end of the table's events) and
    are flagged unfinished."""
    columns = be.columns
    be = be.with_row_index("_i").sort(["pid", "tid", "start_ns", "_i"])
    step = pl.when(pl.col("ph") == "B").then(1).otherwise(-1)
    be = be.with_columns(_after=step.cum_sum().over(["pid", "tid"]))
    be = be.with_columns(_level=pl.when(pl.col("ph") == "B").then(pl.col("_after") - 1).otherwise(pl.col("_after")))
    be = be.with_columns(_k=pl.int_range(pl.len()).over(["pid", "tid", "_level", "ph"]))
    begins = be.filter(pl.col("ph") == "B")
    ends = be.filter(pl.col("ph") == "E").select("pid", "tid", "_level", "_k", _end=pl.col("start_ns"))
    paired = begins.join(ends, on=["pid", "tid", "_level", "_k"], how="left", nulls_equal=True)
    return paired.with_columns(
        unfinished=pl.col("_end").is_null(),
        dur_ns=(pl.col("_end").fill_null(t_end) - pl.col("start_ns")).clip(lower_bound=0),
        ph=pl.lit("X"),
    ).select(columns)


# ------------------------------------------------------------------ tables
def _copy_names(name: pl.Expr) -> list[pl.Expr]:
    """What a memcpy's name says of it: the direction (`Memcpy HtoD`) and the source and
    destination memory kinds (`(Device -> Pinned)`); per distinct name (`_Classes`)."""
    return [
        name.str.extract(r"Memcpy\s+(\w+)", 1).alias("_direction"),
        name.str.extract(r"\((\w+)\s*->", 1).alias("_src"),
        name.str.extract(r"->\s*(\w+)\)", 1).alias("_dst"),
    ]


def _copy_kinds(memcpy: pl.Expr) -> list[pl.Expr]:
    """copy_kind (the name's direction, else args.kind), src_kind and dst_kind of memcpys."""
    return [
        pl.when(memcpy).then(pl.coalesce("_direction", "arg_kind")).alias("copy_kind"),
        pl.when(memcpy).then("_src").alias("src_kind"),
        pl.when(memcpy).then("_dst").alias("dst_kind"),
    ]


def _host_ops(ev: pl.DataFrame) -> pl.DataFrame:
    """Host events (already routed: no GPU, region or Trace events) -> host_ops."""
    h = ev.select("pid", "tid", "name", "_cat", "start_ns", "end_ns", "correlation", "external_id", "unfinished")
    if h["pid"].null_count():   # pids like "Spans" are not processes
        h = h.filter(pl.col("pid").is_not_null())
    kind = pl.col("_cat").replace_strict(_HOST_KIND, default="other")
    kind = pl.when(kind.is_in(["runtime", "driver"]) & pl.col("name").str.contains(SYNC_APIS)).then(pl.lit("sync_api")).otherwise(kind)
    return h.with_columns(kind=kind).select("pid", "tid", "kind", "name", "start_ns", "end_ns", "correlation",
                                             "external_id", "unfinished")


def _is_region(ev: pl.DataFrame) -> pl.Expr:
    named = pl.col("name").str.contains(_STEP) | pl.col("name").str.contains(_DATALOADER)
    return pl.col("_cat").is_in(list(_REGION_CATS)) | (pl.col("_cat").is_in(["cpu_op", "operator"]) & named)


class _Launches:
    """correlation -> pid of the first runtime/driver call (host_ops order) with that
    correlation, and the host event count per pid; collected chunk by chunk, as NumPy arrays.

    The map is the one thing of the main pass that grows with the trace, so it is kept
    compact: correlations as uint32 while they fit (CUPTI's are 32-bit; int64 otherwise)
    and pids as codes into the distinct pids (uint8 while fewer than 256): 5 bytes per call
    instead of 16 (790 k calls of the 32x benchmark replica: 4 MB instead of 13)."""

    def __init__(self) -> None:
        self.pieces: list[tuple[np.ndarray, np.ndarray]] = []
        self.per_pid: list[pl.DataFrame] = []
        self.code_of: dict[int, int] = {}   # pid -> code (first seen, first code)
        self.keys = np.empty(0, np.uint32)
        self.codes = np.empty(0, np.uint8)
        self.pid_values = np.empty(0, np.int64)

    def add(self, host: pl.DataFrame) -> None:
        calls = host.filter(pl.col("kind").is_in(["runtime", "driver", "sync_api"])
                            & pl.col("correlation").is_not_null())
        if calls.height:   # new arrays, no views: a view would keep the chunk's polars buffers
            # alive (and the allocator's pages around them): 20-30 MB more at 32x
            self.pieces.append((_compact_keys(calls["correlation"].to_numpy()),
                                self._codes(calls["pid"].to_numpy())))
        self.per_pid.append(host.group_by("pid", maintain_order=True).len())

    def _codes(self, pids: np.ndarray) -> np.ndarray:
        distinct, inverse = (pids[:1], np.zeros(len(pids), np.intp)) if (pids == pids[0]).all() \
            else np.unique(pids, return_inverse=True)
        return coded(self.code_of, distinct.tolist(), inverse)

    def main_pid(self) -> int | None:
        """The pid with the most host events (the first seen among equals)."""
        if not self.per_pid:
            return None
        counts = pl.concat(self.per_pid).group_by("pid", maintain_order=True).agg(pl.col("len").sum())
        return counts.sort("len", descending=True, maintain_order=True)["pid"][0] if counts.height else None

    def finish(self) -> None:
        """The sorted distinct correlations and the code of each one's first call's pid
        (`first_by_key`: no sort when the calls came in correlation order, as they usually do)."""
        self.pid_values = np.array(list(self.code_of), np.int64)
        if not self.pieces:
            return
        keys, codes = [k for k, _ in self.pieces], [c for _, c in self.pieces]
        self.pieces = []   # the two lists hold the only references: `joined` frees each piece
        keys, codes = joined(keys), joined(codes)
        self.keys, self.codes = first_by_key(keys, codes)

    def pid_of(self, correlation: pl.Series) -> pl.Series:
        """The launching pid of each GPU op's correlation (null when none)."""
        if len(self.keys) == 0:
            return pl.Series("_host_pid", [None] * len(correlation), pl.Int64)
        corr = correlation.fill_null(-1).to_numpy()
        known = correlation.is_not_null().to_numpy()
        if self.keys.dtype == np.uint32:   # a correlation beyond uint32 has no call: compare in uint32
            known &= (corr >= 0) & (corr <= np.iinfo(np.uint32).max)
            corr = np.where(known, corr, 0).astype(np.uint32)
        idx = np.minimum(np.searchsorted(self.keys, corr), len(self.keys) - 1)
        hit = known & (self.keys[idx] == corr)
        return _series(self.pid_values[self.codes[idx]], hit).rename("_host_pid")


def _compact_keys(keys: np.ndarray) -> np.ndarray:
    """A new array of the correlations: uint32 when they all fit, int64 otherwise."""
    if len(keys) and keys.min() >= 0 and keys.max() <= np.iinfo(np.uint32).max:
        return keys.astype(np.uint32)
    return keys.astype(np.int64, copy=True)


class _Classes:
    """identity, library and category of GPU ops, and what a memcpy's name says of it
    (`_copy_names`), computed once per distinct (name, kind)."""

    def __init__(self) -> None:
        self.known = pl.DataFrame(schema={"name": pl.String, "kind": pl.String, "identity": pl.String,
                                          "library": pl.String, "category": pl.String,
                                          "_direction": pl.String, "_src": pl.String, "_dst": pl.String})
        self.lock = threading.Lock()   # `attach` runs on the threads of the gpu_ops pass

    def attach(self, g: pl.DataFrame) -> pl.DataFrame:
        pairs = g.select(pl.col("name").cast(pl.String), pl.col("kind").cast(pl.String)).unique()
        with self.lock:
            new = pairs.join(self.known, on=["name", "kind"], how="anti", nulls_equal=True)
            if new.height:
                new = pl.concat([_compact(new), classify(new["name"], new["kind"]),
                                 new.select(_copy_names(pl.col("name")))], how="horizontal")
                self.known = pl.concat([self.known, new])
            known = self.known
        return g.join(known, on=["name", "kind"], how="left", nulls_equal=True, maintain_order="left")


def _gpu_ops(g: pl.DataFrame, launches: _Launches, main_pid: int | None, classes: _Classes) -> pl.DataFrame:
    g = g.filter(pl.col("_cat").is_in(list(GPU_KIND)))
    g = g.with_columns(kind=pl.col("_cat").replace_strict(GPU_KIND, default="kernel"))
    mtia = pl.col("_cat") == "mtia_ccp_events"
    has_mtia = bool(g.select(mtia.any()).item())   # else no name is searched for MTIA's patterns
    for pattern, kind in _MTIA_KIND if has_mtia else ():
        g = g.with_columns(kind=pl.when(mtia & pl.col("name").str.contains(pattern)).then(pl.lit(kind))
                           .otherwise("kind"))
    g = g.with_columns(
        device=pl.coalesce("device", pl.col("pid")).cast(pl.Int32),
        stream=pl.coalesce("stream", pl.col("tid")),
    )
    # The launching process: the runtime/driver call with the same correlation id.
    g = g.with_columns(launches.pid_of(g["correlation"]))
    g = g.with_columns(pid=pl.coalesce("_host_pid", pl.lit(main_pid, pl.Int64)))
    g = classes.attach(g)
    g = g.with_columns(
        *_copy_kinds(pl.col("kind") == "memcpy"),
        # MTIA on-device events carry plain names (pe_exe, dma_request): the category says the device
        library=pl.when(mtia).then(pl.lit("MTIA")).otherwise("library") if has_mtia else pl.col("library"),
    )
    return g.select("pid", "device", "stream", "kind", "name", "start_ns", "end_ns", "correlation",
                    "external_id", "bytes", "copy_kind", "src_kind", "dst_kind", "grid_x", "grid_y", "grid_z",
                    "block_x", "block_y", "block_z", "registers", "category", "identity", "library",
                    *[c for c in _COLLECTIVE_ID if c in g.columns])


# Collective identity (kineto_raw.RAW_SCHEMA -> gpu_ops as is; traceq.clocks matches by it)
_COLLECTIVE_ID = ("collective", "pg_name", "pg_desc", "group_size", "seq")


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
    cpu = cpu.with_columns(depth=_series(depth).cast(pl.Int32))
    gpu = r.filter(on_gpu).with_columns(depth=pl.lit(None, pl.Int32))
    r = pl.concat([cpu, gpu])
    return r.select("pid", "tid", "source", "name", "domain", "start_ns", "end_ns", "depth", "step", "device",
                    "stream", "gpu_start_ns", "gpu_end_ns", "gpu_dur_ns", "unfinished")


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


# ------------------------------------------------------------------ the passes
def _span(parts: list[Path]) -> tuple[tuple[int, int, int] | None, pl.DataFrame]:
    """Pass 1: the trace's bounds (validate) and the times of the sane host B/E events, from
    the facts the decoders saved beside the parts (`kineto_raw.SpanFacts`).

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
    return bounds, pl.DataFrame([_series(times[:, 0]).alias("start_ns"), _series(times[:, 1]).alias("end_ns")])


class _Checks:
    """Rows dropped by validation: the count, and the first example of each table (chunks are
    checked on their own, `checked`, and counted here in file order)."""

    def __init__(self, bounds) -> None:
        self.bounds, self.keep = bounds, keep_expr(bounds)
        self.count, self.examples = 0, [None, None, None]

    def checked(self, ev: pl.DataFrame) -> tuple[pl.DataFrame, int, str | None]:
        """The rows of `ev` with valid times (ns columns added), how many were dropped, and
        the first of them described."""
        ev = _with_ns(ev)
        mask = ev.select(self.keep.alias("k"))["k"]
        n_bad = int(mask.len() - mask.sum())
        if not n_bad:
            return ev, 0, None
        return ev.filter(mask), n_bad, _describe(ev.filter(~mask).row(0, named=True))

    def count_dropped(self, table: int, n_bad: int, example: str | None) -> None:
        self.count += n_bad
        if self.examples[table] is None:
            self.examples[table] = example

    def message(self) -> str | None:
        example = next((e for e in self.examples if e is not None), None)
        return dropped_message(self.count, self.bounds, example)


class _Last:
    """The last end time of a table's events (unmatched B's stay open until then)."""

    def __init__(self) -> None:
        self.value: int | None = None

    def see(self, m: int | None) -> None:
        if m is not None and (self.value is None or m > self.value):
            self.value = m


class _Chunk:
    """What the main pass makes of one chunk of raw rows on its own (`_route_chunk`, run on
    a thread: polars and NumPy release the GIL); `translate` takes the chunks in file order.
    Per table (HOST, GPU, REGION): the rows dropped by validation, with the first described;
    the rows kept; host: the host_ops rows, and the annotations among paired B/E (moved to
    regions); GPU: the scratch file of its rows; B/E rows kept for pairing and the last end
    time of each table; the region rows."""

    __slots__ = ("kept", "dropped", "host", "moved", "gpu_file", "be", "last", "regions")

    def __init__(self) -> None:
        self.kept = 0
        self.dropped: list[tuple[int, int, str | None]] = []
        self.host = self.moved = self.regions = None
        self.gpu_file: Path | None = None
        self.be: dict[int, pl.DataFrame] = {}
        self.last: dict[int, int | None] = {}


def _route_chunk(ev: pl.DataFrame, check: _Checks, paired: bool, gpu_file: Path) -> _Chunk:
    out = _Chunk()
    routes = _routes(ev)
    for table, cols in ((HOST, _HOST_COLS), (GPU, _GPU_COLS), (REGION, _GPU_COLS)):
        rows = ev.filter(routes == table)
        if rows.height == 0:
            continue
        rows, n_bad, example = check.checked(rows.select(cols))
        if n_bad:
            out.dropped.append((table, n_bad, example))
        out.kept += rows.height
        if rows.height == 0:
            continue
        if table == REGION:
            out.regions = _compact(_with_end(_prepared(rows)))
            continue
        out.last[table] = rows["end_ns"].max()
        rows = _prepared(rows)
        is_be = rows["ph"].is_in(_BE)
        if is_be.any():
            out.be[table] = _compact(rows.filter(is_be))
            rows = rows.filter(~is_be)
        rows = _with_end(rows)
        if table == HOST:
            out.host, out.moved = _host_rows(rows, paired)
        elif rows.height:
            rows.write_parquet(gpu_file, compression="uncompressed", statistics=False)
            out.gpu_file = gpu_file
    return out


def _host_rows(h: pl.DataFrame, paired: bool) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """host_ops rows of host events, and the annotations among them, moved to regions when
    B/E pairs were completed on the host side (`paired`)."""
    moved = None
    if paired:
        is_region = h.select(_is_region(h).alias("m"))["m"]
        if is_region.any():
            moved = _compact(h.filter(is_region))
            h = h.filter(~is_region)
    return _host_ops(h), moved


def translate(decoded: Decoded, source: Path, open_table: OpenTable, warnings: list[str]) -> None:
    """Write gpu_ops, host_ops and regions of the decoded trace (module doc); append the
    warnings (items that are no objects, dropped times, CPU-only, open spans)."""
    parts = decoded.parts
    bounds, host_be_times = _span(parts)
    memory.release()   # the start times of pass 1
    paired = bool(host_be_times.height) and bool(host_be_times.select(keep_expr(bounds).any()).item())
    check = _Checks(bounds)
    host_out, launches = open_table("host_ops"), _Launches()
    scratch = (parts[0].parent if parts else Path(".")) / "gpu-events"
    gpu_files: list[Path] = []
    be = {HOST: [], GPU: []}
    last = {HOST: _Last(), GPU: _Last()}
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

    def route(item: tuple[int, Callable[[], pl.DataFrame]]) -> _Chunk:
        i, read = item
        return _route_chunk(read(), check, paired, scratch.with_name(f"gpu-events-{i:04d}.parquet"))

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
        raise BadInput(_no_events(decoded.n_items, decoded.not_objects, dropped, decoded.first), source)
    if decoded.not_objects:
        warnings.append(f"skipped {decoded.not_objects} items of the event list that are not JSON objects")
    if dropped:
        warnings.append(dropped)
    if be[HOST]:
        write_host(*_host_rows(_with_end(_pair_begin_end(pl.concat(be[HOST]), last[HOST].value)), paired))
    be[HOST] = []
    launches.finish()
    main_pid = launches.main_pid()
    memory.release()   # the main pass's chunks

    gpu_out, classes = open_table("gpu_ops"), _Classes()
    pieces: Iterator[pl.DataFrame] = _gpu_pieces(gpu_files)
    if be[GPU]:
        pieces = chain(pieces, [_with_end(_pair_begin_end(pl.concat(be[GPU]), last[GPU].value))])
    gpu_ops = partial(_gpu_ops, launches=launches, main_pid=main_pid, classes=classes)
    for out in ordered_map(gpu_ops, pieces, _THREADS, in_flight=2):   # in file order
        n_gpu += out.height
        if out.height:
            gpu_out.write(out.to_arrow())
    for f in gpu_files:
        f.unlink(missing_ok=True)

    region_ev = pl.concat([*region_rows, *moved], how="diagonal_relaxed") if region_rows or moved else \
        _with_end(_prepared(_with_ns(pl.from_arrow(RAW_SCHEMA.empty_table()).select(_GPU_COLS))))
    regions = _regions(region_ev)
    if regions.height:
        open_table("regions").write(regions.to_arrow())
    n_open += int(regions["unfinished"].sum() or 0)
    if n_gpu == 0:
        cut = any(w.startswith(TRUNCATED_WARNING) for w in warnings)
        warnings.append("no GPU activity in the events before the cut (its GPU events may be missing): GPU analyses "
                        "will be empty" if cut else "no GPU activity in this trace (CPU-only): GPU analyses will be empty")
    if n_open:
        warnings.append(f"{n_open} spans were still open when the capture ended (flagged unfinished)")


def _gpu_pieces(files: list[Path]) -> Iterator[pl.DataFrame]:
    """The scratch GPU events in file order, consecutive files read together up to `_GPU_ROWS`
    rows (the main pass writes one file per chunk, often of a few thousand rows, and each
    `_gpu_ops` call costs ~2 ms whatever its size; bigger pieces than 16 k rows cost memory:
    +27 MB peak RSS at 64 k rows on the 8x replica)."""
    sized = ((f, pq.read_metadata(f).num_rows) for f in files)
    return (_read_group(group, None) for group in _grouped(sized, min(_GPU_ROWS, _TCHUNK)))
