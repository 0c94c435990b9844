"""Kernel hotspots with avoidable work called out (DESIGN §4.2; SQL in queries/hotspots.sql)."""
from __future__ import annotations

import polars as pl

from .. import queries
from ..categories import ADVICE
from .scope import Scope, open_scope

# "Swarm" of tiny kernels: at least this many per step, each shorter than this on average.
SWARM_PER_STEP = 100
SWARM_MEAN_NS = 10_000


def _advice(df: pl.DataFrame, n_steps: int) -> pl.DataFrame:
    per_step = pl.col("count") / max(n_steps, 1)
    swarm = (per_step >= SWARM_PER_STEP) & (pl.col("mean_ns") < SWARM_MEAN_NS)
    advice = (
        pl.when(pl.col("category") == "transpose").then(pl.lit(ADVICE["transpose"]))
        .when(pl.col("category") == "memset").then(pl.lit(ADVICE["memset"]))
        .when((pl.col("category") == "memcpy") & pl.col("pageable")).then(pl.lit(ADVICE["memcpy"]))
        .when(pl.col("category").is_in(["optimizer", "elementwise"]) & swarm).then(pl.lit(ADVICE["optimizer"]))
    )
    return df.with_columns(advice=advice, avoidable=advice.is_not_null())


def hotspots_scoped(scope: Scope, top: int | None = None, categories: list[str] | None = None) -> pl.DataFrame:
    df = scope.df(queries.load("hotspots"))
    n_steps = scope.df(
        "SELECT count(*) AS n FROM regions r JOIN scope_window w ON w.rank = r.rank "
        "WHERE r.run = $run AND r.source = 'step' AND (r.domain IS NULL OR r.domain <> 'gpu') "
        "AND (w.lo_ns IS NULL OR (r.start_ns >= w.lo_ns AND r.start_ns < w.hi_ns))")["n"][0]
    n_ranks = scope.df("SELECT count(*) AS n FROM scope_window")["n"][0]
    df = _advice(df, max(int(n_steps), 1) * (1 if n_steps else n_ranks))
    if categories:
        df = df.filter(pl.col("category").is_in(categories))
    if top:
        df = df.head(top)
    return df


def hotspots(store=None, run: str | None = None, rank: int | None = None, steps: str | None = None,
             top: int | None = None, categories: list[str] | None = None, *,
        step_pattern: str | None = None, skip_first: int = 0) -> pl.DataFrame:
    """Per GPU kernel/copy name: category, count, total/mean/median/min/max/stddev (ns), % of GPU op time,
    and `advice` for avoidable categories. One row per name; sorted by total time."""
    return hotspots_scoped(open_scope(store, run, rank, steps, step_pattern, skip_first), top, categories)


def headline(df: pl.DataFrame, scope: Scope) -> str:
    if df.height == 0:
        return f"run {scope.run}: no GPU kernels, copies or memsets in scope (CPU-only trace?)"
    total = df["total_ns"].sum()
    top = df.row(0, named=True)
    avoid = df.filter(pl.col("avoidable")).group_by("category").agg(pl.col("total_ns").sum()).sort("total_ns", descending=True)
    parts = [f"run {scope.run}{'' if scope.rank is None else f' rank {scope.rank}'}: GPU op time {total / 1e6:,.2f} ms "
             f"in {df['count'].sum():,} ops, {df.height} names; top hotspot: {top['name'][:60]} ({top['pct']:.1f} %)"]
    if avoid.height:
        parts.append("avoidable: " + ", ".join(f"{r['category']} {r['total_ns'] / 1e6:,.2f} ms ({100 * r['total_ns'] / total:.1f} %)"
                                                for r in avoid.iter_rows(named=True)))
    return "; ".join(parts)
