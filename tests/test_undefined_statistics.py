"""Issue 37 items 5 and 6: statistics that are undefined are null with a stated reason (never 0
or 1), and a failed `check` says which target failed and why.

The runs are timer logs written here by hand (traceq timer-log format: a header line, then
spans {"key", "start_ns", "end_ns"}); every expected value is worked out in the comments."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SAMPLES
from traceq.experiments import model as pmnf
from traceq.experiments.check import row_stats
from traceq.experiments.metrics import run_metrics

HEADER = (SAMPLES / "timer_sample.jsonl").read_text().splitlines()[0]


def traceq(*args):
    return subprocess.run([sys.executable, "-m", "traceq", *map(str, args)], capture_output=True, text=True,
                          env={**__import__("os").environ, "COLUMNS": "100"})


def _log(path: Path, spans: list[tuple[str, int, int]]) -> Path:
    lines = [HEADER] + [json.dumps({"key": k, "start_ns": s, "end_ns": e, "pid": 1, "tid": 1}) for k, s, e in spans]
    path.write_text("\n".join(lines) + "\n")
    return path


def _batches(ms: list[float]) -> list[tuple[str, int, int]]:
    """BATCH spans of these durations, 100 ms apart."""
    return [("BATCH", 10**9 + i * 10**8, 10**9 + i * 10**8 + int(d * 1e6)) for i, d in enumerate(ms)]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    d = tmp_path_factory.mktemp("undef")
    # stepped: steps 10, 20, 30 ms -> step_time = median 20 ms; one run, so sd is undefined
    # nosteps: one FORWARD span of 50 ms and no step: no step_time (main took the 50 ms trace)
    # flat.p{2,4,8,16,32}: BATCH steps of 5 ms each -> step_time 5 ms at every p (constant data);
    # p=2 and p=4 have a second repetition (flat.p2.r2, flat.p4.r2: the same 5 ms steps)
    _log(d / "stepped.jsonl", _batches([10, 20, 30]))
    _log(d / "nosteps.jsonl", [("FORWARD", 10**9, 10**9 + 50 * 10**6)])
    st = d / "store"
    r = traceq("ingest", d / "stepped.jsonl", d / "nosteps.jsonl", "--store", st, "-q")
    assert r.returncode == 0, r.stderr
    for p in (2, 4, 8, 16, 32):
        f = _log(d / f"flat{p}.jsonl", _batches([5, 5, 5]))
        r = traceq("ingest", f, "--run", f"flat.p{p}", "--label", f"p={p}", "--store", st, "-q")
        assert r.returncode == 0, r.stderr
        if p <= 4:
            r = traceq("ingest", f, "--run", f"flat.p{p}.r2", "--label", f"p={p}", "--label", "rep=2",
                       "--store", st, "-q")
            assert r.returncode == 0, r.stderr
    return st


# ---------------------------------------------------------------- compare
def test_a_run_without_steps_has_no_step_time(store):
    df = run_metrics(store, ["stepped", "nosteps"])
    st = {r["run"]: r["value"] for r in df.filter(df["metric"] == "step_time").iter_rows(named=True)}
    assert st == {"stepped": pytest.approx(0.020)}        # main: nosteps -> 0.050 (its whole trace)


def test_compare_shows_undefined_sd_and_missing_step_time_with_reasons(store):
    r = traceq("compare", "stepped", "nosteps", "-m", "step_time", "--store", store, "--format", "json")
    assert r.returncode == 0, r.stderr
    rows = {row["config"]: row for row in json.loads(r.stdout)}
    s, n = rows["stepped"], rows["nosteps"]
    assert s["mean"] == pytest.approx(0.020) and s["runs"] == 1
    assert s["sd"] is None and s["sd_pct"] is None and s["notes"] == "sd: one repetition"   # main: sd 0.0
    assert n["runs"] == 0 and n["mean"] is None and n["change_pct"] is None          # main: 50 ms, +150 %
    assert n["notes"] == "no steps in nosteps"
    t = traceq("compare", "stepped", "nosteps", "-m", "step_time", "--store", store)
    assert "– sd: one repetition (stepped step_time)" in t.stdout
    assert "– no steps in nosteps (nosteps step_time)" in t.stdout
    assert "150.00" not in t.stdout and " 0.000 " not in t.stdout     # main: sd 0.000, +150.00 %


# ---------------------------------------------------------------- model
def test_model_on_constant_data_has_no_adjusted_r2():
    m = pmnf.fit(["p"], [[p] for p in (2, 4, 8, 16, 32)], [[0.005, 0.005]] * 5)
    assert m.constant == pytest.approx(0.005) and m.r2_adj is None       # main: 1.0
    assert m.notes == ["adj. R²: undefined, the values are constant (no variance to explain)"]


def test_model_cli_on_constant_data(store):
    r = traceq("model", "--param", "p", "--store", store, "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["r2_adj"] is None and doc["constant"] == pytest.approx(0.005)
    assert doc["notes"] == ["adj. R²: undefined, the values are constant (no variance to explain)"]
    t = traceq("model", "--param", "p", "--store", store)
    assert "adj. R² –," in t.stdout and "1.0000" not in t.stdout
    assert "– sd: one repetition (undefined)" in t.stdout


# ---------------------------------------------------------------- check
def test_one_run_has_no_sd():
    r = row_stats([0.02], target=0.025, lower_better=True)
    assert r["result"] == pytest.approx(0.02) and r["sd"] is None and r["sd_pct"] is None   # main: 0.0
    assert r["diff_pct"] == pytest.approx(20.0)     # (0.025 - 0.02) / 0.025, time: positive = better


TARGETS = """
[gate]
min_runs = 2
max_sd_pct = 5
tolerance_pct = 0
[[target]]
name = "flat p2"
where = "p=2"
metric = "step_time"
target = 0.004
[[target]]
name = "flat p4"
where = "p=4"
metric = "step_time"
target = 0.010
"""


def test_a_failed_check_names_the_failed_target_and_test(store, tmp_path):
    # flat p2: 5 ms against 4 ms -> diff = -(5 - 4) / 4 = -25 % < 0: fails
    # flat p4: 5 ms against 10 ms -> +50 %; mean diff +12.5 % >= 0, sd 0 (two equal runs), so
    # every gate passes (main
    # printed "check FAILED" above three True gates and no reason)
    tf = tmp_path / "t.toml"
    tf.write_text(TARGETS)
    r = traceq("check", "--targets", tf, "--store", store, "--format", "json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert [g["passed"] for g in doc["gates"]] == [True, True, True]
    bad, good = doc["rows"]
    assert bad["passed"] is False and bad["diff_pct"] == pytest.approx(-25.0)
    assert bad["failed_tests"] == ["diff_pct >= -tolerance_pct"]
    assert bad["failure"] == ("step_time 5.000 ± 0.000 ms (2 runs), target 4.000 ms: "
                              "diff -25.00 % below -tolerance_pct 0 %")
    assert good["failure"] is None and good["failed_tests"] == [] and good["sd"] == 0.0
    assert doc["failures"] == ["flat p2: " + bad["failure"]]
    t = traceq("check", "--targets", tf, "--store", store)
    assert t.returncode == 1
    assert t.stdout.startswith("check FAILED: 2 target(s), targets")
    # COLUMNS=100 is honoured in a pipe: the headline wraps at 100 columns
    assert "1 target(s) failed, every gate passed" in " ".join(t.stdout.split())
    assert "FAILED flat p2: step_time 5.000" in t.stdout
