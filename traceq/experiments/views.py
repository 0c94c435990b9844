"""The registry faces of `traceq compare`, `traceq model` and `traceq check` (declared in
traceq/analyses.py): each runs the experiment function, and the hooks show its answer as
terminal tables (seconds as ms on screen), its fixed JSON document (issue 9) and CSV.
The work itself is in compare.py, modeling.py and check.py.
"""
from __future__ import annotations

import json
import sys

import polars as pl

from ..errors import TraceqError
from ..registry import Block, Out


def seconds_as_ms(df: pl.DataFrame, cols) -> pl.DataFrame:
    """Table output only: values in s shown in ms (json/csv keep SI units)."""
    ms = pl.col("unit") == "s"
    return df.with_columns(*[pl.when(ms).then(pl.col(c) * 1e3).otherwise(pl.col(c)).alias(c) for c in cols],
                           pl.when(ms).then(pl.lit("ms")).otherwise(pl.col("unit")).alias("unit"))


def _rows(result) -> list:
    return result.df.to_dicts()


def _main_csv(result) -> list:
    return [(None, result.df)]


def _warnings(result) -> int:
    for w in result.value.get("warnings", ()):
        sys.stderr.write(f"traceq: warning: {w}\n")
    return 0


# ------------------------------------------------------------------ compare
def compare(store, run_names=None, where=None, baseline=None, metric=None) -> Out:
    from .compare import compare as do_compare

    df = do_compare(store, run_names, where, baseline)
    if metric:
        keep = pl.lit(False)
        for m in metric:
            keep = keep | (pl.col("metric").str.starts_with(m[:-1]) if m.endswith("*") else pl.col("metric") == m)
        df = df.filter(keep)
    configs = df["config"].unique(maintain_order=True).to_list()
    head = (f"{len(configs)} configuration(s): {', '.join(configs)}; change_pct against "
            f"{configs[0] if not baseline else baseline}")
    return Out(df, head)


def compare_view(result) -> list:
    return [Block(seconds_as_ms(result.df, ("mean", "sd", "trimmed_mean")), result.headline)]


compare_json = _rows
compare_csv = _main_csv


# ------------------------------------------------------------------ model
def _point(spec: str, params: list[str]) -> dict[str, float]:
    out = {}
    for part in spec.split(","):
        if "=" not in part:
            raise TraceqError(f"--predict {spec!r}: expected param=value[,param=value] (e.g. p=64)")
        k, v = part.split("=", 1)
        try:
            out[k.strip()] = float(v)
        except ValueError:
            raise TraceqError(f"--predict {spec!r}: {v!r} is not a number") from None
    missing = [p for p in params if p not in out]
    if missing or set(out) - set(params):
        raise TraceqError(f"--predict {spec!r}: give exactly the modelled parameters ({', '.join(params)})")
    return out


def model(store, param, metric="step_time", region=None, where=None, predict=None, strong_scaling=False,
          export_extrap=None) -> Out:
    from .modeling import model_runs

    res = model_runs(store, param, region and f"region.{region}" or metric, where, strong_scaling)
    preds = [res.model.predict(_point(s, param)) for s in predict or []]
    if export_extrap:
        with open(export_extrap, "w") as f:
            json.dump(res.extrap, f, indent=1)
    m = res.model
    head = (f"{res.metric} = {m.formula()}   (SMAPE {m.smape_pct:.2f} %, cross-validated {m.cv_smape_pct:.2f} %, "
            f"adj. R² {m.r2_adj:.4f}, {m.points} points, {res.runs} runs)")
    tables = {}
    if preds:
        pdf = pl.DataFrame(preds)
        tables["predictions"] = pdf.with_columns([pl.col(p).cast(pl.Int64) for p in param
                                                  if all(float(v).is_integer() for v in pdf[p])])
    return Out(res.points, head, tables=tables,
               value={"res": res, "preds": preds, "warnings": [*m.warnings, *res.warnings]})


def model_view(result) -> list:
    res, strong = result.value["res"], result.params.get("strong_scaling")
    ms = res.unit == "s" and not strong      # seconds shown as ms on screen
    points = result.df
    if ms:
        points = points.with_columns([(pl.col(c) * 1e3).alias(c) for c in ("mean", "sd", "model")]) \
                       .rename({"mean": "mean (ms)", "sd": "sd (ms)", "model": "model (ms)"})
    out = [Block(points, result.headline)]
    pdf = result.tables.get("predictions")
    if pdf is not None:
        if ms:
            pdf = pdf.with_columns([(pl.col(c) * 1e3).alias(c) for c in ("value", "low", "high")]) \
                     .rename({"value": "value (ms)", "low": "low (ms)", "high": "high (ms)"})
        out.append(Block(pdf, title="predictions (low/high: ±2σ from cross-validation and repetitions)"))
    return out


def model_json(result) -> dict:
    return result.value["res"].model.to_json(result.value["res"].metric, result.value["preds"])


def model_csv(result) -> list:
    return [(None, result.df), *((None, t) for t in result.tables.values())]


model_after = _warnings


# ------------------------------------------------------------------ check
def check(store, targets, min_runs=None, junit=None) -> Out:
    from .check import check as do_check, junit_xml

    res = do_check(store, targets, min_runs)
    if junit:
        with open(junit, "w") as f:
            f.write(junit_xml(res))
    gates = pl.DataFrame(res.gates, schema={"rule": pl.Utf8, "value": pl.Float64, "limit": pl.Float64,
                                            "passed": pl.Boolean})
    head = f"check {'PASSED' if res.passed else 'FAILED'}: {res.rows.height} target(s), targets {targets}"
    return Out(res.rows, head, tables={"gates": gates}, value={"res": res})


def check_view(result) -> list:
    return [Block(seconds_as_ms(result.df, ("result", "sd", "target")), result.headline),
            Block(result.tables["gates"], title="gates")]


def check_json(result) -> dict:
    return result.value["res"].to_json()


check_csv = _main_csv


def check_after(result) -> int:
    """Exit 1 when a gate failed."""
    return 0 if result.value["res"].passed else 1
