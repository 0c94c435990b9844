"""Per-rank analyses on the executor: an analysis of a run with several ranks as a map over
ranks and a small reduce.

Map: `RankTask(fn, ...)(rank)` runs on the executor (traceq.executor.run_map: this process
for a few ranks, a process pool, or Dask workers). It opens a scope on that rank's files
alone (`open_scope(..., only_rank=True)`), calls the analysis module's rank function `fn`
(a module-level function, so the task pickles) and returns its small frames. No process
ever holds more than one rank's events.

Reduce, in the client, to exactly what the SQL gives over the whole run: each analysis
module reduces its own parts (rows per rank concatenate; sums and counts add up through the
same SQL that runs in one process). Two inputs are not decomposable and are read in the
client with a small pass of their own: `--window hta` needs the number of distinct
*ProfilerStep* names of the whole run (`run_step_names`, before the map), and
`breakdown --by timer` needs every timer instance for its medians (read in one process).

A task that meets bad input (e.g. a rank without the steps --steps asks for) returns the
error; the client raises the one of the lowest rank, as the single-process path does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..lazy import polars as pl

from ..errors import TraceqError
from ..executor import ExecutorSpec, run_map
from .scope import IN_PROCESS_RANKS, Scope, open_scope



def mapped(scope: Scope) -> bool:
    """True when the scope is a run of several ranks to analyse as a map over ranks."""
    return scope.executor is not None


# ------------------------------------------------------------------ map: one rank
@dataclass(frozen=True)
class RankTask:
    """Picklable task: rank -> that rank's partial result, `fn(scope, **params)` (small frames)."""

    fn: Callable
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
                return {"rank": rank, "out": self.fn(scope, **dict(self.params))}
            finally:
                scope.con.close()
        except TraceqError as exc:   # returned, not raised: the client raises the lowest rank's
            return {"rank": rank, "error": (exc.problem, exc.path)}


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


def map_ranks(scope: Scope, fn: Callable, window: str | None = None, **params) -> list[dict]:
    """Run `fn` on every rank of the scope on its executor; the per-rank outputs in rank order."""
    import os

    ranks = [r[0] for r in scope.con.execute("SELECT rank FROM scope_window ORDER BY rank").fetchall()]
    if window is not None:
        params["window"] = window
    names = run_step_names(scope) if window == "hta" else None
    task = RankTask(fn, os.path.abspath(scope.store.path), scope.run, scope.steps, scope.step_pattern,
                    scope.skip_first, names, tuple(sorted(params.items())))
    got = sorted(run_map(task, ranks, executor_for(scope.executor, len(ranks))), key=lambda g: g["rank"])
    for g in got:
        if "error" in g:
            raise TraceqError(*g["error"])
    return [g["out"] for g in got]


def concat(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """The ranks' frames one after the other (an empty frame when there are none)."""
    return pl.concat(frames, how="vertical_relaxed") if frames else pl.DataFrame()
