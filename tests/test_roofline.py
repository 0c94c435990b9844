"""traceq roofline on small synthetic Kineto traces whose expected numbers are derived here
from the events they write (µs), and on TraceLens' own reference outputs for real H100/MI300X
traces (../shared/traces/kineto/tracelens: TFLOP/s within 3 %)."""
from __future__ import annotations

import json

import pytest
from kineto_synth import Trace
from typer.testing import CliRunner

from traceq.analyses.registry import REGISTRY, compute
from traceq.cli import app
from traceq.ingest import ingest

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
BF16 = "c10::BFloat16"
ADDMM = {"Input Dims": [[512], [128, 256], [256, 512], [], []],
         "Input type": [BF16, BF16, BF16, "Scalar", "Scalar"],
         "Input Strides": [[1], [256, 1], [512, 1], [], []],
         "Concrete Inputs": ["", "", "", "1", "1"]}
# per call: flop = 2·M·N·K = 2·128·512·256 = 33,554,432; minimal bytes (bf16, 2 B) =
# (M·K + K·N + M·N + bias N)·2 = (32,768 + 131,072 + 65,536 + 512)·2 = 459,776
FLOP, BYTES = 33_554_432, 459_776


def _gemm_trace(device="NVIDIA H100 80GB HBM3") -> Trace:
    """Two aten::linear -> aten::addmm calls of one shape: the first launches a memset (1 µs)
    and the GEMM (10 µs), the second the GEMM alone (20 µs); an unmodelled op launches an
    elementwise kernel (5 µs). GPU span: 100 .. 205 µs."""
    t = Trace(device)
    t.cpu_op("aten::linear", 0, 60)
    t.cpu_op("aten::addmm", 5, 50, **ADDMM)
    t.launch("Memset (Device)", 10, 3, 100, 1, cat="gpu_memset")
    t.launch(GEMM, 20, 5, 110, 10)
    t.cpu_op("aten::linear", 70, 60)
    t.cpu_op("aten::addmm", 75, 50, **ADDMM)
    t.launch(GEMM, 80, 5, 150, 20)
    t.cpu_op("aten::relu", 140, 20, **{"Input Dims": [[64]], "Input type": ["mystery dtype"]})
    t.cpu_op("aten::my_custom_op", 170, 20)
    t.launch("void my_kernel(float*)", 175, 5, 200, 5)
    return t


def _store(tmp_path, t: Trace):
    d = tmp_path / "t"
    ingest([t.write(d / "t.pt.trace.json.gz")], store=d / "s", jobs=1)
    return d / "s"


def test_gemm_row_flop_bytes_achieved_and_roofline(tmp_path):
    res = compute(REGISTRY["roofline"], _store(tmp_path, _gemm_trace()))
    rows = {r["op"]: r for r in res.df.to_dicts()}
    mm = rows["aten::addmm"]
    assert json.loads(mm["input_dims"]) == ADDMM["Input Dims"]
    assert (mm["calls"], mm["kernel_ns"], mm["flop"], mm["bytes"]) == (2, 31_000, FLOP, BYTES)
    # mean over calls of flop / the call's GPU time (11 µs with its memset, 20 µs)
    tflops = (FLOP / 11e-6 + FLOP / 20e-6) / 2 / 1e12
    assert mm["tflops"] == pytest.approx(tflops, rel=1e-9)
    assert mm["tbps"] == pytest.approx((BYTES / 11e-6 + BYTES / 20e-6) / 2 / 1e12, rel=1e-9)
    # H100 SXM: bf16 dense 989.4 TFLOP/s, 3.35 TB/s; intensity 72.98 flop/B · 3.35 = 244.5 < 989.4
    assert mm["intensity"] == pytest.approx(FLOP / BYTES)
    assert (mm["peak_tflops"], mm["peak_tbps"], mm["bound"]) == (pytest.approx(989.4), pytest.approx(3.35), "memory")
    assert mm["roofline_pct"] == pytest.approx(100 * tflops / (FLOP / BYTES * 3.35), rel=1e-9)
    assert mm["category"] == "gemm"
    # aten::linear launched nothing outside its addmm: no row of its own
    assert "aten::linear" not in rows
    # the unmodelled op's kernel is in the "not covered" table
    rest = res.tables["unmodelled"].to_dicts()
    assert [(r["name"], r["count"], r["total_ns"]) for r in rest] == [("void my_kernel(float*)", 1, 5_000)]
    eff = res.value
    # MFU: 2 calls · FLOP in the 105 µs span against bf16 989.4 TFLOP/s
    assert eff.mfu_pct == pytest.approx(round(100 * 2 * FLOP / 105e-6 / 989.4e12, 3))
    # the model covers the addmm calls' 31 µs of the 36 µs of GPU op time
    assert eff.modelled_pct == pytest.approx(round(100 * 31 / 36, 2))
    assert "MFU" in res.headline and "aten::addmm" in res.headline


def test_json_rows_have_exactly_the_issue_fields_and_dims_as_lists(tmp_path):
    store = _store(tmp_path, _gemm_trace())
    out = CliRunner().invoke(app, ["roofline", "--store", str(store), "-f", "json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    row = doc["rows"][0]
    assert list(row) == ["run", "op", "category", "input_dims", "input_types", "calls", "kernel_ns", "flop", "bytes",
                         "tflops", "tbps", "intensity", "peak_tflops", "peak_tbps", "roofline_pct", "bound"]
    assert row["input_dims"] == [[512], [128, 256], [256, 512], [], []]
    assert isinstance(row["flop"], int) and isinstance(row["bytes"], int)
    assert doc["efficiency"]["device"] == "NVIDIA H100 80GB HBM3"


def test_peak_overrides_and_unknown_device(tmp_path):
    store = _store(tmp_path, _gemm_trace(device="Imaginary GPU 9000"))
    res = compute(REGISTRY["roofline"], store)
    mm = res.df.filter(res.df["op"] == "aten::addmm").row(0, named=True)
    assert mm["peak_tflops"] is None and mm["roofline_pct"] is None and mm["tflops"] > 0
    assert "Imaginary GPU 9000" in res.headline and "--peak-tflops" in res.headline
    res = compute(REGISTRY["roofline"], store, peak_tflops=100.0, peak_tbps=2.0)
    mm = res.df.filter(res.df["op"] == "aten::addmm").row(0, named=True)
    # intensity 72.98 · 2 = 146 > 100: compute-bound against the given peak
    assert (mm["peak_tflops"], mm["peak_tbps"], mm["bound"]) == (100.0, 2.0, "compute")
    assert mm["roofline_pct"] == pytest.approx(mm["tflops"])


def test_trace_without_shapes_says_so_and_still_shows_gpu_time(tmp_path):
    t = Trace("NVIDIA H100 80GB HBM3")
    t.cpu_op("aten::addmm", 5, 50)
    t.launch(GEMM, 20, 5, 110, 10)
    res = compute(REGISTRY["roofline"], _store(tmp_path, t))
    assert "record_shapes=True" in res.headline
    mm = res.df.row(0, named=True)
    assert (mm["op"], mm["calls"], mm["kernel_ns"], mm["flop"], mm["tflops"]) == ("aten::addmm", 1, 10_000, None, None)
