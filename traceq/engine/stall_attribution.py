"""The stall attribution: GPU idle gaps and what the host was doing meanwhile, and the host's
data wait per step. Shared by the stalls, diagnose and compare analyses and by the run's
findings (the SQL is traceq/queries/stalls*.sql, each file stating its definition).

`stalls_scoped(scope, min_gap_us, data_pattern)` returns a `Stalls` result with four tables:
  causes  GPU idle time in gaps >= min gap, by what the host was doing, in the fixed
          vocabulary data_loading, communication, synchronization, blocking_copy,
          memory_management, launch_overhead, host_compute, unattributed (stalls.sql)
  steps   per step: data wait, GPU idle while waiting, shares of step time (stalls_steps.sql)
  gaps    every gap with its time split by cause (stalls_gaps.sql)
  launch  launch statistics per rank: launches, CPU launch time, launch delay, short
          kernels, CUDA-graph launches (launch_stats.sql)
`reduce_stalls` gives the same result for a run mapped over its ranks.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..lazy import polars as pl

from ..advice.stall_advice import DATA_WAIT_ADVICE_PCT
from ..queries import install_macros, load as load_sql
from .per_rank import concat
from .scope import Scope, check_regex

DEFAULT_MIN_GAP_US = 50.0


@dataclass
class Stalls:
    causes: pl.DataFrame
    steps: pl.DataFrame
    gaps: pl.DataFrame
    min_gap_us: float
    data_pattern: str | None = None
    single_process_loader: bool = False   # a DataLoader with num_workers=0 was seen
    launch: pl.DataFrame | None = None    # launch statistics per rank (launch_stats.sql)
    pytorch: bool = False                 # PyTorch evidence (framework.sql): advice may name PyTorch APIs
    # the host calls the stall rules cite, counted per rank and summed by a map over ranks
    # (traceq.engine.per_rank): SQL condition -> calls per name; None: the rules query the scope
    host_calls: dict | None = None
    # the facts diagnose's verdict and the newer rules read beside the stalls
    # (traceq.advice.run_facts.RunFacts): computed by the findings when None
    facts: object | None = None
    # the time ledger's idle in words, set by `traceq stalls` (traceq.analyses.stalls.ledger_words)
    ledger_words: str | None = None
    # the time ledger's totals of the scope (traceq.engine.ledger.Ledger.totals), set with
    # ledger_words: the stall advice follows its largest idle cause
    ledger: dict | None = None

    # ------------------------------------------------------------------ derived numbers
    def data_wait_pct(self) -> float | None:
        """Host data wait as a share of all step time, % (None without steps)."""
        total = self.steps["step_ns"].sum() if self.steps.height else 0
        if not total:
            return None
        return 100.0 * self.steps["data_wait_ns"].sum() / total

    def queued_ns(self, column: str) -> int:
        """Gap time of `column` (stalls_gaps.sql: host_ns, launch_ns, gap_ns, ...) in gaps whose
        next GPU op was already launched when the gap began (`queued`): there the GPU waited on
        something other than the host."""
        g = self.gaps
        if g.height == 0 or "queued" not in g.columns:
            return 0
        return int(g.filter(pl.col("queued").fill_null(False))[column].sum())

    def queued_gaps(self) -> int:
        g = self.gaps
        return int(g["queued"].fill_null(False).sum()) if g.height and "queued" in g.columns else 0

    @property
    def wait_words(self) -> str:
        """What the host's data wait is called: "DataLoader wait" in a PyTorch program, else
        "data wait" (timer IO or --data-pattern regions of any program)."""
        return "DataLoader wait" if self.pytorch else "data wait"

    def data_bound(self) -> bool:
        pct = self.data_wait_pct()
        return pct is not None and pct > DATA_WAIT_ADVICE_PCT


def _check_pattern(con, pattern: str | None) -> None:
    if pattern is not None:
        check_regex(con, "--data-pattern", pattern)


def check_stalls_args(scope: Scope, min_gap_us: float, data_pattern: str | None) -> str | None:
    """Fail on a bad --min-gap-us or --data-pattern before any work; the pattern (None if empty)."""
    from ..errors import TraceqError

    if min_gap_us < 0:
        raise TraceqError(f"--min-gap-us {min_gap_us}: must be >= 0")
    data_pattern = data_pattern or None
    _check_pattern(scope.con, data_pattern)
    return data_pattern


def _stage(scope: Scope, min_gap_us: float, data_pattern: str | None, gaps: bool = True) -> str | None:
    """The temp tables the stall queries read: st_busy, st_data and st_gaps (with `gaps`
    False, st_gaps has its columns and no rows: DuckDB plans `WHERE false` as an empty result).
    st_gaps is stalls_gaps.sql over the levels the sweep gave each gap (st_gap_levels:
    stalls_activity.sql, then traceq.engine.level_sweep). Returns the data pattern as checked
    (None if empty)."""
    data_pattern = check_stalls_args(scope, min_gap_us, data_pattern)
    install_macros(scope.con)
    scope.ensure_steps()
    scope.ensure_links(empty=not gaps)
    params = {"min_gap_ns": int(round(min_gap_us * 1000)), "data_pattern": data_pattern}
    for table, sql in (("st_busy", "stalls_busy"), ("st_data", "stalls_data")):
        scope.df(f"CREATE OR REPLACE TEMP TABLE {table} AS " + load_sql(sql), params)
    _gap_levels(scope, params if gaps else None)
    sql = load_sql("stalls_gaps") if gaps else f"SELECT * FROM ({load_sql('stalls_gaps')}) WHERE false"
    scope.df("CREATE OR REPLACE TEMP TABLE st_gaps AS " + sql, params)
    return data_pattern


def _gap_levels(scope: Scope, params: dict | None) -> None:
    """Temp table st_gap_levels(rank, device, start_ns, l1..l7): each gap's time by the lowest
    level of host activity covering it (the sweep, traceq.engine.level_sweep, over
    stalls_activity.sql's rows; no rows when `params` is None)."""
    from ..store import register_pl
    from .level_sweep import LEVELS, gap_levels

    if params is None:   # no gaps: the empty table, without loading numpy for the sweep
        cols = ", ".join(f"NULL::BIGINT AS l{k}" for k in range(1, LEVELS + 1))
        scope.con.execute("CREATE OR REPLACE TEMP TABLE st_gap_levels AS SELECT NULL::INTEGER AS rank, "
                          f"NULL::INTEGER AS device, NULL::BIGINT AS start_ns, {cols} WHERE false")
        return
    rows = scope.df(load_sql("stalls_activity"), params)
    levels = pl.DataFrame(gap_levels(*(rows[c].to_numpy() for c in ("rank", "device", "start_ns", "end_ns", "level"))),
                          schema={"rank": pl.Int32, "device": pl.Int32, "start_ns": pl.Int64,
                                  **{f"l{k}": pl.Int64 for k in range(1, LEVELS + 1)}})
    register_pl(scope.con, "st_gap_levels_df", levels)
    scope.con.execute("CREATE OR REPLACE TEMP TABLE st_gap_levels AS SELECT * FROM st_gap_levels_df")
    scope.con.unregister("st_gap_levels_df")


def stalls_scoped(scope: Scope, min_gap_us: float = DEFAULT_MIN_GAP_US, data_pattern: str | None = None) -> Stalls:
    data_pattern = _stage(scope, min_gap_us, data_pattern)
    causes = scope.df(load_sql("stalls"))
    steps = scope.df(load_sql("stalls_steps"))
    gaps = scope.df("SELECT * FROM st_gaps ORDER BY rank, device, start_ns")
    single = bool(scope.df(
        "SELECT count(*) AS n FROM regions r JOIN scope_window w ON w.rank = r.rank "
        "WHERE r.run = $run AND r.source = 'dataloader' AND coalesce(r.domain, '') <> 'gpu' "
        "AND r.name LIKE '%SingleProcessDataLoaderIter%'")["n"][0])
    launch = scope.df(load_sql("launch_stats"))
    pytorch = bool(scope.df(load_sql("framework"))["pytorch"][0])
    return Stalls(causes, steps, gaps, min_gap_us, data_pattern, single, launch, pytorch)


def data_steps(scope: Scope, data_pattern: str | None = None) -> pl.DataFrame:
    """The scope's steps with their host data wait: stalls_steps.sql's rank, step, step_source,
    start_ns, step_ns, data_wait_ns and data_wait_pct, as `stalls_scoped(scope).steps` has
    them, without the GPU gaps and their causes (the GPU idle columns are left out): what
    compare, model and check need of every run (a fifth of the time per run)."""
    _stage(scope, DEFAULT_MIN_GAP_US, data_pattern, gaps=False)
    steps = scope.df(load_sql("stalls_steps"))
    return steps.select("rank", "step", "step_source", "start_ns", "step_ns", "data_wait_ns", "data_wait_pct")


def rank_stalls(scope: Scope, min_gap_us: float, data_pattern: str | None) -> tuple[Stalls, pl.DataFrame]:
    """One rank's part of a run's stalls: its Stalls, and per device its first op start and
    last op end (all that stalls.sql reads of st_busy)."""
    st = stalls_scoped(scope, min_gap_us, data_pattern)
    ends = scope.df("SELECT key, min(start_ns) AS start_ns, max(end_ns) AS end_ns FROM st_busy GROUP BY key")
    return st, ends


def reduce_stalls(scope: Scope, parts: list[Stalls], busy_ends: list[pl.DataFrame], min_gap_us: float,
                  data_pattern: str | None) -> Stalls:
    """The run's Stalls from every rank's (`rank_stalls`): causes by stalls.sql over all gaps
    and each device's busy ends; steps, gaps and launch rows concatenated; host calls summed
    per name."""
    from ..store import fetch_pl, register_pl

    gaps = concat([p.gaps for p in parts])
    con = scope.con
    register_pl(con, "st_busy", concat(busy_ends))
    register_pl(con, "st_gaps", gaps)
    try:
        causes = fetch_pl(con, load_sql("stalls"))
    finally:
        con.unregister("st_busy")
        con.unregister("st_gaps")
    res = Stalls(causes, concat([p.steps for p in parts]), gaps, min_gap_us, data_pattern,
                 any(p.single_process_loader for p in parts), concat([p.launch for p in parts]),
                 any(p.pytorch for p in parts))
    res.host_calls = {where: _sum_calls([p.host_calls[where] for p in parts]) for where in parts[0].host_calls} \
        if parts and all(p.host_calls is not None for p in parts) else None
    return res


def _sum_calls(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """Host calls per name (traceq.advice.rules.stall_facts.host_calls) of every rank, summed."""
    df = concat(frames)
    if not df.height:
        return frames[0]
    return (df.group_by("name").agg(pl.col("n").sum(), pl.col("ns").sum())
              .sort(["ns", "name"], descending=[True, False]))
