"""Streaming Kineto ingest (issue 11): a trace decoded window by window into raw Parquet
parts and translated chunk by chunk gives the tables an independent computation from the
events gives, whatever the window, chunk and row-group sizes."""
from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from traceq import ingest
from traceq.ingest.kineto import reader as kineto
from traceq.ingest.kineto import rows as kineto_rows
from traceq.ingest.kineto import tables as kineto_tables
from traceq.ingest.kineto import text as kineto_text
from traceq.ingest.kineto import translate as kineto_translate
from traceq.ingest.kineto import windows as kineto_windows
from traceq.store import Store

HOST, OTHER, GPU, STREAM = 100, 300, 0, 7


def synthetic_events(n_steps: int = 60, seed: int = 1) -> list:
    """A training-like trace: per step a ProfilerStep, cpu_ops, launches (runtime call +
    kernel with the same correlation; some kernels written before their launch call), an
    NCCL kernel with collective args, a B/E pair, and noise the reader must skip (metadata,
    flows, a Trace span, an item that is not an object) or drop (absurd and inverted times)."""
    rnd = random.Random(seed)
    evs: list = [{"ph": "M", "name": "process_name", "pid": HOST, "args": {"name": "python"}},
                 {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler", "pid": HOST, "tid": 0, "ts": 0, "dur": 10**7}]
    corr, t = 1, 1000
    for step in range(n_steps):
        evs.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": HOST, "tid": HOST,
                    "ts": t, "dur": 900})
        evs.append({"ph": "B", "cat": "cpu_op", "name": "aten::outer", "pid": HOST, "tid": HOST + 1, "ts": t + 1})
        for k in range(6):
            ts = t + 10 + 100 * k
            launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": HOST, "tid": HOST,
                      "ts": ts, "dur": 5, "args": {"correlation": corr, "External id": corr + 10**6}}
            kernel = {"ph": "X", "cat": "kernel", "name": f"gemm_kernel_{k % 3}", "pid": GPU, "tid": STREAM,
                      "ts": ts + 20.125, "dur": 30.5,
                      "args": {"correlation": corr, "stream": STREAM, "device": 0, "grid": [k + 1, 2, 1],
                               "block": [128, 1, 1], "registers per thread": 32}}
            pair = [kernel, launch] if rnd.random() < 0.3 else [launch, kernel]
            evs.extend(pair)
            evs.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": HOST, "tid": HOST, "ts": ts + 1, "dur": 3,
                        "args": {"External id": corr + 10**6}})
            corr += 1
        evs.append({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "pid": GPU,
                    "tid": STREAM + 1, "ts": t + 700, "dur": 50,
                    "args": {"correlation": 10**8 + step, "stream": STREAM + 1, "device": 0, "Collective name": "allreduce",
                             "Process Group Name": "0", "Process Group Description": "default_pg", "Group size": 8,
                             "Seq": step, "In msg nelems": 1024, "Out msg nelems": 1024, "dtype": "Float"}})
        evs.append({"ph": "E", "pid": HOST, "tid": HOST + 1, "ts": t + 800})
        evs.append({"ph": "X", "cat": "cpu_op", "name": "other_process_op", "pid": OTHER, "tid": 1, "ts": t + 5, "dur": 2})
        evs.append({"ph": "s", "id": step, "pid": HOST, "tid": HOST, "ts": t + 10, "cat": "ac2g", "name": "flow"})
        t += 1000
    evs.insert(len(evs) // 2, 12345)   # not an object
    evs.insert(len(evs) // 3, {"ph": "X", "cat": "cpu_op", "name": "absurd", "pid": HOST, "tid": HOST, "ts": 1e300, "dur": 1})
    evs.insert(len(evs) // 4, {"ph": "X", "cat": "cpu_op", "name": "inverted", "pid": HOST, "tid": HOST, "ts": 5000,
                               "dur": -10})
    return evs


def write_trace(path: Path, events: list, gz: bool = False) -> Path:
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "GPU"}],
           "distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": events,
           "traceName": "x", "baseTimeNanoseconds": 1700000000000000000}
    text = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(text) if gz else text)
    return path


def expected(events: list) -> dict:
    """The tables computed straight from the events (no traceq code)."""
    objs = [e for e in events if isinstance(e, dict) and e.get("ph") in ("X", "B", "E") and e.get("cat") != "Trace"]
    ok = [e for e in objs if e.get("name") not in ("absurd", "inverted")]
    launch_pid = {e["args"]["correlation"]: e["pid"] for e in ok if e.get("cat") == "cuda_runtime"}
    host_counts: dict = {}
    host = []
    for e in ok:
        if e.get("cat") in ("cpu_op", "cuda_runtime") and e["ph"] == "X":
            kind = "runtime" if e["cat"] == "cuda_runtime" else "cpu_op"
            host.append((e["pid"], e["tid"], kind, e["name"], e["ts"] * 1000, (e["ts"] + e["dur"]) * 1000, False))
    begins = [e for e in ok if e["ph"] == "B"]
    ends = [e for e in ok if e["ph"] == "E"]
    for b, e in zip(begins, ends):   # one level per thread, in order
        host.append((b["pid"], b["tid"], "cpu_op", b["name"], b["ts"] * 1000, e["ts"] * 1000, False))
    for h in host:
        host_counts[h[0]] = host_counts.get(h[0], 0) + 1
    main_pid = max(host_counts, key=host_counts.get)
    gpu = []
    for e in ok:
        if e.get("cat") == "kernel":
            a = e["args"]
            start = round(e["ts"] * 1000)
            gpu.append((launch_pid.get(a["correlation"], main_pid), a["stream"], e["name"], start,
                        start + round(e["dur"] * 1000), (a.get("grid") or [None])[0],
                        4096 if "In msg nelems" in a else None))
    regions = sorted((e["name"], e["ts"] * 1000, 0) for e in ok if e.get("cat") == "user_annotation")
    return {"host": sorted(host), "gpu": sorted(gpu), "regions": regions}


def tables(store: Path) -> dict:
    con = Store(store).connect()
    host = con.sql("SELECT pid, tid, kind, name, start_ns, end_ns, unfinished FROM host_ops").fetchall()
    gpu = con.sql("SELECT pid, stream, name, start_ns, end_ns, grid_x, bytes FROM gpu_ops").fetchall()
    regions = con.sql("SELECT name, start_ns, depth FROM regions").fetchall()
    return {"host": sorted(host), "gpu": sorted(gpu), "regions": sorted(regions)}


@pytest.fixture
def small_chunks(monkeypatch):
    """Windows of 2 KB of text, chunks of 7 events, raw row groups of 50 rows, translation
    chunks of 64 rows, table row groups of 100 rows."""
    monkeypatch.setattr(kineto_windows, "WINDOW", 2048)
    monkeypatch.setattr(kineto_rows, "CHUNK", 7)
    monkeypatch.setattr(kineto_rows, "ROW_GROUP", 50)
    monkeypatch.setattr(kineto_translate, "TCHUNK", 64)
    monkeypatch.setattr("traceq.store.writer.STREAM_ROW_GROUP", 100)


@pytest.mark.parametrize("gz", [False, True])
def test_multi_chunk_trace_gives_the_independently_computed_tables(small_chunks, tmp_path, gz):
    events = synthetic_events()
    path = write_trace(tmp_path / ("t.json.gz" if gz else "t.json"), events, gz)
    res = ingest([path], tmp_path / "store", jobs=1)
    want = expected(events)
    assert tables(tmp_path / "store") == want
    assert res[0].counts == {"gpu_ops": len(want["gpu"]), "host_ops": len(want["host"]),
                             "regions": len(want["regions"]), "timer_stats": 0, "metrics": 0,
                             "memory_events": 0}
    warnings = res[0].warnings
    assert warnings[0] == "skipped 1 items of the event list that are not JSON objects"
    assert warnings[1].startswith("dropped 2 events whose times are missing, inverted")
    assert not list((tmp_path / "store" / ".staging").iterdir())   # scratch and staging are gone


def test_chunk_sizes_change_nothing_not_even_row_order(tmp_path, monkeypatch):
    events = synthetic_events(n_steps=30, seed=2)
    path = write_trace(tmp_path / "t.json", events)
    whole = kineto.read(path).tables
    monkeypatch.setattr(kineto_windows, "WINDOW", 1024)
    monkeypatch.setattr(kineto_rows, "CHUNK", 5)
    monkeypatch.setattr(kineto_translate, "TCHUNK", 33)
    pieces = kineto.read(path).tables
    for name in ("gpu_ops", "host_ops", "regions"):
        assert pieces[name].equals(whole[name]), name


def test_raw_parts_hold_every_column_of_every_row_in_file_order(small_chunks, tmp_path):
    events = synthetic_events(n_steps=8)
    path = write_trace(tmp_path / "t.json", events)
    work = tmp_path / "work"
    work.mkdir()
    text_path, mm = kineto_text.open_text(path, work)
    decoded = kineto.decode_text(text_path, mm, work, path)
    raw = pl.concat([pl.read_parquet(p) for p in decoded.parts])
    assert pq.ParquetFile(decoded.parts[0]).metadata.num_row_groups > 3
    kept = [e for e in events if isinstance(e, dict) and e.get("ph") in ("X", "B", "E") and e.get("cat") != "Trace"]
    assert raw["name"].to_list() == [e.get("name") for e in kept]
    assert decoded.n_items == len(events) and decoded.not_objects == 1
    assert json.loads(decoded.first) == events[0]
    nccl = raw.filter(pl.col("name").str.starts_with("nccl")).row(0, named=True)
    assert (nccl["collective"], nccl["pg_name"], nccl["pg_desc"], nccl["group_size"], nccl["seq"], nccl["bytes"]) == \
        ("allreduce", "0", "default_pg", 8, 0, 4096)
    launch = raw.filter(pl.col("cat") == "cuda_runtime").row(0, named=True)   # host rows have every column too
    assert (launch["correlation"], launch["external_id"], launch["grid_x"]) == (1, 1 + 10**6, None)
    kernel = raw.filter(pl.col("cat") == "kernel").row(0, named=True)
    assert (kernel["grid_x"], kernel["grid_y"], kernel["block_x"], kernel["registers"], kernel["ts"]) == (1, 2, 128, 32, 1030.125)
    assert decoded.meta.distributedInfo == {"rank": 0, "world_size": 1}
    assert decoded.meta.baseTimeNanoseconds == 1700000000000000000   # metadata after the event list


def test_a_trace_cut_mid_event_keeps_every_complete_event_of_its_windows(small_chunks, tmp_path):
    events = synthetic_events(n_steps=10)
    text = json.dumps({"traceEvents": events})
    cut = int(len(text) * 0.8)
    (tmp_path / "cut.json").write_text(text[:cut])
    complete = sum(1 for i in range(len(events)) if len(json.dumps({"traceEvents": events[:i + 1]})) - 2 <= cut)
    parsed = kineto.read(tmp_path / "cut.json")
    assert parsed.warnings[0] == (f"file is truncated or malformed after {complete} complete events; "
                                  "ingested those (was the writer killed?)")
    kept = [e for e in events[:complete] if isinstance(e, dict) and e.get("cat") in ("cpu_op", "cuda_runtime")
            and e["name"] not in ("absurd", "inverted")]   # X events, and B events (paired or left open)
    assert parsed.tables["host_ops"].num_rows == len(kept)


def test_an_event_larger_than_a_window_is_walked_alone_and_gives_the_whole_documents_tables(small_chunks, tmp_path,
                                                                                             monkeypatch):
    events = synthetic_events(n_steps=4)
    big = {"ph": "X", "cat": "cpu_op", "name": "big", "pid": HOST, "tid": HOST, "ts": 1500, "dur": 1,
           "args": {"blob": "x" * 300_000}}   # one event larger than a window: no cut inside the window
    path = write_trace(tmp_path / "t.json", [big, *events])
    parsed = kineto.read(path)   # the window walks its items one by one (salvage.walk)
    assert not any("malformed" in w or "repaired" in w for w in parsed.warnings)
    monkeypatch.setattr(kineto, "decode_windows", lambda *args: None)
    whole = kineto.read(path).tables   # the whole-document decoder, as the reference
    for name in ("gpu_ops", "host_ops", "regions"):
        assert parsed.tables[name].equals(whole[name]), name
    assert sorted(whole["host_ops"].column("name").to_pylist()) == sorted(
        e["name"] for e in [big, *events] if isinstance(e, dict) and e.get("cat") in ("cpu_op", "cuda_runtime")
        and e["name"] not in ("absurd", "inverted"))


def test_event_boundaries_inside_strings_never_cut_a_window(small_chunks, tmp_path):
    # names full of `}, {` (what an event boundary looks like): every candidate cut inside them fails
    names = [f"op{i}" + "}, {" * 40 for i in range(200)]
    events = [{"ph": "X", "cat": "cpu_op", "name": n, "pid": HOST, "tid": HOST, "ts": 1000 + 10 * i, "dur": 5}
              for i, n in enumerate(names)]
    path = write_trace(tmp_path / "t.json", events)
    assert kineto.read(path).tables["host_ops"].column("name").to_pylist() == names


def test_launching_pid_is_that_of_the_first_call_whatever_the_correlation_order(small_chunks, tmp_path):
    """Runtime calls written out of correlation order (threads flushed one after another, as
    in real multi-threaded traces) and a correlation carried by two calls of different
    processes: each GPU op's pid is that of the first call with its correlation in file
    order, across translation chunks (64 rows here). Expected pids set by construction."""
    evs: list = []
    pid_of = {}
    order = list(range(200, 0, -1))   # descending: the map must sort what it collected
    for i, corr in enumerate(order):
        pid = HOST if corr % 3 else OTHER
        evs.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": 1,
                    "ts": 1000 + 10 * i, "dur": 2, "args": {"correlation": corr}})
        pid_of.setdefault(corr, pid)
    # a later call of another process with an already-seen correlation: not the launcher
    evs.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 999, "tid": 1,
                "ts": 4000, "dur": 2, "args": {"correlation": 7}})
    for corr in (1, 7, 9, 150, 200, 201):   # 201: no call carries it -> the busiest host pid
        evs.append({"ph": "X", "cat": "kernel", "name": f"k{corr}", "pid": GPU, "tid": STREAM,
                    "ts": 5000 + corr, "dur": 1, "args": {"correlation": corr, "stream": STREAM}})
    path = write_trace(tmp_path / "t.json", evs)
    ingest([path], tmp_path / "store", jobs=1)
    got = dict(Store(tmp_path / "store").connect().sql("SELECT name, pid FROM gpu_ops").fetchall())
    # corr % 3 == 0 -> OTHER (9, 150); 1, 7, 200 -> HOST; 201 -> HOST (134 of the 201 host events)
    assert got == {"k1": HOST, "k7": HOST, "k9": OTHER, "k150": OTHER, "k200": HOST, "k201": HOST}
    assert pid_of[7] == HOST and pid_of[9] == OTHER


@pytest.mark.parametrize("streamed", [True, False])
def test_stored_files_keep_statistics_on_every_column_but_the_free_form_names(small_chunks, tmp_path, streamed):
    """Row-group min/max statistics let DuckDB skip row groups by time, run or kind; on kernel
    names (hundreds of characters) they cost a third of writing gpu_ops and prune nothing, so
    `name` and `identity` go without. Both writers (streamed row groups, and whole tables)."""
    path = write_trace(tmp_path / "t.json", synthetic_events(n_steps=4))
    if streamed:
        ingest([path], tmp_path / "store", jobs=1)
    else:   # the whole-table writer of Store.stage (tables in memory: timer logs, tools)
        from traceq.store import RankData
        store = Store(tmp_path / "store")
        data = RankData(run="r", rank=0, tables=kineto.read(path).tables, source_path=str(path),
                        source_sha256="0" * 64, source_format="kineto")
        store.commit([store.stage(data)])
    files = {t: next((tmp_path / "store" / t).rglob("*.parquet")) for t in ("gpu_ops", "host_ops", "regions")}
    for table, f in files.items():
        meta = pq.ParquetFile(f).metadata
        cols = {meta.row_group(0).column(i).path_in_schema: meta.row_group(0).column(i)
                for i in range(meta.num_columns)}
        for name, col in cols.items():
            assert col.is_stats_set is (name not in ("name", "identity")), (table, name)
        assert cols["start_ns"].statistics.has_min_max


def test_launching_pid_with_hundreds_of_processes_and_correlations_beyond_32_bits(small_chunks, tmp_path):
    """The correlation map stores pids as small codes and correlations as uint32 while they
    fit: 300 launching processes (codes beyond uint8), calls in shuffled order with repeats,
    and a late call whose correlation needs 64 bits. Expected pids from a plain dict of the
    first call per correlation in file order."""
    rnd = random.Random(3)
    corrs = [rnd.randrange(1, 5000) for _ in range(900)] + [2**40 + 1]
    evs: list = []
    first: dict[int, int] = {}
    for i, corr in enumerate(corrs):
        pid = 1000 + rnd.randrange(300)
        evs.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": 1,
                    "ts": 1000 + 10 * i, "dur": 2, "args": {"correlation": corr}})
        first.setdefault(corr, pid)
    wanted = rnd.sample(sorted(first), 40) + [2**40 + 1]
    for j, corr in enumerate(wanted):
        evs.append({"ph": "X", "cat": "kernel", "name": f"k{corr}", "pid": GPU, "tid": STREAM,
                    "ts": 20000 + j, "dur": 1, "args": {"correlation": corr, "stream": STREAM}})
    path = write_trace(tmp_path / "t.json", evs)
    ingest([path], tmp_path / "store", jobs=1)
    got = dict(Store(tmp_path / "store").connect().sql("SELECT name, pid FROM gpu_ops").fetchall())
    assert got == {f"k{c}": first[c] for c in wanted}
    assert len(set(first.values())) > 256


def test_a_correlation_beyond_32_bits_does_not_match_its_low_bits(small_chunks, tmp_path):
    """Calls with small correlations (a uint32 map) and a kernel whose correlation is
    2**32 + 5: no call carries it, so it goes to the busiest host pid, not to the pid of the
    call with correlation 5."""
    evs = [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": HOST, "tid": 1,
            "ts": 1000 + 10 * i, "dur": 2, "args": {"correlation": 10 + i}} for i in range(5)]
    evs.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": OTHER, "tid": 1,
                "ts": 2000, "dur": 2, "args": {"correlation": 5}})
    for corr in (5, 2**32 + 5):
        evs.append({"ph": "X", "cat": "kernel", "name": f"k{corr}", "pid": GPU, "tid": STREAM,
                    "ts": 5000 + corr % 100, "dur": 1, "args": {"correlation": corr, "stream": STREAM}})
    path = write_trace(tmp_path / "t.json", evs)
    ingest([path], tmp_path / "store", jobs=1)
    got = dict(Store(tmp_path / "store").connect().sql("SELECT name, pid FROM gpu_ops").fetchall())
    assert got == {"k5": OTHER, f"k{2**32 + 5}": HOST}


def test_streamed_row_groups_are_bounded_in_bytes_as_well_as_rows(small_chunks, tmp_path, monkeypatch):
    """Kernel signatures make GPU ops hundreds of bytes each: a streamed row group also ends
    once its rows hold STREAM_GROUP_BYTES. Same rows as with row-count groups only, in more
    row groups."""
    path = write_trace(tmp_path / "t.json", synthetic_events())
    ingest([path], tmp_path / "a", jobs=1)
    monkeypatch.setattr("traceq.store.writer.STREAM_GROUP_BYTES", 2048)
    ingest([path], tmp_path / "b", jobs=1)
    for table in ("gpu_ops", "host_ops"):
        fa, fb = (next((tmp_path / s / table).rglob("*.parquet")) for s in ("a", "b"))
        assert pq.read_table(fa).equals(pq.read_table(fb))
        groups_a, groups_b = pq.ParquetFile(fa).metadata.num_row_groups, pq.ParquetFile(fb).metadata.num_row_groups
        assert groups_b > groups_a
        # each group: under the byte cap plus one piece (a translation chunk of <= 64 rows)
        assert max(pq.ParquetFile(fb).metadata.row_group(i).num_rows for i in range(groups_b)) <= 64 + 64


def test_small_raw_parts_are_read_together_in_chunks(tmp_path, monkeypatch):
    """`_scan`: consecutive parts of a chunk or less are read as one chunk while they fit in
    `_TCHUNK` rows; a bigger part by slices of its row groups; every row once, in order."""
    from traceq.ingest.kineto.raw import RAW_SCHEMA

    monkeypatch.setattr(kineto_translate, "TCHUNK", 50)
    parts, at = [], 0
    for i, n in enumerate([10, 20, 40, 5, 100, 0, 3]):
        t = RAW_SCHEMA.empty_table().to_pydict()
        t = {k: [None] * n for k in t}
        t["ts"] = [float(at + j) for j in range(n)]
        at += n
        parts.append(tmp_path / f"p{i}.parquet")
        pq.write_table(pa.Table.from_pydict(t, schema=RAW_SCHEMA), parts[-1], row_group_size=100)
    chunks = list(kineto_translate.scan(parts))
    assert [c.height for c in chunks] == [30, 45, 50, 50, 3]
    assert pl.concat(chunks)["ts"].to_list() == [float(x) for x in range(178)]
    assert list(kineto_translate.scan(parts, ["ts"]))[0].columns == ["ts"]


def test_numpy_arrays_become_series_through_arrow_buffers():
    """kineto.tables.series (NumPy -> polars without numpy.ma): the values and type of the
    array, null where not valid, a strided column of a 2-d array too."""
    import numpy as np


    times = np.array([[5, 9], [-3, 2**62], [7, 0]], np.int64)
    s = kineto_tables.series(times[:, 1], np.array([True, False, True]))
    assert s.dtype == pl.Int64 and s.to_list() == [9, None, 0]
    assert kineto_tables.series(times[:, 0]).to_list() == [5, -3, 7]
    depth = kineto_tables.series(np.array([0, 2, 1], np.int32))
    assert depth.dtype == pl.Int32 and depth.to_list() == [0, 2, 1]
    assert kineto_tables.series(np.empty(0, np.int64)).len() == 0
    many = np.arange(70, dtype=np.int64)   # validity bits across several bytes
    valid = many % 3 != 0
    assert kineto_tables.series(many, valid).to_list() == [int(v) if ok else None for v, ok in zip(many, valid)]
