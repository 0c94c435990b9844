"""`traceq report`: the HTML report command (registers itself on traceq.cli.app).

It only parses arguments and prints one line; the work is in `traceq.report.build_report`.
"""
from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from .cli import StoreOpt, app, warn


@app.command()
def report(
    runs: Annotated[Optional[list[str]], typer.Argument(help="Runs to report (default: the most recently ingested). "
                                                             "Two runs add a diff of the second against the first.",
                                                        metavar="RUN", show_default=False)] = None,
    output: Annotated[str, typer.Option("--output", "-o", help="HTML file to write.")] = "report.html",
    title: Annotated[Optional[str], typer.Option("--title", help="Page title (default: the run names).", show_default=False)] = None,
    store: StoreOpt = None,
) -> None:
    """Write one self-contained HTML report (plotly.js inlined; opens offline): headline numbers per
    run and rank, GPU timeline (down-sampled), GPU time per category and region, hotspots with
    advice, data-loading stalls and communication overlap per step; with two runs, their diff.

    Example: traceq report baseline amp -o report.html --title "AMP + channels_last"
    """
    from .report import build_report

    res = build_report(store, runs, output, title)
    for w in res.warnings:
        warn(w)
    size = res.bytes / 1e6
    sys.stdout.write(f"{res.path}: report of {', '.join(res.runs)}"
                     + (" with their diff" if len(res.runs) == 2 else "")
                     + f" ({size:.1f} MB, {res.seconds:.1f} s)\n")
