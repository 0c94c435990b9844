"""Which run, ranks and steps an analysis looks at (`--run`, `--rank`, `--steps`).

`open_scope` opens the store, picks the run (default: the most recently ingested one),
and registers a temp table `scope_window(rank, lo_ns, hi_ns)` with, per rank, the time
window to analyse: the whole rank, or the span of the selected ProfilerSteps. Analyses
join on it, so every analysis honours the same scope the same way.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

from ..errors import TraceqError
from ..store import Store, fetch_pl


@dataclass
class Scope:
    store: Store
    con: object          # duckdb connection with the store views + scope_window
    run: str
    rank: int | None
    steps: str | None

    def df(self, sql: str, params: dict | None = None) -> pl.DataFrame:
        p = {"run": self.run, "rank": self.rank}
        if params:
            p.update(params)
        code = re.sub(r"--[^\n]*", "", sql)   # parameters named only in comments are not bound
        used = {k: v for k, v in p.items() if re.search(r"\$" + k + r"\b", code)}
        return fetch_pl(self.con, sql, used)


def parse_steps(spec: str | None) -> slice | None:
    """'3:8' -> slice(3, 8); '5' -> slice(5, 6); ':4', '-3:' work like Python slices."""
    if spec is None or spec == "":
        return None
    m = re.fullmatch(r"\s*(-?\d*)\s*(?::\s*(-?\d*)\s*)?", spec)
    if not m:
        raise TraceqError(f"--steps {spec!r}: expected A:B (0-based, like a Python slice), e.g. 3:8")
    a, b = m.group(1), m.group(2)
    if ":" not in spec:
        i = int(a)
        return slice(i, i + 1 if i != -1 else None)
    return slice(int(a) if a else None, int(b) if b else None)


def resolve_run(con, run: str | None, store: Store) -> str:
    runs = con.execute("SELECT run, max(ingested_at) AS t FROM runs GROUP BY run ORDER BY t DESC").fetchall()
    if not runs:
        raise TraceqError(f"store {store.path} is empty: ingest a trace first (traceq ingest FILE)")
    if run is None:
        return runs[0][0]
    names = [r[0] for r in runs]
    if run not in names:
        raise TraceqError(f"no run named {run!r} in store {store.path} (runs: {', '.join(sorted(names))})")
    return run


def open_scope(store: Store | str | None = None, run: str | None = None, rank: int | None = None,
               steps: str | None = None, *, only_run: bool = False) -> Scope:
    """`only_run`: the connection's table views hold only `run` (given) - faster on big stores."""
    st = store if isinstance(store, Store) else Store(store)
    if not st.exists():
        raise TraceqError(f"no traceq store at {st.path}: ingest a trace first (traceq ingest FILE), "
                          "or point --store / TRACEQ_STORE at one")
    con = st.connect(runs=[run] if only_run and run is not None else None)
    run = resolve_run(con, run, st)
    ranks = [r[0] for r in con.execute("SELECT rank FROM runs WHERE run = $run ORDER BY rank", {"run": run}).fetchall()]
    if rank is not None and rank not in ranks:
        raise TraceqError(f"run {run!r} has no rank {rank} (ranks: {', '.join(map(str, ranks))})")
    sl = parse_steps(steps)
    rows = []
    for r in ([rank] if rank is not None else ranks):
        lo = hi = None
        if sl is not None:
            st_rows = con.execute(
                "SELECT start_ns, end_ns FROM regions WHERE run = $run AND rank = $rank AND source = 'step' "
                "AND (domain IS NULL OR domain <> 'gpu') "
                "ORDER BY start_ns", {"run": run, "rank": r}).fetchall()
            if not st_rows:
                raise TraceqError(f"--steps: run {run!r} rank {r} has no ProfilerStep regions")
            chosen = st_rows[sl]
            if not chosen:
                raise TraceqError(f"--steps {steps}: selects no step (rank {r} has {len(st_rows)} steps)")
            lo, hi = min(c[0] for c in chosen), max(c[1] for c in chosen)
        rows.append({"rank": r, "lo_ns": lo, "hi_ns": hi})
    window = pl.DataFrame(rows, schema={"rank": pl.Int32, "lo_ns": pl.Int64, "hi_ns": pl.Int64})
    con.register("scope_window_df", window.to_arrow())
    con.execute("CREATE TEMP TABLE scope_window AS SELECT * FROM scope_window_df")
    return Scope(st, con, run, rank, steps)
