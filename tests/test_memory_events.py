"""The memory_events table: Kineto `[memory]` instant events (every decode path gives the same
rows), nsys CUDA_GPU_MEMORY_USAGE_EVENTS, and stores without the table."""
from __future__ import annotations

import gzip
import json
import shutil
import sqlite3

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from kineto_synth import HOST_PID, HOST_TID, Trace

from conftest import SAMPLES, shared_trace
from test_kineto_decode import _plain, fast, robust

from traceq.ingest import ingest
from traceq.ingest.kineto import reader
from traceq.ingest.kineto.raw import MEMORY_RAW_SCHEMA, memory_path
from traceq.store import Store

COLS = ["pid", "tid", "device_type", "device", "start_ns", "addr", "bytes", "total_allocated", "total_reserved"]
ADDR = 0x7F3A_0000_0000   # a CUDA address beyond float precision: must stay exact


def _synthetic() -> Trace:
    """A cpu_op with a CUDA allocation (totals recorded), a CPU allocation written without a
    category, an older event without the totals (PyTorch < 1.10), the free; an instant event
    that is no memory event, and a kernel."""
    t = Trace()
    t.cpu_op("aten::empty", 10, 5)
    t.memory(11, 512, ADDR + 1, total_allocated=512, total_reserved=2_097_152)
    t.memory(12.5, 64, 1000, device=-1, device_type=0, total_allocated=64, total_reserved=0, cat=None)
    t.memory(13.25, 256, ADDR + 4097, tid=7)
    t.memory(20, -512, ADDR + 1, total_allocated=0, total_reserved=2_097_152)
    t.events.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "Iteration Start: PyTorch Profiler",
                     "pid": HOST_PID, "tid": HOST_TID, "ts": 9, "args": {"Bytes": 1}})
    t.launch("k", 10, 2, 30, 5)
    return t


EXPECTED = [
    (HOST_PID, HOST_TID, "cuda", 0, 11_000, ADDR + 1, 512, 512, 2_097_152),
    (HOST_PID, HOST_TID, "cpu", -1, 12_500, 1000, 64, 64, 0),
    (HOST_PID, 7, "cuda", 0, 13_250, ADDR + 4097, 256, None, None),
    (HOST_PID, HOST_TID, "cuda", 0, 20_000, ADDR + 1, -512, 0, 2_097_152),
]


def _rows(table: pa.Table) -> list[tuple]:
    return [tuple(r[c] for c in COLS) for r in table.select(COLS).to_pylist()]


def test_kineto_memory_events_become_rows(tmp_path):
    parsed = reader.read(_synthetic().write(tmp_path / "t.json.gz"))
    assert _rows(parsed.tables["memory_events"]) == EXPECTED
    # the raw relation has no instant events: host and GPU ops as before
    assert parsed.tables["host_ops"].num_rows == 2 and parsed.tables["gpu_ops"].num_rows == 1


def test_memory_events_in_the_store_and_reingest(tmp_path):
    path = _synthetic().write(tmp_path / "t.json.gz")
    store = tmp_path / "s"
    ingest([path], store=store, jobs=1)
    ingest([path], store=store, jobs=1)                 # unchanged: a no-op
    ingest([path], store=store, jobs=1, force=True)     # replaced, not doubled
    con = Store(store).connect()
    got = con.execute(f"SELECT {', '.join(COLS)} FROM memory_events ORDER BY start_ns").fetchall()
    assert got == EXPECTED
    files = json.loads(con.execute("SELECT files FROM runs").fetchone()[0])
    assert "memory_events" in files


def _memory_rows(decoded) -> list[dict]:
    files = [memory_path(p) for p in decoded.parts if memory_path(p).exists()]
    return pa.concat_tables([pq.read_table(f) for f in files]).to_pylist() if files else []


def test_every_decode_path_gives_the_same_memory_events(tmp_path, monkeypatch):
    """The fast parallel decoder, the window decoder and the coercion path (a chunk with an odd
    type) keep the same `[memory]` events, in file order."""
    t = _synthetic()
    for i in range(400):   # enough for several parts and slices
        t.cpu_op("aten::add", 100 + 10 * i, 5)
        t.memory(101 + 10 * i, 1024 * (i + 1), ADDR + 64 * i, total_allocated=1024 * (i + 1), total_reserved=1 << 21)
        t.memory(104 + 10 * i, -1024 * (i + 1), ADDR + 64 * i, total_allocated=0, total_reserved=1 << 21)
    text = json.dumps({"traceEvents": t.events}).encode()
    want = _memory_rows(robust(text, tmp_path / "r"))
    assert len(want) == 4 + 800 and want[0]["addr"] == ADDR + 1 and want[-1]["bytes"] == -1024 * 400
    assert _memory_rows(fast(text, tmp_path / "f")) == want
    # an odd type (a numeric name) sends its chunk down the coercion path: same rows
    from traceq.ingest.kineto import recover

    coerced = []
    monkeypatch.setattr(recover, "_coerce_chunk", lambda chunk, f=recover._coerce_chunk: coerced.append(1) or f(chunk))
    odd = dict(t.events[0], name=5)
    text_odd = json.dumps({"traceEvents": [odd, *t.events[1:]]}).encode()
    assert _memory_rows(robust(text_odd, tmp_path / "o")) == want and coerced
    # a bare array (no traceEvents object)
    assert _memory_rows(robust(json.dumps(t.events).encode(), tmp_path / "b")) == want
    # a file cut short (the recovering whole-document path): the events before the cut
    cut = robust(text[:len(text) * 3 // 4], tmp_path / "c")
    got = _memory_rows(cut)
    assert cut.warnings and 0 < len(got) < len(want) and got == want[:len(got)]


def test_a_part_with_memory_events_only_still_carries_them(tmp_path):
    t = Trace()
    t.cpu_op("aten::empty", 0, 5)
    for i in range(300):
        t.memory(10 + i, 8, 4096 + i, total_allocated=8 * (i + 1), total_reserved=1 << 21)
    text = json.dumps({"traceEvents": t.events}).encode()
    got = _memory_rows(fast(text, tmp_path / "f"))
    assert len(got) == 300 and got == _memory_rows(robust(text, tmp_path / "r"))
    assert pq.read_schema(memory_path(robust(text, tmp_path / "r2").parts[0])) == MEMORY_RAW_SCHEMA


def test_real_trace_memory_events_match_a_plain_json_count(tmp_path):
    """HTA's df_index_resolver trace: 28,010 [memory] events (counted here with the json module)."""
    path = shared_trace("kineto/hta/df_index_resolver/df_index_resolver.json.gz")
    doc = json.loads(_plain(path))
    mem = [e for e in doc["traceEvents"] if e.get("ph") == "i" and e.get("name") == "[memory]"]
    store = tmp_path / "s"
    ingest([path], store=store, jobs=1)
    con = Store(store).connect()
    n, n_cpu, total, peak, reserved, first_addr = con.execute(
        "SELECT count(*), count(*) FILTER (device_type = 'cpu'), sum(bytes), max(total_allocated), "
        "max(total_reserved), first(addr ORDER BY start_ns, addr) FROM memory_events").fetchone()
    assert n == len(mem) == 28_010
    assert n_cpu == sum(e["args"]["Device Type"] == 0 for e in mem)
    assert total == sum(e["args"]["Bytes"] for e in mem)
    assert peak == max(e["args"]["Total Allocated"] for e in mem)
    assert reserved == max(e["args"]["Total Reserved"] for e in mem)
    first = min(mem, key=lambda e: (e["ts"], e["args"]["Addr"]))
    assert first_addr == first["args"]["Addr"]


def _nsys_fixture(tmp_path):
    """A real nsys export (pipit's saxpy; its CUDA_GPU_MEMORY_USAGE_EVENTS table is empty) with
    three events added by hand: 1 MiB allocated on device 0 at 1,000 ns, 4 KiB at 1,500 ns, the
    MiB freed (memoryOperationType 1) at 2,000 ns; process 4321 (globalPid bits 24..47)."""
    src = shared_trace("nsys/pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite")
    dst = tmp_path / "saxpy.sqlite"
    shutil.copy(src, dst)
    con = sqlite3.connect(dst)
    gpid = 4321 << 24
    con.executemany(
        "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS (start, globalPid, deviceId, contextId, address, pc, bytes, memKind, "
        "memoryOperationType) VALUES (?, ?, ?, 1, ?, 0, ?, 1, ?)",
        [(1000, gpid, 0, 0x7000_0000, 1 << 20, 0), (1500, gpid, 0, 0x7010_0000, 4096, 0),
         (2000, gpid, 0, 0x7000_0000, 1 << 20, 1)])
    con.commit()
    con.close()
    return dst


def test_nsys_memory_usage_events(tmp_path):
    store = tmp_path / "s"
    ingest([_nsys_fixture(tmp_path)], store=store, jobs=1)
    got = Store(store).connect().execute(f"SELECT {', '.join(COLS)} FROM memory_events ORDER BY start_ns").fetchall()
    assert got == [(4321, None, "cuda", 0, 1000, 0x7000_0000, 1 << 20, None, None),
                   (4321, None, "cuda", 0, 1500, 0x7010_0000, 4096, None, None),
                   (4321, None, "cuda", 0, 2000, 0x7000_0000, -(1 << 20), None, None)]


def test_a_store_without_memory_events_reads_an_empty_view(tmp_path):
    """A trace without memory events (and so any store written before the table existed: its
    manifest lists no memory_events file) gives an empty view with the table's columns."""
    store = tmp_path / "s"
    ingest([SAMPLES / "slow_dataloader" / "rank0.pt.trace.json.gz"], store=store, jobs=1)
    con = Store(store).connect()
    assert "memory_events" not in json.loads(con.execute("SELECT files FROM runs").fetchone()[0])
    assert con.execute("SELECT count(*) FROM memory_events").fetchone()[0] == 0
    cols = [r[0] for r in con.execute("DESCRIBE memory_events").fetchall()]
    assert cols == ["run", "rank", *COLS]
