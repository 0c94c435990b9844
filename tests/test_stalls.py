"""`stalls`: GPU idle gaps by host cause, and per-step data-loading wait.

Real Kineto traces are checked against an independent plain-Python computation over the
raw JSON; synthetic stores pin the priority split, thresholds, step definitions, timer-only
and CPU-only runs, and the CLI.
"""
from __future__ import annotations

import gzip
import json
import math
import re
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import SAMPLES, shared_trace, make_store
from scoped import stalls
from typer.testing import CliRunner

from traceq.advice.stall_advice import advice
from traceq.store import Store


# ---------------------------------------------------------------- helpers
def ingest(path: Path, store_dir: Path, run: str = "t") -> Store:
    from traceq.ingest import ingest as do_ingest

    do_ingest([path], store_dir, run=run)
    return Store(store_dir)


def union(ivs):
    out = []
    for s, e in sorted(ivs):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [tuple(x) for x in out]


def overlap(a, b) -> int:
    """|a ∩ b| for two lists of disjoint intervals (quadratic; fine for tests)."""
    return sum(max(0, min(e1, e2) - max(s1, s2)) for s1, e1 in a for s2, e2 in b)


def intersect(a, b):
    return [(max(s1, s2), min(e1, e2)) for s1, e1 in a for s2, e2 in b if min(e1, e2) > max(s1, s2)]


# ---------------------------------------------------------------- Kineto: independent per-step numbers
def _ns(v) -> int:
    x = float(v)
    whole = math.floor(x)
    return int(whole) * 1000 + round((x - whole) * 1000)


def kineto_steps(path: Path, min_gap_ns: int = 50_000):
    """Per step (start_ns, step_ns, data_wait_ns, gpu_idle_ns, gpu_idle_waiting_ns), from the raw JSON.

    Steps = ProfilerStep#N; without them, the iterations between consecutive DataLoader
    __next__ starts (the last one until the end of the last host event). Data wait =
    |∪ DataLoader calls ∩ step|; GPU idle = gaps >= min_gap in the union of the device's
    kernels/copies/memsets, ∩ step; idle waiting = that ∩ DataLoader calls.
    """
    doc = json.loads(gzip.open(path).read())
    steps, loads, gpu, host_end = [], [], defaultdict(list), 0
    for e in doc["traceEvents"]:
        if e.get("ph") != "X" or "ts" not in e:
            continue
        cat, name = (e.get("cat") or "").lower(), e.get("name") or ""
        s = _ns(e["ts"])
        dur = float(e.get("dur", 0))
        end = s + (round(dur * 1000) if dur > 0 else 0)
        if cat in ("kernel", "gpu_memcpy", "memcpy", "gpu_memset", "memset"):
            gpu[(e.get("args") or {}).get("device", e.get("pid"))].append((s, end))
            continue
        if cat in ("gpu_user_annotation", "cuda_sync", "trace"):
            continue
        host_end = max(host_end, end)
        if re.fullmatch(r"ProfilerStep#\d+", name):
            steps.append((s, end))
        elif name.startswith("enumerate(DataLoader)#"):
            loads.append((s, end, e["tid"]))
    if not steps:   # DataLoader iterations on the thread with the most calls
        by_tid = defaultdict(list)
        for s, end, tid in loads:
            by_tid[tid].append(s)
        starts = sorted(max(by_tid.values(), key=len))
        steps = [(a, b) for a, b in zip(starts, starts[1:] + [host_end])]
    steps.sort()
    data = union((s, e) for s, e, _ in loads)
    gaps = []
    for ivs in gpu.values():
        u = union(ivs)
        gaps += [(a[1], b[0]) for a, b in zip(u, u[1:]) if b[0] - a[1] >= min_gap_ns]
    idle_wait = intersect(gaps, data)
    out = []
    for i, (s, e) in enumerate(steps):
        cut = [(s, min(e, steps[i + 1][0]) if i + 1 < len(steps) else e)]
        out.append((s, e - s, overlap(data, cut), overlap(gaps, cut), overlap(idle_wait, cut)))
    return out


@pytest.mark.parametrize("rel", ["kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz",
                                 "kineto/param/resnet_kineto.json.gz"])
def test_kineto_per_step_dataloader_wait_matches_raw_json(rel, tmp_path):
    path = shared_trace(rel)
    expected = kineto_steps(path)
    res = stalls(ingest(path, tmp_path / "store"))
    got = [(r["start_ns"], r["step_ns"], r["data_wait_ns"], r["gpu_idle_ns"], r["gpu_idle_waiting_ns"])
           for r in res.steps.iter_rows(named=True)]
    assert got == expected
    assert sum(x[2] for x in expected) > 0
    src = "DataLoader" if "param" in rel else "ProfilerStep"
    assert set(res.steps["step_source"]) == {src}
    assert res.steps["data_wait_pct"].to_list() == pytest.approx([100 * x[2] / x[1] for x in expected])


@pytest.mark.parametrize("rel", ["kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz",
                                 "kineto/param/resnet_kineto.json.gz"])
def test_data_steps_without_gaps_equal_the_raw_json(rel, tmp_path):
    """compare/model/check's light path (no GPU gap analysis) gives the same steps and data
    wait as the raw JSON, computed independently."""
    from traceq.engine.scope import open_scope
    from traceq.engine.stall_attribution import data_steps

    path = shared_trace(rel)
    st = ingest(path, tmp_path / "store")
    got = data_steps(open_scope(st, "t", only_run=True))
    assert [(r["start_ns"], r["step_ns"], r["data_wait_ns"]) for r in got.iter_rows(named=True)] == \
        [x[:3] for x in kineto_steps(path)]
    assert got.columns == ["rank", "step", "step_source", "start_ns", "step_ns", "data_wait_ns", "data_wait_pct"]


def test_kineto_gap_causes_add_up_to_the_gaps(tmp_path):
    res = stalls(ingest(shared_trace("kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz"), tmp_path / "s"))
    g = res.gaps
    parts = ["data_ns", "comm_ns", "sync_ns", "copy_ns", "memory_ns", "launch_ns", "host_ns", "unattributed_ns"]
    assert (sum(g[c] for c in parts) == g["gap_ns"]).all()
    assert (g["gap_ns"] >= 50_000).all()
    assert res.causes["idle_ns"].sum() == g["gap_ns"].sum()
    assert res.causes["share_pct"].sum() == pytest.approx(100)
    assert res.data_bound()   # num_workers=0 sample: the TB plugin flags it too


# ---------------------------------------------------------------- repo sample traces
def _sample(name: str) -> Path:
    files = sorted((SAMPLES / name).glob("*.pt.trace.json.gz"))
    if not files:
        pytest.skip(f"sample_traces/{name} not generated yet")
    return SAMPLES / name


def test_slow_dataloader_sample_shows_advice(tmp_path):
    res = stalls(ingest(_sample("slow_dataloader"), tmp_path / "s", run="slow"))
    assert res.steps.height > 0 and res.data_bound()
    lines = advice(res)
    text = " ".join(lines)
    for word in ("num_workers", "pin_memory", "prefetch_factor", "persistent_workers", "cache"):
        assert word in text


def test_fast_dataloader_sample_shows_no_advice(tmp_path):
    res = stalls(ingest(_sample("fast_dataloader"), tmp_path / "s", run="fast"))
    assert res.steps.height > 0 and not res.data_bound()
    assert not [a for a in advice(res) if "data loading" in a]


# ---------------------------------------------------------------- synthetic: attribution
def _op(s, e, device=0, kind="kernel", corr=None):
    return {"pid": 1, "device": device, "stream": 7, "kind": kind, "name": "k", "start_ns": s, "end_ns": e,
            "correlation": corr}


def _api(s, e, name="cudaLaunchKernel", kind="runtime", tid=1, corr=None):
    return {"pid": 1, "tid": tid, "kind": kind, "name": name, "start_ns": s, "end_ns": e, "correlation": corr}


def _region(name, s, e, source="annotation", tid=1, **kw):
    return {"pid": 1, "tid": tid, "source": source, "name": name, "start_ns": s, "end_ns": e, **kw}


@pytest.fixture
def gap_store(tmp_path):
    """GPU busy [0,100k] and [300k,400k] -> one 200 µs gap [100k, 300k]; a 20 µs gap
    [400k, 420k] (below the 50 µs default); busy [420k, 500k].
    In the big gap: DataLoader [90k, 150k] (50k inside), cudaStreamSynchronize [140k, 200k]
    (50k after data), blocking cudaMemcpy [190k, 210k] (10k new), cudaLaunchKernel
    [205k, 240k] (30k new), cudaStreamWaitEvent [250k, 260k] (does not block: launch-bound,
    10k), rest 50k other — including cudaEventQuery [260k, 280k] on thread 99, which never
    launches GPU work (a watchdog), so it does not make the gap launch-bound."""
    gpu = [_op(0, 100_000, corr=1), _op(300_000, 400_000, corr=2), _op(420_000, 500_000, corr=3),
           _op(150_000, 160_000, kind="sync", corr=4)]
    host = [_api(140_000, 200_000, "cudaStreamSynchronize", "sync_api", corr=4), _api(190_000, 210_000, "cudaMemcpy"),
            _api(205_000, 240_000, corr=2), _api(250_000, 260_000, "cudaStreamWaitEvent", "sync_api"),
            _api(410_000, 415_000, corr=3), _api(260_000, 280_000, "cudaEventQuery", tid=99, corr=99)]
    regions = [_region("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", 90_000, 150_000, "dataloader"),
               _region("ProfilerStep#1", 0, 250_000, "step", step=1), _region("ProfilerStep#2", 250_000, 500_000, "step", step=2)]
    return make_store(tmp_path / "s", gpu_ops=gpu, host_ops=host, regions=regions)


def test_gap_time_is_split_by_priority(gap_store):
    res = stalls(gap_store)
    assert res.gaps.height == 1
    g = res.gaps.row(0, named=True)
    assert (g["start_ns"], g["end_ns"]) == (100_000, 300_000)
    # the blocking cudaMemcpy's 10k after the sync ends is blocking_copy; no cpu ops: no host_compute
    assert (g["data_ns"], g["comm_ns"], g["sync_ns"], g["copy_ns"], g["memory_ns"], g["launch_ns"], g["host_ns"],
            g["unattributed_ns"]) == (50_000, 0, 50_000, 10_000, 0, 40_000, 0, 50_000)
    assert g["cause"] == "data_loading"      # ties (data 50k = sync 50k = rest 50k) go to the earlier cause
    c = {r["cause"]: r for r in res.causes.iter_rows(named=True)}
    assert list(c) == ["data_loading", "communication", "synchronization", "blocking_copy", "memory_management",
                       "launch_overhead", "host_compute", "unattributed"]
    assert c["data_loading"]["gaps_main"] == 1 and c["synchronization"]["gaps"] == 1
    assert c["data_loading"]["idle_pct"] == pytest.approx(100 * 50_000 / 500_000)
    assert c["unattributed"]["share_pct"] == pytest.approx(25)


def test_min_gap_threshold_and_per_step_split(gap_store):
    res = stalls(gap_store, min_gap_us=10)
    assert res.gaps.height == 2
    s = {r["step"]: r for r in res.steps.iter_rows(named=True)}
    # step 1 [0, 250k]: data [90k,150k]; idle [100k, 250k]; idle ∩ data = [100k, 150k]
    assert (s[1]["data_wait_ns"], s[1]["gpu_idle_ns"], s[1]["gpu_idle_waiting_ns"]) == (60_000, 150_000, 50_000)
    # step 2 [250k, 500k]: idle [250k, 300k] + [400k, 420k]
    assert (s[2]["data_wait_ns"], s[2]["gpu_idle_ns"], s[2]["gpu_idle_waiting_ns"]) == (0, 70_000, 0)
    assert s[1]["data_wait_pct"] == pytest.approx(24.0) and s[1]["gpu_idle_waiting_pct"] == pytest.approx(20.0)


def test_steps_window_clips_gaps(gap_store):
    res = stalls(gap_store, steps="2")   # step numbers, as the steps table shows them
    assert res.steps["step"].to_list() == [2]
    assert res.gaps.height == 0   # [250k, 300k] has no busy interval before it inside the window


def test_data_pattern_marks_regions_as_data_loading(gap_store, tmp_path):
    res = stalls(gap_store, data_pattern="^ProfilerStep#2$")
    g = res.gaps.row(0, named=True)
    assert g["data_ns"] == 50_000 + 50_000   # DataLoader part + [250k, 300k]
    from traceq.errors import TraceqError

    with pytest.raises(TraceqError, match="--data-pattern"):
        stalls(gap_store, data_pattern="(unclosed")


def test_each_device_has_its_own_gaps(tmp_path):
    gpu = [_op(0, 100_000, 0), _op(200_000, 300_000, 0), _op(0, 300_000, 1)]
    res = stalls(make_store(tmp_path / "s", gpu_ops=gpu))
    assert res.gaps[["device", "gap_ns"]].rows() == [(0, 100_000)]
    assert res.causes.filter(res.causes["cause"] == "unattributed")["idle_pct"][0] == pytest.approx(100 * 100_000 / 600_000)


# ---------------------------------------------------------------- synthetic: steps
def test_cpu_only_trace_reports_data_wait_share_and_advice(tmp_path):
    regions = [_region(f"ProfilerStep#{i}", 1000 * i, 1000 * i + 1000, "step", step=i) for i in range(3)]
    regions += [_region("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 1000 * i, 1000 * i + 400, "dataloader")
                for i in range(3)]
    res = stalls(make_store(tmp_path / "s", regions=regions))
    assert res.causes.height == 0
    assert res.steps["data_wait_pct"].to_list() == pytest.approx([40, 40, 40])
    assert res.steps["gpu_idle_ns"].null_count() == 3
    assert res.single_process_loader and "num_workers=0" in advice(res)[0]


def test_without_profiler_steps_dataloader_calls_delimit_iterations(tmp_path):
    dl = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"
    regions = [_region(dl, 0, 10, "dataloader"), _region(dl, 100, 130, "dataloader"), _region(dl, 250, 255, "dataloader"),
               _region(dl, 5, 6, "dataloader", tid=2)]          # another thread: not the iteration thread
    host = [_api(0, 400, "aten::whatever", "cpu_op")]
    res = stalls(make_store(tmp_path / "s", regions=regions, host_ops=host))
    st = res.steps
    assert st["step_source"].unique().to_list() == ["DataLoader"]
    assert st[["step", "start_ns", "step_ns", "data_wait_ns"]].rows() == [(0, 0, 100, 10), (1, 100, 150, 30), (2, 250, 150, 5)]


def test_timer_only_run_reports_io_share_of_each_batch(tmp_path):
    t = dict(source="timer")
    regions = [_region("EPOCH", 0, 1000, **t),
               _region("BATCH", 0, 100, **t), _region("IO", 0, 30, **t),
               _region("BATCH", 100, 300, **t), _region("IO", 100, 110, **t), _region("FORWARD", 110, 200, **t)]
    res = stalls(make_store(tmp_path / "s", regions=regions))
    assert res.steps["step_source"].unique().to_list() == ["BATCH"]
    assert res.steps[["step", "step_ns", "data_wait_ns"]].rows() == [(0, 100, 30), (1, 200, 10)]
    assert res.steps["data_wait_pct"].to_list() == pytest.approx([30, 5])
    assert res.data_wait_pct() == pytest.approx(100 * 40 / 300) and res.data_bound()


def test_trace_without_any_steps_is_one_step(tmp_path):
    res = stalls(make_store(tmp_path / "s", gpu_ops=[_op(0, 10), _op(100_000, 100_010)], host_ops=[_api(0, 50)]))
    assert res.steps[["step_source", "step_ns"]].rows() == [("trace", 100_010)]
    assert res.gaps.height == 1


# ---------------------------------------------------------------- CLI
def test_cli_stalls_table_headlines_and_advice(gap_store):
    from traceq.cli import app

    res = CliRunner().invoke(app, ["stalls", "--store", str(gap_store.path), "--min-gap-us", "10"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    # "Fix first" is diagnose's first finding, the bound's: the 60 µs blocked in sync + blocking
    # copy. The big gap's 50 µs with nothing recorded lie after the next kernel's launch call
    # returned (240 µs; the kernel runs at 300): queued, not the host's
    assert lines[0].startswith("Fix first: remove_syncs (up to 0.03 ms/step, 0.06 ms in all); +2 more — ")
    assert lines[1].startswith("run syn: DataLoader wait 12.0 % of step time (2 steps, mean step 0.2 ms) — data-bound")
    assert any(line.startswith("GPU idle ") for line in lines)
    assert any("num_workers" in line for line in lines)


def test_cli_stalls_json_and_csv(gap_store):
    from traceq.cli import app

    runner = CliRunner()
    doc = json.loads(runner.invoke(app, ["stalls", "--store", str(gap_store.path), "-f", "json"]).output)
    assert {"rows", "causes", "headline", "units"} <= set(doc) and doc["causes"][0]["cause"] == "data_loading"
    first, line = doc["headline"].split("\n")
    assert doc["rows"][0]["step_ns"] and first.startswith("Fix first: remove_syncs") and line.startswith("run syn: DataLoader wait")
    res = runner.invoke(app, ["stalls", "--store", str(gap_store.path), "-f", "csv"])   # steps, then "# causes"
    assert res.exit_code == 0 and res.output.splitlines()[0].startswith("run,rank,step,step_source")
    assert "\n# causes\nrun,cause," in res.output
    res = runner.invoke(app, ["stalls", "--store", str(gap_store.path), "-f", "csv", "--table", "steps"])
    assert res.output.splitlines()[0].startswith("run,rank,step,step_source,start_ns,step_ns,data_wait_ns")
    rows = json.loads(runner.invoke(app, ["stalls", "--store", str(gap_store.path), "-f", "json", "--table", "gaps"]).output)["rows"]
    assert rows[0]["cause"] == "data_loading"


# ---------------------------------------------------------------- traceq timer log, end to end
def test_timer_log_io_share_per_batch_and_timer_breakdown_match_the_log(tmp_path):
    """A real traceq.timer JSONL log (CPU clock): per BATCH, the IO time inside it, and the
    per-key statistics, both recomputed here from the raw log lines."""
    import importlib.util
    import statistics
    import time

    if importlib.util.find_spec("traceq.ingest.timers.log") is None:
        pytest.skip("timer-log ingestor not available")
    from traceq import timer
    from scoped import timer_breakdown

    log = tmp_path / "run.jsonl"
    tmr = timer.CPUGPUTimer(log=str(log))
    for b in range(4):
        tmr.start(timer.TimeType.BATCH)
        tmr.start(timer.TimeType.IO)
        time.sleep(0.001 * (b + 1))
        tmr.end(timer.TimeType.IO)
        tmr.start(timer.TimeType.FORWARD)
        time.sleep(0.002)
        tmr.end(timer.TimeType.FORWARD)
        tmr.end(timer.TimeType.BATCH)
    tmr.complete_all()
    tmr.close()
    recs = [json.loads(line) for line in log.read_text().splitlines()[1:]]
    regions = [r for r in recs if "key" in r]
    batches = sorted((r["start_ns"], r["end_ns"]) for r in regions if r["key"] == "BATCH")
    ios = [(r["start_ns"], r["end_ns"]) for r in regions if r["key"] == "IO"]
    expected = [(e - s, overlap(ios, [(s, e)])) for s, e in batches]

    st = ingest(log, tmp_path / "s")
    res = stalls(st)
    assert res.steps["step_source"].unique().to_list() == ["BATCH"]
    assert res.steps[["step_ns", "data_wait_ns"]].rows() == expected
    tb = {r["key"]: r for r in timer_breakdown(st).iter_rows(named=True)}
    durs = [e - s for s, e in batches]
    b = tb["BATCH"]
    assert (b["count"], b["cpu_total_ns"], b["cpu_min_ns"], b["cpu_max_ns"]) == (4, sum(durs), min(durs), max(durs))
    assert b["cpu_median_ns"] == pytest.approx(statistics.median(durs))
    assert b["cpu_stdev_ns"] == pytest.approx(statistics.stdev(durs))
