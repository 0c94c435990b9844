"""Per-region CPU time versus the GPU work launched inside it (NVTX ranges, record_function
annotations, ProfilerSteps, DataLoader calls, timer keys), with the semantics of nsys'
nvtx_gpu_proj_sum: a GPU op counts for every region on the launching thread that fully
contains its launch call; gpu_proj = last op end − first op start per instance; gpu_busy =
union of the ops. `--by timer`: CPU versus GPU time per timer key with its distribution.
Kineto's GPU-side annotation spans (gpu_user_annotation, ProfilerStep#N's GPU copy included)
are source gpu_annotation: GPU span, no CPU time, never a step (`--by step` is host steps).

SQL: traceq/queries/breakdown_instances.sql (per instance), breakdown_rank.sql (per rank and
region: sums and counts), breakdown.sql (their totals and means), breakdown_timer.sql.
"""
from __future__ import annotations

from ..engine.findings import fix_first_line, map_with_findings, rank_advice
from ..engine.per_rank import concat, mapped
from ..engine.scope import Scope, open_scope
from ..lazy import polars as pl
from ..queries import install_macros, load as load_sql
from ..store import register_pl
from ..text import shorten
from .spec import EXECUTOR_PARAMS, Analysis, Block, Out, Param, Result, sql_columns, top_param

# --by value -> region sources it selects (gpu_annotation = Kineto GPU-side annotation spans,
# GPU-side ProfilerStep#N copies included: `--by annotation` shows them, `--by step` does not).
BY = {
    "all": ("nvtx", "annotation", "gpu_annotation", "step", "dataloader", "timer"),
    "nvtx": ("nvtx",),
    "annotation": ("annotation", "gpu_annotation"),
    "step": ("step",),
    "dataloader": ("dataloader",),
    "timer": ("timer",),
}


def region_sources(by: str) -> list[str]:
    from ..errors import TraceqError

    if by not in BY:
        raise TraceqError(f"--by {by!r}: choose from {', '.join(BY)}")
    return list(BY[by])


def _install(scope: Scope) -> None:
    install_macros(scope.con)


def _build_instances(scope: Scope, by: str) -> None:
    """Temp table `bd_instances` on the scope's connection (queries/breakdown_instances.sql)."""
    sources = region_sources(by)
    _install(scope)
    scope.df("CREATE OR REPLACE TEMP TABLE bd_instances AS " + load_sql("breakdown_instances"),
             {"sources": sources})


def instances_scoped(scope: Scope, by: str = "all") -> pl.DataFrame:
    """Per region instance (see queries/breakdown_instances.sql)."""
    _build_instances(scope, by)
    return scope.df("SELECT * FROM bd_instances ORDER BY rid")


def partials_scoped(scope: Scope, by: str = "all") -> pl.DataFrame:
    """Per rank and region: the sums and counts `breakdown` adds up (queries/breakdown_rank.sql)."""
    _build_instances(scope, by)
    return scope.df(load_sql("breakdown_rank"))


def breakdown_scoped(scope: Scope, by: str = "all") -> pl.DataFrame:
    _build_instances(scope, by)
    scope.df("CREATE OR REPLACE TEMP TABLE bd_partials AS " + load_sql("breakdown_rank"))
    return scope.df(load_sql("breakdown"))


def reduce_partials(con, partials: pl.DataFrame) -> pl.DataFrame:
    """`breakdown` from the per-rank partials of every rank (breakdown.sql over bd_partials)."""
    from ..store import fetch_pl

    register_pl(con, "bd_partials", partials)
    try:
        return fetch_pl(con, load_sql("breakdown"))
    finally:
        con.unregister("bd_partials")


def timer_scoped(scope: Scope) -> pl.DataFrame:
    return scope.df(load_sql("breakdown_timer"))


def _ms(ns) -> str:
    return "n/a" if ns is None else f"{ns / 1e6:,.2f} ms"


def headline(df: pl.DataFrame, scope: Scope, by: str = "all") -> str:
    where = f"run {scope.run}{'' if scope.rank is None else f' rank {scope.rank}'}"
    if df.height == 0:
        what = "regions" if by == "all" else f"{by} regions"
        return (f"{where}: no {what} in scope (NVTX ranges, record_function annotations, ProfilerSteps, "
                "DataLoader calls or timer regions)")
    srcs = ", ".join(f"{s} {n}" for s, n in df.group_by("source").agg(pl.len().alias("n")).sort("source").iter_rows())
    parts = [f"{where}: {df.height} region names ({srcs}), {df['instances'].sum():,} instances"]
    cpu = df.filter(pl.col("cpu_total_ns").is_not_null() & (pl.col("source") != "step"))
    if cpu.height:
        top = cpu.row(0, named=True)
        ratio = top["gpu_busy_per_cpu"]
        if top["gpu_proj_ns"] is None:
            gpu = "not timed on the GPU"
        elif not top["gpu_instances"]:
            gpu = "no GPU work launched inside"
        else:
            gpu = (f"{_ms(top['gpu_proj_ns'])} GPU projected, {_ms(top['gpu_busy_ns'])} busy"
                   + (f" (busy/CPU {ratio:.2f})" if ratio is not None else ""))
        parts.append(f"top: {shorten(top['name'] or '(unnamed)', 60)} {_ms(top['cpu_total_ns'])} CPU -> {gpu}")
    n_open = int(df["unfinished"].sum() or 0)
    if n_open:
        parts.append(f"{n_open} instance(s) still open at capture end (flagged, counted to capture end)")
    return "; ".join(parts)


def timer_headline(df: pl.DataFrame, scope: Scope) -> str:
    where = f"run {scope.run}{'' if scope.rank is None else f' rank {scope.rank}'}"
    if df.height == 0:
        return f"{where}: no timer regions or timer statistics in scope (ingest a traceq timer log or Deep500 stats)"
    parts = []
    for key in ("BATCH", "EPOCH"):
        row = df.filter(pl.col("key") == key)
        if row.height:
            r = row.row(0, named=True)
            gpu = f", GPU {_ms(r['gpu_mean_ns'])} ({r['gpu_per_cpu']:.2f} of CPU)" if r["gpu_mean_ns"] is not None else ", not timed on the GPU"
            parts.append(f"{key} mean {_ms(r['cpu_mean_ns'])} CPU{gpu}")
            break
    io = df.filter(pl.col("key") == "IO")
    batch = df.filter(pl.col("key") == "BATCH")
    if io.height and batch.height and io["cpu_mean_ns"][0] is not None and batch["cpu_mean_ns"][0]:
        share = 100 * (io["cpu_total_ns"][0] or io["cpu_mean_ns"][0]) / (batch["cpu_total_ns"][0] or batch["cpu_mean_ns"][0])
        parts.append(f"IO {share:.1f} % of BATCH time")
    return f"{where}: {df.height} timer keys" + (": " + "; ".join(parts) if parts else "")


# ---------------------------------------------------------------- the command
def compute(scope: Scope, by: str = "all", top: int = 30) -> Out:
    if by == "timer":
        if mapped(scope):   # medians need every timer instance: read in one process
            scope = open_scope(scope.store, scope.run, None, scope.steps, scope.step_pattern, scope.skip_first)
        df = timer_scoped(scope)
        notes = (["timer_stats rows: summary-only timer output (Deep500 stats text): no instance counts or totals"]
                 if "timer_stats" in set(df["source"]) else [])
        return Out(df, timer_headline(df, scope), notes=notes)
    full, fs = _reduce(scope, by) if mapped(scope) else (breakdown_scoped(scope, by), scope)
    df = full.head(top) if top else full
    notes = []
    if top and full.height > top:
        notes.append(f"({full.height - top} more regions; --top 0 shows all)")
    if int(full["unfinished"].sum() or 0):
        notes.append("unfinished: instances still open when the capture ended; counted up to capture end")
    if full.filter(pl.col("source") == "step").height:
        notes.append("note: ProfilerStep counts only launches on its own (main) thread; PyTorch launches backward "
                     "kernels from the autograd thread, so a step's GPU projection can miss them (nsys rule)")
    highlight = [i for i, u in enumerate(df["unfinished"]) if u]
    return Out(df, fix_first_line(fs, headline(full, scope, by)), notes=notes, highlight=highlight)


def view(res: Result) -> list[Block]:
    df = res.df
    if res.params["by"] == "timer":
        return [Block(_timer_rows(df), res.headline, notes=res.notes, drop_first=("stdev_ns", "min_ns", "max_ns"))]
    shown = df.select("source", "name", "instances", "cpu_total_ns", "cpu_mean_ns", "gpu_ops", "gpu_proj_ns",
                      "gpu_busy_ns", "gpu_busy_per_cpu", "unfinished")
    if df["domain"].drop_nulls().len():
        shown = shown.insert_column(2, df["domain"])
    return [Block(shown, res.headline, notes=res.notes, highlight=res.highlight, drop_first=res.analysis.drop_first)]


def _timer_rows(df: pl.DataFrame) -> pl.DataFrame:
    """For the terminal: one row per key and clock (like Deep500's CPU / GPU sections),
    so the table stays narrow; JSON/CSV keep one wide row per key."""
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


def rank_part(scope: Scope, by: str, advice: bool = True) -> dict:
    """One rank's sums and counts per region (and what the run's findings need of it, unless kept)."""
    return {"partials": partials_scoped(scope, by), **(rank_advice(scope) if advice else {})}


def _reduce(scope: Scope, by: str):
    """(breakdown rows, findings) of a run mapped over its ranks: breakdown.sql over the
    ranks' partials, the same SQL as in one process."""
    region_sources(by)
    outs, fs = map_with_findings(scope, rank_part, by=by)
    return reduce_partials(scope.con, concat([o["partials"] for o in outs])), fs


# ---------------------------------------------------------------- the report
REPORT_ROWS = 30


def report_section(ctx) -> list:
    """Regions by CPU time: a chart and the table, with the GPU work launched inside."""
    from ..report import figures
    from ..report.html import table
    from ..report.parts import Section, add, add_table

    sec = Section("regions", ANALYSIS.report,
                  intro="Per region (NVTX range, record_function annotation, DataLoader call, timer key): CPU time "
                        "in the range, and the GPU work launched inside it — projected (first op start to last op "
                        "end) and busy (union of the ops), nsys nvtx_gpu_proj_sum semantics.")
    with ctx.guard(sec, "breakdown"):
        bd = breakdown_scoped(ctx.scope)
        ctx.results["breakdown"] = bd
        sec.headline = headline(bd, ctx.scope)
        chart = bd.filter(pl.col("source") != "step") if "source" in bd.columns else bd
        add(sec, figures.region_bars(chart), "regions")
        cols = [c for c in ("source", "name", "ranks", "instances", "cpu_total_ns", "cpu_mean_ns", "gpu_ops",
                            "gpu_proj_ns", "gpu_busy_ns", "gpu_busy_per_cpu") if c in bd.columns]
        add_table(sec, table(bd.select(cols), max_rows=REPORT_ROWS), "regions")
        if bd.height > REPORT_ROWS:
            sec.notes.append(f"Top {REPORT_ROWS} of {bd.height:,} regions by CPU time.")
    return [sec]


ANALYSIS = Analysis(
    name="breakdown",
    help="Per-region CPU time versus the GPU work launched inside it (NVTX ranges, record_function "
         "annotations, ProfilerSteps, DataLoader calls, timer keys).\n\n"
         "A GPU op counts for every region on the launching thread that fully contains its launch call "
         "(nsys nvtx_gpu_proj rule). gpu_proj = last op end - first op start per instance; gpu_busy = union "
         "of the ops; gpu_busy_per_cpu < 1: the GPU works less than the host spends in the region. Kineto "
         "GPU-side annotation spans (ProfilerStep's GPU copy too) show as source gpu_annotation, with their "
         "GPU span and no CPU time; --by step shows the host steps. --by timer shows CPU vs GPU time per "
         "timer key with min/mean/median/max/stdev.",
    examples=("traceq breakdown --by nvtx --top 20",
              "traceq breakdown --by annotation --steps 3:8 --format csv -o regions.csv",
              "traceq breakdown --by timer"),
    compute=compute,
    params=(Param("by", str, "all", "Region kind: all, nvtx, annotation, step, dataloader or timer.",
                  "KIND", choices=("all", "nvtx", "annotation", "step", "dataloader", "timer")),
            top_param(30, "Show the N regions with the most CPU time (0 = all)."),
            *EXECUTOR_PARAMS),
    per_rank=True,
    columns=sql_columns("breakdown"),
    sort=("cpu_total_ns descending",),
    drop_first=("unfinished", "gpu_busy_per_cpu", "cpu_mean_ns", "gpu_proj_ns", "gpu_ops", "domain", "source"),
    view=view,
    report="Regions: CPU versus GPU time",
    report_section=report_section,
    order=40,
)
