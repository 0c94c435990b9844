"""The TensorBoard profiler plugin's Overview page (torch-tb-profiler 0.4.3): each step split
into Kernel / Memcpy / Memset / Communication / Runtime / DataLoader / CPU Exec / Other with the
plugin's priority rules, the mean over each rank's steps, and per device the GPU summary
(utilisation, estimated SM efficiency, estimated achieved occupancy, tensor-core time).

Windows (`--window`): `tb` (default) splits the plugin's steps (traceq/engine/tb_window.py:
ProfilerStep#N moved to the device side, its distrusted tail dropped, times read as the plugin
reads them); `all` splits traceq's steps of the scope (--steps, --skip-first; the whole rank
when it has none) at exact ns. SQL: traceq/queries/tb_events.sql, tb_steps.sql (typing and
steps), overview.sql (the breakdown), overview_gpu.sql (the GPU summary).
"""
from __future__ import annotations

import json

from ..engine.findings import map_with_findings, rank_advice
from ..engine.per_rank import concat, mapped
from ..engine.scope import Scope
from ..errors import TraceqError
from ..lazy import polars as pl
from ..queries import install_macros, output_columns, run_script
from .spec import EXECUTOR_PARAMS, Analysis, Block, Column, Out, Param

WINDOWS = ("tb", "all")
CATEGORIES = ("kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu_exec", "other")
CATEGORY_LABELS = {"kernel": "Kernel", "memcpy": "Memcpy", "memset": "Memset", "communication": "Communication",
                   "runtime": "Runtime", "dataloader": "DataLoader", "cpu_exec": "CPU Exec", "other": "Other"}
ROW_FIELDS = ("rank", "step", "step_ns", *(f"{c}_ns" for c in CATEGORIES))
GPU_FIELDS = ("rank", "device", "name", "gpu_utilization_pct", "sm_efficiency_pct", "achieved_occupancy_pct",
              "tensor_core_pct")
STEP_FIELDS = ("run", *ROW_FIELDS)   # the JSON rows
AVERAGE = "average"
# The plugin's recommendations and the diagnose rules that give them from the trace's evidence
# (traceq/advice/rules): DataLoader share -> dataloader, AMP for tensor-core-eligible FP32 work ->
# mixed_precision, communication share -> exposed_communication, memory near capacity and
# allocator calls -> allocator_churn. The plugin's "increase batch size" for low GPU utilisation
# has no rule: the GPU summary shows the utilisation itself.
RECOMMENDING_RULES = ("dataloader", "mixed_precision", "exposed_communication", "allocator_churn")

WINDOW_PARAM = Param("window", str, "all",
                     "all: traceq's steps of the scope (--steps, --skip-first; the whole rank without steps), exact "
                     "ns; GPU utilization is the time ledger's GPU busy (kernels, copies and memsets) over its step "
                     "windows, the number summary, diagnose and steps print. tb: the TensorBoard profiler plugin's "
                     "steps (ProfilerStep#N moved to the device side, its incomplete last steps dropped) and its "
                     "utilization (kernels only, first step's start to last step's end), to reproduce its "
                     "Overview page.",
                     "tb|all", flags=("-w",), choices=WINDOWS)


def step_schema() -> dict:
    return {"rank": pl.Int32, "step": pl.String, "step_ns": pl.Int64,
            **{f"{c}_ns": pl.Int64 for c in CATEGORIES}}


def gpu_schema() -> dict:
    return {"rank": pl.Int32, "device": pl.Int32, "name": pl.String, "gpu_utilization_pct": pl.Float64,
            "sm_efficiency_pct": pl.Float64, "achieved_occupancy_pct": pl.Float64, "tensor_core_pct": pl.Float64}


def check_window(window: str) -> str:
    if window not in WINDOWS:
        raise TraceqError(f"--window {window!r}: choose tb (the TensorBoard plugin's steps) or all "
                          "(traceq's steps of the scope)")
    return window


def prepare(scope: Scope, window: str) -> None:
    """Temp tables ov_steps (the steps to split) and ov_kernels (the GPU summary's kernels) of
    the scope's ranks, and the typed events overview.sql reads."""
    from ..engine.tb_window import ensure_tb_steps

    install_macros(scope.con)
    if window == "tb":
        ensure_tb_steps(scope)
        if getattr(scope, "_tb_events_exact", False):   # an `all` run on this scope replaced them
            run_script(scope.con, "tb_events", {"run": scope.run, "plugin_times": True})
            scope._tb_events_exact = False
        scope.con.execute("CREATE OR REPLACE TEMP TABLE ov_steps AS SELECT rank, step, idx, start_ns, end_ns "
                          "FROM tb_steps")
    else:
        # exact ns; traceq's steps of the scope, else the rank's span inside the scope window
        run_script(scope.con, "tb_events", {"run": scope.run, "plugin_times": False})
        scope._tb_events_exact = True
        scope.ensure_steps()
        run_script(scope.con, """
            CREATE OR REPLACE TEMP TABLE ov_steps AS
            WITH sel AS (
                SELECT s.rank, CAST(s.step AS VARCHAR) AS step, s.start_ns, s.end_ns
                FROM scope_steps s JOIN scope_window w ON w.rank = s.rank
                WHERE s.start_ns < coalesce(w.hi_ns, s.end_ns + 1) AND s.end_ns > coalesce(w.lo_ns, s.start_ns - 1)
            ), span AS (
                SELECT e.rank, greatest(min(e.start_ns), any_value(w.lo_ns)) AS start_ns,
                       least(max(e.end_ns), any_value(coalesce(w.hi_ns, 9223372036854775807))) AS end_ns
                FROM (SELECT rank, start_ns, end_ns FROM tb_host UNION ALL
                      SELECT rank, start_ns, end_ns FROM tb_regions UNION ALL
                      SELECT rank, start_ns, end_ns FROM tb_device) e
                JOIN scope_window w ON w.rank = e.rank
                WHERE e.rank NOT IN (SELECT rank FROM sel)
                GROUP BY e.rank
            )
            SELECT rank, step, row_number() OVER (PARTITION BY rank ORDER BY start_ns, end_ns) - 1 AS idx,
                   start_ns, end_ns FROM sel
            UNION ALL SELECT rank, 'all', 0, start_ns, end_ns FROM span WHERE end_ns >= start_ns""")
    plugin = window == "tb"
    scope.con.execute(
        "CREATE OR REPLACE TEMP TABLE ov_kernels AS "
        "SELECT rank, device, tb_start(start_ns, $p) AS start_ns, tb_end(start_ns, end_ns, $p) AS end_ns, "
        "tensor_core, blocks_per_sm, est_occupancy_pct FROM gpu_ops "
        "WHERE run = $run AND kind = 'kernel' AND device IS NOT NULL AND rank IN (SELECT rank FROM scope_window)",
        {"run": scope.run, "p": plugin})


def _device_names(scope: Scope) -> pl.DataFrame:
    rows = scope.con.execute(
        "SELECT r.rank, TRY_CAST(json_extract(d.value, '$.id') AS INTEGER) AS device, "
        "json_extract_string(d.value, '$.name') AS name "
        "FROM runs r, json_each(r.devices) d WHERE r.run = $run AND r.devices IS NOT NULL "
        "AND r.rank IN (SELECT rank FROM scope_window)", {"run": scope.run}).fetchall()
    return pl.DataFrame(rows, schema={"rank": pl.Int32, "device": pl.Int32, "name": pl.String}, orient="row") \
        .unique(["rank", "device"], keep="first")


def overview_scoped(scope: Scope, window: str = "all") -> dict:
    """{"steps": one row per rank and step, "gpu": one row per rank and device} of a scope
    analysed in this process. Window `all`: gpu_utilization_pct is the time ledger's
    (ledger_utilization); `tb`: the plugin's (overview_gpu.sql)."""
    prepare(scope, check_window(window))
    steps = run_script(scope.con, "overview")
    steps = (steps.select(*ROW_FIELDS).cast(step_schema())
             if steps.height else pl.DataFrame(schema=step_schema()))
    gpu = run_script(scope.con, "overview_gpu")
    if gpu.height:
        gpu = (gpu.cast({"rank": pl.Int32, "device": pl.Int32})
               .join(_device_names(scope), on=["rank", "device"], how="left")
               .select(*GPU_FIELDS).cast(gpu_schema()))
    else:
        gpu = pl.DataFrame(schema=gpu_schema())
    if window == "all" and gpu.height:
        gpu = ledger_utilization(gpu, scope)
    return {"steps": steps, "gpu": gpu}


def ledger_utilization(gpu: pl.DataFrame, scope: Scope) -> pl.DataFrame:
    """The GPU summary with gpu_utilization_pct = 100 · busy / window of the time ledger
    (traceq.engine.ledger) per rank and device: the GPU busy that summary (100 − idle %),
    diagnose and `traceq steps` print for the same rank and steps (null: the device has no
    ledger window)."""
    from ..engine.ledger import ledger

    led = ledger(scope).steps
    util = (led.group_by("rank", "device").agg(pl.col("busy_ns").sum(), pl.col("window_ns").sum())
            .select("rank", "device", pl.when(pl.col("window_ns") > 0)
                    .then(100.0 * pl.col("busy_ns") / pl.col("window_ns")).alias("_util")))
    return (gpu.join(util.cast({"rank": pl.Int32, "device": pl.Int32}), on=["rank", "device"], how="left")
            .with_columns(pl.col("_util").alias("gpu_utilization_pct")).select(*GPU_FIELDS).cast(gpu_schema()))


def averages(steps: pl.DataFrame) -> pl.DataFrame:
    """Per rank the mean over its steps of every column (step = "average"), as the plugin's
    average row (a float: the mean of integer ns)."""
    cols = ["step_ns", *(f"{c}_ns" for c in CATEGORIES)]
    schema = {**step_schema(), **{c: pl.Float64 for c in cols}}
    if not steps.height:
        return pl.DataFrame(schema=schema)
    return (steps.group_by("rank", maintain_order=True).agg(*(pl.col(c).mean() for c in cols))
            .with_columns(step=pl.lit(AVERAGE)).select(*ROW_FIELDS).cast(schema))


def rank_part(scope: Scope, window: str, advice: bool = True) -> dict:
    """One rank's steps and GPU summary (and what the run's findings need of it, unless kept)."""
    return {**overview_scoped(scope, window), **(rank_advice(scope) if advice else {})}


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.1f} ms" if ns >= 1e6 else f"{ns / 1e3:,.1f} µs"


def headline(steps: pl.DataFrame, avg: pl.DataFrame, gpu: pl.DataFrame, scope: Scope, window: str) -> str:
    where = f"run {scope.run}" + (f" rank {scope.rank}" if scope.rank is not None else "")
    tag = " [TensorBoard plugin's steps]" if window == "tb" else ""
    if not steps.height:
        if window == "tb":
            return (f"{where}{tag}: no ProfilerStep#N spans and no CPU ops, so the plugin has no step to split "
                    "(--window all splits the whole rank)")
        return f"{where}: no CPU or GPU activity in scope to split"
    n_ranks = avg.height
    step_ns = float(avg["step_ns"].mean())
    cats = {c: float(avg[f"{c}_ns"].mean()) for c in CATEGORIES}
    top = sorted(cats.items(), key=lambda kv: (-kv[1], CATEGORIES.index(kv[0])))[:3]
    share = ", ".join(f"{CATEGORY_LABELS[c]} {100 * v / step_ns:.1f} %" for c, v in top if v > 0) if step_ns else ""
    text = (f"{where}{tag}: average step {_ms(step_ns)} over {steps.height} step{'s' if steps.height != 1 else ''}"
            + (f" of {n_ranks} ranks" if n_ranks > 1 else "") + (f"; {share}" if share else ""))
    if gpu.height:
        g = gpu.row(0, named=True) if gpu.height == 1 else None
        util = g["gpu_utilization_pct"] if g else gpu["gpu_utilization_pct"].mean()
        if util is not None:
            what = "the plugin's: kernels only" if window == "tb" else "GPU busy of the step windows, traceq steps"
            text += f"; GPU utilization {util:.1f} % ({what}" + (")" if g else "; mean over devices)")
    return text


def recommendations(fs) -> str | None:
    """The plugin's recommendations as diagnose's findings give them (RECOMMENDING_RULES), one
    line citing each with its estimated gain; None when diagnose finds none of them."""
    cited = [f for f in fs if f.id in RECOMMENDING_RULES]
    if not cited:
        return None
    return ("Recommendations (traceq diagnose): "
            + "; ".join(f"{f.id}: up to {f.gain()}" for f in cited))


def compute(scope: Scope, window: str = "all") -> Out:
    check_window(window)
    if window == "tb" and (scope.steps or scope.skip_first or scope.step_pattern):
        raise TraceqError("--steps, --skip-first and --step-pattern pick traceq's steps: add --window all "
                          "(--window tb splits the TensorBoard plugin's own steps)")
    if mapped(scope):
        outs, fs = map_with_findings(scope, rank_part, window)
        steps = concat([o["steps"] for o in outs])
        gpu = concat([o["gpu"] for o in outs])
        steps = steps.cast(step_schema()) if steps.height else pl.DataFrame(schema=step_schema())
        gpu = gpu.cast(gpu_schema()) if gpu.height else pl.DataFrame(schema=gpu_schema())
    else:
        parts = overview_scoped(scope, window)
        steps, gpu = parts["steps"], parts["gpu"]
        from ..engine.findings import run_findings

        fs = run_findings(scope)
    avg = averages(steps)
    head = "\n".join(x for x in (headline(steps, avg, gpu, scope, window), recommendations(fs)) if x)
    return Out(steps, head, tables={"gpu": gpu, "average": avg})


def _drop_order(steps: pl.DataFrame) -> tuple[str, ...]:
    """The category columns a narrow terminal leaves out first: the smallest in total (a
    DataLoader at a fifth of the step stays; an empty Memset column goes)."""
    cols = [f"{c}_ns" for c in CATEGORIES]
    if not steps.height:
        return tuple(cols)
    totals = steps.select(pl.col(c).sum() for c in cols).row(0)
    return tuple(c for _, c in sorted(zip((t or 0 for t in totals), cols), key=lambda kv: kv[0]))


def view(res) -> list[Block]:
    steps = res.df
    drop = _drop_order(steps)
    blocks = [Block(steps, res.headline, drop_first=drop, max_rows=200, more=", --steps A:B picks steps")]
    avg = res.tables.get("average")
    if avg is not None and avg.height:
        blocks.append(Block(avg, title="Average over each rank's steps", drop_first=drop))
    gpu = res.tables.get("gpu")
    if gpu is not None and gpu.height:
        tb = res.params.get("window") == "tb"
        title = ("GPU summary (window: the first step's start to the last step's end)" if tb else
                 "GPU summary (utilization: the time ledger's busy over the step windows; the other columns: the "
                 "first step's start to the last step's end)")
        blocks.append(Block(gpu, title=title, drop_first=("name", "tensor_core_pct")))
    return blocks


def _json(res) -> dict:
    return {"analysis": "overview", "run": res.run, "rank": res.rank, "steps": res.steps, "labels": res.labels,
            "window": res.params.get("window", "all"), "headline": res.headline, "units": res.units(),
            "rows": res.rows_df().select(*STEP_FIELDS).to_dicts(),
            "average": res.rows_df(res.tables["average"]).select(*STEP_FIELDS).to_dicts(),
            "gpu": res.tables["gpu"].select(*GPU_FIELDS).to_dicts()}


def _csv(res) -> list:
    return [(None, res.rows_df()), ("average", res.rows_df(res.tables["average"])), ("gpu", res.tables["gpu"])]


# ---------------------------------------------------------------- the report
def step_figure(steps: pl.DataFrame):
    """Stacked bars: per step (and rank) its time in each category, ms."""
    import plotly.graph_objects as go

    from ..report.figures import base_layout, esc

    if not steps.height:
        return None
    many = steps["rank"].n_unique() > 1
    x = [esc(f"r{r} · {s}" if many else str(s)) for r, s in zip(steps["rank"].to_list(), steps["step"].to_list())]
    fig = go.Figure()
    fig.update_layout(base_layout("Step time breakdown (ms)", height=380))
    for c in CATEGORIES:
        fig.add_trace(go.Bar(name=CATEGORY_LABELS[c], x=x, y=(steps[f"{c}_ns"] / 1e6).to_list(),
                             marker_color=COLORS[c],
                             hovertemplate="step %{x}: %{y:,.3f} ms<extra>" + CATEGORY_LABELS[c] + "</extra>"))
    fig.update_layout(barmode="stack", xaxis_title="step", yaxis_title="ms", xaxis_type="category")
    return fig


COLORS = {"kernel": "#1f77b4", "memcpy": "#d62728", "memset": "#f7b6d2", "communication": "#ff7f0e",
          "runtime": "#2ca02c", "dataloader": "#bcbd22", "cpu_exec": "#9467bd", "other": "#c7c7c7"}
TILES = (("gpu_utilization_pct", "GPU utilization"), ("sm_efficiency_pct", "Est. SM efficiency"),
         ("achieved_occupancy_pct", "Est. achieved occupancy"), ("tensor_core_pct", "Kernel time on tensor cores"))


def gpu_tiles(gpu: pl.DataFrame):
    """The GPU summary as tiles: one row per device, one number per metric ("–" when the trace
    has no data for it)."""
    import plotly.graph_objects as go

    from ..report.figures import base_layout, esc

    if not gpu.height:
        return None
    rows = gpu.height
    fig = go.Figure()
    fig.update_layout(base_layout("GPU summary", height=80 + 120 * rows))
    fig.update_layout(grid=dict(rows=rows, columns=len(TILES), pattern="independent"))
    for i, r in enumerate(gpu.iter_rows(named=True)):
        who = f"rank {r['rank']} · GPU {r['device']}" + (f" ({r['name']})" if r["name"] else "")
        for j, (col, label) in enumerate(TILES):
            v = r[col]
            fig.add_trace(go.Indicator(
                mode="number", value=v if v is not None else None,
                number=dict(suffix=" %", valueformat=".1f"),
                title=dict(text=esc(label) + "<br><span style='font-size:0.75em'>" + esc(who) + "</span>"),
                domain=dict(row=i, column=j)))
    return fig


def report_section(ctx) -> list:
    """The per-step stacked breakdown, the GPU summary tiles and table."""
    from ..report.html import table
    from ..report.many_ranks import many, ranks_of
    from ..report.parts import Section, add, add_table

    sec = Section("overview", ANALYSIS.report,
                  intro="Each step split by the TensorBoard profiler plugin's rules: an instant "
                        "goes to the first of Kernel, Memcpy, Memset, Communication, Runtime, DataLoader, CPU Exec "
                        "active then, else Other. GPU summary per device: utilization is the time ledger's GPU busy "
                        "(traceq steps); SM efficiency and occupancy from the first step's start to the last "
                        "step's end. The plugin's own steps and utilization: traceq overview --window tb.")
    with ctx.guard(sec, "overview"):
        parts = overview_scoped(ctx.scope, "all")
        steps, gpu = parts["steps"], parts["gpu"]
        avg = averages(steps)
        sec.headline = headline(steps, avg, gpu, ctx.scope, "all")
        ctx.results["overview"] = parts
        if many(ranks_of(steps) or ranks_of(gpu)):
            _many_ranks(sec, steps, gpu)
        else:
            add(sec, step_figure(steps), "overview")
            add(sec, gpu_tiles(gpu), "overview-gpu")
            add_table(sec, table(gpu), "overview-gpu")
    return [sec]


def _many_ranks(sec, steps: pl.DataFrame, gpu: pl.DataFrame) -> None:
    """A run of many ranks: step time per step over the ranks (a box) with the slowest ranks'
    own steps, those ranks' stacked steps; the GPU summary's spread over the devices, its
    quantiles and the least utilized devices."""
    from ..report.many_ranks import rank_boxes, step_boxes, summarise, worst
    from ..report.parts import add

    if steps.height:
        total = steps.with_columns(pl.sum_horizontal([f"{c}_ns" for c in CATEGORIES]).alias("step_ns"))
        bad = worst(total, ("step_ns", "other_ns", "communication_ns"))["rank"].to_list()
        add(sec, step_boxes(total, "step_ns", "Step time (distribution over the ranks; lines: the worst ranks)",
                            worst_ranks=bad), "overview")
        add(sec, step_figure(steps.filter(pl.col("rank").is_in(bad[:3]))), "overview-worst")
        sec.notes.append(f"Stacked steps drawn for the worst ranks ({', '.join(str(r) for r in bad[:3])}); "
                         "every rank's steps: `traceq overview -f csv`.")
    if gpu.height:
        bad = worst(gpu, "gpu_utilization_pct", descending=False)["rank"].to_list()
        add(sec, rank_boxes(gpu, [(c, label) for c, label in TILES], "GPU summary (distribution over the devices)",
                            "%", worst_ranks=bad), "overview-gpu")
        summarise(sec, gpu, "gpu_utilization_pct", "traceq overview -f json", "overview-gpu",
                  what="GPU summary per device", descending=False)


ANALYSIS = Analysis(
    name="overview",
    help="The TensorBoard profiler plugin's Overview: each step split into Kernel, Memcpy, Memset, Communication, "
         "Runtime, DataLoader, CPU Exec and Other, the average step, and per device the GPU summary.\n\n"
         "An instant of a step goes to the first category active then, in that order (a memcpy hidden under a "
         "kernel counts as Kernel); Other is the rest, so a step's categories add up to its length. The default "
         "window (all) splits traceq's steps and its GPU utilization is the time ledger's GPU busy (kernels, copies, "
         "memsets) over the step windows, the number summary, diagnose and steps print; --window tb reproduces the "
         "plugin: its steps (ProfilerStep#N extended to the end of the GPU work they launched, the incomplete last "
         "steps dropped) and its utilization (time with a kernel running over the first step's start to the last "
         "step's end). The rest of the GPU summary, over the first step's start to the last step's end: estimated SM efficiency "
         "(blocks per SM, capped at 1), estimated achieved occupancy (duration-weighted) and the share of kernel "
         "time on tensor cores.",
    examples=("traceq overview", "traceq overview --skip-first 2", "traceq overview --window tb -f json"),
    compute=compute,
    params=(WINDOW_PARAM, *EXECUTOR_PARAMS),
    per_rank=True,
    columns=tuple(Column(c, m) for c, m in output_columns("overview") if c != "idx"),
    sort=("rank", "step order"),
    drop_first=("dataloader_ns", "memset_ns", "communication_ns", "runtime_ns", "memcpy_ns", "other_ns"),
    view=view,
    json=_json,
    csv=_csv,
    report="Overview: step time breakdown (TensorBoard plugin)",
    report_section=report_section,
    order=15,
    tables=(("average", tuple(Column(c, "the mean over the rank's steps: " + m) for c, m in output_columns("overview")
                              if c != "idx")),
            ("gpu", (Column("rank", "rank"), Column("device", "device id"), Column("name", "device name"),
                     *(Column(c, m) for c, m in output_columns("overview_gpu") if c not in ("rank", "device"))))),
)
