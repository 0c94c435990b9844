"""Models from the store: the runs' metric values at each parameter point -> model.fit.

The parameters are run labels (numbers); the runs at one point are its repetitions.
Strong scaling: the first parameter is the rank count; the modelled value is time × ranks
(cost), and the point table gets speedup = T(p0)/T(p) and efficiency = speedup · p0/p,
with p0 the smallest rank count (other parameters equal).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from ..errors import TraceqError
from . import model as pmnf
from .metrics import run_labels, run_metrics, select_runs


@dataclass
class ModelRun:
    model: pmnf.Model
    metric: str
    points: pl.DataFrame
    extrap: dict
    runs: int
    warnings: list[str]
    unit: str = ""


def measurements(store, params: list[str], metric: str, where: str | None = None):
    """(xs, reps, run count, unit): the parameter points and their repeated values."""
    runs = select_runs(store, where)
    labels = run_labels(store)
    runs = [r for r in runs if all(p in labels[r] for p in params)]
    if not runs:
        raise TraceqError(f"no run has the label(s) {', '.join(params)}"
                          + (f" among those matching {where!r}" if where else "")
                          + " (set them with --label k=v or from file names with ingest --recursive)")
    every = run_metrics(store, runs)
    m = every.filter((pl.col("metric") == metric) & pl.col("bench").is_null())
    if m.height == 0:
        known = sorted(set(every["metric"]))
        raise TraceqError(f"no run has the metric {metric!r} (metrics: {', '.join(known)})")
    points: dict[tuple, list[float]] = {}
    for row in m.iter_rows(named=True):
        try:
            key = tuple(float(labels[row["run"]][p]) for p in params)
        except ValueError:
            bad = next(p for p in params if not _is_number(labels[row["run"]][p]))
            raise TraceqError(f"run {row['run']!r}: label {bad}={labels[row['run']][bad]!r} is not a number") from None
        if row["value"] is not None:
            points.setdefault(key, []).append(float(row["value"]))
    keys = sorted(points)
    return [list(k) for k in keys], [points[k] for k in keys], m.height, m["unit"][0]


def _is_number(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


def model_runs(store, params: list[str], metric: str = "step_time", where: str | None = None,
               strong_scaling: bool = False) -> ModelRun:
    if len(set(params)) != len(params):
        raise TraceqError("--param: each parameter once")
    if len(params) > 3:
        raise TraceqError("--param: at most 3 parameters")
    xs, reps, nruns, unit = measurements(store, params, metric, where)
    times = [np.array(r) for r in reps]
    values = [list(np.array(r) * x[0]) for r, x in zip(reps, xs)] if strong_scaling else reps
    name = f"{metric}×{params[0]}" if strong_scaling else metric
    model = pmnf.fit(params, xs, values)
    rows = []
    for x, r, v in zip(xs, times, values):
        point = dict(zip(params, x))
        fitted = model.evaluate(point)
        mean_v = float(np.mean(v))
        rows.append({**point, "runs": len(v), "mean": mean_v, "sd": float(np.std(v, ddof=1)) if len(v) > 1 else None,
                     "model": fitted, "error_pct": 100 * (fitted - mean_v) / mean_v if mean_v else None,
                     "_t": float(np.mean(r))})
    df = pl.DataFrame(rows)
    if strong_scaling:
        p0 = params[0]
        others = params[1:]
        base = df.sort(p0).group_by(others, maintain_order=True).first() if others else df.sort(p0).head(1)
        base = base.select(*others, pl.col(p0).alias("_p0"), pl.col("_t").alias("_t0"))
        df = (df.join(base, on=others, how="left") if others else df.join(base, how="cross")) \
            .with_columns((pl.col("_t0") / pl.col("_t")).alias("speedup")) \
            .with_columns((pl.col("speedup") * pl.col("_p0") / pl.col(p0)).alias("efficiency")) \
            .drop("_p0", "_t0")
    df = df.drop("_t").with_columns([pl.col(p).cast(pl.Int64) for p in params
                                     if all(float(v).is_integer() for v in df[p])])
    return ModelRun(model, name, df, pmnf.extrap_json(params, xs, values, "step" if not metric.startswith("region.")
                                                      else metric[7:], name), nruns, [], unit)
