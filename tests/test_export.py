"""traceq export: a run as a Chrome-trace JSON (docs/export.md). A synthetic Kineto trace whose
events are written here is exported and re-ingested (same GPU ops, host ops, names and times);
the file's slices nest on every track (overlapping ones moved to extra lanes); launch flows,
findings and a hand-built critical path are marked; the real 2-rank DDP sample puts both ranks
on the common clock; an nsys export round-trips its GPU ops."""
from __future__ import annotations

import gzip
import json
from collections import defaultdict

import numpy as np
import polars as pl
import pytest
from conftest import SAMPLES, run_traceq
from kineto_synth import GPU_PID, HOST_PID, HOST_TID, STREAM, Trace

from traceq.api import open_store
from traceq.export.chrome import LANE_TID
from traceq.export.lanes import lanes, nests
from traceq.export.path_marks import SEGMENT_SCHEMA
from traceq.ingest import ingest

T0 = 1000   # µs: the trace's first event (outer's start); exported ts are relative to it


def _trace() -> Trace:
    """ProfilerStep#1 [1000, 1150] on the main thread holds `outer` [1000, 1100] (with `inner`
    [1010, 1030] and two launches in it) and `late` [1090, 1120], which overlaps `outer`
    without nesting (-> an extra lane). k1 [1050, 1060] and k2 [1055, 1070] overlap on stream 7
    (-> an extra lane); a memcpy [1080, 1085] on the same stream is launched at 1045."""
    t = Trace()
    t.step(1, 1000, 150)
    t.cpu_op("outer", 1000, 100)
    t.cpu_op("inner", 1010, 20)
    t.launch("k1", 1012, 3, 1050, 10)
    t.launch("k2", 1040, 4, 1055, 15)
    t.launch("Memcpy HtoD (Pageable -> Device)", 1045, 2, 1080, 5, api="cudaMemcpyAsync", cat="gpu_memcpy")
    t.cpu_op("late", 1090, 30)
    return t


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    d = tmp_path_factory.mktemp("export")
    ingest([_trace().write(d / "syn.pt.trace.json.gz")], store=d / "s", run="syn", jobs=1)
    out = d / "syn.json"
    res = open_store(d / "s").export(out, "syn", findings=False)
    return d, res, json.loads(out.read_text())


def _table(store, sql):
    return open_store(store).sql(sql)


def test_round_trip_same_gpu_ops_host_ops_names_and_times(synth, tmp_path):
    d, res, doc = synth
    assert res.ranks == [{"rank": 0, "host_ops": 6, "regions": 1, "gpu_ops": 3}]
    ingest([res.path], store=tmp_path / "back", run="back", jobs=1)
    q = "SELECT {t}.* EXCLUDE (run) FROM {t} ORDER BY start_ns, name"
    for table, cols in (("gpu_ops", ["name", "device", "stream", "kind", "correlation", "bytes", "copy_kind"]),
                        ("host_ops", ["name", "kind", "correlation", "tid"]), ("regions", ["name", "source", "step"])):
        a, b = _table(d / "s", q.format(t=table)), _table(tmp_path / "back", q.format(t=table))
        if "tid" in b.columns:   # an op on an extra lane: tid LANE_TID * lane + its tid
            b = b.with_columns(pl.col("tid") % LANE_TID)
        assert a.height == b.height
        assert a.select(cols).equals(b.select(cols)), table
        # times: the export shifts the run to start at 0 (T0 µs earlier); ns exact
        assert (a["start_ns"] - T0 * 1000).to_list() == b["start_ns"].to_list()
        assert (a["end_ns"] - T0 * 1000).to_list() == b["end_ns"].to_list()
    runs = _table(tmp_path / "back", "SELECT rank, clock_offset_ns FROM runs")
    assert runs.rows() == [(0, T0 * 1000)]   # baseTimeNanoseconds = the origin: the common clock kept


def test_document_shape_and_the_fields_perfetto_needs(synth):
    _, res, doc = synth
    assert doc["displayTimeUnit"] == "ns"
    assert doc["otherData"]["run"] == "syn" and doc["otherData"]["origin_ns"] == T0 * 1000
    assert doc["otherData"]["rank_shift_ns"] == {"0": -T0 * 1000}
    assert doc["distributedInfo"] == {"rank": 0, "world_size": 1}
    need = {"X": {"name", "cat", "pid", "tid", "ts", "dur"}, "M": {"name", "pid", "args"},
            "s": {"id", "pid", "tid", "ts", "cat", "name"}, "f": {"id", "pid", "tid", "ts", "cat", "name", "bp"},
            "i": {"name", "ts", "s", "pid"}}
    for ev in doc["traceEvents"]:
        assert need[ev["ph"]] <= set(ev), ev
        if ev["ph"] == "X":
            assert ev["dur"] >= 0 and isinstance(ev["ts"], (int, float))
    assert len(doc["traceEvents"]) == res.events
    names = {(e["pid"], e["args"]["name"]) for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert {n for _, n in names} == {"rank 0", "rank 0 · GPU"}


def _x_by_name(doc):
    return {e["name"]: e for e in doc["traceEvents"] if e["ph"] == "X"}


def test_slices_nest_on_every_track_overlaps_on_extra_lanes(synth):
    _, _, doc = synth
    per_track = defaultdict(list)
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            per_track[(e["pid"], e["tid"])].append((round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)))
    for track, iv in per_track.items():   # no two slices of a track partially overlap
        for s1, e1 in iv:
            for s2, e2 in iv:
                assert not (s1 < s2 < e1 < e2), (track, (s1, e1), (s2, e2))
    x = _x_by_name(doc)
    assert x["late"]["tid"] != x["outer"]["tid"] and x["late"]["pid"] == x["outer"]["pid"]
    assert x["inner"]["tid"] == x["outer"]["tid"] == x["ProfilerStep#1"]["tid"] == HOST_TID
    assert x["k2"]["tid"] != x["k1"]["tid"]
    assert x["k1"]["ts"] == 50.0 and x["k1"]["dur"] == 10.0 and x["k2"]["ts"] == 55.0
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert threads[(x["k1"]["pid"], x["k1"]["tid"])] == f"GPU {GPU_PID} · stream {STREAM}"
    assert threads[(x["k2"]["pid"], x["k2"]["tid"])] == f"GPU {GPU_PID} · stream {STREAM} (overlap 1)"
    assert threads[(x["late"]["pid"], x["late"]["tid"])] == f"thread {HOST_TID} (overlap 1)"


def test_launch_flows_from_each_call_to_its_gpu_op(synth):
    _, _, doc = synth
    x = _x_by_name(doc)
    flows = defaultdict(dict)
    for e in doc["traceEvents"]:
        if e["ph"] in "sf" and e["cat"] == "ac2g":
            flows[e["id"]][e["ph"]] = e
    got = sorted((p["s"]["ts"], p["f"]["ts"], p["f"]["tid"] == x["k1"]["tid"] or p["f"]["tid"] == x["k2"]["tid"])
                 for p in flows.values())
    # cudaLaunchKernel at 12, 40 and cudaMemcpyAsync at 45 µs (relative) -> their ops at 50, 55, 80
    assert got == [(12.0, 50.0, True), (40.0, 55.0, True), (45.0, 80.0, True)]
    assert all(p["f"]["bp"] == "e" and p["s"]["pid"] == x["outer"]["pid"] for p in flows.values())


def test_gzip_output_and_findings_as_global_instants(tmp_path, synth):
    d, _, _ = synth
    out = tmp_path / "syn.json.gz"
    res = open_store(d / "s").export(out, "syn")
    raw = out.read_bytes()
    assert raw[:2] == b"\x1f\x8b"
    doc = json.loads(gzip.decompress(raw))
    instants = [e for e in doc["traceEvents"] if e["ph"] == "i"]
    assert len(instants) == res.findings
    assert all(e["s"] == "g" and e["ts"] == 0.0 and {"id", "category", "gain"} <= set(e["args"]) for e in instants)


def _segments(rows):
    return pl.DataFrame(rows, schema=SEGMENT_SCHEMA, orient="row")


def test_path_marks_segments_and_flows_between_tracks(tmp_path, synth):
    """outer's stretch on the host thread [1000, 1012], the launch delay to k1 [1012, 1050]
    (an edge), k1 [1050, 1060] on stream 7, the sync wait back [1060, 1100] (an edge) and
    `late` [1100, 1120] on the host thread: 5 slices on the path track, 2 flows (host -> GPU,
    GPU -> host), each bound to the op slices at those instants."""
    d, _, _ = synth
    seg = _segments([
        (0, 1, 1_000_000, 1_012_000, "cpu", "host", "outer", HOST_PID, HOST_TID, None, None),
        (0, 1, 1_012_000, 1_050_000, "launch", "edge", "cudaLaunchKernel -> k1", None, None, None, None),
        (0, 1, 1_050_000, 1_060_000, "gpu", "gpu", "k1", HOST_PID, None, GPU_PID, STREAM),
        (0, 1, 1_060_000, 1_100_000, "sync", "edge", "wait", None, None, None, None),
        (0, 1, 1_100_000, 1_120_000, "cpu", "host", "late", HOST_PID, HOST_TID, None, None),
    ])
    out = tmp_path / "path.json"
    res = open_store(d / "s").export(out, "syn", segments=seg, findings=False)
    doc = json.loads(out.read_text())
    assert res.segments == 5
    procs = {e["args"]["name"]: e["pid"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    path = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] == procs["rank 0 · critical path"]]
    assert [(e["name"], e["ts"], e["dur"]) for e in path] == [
        ("cpu: outer", 0.0, 12.0), ("launch: cudaLaunchKernel -> k1", 12.0, 38.0), ("gpu: k1", 50.0, 10.0),
        ("sync: wait", 60.0, 40.0), ("cpu: late", 100.0, 20.0)]
    assert path[2]["args"] == {"bound": "gpu", "kind": "gpu", "name": "k1", "step": 1}
    x = _x_by_name(doc)
    flows = defaultdict(dict)
    for e in doc["traceEvents"]:
        if e["ph"] in "sf" and e["cat"] == "critical_path":
            flows[e["id"]][e["ph"]] = e
    got = sorted(((p["s"]["pid"], p["s"]["tid"], p["s"]["ts"]), (p["f"]["pid"], p["f"]["tid"], p["f"]["ts"]))
                 for p in flows.values())
    host = (x["outer"]["pid"], HOST_TID)
    gpu = (x["k1"]["pid"], x["k1"]["tid"])
    assert got == [((*host, 11.999), (*gpu, 50.0)), ((*gpu, 59.999), (*host, 100.0))]


def test_ddp_sample_both_ranks_as_processes_on_the_common_clock(tmp_path):
    s = tmp_path / "s"
    ingest([SAMPLES / "gpu" / "ddp_gloo_straggler"], store=s, run="ddp", jobs=1)
    out = tmp_path / "ddp.json"
    res = open_store(s).export(out, "ddp", findings=False)
    doc = json.loads(out.read_text())
    procs = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert sorted(procs.values()) == ["rank 0", "rank 0 · GPU", "rank 1", "rank 1 · GPU"]
    # each rank's first GPU op: (start_ns + clock_offset_ns + refine - origin) / 1000, from the store
    first = _table(s, """SELECT g.rank, min(g.start_ns + r.clock_offset_ns + coalesce(r.clock_refine_ns, 0)) AS t
                         FROM gpu_ops g JOIN runs r USING (run, rank) GROUP BY 1 ORDER BY 1""")
    origin = doc["otherData"]["origin_ns"]
    by_proc = defaultdict(lambda: float("inf"))
    for e in doc["traceEvents"]:
        if e["ph"] == "X" and e["cat"] in ("kernel", "gpu_memcpy", "gpu_memset"):
            by_proc[procs[e["pid"]]] = min(by_proc[procs[e["pid"]]], e["ts"])
    for rank, t in first.iter_rows():
        assert by_proc[f"rank {rank} · GPU"] == pytest.approx((t - origin) / 1000, abs=1e-3)
    assert [r["gpu_ops"] for r in res.ranks] == _table(s, "SELECT count(*) FROM gpu_ops GROUP BY rank ORDER BY rank")[:, 0].to_list()


def test_ddp_rank_exports_reingest_to_the_same_counts_per_rank(tmp_path):
    """One file per rank (--rank N) re-ingests to the same rank and the same counts; the
    all-ranks file re-ingests as one rank holding every GPU op."""
    s = tmp_path / "s"
    ingest([SAMPLES / "gpu" / "ddp_gloo_straggler"], store=s, run="ddp", jobs=1)
    files = [open_store(s).export(tmp_path / f"r{r}.json.gz", "ddp", rank=r, findings=False).path for r in (0, 1)]
    ingest(files, store=tmp_path / "back", run="back", jobs=1)
    q = "SELECT rank, count(*) FROM {t} GROUP BY rank ORDER BY rank"
    for t in ("gpu_ops", "host_ops", "regions"):
        assert _table(s, q.format(t=t)).rows() == _table(tmp_path / "back", q.format(t=t)).rows(), t
    whole = open_store(s).export(tmp_path / "all.json", "ddp", findings=False).path
    ingest([whole], store=tmp_path / "all", run="all", jobs=1)
    assert _table(tmp_path / "all", "SELECT count(*) FROM gpu_ops").item() == \
        _table(s, "SELECT count(*) FROM gpu_ops").item()


def test_nsys_export_reingests_with_the_same_gpu_ops(tmp_path):
    s = tmp_path / "s"
    ingest([SAMPLES / "nsys_sample.sqlite"], store=s, run="nsys", jobs=1)
    out = tmp_path / "nsys.json.gz"
    open_store(s).export(out, "nsys", findings=False)
    ingest([out], store=tmp_path / "back", run="back", jobs=1)
    q = "SELECT name, kind, device, stream, end_ns - start_ns AS dur FROM gpu_ops ORDER BY start_ns, name, stream"
    a, b = _table(s, q), _table(tmp_path / "back", q)
    assert a.height == b.height > 0
    assert a.equals(b)


def test_bad_run_and_missing_directory_are_one_line_errors(tmp_path, synth):
    d, _, _ = synth
    r = run_traceq("export", "nope", "-o", tmp_path / "x.json", "--store", d / "s", cwd=tmp_path)
    assert r.returncode != 0 and r.stderr.count("\n") == 1 and "no run named 'nope'" in r.stderr
    r = run_traceq("export", "syn", "-o", tmp_path / "missing" / "x.json", "--store", d / "s", cwd=tmp_path)
    assert r.returncode != 0 and r.stderr.count("\n") == 1 and "no such directory" in r.stderr
    r = run_traceq("export", "syn", "-o", tmp_path / "ok.json.gz", "--store", d / "s", cwd=tmp_path)
    assert r.returncode == 0 and "ok.json.gz: run syn, 1 rank(s)" in r.stdout
    assert gzip.decompress((tmp_path / "ok.json.gz").read_bytes()).startswith(b'{"traceEvents"')
    r = run_traceq("export", "syn", "-f", "svg", "-o", tmp_path / "y.json", "--store", d / "s", cwd=tmp_path)
    assert r.returncode != 0 and "choose perfetto or chrome" in r.stderr


def test_lanes_match_a_brute_force_nesting_check():
    rng = np.random.default_rng(7)
    for _ in range(500):
        n = int(rng.integers(1, 12))
        track, start = rng.integers(0, 2, n), rng.integers(0, 12, n)
        end = start + rng.integers(0, 6, n)
        brute = not any(track[i] == track[j] and start[i] < start[j] < end[i] < end[j]
                        for i in range(n) for j in range(n))
        assert nests(track, start, end) == brute
        lane = lanes(track, start, end)
        assert nests(track * 100 + lane, start, end)
        assert brute == (not lane.any())
