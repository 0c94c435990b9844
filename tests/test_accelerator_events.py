"""Device events of accelerators other than CUDA/ROCm GPUs belong in gpu_ops (issue 8, defect 7).

The trace below is hand-made with the structure of HTA's MTIA test traces
(tests/data/mtia_trace_single_rank, mtia_inference_trace): the device is a process named
"MTIA <n>" whose on-device events have cat `mtia_ccp_events`; `dma_request` copies carry no
stream on some threads; host launches are `mtia_runtime` events linked by `correlation`.
"""
from __future__ import annotations

import json

import polars as pl
from typer.testing import CliRunner

from traceq.cli import app
from traceq.ingest import ingest
from traceq.store import Store, fetch_pl

HOST, DEV = 3100453, 9


def _x(cat, name, pid, tid, ts, dur, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def mtia_trace() -> dict:
    ev = [
        {"name": "process_name", "ph": "M", "ts": 0, "pid": DEV, "tid": 0, "args": {"name": "MTIA 9"}},
        {"name": "process_labels", "ph": "M", "ts": 0, "pid": DEV, "tid": 0, "args": {"labels": "MTIA 9"}},
        _x("cpu_op", "ProfilerStep#3", HOST, HOST, 1000.0, 500.0),
        _x("cpu_op", "aten::add", HOST, HOST, 1010.0, 50.0),
        _x("mtia_runtime", "runFunction - job_prep_and_submit_for_execution", HOST, HOST, 1020.0, 20.0, correlation=77),
        _x("mtia_runtime", "recordEvent", HOST, HOST, 1100.0, 5.0, correlation=78, device=DEV, stream_id="102"),
        # on the device: a kernel (stream in args), a DMA copy without stream (tid is the stream), a wait
        _x("mtia_ccp_events", "add-dtype", DEV, 408, 1050.0, 30.0, stream=102, correlation=77),
        _x("mtia_ccp_events", "dma_request", DEV, 801, 1090.0, 8.0, direction="DEVICE_TO_HOST", size=16, sqid=1),
        _x("mtia_ccp_events", "event_wait", DEV, 3774, 1100.0, 40.0, stream=108, wait_on_stream=102),
        _x("mtia_ccp_events", "pe_exe", DEV, 3910, 1150.0, 100.0, stream=112, column="0", row="0"),
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 77, "pid": HOST, "tid": HOST, "ts": 1020.0},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 77, "pid": DEV, "tid": 408, "ts": 1050.0, "bp": "e"},
    ]
    return {"schemaVersion": 1, "deviceProperties": [], "traceEvents": ev,
            "distributedInfo": {"backend": "mtia:hccl,cpu:gloo", "rank": 0, "world_size": 1}}


def test_mtia_device_events_are_gpu_ops(tmp_path):
    f = tmp_path / "mtia_rank_0.json"
    f.write_text(json.dumps(mtia_trace()))
    store = tmp_path / "store"
    ingest([f], store, run="mtia")
    con = Store(store).connect()
    g = fetch_pl(con, "SELECT name, kind, device, stream, pid, start_ns, end_ns FROM gpu_ops ORDER BY start_ns")
    assert g.select("name", "kind", "device", "stream").rows() == [
        ("add-dtype", "kernel", 9, 102), ("dma_request", "memcpy", 9, 801),
        ("event_wait", "sync", 9, 108), ("pe_exe", "kernel", 9, 112)]
    assert g["pid"].to_list()[0] == HOST           # the launching process, through correlation 77
    assert g.filter(pl.col("name") == "pe_exe")["end_ns"][0] - g.filter(pl.col("name") == "pe_exe")["start_ns"][0] == 100_000
    host = fetch_pl(con, "SELECT DISTINCT name FROM host_ops")["name"].to_list()
    assert not {"add-dtype", "dma_request", "event_wait", "pe_exe"} & set(host)
    r = CliRunner().invoke(app, ["hotspots", "--store", str(store), "-f", "json"])
    rows = {x["name"]: x for x in json.loads(r.output)["rows"]}
    assert "CPU-only" not in r.output and rows["pe_exe"]["total_ns"] == 100_000 and rows["add-dtype"]["count"] == 1
    assert {x["library"] for x in rows.values()} == {"MTIA"} and rows["pe_exe"]["identity"] == "pe_exe"
