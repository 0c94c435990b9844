"""CLI command `ranks` (registered on `traceq.cli.app` on import): the cross-rank view.

Only parses and renders; the work is in traceq.analysis.ranks (per-rank tasks on the
executor, a small reduce in DuckDB).
"""
from __future__ import annotations

import json
from typing import Annotated, Optional

import typer

from .cli import ExecutorOpt, FormatOpt, RunOpt, SchedulerFileOpt, SchedulerOpt, StoreOpt, app, fail


@app.command()
def ranks(
    store: StoreOpt = None,
    run: RunOpt = None,
    fmt: FormatOpt = "table",
    instances: Annotated[bool, typer.Option("--instances", help="One row per matched collective instance "
                                            "(skew, last rank, bus bandwidth) instead of the rank view.")] = False,
    executor: ExecutorOpt = None,
    scheduler: SchedulerOpt = None,
    scheduler_file: SchedulerFileOpt = None,
    jobs: Annotated[Optional[int], typer.Option("--jobs", "-j", help="Workers for the per-rank tasks.",
                                                show_default=False)] = None,
) -> None:
    """Across the ranks of a run: one clock, matched collectives, arrival skew, the straggler.

    Per rank: steps, mean step time, exposed communication, mean arrival lateness at
    collectives (its start − the first rank's start) and the clock offset that puts it on the
    common clock (trace base time, refined by aligning the ends of matched collectives).
    Per collective type: instances, mean/max arrival skew, the rank most often last, bus
    bandwidth (NCCL-tests formulas; when message sizes are known). The straggler is named
    with its evidence.

    Example: traceq ranks --format json
    """
    from .analysis.ranks import headline, ranks as do_ranks
    from .executor import resolve
    from .render import emit

    if fmt not in ("table", "json", "csv"):
        fail(f"--format {fmt!r}: choose table, json or csv")
    res = do_ranks(store, run, resolve(executor, scheduler, scheduler_file, jobs))
    if instances:
        emit(res.instances, fmt, headline=headline(res) if fmt == "table" else None)
        return
    if fmt == "json":
        typer.echo(json.dumps(res.to_json(), indent=1))
        return
    if fmt == "csv":
        emit(res.ranks, "csv")
        return
    emit(res.ranks.drop("raw_offset_ns"), "table", headline=headline(res), title="ranks")
    emit(res.collectives, "table", title="collectives")
