"""`traceq compare`: runs side by side, repetitions pooled.

Runs are grouped into configurations: runs whose labels are equal except `rep` are the
repetitions of one configuration (a run without labels is its own configuration). Per
configuration and metric (traceq.experiments.metrics: step_time, throughput, data_wait,
communication, gpu.<category>, region.<name>, imported metrics; a milabench summary's
metric M of benchmark B is `bench.B.M`):

    runs          number of runs with a value (a lone milabench summary row: its own n)
    mean, sd      mean and sample sd of the runs' values (sd undefined, null, for one run; a
                  lone milabench summary row: its mean and std)
    sd_pct        100 · sd / mean
    trimmed_mean  mean without one min and one max run (≥ 3 runs; else the mean)
    change_pct    100 · (mean − baseline mean) / baseline mean, against the baseline
                  configuration (the first one, or the one holding --baseline RUN)
    notes         why a statistic of the row is undefined (null): "sd: one repetition", or
                  "no steps in RUN" (a run without steps has no step_time: its whole trace is
                  not a step), "baseline mean is 0"
"""
from __future__ import annotations

import re

import polars as pl

from ..errors import TraceqError
from . import stats
from .metrics import run_labels, run_metrics, select_runs

SCHEMA = {"config": pl.Utf8, "metric": pl.Utf8, "unit": pl.Utf8, "runs": pl.Int64, "mean": pl.Float64,
          "sd": pl.Float64, "sd_pct": pl.Float64, "trimmed_mean": pl.Float64, "change_pct": pl.Float64,
          "notes": pl.Utf8}


def _config_name(runs: list[str], labels: dict) -> str:
    if len(runs) == 1:
        return runs[0]
    stems = {re.sub(r"[._-]r(?:ep)?\d+$", "", r) for r in runs}
    if len(stems) == 1:
        return stems.pop()
    lab = {k: v for k, v in labels.items() if k != "rep"}
    return ",".join(f"{k}={v}" for k, v in sorted(lab.items())) or runs[0]


def configurations(store=None, runs: list[str] | None = None, where: str | None = None) -> dict[str, list[str]]:
    """{configuration name: [runs]} in the order the runs were given (or by name)."""
    chosen = select_runs(store, where, runs)
    if not chosen:
        raise TraceqError(f"no runs match {where!r}" if where else "the store has no runs")
    labels = run_labels(store)
    groups: dict[tuple, list[str]] = {}
    for r in chosen:
        lab = {k: v for k, v in labels[r].items() if k != "rep"}
        key = tuple(sorted(lab.items())) if lab else ("run", r)
        groups.setdefault(key, []).append(r)
    return {_config_name(rs, labels[rs[0]]): rs for rs in groups.values()}


def compare(store=None, runs: list[str] | None = None, where: str | None = None,
            baseline: str | None = None) -> pl.DataFrame:
    configs = configurations(store, runs, where)
    every = [r for rs in configs.values() for r in rs]
    if baseline is not None and baseline not in every and baseline not in configs:
        raise TraceqError(f"--baseline {baseline!r} is not among the compared runs ({', '.join(every)})")
    base = next((c for c, rs in configs.items() if baseline in rs or baseline == c), None) or next(iter(configs))
    no_steps: set[str] = set()
    m = run_metrics(store, every, no_steps=no_steps).with_columns(   # a milabench summary's per-benchmark rows
        pl.when(pl.col("bench").is_null()).then(pl.col("metric"))
        .otherwise(pl.concat_str([pl.lit("bench."), pl.col("bench"), pl.lit("."), pl.col("metric")])).alias("metric"))
    rows = []
    for config, rs in configs.items():
        sub = m.filter(pl.col("run").is_in(rs))
        for metric in sub["metric"].unique(maintain_order=True).to_list():
            vals = sub.filter(pl.col("metric") == metric)
            rows.append({"config": config, "metric": metric, "unit": vals["unit"][0], **_pooled(vals),
                         "change_pct": None})
        for metric in STEP_METRICS:   # a run without steps: no step metric, and the reason
            if missing := [r for r in rs if r in no_steps and r not in set(sub.filter(pl.col("metric") == metric)["run"])]:
                _note_missing(rows, config, metric, missing)
    df = pl.DataFrame(rows, schema=SCHEMA)
    if df.is_empty():
        raise TraceqError(f"no metrics in {', '.join(every)}: compare needs steps, GPU work, regions or "
                          "imported metrics (mila / milabench results)")
    base_mean = df.filter(pl.col("config") == base).select("metric", pl.col("mean").alias("_base"))
    df = df.join(base_mean, on="metric", how="left").with_columns(
        pl.when(pl.col("_base") != 0).then(100 * (pl.col("mean") - pl.col("_base")) / pl.col("_base"))
        .otherwise(None).alias("change_pct"),
        pl.when(pl.col("_base") == 0).then(_add_note(pl.col("notes"), "change: baseline mean is 0"))
        .otherwise(pl.col("notes")).alias("notes")).drop("_base")
    order = {c: i for i, c in enumerate(configs)}
    return df.with_columns(pl.col("metric").map_elements(_metric_rank, return_dtype=pl.Int64).alias("_k"),
                           pl.col("config").replace_strict(order, return_dtype=pl.Int64).alias("_c")) \
             .sort("_k", "metric", "_c").drop("_k", "_c")


def _pooled(vals: pl.DataFrame) -> dict:
    """runs, mean, sd, sd_pct, trimmed_mean of one metric over a configuration's runs. A lone
    milabench summary row already pools its n runs: its own n and sd are kept (trimmed mean
    unknown)."""
    row = vals.row(0, named=True)
    if vals.height == 1 and row["bench"] is not None and (row["runs"] or 0) > 1:
        mean, sd, n, trimmed = row["value"], row["sd"], row["runs"], None
    else:
        v = vals["value"].drop_nulls().to_list()
        mean, sd, n, trimmed = stats.mean(v), stats.sd(v), len(v), stats.trimmed_mean(v)
    return {"runs": n, "mean": mean, "sd": sd, "sd_pct": 100 * sd / mean if mean and sd is not None else None,
            "trimmed_mean": trimmed, "notes": "sd: one repetition" if n == 1 and sd is None else None}


STEP_METRICS = ("step_time",)


def _note_missing(rows: list[dict], config: str, metric: str, runs: list[str]) -> None:
    """Say in the configuration's row of `metric` (a row with no value when none of its runs has
    one) that these runs have no steps."""
    note = f"no steps in {', '.join(runs)}"
    row = next((r for r in rows if r["config"] == config and r["metric"] == metric), None)
    if row is None:
        rows.append({"config": config, "metric": metric, "unit": "s", "runs": 0, "mean": None, "sd": None,
                     "sd_pct": None, "trimmed_mean": None, "change_pct": None, "notes": note})
    else:
        row["notes"] = "; ".join(filter(None, [row["notes"], note]))


def _add_note(col: pl.Expr, note: str) -> pl.Expr:
    return pl.when(col.is_null()).then(pl.lit(note)).otherwise(pl.concat_str([col, pl.lit("; " + note)]))


_FIRST = ["step_time", "step_time_trimmed", "throughput", "data_wait", "communication"]


def _metric_rank(metric: str) -> int:
    if metric in _FIRST:
        return _FIRST.index(metric)
    return {"gpu": 10, "region": 20, "timer": 30, "bench": 40}.get(metric.split(".", 1)[0], 5)
