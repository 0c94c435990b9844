"""Where the GPU timeline goes, per rank: idle / compute / non-compute (DESIGN §4.1).

The SQL is in queries/summary_ops.sql (which ops, which window: traceq's exact `all` or
HTA 0.5.0's `hta`) and queries/summary.sql (the breakdown). This module binds the scope,
runs them and writes the headline. `run_script` (used by overlap and diff too) runs a
multi-statement .sql file, binding only the parameters each statement names.
"""
from __future__ import annotations

import re

import polars as pl

from .. import queries
from ..errors import TraceqError
from ..store import fetch_pl
from .scope import Scope, open_scope

WINDOWS = ("all", "hta")

_SCHEMA = {"rank": pl.Int32, "ops": pl.Int64, "span_ns": pl.Int64, "busy_ns": pl.Int64, "idle_ns": pl.Int64,
           "compute_ns": pl.Int64, "non_compute_ns": pl.Int64, "idle_pct": pl.Float64, "compute_pct": pl.Float64,
           "non_compute_pct": pl.Float64}


def run_script(con, name_or_sql: str, params: dict | None = None) -> pl.DataFrame:
    """Run every statement of `traceq/queries/<name>.sql` (or of the SQL text given) on `con`;
    return the result of the last one as a polars DataFrame. A statement gets only the
    `$parameters` it names (outside comments)."""
    sql = queries.load(name_or_sql) if re.fullmatch(r"\w+", name_or_sql) else name_or_sql
    params = params or {}
    statements = con.extract_statements(sql)
    result = pl.DataFrame()
    for i, stmt in enumerate(statements):
        code = re.sub(r"--[^\n]*", "", stmt.query)
        used = {k: v for k, v in params.items() if re.search(r"\$" + k + r"\b", code)}
        if i == len(statements) - 1:
            result = fetch_pl(con, stmt.query, used)
        else:
            con.execute(stmt.query, used or None)
    return result


def check_window(window: str) -> str:
    if window not in WINDOWS:
        raise TraceqError(f"--window {window!r}: choose all (every kernel/copy/memset, exact ns) "
                          "or hta (HTA 0.5.0's window, classification and µs rounding)")
    return window


def prepare_ops(scope: Scope, window: str = "all") -> None:
    """(Re)build the temp table analysis_ops for `scope` in `window` (summary_ops.sql)."""
    queries.install_macros(scope.con)
    run_script(scope.con, "summary_ops", {"run": scope.run, "window": check_window(window),
                                          "run_step_names": scope.run_step_names})


def summary_scoped(scope: Scope, window: str = "all") -> pl.DataFrame:
    prepare_ops(scope, window)
    df = run_script(scope.con, "summary")
    if df.height == 0:
        return pl.DataFrame(schema=_SCHEMA)
    return df.cast(_SCHEMA)


def summary(store=None, run: str | None = None, rank: int | None = None, steps: str | None = None,
            window: str = "all", *,
        step_pattern: str | None = None, skip_first: int = 0) -> pl.DataFrame:
    """Per rank: span, busy, idle, compute and non-compute GPU time (ns) and their % of the span.

    `window="all"` (default) measures every kernel, memcpy and memset with exact ns;
    `window="hta"` reproduces HTA 0.5.0's get_temporal_breakdown (its step window, kernel
    classification and µs rounding). A rank without GPU ops has no row."""
    return summary_scoped(open_scope(store, run, rank, steps, step_pattern, skip_first), window)


def _ms(ns) -> str:
    return f"{ns / 1e6:,.1f} ms" if ns >= 1e6 else f"{ns / 1e3:,.1f} µs"


def missing_ranks(df: pl.DataFrame, scope: Scope) -> list[int]:
    ranks = [r[0] for r in scope.con.execute("SELECT rank FROM scope_window ORDER BY rank").fetchall()]
    have = set(df["rank"].to_list()) if df.height else set()
    return [r for r in ranks if r not in have]


def no_gpu_text(scope: Scope, ranks: list[int]) -> str:
    where = f"run {scope.run}" + (f" rank {ranks[0]}" if len(ranks) == 1 and scope.rank is not None else "")
    from .diagnose import no_gpu_reason

    return f"{where}: no GPU activity (no kernels, copies or memsets in scope; {no_gpu_reason(scope)})"


def headline(df: pl.DataFrame, scope: Scope, window: str = "all") -> str:
    missing = missing_ranks(df, scope)
    if df.height == 0:
        return no_gpu_text(scope, missing)
    tag = " [HTA window]" if window == "hta" else ""
    if df.height == 1:
        r = df.row(0, named=True)
        who = f"run {scope.run} rank {r['rank']}"
        text = (f"{who}{tag}: GPU idle {r['idle_pct']:.1f} % of {_ms(r['span_ns'])}; compute {r['compute_pct']:.1f} %, "
                f"non-compute {r['non_compute_pct']:.1f} %")
    else:
        span = df["span_ns"].sum()
        idle, comp, non = (100 * df[c].sum() / span if span else 0.0 for c in ("idle_ns", "compute_ns", "non_compute_ns"))
        worst = df.sort("idle_pct", descending=True, nulls_last=True).row(0, named=True)
        text = (f"run {scope.run}, {df.height} ranks{tag}: GPU idle {idle:.1f} % of {_ms(span)} (summed spans); "
                f"compute {comp:.1f} %, non-compute {non:.1f} %; most idle: rank {worst['rank']} ({worst['idle_pct']:.1f} %)")
    if missing:
        text += f"; no GPU activity on rank{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))}"
    return text
