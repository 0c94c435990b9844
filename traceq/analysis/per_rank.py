"""Per-rank analyses on the executor (DESIGN §8): summary, overlap, stalls, breakdown and
diagnose of a run with several ranks, as a map over ranks and a small reduce.

Map: `RankTask(analysis, ...)(rank)` runs on the executor (traceq.executor.run_map: this
process for a few ranks, a process pool, or Dask workers). It opens a scope on that rank's
files alone (`open_scope(..., only_rank=True)`), runs the analysis' SQL and returns small
frames. No process ever holds more than one rank's events.

Reduce, in the client, to exactly what the SQL gives over the whole run:
- rows that are per rank (summary, overlap by rank and by step, stalls steps/gaps/launch,
  diagnose) concatenate, in rank order;
- overlap across ranks (min/median/max) runs queries/overlap_ranks.sql on the per-rank rows,
  as it always did;
- stalls causes: queries/stalls.sql on every rank's gaps (st_gaps) and per device its first
  op start and last op end (all that stalls.sql reads of st_busy): sums and counts;
- breakdown: each rank returns its sums and counts per region (breakdown_rank.sql);
  breakdown.sql adds them up (the mean is Σ sums / Σ counts), the same SQL as in one process;
- the "Fix first" line: the advice evidence (advice_run.sql, advice_ops.sql) is counts and
  sums, merged by traceq.advice.base.merge_evidence; its stall rules read every rank's
  stalls at diagnose's defaults, reduced as the stalls causes are, and the host calls those
  rules cite (allocator and sync calls per name), counted per rank and summed.
Two inputs are not decomposable and are read in the client with a small pass of their own:
`--window hta` needs the number of distinct *ProfilerStep* names of the whole run (one
DuckDB count over the region names before the map), and `breakdown --by timer` needs every
timer instance for its medians (timer regions: a few per step; that analysis reads them in
one process).

A task that meets bad input (e.g. a rank without the steps --steps asks for) returns the
error; the client raises the one of the lowest rank, as the single-process path does.
"""
from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from ..errors import TraceqError
from ..executor import ExecutorSpec, run_map
from ..store import register_pl
from .scope import Scope, open_scope

# Without --jobs, the local executor runs this many ranks or fewer in this process, one after
# the other (a spawned pool costs more than it saves); more ranks get a process pool.
IN_PROCESS_RANKS = 8


def mapped(scope: Scope) -> bool:
    """True when the scope is a run of several ranks to analyse as a map over ranks."""
    return scope.executor is not None


# ------------------------------------------------------------------ map: one rank
@dataclass(frozen=True)
class RankTask:
    """Picklable task: rank -> that rank's partial result of `analysis` (small frames)."""

    analysis: str
    store_path: str
    run: str
    steps: str | None
    step_pattern: str | None
    skip_first: int
    run_step_names: int | None
    params: tuple = ()

    def __call__(self, rank: int) -> dict:
        try:
            scope = open_scope(self.store_path, self.run, rank, self.steps, self.step_pattern, self.skip_first,
                               only_rank=True)
            scope.run_step_names = self.run_step_names
            try:
                return {"rank": rank, "out": _MAP[self.analysis](scope, **dict(self.params))}
            finally:
                scope.con.close()
        except TraceqError as exc:   # returned, not raised: the client raises the lowest rank's
            return {"rank": rank, "error": (exc.problem, exc.path)}


def _evidence(scope: Scope):
    from ..advice.base import evidence_parts

    return evidence_parts(scope)


def _advice_rank(scope: Scope, min_gap_us: float | None = None, data_pattern: str | None = None) -> dict:
    """What the run's findings need of one rank (the "Fix first" line): its Stalls (at
    diagnose's default minimum gap unless given), per device its first op start and last op
    end, the host calls the stall rules cite, and its advice evidence parts."""
    from ..advice.rules import HOST_CALLS
    from ..advice.rules._stall import host_calls
    from .stalls import DEFAULT_MIN_GAP_US, stalls_scoped

    st = stalls_scoped(scope, DEFAULT_MIN_GAP_US if min_gap_us is None else min_gap_us, data_pattern)
    ends = scope.df("SELECT key, min(start_ns) AS start_ns, max(end_ns) AS end_ns FROM st_busy GROUP BY key")
    st.host_calls = {where: host_calls(scope, where) for where in HOST_CALLS}
    return {"stalls": st, "busy_ends": ends, "ev": _evidence(scope)}


def _summary_rank(scope: Scope, window: str, advice: bool = True) -> dict:
    from .summary import summary_scoped

    return {"df": summary_scoped(scope, window), **(_advice_rank(scope) if advice else {})}


def _overlap_rank(scope: Scope, window: str, by: str, advice: bool = True) -> dict:
    from .overlap import overlap_rows, prepare_overlap

    prepare_overlap(scope, window)
    return {"rank": overlap_rows(scope, "rank"), "step": overlap_rows(scope, "step") if by == "step" else None,
            **(_advice_rank(scope) if advice else {})}


def _breakdown_rank(scope: Scope, by: str, advice: bool = True) -> dict:
    from .breakdown import partials_scoped

    return {"partials": partials_scoped(scope, by), **(_advice_rank(scope) if advice else {})}


def _stalls_rank(scope: Scope, min_gap_us: float, data_pattern: str | None) -> dict:
    return _advice_rank(scope, min_gap_us, data_pattern)


def _diagnose_rank(scope: Scope, min_gap_us: float) -> dict:
    from .diagnose import diagnose_scoped

    return {"row": diagnose_scoped(scope, min_gap_us).row(0, named=True)}


_MAP = {"summary": _summary_rank, "overlap": _overlap_rank, "breakdown": _breakdown_rank,
        "stalls": _stalls_rank, "diagnose": _diagnose_rank}


# ------------------------------------------------------------------ the map
def run_step_names(scope: Scope) -> int:
    """Distinct *ProfilerStep* names over the whole run (the HTA window's rule): one count over
    the region names, streamed by DuckDB from every rank's regions file."""
    con = scope.store.connect(runs=[scope.run])
    try:
        return int(con.execute("SELECT count(DISTINCT name) FROM regions WHERE run = $run AND name LIKE '%ProfilerStep%'",
                               {"run": scope.run}).fetchone()[0])
    finally:
        con.close()


def executor_for(spec: ExecutorSpec, ranks: int) -> ExecutorSpec:
    if spec.kind == "local" and spec.jobs is None and ranks <= IN_PROCESS_RANKS:
        return ExecutorSpec("local", jobs=1)
    return spec


def map_ranks(scope: Scope, analysis: str, window: str | None = None, **params) -> list[dict]:
    """Run `analysis` on every rank of the scope on its executor; the per-rank outputs in rank order."""
    import os

    ranks = [r[0] for r in scope.con.execute("SELECT rank FROM scope_window ORDER BY rank").fetchall()]
    if window is not None:
        params["window"] = window
    names = run_step_names(scope) if window == "hta" else None
    task = RankTask(analysis, os.path.abspath(scope.store.path), scope.run, scope.steps, scope.step_pattern,
                    scope.skip_first, names, tuple(sorted(params.items())))
    got = sorted(run_map(task, ranks, executor_for(scope.executor, len(ranks))), key=lambda g: g["rank"])
    for g in got:
        if "error" in g:
            raise TraceqError(*g["error"])
    return [g["out"] for g in got]


def _concat(frames: list[pl.DataFrame]) -> pl.DataFrame:
    return pl.concat(frames, how="vertical_relaxed") if frames else pl.DataFrame()


def _map_with_findings(scope: Scope, analysis: str, window: str | None = None, **params) -> tuple[list[dict], list]:
    """`map_ranks` and the run's findings: those kept beside the store (traceq.advice.cache),
    the ranks' tasks then skipping what the findings need; else computed from the parts the
    tasks return, and kept."""
    from ..advice import cache

    key, fs = cache.load(scope)
    outs = map_ranks(scope, analysis, window, advice=fs is None, **params)
    return outs, fs if fs is not None else _findings(scope, outs, key)


def _findings(scope: Scope, outs: list[dict], key: str | None, stalls=None) -> list:
    """The run's findings, kernel and stall rules (traceq.advice.run_findings) from the
    ranks' parts; `stalls`: the run's Stalls when already reduced. Kept beside the store
    under `key` (None: not kept, the stalls are not at diagnose's defaults)."""
    from ..advice import cache, findings
    from ..advice.base import merge_evidence
    from .stalls import DEFAULT_MIN_GAP_US

    st = stalls if stalls is not None else _reduce_stalls(scope, outs, DEFAULT_MIN_GAP_US, None)
    fs = findings(scope, st, merge_evidence([o["ev"] for o in outs]))
    if key is not None:
        cache.save(scope, key, fs)
    return fs


def _reduce_stalls(scope: Scope, outs: list[dict], min_gap_us: float, data_pattern: str | None):
    """The run's Stalls from every rank's: causes by stalls.sql over all gaps and each
    device's busy ends; steps, gaps and launch rows concatenated; host calls summed per name."""
    from .. import queries
    from ..store import fetch_pl
    from .stalls import Stalls

    parts = [o["stalls"] for o in outs]
    gaps = _concat([p.gaps for p in parts])
    con = scope.con
    register_pl(con, "st_busy", _concat([o["busy_ends"] for o in outs]))
    register_pl(con, "st_gaps", gaps)
    try:
        causes = fetch_pl(con, queries.load("stalls"))
    finally:
        con.unregister("st_busy")
        con.unregister("st_gaps")
    res = Stalls(causes, _concat([p.steps for p in parts]), gaps, min_gap_us, data_pattern,
                 any(p.single_process_loader for p in parts), _concat([p.launch for p in parts]),
                 any(p.pytorch for p in parts))
    res.host_calls = {where: _sum_calls([p.host_calls[where] for p in parts]) for where in parts[0].host_calls} \
        if parts and all(p.host_calls is not None for p in parts) else None
    return res


def _sum_calls(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """Host calls per name (traceq.advice.rules._stall.host_calls) of every rank, summed."""
    df = _concat(frames)
    if not df.height:
        return frames[0]
    return (df.group_by("name").agg(pl.col("n").sum(), pl.col("ns").sum())
              .sort(["ns", "name"], descending=[True, False]))


# ------------------------------------------------------------------ reduce, per analysis
def summary(scope: Scope, window: str) -> tuple[pl.DataFrame, list]:
    """(summary rows of every rank, the findings of the run: kernel and stall rules)."""
    from .summary import _SCHEMA, check_window

    outs, fs = _map_with_findings(scope, "summary", check_window(window))
    df = _concat([o["df"] for o in outs])
    return (df.cast(_SCHEMA) if df.height else pl.DataFrame(schema=_SCHEMA)), fs


def overlap(scope: Scope, window: str, by: str) -> tuple[pl.DataFrame, pl.DataFrame | None, list]:
    """(rank rows, step rows when by == "step", findings)."""
    from .overlap import _SCHEMA, check_by
    from .summary import check_window

    outs, fs = _map_with_findings(scope, "overlap", check_window(window), by=check_by(by))
    ranks = _concat([o["rank"] for o in outs])
    ranks = ranks.cast(_SCHEMA) if ranks.height else pl.DataFrame(schema=_SCHEMA)
    steps = None
    if by == "step":
        steps = _concat([o["step"] for o in outs])
        steps = steps.cast(_SCHEMA) if steps.height else pl.DataFrame(schema=_SCHEMA)
    return ranks, steps, fs


def breakdown(scope: Scope, by: str) -> tuple[pl.DataFrame, list]:
    from .breakdown import _sources, reduce_partials

    _sources(by)
    outs, fs = _map_with_findings(scope, "breakdown", by=by)
    return reduce_partials(scope.con, _concat([o["partials"] for o in outs])), fs


def stalls(scope: Scope, min_gap_us: float, data_pattern: str | None):
    """(the run's Stalls, findings): causes from every rank's gaps and GPU span (stalls.sql);
    the findings' stall rules read these stalls (the command's minimum gap and data pattern)."""
    from ..advice import cache
    from .stalls import check_stalls_args

    data_pattern = check_stalls_args(scope, min_gap_us, data_pattern)
    outs = map_ranks(scope, "stalls", min_gap_us=min_gap_us, data_pattern=data_pattern)
    res = _reduce_stalls(scope, outs, min_gap_us, data_pattern)
    key, fs = cache.load(scope, res)
    return res, fs if fs is not None else _findings(scope, outs, key, res)


def diagnose(scope: Scope, min_gap_us: float) -> pl.DataFrame:
    from .diagnose import SCHEMA

    outs = map_ranks(scope, "diagnose", min_gap_us=min_gap_us)
    return pl.DataFrame([o["row"] for o in outs], schema=SCHEMA)
