"""traceq operators (the TensorBoard profiler plugin's Operator view) on a synthetic Kineto trace
whose numbers are worked out here by hand (µs), and against the plugin's own output
(torch-tb-profiler 0.4.3, tests/data/tb_reference/*.json keys "operators" and
"operators_by_input") on the shared traces it reads: calls exact, times within 1.5 µs,
tensor-core shares within 0.02 pp."""
from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest
from conftest import shared_trace
from kineto_synth import GPU_PID, STREAM, Trace

from traceq.analyses.operators import operator_calls, table_of
from traceq.analyses.registry import REGISTRY, compute
from traceq.engine.scope import open_scope
from traceq.ingest import ingest

REF = Path(__file__).parent / "data" / "tb_reference"
GEMM = "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_nn"    # tensor cores (traceq's rules and the plugin's list)
RELU = "void at::native::vectorized_elementwise_kernel<4, at::native::relu>(int)"


def _launch(t: Trace, ext: int, corr: int, ts, dur, k_name, k_ts, k_dur, api="cudaLaunchKernel", cat="kernel",
            runtime="runtime"):
    t._x(runtime, api, ts, dur, correlation=corr, **{"External id": ext})
    t._x(cat, k_name, k_ts, k_dur, pid=GPU_PID, tid=STREAM, correlation=corr, device=0, stream=STREAM,
         **{"External id": ext})


def _trace(runtime: str = "runtime") -> Trace:
    """Launch calls of Kineto category `runtime` (PyTorch < 1.10; later: cuda_runtime). One thread, ProfilerStep#1 [0, 200]:
    aten::linear [10, 110] > aten::t [12, 16], aten::addmm [20, 100] (launches the GEMM, 50 µs on
      tensor cores, by a 10 µs call, and a 4 µs memset by a 5 µs call);
    aten::relu [120, 160] > aten::relu [125, 155] (its only child, same name: one call), the inner
      one launches a 10 µs kernel (8 µs call), the outer one a 2 µs kernel (2 µs call at 156);
    aten::mm [170, 190] > aten::empty [175, 175] (no duration);
    aten::copy_ [185, 195] overlaps aten::mm instead of nesting: the plugin leaves it out."""
    t = Trace("NVIDIA A100-SXM4-80GB")
    t.step(1, 0, 200)
    t.cpu_op("aten::linear", 10, 100, **{"External id": 1})
    t.cpu_op("aten::t", 12, 4, **{"External id": 2})
    t.cpu_op("aten::addmm", 20, 80, **{"External id": 3, "Input Dims": [[64], [32, 16], [16, 64], [], []]})
    _launch(t, 3, 5001, 30, 10, GEMM, 300, 50, runtime=runtime)
    _launch(t, 3, 5002, 50, 5, "Memset (Device)", 360, 4, api="cudaMemsetAsync", cat="gpu_memset", runtime=runtime)
    t.cpu_op("aten::relu", 120, 40, **{"External id": 4})
    t.cpu_op("aten::relu", 125, 30, **{"External id": 5})
    _launch(t, 5, 5003, 130, 8, RELU, 370, 10, runtime=runtime)
    _launch(t, 4, 5004, 156, 2, RELU, 390, 2, runtime=runtime)
    t.cpu_op("aten::mm", 170, 20, **{"External id": 6})
    t.cpu_op("aten::empty", 175, 0, **{"External id": 7})
    t.cpu_op("aten::copy_", 185, 10, **{"External id": 8})
    return t


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    d = tmp_path_factory.mktemp("ops")
    ingest([_trace().write(d / "t.pt.trace.json.gz")], store=d / "s", jobs=1)
    return d / "s"


@pytest.fixture(scope="module")
def synth_modern(tmp_path_factory):
    d = tmp_path_factory.mktemp("ops_modern")
    ingest([_trace("cuda_runtime").write(d / "t.pt.trace.json.gz")], store=d / "s", jobs=1)
    return d / "s"


def _rows(store, **kw) -> dict:
    res = compute(REGISTRY["operators"], store, **kw)
    return {r["name"]: r for r in res.df.to_dicts()}, res


US = 1000


def test_plugin_window_trees_dedup_and_external_id_links(synth):
    rows, res = _rows(synth, window="tb")
    assert set(rows) == {"aten::linear", "aten::t", "aten::addmm", "aten::relu", "aten::mm", "aten::empty"}
    assert list(rows["aten::addmm"]) == ["name", "calls", "device_self_ns", "device_total_ns", "host_self_ns",
                                         "host_total_ns", "tc_eligible", "tc_self_pct", "tc_total_pct"]
    lin, add, relu, mm = rows["aten::linear"], rows["aten::addmm"], rows["aten::relu"], rows["aten::mm"]
    # linear: 100 − t 4 − addmm 80 = 16 self; device: addmm's 50 + 4
    assert (lin["calls"], lin["host_total_ns"], lin["host_self_ns"]) == (1, 100 * US, 16 * US)
    assert (lin["device_self_ns"], lin["device_total_ns"], lin["tc_eligible"]) == (0, 54 * US, True)
    assert lin["tc_self_pct"] == 0 and lin["tc_total_pct"] == pytest.approx(100 * 50 / 54)
    # addmm: 80 − its launch calls 10 + 5 = 65 self
    assert (add["host_self_ns"], add["device_self_ns"], add["device_total_ns"]) == (65 * US, 54 * US, 54 * US)
    assert add["tc_self_pct"] == pytest.approx(100 * 50 / 54) and add["tc_eligible"]
    # relu absorbed its inner call: 1 call of 40; it keeps the inner call's launch (8 µs call,
    # 10 µs kernel); the outer call's own launch is dropped, as the plugin does
    assert (relu["calls"], relu["host_total_ns"], relu["host_self_ns"]) == (1, 40 * US, 32 * US)
    assert (relu["device_self_ns"], relu["device_total_ns"], relu["tc_eligible"]) == (10 * US, 10 * US, False)
    # mm: the overlapping copy_ is no child of it and no row; the empty call counts, 0 µs
    assert (mm["host_self_ns"], mm["tc_eligible"]) == (20 * US, True)
    assert (rows["aten::empty"]["calls"], rows["aten::empty"]["host_total_ns"]) == (1, 0)
    # sorted by device self time; headline names the top op and its share
    assert list(rows)[:2] == ["aten::addmm", "aten::relu"]
    assert "aten::addmm 0.05 ms (84.4 % of 0.06 ms)" in res.headline
    assert any("1 calls overlap" in n for n in res.notes)


def test_traceq_window_links_launches_by_the_call_around_them(synth):
    rows, _ = _rows(synth)
    relu = rows["aten::relu"]
    # both launches (8 + 2 µs calls, 10 + 2 µs kernels) belong to the merged call
    assert (relu["calls"], relu["host_self_ns"], relu["device_self_ns"]) == (1, 30 * US, 12 * US)
    assert rows["aten::addmm"]["device_self_ns"] == 54 * US
    assert rows["aten::linear"]["tc_eligible"] and not relu["tc_eligible"]


def test_the_plugin_links_no_cuda_runtime_call(synth_modern):
    # launch calls of category "cuda_runtime": 0.4.3 types them as no event at all
    rows, _ = _rows(synth_modern, window="tb")
    assert _rows(synth_modern)[0]["aten::addmm"]["device_self_ns"] == 54 * US   # traceq's window links them
    assert all(r["device_total_ns"] == 0 for r in rows.values())
    assert rows["aten::addmm"]["host_self_ns"] == 80 * US
    assert not rows["aten::relu"]["tc_eligible"] and rows["aten::addmm"]["tc_eligible"]


def test_group_by_input_shape(synth):
    res = compute(REGISTRY["operators"], synth, window="tb", group_by="input-shape")
    by = {(r["name"], r["input_shape"]): r for r in res.df.to_dicts()}
    assert by[("aten::addmm", "[[64],[32,16],[16,64],[],[]]")]["calls"] == 1
    assert by[("aten::t", "[]")]["calls"] == 1


# ---------------------------------------------------------------- the plugin's own numbers
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from tb_reference import TRACES  # noqa: E402  (the shared traces of the plugin's reference files)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    d = tmp_path_factory.mktemp("tbref")
    return d


def _store(stores, name):
    s = stores / name
    if not s.exists():
        ingest([shared_trace(TRACES[name])], store=s, jobs=1)
    return s


@pytest.mark.parametrize("name", sorted(p.stem for p in REF.glob("*.json")))   # the traces the plugin reads
def test_equal_to_the_plugin(stores, name):
    ref = json.loads((REF / f"{name}.json").read_text())
    scope = open_scope(_store(stores, name))
    calls, _ = operator_calls(scope, "tb")
    for group_by, key in (("name", "operators"), ("input-shape", "operators_by_input")):
        ours = {}
        for r in table_of(calls, group_by, plugin=True).to_dicts():
            ours[r["name"] if group_by == "name" else (r["name"], json.dumps(json.loads(r["input_shape"])))] = r
        theirs = {}
        for r in ref[key]:
            theirs[r["name"] if group_by == "name" else
                   (r["name"], json.dumps(ast.literal_eval(r["input_shape"])))] = r
        assert set(ours) == set(theirs)
        for k, b in theirs.items():
            a = ours[k]
            assert a["calls"] == b["calls"], k
            for f in ("host_self", "host_total", "device_self", "device_total"):
                assert abs(a[f + "_ns"] / 1e3 - b[f + "_us"]) <= 1.5, (k, f)
            assert a["tc_eligible"] == b["tc_eligible"], k
            for f, d in (("tc_self", "device_self"), ("tc_total", "device_total")):
                pct = 100 * b[f + "_us"] / b[d + "_us"] if b[d + "_us"] else 0.0
                assert abs(a[f + "_pct"] - pct) <= 0.02, (k, f)


def test_traceq_window_honours_steps_and_the_plugin_window_does_not(tmp_path):
    """Two steps, one aten::mm call in each ([10, 30] launching 5 µs, [110, 150] launching 7 µs):
    --steps 2:2 keeps the second call; --window tb counts both, as the plugin (whole trace)."""
    t = Trace()
    t.step(1, 0, 100)
    t.step(2, 100, 100)
    t.cpu_op("aten::mm", 10, 20, **{"External id": 1})
    _launch(t, 1, 6001, 12, 4, GEMM, 500, 5)
    t.cpu_op("aten::mm", 110, 40, **{"External id": 2})
    _launch(t, 2, 6002, 112, 4, GEMM, 600, 7)
    ingest([t.write(tmp_path / "t.pt.trace.json.gz")], store=tmp_path / "s", jobs=1)
    one, _ = _rows(tmp_path / "s", steps="2:2")
    assert (one["aten::mm"]["calls"], one["aten::mm"]["host_total_ns"], one["aten::mm"]["device_self_ns"]) == \
        (1, 40 * US, 7 * US)
    both, _ = _rows(tmp_path / "s", steps="2:2", window="tb")
    assert (both["aten::mm"]["calls"], both["aten::mm"]["host_self_ns"], both["aten::mm"]["device_self_ns"]) == \
        (2, (20 - 4 + 40 - 4) * US, 12 * US)
    assert both["aten::mm"]["tc_self_pct"] == 100.0
