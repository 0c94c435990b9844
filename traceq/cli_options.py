"""The options the commands share, declared once: every command that takes a store, a run,
a rank, steps, an output format or an output file takes it with the same flag, help and
metavar (the analyses' commands, generated in traceq/cli_analyses.py, and the hand-written
ones of traceq/cli.py alike)."""
from __future__ import annotations

from typing import Annotated, Optional

import typer

from .analyses.spec import EXECUTOR_HELP, SCHEDULER_FILE_HELP, SCHEDULER_HELP

STORE_HELP = "Store folder (default ./.traceq or $TRACEQ_STORE)."
RUN_HELP = "Run to analyse (default: the most recently ingested)."
RANK_HELP = "One rank (default: every rank of the run)."
STEPS_HELP = ("Steps A to B, both included, by the step numbers the tables show (ProfilerStep#N, else 0-based), "
              "e.g. 5:10, 7, 5:.")
STEP_PATTERN_HELP = ("Steps are the regions (NVTX ranges, annotations) whose name matches REGEX; numbered by the "
                     "last number in their names.")
SKIP_FIRST_HELP = "Leave out the first N steps of each rank (warm-up)."
OUTPUT_HELP = "Write the output to FILE instead of stdout."
WIDE_HELP = ("Show every column even when the terminal is too narrow (by default whole low-priority columns are "
             "left out and named).")
ANALYSIS_FORMAT_HELP = "Output format: table, json (one document: headline, units, labels, rows) or csv."
ROWS_FORMAT_HELP = "Output format: table, json (list of row objects) or csv."

StoreOpt = Annotated[Optional[str], typer.Option("--store", help=STORE_HELP, metavar="DIR", show_default=False)]
RunOpt = Annotated[Optional[str], typer.Option("--run", help=RUN_HELP, metavar="NAME", show_default=False)]
RankOpt = Annotated[Optional[int], typer.Option("--rank", help=RANK_HELP, metavar="N", show_default=False)]
StepsOpt = Annotated[Optional[str], typer.Option("--steps", help=STEPS_HELP, metavar="A:B", show_default=False)]
StepPatternOpt = Annotated[Optional[str], typer.Option("--step-pattern", help=STEP_PATTERN_HELP, metavar="REGEX",
                                                       show_default=False)]
SkipFirstOpt = Annotated[int, typer.Option("--skip-first", help=SKIP_FIRST_HELP, metavar="N")]
FormatOpt = Annotated[str, typer.Option("--format", "-f", help=ROWS_FORMAT_HELP, metavar="table|json|csv")]
AnalysisFormatOpt = Annotated[str, typer.Option("--format", "-f", help=ANALYSIS_FORMAT_HELP, metavar="table|json|csv")]
OutputOpt = Annotated[Optional[str], typer.Option("--output", "-o", help=OUTPUT_HELP, metavar="FILE",
                                                  show_default=False)]
WideOpt = Annotated[bool, typer.Option("--wide", help=WIDE_HELP)]
ExecutorOpt = Annotated[Optional[str], typer.Option("--executor", help=EXECUTOR_HELP, show_default=False)]
SchedulerOpt = Annotated[Optional[str], typer.Option("--scheduler", help=SCHEDULER_HELP, show_default=False)]
SchedulerFileOpt = Annotated[Optional[str], typer.Option("--scheduler-file", help=SCHEDULER_FILE_HELP,
                                                         show_default=False)]
