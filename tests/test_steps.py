"""Step selection by the numbers the tables show, from every step source (issue 8, defect 8):
`--steps A:B` (both included), `--step-pattern REGEX`, `--skip-first N`."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from traceq.engine.scope import open_scope, parse_steps
from traceq.cli import app
from traceq.errors import TraceqError
from traceq.ingest import ingest
from traceq.store import Store

from conftest import SAMPLES, shared_trace
from scoped import stalls


def stall_steps(store, run, *args) -> list[tuple[int, str]]:
    r = CliRunner().invoke(app, ["stalls", "--store", str(store), "--run", run, "--table", "steps", "-f", "json", *args])
    assert r.exit_code == 0, r.output
    return [(x["step"], x["step_source"]) for x in json.loads(r.output)["rows"]]


def test_parse_steps_is_inclusive_step_numbers():
    assert parse_steps("5:10") == (5, 10) and parse_steps("7") == (7, 7)
    assert parse_steps("5:") == (5, None) and parse_steps(":8") == (None, 8) and parse_steps(None) is None
    for bad in ("3-8", "-1", "a:b", "9:3"):
        with pytest.raises(TraceqError, match="--steps"):
            parse_steps(bad)


@pytest.fixture(scope="module")
def tb_store(tmp_path_factory):
    """TensorBoard-plugin ResNet-50 trace: ProfilerStep#5 .. #10."""
    store = tmp_path_factory.mktemp("tb") / "s"
    ingest([shared_trace("kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz")], store, run="tb")
    return store


def test_profiler_steps_by_their_numbers(tb_store):
    assert stall_steps(tb_store, "tb") == [(n, "ProfilerStep") for n in range(5, 11)]
    assert [s for s, _ in stall_steps(tb_store, "tb", "--steps", "7:8")] == [7, 8]
    assert [s for s, _ in stall_steps(tb_store, "tb", "--steps", "10:20")] == [10]   # failed before: 0-based slice
    assert [s for s, _ in stall_steps(tb_store, "tb", "--skip-first", "2")] == [7, 8, 9, 10]
    assert [s for s, _ in stall_steps(tb_store, "tb", "--skip-first", "2", "--steps", ":8")] == [7, 8]


def test_steps_window_of_gpu_analyses(tb_store):
    """hotspots --steps 10:20 counts exactly the GPU ops that start inside ProfilerStep#10."""
    con = Store(tb_store).connect()
    lo, hi = con.execute("SELECT start_ns, end_ns FROM regions WHERE source = 'step' AND step = 10 "
                         "AND domain IS NULL").fetchone()
    n = con.execute("SELECT count(*) FROM gpu_ops WHERE kind <> 'sync' AND start_ns >= ? AND start_ns < ?",
                    [lo, hi]).fetchone()[0]
    r = CliRunner().invoke(app, ["hotspots", "--store", str(tb_store), "--steps", "10:20", "-n", "0", "-f", "json"])
    assert r.exit_code == 0, r.output
    assert sum(x["count"] for x in json.loads(r.output)["rows"]) == n > 0


def test_selecting_no_step_names_the_numbers_there_are(tb_store):
    with pytest.raises(TraceqError, match=r"--steps 20:30: selects no step of run 'tb' rank 0 \(ProfilerStep steps 5–10\)"):
        open_scope(tb_store, "tb", steps="20:30")
    with pytest.raises(TraceqError, match="--skip-first 6: selects no step"):
        open_scope(tb_store, "tb", skip_first=6)
    with pytest.raises(TraceqError, match="--step-pattern '\\(': not a valid regular expression"):
        open_scope(tb_store, "tb", step_pattern="(")


def test_skip_first_drops_the_warm_up_step_of_the_sample(tmp_path):
    store = tmp_path / "s"
    ingest([SAMPLES / "slow_dataloader"], store)
    assert [s for s, _ in stall_steps(store, "slow_dataloader")] == [2, 3, 4, 5, 6, 7]
    assert [s for s, _ in stall_steps(store, "slow_dataloader", "--skip-first", "1")] == [3, 4, 5, 6, 7]
    assert [s for s, _ in stall_steps(store, "slow_dataloader", "--steps", "3:4")] == [3, 4]
    # the data-wait share is over the kept steps only
    every = stalls(store, run="slow_dataloader").steps
    kept = stalls(store, run="slow_dataloader", skip_first=1)
    tail = every.filter(every["step"] >= 3)
    assert kept.data_wait_pct() == pytest.approx(100 * tail["data_wait_ns"].sum() / tail["step_ns"].sum())


def test_timer_batch_steps_are_numbered_from_zero(tmp_path):
    store = tmp_path / "s"
    ingest([SAMPLES / "timer_sample.jsonl"], store, run="t")
    got = stall_steps(store, "t")
    assert got == [(n, "BATCH") for n in range(40)]
    assert [s for s, _ in stall_steps(store, "t", "--skip-first", "5", "--steps", ":7")] == [5, 6, 7]


def test_nvtx_ranges_matching_the_step_pattern(tmp_path):
    """nsys sample: three NVTX `step` ranges without numbers -> steps 0, 1, 2."""
    store = tmp_path / "s"
    ingest([SAMPLES / "nsys_sample.sqlite"], store, run="n")
    assert stall_steps(store, "n", "--step-pattern", "^step$") == [(0, "pattern"), (1, "pattern"), (2, "pattern")]
    con = Store(store).connect()
    spans = con.execute("SELECT start_ns, end_ns FROM regions WHERE name = 'step' ORDER BY start_ns").fetchall()
    scope = open_scope(store, "n", steps="1", step_pattern="^step$")
    assert scope.con.execute("SELECT lo_ns, hi_ns FROM scope_window").fetchall() == [spans[1]]
    with pytest.raises(TraceqError, match="has no steps .*no region matches --step-pattern 'nope'"):
        open_scope(store, "n", steps="1", step_pattern="nope")


def _annotated_trace() -> dict:
    """ProfilerSteps 0-1 and, inside them, user annotations 'train step 12', 'train step 13';
    DataLoader calls on another run (no ProfilerStep) delimit iterations."""
    def x(cat, name, ts, dur, tid=1):
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": 1000 + ts, "dur": dur, "args": {}}
    return {"schemaVersion": 1, "traceEvents": [
        x("user_annotation", "ProfilerStep#0", 0, 100), x("user_annotation", "ProfilerStep#1", 100, 100),
        x("user_annotation", "train step 12", 10, 80), x("user_annotation", "train step 13", 110, 80),
        x("cpu_op", "aten::mm", 20, 10), x("cpu_op", "aten::mm", 120, 10)]}


def test_step_pattern_takes_the_numbers_in_the_names_and_beats_profiler_steps(tmp_path):
    f = tmp_path / "a.json"
    f.write_text(json.dumps(_annotated_trace()))
    store = tmp_path / "s"
    ingest([f], store, run="a")
    assert stall_steps(store, "a") == [(0, "ProfilerStep"), (1, "ProfilerStep")]
    assert stall_steps(store, "a", "--step-pattern", "^train step") == [(12, "pattern"), (13, "pattern")]
    assert stall_steps(store, "a", "--step-pattern", "^train step", "--steps", "13") == [(13, "pattern")]


def test_dataloader_iterations_are_steps_when_nothing_else_is(tmp_path):
    def x(cat, name, ts, dur):
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": 1000 + ts, "dur": dur, "args": {}}
    ev = [x("cpu_op", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t, 30) for t in (0, 100, 200)]
    ev += [x("cpu_op", "aten::mm", t + 40, 50) for t in (0, 100, 200)]
    f = tmp_path / "d.json"
    f.write_text(json.dumps({"schemaVersion": 1, "traceEvents": ev}))
    store = tmp_path / "s"
    ingest([f], store, run="d")
    assert stall_steps(store, "d") == [(0, "DataLoader"), (1, "DataLoader"), (2, "DataLoader")]
    res = CliRunner().invoke(app, ["stalls", "--store", str(store), "--table", "steps", "-f", "json", "--skip-first", "1"])
    rows = json.loads(res.output)["rows"]
    # iterations [100,200) and [200,290): 30 µs of data wait each
    assert [(r["step"], r["step_ns"], r["data_wait_ns"]) for r in rows] == [(1, 100_000, 30_000), (2, 90_000, 30_000)]
