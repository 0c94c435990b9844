"""The time ledger (traceq.engine.ledger, `traceq steps`): every instant of every step window
labelled once. A synthetic Kineto trace whose ledger is computed by hand below (µs; the
labels' precedence is queries/ledger.sql's), invariants on every sample and shared trace, and
the figures of summary, diagnose, steps and the findings compared command by command."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SAMPLES, SHARED_TRACES
from kineto_synth import Trace
from typer.testing import CliRunner

from traceq.engine.ledger import LABEL_COLUMNS, ledger
from traceq.engine.scope import open_scope

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
DATALOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def three_steps() -> Trace:
    """Step 1 [0, 1000): a host-only prefix, a kernel, a DataLoader wait, an all-reduce partly
    hidden by a kernel, a synchronize, a copy, a host tail. Step 2 [1000, 1500): a cudaFree
    (also called in step 1: recurring), a one-off module load, a kernel launched at 1400 that
    runs to 1700 (the step's window stretches to 1700). Step 3 [1500, 2000): host work only; its
    window starts where step 2's ends (1700)."""
    t = Trace()
    t.step(1, 0, 1000)
    t.cpu_op("aten::preprocess", 0, 200)                      # host only: host_compute [0, 200)
    t.launch("gemm_kernel", 200, 10, 220, 180)                # launch [200, 210), unattributed [210, 220)
    t.runtime("cudaFree", 300, 10)                            # under a running kernel: no label; recurs
    t.annotation(DATALOADER, 400, 200)                        # data [400, 600)
    t.launch(NCCL, 590, 5, 600, 100)                          # communication [600, 700) ...
    t.launch("add_kernel", 595, 3, 650, 30)                   # ... hidden under compute [650, 680)
    t.runtime("cudaDeviceSynchronize", 700, 100)              # sync [700, 800)
    t.launch("Memcpy HtoD (Pinned -> Device)", 800, 10, 820, 80, api="cudaMemcpyAsync", cat="gpu_memcpy")
    t.cpu_op("aten::post", 900, 50)                           # host_compute [900, 950), unattributed to 1000
    t.step(2, 1000, 500)
    t.runtime("cudaFree", 1000, 100)                          # recurring: memory_management
    t.runtime("cuModuleLoadData", 1100, 200)                  # one-off: warmup
    t.launch("gemm_kernel", 1400, 10, 1450, 250)              # unattributed [1300,1400), launch, unattributed [1410, 1450)
    t.step(3, 1500, 500)
    t.cpu_op("aten::post", 1500, 300)                         # host_compute [1700, 1800) of the window [1700, 2000)
    return t


# the ledger by hand, µs per label: (window start, end, {label: µs})
EXPECTED = [
    (0, 1000, {"compute": 180 + 30, "communication": 70, "copy": 80, "data": 200, "sync": 100, "launch": 10 + 10,
               "host_compute": 200 + 50, "unattributed": 10 + 10 + 50}),
    (1000, 1700, {"compute": 250, "memory_management": 100, "warmup": 200, "launch": 10, "unattributed": 100 + 40}),
    (1700, 2000, {"host_compute": 100, "unattributed": 200}),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    from traceq.ingest import ingest

    d = tmp_path_factory.mktemp("ledger")
    ingest([three_steps().write(d / "t.json.gz")], d / "store", run="t")
    return d / "store"


def test_hand_computed_ledger_exact_ns(store):
    rows = ledger(open_scope(store, "t")).steps.sort("start_ns")
    assert rows.height == 3
    t0 = rows["start_ns"][0]
    for row, (lo, hi, want) in zip(rows.iter_rows(named=True), EXPECTED):
        assert (row["start_ns"] - t0, row["end_ns"] - t0) == (lo * 1000, hi * 1000)
        got = {c[:-3]: row[c] for c in LABEL_COLUMNS if row[c]}
        assert got == {k: v * 1000 for k, v in want.items()}
        assert sum(row[c] for c in LABEL_COLUMNS) == row["window_ns"]
    first = rows.row(0, named=True)
    assert (first["comm_ns"], first["overlapped_comm_ns"]) == (100_000, 30_000)


def test_commands_print_the_ledgers_numbers(store):
    """summary (default window), diagnose (gpu_idle_pct, its busy share) and steps give one
    busy and idle figure; the idle findings claim disjoint ledger time (at most the windows)."""
    from traceq.cli import app

    window = sum(hi - lo for lo, hi, _ in EXPECTED) * 1000
    busy = sum(w.get(k, 0) for _, _, w in EXPECTED for k in ("compute", "communication", "copy")) * 1000
    r = CliRunner()
    summ = json.loads(r.invoke(app, ["summary", "--store", str(store), "-f", "json"]).output)["rows"][0]
    assert (summ["span_ns"], summ["busy_ns"], summ["idle_ns"]) == (window, busy, window - busy)
    diag = json.loads(r.invoke(app, ["diagnose", "--store", str(store), "-f", "json"]).output)["runs"][0]
    assert diag["gpu_idle_pct"] == pytest.approx(100.0 * (window - busy) / window, abs=1e-3)
    assert f"GPU busy {100.0 * busy / window:.1f} % of the step windows" in diag["evidence"]
    steps = json.loads(r.invoke(app, ["steps", "--store", str(store), "-f", "json"]).output)["rows"]
    assert sum(s["busy_ns"] for s in steps) == busy and sum(s["window_ns"] for s in steps) == window
    # overview's GPU utilization (default window) is the same busy; overlap's exposed time is the
    # ledger's communication label, over the same windows, per rank and per step
    ov = json.loads(r.invoke(app, ["overview", "--store", str(store), "-f", "json"]).output)
    assert ov["window"] == "all" and ov["gpu"][0]["gpu_utilization_pct"] == pytest.approx(100.0 * busy / window)
    exposed = sum(w.get("communication", 0) for _, _, w in EXPECTED) * 1000
    ovl = json.loads(r.invoke(app, ["overlap", "--store", str(store), "-f", "json"]).output)["rows"][0]
    assert (ovl["exposed_ns"], ovl["step_ns"]) == (exposed, window)
    by_step = json.loads(r.invoke(app, ["overlap", "--store", str(store), "--by", "step", "-f", "json"]).output)
    assert {x["step"]: x["exposed_ns"] for x in by_step["rows"]} == \
        {s["step"]: s["communication_ns"] for s in steps if s["step"] in {x["step"] for x in by_step["rows"]}}
    idle_ids = {"dataloader", "exposed_communication", "remove_syncs", "allocator_churn", "warmup",
                "launch_overhead", "host_bound", "idle_in_range"}
    claimed = [f for f in diag["findings"] + diag.get("also_seen", []) if f["id"] in idle_ids]
    assert sum(f["gpu_ms"] for f in claimed) <= window / 1e6 + 1e-9
    by_id = {f["id"]: f["gpu_ms"] for f in claimed}
    if "warmup" in by_id:
        assert by_id["warmup"] == pytest.approx(0.2)
    if "allocator_churn" in by_id:
        assert by_id["allocator_churn"] == pytest.approx(0.1)


def _stores():
    out = [p for p in sorted((SAMPLES / "gpu").iterdir()) if p.is_dir()]
    shared = [SHARED_TRACES / rel for rel in (
        "kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz",
        "kineto/hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
        "kineto/param/resnet_kineto.json.gz",
        "nsys/llama3-inference/demo.sqlite")]
    return out + [p for p in shared if p.exists()]


@pytest.mark.parametrize("src", _stores(), ids=lambda p: p.name)
def test_labels_partition_every_window(src, tmp_path):
    """On every GPU sample and the shared traces at hand: per step the labels add up to the
    window exactly, busy <= window, windows of a rank and device do not overlap."""
    import polars as pl

    from traceq.ingest import ingest

    ingest([src], tmp_path / "s", run="r")
    s = ledger(open_scope(tmp_path / "s", "r")).steps
    assert s.height
    assert s.filter(pl.sum_horizontal([pl.col(c) for c in LABEL_COLUMNS]) != pl.col("window_ns")).height == 0
    assert (s["busy_ns"] <= s["window_ns"]).all() and (s["window_ns"] >= 0).all()
    assert (s["overlapped_comm_ns"] >= 0).all() and (s["late_unattributed_ns"] <= s["unattributed_ns"]).all()
    ordered = s.sort("rank", "device", "start_ns").with_columns(
        pl.col("end_ns").shift(1).over("rank", "device").alias("prev_end"))
    assert ordered.filter(pl.col("prev_end") > pl.col("start_ns")).height == 0
    # one number per concept on real traces: summary (default window) and steps give the same
    # busy and idle; the idle findings of the run claim at most its windows together
    from traceq import api
    from traceq.engine.findings import run_findings

    st = api.open_store(tmp_path / "s")
    summ = st.result("summary", run="r").df
    assert int(summ["busy_ns"].sum()) == int(s["busy_ns"].sum())
    assert int(summ["span_ns"].sum()) == int(s["window_ns"].sum())
    idle_ids = {"dataloader", "exposed_communication", "remove_syncs", "allocator_churn", "warmup",
                "launch_overhead", "host_bound", "idle_in_range"}
    fs = run_findings(open_scope(tmp_path / "s", "r"))
    claimed = sum(f.gpu_ms for f in [*fs, *getattr(fs, "also", [])] if f.id in idle_ids)
    assert claimed <= int(s["window_ns"].sum()) / 1e6 + 1e-6
