"""traceq overview (the TensorBoard profiler plugin's Overview page): a synthetic Kineto trace
whose breakdown is derived by hand below, and the plugin's own numbers
(tests/data/tb_reference/*.json, torch-tb-profiler 0.4.3 via benchmarks/tb_reference.py) on the
shared traces it reads: per step every category within ±1.5 µs, step names equal, the
averages, and GPU utilization / SM efficiency / occupancy within ±0.02 pp."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import shared_trace
from kineto_synth import GPU_PID, HOST_PID, HOST_TID, STREAM, Trace

from traceq.analyses.overview import CATEGORIES, averages, overview_scoped
from traceq.analyses.registry import REGISTRY, compute
from traceq.engine.scope import open_scope
from traceq.engine.tb_window import ensure_tb_steps
from traceq.ingest import ingest
from traceq.kernels.tensor_cores import uses_tensor_cores

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "tests" / "data" / "tb_reference"
US = 1000
TC_KERNEL = "volta_h884gemm_64x64_ldg8_nn"


def _legacy_trace() -> Trace:
    """A trace in the 2021 spelling (Operator / Runtime / Kernel / Memcpy / Memset: the only one
    whose runtime calls torch-tb-profiler 0.4.3 knows), µs:

    ProfilerStep#1 [0, 100]: DataLoader __next__ [5, 25]; aten::conv [30, 60] launches (Runtime
      [40, 45]) kernel K1 [50, 80] and (Runtime [46, 48]) a memcpy [70, 90] that overlaps K1;
      an unmatched memcpy [10, 20] (no runtime call) ends before K1: step 1 starts at 20.
    ProfilerStep#2 [100, 200]: aten::mm [110, 150] launches (Runtime [120, 125]) the tensor-core
      kernel K2 [130, 240], which spills past the host end, and (Runtime [130, 132]) a memset
      [240, 245]: step 2 ends at 245.
    ProfilerStep#3 [200, 300]: aten::relu [210, 260] launches (Runtime [220, 222]) K3 [250, 270]
      and (Runtime [225, 227]) K4 [275, 280]: starts at 245 (step 2's end), ends at 300.
    ProfilerStep#4 [300, 350]: one launch (K5 [320, 330]), 1 < 80 % of step 3's 2 ops: dropped.
    Kernel args: blocks per SM K1 0.5, K2 2, K3 0.25 (K4, K5 none); occupancy K1 40, K2 60, K3 20 %.
    """
    t = Trace("Tesla V100-SXM2-16GB")
    corr = iter(range(1, 100))

    def x(cat, name, ts, dur, pid=HOST_PID, tid=HOST_TID, **args):
        t.events.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
                         "args": args})

    def launch(ts, dur, cat, name, k_ts, k_dur, **kargs):
        c = next(corr)
        x("Runtime", "cudaLaunchKernel" if cat == "Kernel" else "cudaMemcpyAsync", ts, dur, correlation=c,
          **{"external id": c})
        x(cat, name, k_ts, k_dur, pid=GPU_PID, tid=STREAM, correlation=c, device=0, stream=STREAM,
          **{"external id": c}, **kargs)

    for n, ts, dur in ((1, 0, 100), (2, 100, 100), (3, 200, 100), (4, 300, 50)):
        x("Operator", f"ProfilerStep#{n}", ts, dur)
    x("Operator", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 5, 20)
    x("Memcpy", "Memcpy HtoD (Pageable -> Device)", 10, 10, pid=GPU_PID, tid=STREAM, correlation=999, device=0,
      stream=STREAM)
    x("Operator", "aten::conv2d", 30, 30)
    launch(40, 5, "Kernel", "k1", 50, 30, **{"blocks per SM": 0.5, "est. achieved occupancy %": 40})
    launch(46, 2, "Memcpy", "Memcpy DtoD (Device -> Device)", 70, 20)
    x("Operator", "aten::mm", 110, 40)
    launch(120, 5, "Kernel", TC_KERNEL, 130, 110, **{"blocks per SM": 2.0, "est. achieved occupancy %": 60})
    launch(130, 2, "Memset", "Memset (Device)", 240, 5)
    x("Operator", "aten::relu", 210, 50)
    launch(220, 2, "Kernel", "k3", 250, 20, **{"blocks per SM": 0.25, "est. achieved occupancy %": 20})
    launch(225, 2, "Kernel", "k4", 275, 5)
    x("Operator", "aten::add", 305, 35)
    launch(310, 2, "Kernel", "k5", 320, 10)
    return t


# Hand-computed (µs), steps [20, 100], [100, 245], [245, 300] (tb window):
# step 1: Kernel K1 30; Memcpy [80, 90] 10 (under K1 until 80); Runtime 5 + 2; DataLoader [20, 25] 5;
#   CPU Exec conv [30, 60] less Runtime and K1: [30,40] [45,46] [48,50] = 13; Other [25,30] [90,100] = 15
# step 2: Kernel K2 [130, 240] 110; Memset 5; Runtime [120,125] 5 ([130,132] under K2);
#   CPU Exec mm [110,120] [125,130] = 15 (relu [210, 245] is under K2 / the memset); Other [100,110] 10
# step 3: Kernel K3 20 + K4 5; CPU Exec relu [245, 250] 5; Other [270,275] [280,300] 25
EXPECTED = {
    "1": dict(step=80, kernel=30, memcpy=10, memset=0, communication=0, runtime=7, dataloader=5, cpu_exec=13,
              other=15),
    "2": dict(step=145, kernel=110, memcpy=0, memset=5, communication=0, runtime=5, dataloader=0, cpu_exec=15,
              other=10),
    "3": dict(step=55, kernel=25, memcpy=0, memset=0, communication=0, runtime=0, dataloader=0, cpu_exec=5,
              other=25),
}


@pytest.fixture(scope="module")
def legacy_store(tmp_path_factory):
    d = tmp_path_factory.mktemp("overview")
    ingest([_legacy_trace().write(d / "legacy.pt.trace.json.gz")], store=d / "s", jobs=1)
    return d / "s"


def test_tb_steps_move_to_the_device_side_and_drop_the_short_tail(legacy_store):
    scope = open_scope(legacy_store)
    ensure_tb_steps(scope)
    rows = scope.df("SELECT step, start_ns, end_ns, matched FROM tb_steps ORDER BY idx").rows()
    assert rows == [("1", 20 * US, 100 * US, 2), ("2", 100 * US, 245 * US, 2), ("3", 245 * US, 300 * US, 2)]


def test_breakdown_by_priority_hand_computed(legacy_store):
    steps = overview_scoped(open_scope(legacy_store), "tb")["steps"]
    got = {r["step"]: {k[:-3]: v // US for k, v in r.items() if k.endswith("_ns")} for r in steps.to_dicts()}
    assert got == EXPECTED
    for r in steps.to_dicts():   # the categories add up to the step
        assert sum(r[f"{c}_ns"] for c in CATEGORIES) == r["step_ns"]
    avg = averages(steps).row(0, named=True)
    assert avg["step"] == "average" and avg["step_ns"] == pytest.approx((80 + 145 + 55) * US / 3)
    assert avg["kernel_ns"] == pytest.approx((30 + 110 + 25) * US / 3)


def test_gpu_summary_hand_computed(legacy_store):
    """Window [20, 300] = 280 µs; kernels in it K1 30 + K2 110 + K3 20 + K4 5 = 165 µs."""
    assert uses_tensor_cores(TC_KERNEL) and not uses_tensor_cores("k1")
    g = overview_scoped(open_scope(legacy_store), "tb")["gpu"].row(0, named=True)
    assert (g["rank"], g["device"], g["name"]) == (0, 0, "Tesla V100-SXM2-16GB")
    assert g["gpu_utilization_pct"] == pytest.approx(100 * 165 / 280)
    assert g["tensor_core_pct"] == pytest.approx(100 * 110 / 165)
    # min(blocks per SM, 1) over time: 0.5·30 + 1·110 + 0.25·20 = 130 of 280
    assert g["sm_efficiency_pct"] == pytest.approx(100 * 130 / 280)
    assert g["achieved_occupancy_pct"] == pytest.approx((40 * 30 + 60 * 110 + 20 * 20) / 160)


def test_window_all_splits_traceqs_host_steps(legacy_store):
    """--window all: the ProfilerStep spans as they are, exact ns; --skip-first drops step 1.
    Step 2 [100, 200]: K2 [130, 200] 70; Runtime 5; CPU Exec [110,120] [125,130] 15; Other 10."""
    res = compute(REGISTRY["overview"], legacy_store, window="all", skip_first=1)
    rows = {r["step"]: r for r in res.df.to_dicts()}
    assert list(rows) == ["2", "3", "4"]
    r = rows["2"]
    assert (r["step_ns"], r["kernel_ns"], r["runtime_ns"], r["cpu_exec_ns"], r["other_ns"]) == \
        (100 * US, 70 * US, 5 * US, 15 * US, 10 * US)
    assert res.tables["average"]["step"].to_list() == ["average"]


def test_window_tb_refuses_traceqs_step_selection(legacy_store):
    from traceq.errors import TraceqError

    with pytest.raises(TraceqError, match="--window all"):
        compute(REGISTRY["overview"], legacy_store, window="tb", skip_first=1)
    # the default window (all) takes the step options as every analysis does
    assert compute(REGISTRY["overview"], legacy_store, skip_first=1).df["step"].to_list() == ["2", "3", "4"]


def test_modern_runtime_category_is_no_runtime_to_the_plugin(tmp_path):
    """cuda_runtime (PyTorch >= 1.10) is unknown to torch-tb-profiler 0.4.3: no Runtime time and
    the steps stay on the host side."""
    t = Trace()
    t.step(1, 0, 100)
    t.cpu_op("aten::mm", 10, 30)
    t.launch("k", 15, 5, 50, 80)
    d = tmp_path / "t"
    ingest([t.write(d / "t.pt.trace.json.gz")], store=d / "s", jobs=1)
    r = overview_scoped(open_scope(d / "s"), "tb")["steps"].row(0, named=True)
    # step [0, 100] (host); kernel [50, 100] 50; CPU Exec [10, 40] 30; Other 20
    assert (r["step_ns"], r["kernel_ns"], r["runtime_ns"], r["cpu_exec_ns"], r["other_ns"]) == \
        (100 * US, 50 * US, 0, 30 * US, 20 * US)


def test_json_rows_and_tables_have_the_issue_shape(legacy_store):
    res = compute(REGISTRY["overview"], legacy_store, window="tb")
    doc = json.loads(res.to_json())
    assert list(doc["rows"][0]) == ["run", "rank", "step", "step_ns", "kernel_ns", "memcpy_ns", "memset_ns",
                                    "communication_ns", "runtime_ns", "dataloader_ns", "cpu_exec_ns", "other_ns"]
    assert list(doc["gpu"][0]) == ["rank", "device", "name", "gpu_utilization_pct", "sm_efficiency_pct",
                                   "achieved_occupancy_pct", "tensor_core_pct"]
    assert doc["average"][0]["step"] == "average" and list(doc["average"][0]) == list(doc["rows"][0])
    assert "average step 93.3 µs over 3 steps" in res.headline
    assert doc["window"] == "tb" and "(the plugin's: kernels only)" in res.headline


def test_default_window_utilization_is_the_ledgers_busy(legacy_store):
    """One number per concept: overview's GPU utilization (default window) is the time ledger's
    GPU busy, the 100 − idle % that summary prints for the same rank and steps."""
    from traceq.analyses.summary import summary_scoped

    for kw in ({}, {"skip_first": 1}):
        res = compute(REGISTRY["overview"], legacy_store, **kw)
        util = res.tables["gpu"]["gpu_utilization_pct"][0]
        s = summary_scoped(open_scope(legacy_store, **kw)).row(0, named=True)
        assert util == pytest.approx(100.0 * s["busy_ns"] / s["span_ns"], abs=1e-9)
        assert util == pytest.approx(100.0 - s["idle_pct"], abs=1e-9)
        assert f"GPU utilization {util:.1f} % (GPU busy of the step windows" in res.headline


# ---------------------------------------------------------------- against the plugin
sys.path.insert(0, str(ROOT / "benchmarks"))
from tb_reference import TRACES  # noqa: E402

READ = sorted(p.stem for p in REF.glob("*.json"))
TIME_US, PCT = 1.5, 0.02


@pytest.fixture(scope="module")
def plugin_stores(tmp_path_factory):
    return tmp_path_factory.mktemp("tb_overview")


def _store(root: Path, name: str) -> Path:
    src = shared_trace(TRACES[name])
    d = root / name
    if not d.exists():
        ingest([src], store=d, jobs=1)
    return d


@pytest.mark.parametrize("name", READ)
def test_equal_to_the_plugin(plugin_stores, name):
    ref = json.loads((REF / f"{name}.json").read_text())
    parts = overview_scoped(open_scope(_store(plugin_stores, name)), "tb")
    steps = parts["steps"].to_dicts()
    assert [r["step"] for r in steps] == [s["name"] for s in ref["steps"]]
    for r, s in zip(steps, ref["steps"]):
        assert r["step_ns"] / US == pytest.approx(s["total"], abs=TIME_US)
        for c in CATEGORIES:
            assert r[f"{c}_ns"] / US == pytest.approx(s[c], abs=TIME_US), (s["name"], c)
    avg = averages(parts["steps"]).row(0, named=True)
    for c in CATEGORIES:
        assert avg[f"{c}_ns"] / US == pytest.approx(ref["avg"][c], abs=TIME_US), c
    gpu = parts["gpu"].to_dicts()
    assert [g["device"] for g in gpu] == [g["device"] for g in ref["gpu"]]
    for g, rg in zip(gpu, ref["gpu"]):
        assert g["gpu_utilization_pct"] == pytest.approx(100 * rg["utilization"], abs=PCT)
        # None in the plugin: the trace records no blocks per SM / occupancy (traceq may compute them:
        # traceq/kernels/occupancy.py)
        if rg["sm_efficiency"] is not None:
            assert g["sm_efficiency_pct"] == pytest.approx(100 * rg["sm_efficiency"], abs=PCT)
        if rg["occupancy"] is not None:
            assert g["achieved_occupancy_pct"] == pytest.approx(rg["occupancy"], abs=PCT)
        if rg["tc_ratio"] is not None:   # the plugin's name list and traceq's classifier agree here
            assert g["tensor_core_pct"] == pytest.approx(100 * rg["tc_ratio"], abs=PCT)
