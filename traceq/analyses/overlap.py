"""Communication/compute overlap per rank and per step, and across ranks: communication
kernel time, the part of it hidden under compute kernels, the exposed rest, overlap % =
100 · overlapped / communication (HTA's definition) and exposed communication as % of step
time; across ranks min/median/max and the slowest rank.

SQL: traceq/queries/summary_ops.sql (the ops, window and classes, shared with `summary`),
overlap_ops.sql (the ProfilerStep that launched each op), overlap.sql (per rank / per step)
and overlap_ranks.sql (across ranks).
"""
from __future__ import annotations

from ..engine.findings import fix_first_line, map_with_findings, rank_advice
from ..engine.per_rank import concat, mapped
from ..engine.scope import Scope
from ..errors import TraceqError
from ..lazy import polars as pl
from ..queries import run_script
from ..store import register_pl
from .spec import EXECUTOR_PARAMS, STEPS_HINT, TABLE_ROWS, WINDOW, Analysis, Block, Out, Param, Result, sql_columns
from .summary import check_window, missing_ranks, no_gpu_text, prepare_ops

BY = ("rank", "step", "across")

def schema() -> dict:
    """The overlap table's columns and types (rank rows and step rows alike)."""
    return {"rank": pl.Int32, "step": pl.Int64, "steps": pl.Int64, "comm_ops": pl.Int64, "comm_ns": pl.Int64,
           "compute_ns": pl.Int64, "overlapped_ns": pl.Int64, "exposed_ns": pl.Int64, "overlap_pct": pl.Float64,
            "step_ns": pl.Int64, "exposed_step_pct": pl.Float64}


def across_schema() -> dict:
    """The across-ranks row's columns and types."""
    return {"ranks": pl.Int64, "comm_ranks": pl.Int64, "min_overlap_pct": pl.Float64, "median_overlap_pct": pl.Float64,
           "max_overlap_pct": pl.Float64, "min_exposed_ns": pl.Int64, "median_exposed_ns": pl.Int64,
            "max_exposed_ns": pl.Int64, "comm_ns": pl.Int64, "exposed_ns": pl.Int64, "overlap_pct": pl.Float64,
            "slowest_rank": pl.Int32, "slowest_step_ns": pl.Int64, "most_exposed_rank": pl.Int32,
            "least_exposed_rank": pl.Int32}


def check_by(by: str) -> str:
    if by not in BY:
        raise TraceqError(f"--by {by!r}: choose rank (one row per rank), step (one row per rank and "
                          "ProfilerStep) or across (one row summarising the ranks)")
    return by


def prepare_overlap(scope: Scope, window: str = "all") -> None:
    """(Re)build analysis_ops (summary_ops.sql) and overlap_ops (+ launching step) for `scope`."""
    prepare_ops(scope, window)
    run_script(scope.con, "overlap_ops", {"run": scope.run})


def overlap_rows(scope: Scope, by: str = "rank", window: str = "all") -> pl.DataFrame:
    """Rank rows (`by="rank"`) or (rank, step) rows (`by="step"`) over the overlap_ops
    already prepared on the scope's connection (prepare_overlap). Window `all`: the times
    are the time ledger's (on_ledger); `hta`: overlap.sql's over HTA's window."""
    df = run_script(scope.con, "overlap", {"run": scope.run, "by": by})
    df = df.cast(schema()) if df.height else pl.DataFrame(schema=schema())
    return on_ledger(df, scope, by) if window == "all" else df


def on_ledger(df: pl.DataFrame, scope: Scope, by: str) -> pl.DataFrame:
    """The overlap rows `df` with their times from the time ledger (traceq.engine.ledger), so
    that overlap, diagnose, summary, ranks and the report print one exposed time: over the
    ledger's step windows (each step to the end of the last GPU op it launched; the capture
    without steps), all devices of the rank added up, comm_ns = time a communication op runs,
    compute_ns = time a compute op runs, exposed_ns = the ledger's `communication` label
    (communication with no compute running), overlapped_ns = comm − exposed, step_ns = the
    windows, steps = the number of steps (a capture without steps: 0, as before). comm_ops (the communication ops overlap_ops.sql
    counts) and the rows (a rank, or a step, that has GPU ops) stay as they were."""
    from ..engine.ledger import ledger

    led = ledger(scope).steps
    if not df.height or not led.height:
        return df
    keys = ["rank"] if by != "step" else ["rank", "step"]
    sums = (led.group_by(keys).agg(pl.col("step").filter(pl.col("step_source") != "capture").n_unique().alias("_steps"),
                                   pl.col("window_ns").sum().alias("_win"), pl.col("comm_ns").sum().alias("_comm"),
                                   pl.col("compute_ns").sum().alias("_compute"),
                                   pl.col("communication_ns").sum().alias("_exposed"))
            .with_columns(pl.col("rank").cast(pl.Int32), *([pl.col("step").cast(pl.Int64)] if by == "step" else [])))
    out = df.join(sums, on=keys, how="left")
    have = pl.col("_win").is_not_null()
    comm = pl.col("comm_ns")
    out = out.with_columns(
        pl.when(have).then(pl.col("_steps") if by != "step" else pl.lit(1)).otherwise(pl.col("steps")).alias("steps"),
        pl.when(have).then(pl.col("_comm")).otherwise(0).alias("comm_ns"),
        pl.when(have).then(pl.col("_compute")).otherwise(0).alias("compute_ns"),
        pl.when(have).then(pl.col("_comm") - pl.col("_exposed")).otherwise(0).alias("overlapped_ns"),
        pl.when(have).then(pl.col("_exposed")).otherwise(0).alias("exposed_ns"),
        pl.when(have).then(pl.col("_win")).otherwise(pl.col("step_ns")).alias("step_ns"))
    out = out.with_columns(
        pl.when(comm > 0).then(100.0 * pl.col("overlapped_ns") / comm).alias("overlap_pct"),
        pl.when(pl.col("step_ns") > 0).then(100.0 * pl.col("exposed_ns") / pl.col("step_ns")).alias("exposed_step_pct"))
    return out.select(list(schema())).cast(schema())


def across_ranks(by_rank: pl.DataFrame, con=None) -> pl.DataFrame:
    """One row: min/median/max overlap and exposed time over ranks, straggler hints."""
    from ..store.duck import connect

    con = con or connect()
    register_pl(con, "overlap_by_rank", by_rank.select(list(schema())).cast(schema()))
    df = run_script(con, "overlap_ranks")
    con.unregister("overlap_by_rank")
    return df.cast(across_schema())


def overlap_scoped(scope: Scope, window: str = "all", by: str = "rank") -> pl.DataFrame:
    check_by(by)
    prepare_overlap(scope, window)
    if by == "step":
        return overlap_rows(scope, "step", window)
    ranks = overlap_rows(scope, "rank", window)
    return across_ranks(ranks, scope.con) if by == "across" else ranks


def _ms(ns) -> str:
    return f"{ns / 1e6:,.1f} ms" if ns >= 1e6 else f"{ns / 1e3:,.1f} µs"


def headline(by_rank: pl.DataFrame, across: pl.DataFrame | None, scope: Scope, window: str = "all") -> str:
    missing = missing_ranks(by_rank, scope)
    if by_rank.height == 0:
        return no_gpu_text(scope, missing)
    tag = " [HTA window]" if window == "hta" else ""
    comm = by_rank.filter(pl.col("comm_ns") > 0)
    who = f"run {scope.run}" + (f" rank {by_rank['rank'][0]}" if by_rank.height == 1 else f", {by_rank.height} ranks")
    if comm.height == 0:
        return f"{who}{tag}: no communication kernels (nothing to overlap)"
    total, exposed = comm["comm_ns"].sum(), comm["exposed_ns"].sum()
    pct = 100 * comm["overlapped_ns"].sum() / total
    text = f"{who}{tag}: communication {_ms(total)}, {pct:.1f} % overlapped with compute, exposed {_ms(exposed)}"
    steps = comm.filter(pl.col("step_ns") > 0)
    if steps.height:
        ex = (steps["exposed_step_pct"] * steps["step_ns"]).sum() / steps["step_ns"].sum()
        text += f" ({ex:.1f} % of step time)"
    if across is not None and across.height and comm.height > 1:
        a = across.row(0, named=True)
        text += (f"; across ranks overlap min/median/max {a['min_overlap_pct']:.1f}/{a['median_overlap_pct']:.1f}/"
                 f"{a['max_overlap_pct']:.1f} %, most exposed rank {a['most_exposed_rank']}")
        if a["slowest_rank"] is not None:
            text += f", slowest step: rank {a['slowest_rank']} ({_ms(a['slowest_step_ns'])})"
    if missing:
        text += f"; no GPU activity on rank{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))}"
    return text


# ---------------------------------------------------------------- the command
def compute(scope: Scope, window: str = "all", by: str = "rank") -> Out:
    if mapped(scope):
        ranks, step_rows, fs = _reduce(scope, window, by)
    else:
        prepare_overlap(scope, window)
        ranks, fs = overlap_rows(scope, "rank", window), scope
        step_rows = overlap_rows(scope, "step", window) if by == "step" else None
    across = across_ranks(ranks, scope.con)
    line = fix_first_line(fs, headline(ranks, across, scope, window))
    if by == "step":
        return Out(step_rows, line)
    if by == "across":
        return Out(across, line)
    return Out(ranks.drop("step"), line, tables={"across": across},
               value={"show_across": ranks.filter(pl.col("comm_ns") > 0).height > 1})


def view(res: Result) -> list[Block]:
    by = res.params["by"]
    if by == "across":
        return [Block(_across_table(res.df), res.headline)]
    shown = res.df.with_columns(pl.col("step").cast(pl.String)) if "step" in res.df.columns else res.df
    out = [Block(shown, res.headline, drop_first=res.analysis.drop_first,
                 **({"max_rows": TABLE_ROWS, "more": STEPS_HINT} if by == "step" else {}))]
    if by == "rank" and res.value["show_across"]:
        out.append(Block(_across_table(res.tables["across"]), title="across ranks"))
    return out


def _across_table(across: pl.DataFrame) -> pl.DataFrame:
    """The one-row cross-rank summary as a two-column metric/value table (readable width)."""
    a = across.row(0, named=True) if across.height else {}

    def ms(v):
        return "" if v is None else f"{v / 1e6:,.3f} ms"

    def pct(v):   # undefined (no communication): "–", as in the rank table
        from ..render import UNDEFINED

        return UNDEFINED if v is None else f"{v:.2f} %"

    def three(f, lo, mid, hi):
        return " / ".join(f(a.get(k)) for k in (lo, mid, hi))

    rows = [
        ("ranks with GPU activity / with communication", f"{a.get('ranks', 0)} / {a.get('comm_ranks', 0)}"),
        ("overlap min / median / max", three(pct, "min_overlap_pct", "median_overlap_pct", "max_overlap_pct")),
        ("exposed comm min / median / max", three(ms, "min_exposed_ns", "median_exposed_ns", "max_exposed_ns")),
        ("communication, exposed (all ranks)", f"{ms(a.get('comm_ns'))}, {ms(a.get('exposed_ns'))}"),
        ("overlap (all ranks)", pct(a.get("overlap_pct"))),
        ("slowest rank (longest mean step)", "" if a.get("slowest_rank") is None
         else f"rank {a['slowest_rank']} ({ms(a['slowest_step_ns'])})"),
        ("most exposed rank (waits most in comm)", "" if a.get("most_exposed_rank") is None else f"rank {a['most_exposed_rank']}"),
        ("least exposed rank (others may wait on it)", "" if a.get("least_exposed_rank") is None else f"rank {a['least_exposed_rank']}"),
    ]
    return pl.DataFrame(rows, schema=["across ranks", "value"], orient="row")


def rank_part(scope: Scope, window: str, by: str, advice: bool = True) -> dict:
    """One rank's overlap rows (and what the run's findings need of it, unless kept)."""
    prepare_overlap(scope, window)
    return {"rank": overlap_rows(scope, "rank", window),
            "step": overlap_rows(scope, "step", window) if by == "step" else None,
            **(rank_advice(scope) if advice else {})}


def _reduce(scope: Scope, window: str, by: str):
    """(rank rows, step rows when by == "step", findings) of a run mapped over its ranks."""
    outs, fs = map_with_findings(scope, rank_part, check_window(window), by=check_by(by))
    ranks = concat([o["rank"] for o in outs])
    ranks = ranks.cast(schema()) if ranks.height else pl.DataFrame(schema=schema())
    steps = None
    if by == "step":
        steps = concat([o["step"] for o in outs])
        steps = steps.cast(schema()) if steps.height else pl.DataFrame(schema=schema())
    return ranks, steps, fs


# ---------------------------------------------------------------- the report
def report_section(ctx) -> list:
    """Overlap per step (chart) and per rank, and across ranks for a run of several."""
    from ..report import figures
    from ..report.html import table
    from ..report.many_ranks import many, ranks_of, step_boxes, summarise, worst
    from ..report.parts import Section, add, add_table

    sec = Section("overlap", ANALYSIS.report,
                  intro="Communication kernel time hidden under compute kernels (overlapped) and not (exposed), "
                        "per step and rank; overlap % = 100 · overlapped / communication (HTA's definition).")
    with ctx.guard(sec, "overlap"):
        by_rank = overlap_scoped(ctx.scope, by="rank")
        by_step = overlap_rows(ctx.scope, "step")   # over the ops overlap_scoped just prepared
        ctx.results["overlap"] = by_rank
        across = across_ranks(by_rank, ctx.scope.con) if by_rank.height > 1 else None
        sec.headline = headline(by_rank, across, ctx.scope)
        per_rank = by_rank.drop("step", strict=False)
        if many(ranks_of(by_rank)):      # a run of many ranks: report/many_ranks.py
            key = ("exposed_ns", "comm_ns")
            add(sec, step_boxes(by_step, "exposed_ns", "Exposed communication per step (distribution over the "
                                "ranks; lines: the worst ranks)", worst_ranks=worst(by_rank, key)["rank"].to_list()),
                "overlap")
            summarise(sec, per_rank, key, "traceq overlap -f csv", "overlap-ranks")
        else:
            add(sec, figures.overlap_chart(by_step), "overlap")
            if by_rank.height:
                add_table(sec, table(per_rank, caption="Per rank"), "overlap-ranks")
        if across is not None:
            add_table(sec, table(across, caption="Across ranks"), "overlap-across")
        if by_rank.height == 0 or by_rank["comm_ns"].sum() == 0:
            sec.notes.append("No communication kernels in this run: nothing to overlap.")
    return [sec]


ANALYSIS = Analysis(
    name="overlap",
    help="Communication/compute overlap: communication kernel time, the part of it hidden under compute "
         "kernels, the exposed rest, overlap % = 100·overlapped/comm (HTA's definition) and exposed "
         "communication as % of step time; across ranks min/median/max and the slowest rank.",
    examples=("traceq overlap --by step --window hta",),
    compute=compute,
    params=(WINDOW, Param("by", str, "rank", "rank: one row per rank; step: one row per rank and ProfilerStep "
                          "(ops grouped by the step that launched them); across: one row summarising the ranks "
                          "(min/median/max, straggler hints).", "rank|step|across",
                          choices=("rank", "step", "across")), *EXECUTOR_PARAMS),
    per_rank=True,
    columns=sql_columns("overlap"),
    sort=("rank", "step"),
    drop_first=("compute_ns", "comm_ops", "steps", "step_ns", "overlapped_ns"),
    view=view,
    report="Communication / compute overlap",
    report_section=report_section,
    order=30,
    report_order=60,
    tables=(("across", sql_columns("overlap_ranks")),),
)
