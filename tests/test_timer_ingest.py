"""Timer-log ingest: traceq's JSONL log -> regions, Deep500 stats text -> timer_stats."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest

from conftest import SAMPLES
from traceq import timer
from traceq.errors import BadInput
from traceq.ingest import ingest
from traceq.ingest.timers.deep500 import read_stats
from traceq.ingest.timers.log import read_log
from traceq.store import Store
from traceq.timer import TimeType

STATS_COLS = "min_s, mean_s, median_s, max_s, stdev_s"


def query(store_dir, sql):
    return Store(store_dir).connect().execute(sql).fetchall()


def header(**extra) -> dict:
    h = {"traceq_timer": 1, "epoch_ns": 1_700_000_000_000_000_000, "perf_ns": 5_000, "host": "node7",
         "pid": 100, "rank": 3, "world_size": 4}
    h.update(extra)
    return h


def write_jsonl(path: Path, head: dict, records: list[dict], tail: bytes = b"") -> Path:
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in [head, *records]) + tail)
    return path


def region(key, s, e, pid=100, tid=100, **kw) -> dict:
    return {"key": key, "start_ns": s, "end_ns": e, "pid": pid, "tid": tid, **kw}


# --------------------------------------------------------------- Deep500 stats text
CPUGPU_TEXT = """\
CPU
BATCH
min: 0.01234 mean: 0.01300 median: 0.01290 max: 0.01500 stdev: 0.00050
IO
min: 0.00100 mean: 0.00250 median: 0.00200 max: 0.00900 stdev: 0.00110
data load
min: 1.50000 mean: 1.50000 median: 1.50000 max: 1.50000 stdev: 0.00000
---
GPU
BATCH
min: 0.01100 mean: 0.01200 median: 0.01190 max: 0.01400 stdev: 0.00040
---
"""
CPUGPU_ROWS = {
    ("BATCH", "cpu"): (0.01234, 0.01300, 0.01290, 0.01500, 0.00050),
    ("IO", "cpu"): (0.00100, 0.00250, 0.00200, 0.00900, 0.00110),
    ("data load", "cpu"): (1.5, 1.5, 1.5, 1.5, 0.0),
    ("BATCH", "gpu"): (0.01100, 0.01200, 0.01190, 0.01400, 0.00040),
}


def test_deep500_stats_roundtrip_through_the_store(tmp_path, store_dir):
    path = tmp_path / "job_stats.txt"
    path.write_text(CPUGPU_TEXT)
    [res] = ingest([path], store=Store(store_dir))
    assert res.format == "deep500_stats" and res.counts["timer_stats"] == 4 and res.warnings == []
    rows = query(store_dir, f"select key, clock, {STATS_COLS} from timer_stats")
    assert {(r[0], r[1]): tuple(r[2:]) for r in rows} == CPUGPU_ROWS
    assert query(store_dir, "select run, source_format from runs") == [("job_stats", "deep500_stats")]


def test_plain_timer_layout_is_the_cpu_clock(tmp_path, store_dir):
    path = tmp_path / "plain.txt"
    path.write_text("EPOCH\nmin: 2.00000 mean: 2.50000 median: 2.50000 max: 3.00000 stdev: 0.70711\n---\n")
    ingest([path], store=store_dir)
    assert query(store_dir, f"select key, clock, {STATS_COLS} from timer_stats") == [
        ("EPOCH", "cpu", 2.0, 2.5, 2.5, 3.0, 0.70711)]


def test_stats_written_by_traceq_timer_roundtrip(tmp_path, store_dir):
    """save_all_time_stats -> ingest -> same numbers as get_time_stats (printed with 5 decimals)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        t = timer.CPUGPUTimer()
        for _ in range(5):
            t.start(TimeType.BATCH, gpu=True)
            t.start("GPU")                  # a free-form key that looks like a section title
            sum(range(20_000))
            t.end("GPU")
            t.end(TimeType.BATCH, gpu=True)
    path = tmp_path / "stats.txt"
    t.save_all_time_stats(str(path))
    ingest([path], store=store_dir)
    rows = {(r[0], r[1]): r[2:] for r in query(store_dir, f"select key, clock, {STATS_COLS} from timer_stats")}
    assert set(rows) == {("BATCH", "cpu"), ("GPU", "cpu")} | (
        {("BATCH", "gpu")} if t.get_time(TimeType.BATCH, gpu=True) else set())
    for key in ("BATCH", "GPU"):
        want = tuple(round(v, 5) for v in t.get_time_stats(key))
        assert rows[(key, "cpu")] == pytest.approx(want, abs=1e-12)


def test_stats_printed_twice_keeps_the_last(tmp_path):
    block = "CPU\nIO\nmin: {0} mean: {0} median: {0} max: {0} stdev: 0.0\n---\nGPU\n---\n"
    path = tmp_path / "twice.txt"
    path.write_text(block.format(1.0) + block.format(2.0))
    parsed = read_stats(path)
    assert parsed.tables["timer_stats"].to_pylist() == [
        {"key": "IO", "clock": "cpu", "min_s": 2.0, "mean_s": 2.0, "median_s": 2.0, "max_s": 2.0, "stdev_s": 0.0}]
    assert any("more than once" in w for w in parsed.warnings)


def test_stats_truncated_last_line_is_skipped_with_a_warning(tmp_path):
    path = tmp_path / "cut.txt"
    path.write_text(CPUGPU_TEXT.split("GPU\n")[0] + "GPU\nBATCH\nmin: 0.011 mean: 0.0")
    parsed = read_stats(path)
    assert len(parsed.tables["timer_stats"]) == 3
    assert any("truncated" in w for w in parsed.warnings)


@pytest.mark.parametrize("text,problem", [
    ("min: 1 mean: 1 median: 1 max: 1 stdev: 0\n---\n", "line 1: stats line without a key"),
    ("IO\nmin: 1 mean: x median: 1 max: 1 stdev: 0\n---\n", "line 2: mean value 'x' is not a number"),
    ("IO\nmin: 1 mean: 1 max: 1 stdev: 0\n---\n", "line 2: expected 'min: x mean: x"),
    ("hello\nworld\nIO\nmin: 1 mean: 1 median: 1 max: 1 stdev: 0\n---\n", "line 1: unexpected 'hello'"),
    ("", "empty file"),
])
def test_malformed_stats_raise_bad_input(tmp_path, text, problem):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(BadInput, match=problem) as err:
        read_stats(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


# ---------------------------------------------------------------------- JSONL log
def run_pattern(path: Path, batches: int = 3) -> timer.CPUGPUTimer:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        t = timer.CPUGPUTimer(log=path)
        t.start(TimeType.EPOCH)
        t.start(TimeType.BATCH, gpu=True)
        t.start(TimeType.IO)
        for i in range(batches):
            t.end(TimeType.IO)
            t.start(TimeType.FORWARD, gpu=True)
            t.end(TimeType.FORWARD, gpu=True)
            t.start(TimeType.BACKWARD, gpu=True)
            t.end(TimeType.BACKWARD, gpu=True)
            t.end(TimeType.BATCH, gpu=True)
            if i != batches - 1:
                t.start(TimeType.BATCH, gpu=True)
                t.start(TimeType.IO)
        t.end(TimeType.EPOCH)
        t.complete_all()
    return t


def test_log_ingests_as_timer_regions_on_the_epoch_clock(tmp_path, store_dir, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    log = tmp_path / "train.jsonl"
    t = run_pattern(log, batches=3)
    t.close()
    lines = log.read_text().splitlines()
    head = json.loads(lines[0])
    recs = [json.loads(x) for x in lines[1:] if '"key"' in x]

    [res] = ingest([log], store=store_dir)
    assert res.format == "timer_log" and res.rank == 1 and res.counts["regions"] == len(recs) == 13
    rows = query(store_dir, "select source, name, start_ns, end_ns, pid, tid, depth, gpu_dur_ns from regions "
                            "order by start_ns, depth")
    assert {r[0] for r in rows} == {"timer"}
    offset = head["epoch_ns"] - head["perf_ns"]
    assert sorted((r[1], r[2], r[3], r[4], r[5]) for r in rows) == sorted(
        (x["key"], x["start_ns"] + offset, x["end_ns"] + offset, x["pid"], x["tid"]) for x in recs)
    depth = {name: {d for n, d in ((r[1], r[6]) for r in rows) if n == name} for name in {r[1] for r in rows}}
    assert depth == {"EPOCH": {0}, "BATCH": {1}, "IO": {2}, "FORWARD": {2}, "BACKWARD": {2}}
    assert query(store_dir, "select rank, world_size, host, clock_offset_ns, format_version from runs") == [
        (1, 2, head["host"], 0, "1")]


def test_gpu_durations_are_kept(tmp_path, store_dir):
    info = {"gpu_timing": "cuda_events", "pid": 100, "device_index": 1, "device_name": "NVIDIA H100",
            "sm_count": 132, "memory_bytes": 80 * 2**30}
    log = write_jsonl(tmp_path / "gpu.jsonl", header(), [
        info,
        region("FORWARD", 10_000, 20_000, gpu=0),
        region("IO", 20_000, 21_000),
        region("BACKWARD", 21_000, 30_000, gpu=1),
        {"gpu_id": 0, "gpu_dur_ns": 45_000, "pid": 100},
        {"gpu_id": 1, "gpu_dur_ns": 80_000, "pid": 100},
        region("FORWARD", 31_000, 32_000, gpu=2),          # resolved after the crash: never
    ])
    parsed = read_log(log)
    assert any("1 GPU-timed regions have no GPU duration" in w for w in parsed.warnings)
    ingest([log], store=store_dir)
    rows = query(store_dir, "select name, start_ns, gpu_dur_ns, device from regions order by start_ns")
    base = 1_700_000_000_000_000_000 - 5_000
    assert rows == [("FORWARD", base + 10_000, 45_000, 1), ("IO", base + 20_000, None, None),
                    ("BACKWARD", base + 21_000, 80_000, 1), ("FORWARD", base + 31_000, None, 1)]
    devices = json.loads(query(store_dir, "select devices from runs")[0][0])
    assert devices == [{"id": 1, "name": "NVIDIA H100", "sm_count": 132, "memory_bytes": 80 * 2**30}]


def test_truncated_last_line_is_skipped_with_a_warning(tmp_path, store_dir):
    log = tmp_path / "crashed.jsonl"
    run_pattern(log, batches=2).close()
    n = sum(1 for x in log.read_text().splitlines() if '"key"' in x)
    with open(log, "ab") as f:
        f.write(b'{"key":"BATCH","start_ns":12345,"end_')        # the writer died mid-record
    parsed = read_log(log)
    assert parsed.tables["regions"].num_rows == n
    assert any("truncated" in w for w in parsed.warnings)
    [res] = ingest([log], store=store_dir)
    assert res.counts["regions"] == n
    assert any("truncated" in w for w in json.loads(query(store_dir, "select warnings from runs")[0][0]))


def test_secrets_never_reach_the_store(tmp_path, store_dir, monkeypatch):
    secret = "hunter2-TRACEQ-FAKE-SECRET-9c1e"
    monkeypatch.setenv("TRACEQ_FAKE_SECRET_TOKEN", secret)
    monkeypatch.setenv("WANDB_API_KEY", secret)
    own = tmp_path / "own.jsonl"
    run_pattern(own).close()
    assert secret.encode() not in own.read_bytes()
    # a header from another writer that did dump its environment and argv
    leaky = write_jsonl(tmp_path / "leaky.jsonl",
                        header(env={"TRACEQ_FAKE_SECRET_TOKEN": secret}, argv=["train.py", f"--token={secret}"]),
                        [region("BATCH", 6_000, 9_000)])
    ingest([own, leaky], store=store_dir)
    assert query(store_dir, "select count(*) from runs") == [(2,)]
    files = [p for p in Path(store_dir).rglob("*") if p.is_file()]
    assert files
    for p in files:
        data = p.read_bytes()
        assert secret.encode() not in data, p
        assert b"TRACEQ_FAKE_SECRET_TOKEN" not in data, p


def test_depth_is_per_thread(tmp_path):
    log = tmp_path / "threads.jsonl"
    barrier = threading.Barrier(2)

    def work():
        t = timer.Timer(log=log)            # timers are per thread; both share the file
        t.start(TimeType.BATCH)
        barrier.wait()
        t.start(TimeType.FORWARD)
        barrier.wait()
        t.end(TimeType.FORWARD)
        t.end(TimeType.BATCH)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    rows = read_log(log).tables["regions"].to_pylist()
    assert len({r["tid"] for r in rows}) == 2
    assert sorted((r["name"], r["depth"]) for r in rows) == [("BATCH", 0), ("BATCH", 0),
                                                             ("FORWARD", 1), ("FORWARD", 1)]


def test_depth_handles_adjacent_overlapping_and_empty_regions(tmp_path):
    log = write_jsonl(tmp_path / "d.jsonl", header(), [
        region("outer", 0, 100),
        region("a", 10, 20),
        region("b", 20, 30),          # starts where a ends: a sibling, not a child
        region("inner", 22, 25),
        region("empty", 40, 40),      # zero length, inside outer
        region("over", 90, 150),      # overlaps outer's end: counted inside outer
        region("after", 150, 160),    # starts where over ends
        region("same", 0, 100, tid=7),  # another thread: independent
    ])
    rows = read_log(log).tables["regions"].to_pylist()
    assert {(r["name"], r["tid"]): r["depth"] for r in rows} == {
        ("outer", 100): 0, ("a", 100): 1, ("b", 100): 1, ("inner", 100): 2, ("empty", 100): 1,
        ("over", 100): 1, ("after", 100): 0, ("same", 7): 0}


def test_sample_script_runs_without_torch(tmp_path, store_dir):
    """make_timer_sample.py with `import torch` failing: numpy model, both files ingest."""
    repo = Path(__file__).resolve().parents[1]
    code = ("import runpy, sys; sys.modules['torch'] = None; "
            f"sys.argv = ['make_timer_sample.py', '--epochs', '1', '--batches', '4', '--out', {str(tmp_path)!r}]; "
            "runpy.run_path('sample_traces/make_timer_sample.py', run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "model: numpy" in proc.stdout
    results = ingest([tmp_path / "timer_sample.jsonl", tmp_path / "timer_sample_stats.txt"], store=store_dir)
    counts = {r.format: r.counts for r in results}
    assert counts["timer_log"]["regions"] == 1 + 4 * 4 + 1      # EPOCH, 4 x (BATCH IO FORWARD BACKWARD), eval
    assert counts["deep500_stats"]["timer_stats"] == 6


def test_sample_files_ingest(store_dir):
    log, stats = SAMPLES / "timer_sample.jsonl", SAMPLES / "timer_sample_stats.txt"
    if not (log.exists() and stats.exists()):
        pytest.skip("run sample_traces/make_timer_sample.py first")
    assert log.stat().st_size < 100_000 and stats.stat().st_size < 100_000
    results = {r.format: r for r in ingest([log, stats], store=store_dir)}
    assert set(results) == {"timer_log", "deep500_stats"}
    assert results["timer_log"].warnings == []
    # the sample's stats and its log describe the same run
    by_log = dict(query(store_dir, "select name, avg(end_ns - start_ns) / 1e9 from regions group by name"))
    by_stats = dict(query(store_dir, "select key, mean_s from timer_stats where clock = 'cpu'"))
    assert set(by_log) == set(by_stats)
    for key, mean in by_stats.items():
        assert by_log[key] == pytest.approx(mean, abs=6e-6)
    io_share = by_log["IO"] / by_log["BATCH"]
    assert io_share > 0.3, "the sample's data loading is meant to be slow"


@pytest.mark.parametrize("content,problem", [
    (b'{"not_a_timer": 1}\n', "not a traceq timer log"),
    (b'{"traceq_timer": 99, "epoch_ns": 1, "perf_ns": 1}\n', "format version 99 is newer"),
    (b'{"traceq_timer": 1, "perf_ns": 1}\n', "clock anchor 'epoch_ns'"),
    (b'{"traceq_timer": 1, "epoch_ns": 1, "perf_ns": 1}\n{"key":"IO","start_ns":1,"end_ns":2,"pid":1,"tid":1}\n'
     b'{"key":"IO","start_ns":"soon","end_ns":2,"pid":1,"tid":1}\n{"key":"IO","start_ns":3,"end_ns":4,"pid":1,"tid":1}\n',
     "line 3: start_ns is not a 64-bit integer"),
    (b'{"traceq_timer": 1, "epoch_ns": 1, "perf_ns": 1}\nnot json\n{"key":"IO","start_ns":1,"end_ns":2,"pid":1,"tid":1}\n',
     "line 2: not a JSON record"),
    (b'{"traceq_timer": 1, "epoch_ns": 1, "perf_ns": 1}\n{"key":"IO","start_ns":5,"end_ns":2,"pid":1,"tid":1}\n',
     "ends before it starts"),
    (b'{"traceq_timer": 1, "epoch_ns": 1, "perf_ns": 1}\n{"key":"IO","end_ns":2,"pid":1,"tid":1}\n',
     "lacks start_ns"),
])
def test_malformed_logs_raise_bad_input(tmp_path, content, problem):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(BadInput, match=problem) as err:
        read_log(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_empty_log_has_no_regions_and_says_so(tmp_path):
    path = write_jsonl(tmp_path / "empty.jsonl", header(), [])
    parsed = read_log(path)
    assert parsed.tables["regions"].num_rows == 0
    assert parsed.warnings == ["the log holds no completed regions"]
