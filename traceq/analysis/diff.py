"""What changed between two runs (DESIGN §4.6): per category, per kernel name, per region,
and the headline numbers of `summary` and `overlap` side by side.

SQL: queries/diff_side.sql aggregates one run (run on each side, each with its own scope),
queries/diff.sql compares the two. `diff()` returns a dict of polars DataFrames:

    {"categories": ..., "kernels": ..., "regions": ..., "headline": <one row>}

which the CLI prints one after another (JSON: one object with those four keys).
"""
from __future__ import annotations

import polars as pl

from ..store import fetch_pl, register_pl
from ..threads import ordered_map
from .scope import Scope, open_scope
from .summary import prepare_ops, run_script

TABLES = ("categories", "kernels", "regions")


def _side(scope: Scope) -> tuple[dict[str, pl.DataFrame], dict]:
    totals = run_script(scope.con, "diff_side", {"run": scope.run}).row(0, named=True)
    tables = {t: fetch_pl(scope.con, f"SELECT * FROM side_{t}") for t in TABLES}
    prepare_ops(scope, "all")   # one op table for both headline analyses
    s = run_script(scope.con, "summary")
    span = s["span_ns"].sum() if s.height else 0
    run_script(scope.con, "overlap_ops", {"run": scope.run})
    o = run_script(scope.con, "overlap", {"run": scope.run, "by": "rank"})
    comm = o["comm_ns"].sum() if o.height else 0
    totals.update(
        idle_pct=100 * s["idle_ns"].sum() / span if span else None,
        compute_pct=100 * s["compute_ns"].sum() / span if span else None,
        overlap_pct=100 * o["overlapped_ns"].sum() / comm if comm else None,
        exposed_ns=int(o["exposed_ns"].sum()) if comm else None,
    )
    return tables, totals


def _sub(b, a):
    return None if a is None or b is None else b - a


def diff_scoped(a: Scope, b: Scope, top: int | None = None) -> dict[str, pl.DataFrame]:
    # the two sides on two threads: each scope has its own DuckDB database, and DuckDB and
    # polars release the GIL while they work
    (side_a, tot_a), (side_b, tot_b) = ordered_map(_side, (a, b), 2)
    # the comparison needs only the two sides' frames: a second connection to A's database
    # (its own temp objects and registrations; a new in-memory database costs ~13 ms)
    con = a.con.cursor()
    for prefix, side in (("a", side_a), ("b", side_b)):
        for t, df in side.items():
            register_pl(con, f"{prefix}_{t}", df)
    statuses = dict(run_script(con, "diff").iter_rows())
    out = {t: fetch_pl(con, f"SELECT * FROM diff_{t}") for t in TABLES}
    if top:
        out["kernels"] = out["kernels"].head(top)
        out["regions"] = out["regions"].head(top)
    gpu_a, gpu_b = tot_a["gpu_ns"], tot_b["gpu_ns"]
    head = {
        "run_a": a.run, "run_b": b.run, "ranks_a": tot_a["ranks"], "ranks_b": tot_b["ranks"],
        "ops_a": tot_a["ops"], "ops_b": tot_b["ops"],
        "gpu_a_ns": gpu_a, "gpu_b_ns": gpu_b, "gpu_delta_ns": gpu_b - gpu_a,
        "gpu_delta_pct": 100 * (gpu_b - gpu_a) / gpu_a if gpu_a else None,
        "idle_a_pct": tot_a["idle_pct"], "idle_b_pct": tot_b["idle_pct"],
        "idle_delta_pct": _sub(tot_b["idle_pct"], tot_a["idle_pct"]),
        "compute_a_pct": tot_a["compute_pct"], "compute_b_pct": tot_b["compute_pct"],
        "compute_delta_pct": _sub(tot_b["compute_pct"], tot_a["compute_pct"]),
        "overlap_a_pct": tot_a["overlap_pct"], "overlap_b_pct": tot_b["overlap_pct"],
        "overlap_delta_pct": _sub(tot_b["overlap_pct"], tot_a["overlap_pct"]),
        "exposed_a_ns": tot_a["exposed_ns"], "exposed_b_ns": tot_b["exposed_ns"],
        "kernels_appeared": statuses.get("appeared", 0), "kernels_disappeared": statuses.get("disappeared", 0),
        "kernels_changed": statuses.get("changed", 0), "kernels_unchanged": statuses.get("unchanged", 0),
    }
    schema = {k: (pl.String if k in ("run_a", "run_b") else pl.Float64 if k.endswith("_pct") else pl.Int64) for k in head}
    out["headline"] = pl.DataFrame([head], schema=schema)
    return out


def diff(store=None, run_a: str | None = None, run_b: str | None = None, rank: int | None = None,
         steps: str | None = None, top: int | None = None, *,
        step_pattern: str | None = None, skip_first: int = 0) -> dict[str, pl.DataFrame]:
    """Compare run B against run A (the baseline): per category, per kernel name and per region
    name, count and total time in A and B, deltas and status (appeared / disappeared / changed /
    unchanged); plus a one-row `headline` with GPU time, summary idle/compute % and overlap % of
    each run and their deltas. `rank` and `steps` apply to both runs; `top` keeps the N largest
    kernel and region changes."""
    a = open_scope(store, run_a, rank, steps, step_pattern, skip_first)
    b = open_scope(a.store, run_b, rank, steps, step_pattern, skip_first)
    return diff_scoped(a, b, top)


def _ms(ns) -> str:
    return f"{ns / 1e6:,.1f} ms" if abs(ns) >= 1e6 else f"{ns / 1e3:,.1f} µs"


def _pp(a, b, label: str) -> str | None:
    if a is None or b is None:
        return None
    return f"{label} {a:.1f} % → {b:.1f} % ({b - a:+.1f} pp)"


def headline(result: dict[str, pl.DataFrame]) -> str:
    h = result["headline"].row(0, named=True)
    parts = [f"{h['run_a']} → {h['run_b']}: GPU time {_ms(h['gpu_a_ns'])} → {_ms(h['gpu_b_ns'])}"
             + (f" ({h['gpu_delta_pct']:+.1f} %)" if h["gpu_delta_pct"] is not None else "")]
    for a, b, label in (("idle_a_pct", "idle_b_pct", "idle"), ("compute_a_pct", "compute_b_pct", "compute"),
                        ("overlap_a_pct", "overlap_b_pct", "comm overlap")):
        p = _pp(h[a], h[b], label)
        if p:
            parts.append(p)
    parts.append(f"kernels: {h['kernels_appeared']} appeared, {h['kernels_disappeared']} disappeared, "
                 f"{h['kernels_changed']} changed")
    if h["ranks_a"] != h["ranks_b"]:
        parts.append(f"note: {h['ranks_a']} vs {h['ranks_b']} ranks (totals are summed over ranks)")
    if not h["ops_a"] and not h["ops_b"]:
        parts.append("no GPU activity in either run")
    return "; ".join(parts)
