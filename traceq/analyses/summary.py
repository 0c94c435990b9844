"""Where the GPU timeline goes, per rank (HTA's temporal breakdown). By default over the time
ledger's step windows (traceq.engine.ledger: each step from its start to the end of the last
GPU op it launched; the whole capture without steps; every device of the rank added up):
span = the windows, idle = the ledger's idle labels, compute = its compute label, non-compute
= exposed communication + copies, each also as % of the span (undefined, null, when the span
is zero: "–" in tables and headline): the busy and idle every other command prints. With
`--window hta`, HTA's own: over the span from the first GPU op's start to the last one's end,
idle = span − |union of all ops|, compute = |union of compute kernels|, non-compute = the rest.

The SQL is traceq/queries/summary_ops.sql (which ops, in which window: traceq's exact `all`, or
HTA 0.5.0's `hta`: ops launched before the last ProfilerStep, HTA's kernel classification
and µs rounding) and traceq/queries/summary.sql (the breakdown). `prepare_ops` is shared with
overlap and diff, which read the same ops.
"""
from __future__ import annotations

from ..engine.findings import fix_first_line, map_with_findings, rank_advice
from ..engine.per_rank import concat, mapped
from ..engine.scope import Scope
from ..engine.truncation import no_gpu_reason
from ..errors import TraceqError
from ..lazy import polars as pl
from ..queries import install_macros, run_script
from .spec import EXECUTOR_PARAMS, WINDOW, Analysis, Out, sql_columns

WINDOWS = ("all", "hta")



def schema() -> dict:
    """The summary table's columns and types."""
    return {"rank": pl.Int32, "ops": pl.Int64, "span_ns": pl.Int64, "busy_ns": pl.Int64, "idle_ns": pl.Int64,
            "compute_ns": pl.Int64, "non_compute_ns": pl.Int64, "idle_pct": pl.Float64, "compute_pct": pl.Float64,
            "non_compute_pct": pl.Float64}


def check_window(window: str) -> str:
    if window not in WINDOWS:
        raise TraceqError(f"--window {window!r}: choose all (every kernel/copy/memset, exact ns) "
                          "or hta (HTA 0.5.0's window, classification and µs rounding)")
    return window


def prepare_ops(scope: Scope, window: str = "all") -> None:
    """(Re)build the temp table analysis_ops for `scope` in `window` (summary_ops.sql)."""
    install_macros(scope.con)
    run_script(scope.con, "summary_ops", {"run": scope.run, "window": check_window(window),
                                          "run_step_names": scope.run_step_names})


def summary_scoped(scope: Scope, window: str = "all") -> pl.DataFrame:
    """The summary rows of the scope. Window `all` (the default): the time ledger's step
    windows (traceq.engine.ledger), all devices of a rank added up: span = the windows, busy,
    idle, compute and non-compute (exposed communication + copies) their labels; `ops` the
    ops summary_ops.sql measures. Window `hta`: HTA's own definition (summary.sql)."""
    prepare_ops(scope, window)
    df = run_script(scope.con, "summary")
    if df.height == 0:
        return pl.DataFrame(schema=schema())
    if window == "all":
        from ..engine.ledger import ledger

        led = ledger(scope).per_rank()
        span = pl.col("span_ns")
        df = (df.select("rank", "ops").join(led.select(
                  pl.col("rank").cast(df["rank"].dtype), pl.col("window_ns").alias("span_ns"), "busy_ns", "idle_ns",
                  pl.col("compute_ns"), (pl.col("communication_ns") + pl.col("copy_ns")).alias("non_compute_ns")),
                  on="rank", how="left")
              .with_columns(pl.col("span_ns", "busy_ns", "idle_ns", "compute_ns", "non_compute_ns").fill_null(0))
              .with_columns(*[pl.when(span > 0).then(100.0 * pl.col(f"{c}_ns") / span).alias(f"{c}_pct")
                              for c in ("idle", "compute", "non_compute")]))
    return df.select(list(schema())).cast(schema())


def _ms(ns) -> str:
    return f"{ns / 1e6:,.1f} ms" if ns >= 1e6 else f"{ns / 1e3:,.1f} µs"


# A zero-length span (one zero-duration op, or ops that the hta window's µs rounding empties:
# ceil of the start = floor of the end) has no shares: they print as "–", never as 0 or 100 %.
ZERO_SPAN = " (zero-length GPU span: no share of it is defined)"


def _pct(v) -> str:
    from ..render import UNDEFINED

    return UNDEFINED if v is None else f"{v:.1f} %"


def missing_ranks(df: pl.DataFrame, scope: Scope) -> list[int]:
    ranks = [r[0] for r in scope.con.execute("SELECT rank FROM scope_window ORDER BY rank").fetchall()]
    have = set(df["rank"].to_list()) if df.height else set()
    return [r for r in ranks if r not in have]


def no_gpu_text(scope: Scope, ranks: list[int]) -> str:
    where = f"run {scope.run}" + (f" rank {ranks[0]}" if len(ranks) == 1 and scope.rank is not None else "")
    return f"{where}: no GPU activity (no kernels, copies or memsets in scope; {no_gpu_reason(scope)})"


def headline(df: pl.DataFrame, scope: Scope, window: str = "all") -> str:
    missing = missing_ranks(df, scope)
    if df.height == 0:
        return no_gpu_text(scope, missing)
    tag = " [HTA window]" if window == "hta" else ""
    if df.height == 1:
        r = df.row(0, named=True)
        who = f"run {scope.run} rank {r['rank']}"
        text = (f"{who}{tag}: GPU idle {_pct(r['idle_pct'])} of {_ms(r['span_ns'])}; compute {_pct(r['compute_pct'])}, "
                f"non-compute {_pct(r['non_compute_pct'])}" + (ZERO_SPAN if not r["span_ns"] else ""))
    else:
        span = df["span_ns"].sum()
        idle, comp, non = (100 * df[c].sum() / span if span else None for c in ("idle_ns", "compute_ns", "non_compute_ns"))
        worst = df.sort("idle_pct", descending=True, nulls_last=True).row(0, named=True)
        text = (f"run {scope.run}, {df.height} ranks{tag}: GPU idle {_pct(idle)} of {_ms(span)} (summed spans); "
                f"compute {_pct(comp)}, non-compute {_pct(non)}" + (ZERO_SPAN if not span else "")
                + (f"; most idle: rank {worst['rank']} ({_pct(worst['idle_pct'])})" if worst["idle_pct"] is not None else ""))
    if missing:
        text += f"; no GPU activity on rank{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))}"
    return text


# ---------------------------------------------------------------- the command
def compute(scope: Scope, window: str = "all") -> Out:
    if mapped(scope):
        outs, fs = map_with_findings(scope, rank_part, check_window(window))
        df = concat([o["df"] for o in outs])
        df = df.cast(schema()) if df.height else pl.DataFrame(schema=schema())
    else:
        df, fs = summary_scoped(scope, window), scope
    return Out(df, fix_first_line(fs, headline(df, scope, window)))


def rank_part(scope: Scope, window: str, advice: bool = True) -> dict:
    """One rank's summary rows (and what the run's findings need of it, unless kept)."""
    return {"df": summary_scoped(scope, window), **(rank_advice(scope) if advice else {})}


# ---------------------------------------------------------------- the report
def report_section(ctx) -> list:
    """GPU op time per kernel category (the hotspot rows, kept for the hotspots section) and,
    per rank, the split of the GPU span into compute, non-compute and idle."""
    from ..report import figures
    from ..report.many_ranks import many, ranks_of
    from ..report.parts import Section, add
    from .hotspots import hotspots_scoped

    sec = Section("gpu", ANALYSIS.report,
                  intro="GPU op time per kernel category (avoidable categories outlined in red) and, per rank, the "
                        "split of the GPU span into compute, non-compute (communication, copies, memsets) and idle.")
    with ctx.guard(sec, "hotspots"):
        ctx.results["hotspots"] = hotspots_scoped(ctx.scope)
        add(sec, figures.category_bars(ctx.results["hotspots"]), "categories")
    with ctx.guard(sec, "summary"):
        ctx.results["summary"] = summary_scoped(ctx.scope)
        sec.headline = headline(ctx.results["summary"], ctx.scope)
        if many(ranks_of(ctx.results["summary"])):
            _many_ranks(sec, ctx.results["summary"])
        else:
            add(sec, figures.rank_breakdown(ctx.results["summary"]), "summary")
    if not sec.plots and not sec.error and not sec.headline:
        sec.notes.append(f"No GPU kernels, copies or memsets in this run ({no_gpu_reason(ctx.scope)}).")
    return [sec]


def _many_ranks(sec, df: pl.DataFrame) -> None:
    """A run of many ranks: the spread of compute, non-compute and idle % over the ranks, the
    worst ranks' own bars (most idle), the quantiles of every column and those ranks' rows."""
    from ..report import figures
    from ..report.many_ranks import rank_boxes, summarise, worst
    from ..report.parts import add

    bad = worst(df, ("idle_pct", "span_ns"))["rank"].to_list()
    add(sec, rank_boxes(df, [("compute_pct", "compute"), ("non_compute_pct", "non-compute"), ("idle_pct", "idle")],
                        "GPU span per rank: compute, non-compute, idle (distribution over the ranks)", "%",
                        worst_ranks=bad), "summary-distribution")
    add(sec, figures.rank_breakdown(df.filter(pl.col("rank").is_in(bad)),
                                    "The most idle ranks: compute, non-compute, idle"), "summary")
    summarise(sec, df, ("idle_pct", "span_ns"), "traceq summary -f csv", "summary")


ANALYSIS = Analysis(
    name="summary",
    help="Where the GPU timeline goes, per rank: idle, compute and non-compute time as % of the span "
         "(HTA's temporal breakdown).\n\n"
         "Default window (all): the span is the time ledger's step windows (each step to the end of the last GPU "
         "op it launched, the whole capture without steps; traceq steps lists them); idle, compute and "
         "non-compute (exposed communication, copies) are its labels. --window hta: HTA's own, over the first "
         "GPU op's start to the last one's end: idle = span − |union of all ops|; compute = |union of compute "
         "kernels|; non-compute = the rest. A trace without GPU ops gives no rows and says so.",
    examples=("traceq summary --window hta --format json",),
    compute=compute,
    params=(WINDOW, *EXECUTOR_PARAMS),
    per_rank=True,
    columns=sql_columns("summary"),
    sort=("rank",),
    drop_first=("busy_ns", "ops", "non_compute_ns", "compute_ns", "idle_ns", "span_ns"),
    report="Where GPU time goes",
    report_section=report_section,
    order=20,
    report_order=20,
)
