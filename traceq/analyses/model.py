"""A performance model of a metric over configurations, in Extra-P's normal form, with
predictions and their band; the modelling is traceq/experiments/modeling.py and model.py."""
from __future__ import annotations

import json

from ..errors import TraceqError
from ..experiments.display import print_warnings
from ..lazy import polars as pl
from .spec import WHERE, Analysis, Block, Out, Param, cols


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


def compute(store, param, metric="step_time", region=None, where=None, predict=None, strong_scaling=False,
            export_extrap=None) -> Out:
    from ..experiments.modeling import model_runs

    res = model_runs(store, param, region and f"region.{region}" or metric, where, strong_scaling)
    preds = [res.model.predict(_point(s, param)) for s in predict or []]
    if export_extrap:
        with open(export_extrap, "w") as f:
            json.dump(res.extrap, f, indent=1)
    m = res.model
    head = (f"{res.metric} = {m.formula()}   (SMAPE {m.smape_pct:.2f} %, cross-validated {m.cv_smape_pct:.2f} %, "
            f"adj. R² {'–' if m.r2_adj is None else f'{m.r2_adj:.4f}'}, {m.points} points, {res.runs} runs)")
    tables = {}
    if preds:
        pdf = pl.DataFrame(preds)
        tables["predictions"] = pdf.with_columns([pl.col(p).cast(pl.Int64) for p in param
                                                  if all(float(v).is_integer() for v in pdf[p])])
    return Out(res.points, head, tables=tables,
               value={"res": res, "preds": preds, "warnings": [*m.warnings, *res.warnings]})


def view(result) -> list:
    res, strong = result.value["res"], result.params.get("strong_scaling")
    ms = res.unit == "s" and not strong      # seconds shown as ms on screen
    points = result.df
    if ms:
        points = points.with_columns([(pl.col(c) * 1e3).alias(c) for c in ("mean", "sd", "model")]) \
                       .rename({"mean": "mean (ms)", "sd": "sd (ms)", "model": "model (ms)"})
    notes = [f"– {n}" for n in res.model.notes]
    if any(r == 1 for r in result.df["runs"]):
        notes.append("– sd: one repetition (undefined)")
    out = [Block(points, result.headline, notes=notes, undefined=("sd", "sd (ms)"))]
    pdf = result.tables.get("predictions")
    if pdf is not None:
        if ms:
            pdf = pdf.with_columns([(pl.col(c) * 1e3).alias(c) for c in ("value", "low", "high")]) \
                     .rename({"value": "value (ms)", "low": "low (ms)", "high": "high (ms)"})
        out.append(Block(pdf, title="predictions (low/high: ±2σ from cross-validation and repetitions)"))
    return out


def to_json(result) -> dict:
    return result.value["res"].model.to_json(result.value["res"].metric, result.value["preds"])


def csv_tables(result) -> list:
    return [(None, result.df), *((None, t) for t in result.tables.values())]


ANALYSIS = Analysis(
    name="model",
    help="Performance model in Extra-P's normal form, f(p) = c0 + sum c_k p^i_k log2(p)^j_k, chosen "
         "by leave-one-out cross-validated SMAPE over Extra-P's exponent sets; several parameters "
         "combine the single-parameter terms (sums and products). Runs are the repetitions at each "
         "parameter point; predictions come with a band from the cross-validation error and the "
         "repetitions' spread.",
    examples=("traceq model --param p --metric step_time --predict p=64",
              "traceq model --param p --param b --where app=cifar10 --format json"),
    compute=compute,
    params=(Param("param", str, None, "Label that is a model parameter (repeatable), e.g. --param ranks "
                  "--param batch.", "LABEL", flags=("-p",), multiple=True, required=True),
            Param("metric", str, "step_time", "Per-run metric to model (step_time, throughput, "
                  "gpu.<category>, ...).", "METRIC", flags=("-m",)),
            Param("region", str, None, "Model the time per step in this NVTX range / annotation (metric "
                  "region.NAME).", "NAME"),
            WHERE,
            Param("predict", str, None, "Predict at p=64[,b=32] (repeatable).", "P=V[,P=V]", multiple=True),
            Param("strong_scaling", bool, False, "Model time x ranks (the first --param is the rank count) "
                  "and show speedup and efficiency."),
            Param("export_extrap", str, None, "Also write the measurements in Extra-P's JSON input format "
                  "to this file.", "FILE")),
    view=view,
    json=to_json,
    csv=csv_tables,
    after=print_warnings,
    order=90,
    scope="store",
    columns=cols("<param>: one column per --param: the parameter's value at the point",
                 "runs: repetitions at the point", "mean: mean of the metric over them",
                 "sd: their sample standard deviation", "model: the model's value at the point",
                 "error_pct: 100 · (model − mean) / mean, %"),
)
