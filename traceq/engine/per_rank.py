"""Per-rank analyses on the executor: an analysis of a run with several ranks as a map over
ranks and a small reduce.

Map: `RankTask(fn, ...)(ranks)` runs on the executor (traceq.executor.run_map: this process,
a process pool, or Dask workers) for a batch of ranks. It opens one scope on those ranks'
files alone (`open_scope(..., only_ranks=...)`: one DuckDB connection, every query over the
batch at once, grouped by rank), calls the analysis module's part function `fn` (a
module-level function, so the task pickles) and returns its small frames. Batches are
contiguous ranks of about BATCH_EVENTS events (scope.py), and at least one per worker: a
task pays its start-up once per batch, not once per rank, and no process holds more than a
batch's events. A part covers every rank of its batch (rows of several ranks; sums over them).

Reduce, in the client, to exactly what the SQL gives over the whole run: each analysis
module reduces its own parts (rows per rank concatenate; sums and counts add up through the
same SQL that runs in one process). Two inputs are not decomposable and are read in the
client with a small pass of their own: `--window hta` needs the number of distinct
*ProfilerStep* names of the whole run (`run_step_names`, before the map), and
`breakdown --by timer` needs every timer instance for its medians (read in one process).

A task that meets bad input (e.g. a rank without the steps --steps asks for) returns the
error; the client raises the one of the lowest batch, as the single-process path does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..lazy import polars as pl

from ..errors import TraceqError
from ..executor import ExecutorSpec, run_map
from .scope import BATCH_EVENTS, Scope, open_scope, run_events



def mapped(scope: Scope) -> bool:
    """True when the scope is a run of several ranks to analyse as a map over ranks."""
    return scope.executor is not None


# ------------------------------------------------------------------ map: one rank
@dataclass(frozen=True)
class RankTask:
    """Picklable task: a batch of ranks -> its partial result, `fn(scope, **params)` (small frames)."""

    fn: Callable
    store_path: str
    run: str
    steps: str | None
    step_pattern: str | None
    skip_first: int
    run_step_names: int | None
    params: tuple = ()

    def __call__(self, ranks: tuple[int, ...]) -> dict:
        try:
            scope = open_scope(self.store_path, self.run, None, self.steps, self.step_pattern, self.skip_first,
                               only_ranks=ranks)
            scope.run_step_names = self.run_step_names
            try:
                return {"rank": ranks[0], "out": self.fn(scope, **dict(self.params))}
            finally:
                scope.con.close()
        except TraceqError as exc:   # returned, not raised: the client raises the lowest batch's
            return {"rank": ranks[0], "error": (exc.problem, exc.path)}


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


def workers(spec: ExecutorSpec) -> int:
    """How many tasks the executor runs at once (Dask: asked of the cluster when one is named)."""
    import os

    return spec.jobs or (os.cpu_count() or 1)


def batches(events: dict[int, int], n_workers: int, batch_events: int = BATCH_EVENTS) -> list[tuple[int, ...]]:
    """The ranks (rank -> events) cut into contiguous batches of about `batch_events` events,
    and into at least `n_workers` batches when there are that many ranks (every worker busy)."""
    ranks = sorted(events)
    total = sum(events.values())
    n = max(1, min(len(ranks), max(n_workers, -(-total // max(batch_events, 1)))))
    per = total / n
    out: list[tuple[int, ...]] = []
    cur: list[int] = []
    acc = 0
    for i, r in enumerate(ranks):
        cur.append(r)
        acc += events[r]
        left_ranks, left_batches = len(ranks) - i - 1, n - len(out) - 1
        if left_batches > 0 and (acc >= per * (len(out) + 1) or left_ranks == left_batches):
            out.append(tuple(cur))
            cur = []
    if cur:
        out.append(tuple(cur))
    return out


def map_ranks(scope: Scope, fn: Callable, window: str | None = None, **params) -> list[dict]:
    """Run `fn` on every batch of ranks of the scope on its executor; the parts in rank order."""
    import os

    ranks = [r[0] for r in scope.con.execute("SELECT rank FROM scope_window ORDER BY rank").fetchall()]
    if window is not None:
        params["window"] = window
    names = run_step_names(scope) if window == "hta" else None
    task = RankTask(fn, os.path.abspath(scope.store.path), scope.run, scope.steps, scope.step_pattern,
                    scope.skip_first, names, tuple(sorted(params.items())))
    events = run_events(scope.con, scope.run)
    work = batches({r: events.get(r, 0) for r in ranks}, workers(scope.executor), BATCH_EVENTS)
    got = sorted(run_map(task, work, scope.executor), key=lambda g: g["rank"])
    for g in got:
        if "error" in g:
            raise TraceqError(*g["error"])
    return [g["out"] for g in got]


def concat(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """The ranks' frames one after the other (an empty frame when there are none)."""
    return pl.concat(frames, how="vertical_relaxed") if frames else pl.DataFrame()
