"""Kineto / Chrome-trace ingest: counts against the raw JSON, ns precision, launch links,
and one test per format quirk. Expected values are computed here from the source with
the standard `json` module (a second reading of the same file), or derived by hand for
the small synthetic traces written by the tests."""
from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest

from conftest import SHARED_TRACES, shared_kineto_traces, shared_trace
from traceq.ingest import ingest
from traceq.store import Store, fetch_pl

KINETO_FILES = shared_kineto_traces()

GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy", "gpu_memset": "memset",
            "memset": "memset", "cuda_sync": "sync"}


def load_json(path: Path, **kw):
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw, **kw)


def events_of(doc):
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def q(store: Path, sql: str) -> pl.DataFrame:
    return fetch_pl(Store(store).connect(), sql)


def is_region(e) -> bool:
    cat = str(e.get("cat", "")).lower()
    name = str(e.get("name", ""))
    named = name.startswith("ProfilerStep#") or name.startswith(("enumerate(DataLoader)#", "enumerate(DataPipe)#"))
    return cat in ("user_annotation", "gpu_user_annotation") or (cat in ("cpu_op", "operator") and named)


def expected_counts(events) -> dict:
    """Independent reading: complete events by category, as DESIGN §3 maps them."""
    xs = [e for e in events if e.get("ph") == "X"]
    gpu = {}
    for e in xs:
        kind = GPU_CATS.get(str(e.get("cat", "")).lower())
        if kind:
            gpu[kind] = gpu.get(kind, 0) + 1
    regions = sum(1 for e in xs if is_region(e))
    host = sum(1 for e in xs if str(e.get("cat", "")).lower() not in GPU_CATS and not is_region(e)
               and str(e.get("cat", "")).lower() != "trace" and isinstance(e.get("pid"), int | str)
               and not (isinstance(e.get("pid"), str) and not e["pid"].strip().lstrip("-").isdigit()))
    return {"gpu": gpu, "regions": regions, "host": host}


@pytest.mark.parametrize("rel", KINETO_FILES)
def test_every_shared_kineto_trace_ingests_with_source_row_counts(rel, tmp_path):
    path = shared_trace(rel)
    res = ingest([path], store=tmp_path / "s")
    assert res[0].status == "added"
    exp = expected_counts(events_of(load_json(path)))
    got_gpu = dict(q(tmp_path / "s", "SELECT kind, count(*) AS n FROM gpu_ops GROUP BY kind").iter_rows())
    assert got_gpu == exp["gpu"]
    assert q(tmp_path / "s", "SELECT count(*) AS n FROM regions")["n"][0] == exp["regions"]
    assert q(tmp_path / "s", "SELECT count(*) AS n FROM host_ops")["n"][0] == exp["host"]


def test_kernel_count_of_control_trace_is_the_number_of_kernel_events(tmp_path):
    path = shared_trace("kineto/hta/trace_diff/control/control.json.gz")
    ingest([path], store=tmp_path / "s")
    n_kernel_events = sum(1 for e in events_of(load_json(path)) if e.get("cat") == "kernel")
    assert n_kernel_events == 8568   # CATALOG.md: kernel=8568
    assert q(tmp_path / "s", "SELECT count(*) AS n FROM gpu_ops WHERE kind = 'kernel'")["n"][0] == 8568
    run = q(tmp_path / "s", "SELECT * FROM runs").row(0, named=True)
    assert (run["rank"], run["world_size"], run["source_format"]) == (3, 8, "kineto")
    assert json.loads(run["devices"])[3]["name"] == "NVIDIA A100-PG509-200"


def test_relative_timestamps_keep_exact_nanoseconds(tmp_path):
    """The ROCm trace writes `ts` as "<µs>.<3-digit ns>" relative to baseTimeNanoseconds."""
    path = shared_trace("kineto/hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    ingest([path], store=tmp_path / "s")
    doc = load_json(path, parse_float=Decimal)
    expected = sorted((e["name"], int(Decimal(e["ts"]) * 1000), int((Decimal(e["ts"]) + Decimal(e["dur"])) * 1000))
                      for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel")
    got = sorted(q(tmp_path / "s", "SELECT name, start_ns, end_ns FROM gpu_ops WHERE kind = 'kernel'").iter_rows())
    assert got == expected
    assert any(s % 1000 for _, s, _ in got)   # sub-µs digits really are there
    assert q(tmp_path / "s", "SELECT clock_offset_ns FROM runs")["clock_offset_ns"][0] == doc["baseTimeNanoseconds"]


def test_absolute_float_timestamps_keep_the_nanoseconds_of_dur(tmp_path):
    """Absolute epoch-µs floats (ns_resolution_trace): starts carry what the double holds
    (0.25 µs steps at 1.7e15), durations keep their ns digits exactly."""
    path = shared_trace("kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
    ingest([path], store=tmp_path / "s")
    doc = load_json(path, parse_float=Decimal)
    durs = sorted(int(Decimal(e["dur"]) * 1000) for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel")
    got = sorted(q(tmp_path / "s", "SELECT end_ns - start_ns AS d FROM gpu_ops WHERE kind = 'kernel'")["d"].to_list())
    assert got == durs
    starts = q(tmp_path / "s", "SELECT start_ns FROM gpu_ops WHERE kind = 'kernel'")["start_ns"]
    exp_starts = sorted(round(float(e["ts"]) * 4) * 250 for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel")
    assert sorted(starts.to_list()) == exp_starts


@pytest.mark.parametrize("rel", [
    "kineto/hta/trace_diff/control/control.json.gz",
    "kineto/hta/triton_example/triton_example.json.gz",          # cuLaunchKernel (cuda_driver)
    "kineto/hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",  # hipLaunchKernel
    "kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz",  # 2021 capitalised cats
])
def test_every_kernel_finds_its_launch_call(rel, tmp_path):
    path = shared_trace(rel)
    ingest([path], store=tmp_path / "s")
    events = events_of(load_json(path))
    launch_corr = {e["args"]["correlation"] for e in events
                   if e.get("ph") == "X" and str(e.get("cat")).lower() in ("cuda_runtime", "runtime", "cuda_driver")
                   and "correlation" in e.get("args", {})}
    kernels = [e for e in events if e.get("ph") == "X" and str(e.get("cat")).lower() == "kernel"]
    linkable = sum(1 for e in kernels if e.get("args", {}).get("correlation") in launch_corr)
    assert linkable > 0
    linked = q(tmp_path / "s", """
        SELECT count(*) AS n FROM gpu_ops g
        WHERE g.kind = 'kernel' AND EXISTS (
            SELECT 1 FROM host_ops h WHERE h.run = g.run AND h.rank = g.rank AND h.pid = g.pid
              AND h.correlation = g.correlation AND h.kind IN ('runtime', 'driver', 'sync_api'))""")["n"][0]
    assert linked == linkable
    # GPU ops keep device, stream and correlation
    missing = q(tmp_path / "s", "SELECT count(*) AS n FROM gpu_ops WHERE device IS NULL OR stream IS NULL OR correlation IS NULL")
    assert missing["n"][0] == 0


def test_2021_trace_string_tids_and_lowercase_external_id(tmp_path):
    path = shared_trace("kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz")
    ingest([path], store=tmp_path / "s")
    # GPU tids are "stream 7": the stream is 7; CPU tids are numeric strings
    assert q(tmp_path / "s", "SELECT DISTINCT stream FROM gpu_ops")["stream"].to_list() == [7]
    assert q(tmp_path / "s", "SELECT count(*) AS n FROM host_ops WHERE tid = 1890023232")["n"][0] > 0
    assert q(tmp_path / "s", "SELECT count(*) AS n FROM gpu_ops WHERE external_id IS NOT NULL")["n"][0] > 0
    steps = q(tmp_path / "s", "SELECT step FROM regions WHERE source = 'step' ORDER BY step")["step"].to_list()
    assert len(steps) == 6


def test_rocm_hex_stream_strings_and_memcpy_kind(tmp_path):
    path = shared_trace("kineto/hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    ingest([path], store=tmp_path / "s")
    cp = q(tmp_path / "s", "SELECT DISTINCT copy_kind FROM gpu_ops WHERE kind = 'memcpy'")["copy_kind"].to_list()
    assert cp == ["HtoD"]
    assert q(tmp_path / "s", "SELECT count(*) AS n FROM host_ops WHERE name LIKE 'hip%'")["n"][0] > 0


def test_secrets_in_trace_metadata_never_reach_the_store(tmp_path):
    path = shared_trace("kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
    ingest([path], store=tmp_path / "s")
    con = Store(tmp_path / "s").connect()
    text = []
    for view in ("runs", "gpu_ops", "host_ops", "regions"):
        df = fetch_pl(con, f"SELECT * FROM {view}")
        for col in df.columns:
            if df[col].dtype == pl.String:
                text.extend(v for v in df[col].unique().to_list() if v)
    blob = "\n".join(text)
    for secret in ("sraikund", "torchx-pytorch_resnet_integration_test", "094DFF9CD7781F8ADDEAFBA6A8855CA7", "mast_hpc"):
        assert secret not in blob
    assert fetch_pl(con, "SELECT host FROM runs")["host"][0] == "twshared39868.02.pnb3.facebook.com"


# ---------------------------------------------------------------- synthetic quirks
def write(tmp_path: Path, name: str, doc) -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


def test_bare_array_string_timestamps_and_begin_end_pairs(tmp_path):
    # Thread 1: B outer@100 .. E@400 contains B inner@150 .. E@250; a complete X at "500.5" µs for 2.25 µs;
    # a B at 600 that never ends (open until the trace's last timestamp, 602.75 µs -> flagged).
    events = [
        {"ph": "B", "cat": "cpu_op", "name": "outer", "pid": 1, "tid": 1, "ts": 100},
        {"ph": "B", "cat": "cpu_op", "name": "inner", "pid": 1, "tid": 1, "ts": 150},
        {"ph": "E", "pid": 1, "tid": 1, "ts": 250},
        {"ph": "E", "pid": 1, "tid": 1, "ts": 400},
        {"ph": "X", "cat": "cpu_op", "name": "x", "pid": "1", "tid": "1", "ts": "500.5", "dur": "2.25"},
        {"ph": "B", "cat": "cpu_op", "name": "open", "pid": 1, "tid": 1, "ts": 600},
        {"ph": "X", "cat": "cpu_op", "name": "last", "pid": 1, "tid": 1, "ts": 601, "dur": 1.75},
    ]
    ingest([write(tmp_path, "bare.json", events)], store=tmp_path / "s")
    got = {r[0]: r[1:] for r in q(tmp_path / "s", "SELECT name, start_ns, end_ns, unfinished FROM host_ops").iter_rows()}
    assert got == {
        "outer": (100_000, 400_000, False),
        "inner": (150_000, 250_000, False),
        "x": (500_500, 502_750, False),
        "open": (600_000, 602_750, True),
        "last": (601_000, 602_750, False),
    }


def test_profiler_steps_dataloader_and_unfinished_annotations(tmp_path):
    doc = {"traceEvents": [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "pid": 5, "tid": 5, "ts": 0, "dur": 100},
        {"ph": "X", "cat": "user_annotation", "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
         "pid": 5, "tid": 5, "ts": 1, "dur": 30},
        {"ph": "X", "cat": "user_annotation", "name": "forward", "pid": 5, "tid": 5, "ts": 40, "dur": 50,
         "args": {"finished": "false"}},
    ], "baseTimeNanoseconds": 1_700_000_000_000_000_000}
    res = ingest([write(tmp_path, "rank-2.steps.json", doc)], store=tmp_path / "s")
    assert res[0].rank == 2   # from the file name
    rows = q(tmp_path / "s", "SELECT source, name, step, depth, unfinished FROM regions ORDER BY start_ns").rows()
    assert rows == [("step", "ProfilerStep#7", 7, 0, False),
                    ("dataloader", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", None, 1, False),
                    ("annotation", "forward", None, 1, True)]
    assert any("still open" in w for w in res[0].warnings)


def test_truncated_trace_keeps_complete_events_and_warns(tmp_path):
    # 10 complete events, the file cut in the middle of the 11th (a killed writer).
    events = [{"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": i * 10, "dur": 5,
               "args": {"device": 0, "stream": 7, "correlation": i}} for i in range(12)]
    text = json.dumps({"schemaVersion": 1, "traceEvents": events})
    cut = text.index('"name": "k10"') + 5
    p = tmp_path / "cut.json"
    p.write_text(text[:cut])
    res = ingest([p], store=tmp_path / "s")
    assert res[0].counts["gpu_ops"] == 10
    assert any("truncated" in w for w in res[0].warnings)


def test_rank_flag_overrides_and_labels_are_kept(tmp_path):
    path = shared_trace("kineto/hta/trace_filter/sampled_rank-1.json.gz")
    ingest([path], store=tmp_path / "s", rank=5, run="r", labels={"amp": "on"})
    row = q(tmp_path / "s", "SELECT run, rank, labels FROM runs").row(0)
    assert row == ("r", 5, '{"amp": "on"}')
