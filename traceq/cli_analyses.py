"""CLI commands `summary`, `overlap` and `diff` (registered on `traceq.cli.app` on import).

They only parse arguments and render; the work is in traceq.analysis.{summary,overlap,diff}.
Heavy libraries (polars, duckdb) are imported inside the commands so `traceq --help` stays fast.
"""
from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from .cli import FormatOpt, RankOpt, RunOpt, SkipFirstOpt, StepPatternOpt, StepsOpt, StoreOpt, app, fail

WindowOpt = Annotated[str, typer.Option(
    "--window", "-w",
    help="all: every kernel, memcpy and memset, exact ns (traceq's definition). "
         "hta: HTA 0.5.0's window (ops launched before the last ProfilerStep), its kernel "
         "classification and its µs rounding, to reproduce HTA's numbers.")]


def _check_format(fmt: str) -> None:
    if fmt not in ("table", "json", "csv"):
        fail(f"--format {fmt!r}: choose table, json or csv")


def _check_window(window: str) -> None:
    if window not in ("all", "hta"):
        fail(f"--window {window!r}: choose all (every kernel/copy/memset, exact ns) or hta (HTA 0.5.0's window)")


def _check_by(by: str) -> None:
    if by not in ("rank", "step", "across"):
        fail(f"--by {by!r}: choose rank, step or across")


# ---------------------------------------------------------------- summary
@app.command()
def summary(
    store: StoreOpt = None,
    run: RunOpt = None,
    rank: RankOpt = None,
    steps: StepsOpt = None,
    step_pattern: StepPatternOpt = None,
    skip_first: SkipFirstOpt = 0,
    window: WindowOpt = "all",
    fmt: FormatOpt = "table",
) -> None:
    """Where the GPU timeline goes, per rank: idle, compute and non-compute time as % of the
    span from the first GPU op's start to the last one's end (HTA's temporal breakdown).

    idle = span − |union of all ops|; compute = |union of compute kernels|;
    non-compute = the rest (communication, copies, memsets). A trace without GPU ops gives
    no rows and says so.

    Example: traceq summary --window hta --format json
    """
    from .analysis.scope import open_scope
    from .analysis.summary import headline, summary_scoped
    from .render import emit

    _check_format(fmt)
    _check_window(window)
    scope = open_scope(store, run, rank, steps, step_pattern, skip_first)
    df = summary_scoped(scope, window)
    emit(df, fmt, headline=headline(df, scope, window) if fmt == "table" else None)
    if fmt != "table" and df.height == 0:
        sys.stderr.write(f"traceq: {headline(df, scope, window)}\n")


# ---------------------------------------------------------------- overlap
@app.command()
def overlap(
    store: StoreOpt = None,
    run: RunOpt = None,
    rank: RankOpt = None,
    steps: StepsOpt = None,
    step_pattern: StepPatternOpt = None,
    skip_first: SkipFirstOpt = 0,
    window: WindowOpt = "all",
    by: Annotated[str, typer.Option("--by", help="rank: one row per rank; step: one row per rank and ProfilerStep "
                                                 "(ops grouped by the step that launched them); across: one row "
                                                 "summarising the ranks (min/median/max, straggler hints).")] = "rank",
    fmt: FormatOpt = "table",
) -> None:
    """Communication/compute overlap: communication kernel time, the part of it hidden under
    compute kernels, the exposed rest, overlap % = 100·overlapped/comm (HTA's definition) and
    exposed communication as % of step time; across ranks min/median/max and the slowest rank.

    Example: traceq overlap --by step --window hta
    """
    import polars as pl

    from .analysis.overlap import across_ranks, headline, overlap_rows, prepare_overlap
    from .analysis.scope import open_scope
    from .render import emit

    _check_format(fmt)
    _check_window(window)
    _check_by(by)
    scope = open_scope(store, run, rank, steps, step_pattern, skip_first)
    prepare_overlap(scope, window)
    ranks = overlap_rows(scope, "rank")
    across = across_ranks(ranks, scope.con)
    shown = {"rank": ranks, "across": across}.get(by)
    if by == "step":
        shown = overlap_rows(scope, "step")
    elif by == "rank":
        shown = shown.drop("step")
    if fmt != "table":
        emit(shown, fmt)
        return
    line = headline(ranks, across, scope, window)
    if by == "across":
        emit(_across_table(across), "table", headline=line)
        return
    if "step" in shown.columns:
        shown = shown.with_columns(pl.col("step").cast(pl.String))
    emit(shown, "table", headline=line)
    if by == "rank" and ranks.filter(pl.col("comm_ns") > 0).height > 1:
        emit(_across_table(across), "table", title="across ranks")


def _across_table(across):
    """The one-row cross-rank summary as a two-column metric/value table (readable width)."""
    import polars as pl

    a = across.row(0, named=True) if across.height else {}

    def ms(v):
        return "" if v is None else f"{v / 1e6:,.3f} ms"

    def pct(v):
        return "" if v is None else f"{v:.2f} %"

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


# ---------------------------------------------------------------- diff
def _metrics_table(h: dict):
    import polars as pl

    def ms(v):
        return "" if v is None else f"{v / 1e6:,.2f} ms"

    def pct(v):
        return "" if v is None else f"{v:.2f} %"

    def pp(v):
        return "" if v is None else f"{v:+.2f} pp"

    rows = [
        ("GPU op time", ms(h["gpu_a_ns"]), ms(h["gpu_b_ns"]),
         "" if h["gpu_delta_pct"] is None else f"{h['gpu_delta_ns'] / 1e6:+,.2f} ms ({h['gpu_delta_pct']:+.1f} %)"),
        ("GPU ops", f"{h['ops_a']:,}", f"{h['ops_b']:,}", f"{h['ops_b'] - h['ops_a']:+,}"),
        ("idle (summary)", pct(h["idle_a_pct"]), pct(h["idle_b_pct"]), pp(h["idle_delta_pct"])),
        ("compute (summary)", pct(h["compute_a_pct"]), pct(h["compute_b_pct"]), pp(h["compute_delta_pct"])),
        ("comm overlap", pct(h["overlap_a_pct"]), pct(h["overlap_b_pct"]), pp(h["overlap_delta_pct"])),
        ("exposed comm", ms(h["exposed_a_ns"]), ms(h["exposed_b_ns"]),
         "" if h["exposed_a_ns"] is None or h["exposed_b_ns"] is None else f"{(h['exposed_b_ns'] - h['exposed_a_ns']) / 1e6:+,.2f} ms"),
        ("ranks", str(h["ranks_a"]), str(h["ranks_b"]), ""),
    ]
    # "A: <run>" / "B: <run>": distinct even when a run is compared with itself or named "delta"
    return pl.DataFrame(rows, schema=["metric", f"A: {h['run_a']}", f"B: {h['run_b']}", "delta"], orient="row")


@app.command()
def diff(
    run_a: Annotated[str, typer.Argument(help="Baseline run (A).", show_default=False)],
    run_b: Annotated[str, typer.Argument(help="Run compared with it (B).", show_default=False)],
    store: StoreOpt = None,
    rank: RankOpt = None,
    steps: StepsOpt = None,
    step_pattern: StepPatternOpt = None,
    skip_first: SkipFirstOpt = 0,
    top: Annotated[int, typer.Option("--top", "-n", help="Show the N largest kernel and region changes (0 = all).")] = 20,
    only: Annotated[Optional[str], typer.Option("--only", help="Print one table: categories, kernels, regions or headline.", show_default=False)] = None,
    fmt: FormatOpt = "table",
) -> None:
    """What changed from run A to run B: GPU time per kernel category and per kernel name
    (count, total in A and B, delta, appeared/disappeared/changed), CPU time per region name,
    and the summary/overlap headline numbers of both runs.

    --rank and --steps apply to both runs. JSON is one object
    {"categories": [...], "kernels": [...], "regions": [...], "headline": {...}};
    CSV prints each table after a "# <table>" line (or one plain table with --only).

    Example: traceq diff baseline amp_channels_last --top 10
    """
    import json

    from .analysis.diff import TABLES, diff_scoped, headline
    from .analysis.scope import open_scope
    from .render import emit, to_json

    _check_format(fmt)
    names = ("headline", *TABLES)
    if only is not None and only not in names:
        fail(f"--only {only!r}: choose {', '.join(names)}")
    a = open_scope(store, run_a, rank, steps, step_pattern, skip_first)
    b = open_scope(a.store, run_b, rank, steps, step_pattern, skip_first)
    result = diff_scoped(a, b, top or None)
    wanted = [only] if only else list(names)
    if fmt == "json":
        if only:
            sys.stdout.write(to_json(result[only]) + "\n")
        else:
            obj = {t: result[t].to_dicts() for t in TABLES}
            obj["headline"] = result["headline"].to_dicts()[0]
            sys.stdout.write(json.dumps(obj, default=str, indent=1) + "\n")
        return
    if fmt == "csv":
        for i, t in enumerate(wanted):
            if not only:
                sys.stdout.write(("\n" if i else "") + f"# {t}\n")
            emit(result[t], "csv")
        return
    h = result["headline"].row(0, named=True)
    first = True
    for t in wanted:
        line = headline(result) if first else None
        first = False
        if t == "headline":
            emit(_metrics_table(h), "table", headline=line, title="headline")
        else:
            emit(result[t], "table", headline=line,
                 title={"categories": "per category (GPU time)", "kernels": "per kernel (GPU time)",
                        "regions": "per region (CPU time)"}[t])
