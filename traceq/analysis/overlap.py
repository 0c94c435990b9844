"""Communication/compute overlap per rank and per step, and across ranks (DESIGN §4.5).

SQL: queries/summary_ops.sql (the ops, window and classes, shared with `summary`),
queries/overlap_ops.sql (the ProfilerStep that launched each op), queries/overlap.sql
(per rank / per step) and queries/overlap_ranks.sql (across ranks).
"""
from __future__ import annotations

import polars as pl

from ..errors import TraceqError
from ..store import register_pl
from .scope import Scope, open_scope
from .summary import missing_ranks, no_gpu_text, prepare_ops, run_script

BY = ("rank", "step", "across")

_SCHEMA = {"rank": pl.Int32, "step": pl.Int64, "steps": pl.Int64, "comm_ops": pl.Int64, "comm_ns": pl.Int64,
           "compute_ns": pl.Int64, "overlapped_ns": pl.Int64, "exposed_ns": pl.Int64, "overlap_pct": pl.Float64,
           "step_ns": pl.Int64, "exposed_step_pct": pl.Float64}
_ACROSS = {"ranks": pl.Int64, "comm_ranks": pl.Int64, "min_overlap_pct": pl.Float64, "median_overlap_pct": pl.Float64,
           "max_overlap_pct": pl.Float64, "min_exposed_ns": pl.Int64, "median_exposed_ns": pl.Int64,
           "max_exposed_ns": pl.Int64, "comm_ns": pl.Int64, "exposed_ns": pl.Int64, "overlap_pct": pl.Float64,
           "slowest_rank": pl.Int32, "slowest_step_ns": pl.Int64, "most_exposed_rank": pl.Int32,
           "least_exposed_rank": pl.Int32}


def check_by(by: str) -> str:
    if by not in BY:
        raise TraceqError(f"--by {by!r}: choose rank (one row per rank), step (one row per rank and "
                          "ProfilerStep) or across (one row summarising the ranks)")
    return by


def prepare_overlap(scope: Scope, window: str = "all") -> None:
    """(Re)build analysis_ops (summary_ops.sql) and overlap_ops (+ launching step) for `scope`."""
    prepare_ops(scope, window)
    run_script(scope.con, "overlap_ops", {"run": scope.run})


def overlap_rows(scope: Scope, by: str = "rank") -> pl.DataFrame:
    """Rank rows (`by="rank"`) or (rank, step) rows (`by="step"`) over the overlap_ops
    already prepared on the scope's connection (prepare_overlap)."""
    df = run_script(scope.con, "overlap", {"run": scope.run, "by": by})
    return df.cast(_SCHEMA) if df.height else pl.DataFrame(schema=_SCHEMA)


def across_ranks(by_rank: pl.DataFrame, con=None) -> pl.DataFrame:
    """One row: min/median/max overlap and exposed time over ranks, straggler hints."""
    import duckdb

    con = con or duckdb.connect(":memory:")
    register_pl(con, "overlap_by_rank", by_rank.select(list(_SCHEMA)).cast(_SCHEMA))
    df = run_script(con, "overlap_ranks")
    con.unregister("overlap_by_rank")
    return df.cast(_ACROSS)


def overlap_scoped(scope: Scope, window: str = "all", by: str = "rank") -> pl.DataFrame:
    check_by(by)
    prepare_overlap(scope, window)
    if by == "step":
        return overlap_rows(scope, "step")
    ranks = overlap_rows(scope, "rank")
    return across_ranks(ranks, scope.con) if by == "across" else ranks


def overlap(store=None, run: str | None = None, rank: int | None = None, steps: str | None = None,
            window: str = "all", by: str = "rank", *,
        step_pattern: str | None = None, skip_first: int = 0) -> pl.DataFrame:
    """Communication time, the part of it overlapped by compute kernels, the exposed rest and
    overlap_pct = 100·overlapped/comm (HTA's definition), per rank (`by="rank"`), per rank and
    ProfilerStep (`by="step"`), or summarised across ranks (`by="across"`). `window="hta"`
    reproduces HTA 0.5.0's get_comm_comp_overlap."""
    return overlap_scoped(open_scope(store, run, rank, steps, step_pattern, skip_first), window, by)


def _ms(ns) -> str:
    return f"{ns / 1e6:,.1f} ms" if ns >= 1e6 else f"{ns / 1e3:,.1f} µs"


def headline(by_rank: pl.DataFrame, across: pl.DataFrame | None, scope: Scope, window: str = "all") -> str:
    missing = missing_ranks(by_rank, scope)
    if by_rank.height == 0:
        return no_gpu_text(scope, missing)
    tag = " [HTA window]" if window == "hta" else ""
    comm = by_rank.filter(pl.col("comm_ns") > 0)
    who = f"run {scope.run}" + (f" rank {by_rank['rank'][0]}" if by_rank.height == 1 else f", {by_rank.height} ranks")
    if comm.height == 0:
        return f"{who}{tag}: no communication kernels (nothing to overlap)"
    total, exposed = comm["comm_ns"].sum(), comm["exposed_ns"].sum()
    pct = 100 * comm["overlapped_ns"].sum() / total
    text = f"{who}{tag}: communication {_ms(total)}, {pct:.1f} % overlapped with compute, exposed {_ms(exposed)}"
    steps = comm.filter(pl.col("step_ns") > 0)
    if steps.height:
        ex = (steps["exposed_step_pct"] * steps["step_ns"]).sum() / steps["step_ns"].sum()
        text += f" ({ex:.1f} % of step time)"
    if across is not None and across.height and comm.height > 1:
        a = across.row(0, named=True)
        text += (f"; across ranks overlap min/median/max {a['min_overlap_pct']:.1f}/{a['median_overlap_pct']:.1f}/"
                 f"{a['max_overlap_pct']:.1f} %, most exposed rank {a['most_exposed_rank']}")
        if a["slowest_rank"] is not None:
            text += f", slowest step: rank {a['slowest_rank']} ({_ms(a['slowest_step_ns'])})"
    if missing:
        text += f"; no GPU activity on rank{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))}"
    return text
