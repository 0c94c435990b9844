"""`traceq compare`, `traceq model` and `traceq check`: many runs (DESIGN §10).

Imported by traceq.cli, which it extends with three commands. They only parse arguments
and render; the work is in traceq.experiments (compare, model, check).
"""
from __future__ import annotations

import json
import sys
from typing import Annotated, Optional

import typer

from .cli import FormatOpt, StoreOpt, app, fail, warn

WhereOpt = Annotated[Optional[str], typer.Option("--where", help="Label selector k=v[,k=v...] (e.g. app=cifar10,b=64).", show_default=False)]


@app.command()
def compare(
    runs: Annotated[Optional[list[str]], typer.Argument(help="Runs to compare (default: every run, or those --where selects).", metavar="RUN", show_default=False)] = None,
    where: WhereOpt = None,
    baseline: Annotated[Optional[str], typer.Option("--baseline", help="Run (or configuration) the changes are relative to (default: the first).", show_default=False)] = None,
    metric: Annotated[Optional[list[str]], typer.Option("--metric", "-m", help="Only these metrics (repeatable; a trailing * matches a prefix, e.g. gpu.*).", show_default=False)] = None,
    store: StoreOpt = None,
    fmt: FormatOpt = "table",
) -> None:
    """Runs side by side: per metric and configuration, mean / sd / sd % / trimmed mean over the
    repetitions (runs whose labels differ only in rep) and the change against the baseline.
    Metrics: step_time (IQR-filtered median step), throughput (batch label / step time),
    data_wait, communication, gpu.<category> and region.<name> per step, imported metrics.

    Examples:

      traceq compare control test amp --baseline control

      traceq compare --where app=cifar10,b=64 --metric step_time --metric gpu.*
    """
    import polars as pl

    from .experiments.compare import compare as do_compare
    from .render import emit

    df = do_compare(store, runs, where, baseline)
    if metric:
        keep = pl.lit(False)
        for m in metric:
            keep = keep | (pl.col("metric").str.starts_with(m[:-1]) if m.endswith("*") else pl.col("metric") == m)
        df = df.filter(keep)
    configs = df["config"].unique(maintain_order=True).to_list()
    if fmt == "table":
        df = _seconds_as_ms(df, ("mean", "sd", "trimmed_mean"))
    emit(df, fmt, headline=f"{len(configs)} configuration(s): {', '.join(configs)}; change_pct against "
                           f"{configs[0] if not baseline else baseline}")


def _seconds_as_ms(df, cols):
    """Table output only: values in s shown in ms (json/csv keep SI units)."""
    import polars as pl

    ms = pl.col("unit") == "s"
    return df.with_columns(*[pl.when(ms).then(pl.col(c) * 1e3).otherwise(pl.col(c)).alias(c) for c in cols],
                           pl.when(ms).then(pl.lit("ms")).otherwise(pl.col("unit")).alias("unit"))


def _point(spec: str, params: list[str]) -> dict[str, float]:
    out = {}
    for part in spec.split(","):
        if "=" not in part:
            fail(f"--predict {spec!r}: expected param=value[,param=value] (e.g. p=64)")
        k, v = part.split("=", 1)
        try:
            out[k.strip()] = float(v)
        except ValueError:
            fail(f"--predict {spec!r}: {v!r} is not a number")
    missing = [p for p in params if p not in out]
    if missing or set(out) - set(params):
        fail(f"--predict {spec!r}: give exactly the modelled parameters ({', '.join(params)})")
    return out


@app.command()
def model(
    param: Annotated[list[str], typer.Option("--param", "-p", help="Label that is a model parameter (repeatable), e.g. --param ranks --param batch.", show_default=False)],
    metric: Annotated[str, typer.Option("--metric", "-m", help="Per-run metric to model (step_time, throughput, gpu.<category>, ...).")] = "step_time",
    region: Annotated[Optional[str], typer.Option("--region", help="Model the time per step in this NVTX range / annotation (metric region.NAME).", show_default=False)] = None,
    where: WhereOpt = None,
    predict: Annotated[Optional[list[str]], typer.Option("--predict", help="Predict at p=64[,b=32] (repeatable).", show_default=False)] = None,
    strong_scaling: Annotated[bool, typer.Option("--strong-scaling", help="Model time x ranks (the first --param is the rank count) and show speedup and efficiency.")] = False,
    export_extrap: Annotated[Optional[str], typer.Option("--export-extrap", help="Also write the measurements in Extra-P's JSON input format to this file.", show_default=False)] = None,
    store: StoreOpt = None,
    fmt: FormatOpt = "table",
) -> None:
    """Performance model in Extra-P's normal form, f(p) = c0 + sum c_k p^i_k log2(p)^j_k, chosen
    by leave-one-out cross-validated SMAPE over Extra-P's exponent sets; several parameters
    combine the single-parameter terms (sums and products). Runs are the repetitions at each
    parameter point; predictions come with a band from the cross-validation error and the
    repetitions' spread.

    Examples:

      traceq model --param p --metric step_time --predict p=64

      traceq model --param p --param b --where app=cifar10 --format json
    """
    from .experiments.modeling import model_runs
    from .render import emit

    res = model_runs(store, param, region and f"region.{region}" or metric, where, strong_scaling)
    points = [_point(s, param) for s in predict or []]
    preds = [res.model.predict(p) for p in points]
    for w in res.model.warnings + res.warnings:
        warn(w)
    if export_extrap:
        with open(export_extrap, "w") as f:
            json.dump(res.extrap, f, indent=1)
    if fmt == "json":
        sys.stdout.write(json.dumps(res.model.to_json(res.metric, preds), ensure_ascii=False) + "\n")
        return
    m = res.model
    headline = (f"{res.metric} = {m.formula()}   (SMAPE {m.smape_pct:.2f} %, cross-validated {m.cv_smape_pct:.2f} %, "
                f"adj. R² {m.r2_adj:.4f}, {m.points} points, {res.runs} runs)")
    points = res.points
    if fmt == "table" and res.unit == "s" and not strong_scaling:   # seconds shown as ms on screen
        import polars as pl

        points = points.with_columns([(pl.col(c) * 1e3).alias(c) for c in ("mean", "sd", "model")]) \
                       .rename({"mean": "mean (ms)", "sd": "sd (ms)", "model": "model (ms)"})
    emit(points, fmt, headline=headline)
    if preds:
        import polars as pl

        pdf = pl.DataFrame(preds).with_columns([pl.col(p).cast(pl.Int64) for p in param
                                                 if all(float(v).is_integer() for v in pl.DataFrame(preds)[p])])
        if fmt == "table" and res.unit == "s" and not strong_scaling:
            pdf = pdf.with_columns([(pl.col(c) * 1e3).alias(c) for c in ("value", "low", "high")]) \
                     .rename({"value": "value (ms)", "low": "low (ms)", "high": "high (ms)"})
        emit(pdf, fmt, title="predictions (low/high: ±2σ from cross-validation and repetitions)")


@app.command()
def check(
    targets: Annotated[str, typer.Option("--targets", "-t", help="Targets TOML ([gate] rules and [[target]] entries).")],
    min_runs: Annotated[Optional[int], typer.Option("--min-runs", help="Override [gate] min_runs.", show_default=False)] = None,
    junit: Annotated[Optional[str], typer.Option("--junit", help="Also write JUnit XML to this file (for CI).", show_default=False)] = None,
    store: StoreOpt = None,
    fmt: FormatOpt = "table",
) -> None:
    """Regression gate against targets, as mila's benchmarks do it: per target, result = trimmed
    mean over the matching runs (min and max dropped), sd, sd % = sd / result, diff % against the
    target (positive = better, for times and throughputs alike); gates min_runs (default 4),
    80th percentile of sd % < max_sd_pct (5), mean diff % >= -tolerance_pct (0).
    Exit 0 when every gate passes, 1 when one fails, 2 on bad input.

    Example: traceq check --targets targets.toml --junit check.xml
    """
    from .experiments.check import check as do_check, junit_xml
    from .render import emit

    res = do_check(store, targets, min_runs)
    if junit:
        with open(junit, "w") as f:
            f.write(junit_xml(res))
    if fmt == "json":
        sys.stdout.write(json.dumps(res.to_json()) + "\n")
    else:
        import polars as pl

        rows = _seconds_as_ms(res.rows, ("result", "sd", "target")) if fmt == "table" else res.rows
        emit(rows, fmt, headline=f"check {'PASSED' if res.passed else 'FAILED'}: {res.rows.height} target(s), "
                                     f"targets {targets}")
        if fmt == "table":
            emit(pl.DataFrame(res.gates, schema={"rule": pl.Utf8, "value": pl.Float64, "limit": pl.Float64,
                                                 "passed": pl.Boolean}), fmt, title="gates")
    if not res.passed:
        raise typer.Exit(1)
