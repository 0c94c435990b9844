"""CLI command `traceq diagnose` (registered on `traceq.cli.app` on import); the work is
in traceq.analysis.diagnose."""
from __future__ import annotations

import json
import sys
from typing import Annotated, Optional

import typer

from .cli import (ExecutorOpt, FormatOpt, RankOpt, RunOpt, SchedulerFileOpt, SchedulerOpt, SkipFirstOpt,
                  StepPatternOpt, StepsOpt, StoreOpt, app, fail)


@app.command()
def diagnose(
    store: StoreOpt = None,
    run: RunOpt = None,
    rank: RankOpt = None,
    steps: StepsOpt = None,
    step_pattern: StepPatternOpt = None,
    skip_first: SkipFirstOpt = 0,
    min_gap_us: Annotated[float, typer.Option("--min-gap-us", help="Smallest GPU idle gap to count, µs.")] = 50.0,
    fmt: FormatOpt = "table",
    executor: ExecutorOpt = None,
    scheduler: SchedulerOpt = None,
    scheduler_file: SchedulerFileOpt = None,
    jobs: Annotated[Optional[int], typer.Option("--jobs", "-j", help="Workers for the per-rank tasks.",
                                                show_default=False)] = None,
) -> None:
    """What bounds the run and what to fix first: one verdict per rank (gpu, data, host,
    launch, sync, memory_management or communication bound, with its share of the GPU span
    and the evidence), then findings ranked by estimated time to win per step, each citing
    its evidence (kernel names, counts, ms, % of GPU time, ms per step) and its advice.
    A run of several ranks is diagnosed one rank per task on the executor.

    JSON: {"runs": [{"run", "rank", "bound", "bound_share_pct", "evidence",
    "findings": [{"id", "category", "evidence", "gpu_ms", "est_gain_ms_per_step", "advice"}]}]}

    Example: traceq diagnose --format json
    """
    import polars as pl

    from .advice.base import floor_words
    from .analysis.diagnose import diagnose_scoped, headline
    from .analysis.scope import open_scope
    from .render import console, emit

    if fmt not in ("table", "json", "csv"):
        fail(f"--format {fmt!r}: choose table, json or csv")
    from .executor import resolve

    spec = resolve(executor, scheduler, scheduler_file, jobs)
    df = diagnose_scoped(open_scope(store, run, rank, steps, step_pattern, skip_first, executor=spec), min_gap_us)
    if fmt == "json":
        sys.stdout.write(json.dumps({"runs": df.drop("stepped").to_dicts()}, indent=1, ensure_ascii=False) + "\n")
        return
    if fmt == "csv":   # one row per finding, the rank's verdict repeated
        flat = (df.drop("stepped").rename({"evidence": "bound_evidence"}).explode("findings")
                .with_columns(pl.col("findings").struct.unnest()).drop("findings"))
        emit(flat, "csv")
        return
    for row in df.iter_rows(named=True):
        fs = pl.DataFrame(row["findings"], schema=df.schema["findings"].inner.to_schema())
        # a rank without steps counts as one step, the whole trace: its gain is no per-step
        # figure, and the per-step floor does not apply to it
        per_step = row["stepped"]
        if fs.height == 0:
            con = console()
            con.print(headline(row), markup=False)
            con.print(f"no findings above the floor ({floor_words(per_step)})\n", markup=False)
            continue
        gain = "gain (ms/step)" if per_step else "gain (ms in all, no steps)"
        shown = fs.select("id", "category", pl.col("est_gain_ms_per_step").alias(gain),
                          pl.col("gpu_ms").alias("GPU/idle (ms)"))
        notes = [f"{i}. {f['id']}: {f['evidence']}\n   advice: {f['advice']}" for i, f in enumerate(fs.iter_rows(named=True), 1)]
        emit(shown, "table", headline=headline(row), notes=notes)
