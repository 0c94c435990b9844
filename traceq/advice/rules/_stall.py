"""Helpers of the stall rules: a cause's GPU idle time and the host calls behind it."""
from __future__ import annotations

import polars as pl


def cause_row(stalls, cause: str) -> dict | None:
    c = stalls.causes.filter(pl.col("cause") == cause)
    return c.row(0, named=True) if c.height else None


def host_calls(scope, where: str) -> pl.DataFrame:
    """Host ops of the scope matching the SQL condition `where` (on h.kind, h.name), per
    name: count and host time, most time first."""
    return scope.df(
        "SELECT h.name, count(*) AS n, sum(h.end_ns - h.start_ns)::BIGINT AS ns FROM host_ops h "
        "JOIN scope_window w ON w.rank = h.rank WHERE h.run = $run AND (" + where + ") "
        "AND (w.lo_ns IS NULL OR (h.start_ns >= w.lo_ns AND h.start_ns < w.hi_ns)) "
        "GROUP BY h.name ORDER BY ns DESC, h.name")


def calls_text(calls: pl.DataFrame, n: int = 3) -> str:
    parts = [f"{r['name']} ×{r['n']:,} ({r['ns'] / 1e6:,.2f} ms host)" for r in calls.head(n).iter_rows(named=True)]
    return ", ".join(parts) + (f" and {calls.height - n} more" if calls.height > n else "")


def idle_text(row: dict, ev, label: str) -> str:
    return (f"GPU idle {row['idle_ns'] / 1e6:,.2f} ms ({row['idle_pct']:.1f} % of the GPU span, "
            f"{ev.per_step_ms(row['idle_ns']):.2f} ms/step) in {row['gaps']:,} gaps while the host was {label}")
