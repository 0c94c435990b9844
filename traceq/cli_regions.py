"""`traceq breakdown` and `traceq stalls`: region and data-loading analyses on the command line.

Imported by traceq.cli, which it extends with two commands on `traceq.cli.app`. The
commands only parse arguments and render; the work is in traceq.analysis.breakdown and
traceq.analysis.stalls (heavy libraries are imported inside the commands).
"""
from __future__ import annotations

from typing import Annotated, Optional

import typer

from .cli import FormatOpt, RankOpt, RunOpt, SkipFirstOpt, StepPatternOpt, StepsOpt, StoreOpt, app, fail

BY_CHOICES = ("all", "nvtx", "annotation", "step", "dataloader", "timer")
TABLE_CHOICES = ("both", "causes", "steps", "gaps")


@app.command()
def breakdown(
    store: StoreOpt = None,
    run: RunOpt = None,
    rank: RankOpt = None,
    steps: StepsOpt = None,
    step_pattern: StepPatternOpt = None,
    skip_first: SkipFirstOpt = 0,
    by: Annotated[str, typer.Option("--by", help="Region kind: all, nvtx, annotation, step, dataloader or timer.")] = "all",
    top: Annotated[int, typer.Option("--top", "-n", help="Show the N regions with the most CPU time (0 = all).")] = 30,
    fmt: FormatOpt = "table",
) -> None:
    """Per-region CPU time versus the GPU work launched inside it (NVTX ranges,
    record_function annotations, ProfilerSteps, DataLoader calls, timer keys).

    A GPU op counts for every region on the launching thread that fully contains its launch
    call (nsys nvtx_gpu_proj rule). gpu_proj = last op end - first op start per instance;
    gpu_busy = union of the ops; gpu_busy_per_cpu < 1: the GPU works less than the host
    spends in the region. Kineto GPU-side annotation spans show as source gpu_annotation.
    --by timer shows CPU vs GPU time per timer key with min/mean/median/max/stdev.

    Examples:

      traceq breakdown --by nvtx --top 20

      traceq breakdown --by annotation --steps 3:8 --format csv > regions.csv

      traceq breakdown --by timer
    """
    from .analysis import breakdown as bd
    from .analysis.scope import open_scope
    from .render import emit

    if by not in BY_CHOICES:
        fail(f"--by {by!r}: choose from {', '.join(BY_CHOICES)}")
    scope = open_scope(store, run, rank, steps, step_pattern, skip_first)
    if by == "timer":
        df = bd.timer_scoped(scope)
        if fmt != "table":
            emit(df, fmt)
            return
        emit(_timer_rows(df), "table", headline=bd.timer_headline(df, scope), notes=_timer_notes(df))
        return
    full = bd.breakdown_scoped(scope, by)
    df = full.head(top) if top else full
    if fmt != "table":
        emit(df, fmt)
        return
    import polars as pl

    shown = df.select("source", "name", "instances", "cpu_total_ns", "cpu_mean_ns", "gpu_ops", "gpu_proj_ns",
                      "gpu_busy_ns", "gpu_busy_per_cpu", "unfinished")
    if df["domain"].drop_nulls().len():
        shown = shown.insert_column(2, df["domain"])
    notes = []
    if top and full.height > top:
        notes.append(f"({full.height - top} more regions; --top 0 shows all)")
    if int(full["unfinished"].sum() or 0):
        notes.append("unfinished: instances still open when the capture ended; counted up to capture end")
    if full.filter(pl.col("source") == "step").height:
        notes.append("note: ProfilerStep counts only launches on its own (main) thread; PyTorch launches backward "
                     "kernels from the autograd thread, so a step's GPU projection can miss them (nsys rule)")
    highlight = [i for i, u in enumerate(df["unfinished"]) if u]
    emit(shown, "table", headline=bd.headline(full, scope, by), highlight=highlight, notes=notes)


def _timer_rows(df):
    """For the terminal: one row per key and clock (like Deep500's CPU / GPU sections),
    so the table stays narrow; JSON/CSV keep one wide row per key."""
    import polars as pl

    stats = ("count", "total_ns", "mean_ns", "median_ns", "min_ns", "max_ns", "stdev_ns")
    parts = []
    for clock in ("cpu", "gpu"):
        part = df.select(
            "key", "source", pl.lit(clock).alias("clock"),
            *[pl.col(f"{clock}_{s}" if s != "count" else ("count" if clock == "cpu" else "gpu_count"))
              .cast(pl.Float64 if s != "count" else pl.Int64).alias(s) for s in stats],
            pl.when(pl.lit(clock == "gpu")).then(pl.col("gpu_per_cpu")).alias("gpu_per_cpu"),
        ).with_row_index("_order")
        if clock == "gpu":   # keys never timed on the GPU get no GPU row
            part = part.filter(pl.col("mean_ns").is_not_null())
        parts.append(part)
    out = pl.concat(parts).sort("_order", "clock").drop("_order")
    if set(out["source"]) == {"timer"}:
        out = out.drop("source")
    return out


def _timer_notes(df) -> list[str]:
    notes = []
    if "timer_stats" in set(df["source"]):
        notes.append("timer_stats rows: summary-only timer output (Deep500 stats text): no instance counts or totals")
    return notes


@app.command()
def stalls(
    store: StoreOpt = None,
    run: RunOpt = None,
    rank: RankOpt = None,
    steps: StepsOpt = None,
    step_pattern: StepPatternOpt = None,
    skip_first: SkipFirstOpt = 0,
    min_gap_us: Annotated[float, typer.Option("--min-gap-us", help="Smallest GPU idle gap to count, µs.")] = 50.0,
    data_pattern: Annotated[Optional[str], typer.Option("--data-pattern", help="Regex: regions whose name matches also count as data loading (e.g. 'load|decode').", show_default=False)] = None,
    table: Annotated[str, typer.Option("--table", help="Which table: both (causes and steps), causes, steps or gaps (every gap). JSON with 'both' is an object {causes: [...], steps: [...]}; CSV needs one table.")] = "both",
    fmt: FormatOpt = "table",
) -> None:
    """Data-loading stalls and other GPU starvation.

    GPU idle gaps of at least --min-gap-us are split by what the host was doing, in priority
    order: data loading (DataLoader spans, timer IO regions, --data-pattern regions),
    synchronisation (cudaStreamSynchronize / cudaDeviceSynchronize / cudaEventSynchronize,
    blocking cudaMemcpy), launch-bound (host inside other CUDA API calls), other. Per step:
    host time waiting for data, GPU idle while waiting, and their share of the step, with
    advice when data wait exceeds 5 % of step time. Steps are ProfilerSteps, else timer
    BATCH regions, else the iterations between DataLoader calls. CPU-only traces still get
    the per-step data-wait share.

    Examples:

      traceq stalls

      traceq stalls --min-gap-us 200 --data-pattern 'decode|augment'

      traceq stalls --table steps --format csv > steps.csv
    """
    import json

    from .analysis import stalls as sa
    from .analysis.scope import open_scope
    from .render import emit, to_json

    if table not in TABLE_CHOICES:
        fail(f"--table {table!r}: choose from {', '.join(TABLE_CHOICES)}")
    if fmt == "csv" and table == "both":
        fail("--format csv writes one table: add --table causes, --table steps or --table gaps")
    scope = open_scope(store, run, rank, steps, step_pattern, skip_first)
    res = sa.stalls_scoped(scope, min_gap_us, data_pattern)
    if fmt != "table":
        if table == "both":
            if fmt != "json":
                emit(res.steps, fmt)   # unknown format: let emit report it
                return
            import sys

            doc = {"causes": json.loads(to_json(res.causes)), "steps": json.loads(to_json(res.steps))}
            sys.stdout.write(json.dumps(doc, default=str, indent=1) + "\n")
            return
        emit(getattr(res, table), fmt)
        return
    notes = sa.advice(res)
    if table in ("both", "steps"):
        shown = res.steps.drop("start_ns")
        if shown.height and shown["gpu_idle_ns"].null_count() == shown.height:
            shown = shown.drop("gpu_idle_ns", "gpu_idle_waiting_ns", "gpu_idle_waiting_pct")
        highlight = [i for i, p in enumerate(res.steps["data_wait_pct"]) if p is not None and p > sa.DATA_WAIT_ADVICE_PCT]
        emit(shown, "table", headline=sa.headline(res, scope), highlight=highlight,
             notes=notes if table == "steps" else [])
    if table in ("both", "causes"):
        if res.causes.height:
            emit(res.causes, "table", headline=sa.causes_headline(res), notes=notes)
        else:   # CPU-only: say so instead of printing an empty table
            from .render import console

            con = console()
            for line in [sa.causes_headline(res), *notes]:
                con.print(line, markup=False)
    if table == "gaps":
        emit(res.gaps, "table", headline=sa.causes_headline(res), notes=notes)
