"""Property-based fuzzing of the ingest contract (see tests/fuzzing.py for the contract).

Example budgets are small by default (the whole module runs in well under two minutes on
2 cores); TRACEQ_FUZZ_EXAMPLES=N raises every property to N examples, and
benchmarks/fuzz_long.py runs the same properties for as long as you like.
"""
from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REPO, shared_trace
from fuzzing import (check_contract, check_damaged, damaged_kineto, deep500_text, kineto_document, nsys_export,
                     store_digest, timer_log, write_kineto, write_sqlite)

EXAMPLES = int(os.environ.get("TRACEQ_FUZZ_EXAMPLES", "0"))
settings.register_profile("traceq-default", deadline=None, derandomize=True, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                 HealthCheck.function_scoped_fixture])
settings.load_profile("traceq-default")


def budget(n: int) -> settings:
    return settings(max_examples=EXAMPLES or n)


GOOD = {"traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5,
     "args": {"device": 0, "stream": 7, "correlation": 1}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9, "ts": 8, "dur": 1,
     "args": {"correlation": 1}}]}


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> Path:
    """A store holding one good run: every failed ingest must leave it byte-identical."""
    from traceq.ingest import ingest

    d = tmp_path_factory.mktemp("seed")
    (d / "good.json").write_text(json.dumps(GOOD))
    ingest([d / "good.json"], d / "store", run="good", jobs=1)
    return d / "store"


def fresh(seeded: Path, where: Path) -> Path:
    store = where / "store"
    shutil.copytree(seeded, store)
    return store


@budget(40)
@given(doc=kineto_document(), gz=st.booleans())
def test_hostile_kineto_traces_keep_the_contract(seeded, doc, gz):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        path = write_kineto(tmp / ("trace.json.gz" if gz else "trace.json"), doc, gz)
        check_contract(path, fresh(seeded, tmp))


@budget(30)
@given(tables=nsys_export())
def test_hostile_nsys_exports_keep_the_contract(seeded, tables):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        check_contract(write_sqlite(tmp / "export.sqlite", tables), fresh(seeded, tmp))


# ------------------------------------------------------------------ out-of-range times (issue 12)
OUT_OF_RANGE = [("ts", 1e300), ("ts", -1e18), ("ts", 10**30), ("dur", 1e300), ("dur", 10**30), ("dur", -1e18)]


def mutate(events: list[dict], picks: list[int], field: str, value) -> list[dict]:
    out = [dict(e) for e in events]
    for i in picks:
        out[i][field] = value
    return out


def synthetic_events(n: int = 400) -> list[dict]:
    evs = []
    for i in range(n):
        evs.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                    "ts": 1000 + 10 * i, "dur": 2, "args": {"correlation": i}})
        evs.append({"ph": "X", "cat": "kernel", "name": f"k{i % 5}", "pid": 0, "tid": 7, "ts": 1003 + 10 * i, "dur": 6,
                    "args": {"correlation": i, "device": 0, "stream": 7}})
    return evs


@pytest.mark.parametrize("field,value", OUT_OF_RANGE)
def test_out_of_range_times_are_dropped_and_counted_synthetic(field, value, tmp_path):
    from traceq.ingest import ingest

    events = synthetic_events()
    picks = [3, 101, 555]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": mutate(events, picks, field, value)}))
    res = ingest([path], tmp_path / "store", jobs=1)[0]
    dropped = [w for w in res.warnings if w.startswith("dropped ")]
    assert len(dropped) == 1, res.warnings
    assert dropped[0].startswith("dropped 3 events whose times are missing, inverted, not representable")
    shown = f"{float(value):.6g}"
    assert f"{field} {shown} µs" in dropped[0]
    assert res.counts["gpu_ops"] + res.counts["host_ops"] == len(events) - 3


@pytest.mark.shared
@pytest.mark.parametrize("field,value", OUT_OF_RANGE)
def test_out_of_range_mutants_of_a_real_trace_ingest_with_a_counted_warning(field, value, tmp_path):
    """The issue's case: a few events of a real Kineto trace carry ts/dur 1e300, -1e18, 10**30."""
    from traceq.ingest import ingest

    src = shared_trace("kineto/hta/rank_non_gpu/rank_non_gpu.json.gz")
    doc = json.loads(gzip.decompress(src.read_bytes()))
    events = doc["traceEvents"]
    timed = [i for i, e in enumerate(events) if e.get("ph") == "X" and isinstance(e.get("ts"), (int, float))]
    picks = timed[:: max(1, len(timed) // 4)][:4]
    clean = ingest([src], tmp_path / "clean", jobs=1)[0]
    doc["traceEvents"] = mutate(events, picks, field, value)
    path = tmp_path / "mutant.json"
    path.write_text(json.dumps(doc))
    res = ingest([path], tmp_path / "store", jobs=1)[0]
    dropped = [w for w in res.warnings if w.startswith("dropped ")]
    assert len(dropped) == 1 and dropped[0].startswith(f"dropped {len(picks)} events"), res.warnings
    assert sum(res.counts.values()) == sum(clean.counts.values()) - len(picks)


def test_absurd_but_representable_times_are_dropped(tmp_path):
    """ts 1e12 µs (11.6 days) in a trace whose middle half spans 4 ms: beyond 1000 x max(IQR, 1 s)."""
    from traceq.ingest import ingest

    events = synthetic_events()
    events[7]["ts"] = 1e12
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    res = ingest([path], tmp_path / "store", jobs=1)[0]
    assert any(w.startswith("dropped 1 events") and "ts 1e+12 µs" in w for w in res.warnings), res.warnings
    # ... but an event 10 minutes away from a 4 ms trace is real (within 1000 s) and kept
    events[7]["ts"] = 1000 + 600e6
    path.write_text(json.dumps({"traceEvents": events}))
    res = ingest([path], tmp_path / "store2", jobs=1)[0]
    assert not any(w.startswith("dropped") for w in res.warnings)


def test_nsys_out_of_range_and_inverted_records_are_dropped_and_counted(tmp_path):
    from traceq.ingest import ingest

    gpid = 42 << 24
    rows = [(1000 + 100 * i, 1050 + 100 * i, 0, 7, i, gpid, 0) for i in range(50)]
    rows[3] = (1e300, 1e300, 0, 7, 3, gpid, 0)         # REAL beyond int64
    rows[4] = ("soon", 1450, 0, 7, 4, gpid, 0)          # text
    rows[5] = (1550, 1500, 0, 7, 5, gpid, 0)            # inverted
    rows[6] = (2**62 + 5, 2**62 + 10, 0, 7, 6, gpid, 0)  # beyond the int64-with-headroom limit
    db = write_sqlite(tmp_path / "e.sqlite", [
        ("StringIds", ["id", "value"], [(0, "gemm")]),
        ("CUPTI_ACTIVITY_KIND_KERNEL", ["start", "end", "deviceId", "streamId", "correlationId", "globalPid",
                                        "demangledName"], rows)])
    res = ingest([db], tmp_path / "store", jobs=1)[0]
    assert res.counts["gpu_ops"] == 46
    assert any(w.startswith("dropped 4 CUDA activity records") for w in res.warnings), res.warnings


# ------------------------------------------------------------------ the CLI, a few cases end to end
@pytest.mark.parametrize("text,code,needle", [
    (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1e300, "dur": 1, "pid": 1, "tid": 1}]}', 2, "no trace events left"),
    (b'[{"user": 1}]', 2, "no trace events: a list of 1 JSON records"),
    (json.dumps({"traceEvents": synthetic_events(20)[:-1] + [dict(synthetic_events(20)[-1], ts=10**30)]}).encode(), 0,
     "dropped 1 events"),
])
def test_cli_exit_codes_and_one_line(text, code, needle, tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(text)
    r = subprocess.run([sys.executable, "-m", "traceq", "ingest", str(path), "--store", str(tmp_path / "s"), "-q"],
                       capture_output=True, text=True, cwd=REPO, env=dict(os.environ, TRACEQ_DEBUG="0"))
    assert r.returncode == code, r.stderr
    assert needle in r.stderr and "Traceback" not in r.stderr and "internal error" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


# ------------------------------------------------------------------ decompression bomb
BOMB = r'''
import resource, sys, time
from pathlib import Path
from traceq.errors import TraceqError
from traceq.ingest.kineto.reader import read
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
try:
    read(Path(sys.argv[1]))
    print("ACCEPTED")
except TraceqError as exc:
    print("REFUSED", time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0, exc)
'''


def make_bomb(path: Path, gib: float = 2.0) -> Path:
    """A .gz of a few MB that expands to `gib` GiB: a trace header, then whitespace only."""
    import zlib

    co = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b" " * (1 << 24)
    with open(path, "wb") as f:
        f.write(co.compress(b'{"traceEvents": ['))
        for _ in range(int(gib * 64)):
            f.write(co.compress(block))
        f.write(co.compress(b"]}") + co.flush())
    return path


def test_decompression_bomb_is_refused_fast_with_bounded_memory(tmp_path):
    bomb = make_bomb(tmp_path / "bomb.json.gz")
    assert bomb.stat().st_size < 4e6
    r = subprocess.run([sys.executable, "-c", BOMB, str(bomb)], capture_output=True, text=True, cwd=REPO, timeout=120)
    words = r.stdout.split(maxsplit=3)
    assert words[0] == "REFUSED", r.stdout + r.stderr
    seconds, rss_kib, message = float(words[1]), int(words[2]), words[3]
    assert "no trace events in the first 64 MB of decompressed data" in message
    assert seconds < 10
    assert rss_kib < 400 * 1024   # the 2 GiB are never held: 64 MB of text at most, plus buffers


def test_events_then_a_sea_of_whitespace_is_refused_by_the_ratio_limit(tmp_path, monkeypatch):
    from traceq.errors import BadInput
    from traceq.ingest.kineto import reader as kineto
    from traceq.ingest.kineto import text as kineto_text

    monkeypatch.setattr(kineto_text, "RATIO_FLOOR", 8 << 20)   # keep the test small: 8 MB floor
    head = json.dumps(GOOD)[:-2].encode() + b","
    path = tmp_path / "b.json.gz"
    path.write_bytes(gzip.compress(head + b" " * (64 << 20) + b"]}", 9))
    with pytest.raises(BadInput, match=r"expands beyond \d+ MB \(200x its compressed size"):
        kineto.read(path)


def test_rerunning_an_ingest_after_a_refusal_changes_nothing(seeded, tmp_path):
    store = fresh(seeded, tmp_path)
    before = store_digest(store)
    path = tmp_path / "l.json"
    path.write_text("[1, 2, 3]")
    assert check_contract(path, store).startswith("refused: ")
    assert store_digest(store) == before
    assert pl.read_parquet(store / "runs.parquet")["run"].to_list() == ["good"]


# ------------------------------------------------------------------ one damaged event (issue 36)
@budget(40)
@given(damaged=damaged_kineto(), gz=st.booleans(), window=st.sampled_from([None, 256, 1024]))
def test_one_damaged_event_costs_at_most_that_event(damaged, gz, window):
    from traceq.ingest.kineto import windows

    text, keep, _kind = damaged
    saved = windows.WINDOW
    windows.WINDOW = window or saved   # small windows: the damage lies in the middle of one
    try:
        with tempfile.TemporaryDirectory() as tmp:
            check_damaged(write_kineto(Path(tmp) / ("t.json.gz" if gz else "t.json"), text, gz), keep)
    finally:
        windows.WINDOW = saved


@budget(8)
@given(damaged=damaged_kineto())
def test_a_damaged_trace_keeps_the_ingest_contract(seeded, damaged):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        assert check_contract(write_kineto(tmp / "t.json", damaged[0]), fresh(seeded, tmp)) == "added"

# ------------------------------------------------------------------ timer logs, Deep500 text
def _store_reads_back(store: Path) -> None:
    """Every string of the timer tables reads back store-wide (invalid UTF-8 in one file made
    DuckDB refuse the whole table: "store file is damaged")."""
    from traceq.store import Store

    con = Store(store).connect()
    for sql in ("SELECT count(name), sum(length(name)) FROM regions",
                "SELECT count(key), sum(length(key)) FROM timer_stats"):
        con.execute(sql).fetchall()


@budget(25)
@given(text=timer_log())
def test_hostile_timer_logs_keep_the_contract(seeded, text):
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        store = fresh(seeded, d)
        (d / "t.jsonl").write_bytes(text)
        if check_contract(d / "t.jsonl", store, run="fuzz") == "added":
            _store_reads_back(store)


@budget(20)
@given(text=deep500_text())
def test_hostile_deep500_text_keeps_the_contract(seeded, text):
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        store = fresh(seeded, d)
        (d / "stats.txt").write_bytes(text)
        if check_contract(d / "stats.txt", store, run="fuzz") == "added":
            _store_reads_back(store)
