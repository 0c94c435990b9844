"""Facts of a scope that diagnose's verdict and the newer rules need beside the stall
attribution: what the GPU is busy with (exposed communication and copies,
queries/advice_busy.sql), the idle time spent in one-off start-up (queries/advice_warm.sql),
the unexplained idle time named by the user range the host was in (queries/advice_ranges.sql),
and whether the allocator calls are churn (memory given back and allocated again).

`run_facts(scope, stalls)` computes them for the scope's ranks; `merge_facts` adds up those
of several ranks (a run mapped over its ranks, traceq.engine.per_rank).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..lazy import polars as pl

from ..queries import install_macros, run_script
from .bound import merge_paths

# allocator calls that give memory back, and those that take it. A free that returns in
# under FREE_MIN_NS gave nothing back: cudaFree(0)/cudaFree(nullptr) is the idiom that
# creates the CUDA context (cuDNN and PyTorch call it at start-up); a real cudaFree waits
# for the device.
FREE = r"(?i)free|release|unmap|unregister"
FREE_MIN_NS = 1000
# start-up calls a trace shows only by their length (queries/advice_warm.sql): a launch call
# of 1 ms and 100 times the rank's median launch loads its kernel's module; an allocator call
# of 50 ms initialises a context or library (and is no free for the churn count either)
SLOW_LAUNCH_NS = 1_000_000
SLOW_LAUNCH_FACTOR = 100
SLOW_ALLOC_NS = 50_000_000
WARM_PARAMS = {"slow_launch_ns": SLOW_LAUNCH_NS, "slow_launch_factor": SLOW_LAUNCH_FACTOR,
               "slow_alloc_ns": SLOW_ALLOC_NS}   # advice_warm.sql's parameters but the run
# the columns of the stall gaps the facts read
GAP_COLUMNS = ("rank", "device", "start_ns", "end_ns", "queued", "unattributed_ns")
# the gaps' cause columns (stalls_gaps.sql), and the order start-up time is carved out of
# them: start-up work runs in runtime/driver calls (module loads, slow first launches:
# launch_ns), in slow allocator calls (memory_ns), in threads the stall vocabulary does not
# see (unattributed_ns), in framework ops (host_ns)
CAUSE_COLUMNS = ("data_ns", "comm_ns", "sync_ns", "copy_ns", "memory_ns", "launch_ns", "host_ns", "unattributed_ns")
CARVE_ORDER = ("launch_ns", "memory_ns", "unattributed_ns", "host_ns", "sync_ns", "copy_ns")


def carve_warm(gaps: pl.DataFrame, warm: pl.DataFrame) -> pl.DataFrame:
    """The gaps (stalls_gaps.sql rows) with `warm_ns`, their time in start-up work, taken out
    of the cause columns in CARVE_ORDER (each gap's parts still add up to the gap)."""
    g = gaps.select("rank", "device", "start_ns", "end_ns", "gap_ns", "queued", *CAUSE_COLUMNS).with_columns(
        pl.col("rank").cast(pl.Int64), pl.col("device").cast(pl.Int64), pl.col("start_ns").cast(pl.Int64))
    if warm.height:
        g = g.join(warm.select("rank", "device", "start_ns", "warm_ns"), on=["rank", "device", "start_ns"], how="left")
    else:
        g = g.with_columns(warm_ns=pl.lit(None, pl.Int64))
    g = g.with_columns(pl.col("warm_ns").fill_null(0).clip(0, pl.col("gap_ns")).alias("warm_ns"))
    left = pl.col("warm_ns")
    out = g.with_columns(_left=left)
    for c in CARVE_ORDER:
        take = pl.min_horizontal(pl.col(c), pl.col("_left"))
        out = out.with_columns((pl.col(c) - take).alias(c), (pl.col("_left") - take).alias("_left"))
    return out.with_columns((pl.col("warm_ns") - pl.col("_left")).alias("warm_ns")).drop("_left")


@dataclass
class RunFacts:
    span_ns: int = 0            # Σ per device of the GPU span (the stall attribution's base)
    busy_ns: int = 0
    comm_ns: int = 0            # communication kernels, union
    exposed_comm_ns: int = 0    # ... during which no compute kernel runs
    comm_ops: int = 0
    copy_ns: int = 0            # copies and memsets, union
    exposed_copy_ns: int = 0    # ... during which no kernel runs
    frees: int = 0              # allocator calls giving memory back (FREE_MIN_NS to SLOW_ALLOC_NS long)
    reallocs: int = 0           # allocations after the rank's first free: churn
    allocs: int = 0
    # per gap (rank, device, start_ns): its idle time spent in start-up work
    warm: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(
        schema={"rank": pl.Int64, "device": pl.Int64, "start_ns": pl.Int64, "warm_ns": pl.Int64}))
    warm_calls: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(
        schema={"name": pl.String, "n": pl.Int64, "ns": pl.Int64}))
    # unexplained idle per user range (queries/advice_ranges.sql)
    ranges: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(
        schema={"range": pl.String, "idle_ns": pl.Int64, "gaps": pl.Int64, "instances": pl.Int64}))
    comm_kernels: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(
        schema={"name": pl.String, "n": pl.Int64, "ns": pl.Int64, "bytes": pl.Int64, "sized": pl.Int64,
                "sized_ns": pl.Int64, "group_size": pl.Int64}))
    # the stall gaps with their start-up time carved out of the causes (`carve_warm`)
    gaps: pl.DataFrame | None = None
    # the critical path of the scope's steps (traceq.advice.bound.PathFacts), set by
    # traceq.engine.path_facts where one is computed; None: the verdict without a path
    path: object | None = None
    # the time ledger's totals of the scope (traceq.engine.ledger.Ledger.totals: window_ns and
    # <label>_ns ...), set by traceq.engine.ledger.with_ledger; None: not computed
    ledger: dict | None = None
    # the same totals per rank ({rank: totals}), for the worst rank of a finding
    ledger_ranks: dict | None = None

    def late_ns(self, column: str) -> int:
        """Idle time of `column` (a cause column of the gaps) in gaps the host was late for."""
        g = self.gaps
        if g is None or not g.height:
            return 0
        return int(g.filter(~pl.col("queued").fill_null(False))[column].sum())

    def queued_ns(self, column: str) -> int:
        g = self.gaps
        if g is None or not g.height:
            return 0
        return int(g.filter(pl.col("queued").fill_null(False))[column].sum())

    def late_gaps(self, column: str) -> int:
        g = self.gaps
        if g is None or not g.height:
            return 0
        return g.filter(~pl.col("queued").fill_null(False) & (pl.col(column) > 0)).height

    @property
    def warm_ns(self) -> int:
        return int(self.warm["warm_ns"].sum()) if self.warm.height else 0

    @property
    def churn(self) -> bool:
        """Memory given back and allocated again, at least twice each: a pattern, not the
        caching allocator growing at warm-up."""
        return self.frees >= 2 and self.reallocs >= 2


def memory_params(by_rank: bool) -> dict:
    """The parameters of queries/advice_memory.sql but the run."""
    return {"free": FREE, "free_min": FREE_MIN_NS, "slow_alloc": SLOW_ALLOC_NS, "by_rank": by_rank}


def _gaps(stalls) -> pl.DataFrame:
    g = stalls.gaps
    if g.height == 0:
        return pl.DataFrame(schema={"rank": pl.Int64, "device": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64,
                                    "queued": pl.Boolean, "unattributed_ns": pl.Int64})
    return g.select([c for c in GAP_COLUMNS if c in g.columns]).with_columns(
        pl.col("rank").cast(pl.Int64), pl.col("device").cast(pl.Int64))


def run_facts(scope, stalls) -> RunFacts:
    """The facts of `scope` (one rank or several, in one process) for its Stalls result."""
    from ..store import register_pl

    con = scope.con
    install_macros(con)
    params = {"run": scope.run}
    busy = run_script(con, "advice_busy", params)
    f = RunFacts()
    if busy.height:
        for k in ("span_ns", "busy_ns", "comm_ns", "exposed_comm_ns", "comm_ops", "copy_ns", "exposed_copy_ns"):
            setattr(f, k, int(busy[k].sum() or 0))
    gaps = _gaps(stalls)
    # the allocator calls matter only where the GPU idled in them (churn or first touch)
    if gaps.height and int(stalls.gaps["memory_ns"].sum()):
        mem = run_script(con, "advice_memory", {**params, **memory_params(False)})
        if mem.height:
            f.frees, f.allocs, f.reallocs = (int(mem[c][0] or 0) for c in ("frees", "allocs", "reallocs"))
    if f.comm_ops:
        # per kernel name: launches, time, message bytes (gpu_ops.bytes of a collective: its
        # message size, when the trace gives it) and busbw_ns: Σ dur of the launches with a size,
        # and the group size (NCCL-tests bus bandwidth: queries/collectives.sql)
        f.comm_kernels = scope.df(
            "SELECT g.name, count(*) AS n, sum(g.end_ns - g.start_ns)::BIGINT AS ns, "
            "coalesce(sum(g.bytes), 0)::BIGINT AS bytes, count(g.bytes)::BIGINT AS sized, "
            "coalesce(sum(g.end_ns - g.start_ns) FILTER (g.bytes IS NOT NULL), 0)::BIGINT AS sized_ns, "
            "max(g.group_size)::BIGINT AS group_size FROM gpu_ops g "
            "JOIN scope_window w ON w.rank = g.rank WHERE g.run = $run AND g.category = 'communication' "
            "AND g.kind = 'kernel' AND (w.lo_ns IS NULL OR (g.start_ns >= w.lo_ns AND g.start_ns < w.hi_ns)) "
            "GROUP BY g.name ORDER BY ns DESC, g.name")
    if gaps.height:
        register_pl(con, "af_gaps", gaps)
        try:
            f.warm = run_script(con, "advice_warm", {**params, "slow_launch_ns": SLOW_LAUNCH_NS,
                                                     "slow_launch_factor": SLOW_LAUNCH_FACTOR,
                                                     "slow_alloc_ns": SLOW_ALLOC_NS})
        finally:
            con.unregister("af_gaps")
        f.gaps = carve_warm(stalls.gaps, f.warm)
        # the unexplained idle time left once start-up time is carved out, in gaps the host
        # was late for: named by user ranges (when there is any)
        if f.late_ns("unattributed_ns"):
            register_pl(con, "af_gaps", f.gaps)
            try:
                f.ranges = run_script(con, "advice_ranges", {**params, "by_rank": False}).drop("rank")
            finally:
                con.unregister("af_gaps")
        if f.warm.height:
            # the start-up calls advice_warm.sql found (aw_calls), per name
            f.warm_calls = scope.df("SELECT name, count(*) AS n, sum(end_ns - start_ns)::BIGINT AS ns FROM aw_calls "
                                    "GROUP BY name ORDER BY ns DESC, name")
    return f


def run_facts_by_rank(scope, stalls, per_rank: dict) -> dict:
    """`run_facts` of each rank of the scope alone, in one pass over all of them: `stalls` the
    scope's Stalls (every rank's gaps), `per_rank` {rank: that rank's Stalls}. Each query runs
    once with the rank in its grouping and its rows are split by rank."""
    from ..store import register_pl

    con = scope.con
    install_macros(con)
    params = {"run": scope.run}
    out = {r: RunFacts() for r in per_rank}
    busy = run_script(con, "advice_busy", params)
    for (r,), b in busy.partition_by("rank", as_dict=True).items():
        if r in out:
            for k in ("span_ns", "busy_ns", "comm_ns", "exposed_comm_ns", "comm_ops", "copy_ns", "exposed_copy_ns"):
                setattr(out[r], k, int(b[k].sum() or 0))
    gapped = [r for r, st in per_rank.items() if st.gaps.height]
    if any(int(per_rank[r].gaps["memory_ns"].sum()) for r in gapped):
        mem = run_script(con, "advice_memory", {**params, **memory_params(True)})
        for row in mem.iter_rows(named=True):
            r = row["rank"]
            if r in gapped and int(per_rank[r].gaps["memory_ns"].sum()):
                f = out[r]
                f.frees, f.allocs, f.reallocs = (int(row[c] or 0) for c in ("frees", "allocs", "reallocs"))
    if any(f.comm_ops for f in out.values()):
        comm = scope.df(
            "SELECT g.rank, g.name, count(*) AS n, sum(g.end_ns - g.start_ns)::BIGINT AS ns, "
            "coalesce(sum(g.bytes), 0)::BIGINT AS bytes, count(g.bytes)::BIGINT AS sized, "
            "coalesce(sum(g.end_ns - g.start_ns) FILTER (g.bytes IS NOT NULL), 0)::BIGINT AS sized_ns, "
            "max(g.group_size)::BIGINT AS group_size FROM gpu_ops g "
            "JOIN scope_window w ON w.rank = g.rank WHERE g.run = $run AND g.category = 'communication' "
            "AND g.kind = 'kernel' AND (w.lo_ns IS NULL OR (g.start_ns >= w.lo_ns AND g.start_ns < w.hi_ns)) "
            "GROUP BY g.rank, g.name ORDER BY g.rank, ns DESC, g.name")
        for (r,), d in comm.partition_by("rank", as_dict=True).items():
            if r in out and out[r].comm_ops:
                out[r].comm_kernels = d.drop("rank")
    if not gapped:
        return out
    gaps = _gaps(stalls)
    register_pl(con, "af_gaps", gaps)
    try:
        warm = run_script(con, "advice_warm", {**params, **WARM_PARAMS})
    finally:
        con.unregister("af_gaps")
    warm_of = dict(_split(warm))
    carved = dict(_split(carve_warm(stalls.gaps, warm)))
    for r in gapped:
        out[r].warm = warm_of.get(r, warm.clear())
        out[r].gaps = carved[r]
    late = [r for r in gapped if out[r].late_ns("unattributed_ns")]
    if late:
        register_pl(con, "af_gaps", pl.concat([out[r].gaps for r in late]))
        try:
            ranges = run_script(con, "advice_ranges", {**params, "by_rank": True})
        finally:
            con.unregister("af_gaps")
        of = dict(_split(ranges))
        for r in late:
            out[r].ranges = of[r].drop("rank") if r in of else ranges.clear().drop("rank")
    if warm.height:
        calls = scope.df("SELECT rank, name, count(*) AS n, sum(end_ns - start_ns)::BIGINT AS ns FROM aw_calls "
                         "GROUP BY rank, name ORDER BY rank, ns DESC, name")
        of = dict(_split(calls))
        for r in gapped:
            if out[r].warm.height:
                out[r].warm_calls = of[r].drop("rank") if r in of else calls.clear().drop("rank")
    return out


def _split(df: pl.DataFrame):
    """(rank, its rows) of a frame with a rank column, in the frame's order."""
    return ((r, d) for (r,), d in df.partition_by("rank", as_dict=True).items())


def _sum_named(frames: list[pl.DataFrame], key: str, sums: tuple[str, ...], by: str,
               maxes: tuple[str, ...] = ()) -> pl.DataFrame:
    df = pl.concat([x for x in frames if x.height], how="vertical_relaxed") if any(x.height for x in frames) else frames[0]
    if not df.height:
        return df
    aggs = [pl.col(c).sum() for c in sums] + [pl.col(c).max() for c in maxes]
    return df.group_by(key).agg(aggs).sort([by, key], descending=[True, False]).select(df.columns)


def merge_facts(parts: list[RunFacts]) -> RunFacts:
    """The facts of several ranks: numbers summed, per-gap rows concatenated, named rows
    summed per name, their critical paths added up (advice.bound.merge_paths)."""
    if not parts:
        return RunFacts()
    f = RunFacts()
    for k in ("span_ns", "busy_ns", "comm_ns", "exposed_comm_ns", "comm_ops", "copy_ns", "exposed_copy_ns",
              "frees", "reallocs", "allocs"):
        setattr(f, k, sum(getattr(p, k) for p in parts))
    f.warm = pl.concat([p.warm for p in parts], how="vertical_relaxed")
    gaps = [p.gaps for p in parts if p.gaps is not None and p.gaps.height]
    f.gaps = pl.concat(gaps, how="vertical_relaxed") if gaps else None
    f.warm_calls = _sum_named([p.warm_calls for p in parts], "name", ("n", "ns"), "ns")
    f.comm_kernels = _sum_named([p.comm_kernels for p in parts], "name", ("n", "ns", "bytes", "sized", "sized_ns"),
                                "ns", ("group_size",))
    f.ranges = _sum_named([p.ranges for p in parts], "range", ("idle_ns", "gaps", "instances"), "idle_ns")
    f.path = merge_paths([p.path for p in parts])
    kept = [p.ledger for p in parts if p.ledger is not None]
    f.ledger = {k: sum(x[k] for x in kept) for k in kept[0]} if kept else None
    f.ledger_ranks = {r: t for p in parts if p.ledger_ranks for r, t in p.ledger_ranks.items()} or None
    return f
