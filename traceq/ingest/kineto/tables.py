"""Raw rows -> the rows of host_ops, gpu_ops and regions, chunk by chunk (`translate` runs the
passes): routing by category, ns times and their validation, B/E pairing, the launch map
(correlation -> launching pid), and the classification of GPU ops.
"""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from ...kernels.tensor_cores import uses_tensor_cores
from ...rules.categories import classify
from ..common import nesting_depth
from ..first_by_key import coded, first_by_key, joined
from ..ns_times import Times
from ..validate import dropped_message, fmt_value, keep_expr
from .raw import ANNOTATION_CATS, GPU_CATS, GPU_KIND, OP_CATS, SHAPE_COLS


# category (lower-cased) -> gpu_ops kind: raw.GPU_KIND. Device activity of MTIA: its
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
_OP_CATS = list(OP_CATS)
_REGION_PREFIXES = ("ProfilerStep#", "enumerate(DataLoader)#", "enumerate(DataPipe)#")
# kernels' launch facts (raw.RAW_SCHEMA -> gpu_ops as is)
LAUNCH_FACTS = ("shared_memory", "blocks_per_sm", "warps_per_sm", "est_occupancy_pct")
_EVENT_COLS = ["ph", "cat", "name", "pid", "tid", "ts", "dur", "external_id", "correlation", "unfinished"]
_HOST_COLS = [*_EVENT_COLS, *SHAPE_COLS]
GPU_COLS = [*_EVENT_COLS, "stream", "device", "bytes", "registers", "grid_x", "grid_y", "grid_z",
            "block_x", "block_y", "block_z", *LAUNCH_FACTS, "arg_kind",
            "collective", "pg_name", "pg_desc", "group_size", "seq"]
_BE = ["B", "E"]
HOST, GPU, REGION = 0, 1, 2


def _routes(ev: pl.DataFrame) -> pl.Series:
    """HOST, GPU or REGION per raw row: GPU by category; regions are complete (X) annotations,
    steps and data-loader spans; every other event (all B/E without a GPU category) is host's."""
    gpu = pl.col("cat").is_in(_GPU_CATS).fill_null(False)
    prefixed = pl.any_horizontal([pl.col("name").str.starts_with(p) for p in _REGION_PREFIXES]).fill_null(False)
    region = ((pl.col("ph") == "X") & (pl.col("cat").is_in(_ANNOTATION_CATS)
                                      | (pl.col("cat").is_in(_OP_CATS) & prefixed))).fill_null(False)
    return ev.select(pl.when(gpu).then(GPU).when(region).then(REGION).otherwise(HOST).alias("r"))["r"]


def series(values: np.ndarray, valid: np.ndarray | None = None) -> pl.Series:
    """A 1-d NumPy array of numbers as a polars Series of its type, null where not `valid`.
    Made from Arrow buffers: polars' and pyarrow's conversions of NumPy arrays import
    `numpy.ma`, and polars' of an Arrow array `pyarrow.compute` (~30 ms of the start-up of an
    ingest, together), and a validity bitmap replaces polars' masked `set` (0.1 ms per 64 k
    rows)."""
    values = np.ascontiguousarray(values)
    bitmap = None if valid is None or valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    array = pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [bitmap, pa.py_buffer(values)])
    return pl.from_arrow(pa.table({"": array})).to_series()


def with_ns(ev: pl.DataFrame) -> pl.DataFrame:
    """start_ns/end_ns (null when not representable; a negative `dur` ends before the start,
    and is dropped as inverted), keeping the raw ts/dur for the validation warning. A null
    `dur` is 0 ns; end_ns is null unless both are representable and |start_ns| <= LIMIT_NS
    (`ns_times.Times`)."""
    t = Times(ev["ts"].to_numpy(), ev["dur"].to_numpy(), ev["dur"].is_null().to_numpy())
    return ev.with_columns(start_ns=series(t.start, t.start_ok), dur_ns=series(t.dur, t.dur_ok),
                           end_ns=series(t.end, t.end_ok))


def _describe(row: dict) -> str:
    name = row.get("name")
    return (f"{str(name)[:60]!r} (ph {str(row.get('ph'))[:4]!r}) at ts {fmt_value(row.get('ts'))} µs, "
            f"dur {fmt_value(row.get('dur'))} µs")


def _compact(ev: pl.DataFrame) -> pl.DataFrame:
    """A copy of a few rows kept across chunks that holds only their own strings (a filtered
    frame's strings are views that keep the whole chunk's text alive)."""
    return pl.from_arrow(ev.to_arrow(compat_level=pl.CompatLevel.oldest()))


def prepared(ev: pl.DataFrame) -> pl.DataFrame:
    """Validated ns times -> lower-cased category and dur_ns (end_ns comes back after pairing)."""
    return ev.with_columns(
        dur_ns=pl.col("end_ns") - pl.col("start_ns"),
        _cat=pl.col("cat").str.to_lowercase().fill_null(""),
    ).drop("ts", "dur", "end_ns")


def with_end(ev: pl.DataFrame) -> pl.DataFrame:
    return ev.with_columns(end_ns=pl.col("start_ns") + pl.col("dur_ns"))


# ------------------------------------------------------------------ pairing B/E
def pair_begin_end(be: pl.DataFrame, t_end: int | None) -> pl.DataFrame:
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
    destination memory kinds (`(Device -> Pinned)`); per distinct name (`Classes`)."""
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
    h = ev.select("pid", "tid", "name", "_cat", "start_ns", "end_ns", "correlation", "external_id", "unfinished",
                  *SHAPE_COLS)
    if h["pid"].null_count():   # pids like "Spans" are not processes
        h = h.filter(pl.col("pid").is_not_null())
    kind = pl.col("_cat").replace_strict(_HOST_KIND, default="other")
    kind = pl.when(kind.is_in(["runtime", "driver"]) & pl.col("name").str.contains(SYNC_APIS)).then(pl.lit("sync_api")).otherwise(kind)
    return h.with_columns(kind=kind, source_category=pl.col("_cat")).select(
        "pid", "tid", "kind", "name", "start_ns", "end_ns", "correlation", "external_id", "unfinished",
        "source_category", *SHAPE_COLS)


def _is_region(ev: pl.DataFrame) -> pl.Expr:
    named = pl.col("name").str.contains(_STEP) | pl.col("name").str.contains(_DATALOADER)
    return pl.col("_cat").is_in(list(_REGION_CATS)) | (pl.col("_cat").is_in(["cpu_op", "operator"]) & named)


class Launches:
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
        return series(self.pid_values[self.codes[idx]], hit).rename("_host_pid")


def _compact_keys(keys: np.ndarray) -> np.ndarray:
    """A new array of the correlations: uint32 when they all fit, int64 otherwise."""
    if len(keys) and keys.min() >= 0 and keys.max() <= np.iinfo(np.uint32).max:
        return keys.astype(np.uint32)
    return keys.astype(np.int64, copy=True)


class Classes:
    """identity, library and category of GPU ops, whether a kernel runs on tensor cores
    (traceq.kernels.tensor_cores; null for other kinds) and what a memcpy's name says of it
    (`_copy_names`), computed once per distinct (name, kind)."""

    def __init__(self) -> None:
        self.known = pl.DataFrame(schema={"name": pl.String, "kind": pl.String, "identity": pl.String,
                                          "library": pl.String, "category": pl.String,
                                          "_direction": pl.String, "_src": pl.String, "_dst": pl.String,
                                          "tensor_core": pl.Boolean})
        self.lock = threading.Lock()   # `attach` runs on the threads of the gpu_ops pass

    def attach(self, g: pl.DataFrame) -> pl.DataFrame:
        pairs = g.select(pl.col("name").cast(pl.String), pl.col("kind").cast(pl.String)).unique()
        with self.lock:
            new = pairs.join(self.known, on=["name", "kind"], how="anti", nulls_equal=True)
            if new.height:
                tensor_core = [uses_tensor_cores(n) if k == "kernel" and n is not None else None
                               for n, k in new.select("name", "kind").iter_rows()]
                new = pl.concat([_compact(new), classify(new["name"], new["kind"]),
                                 new.select(_copy_names(pl.col("name"))),
                                 pl.DataFrame({"tensor_core": pl.Series(tensor_core, dtype=pl.Boolean)})],
                                how="horizontal")
                self.known = pl.concat([self.known, new])
            known = self.known
        return g.join(known, on=["name", "kind"], how="left", nulls_equal=True, maintain_order="left")


def gpu_ops_of(g: pl.DataFrame, launches: Launches, main_pid: int | None, classes: Classes) -> pl.DataFrame:
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
                    *[c for c in _COLLECTIVE_ID if c in g.columns], "tensor_core", *LAUNCH_FACTS)


# Collective identity (raw.RAW_SCHEMA -> gpu_ops as is; traceq.clocks matches by it)
_COLLECTIVE_ID = ("collective", "pg_name", "pg_desc", "group_size", "seq")


def regions_of(r: pl.DataFrame) -> pl.DataFrame:
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
    cpu = cpu.with_columns(depth=series(depth).cast(pl.Int32))
    gpu = r.filter(on_gpu).with_columns(depth=pl.lit(None, pl.Int32))
    r = pl.concat([cpu, gpu])
    return r.select("pid", "tid", "source", "name", "domain", "start_ns", "end_ns", "depth", "step", "device",
                    "stream", "gpu_start_ns", "gpu_end_ns", "gpu_dur_ns", "unfinished",
                    pl.col("_cat").alias("source_category"))



class Checks:
    """Rows dropped by validation: the count, and the first example of each table (chunks are
    checked on their own, `checked`, and counted here in file order)."""

    def __init__(self, bounds) -> None:
        self.bounds, self.keep = bounds, keep_expr(bounds)
        self.count, self.examples = 0, [None, None, None]

    def checked(self, ev: pl.DataFrame) -> tuple[pl.DataFrame, int, str | None]:
        """The rows of `ev` with valid times (ns columns added), how many were dropped, and
        the first of them described."""
        ev = with_ns(ev)
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


class Last:
    """The last end time of a table's events (unmatched B's stay open until then)."""

    def __init__(self) -> None:
        self.value: int | None = None

    def see(self, m: int | None) -> None:
        if m is not None and (self.value is None or m > self.value):
            self.value = m


class Chunk:
    """What the main pass makes of one chunk of raw rows on its own (`route_chunk`, run on
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


def route_chunk(ev: pl.DataFrame, check: Checks, paired: bool, gpu_file: Path) -> Chunk:
    out = Chunk()
    routes = _routes(ev)
    for table, cols in ((HOST, _HOST_COLS), (GPU, GPU_COLS), (REGION, GPU_COLS)):
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
            out.regions = _compact(with_end(prepared(rows)))
            continue
        out.last[table] = rows["end_ns"].max()
        rows = prepared(rows)
        is_be = rows["ph"].is_in(_BE)
        if is_be.any():
            out.be[table] = _compact(rows.filter(is_be))
            rows = rows.filter(~is_be)
        rows = with_end(rows)
        if table == HOST:
            out.host, out.moved = host_rows(rows, paired)
        elif rows.height:
            rows.write_parquet(gpu_file, compression="uncompressed", statistics=False)
            out.gpu_file = gpu_file
    return out


def host_rows(h: pl.DataFrame, paired: bool) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """host_ops rows of host events, and the annotations among them, moved to regions when
    B/E pairs were completed on the host side (`paired`)."""
    moved = None
    if paired:
        is_region = h.select(_is_region(h).alias("m"))["m"]
        if is_region.any():
            moved = _compact(h.filter(is_region))
            h = h.filter(~is_region)
    return _host_ops(h), moved

