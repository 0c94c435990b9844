"""Helpers of the stall rules: a cause's GPU idle time and the host calls behind it."""
from __future__ import annotations

from ...lazy import polars as pl

from ...queries import install_macros


def cause_row(stalls, cause: str) -> dict | None:
    c = stalls.causes.filter(pl.col("cause") == cause)
    return c.row(0, named=True) if c.height else None


def ledger_ns(stalls, *columns: str) -> int:
    """The time ledger's total of `columns` (<label>_ns, traceq.engine.ledger) for the
    stall result's scope; 0 when its facts carry no ledger."""
    t = getattr(getattr(stalls, "facts", None), "ledger", None)
    if not t or not t.get("window_ns"):
        return 0
    return int(sum(t[c] for c in columns))


def ledger_text(stalls, ns: int, ev, label: str) -> str:
    """The ledger's idle time of a cause in words (the evidence of a finding whose idle time
    lies outside the stall gaps: before a step's first GPU op, after its last)."""
    w = stalls.facts.ledger["window_ns"]
    return (f"GPU idle {ns / 1e6:,.2f} ms ({100.0 * ns / w:.1f} % of the step windows{ev.per_step(ns)}) while the "
            f"host was {label} (the time ledger, traceq steps: idle before, between and after the GPU ops)")


def late_row(stalls, cause: str, column: str) -> dict | None:
    """The cause's row (stalls.sql) restricted to the gaps the host was late for: without the
    time (`column` of stalls_gaps.sql) in gaps whose next GPU op was already launched when the
    gap began (there the GPU waited on something else; a faster host wins nothing), and
    without start-up time (the gaps of `stalls.facts`, traceq.advice.run_facts.carve_warm,
    which traceq.advice.findings always provides). Adds `queued_ns`, the time taken out."""
    row = cause_row(stalls, cause)
    if row is None or not row["idle_ns"]:
        return row
    f = stalls.facts
    late = f.late_ns(column)
    return {**row, "idle_ns": late, "idle_pct": (row["idle_pct"] or 0.0) * late / row["idle_ns"],
            "gaps": f.late_gaps(column), "queued_ns": f.queued_ns(column)}


def queued_text(row: dict) -> str:
    q = row.get("queued_ns") or 0
    return (f"; {q / 1e6:,.2f} ms more of it fell in gaps whose next GPU op was already launched "
            "(the GPU waited on something else there: not counted)") if q else ""


def host_calls(scope, where: str, stalls=None) -> pl.DataFrame:
    """Host ops of the scope matching the SQL condition `where` (on h.kind, h.name), per
    name: count and host time, most time first. A run mapped over its ranks has them summed
    over the ranks in `stalls.host_calls` (its client scope holds no table data)."""
    tallied = getattr(stalls, "host_calls", None)
    if tallied is not None and where in tallied:
        return tallied[where]
    install_macros(scope.con)   # the host-API classes `where` names (traceq.rules.host_api)
    return scope.df(
        "SELECT h.name, count(*) AS n, sum(h.end_ns - h.start_ns)::BIGINT AS ns FROM host_ops h "
        "JOIN scope_window w ON w.rank = h.rank WHERE h.run = $run AND (" + where + ") "
        "AND (w.lo_ns IS NULL OR (h.start_ns >= w.lo_ns AND h.start_ns < w.hi_ns)) "
        "GROUP BY h.name ORDER BY ns DESC, h.name")


def host_calls_by_rank(scope, where: str) -> dict[int, pl.DataFrame]:
    """`host_calls(scope narrowed to the rank, where)` of each rank of the scope, in one query
    (a rank without such calls: an empty frame)."""
    install_macros(scope.con)
    df = scope.df(
        "SELECT h.rank, h.name, count(*) AS n, sum(h.end_ns - h.start_ns)::BIGINT AS ns FROM host_ops h "
        "JOIN scope_window w ON w.rank = h.rank WHERE h.run = $run AND (" + where + ") "
        "AND (w.lo_ns IS NULL OR (h.start_ns >= w.lo_ns AND h.start_ns < w.hi_ns)) "
        "GROUP BY h.rank, h.name ORDER BY h.rank, ns DESC, h.name")
    ranks = [r[0] for r in scope.con.execute("SELECT rank FROM scope_window ORDER BY rank").fetchall()]
    parts = {r: d.drop("rank") for (r,), d in df.partition_by("rank", as_dict=True).items()}
    empty = df.clear().drop("rank")
    return {r: parts.get(r, empty) for r in ranks}


def calls_text(calls: pl.DataFrame, n: int = 3) -> str:
    parts = [f"{r['name']} ×{r['n']:,} ({r['ns'] / 1e6:,.2f} ms host)" for r in calls.head(n).iter_rows(named=True)]
    return ", ".join(parts) + (f" and {calls.height - n} more" if calls.height > n else "")


def idle_text(row: dict, ev, label: str) -> str:
    return (f"GPU idle {row['idle_ns'] / 1e6:,.2f} ms ({row['idle_pct']:.1f} % of the GPU span"
            f"{ev.per_step(row['idle_ns'])}) in {row['gaps']:,} gaps while the host was {label}")
