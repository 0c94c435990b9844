"""channels_last on AMD: MIOpen's layout transposes around its convolutions are conversions.

The situation is the one of the shared MI300X trace kineto/tracelens/mi300/Falconsai_nsfw_image_detection
(MIOpen runs an NHWC igemm convolution for an NCHW PyTorch model and brackets it with
batched_transpose_* kernels), and of MIOpen's 1x1 GEMM convolutions that transpose
NCHW<->CNHW: there the transposes are too small to pass the floor, so these synthetic traces make
them the step's work. Kernel names are MIOpen's real ones (tests/test_categories.py cites them).
Every expected number is derived from the events the test writes.
"""
from __future__ import annotations

import json

import pytest
from kineto_synth import Trace
from typer.testing import CliRunner

from traceq.ingest import ingest

IGEMM_FWD = "igemm_fwd_gtcx3_nhwc_fp16_bx0_ex0_bt128x128x32_wt32x32x8_ws1x1_wr2x2_ta1x8x2x1_1x4x1x64_tb1x8x2x1_1x4x1x64_gkgs"
IGEMM_BWD = "igemm_bwd_gtcx3_nhwc_fp16_bx0_ex0_bt128x128x32_wt32x32x8_ws1x1_wr2x2_ta1x8x2x1_1x4x1x64_tb1x8x1x2_1x4x1x64_gkgs"
NAIVE_NCHW = "naive_conv_fwd_nchw_half_double_half"
GEMM = "Cijk_Alik_Bljk_HB_MT128x128x32_MI32x32x8x1_SN_1LDSB0"
TO_NHWC, TO_NCHW = "batched_transpose_32x16_half", "batched_transpose_16x32_half"
TO_CNHW, FROM_CNHW = "transpose_NCHW2CNHW_V1_1D_WG_float", "transpose_CNHW2NCHW_V1_1D_WG_float"
REORDER = "general_4d_reorder_1p_dword_nchw2nhwc"


def _trace(kernels_per_layer: list[tuple[str, int]], layers: int = 10) -> Trace:
    """One 10 ms ProfilerStep of `layers` layers; each layer launches `kernels_per_layer`
    ((name, µs) in order, 10 µs apart on the GPU) under an aten::convolution cpu op (the
    PyTorch evidence a ROCm PyTorch trace has)."""
    t = Trace()
    t.step(1, 0, 10_000)
    for i in range(layers):
        ts, gpu = i * 1000, i * 1000 + 20
        t.cpu_op("aten::convolution", ts, 15 * len(kernels_per_layer))
        for j, (name, us) in enumerate(kernels_per_layer):
            t.launch(name, ts + 15 * j, 10, gpu, us)
            gpu += us + 10
    return t


def _diagnose(tmp_path, trace: Trace) -> dict:
    ingest([trace.write(tmp_path / "t.json.gz")], store=tmp_path / "s", run="amd", jobs=1)
    res = CliRunner().invoke(__import__("traceq.cli", fromlist=["app"]).app,
                             ["diagnose", "--store", str(tmp_path / "s"), "--run", "amd", "--format", "json"])
    assert res.exit_code == 0, res.output
    (run,) = json.loads(res.output)["runs"]
    return {f["id"]: f for f in run["findings"]}


def test_miopen_batched_transposes_around_nhwc_igemm_convolutions_fire(tmp_path):
    # per layer: NCHW->NHWC transpose 60 µs, NHWC forward conv 300 µs, backward conv 200 µs,
    # NHWC->NCHW transpose 40 µs: 20 conversions of 1.00 ms beside 20 NHWC convolutions of 5.00 ms
    layer = [(TO_NHWC, 60), (IGEMM_FWD, 300), (IGEMM_BWD, 200), (TO_NCHW, 40)]
    f = _diagnose(tmp_path, _trace(layer))["channels_last"]
    conv_ms = 10 * (300 + 200) / 1000
    conversions_ms = 10 * (60 + 40) / 1000
    assert f"20 NCHW<->NHWC conversion kernels, {conversions_ms:.2f} ms" in f["evidence"]
    assert f"{TO_NHWC} ×10 (0.60 ms)" in f["evidence"] and f"{TO_NCHW} ×10 (0.40 ms)" in f["evidence"]
    assert (f"they feed 20 convolution kernels ({conv_ms:.2f} ms, 100 % of it in NHWC kernels): "
            "MIOpen converts the NCHW tensors for them") in f["evidence"]
    assert "model.to(memory_format=torch.channels_last)" in f["advice"] and "so MIOpen runs NHWC" in f["advice"]
    assert f["gpu_ms"] == pytest.approx(conversions_ms, abs=1e-3)


def test_miopen_cnhw_transposes_and_reorders_beside_nchw_convolutions_fire(tmp_path):
    # MIOpen's 1x1 GEMM convolution path: NCHW->CNHW 50 µs, GEMM 300 µs, CNHW->NCHW 50 µs, and a
    # general_4d_reorder 20 µs feeding a naive NCHW convolution of 200 µs
    layer = [(TO_CNHW, 50), (GEMM, 300), (FROM_CNHW, 50), (REORDER, 20), (NAIVE_NCHW, 200)]
    f = _diagnose(tmp_path, _trace(layer))["channels_last"]
    assert "30 NCHW<->NHWC conversion kernels, 1.20 ms" in f["evidence"]
    assert f"{REORDER} ×10 (0.20 ms)" in f["evidence"]
    assert "beside 10 NCHW convolution kernels (2.00 ms)" in f["evidence"]
    assert f["gpu_ms"] == pytest.approx(1.2, abs=1e-3)


def test_batched_transposes_without_convolutions_do_not_fire(tmp_path):
    # the same transposes around hipBLASLt GEMMs (a transformer's permutes): no convolution, no advice
    layer = [(TO_NHWC, 60), (GEMM, 500), (TO_NCHW, 40)]
    assert "channels_last" not in _diagnose(tmp_path, _trace(layer))
