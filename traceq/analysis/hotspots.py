"""Kernel hotspots with avoidable work called out (DESIGN §4.2; SQL in queries/hotspots.sql)."""
from __future__ import annotations

import polars as pl

from .. import queries
from .scope import Scope, open_scope


def _advice(df: pl.DataFrame, fs: list) -> pl.DataFrame:
    """`advice` for the kernel names an evidence-gated finding (traceq.advice) cites."""
    by_name: dict[str, str] = {}
    for f in fs:
        for name in f.kernels:
            by_name.setdefault(name, f"{f.id}: {f.advice}")
    advice = pl.Series("advice", [by_name.get(n) for n in df["name"]], dtype=pl.String)
    return df.with_columns(advice=advice, avoidable=advice.is_not_null())


def hotspots_scoped(scope: Scope, top: int | None = None, categories: list[str] | None = None,
                    fs: list | None = None) -> pl.DataFrame:
    """`fs`: findings of the scope (traceq.advice); rows of the kernels they cite get their
    advice. Only the kernel-evidence rules cite kernels, so when not given those are computed
    (traceq.advice.findings)."""
    from ..advice import findings

    df = scope.df(queries.load("hotspots"))
    df = _advice(df, findings(scope) if fs is None else fs)
    if categories:
        df = df.filter(pl.col("category").is_in(categories))
    if top:
        df = df.head(top)
    return df


def hotspots(store=None, run: str | None = None, rank: int | None = None, steps: str | None = None,
             top: int | None = None, categories: list[str] | None = None, *,
        step_pattern: str | None = None, skip_first: int = 0) -> pl.DataFrame:
    """Per GPU kernel/copy name: category, count, total/mean/median/min/max/stddev (ns), % of GPU op time,
    and `advice` where an evidence-gated advice rule (traceq.advice) cites the kernel. One row per name; sorted by total time."""
    return hotspots_scoped(open_scope(store, run, rank, steps, step_pattern, skip_first), top, categories)


def headline(df: pl.DataFrame, scope: Scope, labels: dict | None = None) -> str:
    """The verdict line. The top hotspot is named by its table label (`labels`: name -> the
    short label of traceq.kernels.labels) when given, so the line and the table agree; else by
    its name shortened in the middle (a signature is never cut mid-list at its end)."""
    from ..render import shorten

    if df.height == 0:
        from .diagnose import no_gpu_reason

        return f"run {scope.run}: no GPU kernels, copies or memsets in scope ({no_gpu_reason(scope)})"
    total = df["total_ns"].sum()
    top = df.row(0, named=True)
    avoid = df.filter(pl.col("avoidable")).group_by("category").agg(pl.col("total_ns").sum()).sort("total_ns", descending=True)
    parts = [f"run {scope.run}{'' if scope.rank is None else f' rank {scope.rank}'}: GPU op time {total / 1e6:,.2f} ms "
             f"in {df['count'].sum():,} ops, {df.height} names; top hotspot: {(labels or {}).get(top['name']) or shorten(top['name'], 60)} ({top['pct']:.1f} %)"]
    if avoid.height:
        parts.append("avoidable: " + ", ".join(f"{r['category']} {r['total_ns'] / 1e6:,.2f} ms ({100 * r['total_ns'] / total:.1f} %)"
                                                for r in avoid.iter_rows(named=True)))
    return "; ".join(parts)
