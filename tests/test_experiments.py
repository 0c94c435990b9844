"""Experiments: parameters from file names, per-run metrics, mila ingest, check, model, compare.

Expected values are worked out by hand in the comments (or from the generating law)."""
from __future__ import annotations

import json
import math
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from conftest import SAMPLES, shared_trace
from traceq.experiments import model as pmnf
from traceq.experiments.check import row_stats
from traceq.experiments.metrics import run_metrics
from traceq.experiments.params import compile_pattern, parse_extradeep, parse_pattern, plan_tree
from traceq.experiments.stats import iqr_filter, robust_median, trimmed_mean


def traceq(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "traceq", *map(str, args)], capture_output=True, text=True, cwd=cwd)


# ---------------------------------------------------------------- parameters from names
def test_extradeep_file_names():
    fp = parse_extradeep("cifar10.p8.b64.r2.mpi3.sqlite")
    assert (fp.run, fp.labels, fp.rank) == ("cifar10.p8.b64.r2", {"p": "8", "b": "64", "rep": "2", "app": "cifar10"}, 3)
    # Extra-P's Nsight layout: the folder names the configuration, the files are the ranks
    fp = parse_extradeep("mm.x10y1,5.r1/profile2.sqlite")
    assert (fp.run, fp.labels, fp.rank) == ("mm.x10y1,5.r1", {"x": "10", "y": "1.5", "rep": "1", "app": "mm"}, 2)
    assert parse_extradeep("resnet50.sqlite") is None
    # issue 37: `r<N>` is the repetition wherever it stands, `mpi<N>` the rank
    fp = parse_extradeep("x.p2.b32/r2.json.gz")
    assert (fp.run, fp.labels, fp.rank) == ("x.p2.b32.r2", {"p": "2", "b": "32", "rep": "2", "app": "x"}, None)
    fp = parse_extradeep("x.p2.b32/r2.mpi5.json.gz")
    assert (fp.run, fp.labels["rep"], fp.rank) == ("x.p2.b32.r2", "2", 5)


def test_user_pattern():
    rx = compile_pattern(r"(?P<app>[a-z]+)_n(?P<ranks>\d+)_bs(?P<batch>\d+)_rank(?P<rank>\d+)")
    fp = parse_pattern(rx, "bert_n8_bs32_rank5.pt.trace.json.gz")
    assert (fp.run, fp.labels, fp.rank) == ("bert_n8_bs32", {"app": "bert", "ranks": "8", "batch": "32"}, 5)
    assert parse_pattern(rx, "other.json") is None


def test_bad_pattern_is_bad_input(tmp_path):
    (tmp_path / "a.json").write_text("{}")
    r = traceq("ingest", tmp_path, "--recursive", "--name-pattern", "(?P<x", "--store", tmp_path / "s")
    assert r.returncode == 2 and "--name-pattern" in r.stderr and "Traceback" not in r.stderr


# ---------------------------------------------------------------- a synthetic experiment tree
sys.path.insert(0, str(SAMPLES))
import make_experiment as mx  # noqa: E402

RANKS = (2, 4, 8, 16, 32)


@pytest.fixture(scope="module")
def tree_store(tmp_path_factory):
    """p in 2..32 (model) and 64 (held back), b = 64, 3 repetitions, 2 rank files each."""
    root = tmp_path_factory.mktemp("xp")
    mx.write_tree(root / "tree", ranks=RANKS + (64,), batches=(64,), reps=3, steps=8, noise=0.02, seed=3)
    r = traceq("ingest", root / "tree", "--recursive", "--store", root / "store", "-q")
    assert r.returncode == 0, r.stderr
    return root


def test_recursive_ingest_groups_ranks_into_runs(tree_store):
    from traceq.store import Store

    rows = Store(tree_store / "store").manifest_rows()
    runs = {}
    for row in rows:
        runs.setdefault(row["run"], []).append(row["rank"])
    assert len(runs) == 6 * 3                               # 6 rank counts x 3 repetitions
    assert runs["synth.p8.b64.r2"] == [0, 1]                 # mpi0, mpi1 -> ranks of one run
    labels = json.loads(next(r for r in rows if r["run"] == "synth.p8.b64.r2")["labels"])
    assert labels == {"app": "synth", "p": "8", "b": "64", "rep": "2"}
    plan = plan_tree(tree_store / "tree")
    assert len(plan) == 6 * 3 * 2


def test_step_time_metrics_match_the_generated_steps(tree_store):
    # regenerate the same random steps (same seed, same draw order) and compute independently
    rng = np.random.default_rng(3)
    want = {}
    for p in RANKS + (64,):
        for r in (1, 2, 3):
            f = 1 + rng.normal(0, 0.01)
            want[(p, r)] = [mx.law(p, 64) * f * (1 + 0.02 * z) for z in rng.standard_normal(8)]
    df = run_metrics(tree_store / "store", ["synth.p8.b64.r2"])
    got = {r["metric"]: r["value"] for r in df.iter_rows(named=True)}
    steps = sorted(want[(8, 2)])
    q1, q3 = np.percentile(steps, [25, 75])
    kept = [s for s in steps if q1 - 1.5 * (q3 - q1) <= s <= q3 + 1.5 * (q3 - q1)]
    assert got["step_time"] == pytest.approx(float(np.median(kept)), rel=1e-5)   # µs rounding in the JSON
    assert got["step_time_trimmed"] == pytest.approx(sum(steps[1:-1]) / 6, rel=1e-5)
    assert got["throughput"] == pytest.approx(64 / got["step_time"])
    assert got["communication"] == pytest.approx(0.2 * sum(steps) / 8, rel=1e-4)   # all-reduce = 20 % of a step
    assert got["gpu.gemm"] == pytest.approx(0.5 * sum(steps) / 8, rel=1e-4)


@pytest.fixture(scope="module")
def model_json(tree_store):
    r = traceq("model", "--param", "p", "--where", "app=synth", "--predict", "p=128", "--format", "json",
               "--store", tree_store / "store", "--export-extrap", tree_store / "xp.json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_model_recovers_the_law_and_predicts_the_held_back_point(tree_store):
    from traceq.experiments.modeling import measurements

    xs, reps, nruns, unit = measurements(tree_store / "store", ["p"], "step_time", "b=64")
    assert nruns == 18 and unit == "s" and xs == [[float(p)] for p in RANKS + (64,)]
    # fit on p <= 32 only (p = 64 held back) and compare with the law C0 + C1*b * p*log2(p)
    keep = [i for i, x in enumerate(xs) if x[0] <= 32]
    m = pmnf.fit(["p"], [xs[i] for i in keep], [reps[i] for i in keep])
    assert m.terms == [{"p": (1, 1)}]                                  # p^1 * log2(p)^1
    assert m.coefficients[0] == pytest.approx(mx.C1 * 64, rel=0.05)
    assert m.constant == pytest.approx(mx.C0, rel=0.15)
    pred = m.predict({"p": 64})
    truth = mx.law(64, 64)
    measured = float(np.mean(reps[xs.index([64.0])]))
    assert pred["low"] <= truth <= pred["high"]
    assert abs(pred["value"] - measured) / measured < 3 * 0.02        # within the noise (2 % per step)


def test_model_json_interface_and_extrap_export(tree_store, model_json):
    doc = model_json
    assert list(doc) == ["param", "metric", "model", "constant", "terms", "smape_pct", "r2_adj", "points", "predictions",
                         "notes"]
    assert doc["param"] == ["p"] and doc["metric"] == "step_time" and doc["points"] == 6
    assert doc["terms"][0]["exponents"] == {"p": [1.0, 1]}
    assert "p·log2(p)" in doc["model"]
    (pred,) = doc["predictions"]
    assert set(pred) == {"p", "value", "low", "high"} and pred["p"] == 128
    assert pred["value"] == pytest.approx(mx.law(128, 64), rel=0.06)
    ex = json.loads((tree_store / "xp.json").read_text())
    assert ex["parameters"] == ["p"] and len(ex["measurements"]["step"]["step_time"]) == 6
    assert all(len(m["values"]) == 3 for m in ex["measurements"]["step"]["step_time"])


def test_model_strong_scaling_table(tree_store):
    r = traceq("model", "--param", "p", "--where", "b=64", "--strong-scaling", "--format", "csv",
               "--store", tree_store / "store")
    assert r.returncode == 0, r.stderr
    head, first, second = r.stdout.splitlines()[:3]
    assert "speedup" in head and "efficiency" in head
    cols = dict(zip(head.split(","), second.split(",")))
    # p = 4 against p = 2: speedup = T(2)/T(4) from the law, efficiency = speedup * 2/4
    want = mx.law(2, 64) / mx.law(4, 64)
    assert float(cols["speedup"]) == pytest.approx(want, rel=0.05)
    assert float(cols["efficiency"]) == pytest.approx(want / 2, rel=0.05)


# ---------------------------------------------------------------- PMNF fitting on exact laws
@pytest.mark.parametrize("i,j", [(0.5, 0), (2 / 3, 0), (1, 1), (2, 0), (0, 1), (1.5, 1)])
def test_single_parameter_exponents_recovered(i, j):
    ps = [4, 8, 16, 32, 64, 128]
    reps = [[3.0 + 0.25 * p ** i * math.log2(p) ** j] * 2 for p in ps]
    m = pmnf.fit(["p"], [[p] for p in ps], reps)
    (term,) = m.terms
    assert float(term["p"][0]) == pytest.approx(i) and term["p"][1] == j
    assert m.constant == pytest.approx(3.0) and m.coefficients[0] == pytest.approx(0.25)
    assert m.r2_adj == pytest.approx(1.0) and m.smape_pct < 1e-6


def test_two_parameter_product_and_sum():
    pts = [(p, n) for p in (2, 4, 8, 16, 32) for n in (10, 20, 40, 80, 160)]
    prod = pmnf.fit(["p", "n"], pts, [[1 + 0.01 * p * n ** 0.5] for p, n in pts])
    assert prod.terms == [{"p": (1, 0), "n": (0.5, 0)}]
    add = pmnf.fit(["p", "n"], pts, [[1 + 0.5 * math.log2(p) + 0.02 * n] for p, n in pts])
    assert add.terms in ([{"p": (0, 1)}, {"n": (1, 0)}], [{"n": (1, 0)}, {"p": (0, 1)}])
    assert add.evaluate({"p": 64, "n": 10}) == pytest.approx(1 + 3 + 0.2)


def test_formula_and_warnings():
    m = pmnf.fit(["p"], [[2], [4], [8]], [[2.1 + 0.003 * p ** 1.5 * math.log2(p)] for p in (2, 4, 8)])
    assert m.formula() == "2.1 + 0.003·p^1.5·log2(p)"
    assert any("only 3 values of p" in w for w in m.warnings)


# ---------------------------------------------------------------- statistics
def test_iqr_filter_median_and_trimmed_mean():
    x = [10, 11, 12, 13, 100]              # Q1 = 11, Q3 = 13, IQR 2 -> keep [8, 16]
    assert list(iqr_filter(x)) == [10, 11, 12, 13]
    assert robust_median(x) == 11.5
    assert trimmed_mean(x) == 12.0          # (11 + 12 + 13) / 3


# ---------------------------------------------------------------- mila ingest and check
def _mila(path: Path, name: str, t: float, items: float, batch: int = 64) -> Path:
    path.write_text(json.dumps({"name": name, "batch_size": batch, "version": "1",
                                "train": {"avg": t, "count": 100, "max": t * 1.1, "min": t * 0.9, "sd": t / 50,
                                          "unit": "s"},
                                "train_item": {"avg": items, "count": 100, "max": items, "min": items, "sd": 1.0,
                                               "unit": "items/s"}}))
    return path


@pytest.fixture
def mila_store(tmp_path):
    # resnet50: 4 tight runs; vgg: 5 runs with an outlier
    files = [_mila(tmp_path / f"resnet50.{k}.json", "resnet50", t, 512.0) for k, t in
             enumerate([0.124, 0.125, 0.126, 0.125])]
    files += [_mila(tmp_path / f"vgg.{k}.json", "vgg", t, 100.0 + k) for k, t in
              enumerate([0.10, 0.12, 0.11, 0.13, 0.20])]
    store = tmp_path / "store"
    from traceq.ingest import ingest

    ingest(files, store, jobs=1)
    return store


def test_mila_ingest_metrics(mila_store):
    df = run_metrics(mila_store, ["resnet50.1"])
    got = {r["metric"]: (r["value"], r["unit"], r["samples"]) for r in df.iter_rows(named=True)}
    assert got["step_time"] == (0.125, "s", 100) and got["train"] == (0.125, "s", 100)
    assert got["throughput"] == (512.0, "items/s", 100)
    from traceq.experiments.metrics import run_labels

    assert run_labels(mila_store)["resnet50.1"] == {"bench": "resnet50", "batch": "64"}


def test_check_hand_computed_values():
    # vgg: [0.10, 0.12, 0.11, 0.13, 0.20]; trimmed mean drops 0.10 and 0.20 -> 0.12
    # mean 0.132, squared deviations .001024+.000144+.000484+.000004+.004624 = .00628, /4 -> sd .0396232
    r = row_stats([0.10, 0.12, 0.11, 0.13, 0.20], target=0.125, lower_better=True)
    assert r["result"] == pytest.approx(0.12)
    assert r["sd"] == pytest.approx(0.0396232, rel=1e-5)
    assert r["sd_pct"] == pytest.approx(33.0193, rel=1e-4)
    assert r["diff_pct"] == pytest.approx(4.0)       # time: (0.125 - 0.12) / 0.125 = +4 % (better)
    t = row_stats([100, 101, 102, 103], target=100, lower_better=False)
    assert t["result"] == pytest.approx(101.5) and t["diff_pct"] == pytest.approx(1.5)


TARGETS = """
[gate]
min_runs = 4
max_sd_pct = 5
tolerance_pct = 0
[[target]]
name = "resnet50"
where = "bench=resnet50"
metric = "step_time"
target = {t}
[[target]]
name = "resnet50-items"
where = "bench=resnet50"
metric = "throughput"
target = 500
"""


def _validate_junit(xml_text: str) -> ET.Element:
    """The structure the ant/Jenkins JUnit XSD demands (checked by hand, no XSD library)."""
    root = ET.fromstring(xml_text)
    assert root.tag == "testsuites"
    suites = list(root)
    assert suites and all(s.tag == "testsuite" for s in suites)
    for s in suites:
        for attr in ("name", "timestamp", "hostname", "tests", "failures", "errors", "time", "id", "package"):
            assert attr in s.attrib, attr
        assert set(s.attrib) <= {"name", "timestamp", "hostname", "tests", "failures", "errors", "time", "id",
                                 "package"}
        children = [c.tag for c in s]
        assert children[0] == "properties" and children[-2:] == ["system-out", "system-err"]
        cases = [c for c in s if c.tag == "testcase"]
        assert children[1:-2] == ["testcase"] * len(cases)
        assert int(s.get("tests")) == len(cases)
        assert int(s.get("failures")) == sum(1 for c in cases if c.find("failure") is not None)
        for p in s.find("properties"):
            assert p.tag == "property" and set(p.attrib) == {"name", "value"}
        for c in cases:
            assert {"name", "classname", "time"} <= set(c.attrib)
            float(c.get("time"))
            assert len(c) <= 1
            for f in c:
                assert f.tag == "failure" and {"message", "type"} <= set(f.attrib)
        float(s.get("time"))
    return root


def test_check_passes_and_writes_junit(mila_store, tmp_path):
    tf = tmp_path / "targets.toml"
    tf.write_text(TARGETS.format(t=0.125))
    r = traceq("check", "--targets", tf, "--store", mila_store, "--format", "json", "--junit", tmp_path / "j.xml")
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["passed"] is True
    row = doc["rows"][0]
    # [0.124, 0.125, 0.126, 0.125] -> trimmed (0.125 + 0.125) / 2; sd = sqrt(2e-6 / 3) = 8.165e-4
    assert row["runs"] == 4 and row["result"] == pytest.approx(0.125)
    assert row["sd"] == pytest.approx(8.16497e-4, rel=1e-4)
    assert row["sd_pct"] == pytest.approx(0.653197, rel=1e-4) and row["diff_pct"] == pytest.approx(0.0, abs=1e-9)
    assert doc["rows"][1]["diff_pct"] == pytest.approx(2.4)    # (512 - 500) / 500
    assert [g["passed"] for g in doc["gates"]] == [True, True, True]
    root = _validate_junit((tmp_path / "j.xml").read_text())
    assert root.find("testsuite").get("failures") == "0"


def test_check_fails_with_exit_1(mila_store, tmp_path):
    tf = tmp_path / "targets.toml"
    tf.write_text(TARGETS.format(t=0.1))     # time 25 % worse than the target
    r = traceq("check", "--targets", tf, "--store", mila_store, "--junit", tmp_path / "j.xml")
    assert r.returncode == 1
    assert "FAILED" in r.stdout
    root = _validate_junit((tmp_path / "j.xml").read_text())
    failed = [c.get("name") for c in root.iter("testcase") if c.find("failure") is not None]
    assert "resnet50" in failed and "resnet50-items" not in failed
    # too few runs: --min-runs 5 fails the min_runs gate
    tf.write_text(TARGETS.format(t=0.125))
    r = traceq("check", "--targets", tf, "--store", mila_store, "--min-runs", "5", "--format", "json")
    assert r.returncode == 1
    assert json.loads(r.stdout)["gates"][0] == {"rule": "min_runs", "value": 4, "limit": 5, "passed": False}


def test_check_bad_targets_exit_2(mila_store, tmp_path):
    tf = tmp_path / "t.toml"
    tf.write_text("[[target]]\nname = 'x'\n")
    r = traceq("check", "--targets", tf, "--store", mila_store)
    assert r.returncode == 2 and "missing metric, target" in r.stderr


def test_milabench_summary(tmp_path):
    f = tmp_path / "summary.json"
    f.write_text(json.dumps({"resnet50": {"name": "resnet50", "n": 4, "successes": 4, "failures": 0,
                                          "train_rate": {"min": 500, "max": 520, "mean": 510.0, "std": 8.0,
                                                         "sem": 4.0, "median": 510}, "walltime": 300.0}}))
    r = traceq("ingest", f, "--store", tmp_path / "s", "-q")
    assert r.returncode == 0, r.stderr
    tf = tmp_path / "t.toml"
    tf.write_text('[[target]]\nname = "r"\nwhere = "bench=resnet50"\nmetric = "throughput"\ntarget = 500\n')
    r = traceq("check", "--targets", tf, "--store", tmp_path / "s", "--format", "json")
    row = json.loads(r.stdout)["rows"][0]
    assert (row["runs"], row["result"], row["sd"]) == (4, 510.0, 8.0)
    assert row["diff_pct"] == pytest.approx(2.0) and row["sd_pct"] == pytest.approx(100 * 8 / 510)
    assert r.returncode == 0


# ---------------------------------------------------------------- compare
def test_compare_milabench_summary_alone_and_beside_a_trace(tmp_path):
    """Issue 37 item 2: `compare` on a milabench summary was 'internal error: IndexError', and
    beside a second run the milabench run was dropped without a word."""
    f = tmp_path / "nvidia_summary.json"
    f.write_text(json.dumps({"resnet50": {"name": "resnet50", "n": 4, "successes": 4, "failures": 0,
                                          "train_rate": {"min": 500, "max": 520, "mean": 510.0, "std": 8.0,
                                                         "sem": 4.0, "median": 510}, "walltime": 300.0}}))
    store = tmp_path / "s"
    assert traceq("ingest", f, SAMPLES / "slow_dataloader", "--store", store, "-q").returncode == 0
    r = traceq("compare", "nvidia_summary", "--store", store, "-f", "json")
    assert r.returncode == 0, r.stderr
    by = {x["metric"]: x for x in json.loads(r.stdout)}
    # the summary pools its own n = 4 runs: mean 510 items/s, std 8 -> sd % = 100 * 8 / 510
    t = by["bench.resnet50.throughput"]
    assert (t["config"], t["unit"], t["runs"], t["mean"], t["sd"]) == ("nvidia_summary", "items/s", 4, 510.0, 8.0)
    assert t["sd_pct"] == pytest.approx(100 * 8 / 510) and t["change_pct"] == pytest.approx(0.0)
    assert (by["bench.resnet50.walltime"]["mean"], by["bench.resnet50.walltime"]["unit"]) == (300.0, "s")
    r = traceq("compare", "nvidia_summary", "slow_dataloader", "--store", store)
    assert r.returncode == 0, r.stderr
    assert "2 configuration(s)" in r.stdout and "bench.resnet50.throughput" in r.stdout and "step_time" in r.stdout
    # a metric only one of them has: the other is named, not dropped silently
    r = traceq("compare", "nvidia_summary", "slow_dataloader", "--store", store, "-m", "step_time")
    assert r.returncode == 0 and "no such metrics in nvidia_summary" in r.stdout
    r = traceq("compare", "nvidia_summary", "--store", store, "-m", "nothing")
    assert r.returncode != 0 and "no metric matches --metric nothing" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.shared
def test_compare_shared_control_test_and_a_third_run(tmp_path):
    control = shared_trace("kineto/hta/trace_diff/control/control.json.gz")
    test = shared_trace("kineto/hta/trace_diff/test/test.json.gz")
    store = tmp_path / "s"
    assert traceq("ingest", control, test, "--store", store, "-q").returncode == 0
    assert traceq("ingest", control, "--run", "control2", "--store", store, "-q").returncode == 0
    r = traceq("compare", "control", "test", "control2", "--baseline", "control", "--store", store, "-f", "json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    by = {(x["config"], x["metric"]): x for x in rows}
    assert {x["config"] for x in rows} == {"control", "test", "control2"}
    # the same file again: no change; the test run against control, from the per-run metrics
    assert by[("control2", "step_time")]["change_pct"] == pytest.approx(0.0)
    m = run_metrics(store, ["control", "test"])
    st = {r["run"]: r["value"] for r in m.filter(m["metric"] == "step_time").iter_rows(named=True)}
    assert by[("test", "step_time")]["change_pct"] == pytest.approx(100 * (st["test"] - st["control"]) / st["control"])
    assert ("test", "gpu.gemm") in by and ("test", "communication") in by
    assert any(k[1].startswith("region.") for k in by)


def test_report_comparison_section(tree_store, tmp_path):
    from traceq.report import build_report

    runs = ["synth.p2.b64.r1", "synth.p2.b64.r2", "synth.p4.b64.r1"]
    res = build_report(tree_store / "store", runs, tmp_path / "r.html")
    assert "compare" in res.sections and not res.warnings
    html = (tmp_path / "r.html").read_text()
    for metric in ("step_time", "throughput", "communication", "gpu.gemm"):
        assert f'data-chart="compare-{metric}"' in html
    assert 'id="compare"' in html and "synth.p2.b64" in html   # the two repetitions pooled


def test_nvtx_step_ranges_are_a_step_source(tmp_path):
    from conftest import make_store

    # no ProfilerStep / BATCH / DataLoader: NVTX "train_step N" ranges (depth 0) are the steps;
    # the nested "step" (depth 1) and "forward" do not count. Steps 10, 12, 11, 40 ms:
    # Q1 10.75, Q3 18.0, IQR 7.25 -> keep [-0.125, 28.875] -> median of 10, 11, 12 = 11 ms
    ms = 1_000_000
    regions, t = [], 0
    for n, d in enumerate([10, 12, 11, 40]):
        regions.append({"pid": 1, "tid": 1, "source": "nvtx", "name": f"train_step {n}", "start_ns": t,
                        "end_ns": t + d * ms, "depth": 0})
        regions.append({"pid": 1, "tid": 1, "source": "nvtx", "name": "step", "start_ns": t + 1,
                        "end_ns": t + 2 * ms, "depth": 1})
        regions.append({"pid": 1, "tid": 1, "source": "nvtx", "name": "forward", "start_ns": t + 2 * ms,
                        "end_ns": t + 5 * ms, "depth": 1})
        t += d * ms
    make_store(tmp_path / "s", run="nv", regions=regions)
    got = {r["metric"]: r for r in run_metrics(tmp_path / "s").iter_rows(named=True)}
    assert got["step_time"]["source"] == "NVTX" and got["step_time"]["samples"] == 3
    assert got["step_time"]["value"] == pytest.approx(0.011)
    assert got["step_time_trimmed"]["value"] == pytest.approx((0.011 + 0.012) / 2)
    assert got["region.forward"]["value"] == pytest.approx(0.003)      # 3 ms per step
    assert "data_wait" not in got
