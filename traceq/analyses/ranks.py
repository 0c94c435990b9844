"""Cross-rank analyses: clocks, collectives, arrival skew and the straggler.

A map over batches of ranks, a small reduce: `batch_facts` reads a batch of ranks' files in
one set-based pass (every query grouped by rank) and returns their collective kernels (one
row each), step count/time and exposed communication. A run whose events fit one process
(traceq.engine.scope.IN_PROCESS_EVENTS) is one batch, read here, unless an executor was asked
for; a larger one is cut into batches (traceq.engine.per_rank.batches) on the executor (local
process pool or Dask). The reduce joins those small frames in DuckDB (queries/collectives.sql,
ranks.sql, collectives_by_type.sql). No process holds more than a batch's events.

SQL: queries/ranks_rank.sql, ranks_steps.sql (per rank), overlap.sql (exposed comm, per
rank), collectives.sql (clocks + instance matching), ranks.sql, collectives_by_type.sql.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from datetime import datetime


from ..errors import TraceqError
from ..executor import ExecutorSpec, run_map
from ..engine.scope import Scope
from ..lazy import polars as pl
from ..lazy import pyarrow as pa
from ..queries import install_macros, run_script
from ..store import Store
from .spec import EXECUTOR_PARAMS, TABLE_ROWS, Analysis, Block, Out, Param, sql_columns

RANKS_COLUMNS = ("rank", "steps", "step_ms", "exposed_comm_ms", "late_arrival_ms", "clock_offset_ns")
COLLECTIVE_COLUMNS = ("name", "instances", "mean_skew_ms", "max_skew_ms", "last_rank_mode", "busbw_gbps")



def kernels_schema() -> dict:
    """Columns and types of the collective kernels each rank's task returns."""
    return {"rank": pl.Int32, "grp": pl.String, "stream": pl.Int64, "coll": pl.String, "k": pl.Int64,
            "start_ns": pl.Int64, "end_ns": pl.Int64, "bytes": pl.Int64}


@dataclass
class RanksResult:
    run: str
    ranks: pl.DataFrame          # ranks.sql columns
    collectives: pl.DataFrame    # collectives_by_type.sql columns
    instances: pl.DataFrame      # coll_instances (one row per matched instance)
    straggler: dict = field(default_factory=dict)   # {"rank": int | None, "evidence": str}
    arrivals: pl.DataFrame | None = None   # rank_arrivals: each rank's collective kernels, common clock

    def to_json(self) -> dict:
        """The `traceq ranks --format json` document (a stable interface: keys and columns are fixed)."""
        return {
            "ranks": self.ranks.select(RANKS_COLUMNS).to_dicts(),
            "collectives": self.collectives.select(COLLECTIVE_COLUMNS).to_dicts(),
            "straggler": {"rank": self.straggler.get("rank"), "evidence": self.straggler.get("evidence", "")},
        }


# ------------------------------------------------------------------ map: a batch of ranks
def batch_facts(store_path: str, run: str, ranks: tuple[int, ...]) -> dict:
    """Worker task: the small inputs of the reduce for a batch of ranks (per rank: steps, step
    time, exposed communication; one Arrow table of their collective kernels)."""
    from .overlap import overlap_rows, prepare_overlap

    st = Store(store_path)
    con = st.connect(only=(run, tuple(ranks)))
    n = len(ranks)
    con.register("scope_window_df", pa.table({"rank": pa.array(list(ranks), pa.int32()),
                                              "lo_ns": pa.nulls(n, pa.int64()), "hi_ns": pa.nulls(n, pa.int64())}))
    con.execute("CREATE TEMP TABLE scope_window AS SELECT * FROM scope_window_df")
    scope = Scope(st, con, run, None, None)
    install_macros(con)
    kernels = run_script(con, "ranks_rank", {"run": run, "rank": None})
    steps = {r["rank"]: r for r in run_script(con, "ranks_steps", {"run": run}).iter_rows(named=True)}
    prepare_overlap(scope)
    exposed = {r["rank"]: r["exposed_ns"] for r in overlap_rows(scope, "rank").iter_rows(named=True)}
    con.close()
    return {"rank": list(ranks), "steps": [steps[r]["steps"] for r in ranks],
            "step_ns": [steps[r]["step_ns"] for r in ranks],
            "exposed_ns": [int(exposed.get(r) or 0) for r in ranks],
            "kernels": (kernels.cast(kernels_schema()) if kernels.height else pl.DataFrame(schema=kernels_schema())).to_arrow()}


# ------------------------------------------------------------------ reduce
def latest_run(store: Store, run: str | None) -> tuple[str, list[dict]]:
    """The run (default: the most recently ingested) and its manifest rows, from the manifest alone."""
    if not store.exists():
        raise TraceqError(f"no traceq store at {store.path}: ingest a trace first (traceq ingest FILE), "
                          "or point --store / TRACEQ_STORE at one")
    rows = store.manifest_rows()
    if not rows:
        raise TraceqError(f"store {store.path} is empty: ingest a trace first (traceq ingest FILE)")
    if run is None:
        run = max(rows, key=lambda r: r["ingested_at"] or datetime.min)["run"]
    mine = sorted((r for r in rows if r["run"] == run), key=lambda r: r["rank"])
    if not mine:
        names = sorted({r["run"] for r in rows})
        raise TraceqError(f"no run named {run!r} in store {store.path} (runs: {', '.join(names)})")
    return run, mine


def ranks(store: Store | str | None = None, run: str | None = None,
          executor: ExecutorSpec | None = None, timings: dict | None = None) -> RanksResult:
    """Per rank step time, exposed communication, arrival lateness and clock offset; per
    collective type skew, last rank and bus bandwidth; the straggler with its evidence.
    `timings`, when given, receives the seconds of each stage (benchmarks/bench_ranks.py)."""
    from ..engine import scope as scope_mod
    from ..store.duck import connect as duck_connect
    from ..engine.per_rank import batches, workers

    clock = _Stopwatch(timings)
    st = store if isinstance(store, Store) else Store(store)
    run, rows = latest_run(st, run)
    events = {r["rank"]: (r.get("n_gpu_ops") or 0) + (r.get("n_host_ops") or 0) + (r.get("n_regions") or 0)
              for r in rows}
    executor = executor or ExecutorSpec()
    if scope_mod.mapped_run(executor, sum(events.values())):
        work = batches(events, workers(executor), scope_mod.BATCH_EVENTS)
    else:   # one set-based pass in this process
        work, executor = [tuple(sorted(events))], ExecutorSpec(jobs=1)
    facts = run_map(_FactsTask(os.path.abspath(st.path), run), work, executor)
    clock.lap("per_rank_map")
    facts.sort(key=lambda f: f["rank"][0])
    con = duck_connect()
    kernels = pa.concat_tables([f["kernels"] for f in facts])
    con.register("coll_kernels", kernels)
    con.register("rank_offsets", rank_offsets(con, rows))
    con.register("rank_facts", pa.table({
        "rank": pa.array([r for f in facts for r in f["rank"]], pa.int32()),
        "steps": pa.array([x for f in facts for x in f["steps"]], pa.int64()),
        "step_ns": pa.array([x for f in facts for x in f["step_ns"]], pa.int64()),
        "exposed_ns": pa.array([x for f in facts for x in f["exposed_ns"]], pa.int64())}))
    from ..clocks import END_TOLERANCE_NS   # clocks loads pyarrow

    run_script(con, "collectives", {"end_tolerance_ns": END_TOLERANCE_NS})
    clock.lap("clocks_and_matching")
    by_rank = run_script(con, "ranks")
    clock.lap("ranks_view")
    by_type = run_script(con, "collectives_by_type")
    clock.lap("collectives_by_type")
    instances = run_script(con, "SELECT * FROM coll_instances WHERE ranks > 1 ORDER BY first_ns, grp, k")
    arrivals = run_script(con, "SELECT * FROM rank_arrivals ORDER BY start_ns, rank")
    con.close()
    return RanksResult(run, by_rank, by_type, instances, straggler(by_rank, instances), arrivals)


def rank_offsets(con, rows: list[dict]) -> pa.Table:
    """Each rank's clock -> the run's common clock: runs.clock_offset_ns + runs.clock_refine_ns
    as ingest stored them (traceq/clocks.py); when no rank of the run has a stored
    refinement, computed here the same way from the collective kernels (table coll_kernels)."""
    from ..clocks import rank_clock, refine

    if any(r.get("clock_refine_ns") is not None for r in rows):
        found = {r["rank"]: r["clock_refine_ns"] for r in rows}
    else:
        con.register("rank_clock", rank_clock(rows))
        found = refine(con)
    raw = [r.get("clock_offset_ns") or 0 for r in rows]
    fine = [found.get(r["rank"]) or 0 for r in rows]
    return pa.table({"rank": pa.array([r["rank"] for r in rows], pa.int32()),
                     "raw_offset_ns": pa.array(raw, pa.int64()), "refine_ns": pa.array(fine, pa.int64()),
                     "clock_offset_ns": pa.array([a + b for a, b in zip(raw, fine)], pa.int64())})


class _Stopwatch:
    def __init__(self, into: dict | None):
        self.into, self.t = into, time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        if self.into is not None:
            self.into[name] = now - self.t
        self.t = now


@dataclass(frozen=True)
class _FactsTask:
    """Picklable task: a batch of ranks -> batch_facts(store, run, ranks) (small payload both ways)."""

    store_path: str
    run: str

    def __call__(self, ranks: tuple[int, ...]) -> dict:
        return batch_facts(self.store_path, self.run, ranks)


def straggler(by_rank: pl.DataFrame, instances: pl.DataFrame) -> dict:
    """Name the straggler: the rank that arrives last most often, when it is last at a
    majority of the matched collective instances (coll_instances.matched: kernels paired by
    order count only when they end together) AND its mean lateness exceeds twice the median
    lateness of the other ranks (i.e. it is late by more than the usual jitter), AND the
    matched instances end together (median end spread ≤ max(0.5 ms, 10 % of the median
    duration); instances matched by sequence number whose ends lie apart mean the clocks
    could not be aligned). Its delay estimate is its mean lateness minus the others' median
    lateness."""
    ok = instances.filter(pl.col("matched"))
    matched, left = ok.height, instances.height - ok.height
    apart = (f"; {left} more kernel {'pairs' if left > 1 else 'pair'} matched by "
             f"{matched_by(instances.filter(~pl.col('matched')))} {'do' if left > 1 else 'does'} not end together "
             "(different operations: a rank's trace missed some) and are left out") if left else ""
    if matched == 0 or by_rank.height < 2:
        return {"rank": None, "evidence": "no collective instance was matched across ranks "
                                          "(needs NCCL/RCCL kernels on at least two ranks)" + apart}
    r = by_rank.sort(["last_count", "late_arrival_ms", "rank"], descending=[True, True, False]).row(0, named=True)
    others = by_rank.filter(pl.col("rank") != r["rank"])
    typical = float(others["late_arrival_ms"].median() or 0.0)
    delay = (r["late_arrival_ms"] or 0.0) - typical
    waited = float(others["wait_ms"].sum() or 0.0)
    facts = (f"rank {r['rank']} arrives last at {r['last_count']} of {matched} collective instances, "
             f"{r['late_arrival_ms']:.3f} ms after the first rank on average (median of the other ranks: "
             f"{typical:.3f} ms)")
    spread = float(ok["end_spread_ns"].median() or 0)
    limit = max(500_000.0, 0.1 * float(ok["dur_ns"].median() or 0))
    if spread > limit:
        return {"rank": None, "evidence": f"no straggler named: the collective kernels matched by "
                f"{matched_by(ok)} end {spread / 1e6:.3f} ms apart (median), so the ranks' clocks disagree by "
                f"more than aligning the collective ends could fix; {facts}{apart}"}
    if r["last_count"] * 2 > matched and delay > typical:
        return {"rank": int(r["rank"]),
                "evidence": f"{facts}: about {delay:.3f} ms late per collective; the other ranks wait "
                            f"{waited:.3f} ms in all inside collectives{apart}"}
    return {"rank": None, "evidence": f"no clear straggler: {facts}{apart}"}


def clock_note(by_rank: pl.DataFrame) -> str:
    """How far apart the raw clocks were and how much the collective ends moved them."""
    if by_rank.height == 0:
        return ""
    raw = by_rank["raw_offset_ns"]
    ref = by_rank["refine_ns"]
    return (f"raw clock offsets span {(raw.max() - raw.min()) / 1e6:,.3f} ms; aligning collective ends "
            f"moved ranks by up to {ref.abs().max() / 1e6:,.3f} ms (raw clocks {(ref.max() - ref.min()) / 1e6:,.3f} ms apart)")


_MATCHED_BY = {"seq": "process group and sequence number", "order": "order per process group and type",
               "stream": "order per stream"}


def matched_by(instances: pl.DataFrame) -> str:
    """How the instances were matched across ranks (ranks_rank.sql's keys), e.g.
    'process group and sequence number', or several of those joined by ' and '."""
    kinds = []
    for g in instances["grp"].unique().sort().to_list() if instances.height else []:
        kind = "stream" if g.startswith("stream ") else "order" if g.endswith(" by order") else "seq"
        if _MATCHED_BY[kind] not in kinds:
            kinds.append(_MATCHED_BY[kind])
    return " and ".join(sorted(kinds))


def headline(res: RanksResult) -> str:
    n = res.ranks.height
    ok = res.instances.filter(pl.col("matched"))
    text = f"run {res.run}, {n} rank{'s' if n != 1 else ''}, {ok.height} collective instances matched"
    if ok.height:
        text += f" by {matched_by(ok)}"
    note = clock_note(res.ranks)
    return text + (f"; {note}" if note else "") + f"\nstraggler: {res.straggler['evidence']}"


def to_json_text(res: RanksResult) -> str:
    return json.dumps(res.to_json(), indent=2)


# ---------------------------------------------------------------- the command
def compute(store, run=None, instances: bool = False, executor: str | None = None, scheduler: str | None = None,
              scheduler_file: str | None = None, jobs: int | None = None):
    """`traceq ranks`: the rank table (or every matched instance), collectives as a second table."""
    from ..executor import resolve

    res = ranks(store, run, resolve(executor, scheduler, scheduler_file, jobs))
    if instances:
        return Out(res.instances, headline(res), value=res)
    return Out(res.ranks, headline(res), tables={"collectives": res.collectives}, value=res)


def view(result) -> list:
    if result.params.get("instances"):     # a row per collective instance: grows with the trace
        return [Block(result.df, result.headline, max_rows=TABLE_ROWS)]
    return [Block(result.df.drop("raw_offset_ns"), result.headline, title="ranks"),
            Block(result.tables["collectives"], title="collectives")]


def to_json(result):
    """The document RanksResult.to_json writes, or the instance rows with --instances."""
    if result.params.get("instances"):
        return result.df.to_dicts()
    return result.value.to_json()


def csv_tables(result) -> list:
    return [(None, result.df)]


# ---------------------------------------------------------------- the report
def report_section(ctx) -> list:
    """A run of several ranks: every rank's collective kernels on one clock, the rank table
    and the collectives by type."""
    from ..report.html import table
    from ..report.many_ranks import many
    from ..report.parts import Section, add, add_table
    from ..report.ranks_timeline import ranks_timeline

    if ctx.manifest.height <= 1:
        return []
    sec = Section("ranks", ANALYSIS.report,
                  intro="Every rank's collective kernels on one clock (trace base times, refined by aligning the "
                        "ends of matched collectives), one row per rank: a rank whose bars start late is the one "
                        "the others wait for. Per rank: lateness and waiting; per collective type: arrival skew "
                        "and bus bandwidth (traceq ranks).")
    with ctx.guard(sec, "ranks"):
        summarised = many(ctx.manifest.height)
        rr = ctx.results.get("ranks") if summarised else None
        rr = rr if rr is not None else ranks(ctx.store, ctx.run)
        ctx.results["ranks"] = rr
        sec.headline = headline(rr)
        if summarised:
            _many_ranks(sec, rr, ctx)
        else:
            add(sec, ranks_timeline(rr.arrivals, rr.straggler["rank"]), "ranks")
            add_table(sec, table(rr.ranks.drop("raw_offset_ns"), caption="Per rank"), "ranks-table")
        add_table(sec, table(rr.collectives, caption="Per collective type"), "collectives")
    return [sec]


def _many_ranks(sec, rr: RanksResult, ctx) -> None:
    """A run of many ranks: the collectives of the latest ranks (the straggler first), rank 0
    and the median rank on the common clock; the lateness over the ranks as a box; the
    quantiles of the rank table and the latest ranks' rows."""
    from ..report.many_ranks import WORST_RANKS, chosen_ranks, rank_boxes, summarise, worst
    from ..report.parts import add
    from ..report.ranks_timeline import ranks_timeline

    df = rr.ranks.drop("raw_offset_ns")
    by = "late_arrival_ms" if df["late_arrival_ms"].drop_nulls().len() else "step_ms"
    bad = worst(df, by)["rank"].to_list()
    drawn = list(dict.fromkeys([r for r, _ in chosen_ranks(ctx)] + bad))
    arrivals = rr.arrivals.filter(pl.col("rank").is_in(drawn)) if rr.arrivals is not None else None
    add(sec, rank_boxes(df, [("late_arrival_ms", "arrival lateness"), ("exposed_comm_ms", "exposed communication")],
                        "Lateness at collectives and exposed communication (distribution over the ranks)", "ms",
                        worst_ranks=bad), "ranks-distribution")
    add(sec, ranks_timeline(arrivals, rr.straggler["rank"],
                            f"Collectives on the common clock: {len(drawn)} of {df.height} ranks"), "ranks")
    sec.notes.append(f"The collectives drawn: ranks {', '.join(str(r) for r in sorted(drawn))} (rank 0, the "
                     f"straggler, the median and the {WORST_RANKS} latest ranks).")
    summarise(sec, df, by, "traceq ranks -f csv", "ranks-table")


ANALYSIS = Analysis(
    name="ranks",
    help="Across the ranks of a run: one clock, matched collectives, arrival skew, the straggler.\n\n"
         "Per rank: steps, mean step time, exposed communication, mean arrival lateness at collectives (its "
         "start − the first rank's start) and the clock offset that puts it on the common clock (trace base "
         "time, refined by aligning the ends of matched collectives). Per collective type: instances, mean/max "
         "arrival skew, the rank most often last, bus bandwidth (NCCL-tests formulas; when message sizes are "
         "known). The straggler is named with its evidence.\n\n"
         "JSON is one object {\"ranks\": [...], \"collectives\": [...], \"straggler\": {\"rank\", \"evidence\"}} "
         "(with --instances: the list of instances); CSV prints the rank table (or the instances).",
    examples=("traceq ranks --format json",),
    compute=compute,
    params=(Param("instances", bool, False, "One row per matched collective instance (skew, last rank, bus "
                  "bandwidth) instead of the rank view."),
            *EXECUTOR_PARAMS),
    view=view,
    json=to_json,
    csv=csv_tables,
    scope="run",
    report="Across ranks: collectives, skew and stragglers",
    report_section=report_section,
    order=70,
    columns=sql_columns("ranks"),
    tables=(("collectives", sql_columns("collectives_by_type")),),
)
