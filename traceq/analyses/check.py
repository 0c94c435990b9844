"""A regression gate against targets, as mila's benchmarks do it (the statistics and gates
are traceq/experiments/check.py); exit status 1 when a gate fails."""
from __future__ import annotations

from ..experiments.display import seconds_as_ms
from ..lazy import polars as pl
from .spec import Analysis, Block, Out, Param, cols


def compute(store, targets, min_runs=None, junit=None) -> Out:
    from ..experiments.check import check as check_runs, junit_xml

    res = check_runs(store, targets, min_runs)
    if junit:
        with open(junit, "w") as f:
            f.write(junit_xml(res))
    gates = pl.DataFrame(res.gates, schema={"rule": pl.Utf8, "value": pl.Float64, "limit": pl.Float64,
                                            "passed": pl.Boolean})
    head = f"check {'PASSED' if res.passed else 'FAILED'}: {res.rows.height} target(s), targets {targets}"
    if not res.passed:
        bad = res.rows.filter(~pl.col("passed")).height
        head += (f"; {bad} target(s) failed" if bad else "") + (
            f", {sum(not g['passed'] for g in res.gates)} gate(s) failed" if not all(g["passed"] for g in res.gates)
            else ", every gate passed")
    return Out(res.rows, head, tables={"gates": gates}, value={"res": res})


def view(result) -> list:
    res = result.value["res"]
    rows = seconds_as_ms(result.df, ("result", "sd", "target")).drop("failure", "failed_tests")
    rows = rows.select("name", "passed", *[c for c in rows.columns if c not in ("name", "passed")])
    notes = [f"FAILED {line}" for line in res.failures()]
    if any(r["sd"] is None for r in result.df.iter_rows(named=True)):
        notes.append("– sd: one run (undefined)")
    return [Block(rows, result.headline, undefined=("sd", "result"), drop_first=("sd_pct",)),
            Block(result.tables["gates"], title="gates", notes=notes, undefined=("value",))]


def to_json(result) -> dict:
    return result.value["res"].to_json()


def csv_tables(result) -> list:
    return [(None, result.df.with_columns(pl.col("failed_tests").list.join("; ")))]


def exit_status(result) -> int:
    """Exit 1 when a gate failed."""
    return 0 if result.value["res"].passed else 1


ANALYSIS = Analysis(
    name="check",
    help="Regression gate against targets, as mila's benchmarks do it: per target, result = trimmed "
         "mean over the matching runs (min and max dropped), sd, sd % = sd / result, diff % against the "
         "target (positive = better, for times and throughputs alike); gates min_runs (default 4), "
         "80th percentile of sd % < max_sd_pct (5), mean diff % >= -tolerance_pct (0).\n\n"
         "Exit 0 when every gate passes, 1 when one fails, 2 on bad input.",
    examples=("traceq check --targets targets.toml --junit check.xml",),
    compute=compute,
    params=(Param("targets", str, None, "Targets TOML ([gate] rules and [[target]] entries).", "FILE",
                  flags=("-t",), required=True),
            Param("min_runs", int, None, "Override [gate] min_runs.", "N"),
            Param("junit", str, None, "Also write JUnit XML to this file (for CI).", "FILE")),
    view=view,
    json=to_json,
    csv=csv_tables,
    after=exit_status,
    order=100,
    scope="store",
    columns=cols("name: the target's name", "metric: the metric checked", "unit: the metric's unit",
                 "runs: matching runs", "result: trimmed mean over them (min and max dropped)",
                 "sd: sample standard deviation (null with fewer than 2 runs)", "sd_pct: 100 · sd / result, %",
                 "target: the target value", "diff_pct: against the target, %, positive = better",
                 "passed: every test of the row passed",
                 "failure: why it failed: the metric, result ± sd, target and the tests that failed (null when passed)",
                 "failed_tests: the failed tests by rule name"),
    tables=(("gates", cols("rule: the gate (min_runs, max_sd_pct, tolerance_pct)", "value: the measured value",
                           "limit: the gate's limit", "passed: the gate passed")),),
)
