"""Which run, ranks and steps an analysis looks at (`--run`, `--rank`, `--steps`,
`--step-pattern`, `--skip-first`).

`open_scope` opens the store, picks the run (default: the most recently ingested one),
and registers a temp table `scope_window(rank, lo_ns, hi_ns)` with, per rank, the time
window to analyse: the whole rank, or the span of the selected steps. Analyses join on it,
so every analysis honours the same scope the same way.

Steps come from queries/steps.sql (one source per rank: --step-pattern regions, else
ProfilerStep#N, else timer BATCH, else DataLoader iterations) and carry the numbers the
tables show. `--skip-first N` drops each rank's first N steps (warm-up), then
`--steps A:B` keeps steps A to B, both included.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..lazy import polars as pl

from ..errors import TraceqError
from ..store import Store, fetch_pl, register_pl


# Without --jobs, --executor dask or TRACEQ_EXECUTOR, a run is analysed in this process, all
# its ranks in one set-based pass (each query over every rank's files, grouped by rank), when
# it holds at most this many events (GPU ops + host ops + regions, from the manifest): about
# 2-3x the 8x replica, whose analyses stay near 300 MB of memory. A larger run is a map over
# batches of ranks (traceq.engine.per_rank), each batch about BATCH_EVENTS events.
IN_PROCESS_EVENTS = 2_000_000
BATCH_EVENTS = 1_000_000


@dataclass
class Scope:
    store: Store
    con: object          # duckdb connection with the store views + scope_window
    run: str
    rank: int | None
    steps: str | None
    step_pattern: str | None = None
    skip_first: int = 0
    _steps_ready: bool = False
    _links_ready: bool = False
    # A run of several ranks whose per-rank analyses run on an executor (traceq.engine.per_rank):
    # the ExecutorSpec; the connection then holds no table data, only `runs` and scope_window.
    executor: object = None
    # HTA window: distinct *ProfilerStep* names of the whole run, when the connection sees only
    # one rank of it (summary_ops.sql; None = count them on the connection)
    run_step_names: int | None = None

    def _register_steps(self, chosen: pl.DataFrame) -> None:
        register_pl(self.con, "scope_steps_df", chosen)
        self.con.execute("CREATE OR REPLACE TEMP TABLE scope_steps AS SELECT * FROM scope_steps_df")
        self.con.unregister("scope_steps_df")
        self._steps_ready = True

    def ensure_links(self, empty: bool = False) -> None:
        """Temp table scope_links (queries/launch_links.sql): every GPU op of the scope's ranks
        with the runtime/driver call that launched it, joined once for the queries that need it.
        `empty`: only its columns (a query that names it but reads none of it), unless built."""
        if not self._links_ready:
            from ..queries import install_macros, load as load_sql

            install_macros(self.con)
            sql = load_sql("launch_links")
            self.df("CREATE OR REPLACE TEMP TABLE scope_links AS " + (f"SELECT * FROM ({sql}) WHERE false" if empty else sql))
            self._links_ready = not empty

    def ensure_steps(self) -> None:
        """Temp table scope_steps(rank, step, step_source, start_ns, end_ns): the steps of the
        scope (all of them when neither --steps nor --skip-first narrowed it)."""
        if not self._steps_ready:
            every = step_list(self.con, self.run, self.step_pattern)
            self._register_steps(every.filter(pl.col("rank").is_in(
                [self.rank] if self.rank is not None else every["rank"].unique().to_list())))

    def df(self, sql: str, params: dict | None = None) -> pl.DataFrame:
        p = {"run": self.run, "rank": self.rank}
        if params:
            p.update(params)
        code = re.sub(r"--[^\n]*", "", sql)   # parameters named only in comments are not bound
        used = {k: v for k, v in p.items() if re.search(r"\$" + k + r"\b", code)}
        return fetch_pl(self.con, sql, used)


def parse_steps(spec: str | None) -> tuple[int | None, int | None] | None:
    """Step numbers as the tables show them, both ends inclusive: '5:10' -> steps 5..10,
    '7' -> step 7, '5:' -> 5 and later, ':10' -> up to 10."""
    if spec is None or spec.strip() == "":
        return None
    m = re.fullmatch(r"\s*(\d*)\s*(:\s*(\d*)\s*)?", spec)
    if not m or (not m.group(1) and not m.group(2)):
        raise TraceqError(f"--steps {spec!r}: expected step numbers as the tables show them, "
                          "N or A:B (both included), e.g. 5:10")
    a = int(m.group(1)) if m.group(1) else None
    if m.group(2) is None:
        return a, a
    b = int(m.group(3)) if m.group(3) else None
    if a is not None and b is not None and b < a:
        raise TraceqError(f"--steps {spec!r}: the first step is after the last")
    return a, b


def check_regex(con, option: str, pattern: str) -> None:
    try:
        con.execute("SELECT regexp_matches('', $p)", {"p": pattern}).fetchall()
    except Exception as exc:  # noqa: BLE001 - DuckDB reports a bad RE2 pattern as a generic error
        raise TraceqError(f"{option} {pattern!r}: not a valid regular expression "
                          f"({str(exc).splitlines()[0]})") from None


def step_list(con, run: str, step_pattern: str | None = None) -> pl.DataFrame:
    """Every step of every rank of `run` (queries/steps.sql): rank, step, step_source, start_ns, end_ns."""
    from ..queries import load as load_sql
    if step_pattern:
        check_regex(con, "--step-pattern", step_pattern)
    return fetch_pl(con, load_sql("steps"), {"run": run, "step_pattern": step_pattern or None})


def select_steps(steps: pl.DataFrame, spec: str | None, skip_first: int = 0) -> pl.DataFrame:
    """The steps `--skip-first N` (the first N steps of each rank, in time order) and
    `--steps A:B` (step numbers, both included) leave."""
    if skip_first < 0:
        raise TraceqError(f"--skip-first {skip_first}: must be >= 0")
    if skip_first:
        steps = (steps.sort("rank", "start_ns", "end_ns")
                 .filter(pl.int_range(pl.len()).over("rank") >= skip_first))
    rng = parse_steps(spec)
    if rng is not None:
        lo, hi = rng
        if lo is not None:
            steps = steps.filter(pl.col("step") >= lo)
        if hi is not None:
            steps = steps.filter(pl.col("step") <= hi)
    return steps


def _numbers(steps: pl.DataFrame) -> str:
    nums = sorted(set(steps["step"].to_list()))
    if not nums:
        return "none"
    if nums == list(range(nums[0], nums[-1] + 1)):
        return f"{nums[0]}–{nums[-1]}" if len(nums) > 1 else str(nums[0])
    return ", ".join(map(str, nums[:12])) + (" …" if len(nums) > 12 else "")


def _ranks(con, run: str) -> list[int]:
    return [r[0] for r in con.execute("SELECT rank FROM runs WHERE run = $run ORDER BY rank", {"run": run}).fetchall()]


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


def run_events(con, run: str) -> dict[int, int]:
    """Per rank of `run`: its events (GPU ops + host ops + regions) as the manifest counts them."""
    return {r: int(n or 0) for r, n in con.execute(
        "SELECT rank, coalesce(n_gpu_ops, 0) + coalesce(n_host_ops, 0) + coalesce(n_regions, 0) "
        "FROM runs WHERE run = $run ORDER BY rank", {"run": run}).fetchall()}


def mapped_run(executor, events: int) -> bool:
    """Map a run's ranks over the executor when the user asked for one (`--executor dask`,
    `--jobs`, TRACEQ_EXECUTOR) or when the run is too large for one process
    (IN_PROCESS_EVENTS). Otherwise every rank is analysed here in one set-based pass: the
    same result, without a task's fixed cost."""
    import os

    return (events > IN_PROCESS_EVENTS or executor.kind == "dask" or bool(executor.jobs)
            or bool(os.environ.get("TRACEQ_EXECUTOR")))


def open_scope(store: Store | str | None = None, run: str | None = None, rank: int | None = None,
               steps: str | None = None, step_pattern: str | None = None, skip_first: int = 0, *,
               only_run: bool = False, only_rank: bool = False, only_ranks: tuple[int, ...] | None = None,
               executor=None) -> Scope:
    """`only_run`: the connection's table views hold only `run` (given) - faster on big stores.
    `only_rank`: they hold only that rank's files (`run` and `rank` given). `only_ranks`: only
    these ranks' files, and the scope is these ranks (`run` given; a task of the per-rank map).
    `executor` (an ExecutorSpec): for a run of several ranks analysed whole (`rank` None), a
    scope without table data whose per-rank analyses map over the ranks on that executor
    (traceq.engine.per_rank); a run of one rank gets the ordinary scope."""
    st = store if isinstance(store, Store) else Store(store)
    if not st.exists():
        raise TraceqError(f"no traceq store at {st.path}: ingest a trace first (traceq ingest FILE), "
                          "or point --store / TRACEQ_STORE at one")
    if only_rank or only_ranks:
        con = st.connect(only=(run, tuple(only_ranks) if only_ranks else rank))
        run = resolve_run(con, run, st)
        ranks = _ranks(con, run)
        if only_ranks:
            ranks = [r for r in ranks if r in set(only_ranks)]
    elif executor is not None and rank is None:
        con = st.connect(runs=[])
        run = resolve_run(con, run, st)
        ranks = _ranks(con, run)
        if len(ranks) > 1 and mapped_run(executor, sum(run_events(con, run).values())):
            parse_steps(steps)
            window = pl.DataFrame({"rank": ranks, "lo_ns": [None] * len(ranks), "hi_ns": [None] * len(ranks)},
                                  schema={"rank": pl.Int32, "lo_ns": pl.Int64, "hi_ns": pl.Int64})
            register_pl(con, "scope_window_df", window)
            con.execute("CREATE TEMP TABLE scope_window AS SELECT * FROM scope_window_df")
            return Scope(st, con, run, None, steps, step_pattern, skip_first, executor=executor)
        st.table_views(con, runs=[run] if only_run else None)   # analysed here: the same connection
    else:
        con = st.connect(runs=[run] if only_run and run is not None else None)
        run = resolve_run(con, run, st)
        ranks = _ranks(con, run)
    if rank is not None and rank not in ranks:
        raise TraceqError(f"run {run!r} has no rank {rank} (ranks: {', '.join(map(str, ranks))})")
    wanted = [rank] if rank is not None else ranks
    parse_steps(steps)   # a malformed --steps fails before any work
    rows = [{"rank": r, "lo_ns": None, "hi_ns": None} for r in wanted]
    chosen = None
    if steps or skip_first or step_pattern:
        every = step_list(con, run, step_pattern).filter(pl.col("rank").is_in(wanted))
        chosen = select_steps(every, steps, skip_first)
        rows = []
        for r in wanted:
            mine = every.filter(pl.col("rank") == r)
            if mine.height == 0:
                raise TraceqError(f"run {run!r} rank {r} has no steps (no ProfilerStep, timer BATCH or DataLoader "
                                  "regions" + (f", and no region matches --step-pattern {step_pattern!r})" if step_pattern
                                               else "; name step regions with --step-pattern REGEX)"))
            sel = chosen.filter(pl.col("rank") == r)
            if sel.height == 0:
                what = " ".join(x for x in (f"--skip-first {skip_first}" if skip_first else "",
                                            f"--steps {steps}" if steps else "") if x)
                raise TraceqError(f"{what}: selects no step of run {run!r} rank {r} "
                                  f"({mine['step_source'][0]} steps {_numbers(mine)})")
            if steps or skip_first:
                rows.append({"rank": r, "lo_ns": sel["start_ns"].min(), "hi_ns": sel["end_ns"].max()})
            else:
                rows.append({"rank": r, "lo_ns": None, "hi_ns": None})
    window = pl.DataFrame(rows, schema={"rank": pl.Int32, "lo_ns": pl.Int64, "hi_ns": pl.Int64})
    register_pl(con, "scope_window_df", window)
    con.execute("CREATE TEMP TABLE scope_window AS SELECT * FROM scope_window_df")
    scope = Scope(st, con, run, rank, steps, step_pattern, skip_first)
    if chosen is not None:
        scope._register_steps(chosen)
    return scope
