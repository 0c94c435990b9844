"""Hostile timer files (issue 36 items 2, 6, 11, 13, 18): traceq timer logs, Deep500 stats text
and mila results that used to poison the store, crash or be stored silently wrong."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from traceq.errors import BadInput
from traceq.ingest import ingest
from traceq.ingest.timers import log as timer_log
from traceq.ingest.timers import log_order
from traceq.ingest.timers.deep500 import read_stats
from traceq.ingest.timers.log import read_log
from traceq.ingest.timers.mila import read as read_mila
from traceq.store import Store

HEADER = b'{"traceq_timer":1,"epoch_ns":0,"perf_ns":0}\n'


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "traceq", *args], capture_output=True, text=True,
                          cwd=REPO, env={"PYTHONPATH": str(REPO), "COLUMNS": "100", "PATH": "/usr/bin:/bin"})


def rows(store: Path, sql: str) -> list[tuple]:
    return Store(store).connect().execute(sql).fetchall()


# ------------------------------------------------------------------ item 2: invalid UTF-8
def test_invalid_utf8_in_a_timer_key_is_replaced_and_the_run_stays_readable(tmp_path):
    """The issue's reproducer: exit 0 used to leave a run whose every analysis failed with
    "store file is damaged"."""
    log = tmp_path / "t.jsonl"
    log.write_bytes(HEADER + b'{"key":"caf\xe9","start_ns":1,"end_ns":2,"pid":1,"tid":1}\n'
                             b'{"key":"ok","start_ns":3,"end_ns":5,"pid":1,"tid":1}\n')
    store = tmp_path / "st"
    res = cli("ingest", str(log), "--store", str(store))
    assert res.returncode == 0, res.stderr
    assert "1 invalid UTF-8 sequence(s) replaced by U+FFFD" in res.stderr and str(log) in res.stderr
    # the store-wide query that used to fail, and an analysis of the run
    assert sorted(rows(store, "SELECT name FROM regions")) == [("caf\ufffd",), ("ok",)]
    res = cli("breakdown", "--store", str(store), "--run", "t", "--by", "timer", "--format", "csv")
    assert res.returncode == 0, res.stderr
    assert "caf\ufffd" in res.stdout


def test_a_lone_surrogate_escape_in_the_header_host_is_replaced(tmp_path):
    log = tmp_path / "h.jsonl"
    log.write_bytes(b'{"traceq_timer":1,"epoch_ns":0,"perf_ns":0,"host":"n\\udc80de"}\n'
                    b'{"key":"a","start_ns":1,"end_ns":2,"pid":1,"tid":1}\n')
    ingest([log], tmp_path / "st")
    assert rows(tmp_path / "st", "SELECT host FROM runs") == [("n\ufffd\ufffd\ufffdde",)]


def test_a_deep500_file_with_a_stray_byte_is_recognised_and_ingested(tmp_path):
    """Format detection decoded the head strictly: one invalid byte (or a character cut at the
    4096-byte head) made a Deep500 file "not a trace (unrecognised binary content)"."""
    first = b"CPU\nIO\nmin: 1 mean: 1 median: 1 max: 1 stdev: 0\n"
    long_key = "x" * (4095 - len(first)) + "\u00e9"   # the head ends inside the é
    for name, key in (("stray.txt", b"lo\xffad"), ("cut.txt", long_key.encode())):
        path = tmp_path / name
        path.write_bytes(first + key + b"\nmin: 1 mean: 1 median: 1 max: 1 stdev: 0\n---\n")
        ingest([path], tmp_path / "st", run=name)
    keys = rows(tmp_path / "st", "SELECT run, key FROM timer_stats WHERE key <> 'IO' ORDER BY run")
    assert keys == [("cut.txt", long_key), ("stray.txt", "lo\ufffdad")]


def test_invalid_utf8_in_deep500_and_mila_files_is_replaced_and_counted(tmp_path):
    stats = tmp_path / "s.txt"
    stats.write_bytes(b"CPU\nlo\xffad\nmin: 1 mean: 1 median: 1 max: 1 stdev: 0\n---\n")
    parsed = read_stats(stats)
    assert parsed.tables["timer_stats"].column("key").to_pylist() == ["lo\ufffdad"]
    assert "1 invalid UTF-8 sequence(s) replaced by U+FFFD" in parsed.warnings
    mila = tmp_path / "m.json"
    mila.write_bytes(b'{"name": "res\\ud800net", "train": {"avg": 0.5, "unit": "s\xfe\xff", "count": 1e300}}')
    parsed = read_mila(mila)
    row = parsed.tables["metrics"].to_pylist()[0]
    assert row["unit"] == "s\ufffd\ufffd" and row["samples"] is None   # 1e300 is no count
    assert "\ud800" not in parsed.labels["bench"] and parsed.labels["bench"].startswith("res")
    assert parsed.warnings == ["2 invalid UTF-8 sequence(s) replaced by U+FFFD"]


# ------------------------------------------------------------------ item 6: nesting
@pytest.mark.parametrize("where,line", [("header", 1), ("record", 3)])
def test_deep_nesting_is_refused_before_decoding_naming_the_line(tmp_path, where, line):
    deep = b"[" * 100_000 + b"]" * 100_000
    log = tmp_path / "deep.jsonl"
    if where == "header":
        log.write_bytes(b'{"traceq_timer":1,"epoch_ns":0,"perf_ns":0,"x":' + deep + b"}\n")
    else:
        log.write_bytes(HEADER + b'{"key":"a","start_ns":1,"end_ns":2,"pid":1,"tid":1}\n'
                        b'{"key":"b","start_ns":1,"end_ns":2,"pid":1,"tid":1,"x":' + deep + b"}\n")
    with pytest.raises(BadInput, match=f"line {line}: nested deeper than 64 levels") as err:
        read_log(log)
    assert str(log) in str(err.value) and "\n" not in str(err.value)
    res = cli("ingest", str(log), "--store", str(tmp_path / "st"))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "nested deeper" in res.stderr


def test_deeply_nested_mila_file_is_refused(tmp_path):
    path = tmp_path / "m.json"
    path.write_text('{"train": {"avg": 1, "unit": "s"}, "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(BadInput, match="nested deeper than 64 levels"):
        read_mila(path)


# ------------------------------------------------------------------ item 11: int64 edges
@pytest.mark.parametrize("head,problem", [
    ('{"traceq_timer":1,"epoch_ns":9000000000000000000,"perf_ns":-9000000000000000000}',
     "epoch_ns - perf_ns (the clock offset) is out of the int64 range"),
    ('{"traceq_timer":1,"epoch_ns":9223372036854775808,"perf_ns":0}', "epoch_ns 9223372036854775808 is out"),
    ('{"traceq_timer":1,"epoch_ns":0,"perf_ns":-' + "9" * 5000 + "}", "not a traceq timer log"),
])
def test_header_clock_anchors_beyond_int64_refuse_the_file(tmp_path, head, problem):
    log = tmp_path / "h.jsonl"
    log.write_text(head + '\n{"key":"a","start_ns":1,"end_ns":2,"pid":1,"tid":1}\n')
    with pytest.raises(BadInput, match=re.escape(problem)) as err:
        read_log(log)
    assert "\n" not in str(err.value)


def test_records_that_leave_int64_are_skipped_and_counted_never_wrapped(tmp_path):
    """epoch_ns 9e18 moves start_ns 2e18 past int64 (it used to wrap to -7.4e18); a start_ns of
    2**64 does not fit int64 at all. Both are skipped and counted; the sane record stays."""
    log = tmp_path / "w.jsonl"
    log.write_text('{"traceq_timer":1,"epoch_ns":9000000000000000000,"perf_ns":0}\n'
                   '{"key":"wraps","start_ns":2000000000000000000,"end_ns":2000000000000000001,"pid":1,"tid":1}\n'
                   '{"key":"huge","start_ns":18446744073709551616,"end_ns":18446744073709551617,"pid":1,"tid":1}\n'
                   '{"key":"fine","start_ns":5,"end_ns":7,"pid":1,"tid":1}\n')
    parsed = read_log(log)
    t = parsed.tables["regions"].to_pylist()
    assert [(r["name"], r["start_ns"], r["end_ns"]) for r in t] == [("fine", 9 * 10**18 + 5, 9 * 10**18 + 7)]
    assert any(w.startswith("2 records skipped: an integer out of range") for w in parsed.warnings)


# ------------------------------------------------------------------ item 13: streamed
@pytest.mark.parametrize("out_of_core", [False, True])
def test_chunked_reading_gives_the_same_regions_and_line_numbers(tmp_path, monkeypatch, out_of_core):
    """Chunks of a few hundred bytes (records cut across every boundary) give the table one
    chunk gives, translated in memory or out of core (DuckDB, as for a log of millions of
    records); an error names the file's line, not the chunk's."""
    recs = [{"gpu_timing": "cuda_events", "pid": 1, "device_index": 0, "device_name": "G", "sm_count": 1,
             "memory_bytes": 1}]
    for i in range(200):   # nested, adjacent, zero-length, on two threads, some GPU-timed
        s = (i // 4) * 10 + (i % 4)
        recs.append({"key": f"k{i % 7}", "start_ns": s, "end_ns": s + [9, 3, 0, 1][i % 4], "pid": 1,
                     "tid": 1 + i % 2, **({"gpu": i} if i % 5 == 0 else {})})
        if i % 10 == 0:
            recs.append({"gpu_id": i, "pid": 1, "gpu_dur_ns": i + 1})
    log = tmp_path / "c.jsonl"
    log.write_bytes(HEADER + b"".join(json.dumps(r).encode() + b"\n" for r in recs))
    whole = read_log(log)
    monkeypatch.setattr(timer_log, "CHUNK_BYTES", 300)
    if out_of_core:
        monkeypatch.setattr(log_order, "IN_MEMORY_ROWS", 0)
    chunked = read_log(log)
    assert chunked.tables["regions"].equals(whole.tables["regions"])
    assert chunked.warnings == whole.warnings == ["20 GPU-timed regions have no GPU duration (the process ended "
                                                  "before complete_all() resolved their CUDA events)"]
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(log.read_bytes() + b'{"key": 1}\n')
    with pytest.raises(BadInput, match=f"line {len(recs) + 2}: key is not a string"):
        read_log(bad)


# ------------------------------------------------------------------ item 18: Deep500
def test_deep500_nan_and_inf_statistics_are_null_and_counted(tmp_path):
    path = tmp_path / "s.txt"
    path.write_text("CPU\nIO\nmin: nan mean: 0.5 median: inf max: -inf stdev: NaN\n"
                    "BATCH\nmin: 1 mean: 2 median: 2 max: 3 stdev: 1\n---\n")
    parsed = read_stats(path)
    got = {r["key"]: r for r in parsed.tables["timer_stats"].to_pylist()}
    assert [got["IO"][f] for f in ("min_s", "mean_s", "median_s", "max_s", "stdev_s")] == [None, 0.5, None, None, None]
    assert got["BATCH"]["max_s"] == 3.0
    assert "4 statistics are nan or inf (undefined): stored as null" in parsed.warnings


@pytest.mark.parametrize("text", [
    "CPU\n---\nGPU\n---\nnote: min: mean: stdev:\n",          # sections and no key line
    "CPU\nBATCH\nmin: 0.1 mean: 0.1 median: 0.1 max: 0.1 st",  # the only row cut short
])
def test_a_file_that_only_looks_like_deep500_is_refused(tmp_path, text):
    path = tmp_path / "s.txt"
    path.write_text(text)
    res = cli("ingest", str(path), "--store", str(tmp_path / "st"))
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert str(path) in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "st" / "runs.parquet").exists()


def test_a_directory_of_timer_logs_ingests_in_parallel_workers(tmp_path):
    """The streamed reader uses DuckDB in forked ingest workers: two logs, two jobs."""
    d = tmp_path / "run"
    d.mkdir()
    for r in range(2):
        (d / f"rank{r}.jsonl").write_bytes(HEADER.replace(b"}", f',"rank":{r}}}'.encode()) +
                                           b'{"key":"a","start_ns":1,"end_ns":4,"pid":1,"tid":1}\n'
                                           b'{"key":"b","start_ns":2,"end_ns":3,"pid":1,"tid":1}\n')
    ingest([d], tmp_path / "st", jobs=2)
    assert rows(tmp_path / "st", "SELECT rank, name, depth FROM regions ORDER BY rank, name") == [
        (0, "a", 0), (0, "b", 1), (1, "a", 0), (1, "b", 1)]
