"""`traceq check`: a statistical regression gate against targets, as mila's training
benchmarks do it.

Per target (a label selector and a metric), over the matching runs:
    result  = trimmed mean of the runs' values (one min and one max dropped, n ≥ 3)
    sd      = sample standard deviation of the runs' values
    sd_pct  = 100 · sd / result
    diff_pct= 100 · (result − target) / target, sign flipped for lower-is-better metrics
              (times), so that a positive diff is always better than the target
A single run that already summarises n runs (milabench summary) is used as it is:
result = its mean, sd = its sd, runs = n.

Gates (the TOML's [gate] table; defaults as mila):
    min_runs       every row needs ≥ min_runs runs (4)
    max_sd_pct     the 80th percentile of the rows' sd_pct must be < max_sd_pct (5)
    tolerance_pct  the mean of the rows' diff_pct must be ≥ −tolerance_pct (0)
A row (target) passes when it has enough runs and diff_pct ≥ −tolerance_pct; the check
passes when every gate and every target does, so a check can fail with every gate passed
(one target far below, the others above: the mean diff is still fine). A failed target says
why (`failure`: the metric, the result ± sd, the target and each test that failed;
`failed_tests`: those tests by rule name). sd is undefined (null) with fewer than 2 runs.
"""
from __future__ import annotations

import tomllib
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from ..errors import TraceqError
from . import stats
from .metrics import parse_where, run_metrics, select_runs

DEFAULT_GATE = {"min_runs": 4, "max_sd_pct": 5.0, "tolerance_pct": 0.0}
SD_PERCENTILE = 80
HIGHER_IS_BETTER_UNITS = ("items/s", "samples/s", "tokens/s", "1/s")


@dataclass
class Target:
    name: str
    where: str
    metric: str
    target: float
    direction: str | None = None    # lower | higher (default from the metric's unit)


@dataclass
class CheckResult:
    rows: pl.DataFrame
    gates: list[dict]
    passed: bool
    gate: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"passed": self.passed, "rows": self.rows.select(
            "name", "metric", "runs", "result", "sd", "sd_pct", "target", "diff_pct", "passed", "failure",
            "failed_tests").to_dicts(), "gates": self.gates, "failures": self.failures()}

    def failures(self) -> list[str]:
        """Why the check failed, one line per failed target and per failed gate."""
        out = [f"{r['name']}: {r['failure']}" for r in self.rows.iter_rows(named=True) if r["failure"]]
        return out + [f"gate {g['rule']}: value {_num(g['value'])}, limit {_num(g['limit'])}"
                      + (" (undefined: no target has an sd, each has fewer than 2 runs)" if g["value"] is None
                         and g["rule"].startswith("sd_pct") else "") for g in self.gates if not g["passed"]]


def load_targets(path: str | Path) -> tuple[dict, list[Target]]:
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except OSError as exc:
        raise TraceqError(exc.strerror or str(exc), path) from None
    except tomllib.TOMLDecodeError as exc:
        raise TraceqError(f"not valid TOML ({exc})", path) from None
    gate = dict(DEFAULT_GATE)
    for k, v in (doc.get("gate") or {}).items():
        if k not in DEFAULT_GATE:
            raise TraceqError(f"[gate] {k}: unknown rule (rules: {', '.join(DEFAULT_GATE)})", path)
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise TraceqError(f"[gate] {k}: expected a number, got {v!r}", path)
        gate[k] = v
    targets = []
    for n, t in enumerate(doc.get("target") or []):
        missing = [k for k in ("name", "metric", "target") if k not in t]
        if missing:
            raise TraceqError(f"[[target]] #{n + 1}: missing {', '.join(missing)}", path)
        if not isinstance(t["target"], (int, float)) or isinstance(t["target"], bool) or t["target"] == 0:
            raise TraceqError(f"[[target]] {t['name']!r}: target must be a non-zero number", path)
        direction = t.get("direction")
        if direction not in (None, "lower", "higher"):
            raise TraceqError(f"[[target]] {t['name']!r}: direction must be 'lower' or 'higher'", path)
        where = str(t.get("where", ""))
        try:
            parse_where(where)
        except TraceqError as exc:
            raise TraceqError(f"[[target]] {t['name']!r}: {exc}", path) from None
        targets.append(Target(str(t["name"]), where, str(t["metric"]), float(t["target"]), direction))
    if not targets:
        raise TraceqError("no [[target]] entries", path)
    return gate, targets


def lower_is_better(metric: str, unit: str | None, direction: str | None = None) -> bool:
    if direction:
        return direction == "lower"
    if unit in HIGHER_IS_BETTER_UNITS or metric in ("throughput", "train_item", "train_rate"):
        return False
    return True


def row_stats(values: list[float], target: float, lower_better: bool) -> dict:
    """result/sd/sd_pct/diff_pct of one target from its runs' values (module doc)."""
    result = stats.trimmed_mean(values)
    sd = stats.sd(values)
    return _finish(len(values), result, sd, target, lower_better)


def _finish(n: int, result, sd, target: float, lower_better: bool) -> dict:
    sd_pct = 100 * sd / result if result and sd is not None else None
    diff = None if result is None else 100 * (result - target) / target * (-1 if lower_better else 1)
    return {"runs": n, "result": result, "sd": sd, "sd_pct": sd_pct, "target": target, "diff_pct": diff}


def _num(v) -> str:
    return "none" if v is None else f"{v:,.6g}"


def _why(r: dict, gate: dict) -> tuple[list[str], str | None]:
    """(failed tests, the failure in words) of one target row; times in ms, as the table."""
    tol = float(gate["tolerance_pct"])
    tests, why = [], []
    if r["runs"] < gate["min_runs"]:
        tests.append("min_runs")
        why.append(f"runs {r['runs']} < min_runs {gate['min_runs']}")
    if r["diff_pct"] is None:
        tests.append("diff_pct >= -tolerance_pct")
        why.append("no value to compare with the target")
    elif r["diff_pct"] < -tol:
        tests.append("diff_pct >= -tolerance_pct")
        why.append(f"diff {r['diff_pct']:+.2f} % below -tolerance_pct {-tol if tol else 0:g} %")
    if not tests:
        return [], None
    unit, k = (r.get("unit") or "", 1.0) if r.get("unit") != "s" else ("ms", 1e3)
    unit = f" {unit}" if unit else ""

    def v(x):
        return "none" if x is None else f"{x * k:,.3f}"
    spread = "" if r["result"] is None else (" (sd undefined: one run)" if r["sd"] is None else f" ± {v(r['sd'])}")
    return tests, (f"{r['metric']} {v(r['result'])}{spread}{unit} ({r['runs']} runs), target "
                   f"{v(r['target'])}{unit}: " + "; ".join(why))


def evaluate(rows: list[dict], gate: dict) -> tuple[list[dict], list[dict], bool]:
    """Row verdicts (passed, failed_tests, failure) and the gates over rows (each row: runs,
    sd_pct, diff_pct)."""
    tol = float(gate["tolerance_pct"])
    for r in rows:
        r["failed_tests"], r["failure"] = _why(r, gate)
        r["passed"] = not r["failed_tests"]
    runs = [r["runs"] for r in rows]
    sds = [r["sd_pct"] for r in rows if r["sd_pct"] is not None]
    diffs = [r["diff_pct"] for r in rows if r["diff_pct"] is not None]
    sd_p = float(np.percentile(sds, SD_PERCENTILE)) if sds else None
    mean_diff = float(np.mean(diffs)) if diffs else None
    gates = [
        {"rule": "min_runs", "value": min(runs) if runs else 0, "limit": gate["min_runs"],
         "passed": bool(runs) and min(runs) >= gate["min_runs"]},
        {"rule": f"sd_pct_p{SD_PERCENTILE} < max_sd_pct", "value": sd_p, "limit": gate["max_sd_pct"],
         "passed": sd_p is not None and sd_p < gate["max_sd_pct"]},
        {"rule": "mean diff_pct >= -tolerance_pct", "value": mean_diff, "limit": -tol if tol else 0.0,
         "passed": mean_diff is not None and mean_diff >= -tol},
    ]
    return rows, gates, all(g["passed"] for g in gates) and all(r["passed"] for r in rows)


def check(store=None, targets_path: str | Path = "targets.toml", min_runs: int | None = None) -> CheckResult:
    gate, targets = load_targets(targets_path)
    if min_runs is not None:
        gate["min_runs"] = min_runs
    metrics = run_metrics(store)
    rows = []
    for t in targets:
        sel = parse_where(t.where)
        bench = sel.pop("bench", None)
        runs = set(select_runs(store, sel))
        m = metrics.filter(pl.col("run").is_in(list(runs)) & (pl.col("metric") == t.metric))
        if bench is not None:   # a label of the run, or the benchmark inside a milabench summary
            labelled = set(select_runs(store, {"bench": bench}))
            m = m.filter(pl.col("run").is_in(list(labelled)) | (pl.col("bench") == bench))
        unit = m["unit"][0] if m.height else None
        lower = lower_is_better(t.metric, unit, t.direction)
        summarised = m.filter(pl.col("runs") > 1)
        if m.height == 1 and summarised.height == 1:
            s = summarised.row(0, named=True)
            row = _finish(int(s["runs"]), s["value"], s["sd"], t.target, lower)
        else:
            row = row_stats(m["value"].to_list(), t.target, lower)
        rows.append({"name": t.name, "metric": t.metric, "unit": unit or "", **row})
    rows, gates, passed = evaluate(rows, gate)
    schema = {"name": pl.Utf8, "metric": pl.Utf8, "unit": pl.Utf8, "runs": pl.Int64, "result": pl.Float64,
              "sd": pl.Float64, "sd_pct": pl.Float64, "target": pl.Float64, "diff_pct": pl.Float64,
              "passed": pl.Boolean, "failure": pl.Utf8, "failed_tests": pl.List(pl.Utf8)}
    return CheckResult(pl.DataFrame(rows, schema=schema), gates, passed, gate)


def junit_xml(res: CheckResult, suite: str = "traceq.check") -> str:
    """JUnit XML valid under the ant/Jenkins JUnit XSD (the strict one: testsuite with
    name/timestamp/hostname/tests/failures/errors/time, id/package inside testsuites, a
    properties element first and system-out/system-err last; testcase with name/classname/
    time holding at most one failure with message and type): one testcase per target row
    and one per gate."""
    from datetime import datetime, timezone

    cases = []
    for r in res.rows.iter_rows(named=True):
        msg = r["failure"] or (f"{r['metric']}: result {r['result']} {r['unit']} vs target {r['target']} "
                               f"(diff {r['diff_pct']} %, sd {r['sd_pct']} %, runs {r['runs']})")
        cases.append(("targets", r["name"], r["passed"], msg))
    for g in res.gates:
        cases.append(("gates", g["rule"], g["passed"], f"value {g['value']} limit {g['limit']}"))
    failures = sum(not c[2] for c in cases)
    root = ET.Element("testsuites")
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    ts = ET.SubElement(root, "testsuite", name=suite, timestamp=stamp, hostname="localhost", tests=str(len(cases)),
                       failures=str(failures), errors="0", time="0", id="0", package="traceq")
    props = ET.SubElement(ts, "properties")
    for k, v in res.gate.items():
        ET.SubElement(props, "property", name=f"gate.{k}", value=str(v))
    for classname, name, ok, msg in cases:
        tc = ET.SubElement(ts, "testcase", name=str(name), classname=f"{suite}.{classname}", time="0")
        if not ok:
            f = ET.SubElement(tc, "failure", message=msg, type="GateFailure")
            f.text = msg
    ET.SubElement(ts, "system-out").text = "\n".join(c[3] for c in cases)
    ET.SubElement(ts, "system-err").text = ""
    return ET.tostring(root, encoding="unicode", xml_declaration=True)
