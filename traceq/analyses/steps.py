"""The time ledger as a table: per rank, device and step, the step's window and its time per
label, in ns and % of the window. Every busy, idle, exposed-communication and stall figure
of the other commands is a sum of these rows (traceq.engine.ledger; docs/ledger.md).

The window is the step, stretched to the end of the last GPU op it launched (the whole
capture when a rank has no steps); its labels, each instant labelled once, add up to it:
GPU busy (compute, communication = exposed, copy) and GPU idle by the host's cause (data,
communication_wait, sync, blocking_copy, memory_management, warmup, launch, host_compute,
unattributed).
"""
from __future__ import annotations

from ..engine.findings import fix_first_line
from ..engine.ledger import LABEL_COLUMNS, LABELS, ledger
from ..engine.scope import Scope
from ..lazy import polars as pl
from .spec import EXECUTOR_PARAMS, STEPS_HINT, TABLE_ROWS, Analysis, Block, Column, Out, Param, Result

MEANING = {
    "compute": "a compute kernel runs",
    "communication": "a communication kernel runs and no compute kernel does (exposed communication)",
    "copy": "only copies/memsets run",
    "data": "GPU idle while the host waits for data (DataLoader, timer IO, --data-pattern regions)",
    "communication_wait": "GPU idle while the host is in a collective or point-to-point call",
    "sync": "GPU idle while the host synchronizes (*Synchronize, .item())",
    "blocking_copy": "GPU idle while the host is in a synchronous or pageable copy",
    "memory_management": "GPU idle in recurring allocator calls (cudaMalloc/cudaFree/hipFree...)",
    "warmup": "GPU idle in one-off start-up work (module/library loading, JIT/compile, first allocations)",
    "launch": "GPU idle while the launching thread is inside other runtime/driver calls",
    "host_compute": "GPU idle while the host runs CPU ops with no CUDA call (CPU-bound)",
    "unattributed": "GPU idle with nothing recorded on the host, or the next op already queued",
}


def _pct_columns(df: pl.DataFrame) -> pl.DataFrame:
    w = pl.col("window_ns")
    return df.with_columns(
        (pl.when(w > 0).then(100.0 * pl.col("busy_ns") / w)).alias("busy_pct"),
        *[(pl.when(w > 0).then(100.0 * pl.col(f"{x}_ns") / w)).alias(f"{x}_pct") for x in LABELS])


def headline(df: pl.DataFrame, scope: Scope) -> str:
    where = f"run {scope.run}" + ("" if scope.rank is None else f" rank {scope.rank}")
    if df.height == 0:
        return f"{where}: no GPU ops in scope: the ledger has no step windows"
    w = int(df["window_ns"].sum())
    busy = int(df["busy_ns"].sum())
    idle = {x: int(df[f"{x}_ns"].sum()) for x in LABELS[3:]}
    top = max(idle, key=lambda k: (idle[k], -LABELS.index(k)))
    n = df.select(pl.struct("rank", "step").n_unique()).item()
    what = "step" if set(df["step_source"]) != {"capture"} else "capture"
    text = (f"{where}: {n:,} {what}{'s' if n != 1 and what == 'step' else ''}, {w / 1e6:,.1f} ms of GPU windows; "
            f"busy {100 * busy / w:.1f} % (exposed communication {100 * df['communication_ns'].sum() / w:.1f} %), "
            f"idle {100 * (w - busy) / w:.1f} %" if w else f"{where}: {n} steps of zero length")
    if w and idle[top]:
        text += f"; largest idle cause: {top.replace('_', ' ')} {100 * idle[top] / w:.1f} %"
    return text


def compute(scope: Scope, data_pattern: str | None = None) -> Out:
    df = _pct_columns(ledger(scope, data_pattern).steps)
    return Out(df, fix_first_line(scope, headline(df, scope)))


def view(res: Result) -> list[Block]:
    df = res.df
    shown = df.select("rank", "device", "step", "window_ns", "busy_pct",
                      *[f"{x}_pct" for x in LABELS if df.height and df[f"{x}_ns"].sum() > 0])
    return [Block(shown, res.headline, max_rows=TABLE_ROWS, more=STEPS_HINT,
                  notes=["every row's labels add up to its window exactly (ns); -f json/csv gives the ns columns"])]


def report_section(ctx) -> list:
    from ..report.html import table
    from ..report.parts import Section, add_table

    sec = Section("steps", ANALYSIS.report,
                  intro="The time ledger: per step and GPU, the step's window cut into labelled time (GPU busy: "
                        "compute, exposed communication, copy; GPU idle by the host's cause). Every busy, idle and "
                        "exposed figure of this report is a sum of these rows.")
    with ctx.guard(sec, "steps"):
        df = _pct_columns(ledger(ctx.scope).steps)
        sec.headline = headline(df, ctx.scope)
        cols = ["rank", "device", "step", "window_ns", "busy_pct",
                *[f"{x}_pct" for x in LABELS if df.height and df[f"{x}_ns"].sum() > 0]]
        add_table(sec, table(df.select(cols), caption="Per step and GPU: % of the window", max_rows=60), "steps")
    return [sec]


ANALYSIS = Analysis(
    name="steps",
    help="The time ledger: per rank, device and step, the step's window and its time per label (ns and %).\n\n"
         "The window runs from the step's start to the later of its end and the end of the last GPU op it "
         "launched (the whole capture when a rank has no steps). Each instant gets one label, so a step's "
         "labels add up to its window: GPU busy (compute; communication = a communication kernel and no "
         "compute kernel: exposed; copy) and GPU idle by what the host was doing (data, communication_wait, "
         "sync, blocking_copy, memory_management, warmup = one-off start-up work, launch, host_compute, "
         "unattributed). summary, overview, stalls, overlap, diagnose and the report read these rows.",
    examples=("traceq steps", "traceq steps --rank 0 --format csv -o ledger.csv"),
    compute=compute,
    params=(Param("data_pattern", str, None, "Regex: regions whose name matches also count as data loading.",
                  "REGEX"), *EXECUTOR_PARAMS),
    per_rank=True,
    columns=(Column("rank", "rank"), Column("device", "GPU"), Column("step", "step number (0 for a whole capture)"),
             Column("step_source", "where the steps come from: ProfilerStep | BATCH | DataLoader | pattern | capture"),
             Column("start_ns", "window start, ns"), Column("end_ns", "window end, ns"),
             Column("window_ns", "end_ns − start_ns, ns"),
             *[Column(c, MEANING[x] + ", ns") for x, c in zip(LABELS, LABEL_COLUMNS)],
             Column("busy_ns", "compute_ns + communication_ns + copy_ns, ns"),
             Column("idle_ns", "window_ns − busy_ns, ns"),
             Column("comm_ns", "time a communication kernel runs, hidden by compute or not, ns"),
             Column("overlapped_comm_ns", "comm_ns − communication_ns: communication hidden by compute, ns"),
             Column("late_unattributed_ns", "the part of unattributed_ns in idle the host had not yet issued the "
                    "next GPU op for (host time the trace does not show), ns"),
             Column("busy_pct", "100 · busy_ns / window_ns, %"),
             *[Column(f"{x}_pct", f"100 · {x}_ns / window_ns, %") for x in LABELS]),
    sort=("rank", "device", "start_ns"),
    view=view,
    report="Time ledger per step",
    report_section=report_section,
    order=25,
)
