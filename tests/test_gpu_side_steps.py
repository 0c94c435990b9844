"""Kineto writes every ProfilerStep#N twice: the host span (user_annotation) and a GPU-side
copy (gpu_user_annotation on the GPU stream, pid = device). Only the host span is a step: the
GPU-side copy has no CPU time, is never counted as a step (steps, --steps, overlap --by step,
stalls, the report's timeline), and shows in `breakdown` as one row of source gpu_annotation
named "ProfilerStep", with its GPU span as projected time (issue 31, item 12)."""
from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))
from conftest import shared_trace  # noqa: E402
from kineto_synth import Trace  # noqa: E402
from scoped import breakdown, overlap, stalls  # noqa: E402

from traceq.cli import app  # noqa: E402
from traceq.engine.scope import open_scope, step_list  # noqa: E402
from traceq.ingest import ingest  # noqa: E402

US = 1000


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """Two host steps, each with its GPU-side copy (µs):
        host ProfilerStep#1 [0, 1000)     launches k1 (call [100,110], kernel [200,300))
                                                   k2 (call [500,510], kernel [600,650))
        host ProfilerStep#2 [1000, 2000)  launches k3 (call [1100,1110], kernel [1200,1400))
        GPU  ProfilerStep#1 [150, 700)    holds k1, k2 on the stream
        GPU  ProfilerStep#2 [1150, 1500)  holds k3
    """
    d = tmp_path_factory.mktemp("gpu_side_steps")
    t = Trace()
    t.step(1, 0, 1000)
    t.step(2, 1000, 1000)
    t.launch("k1", 100, 10, 200, 100)
    t.launch("k2", 500, 10, 600, 50)
    t.launch("k3", 1100, 10, 1200, 200)
    t.gpu_annotation("ProfilerStep#1", 150, 550)
    t.gpu_annotation("ProfilerStep#2", 1150, 350)
    ingest([t.write(d / "t.pt.trace.json.gz")], store=d / "s", jobs=1)
    return d / "s"


def test_breakdown_step_row_has_the_host_cpu_time_only(store):
    rows = {(r["source"], r["name"]): r for r in breakdown(store).iter_rows(named=True)}
    assert set(rows) == {("step", "ProfilerStep"), ("gpu_annotation", "ProfilerStep")}
    host = rows[("step", "ProfilerStep")]
    # CPU = 1000 + 1000 µs (the GPU copies' 550 + 350 µs are not added); launch projection:
    # step 1 [200,650) = 450, step 2 [1200,1400) = 200; busy 100 + 50 + 200
    assert (host["domain"], host["instances"], host["cpu_total_ns"], host["gpu_ops"]) == (None, 2, 2000 * US, 3)
    assert (host["gpu_proj_ns"], host["gpu_busy_ns"]) == (650 * US, 350 * US)


def test_breakdown_gpu_side_step_shows_gpu_time_and_no_cpu_time(store):
    gpu = {(r["source"], r["name"]): r for r in breakdown(store).iter_rows(named=True)}[("gpu_annotation", "ProfilerStep")]
    # span 550 + 350 µs; ops of the stream inside the spans: k1, k2 | k3; busy 100 + 50 + 200
    assert (gpu["domain"], gpu["instances"], gpu["cpu_total_ns"], gpu["cpu_mean_ns"], gpu["gpu_busy_per_cpu"]) == \
        ("gpu", 2, None, None, None)
    assert (gpu["gpu_ops"], gpu["gpu_proj_ns"], gpu["gpu_busy_ns"]) == (3, 900 * US, 350 * US)


def test_by_step_lists_host_steps_and_by_annotation_the_gpu_side_copy(store):
    assert breakdown(store, by="step")[["source", "instances"]].rows() == [("step", 2)]
    assert breakdown(store, by="annotation")[["source", "instances"]].rows() == [("gpu_annotation", 2)]


def test_cli_headline_counts_one_step_name(store):
    res = CliRunner().invoke(app, ["breakdown", "--store", str(store), "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert "(gpu_annotation 1, step 1), 4 instances" in doc["headline"]
    assert {r["source"]: r["cpu_total_ns"] for r in doc["rows"]} == {"step": 2000 * US, "gpu_annotation": None}


def test_steps_overlap_and_stalls_see_the_host_steps_only(store):
    scope = open_scope(store)
    steps = step_list(scope.con, scope.run)
    assert steps[["step", "step_source"]].rows() == [(1, "ProfilerStep"), (2, "ProfilerStep")]
    assert (steps["end_ns"] - steps["start_ns"]).to_list() == [1000 * US, 1000 * US]
    assert overlap(store, by="step")["step"].to_list() == [1, 2]
    assert stalls(store).steps["step"].to_list() == [1, 2]
    # --steps 2 selects the host step's window: k3 only
    assert breakdown(store, steps="2", by="step")["instances"].to_list() == [1]


def test_a_trace_with_only_gpu_side_steps_has_no_profiler_steps(tmp_path):
    t = Trace()
    t.launch("k1", 100, 10, 200, 100)
    t.gpu_annotation("ProfilerStep#1", 150, 550)
    ingest([t.write(tmp_path / "t.pt.trace.json.gz")], store=tmp_path / "s", jobs=1)
    scope = open_scope(tmp_path / "s")
    assert step_list(scope.con, scope.run).height == 0
    assert breakdown(tmp_path / "s", by="step").height == 0


def test_report_timeline_draws_host_steps_only(store):
    from traceq.report.timeline import segments

    seg = segments(open_scope(store)).segments
    host = seg.filter(seg["side"] == "host")
    assert host["cat"].to_list() == ["step", "step"] and host["n"].sum() == 2
    assert sorted((host["end_ns"] - host["start_ns"]).to_list()) == [1000 * US, 1000 * US]


def test_real_trace_gpu_side_profiler_step_is_not_a_step(tmp_path):
    """amd_mi250 (HTA's ROCm trace): two host ProfilerSteps and a GPU-side ProfilerStep#1.
    Expected values from the raw JSON: the step row's CPU time is the host spans' sum; the
    GPU copy is a gpu_annotation row with its span and no CPU time."""
    path = shared_trace("kineto/hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    events = json.loads(gzip.open(path).read())["traceEvents"]
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    host = [e for e in steps if e["cat"] == "user_annotation"]
    gpu = [e for e in steps if e["cat"] == "gpu_user_annotation"]
    assert len(host) == 2 and len(gpu) == 1, "fixture: host steps and a GPU-side copy"
    ingest([path], store=tmp_path / "s", run="r")
    rows = {(r["source"], r["name"]): r for r in breakdown(tmp_path / "s").iter_rows(named=True)}
    step, copy = rows[("step", "ProfilerStep")], rows[("gpu_annotation", "ProfilerStep")]
    assert (step["instances"], step["cpu_total_ns"]) == (2, sum(round(e["dur"] * US) for e in host))
    assert (copy["instances"], copy["cpu_total_ns"], copy["gpu_proj_ns"]) == (1, None, round(gpu[0]["dur"] * US))
    assert breakdown(tmp_path / "s", by="step")["source"].to_list() == ["step"]
    scope = open_scope(tmp_path / "s")
    assert step_list(scope.con, "r").height == 2
