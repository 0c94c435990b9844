"""Per-run metrics: one table (run × metric) that compare, model and check read.

Sources, per run:
- traced runs (nsys, Kineto, traceq timer logs): queries/run_metrics.sql over the run's
  steps (stalls_steps.sql; where that finds only the whole trace, NVTX step ranges from
  queries/run_nvtx_steps.sql) and ops — step_time (IQR-filtered median of per-step times),
  step_time_trimmed, data_wait, communication, gpu.<category>, region.<name>; a run without
  steps (stalls_steps finds only the whole trace, and no NVTX step ranges) has no step_time
  nor step_time_trimmed: its trace is not a step (the per-step metrics are then per trace);
- throughput = batch / step_time, items/s, when the run has a `batch` (or `b`, `bs`,
  `batch_size`) label;
- Deep500 `print_all_time_stats` logs (timer_stats): timer.<key> = its median, s; the key
  BATCH is also step_time when the run has no steps of its own;
- mila / milabench result files: the stored `metrics` table as it is.
"""
from __future__ import annotations

import json
import re

import polars as pl

from ..queries import load as load_sql
from ..errors import TraceqError
from ..store import Store, fetch_pl, register_pl
from ..threads import ordered_map

BATCH_LABELS = ("batch", "b", "bs", "batch_size")
COLUMNS = {"run": pl.Utf8, "bench": pl.Utf8, "metric": pl.Utf8, "value": pl.Float64, "unit": pl.Utf8,
           "samples": pl.Int64, "sd": pl.Float64, "min": pl.Float64, "max": pl.Float64, "runs": pl.Int64,
           "source": pl.Utf8}


def _store(store) -> Store:
    st = store if isinstance(store, Store) else Store(store)
    if not st.exists():
        raise TraceqError(f"no traceq store at {st.path}: ingest a trace first (traceq ingest FILE), "
                          "or point --store / TRACEQ_STORE at one")
    return st


def run_labels(store=None) -> dict[str, dict[str, str]]:
    """{run: labels} (labels of all ranks merged)."""
    out: dict[str, dict[str, str]] = {}
    for row in _store(store).manifest_rows():
        out.setdefault(row["run"], {}).update(json.loads(row["labels"] or "{}"))
    return out


def parse_where(where: str | None) -> dict[str, str]:
    """'bench=resnet50,amp=on' -> {'bench': 'resnet50', 'amp': 'on'}."""
    out = {}
    for part in (where or "").split(","):
        if not part.strip():
            continue
        if "=" not in part:
            raise TraceqError(f"where {where!r}: expected key=value[,key=value...]")
        k, v = part.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def select_runs(store=None, where: str | dict | None = None, runs: list[str] | None = None) -> list[str]:
    labels = run_labels(store)
    sel = parse_where(where) if isinstance(where, str) or where is None else where
    names = list(runs) if runs else sorted(labels, key=natural_key)
    missing = [r for r in names if r not in labels]
    if missing:
        raise TraceqError(f"no run named {missing[0]!r} in the store (runs: {', '.join(sorted(labels))})")
    return [r for r in names if all(labels[r].get(k) == v or (k == "run" and r == v) for k, v in sel.items())]


def natural_key(name: str) -> list:
    """Sort key with numbers compared as numbers: p8 before p16."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", name)]


STEP_ONLY = ("step_time", "step_time_trimmed")


def _trace_rows(st: Store, run: str) -> list[dict]:
    from ..engine.scope import open_scope
    from ..engine.stall_attribution import data_steps

    scope = open_scope(st, run, only_run=True)
    steps = data_steps(scope)
    if steps.height and set(steps["step_source"]) == {"trace"}:
        nvtx = scope.df(load_sql("run_nvtx_steps"))
        if nvtx.height:
            steps = nvtx
    if steps.height == 0:
        return []
    register_pl(scope.con, "xm_steps_df", steps.select("rank", "step", "step_source", "step_ns", "data_wait_ns"))
    scope.con.execute("CREATE OR REPLACE TEMP TABLE xm_steps AS SELECT * FROM xm_steps_df")
    df = fetch_pl(scope.con, load_sql("run_metrics"), {"run": run})
    if set(steps["step_source"]) == {"trace"}:    # no steps: the whole trace is not a step time
        df = df.filter(~pl.col("metric").is_in(STEP_ONLY))
    return df.with_columns(pl.lit(1, pl.Int64).alias("runs")).to_dicts()


def run_metrics(store=None, runs: list[str] | None = None, no_steps: set | None = None) -> pl.DataFrame:
    """One row per (run, bench, metric); columns as COLUMNS (value in `unit`). `no_steps`, when
    given, receives the traced runs that have no steps (hence no step_time)."""
    st = _store(store)
    manifest = st.manifest_rows()
    names = list(runs) if runs else sorted({r["run"] for r in manifest}, key=natural_key)
    con = st.connect()
    stored = fetch_pl(con, "SELECT run, bench, metric, value, unit, samples, sd, min, max, runs, "
                           "'metrics' AS source FROM metrics")
    timers = fetch_pl(con, "SELECT run, key, median(median_s) AS value, count(*) AS samples FROM timer_stats "
                           "GROUP BY run, key")
    labels = run_labels(st)
    traced = [run for run in names if any((r["n_gpu_ops"] or 0) + (r["n_host_ops"] or 0) + (r["n_regions"] or 0)
                                          for r in manifest if r["run"] == run)]
    # each run has its own DuckDB database, and DuckDB releases the GIL while a query runs,
    # so the runs are read on threads in parallel
    trace_rows = dict(zip(traced, ordered_map(lambda run: _trace_rows(st, run), traced)))
    rows: list[dict] = []
    for run in names:
        mine = [dict(r, run=run, bench=None) for r in trace_rows.get(run, [])]
        for t in timers.filter(pl.col("run") == run).iter_rows(named=True):
            base = {"run": run, "bench": None, "unit": "s", "value": t["value"], "samples": t["samples"], "runs": 1,
                    "source": "timer_stats"}
            mine.append({**base, "metric": f"timer.{t['key']}"})
            if t["key"].upper() == "BATCH" and not any(m["metric"] == "step_time" for m in mine):
                mine.append({**base, "metric": "step_time"})
        mine.extend(stored.filter(pl.col("run") == run).to_dicts())
        if no_steps is not None and run in trace_rows and not any(m["metric"] == "step_time" for m in mine):
            no_steps.add(run)
        batch = next((labels.get(run, {}).get(k) for k in BATCH_LABELS if labels.get(run, {}).get(k)), None)
        have = {(m["bench"], m["metric"]) for m in mine}
        for m in list(mine):
            if m["metric"] == "step_time" and batch and (m["bench"], "throughput") not in have and m["value"]:
                try:
                    items = float(batch)
                except ValueError:
                    continue
                mine.append({**m, "metric": "throughput", "value": items / m["value"], "unit": "items/s",
                             "sd": None, "min": None, "max": None, "source": f"batch/{m['source']}"})
        rows.extend(mine)
    df = pl.DataFrame([{k: r.get(k) for k in COLUMNS} for r in rows], schema=COLUMNS)
    return df.sort("run", "bench", "metric", nulls_last=False)
