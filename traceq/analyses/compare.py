"""Runs side by side: per metric and configuration, mean / sd / sd % / trimmed mean over the
repetitions (runs whose labels differ only in rep) and the change against the baseline. The
metrics and the statistics are traceq/experiments (metrics.py, compare.py)."""
from __future__ import annotations

from ..experiments.display import seconds_as_ms
from ..lazy import polars as pl
from .spec import WHERE, Analysis, Block, Out, Param, cols


def compute(store, run_names=None, where=None, baseline=None, metric=None) -> Out:
    from ..errors import TraceqError
    from ..experiments.compare import compare as compare_runs, configurations

    df = compare_runs(store, run_names, where, baseline)
    if metric:
        keep = pl.lit(False)
        for m in metric:
            keep = keep | (pl.col("metric").str.starts_with(m[:-1]) if m.endswith("*") else pl.col("metric") == m)
        df = df.filter(keep)
    if df.is_empty():
        raise TraceqError(f"no metric matches --metric {', '.join(metric)}")
    configs = df["config"].unique(maintain_order=True).to_list()
    every = list(configurations(store, run_names, where))
    head = (f"{len(configs)} configuration(s): {', '.join(configs)}; change_pct against "
            f"{every[0] if not baseline else baseline}")
    if missing := [c for c in every if c not in configs]:
        head += f"; no {'such ' if metric else ''}metrics in {', '.join(missing)}"
    return Out(df, head)


# columns a table of many rows leaves out when every row has the same value: said once above
# it instead, so that the metric names keep the width
CONSTANT_COLUMNS = ("config", "unit", "runs")


def view(result) -> list:
    df = result.df
    shown = seconds_as_ms(df, ("mean", "sd", "trimmed_mean")).drop("notes")
    same = [c for c in CONSTANT_COLUMNS if shown.height > 1 and c in shown.columns
            and shown[c].null_count() == 0 and shown[c].n_unique() == 1]
    head = result.headline
    if same:
        head += "\nevery row: " + ", ".join(f"{c} {shown[c][0]}" for c in same)
        shown = shown.drop(same)
    return [Block(shown, head, notes=undefined_notes(df), undefined=("mean", "sd", "trimmed_mean", "change_pct"))]


def undefined_notes(df) -> list[str]:
    """One line per reason a cell shows UNDEFINED (the rows' `notes`), with the rows it holds for
    (a configuration whose every row it holds for is named once)."""
    from ..render import UNDEFINED

    total: dict[str, int] = {}
    by: dict[str, dict[str, list[str]]] = {}
    for config, metric, notes in df.select("config", "metric", "notes").iter_rows():
        total[config] = total.get(config, 0) + 1
        for note in (notes or "").split("; "):
            if note:
                by.setdefault(note, {}).setdefault(config, []).append(metric)
    out = []
    for note, configs in by.items():
        whole = [c for c, ms in configs.items() if len(ms) == total[c] > 1]
        some = [f"{c} {m}" for c, ms in configs.items() if c not in whole for m in ms]
        more = f" and {len(some) - 3} more" if len(some) > 3 else ""
        parts = [f"every metric of {', '.join(whole)}" if whole else "", ", ".join(some[:3]) + more if some else ""]
        out.append(f"{UNDEFINED} {note} ({'; '.join(p for p in parts if p)})")
    return out


def to_json(result) -> list:
    return result.df.to_dicts()


def csv_tables(result) -> list:
    return [(None, result.df)]


# ---------------------------------------------------------------- the report (two or more runs)
COMPARE_METRICS = ("step_time", "throughput", "data_wait", "communication")
COMPARE_CATEGORIES = 6


def report_section(ctx) -> list:
    """Runs side by side (traceq compare): one bar chart per metric, mean ± sd over the
    repetitions of each configuration, and the comparison table."""
    from ..report import figures
    from ..report.html import table
    from ..report.parts import Guard, Section, add, add_table

    from ..experiments.compare import compare as compare_runs

    store, runs, warnings = ctx.store, ctx.runs, ctx.warnings
    sec = Section("compare", "Comparison of " + ", ".join(runs),
                  intro="Per-run metrics side by side (traceq compare): runs whose labels differ only in rep are "
                        "pooled as repetitions; bars show the mean, whiskers ± one sd; change against the first.")
    with Guard(sec, warnings, "compare"):
        df = compare_runs(store, runs)
        present = df["metric"].unique().to_list()
        cats = (df.filter(pl.col("metric").str.starts_with("gpu.")).group_by("metric").agg(pl.col("mean").max())
                .sort("mean", descending=True).head(COMPARE_CATEGORIES)["metric"].to_list())
        for metric in [m for m in COMPARE_METRICS if m in present] + cats:
            add(sec, figures.metric_bars(df, metric), f"compare-{metric}")
        add_table(sec, table(df, caption="Metrics per configuration (s, items/s)", max_rows=200), "compare")
    return [sec]


ANALYSIS = Analysis(
    name="compare",
    help="Runs side by side: per metric and configuration, mean / sd / sd % / trimmed mean over the "
         "repetitions (runs whose labels differ only in rep) and the change against the baseline. "
         "Metrics: step_time (IQR-filtered median step), throughput (batch label / step time), "
         "data_wait, communication, gpu.<category> and region.<name> per step, imported metrics.",
    examples=("traceq compare control test amp --baseline control",
              "traceq compare --where app=cifar10,b=64 --metric step_time --metric gpu.*"),
    compute=compute,
    params=(Param("run_names", str, None, "Runs to compare (default: every run, or those --where selects).",
                  "RUN", argument=True, multiple=True),
            WHERE,
            Param("baseline", str, None, "Run (or configuration) the changes are relative to (default: the "
                  "first).", "RUN"),
            Param("metric", str, None, "Only these metrics (repeatable; a trailing * matches a prefix, e.g. "
                  "gpu.*).", "METRIC", flags=("-m",), multiple=True)),
    view=view,
    json=to_json,
    csv=csv_tables,
    scope="store",
    report="Comparison",
    report_section=report_section,
    order=80,
    columns=cols("config: the configuration (labels other than rep), or the run",
                 "metric: step_time, throughput, data_wait, communication, gpu.<category>, region.<name> or an "
                 "imported metric", "unit: the metric's unit (s, items/s, ...)",
                 "runs: repetitions (runs) of the configuration",
                 "mean: mean over the repetitions, in the metric's unit",
                 "sd: sample standard deviation over the repetitions (null with fewer than 2)",
                 "sd_pct: 100 · sd / mean, %", "trimmed_mean: mean with the min and max dropped",
                 "change_pct: 100 · (mean − baseline's mean) / baseline's mean, %",
                 "notes: why a value is undefined (null otherwise)"),
)
