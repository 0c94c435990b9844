"""Per-region CPU versus GPU time (DESIGN §4.3; SQL in queries/breakdown*.sql).

`breakdown(store, by=...)` returns one row per region name: instances, CPU time, GPU ops
launched inside, GPU projected and busy time (nsys `nvtx_gpu_proj_sum` semantics);
`breakdown_instances` the per-instance table behind it (nsys `nvtx_gpu_proj_trace`);
`timer_breakdown` CPU versus GPU time per timer key with distribution statistics.
"""
from __future__ import annotations

import polars as pl

from .. import queries
from ..store import register_pl
from .scope import Scope, open_scope

# --by value -> region sources it selects (gpu_annotation = Kineto GPU-side annotation spans).
BY = {
    "all": ("nvtx", "annotation", "gpu_annotation", "step", "dataloader", "timer"),
    "nvtx": ("nvtx",),
    "annotation": ("annotation", "gpu_annotation"),
    "step": ("step",),
    "dataloader": ("dataloader",),
    "timer": ("timer",),
}


def _sources(by: str) -> list[str]:
    from ..errors import TraceqError

    if by not in BY:
        raise TraceqError(f"--by {by!r}: choose from {', '.join(BY)}")
    return list(BY[by])


def _install(scope: Scope) -> None:
    queries.install_macros(scope.con)


def _build_instances(scope: Scope, by: str) -> None:
    """Temp table `bd_instances` on the scope's connection (queries/breakdown_instances.sql)."""
    sources = _sources(by)
    _install(scope)
    scope.df("CREATE OR REPLACE TEMP TABLE bd_instances AS " + queries.load("breakdown_instances"),
             {"sources": sources})


def instances_scoped(scope: Scope, by: str = "all") -> pl.DataFrame:
    """Per region instance (see queries/breakdown_instances.sql)."""
    _build_instances(scope, by)
    return scope.df("SELECT * FROM bd_instances ORDER BY rid")


def partials_scoped(scope: Scope, by: str = "all") -> pl.DataFrame:
    """Per rank and region: the sums and counts `breakdown` adds up (queries/breakdown_rank.sql)."""
    _build_instances(scope, by)
    return scope.df(queries.load("breakdown_rank"))


def breakdown_scoped(scope: Scope, by: str = "all") -> pl.DataFrame:
    _build_instances(scope, by)
    scope.df("CREATE OR REPLACE TEMP TABLE bd_partials AS " + queries.load("breakdown_rank"))
    return scope.df(queries.load("breakdown"))


def reduce_partials(con, partials: pl.DataFrame) -> pl.DataFrame:
    """`breakdown` from the per-rank partials of every rank (breakdown.sql over bd_partials)."""
    from ..store import fetch_pl

    register_pl(con, "bd_partials", partials)
    try:
        return fetch_pl(con, queries.load("breakdown"))
    finally:
        con.unregister("bd_partials")


def timer_scoped(scope: Scope) -> pl.DataFrame:
    return scope.df(queries.load("breakdown_timer"))


def breakdown(store=None, run: str | None = None, rank: int | None = None, steps: str | None = None,
              by: str = "all", *,
        step_pattern: str | None = None, skip_first: int = 0) -> pl.DataFrame:
    """Per region name (and source, NVTX domain): instances, unfinished, cpu_total_ns,
    cpu_mean_ns, gpu_instances, gpu_ops, gpu_proj_ns, gpu_busy_ns, gpu_busy_per_cpu.
    `by`: all | nvtx | annotation | step | dataloader | timer. Sorted by CPU time."""
    return breakdown_scoped(open_scope(store, run, rank, steps, step_pattern, skip_first), by)


def breakdown_instances(store=None, run: str | None = None, rank: int | None = None,
                        steps: str | None = None, by: str = "all", *,
        step_pattern: str | None = None, skip_first: int = 0) -> pl.DataFrame:
    """One row per region instance with the GPU ops it launched and their projection."""
    return instances_scoped(open_scope(store, run, rank, steps, step_pattern, skip_first), by)


def timer_breakdown(store=None, run: str | None = None, rank: int | None = None,
                    steps: str | None = None, *,
        step_pattern: str | None = None, skip_first: int = 0) -> pl.DataFrame:
    """Per timer key: count and min/mean/median/max/stdev of CPU and GPU durations (ns)."""
    return timer_scoped(open_scope(store, run, rank, steps, step_pattern, skip_first))


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
        parts.append(f"top: {top['name'][:50]} {_ms(top['cpu_total_ns'])} CPU -> {gpu}")
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
