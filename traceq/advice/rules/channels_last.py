"""channels_last: convolutions fed through NCHW<->NHWC layout conversions.

Fires when: convolution kernels exist (category conv) AND transpose kernels that are
layout conversions run (nchwToNhwc / nhwcToNchw and spellings, cuDNN / cuTENSOR layout
transposes, MIOpen's batched_transpose_*, transpose_NCHW2CNHW / CNHW2NCHW and
general_4d_reorder_*). Whether the convolutions themselves are NCHW or NHWC kernels does not
matter: cuDNN often picks NHWC kernels (xmma/cutlass `*nhwc*`) for an NCHW model, and MIOpen its
NHWC igemm kernels, and converts the tensors around each of them, which is exactly the time
channels_last removes.
Ruled out by: no convolution kernels (LLM/DLRM permutes are not layout conversions);
convolutions already NHWC (`*nhwc*` in most of the conv time) with negligible conversions
(less than NEGLIGIBLE_PCT of the convolution time: the model already runs channels_last,
what is left converts at its edges); conversions below the floor.
Estimated gain: the conversion kernels' GPU time per step (channels_last removes them).
"""
from __future__ import annotations

from ...lazy import polars as pl

from ..base import Evidence, Finding, kernel_finding, ms

# MIOpen's layout transposes around its convolutions (batched_transpose_32x16_dword,
# transpose_NCHW2CNHW_V1_1D_WG_float, general_4d_reorder_1p_dword_nchw2nhwc)
MIOPEN_CONVERSION = r"(?i)\b(batched_transpose_|transpose_(nchw2cnhw|cnhw2nchw)|general_4d_reorder_)"
CONVERSION = (r"(?i)nchw_?(to|2)_?nhwc|nhwc_?(to|2)_?nchw|cudnn::.*transpose|cutensor.*(transpose|permut)|"
              + MIOPEN_CONVERSION.removeprefix("(?i)"))
NHWC_CONV = r"(?i)nhwc"
NEGLIGIBLE_PCT = 5.0   # conversions below this share of the convolution time beside NHWC convolutions


def channels_last(scope, ev: Evidence) -> Finding | None:
    ops = ev.ops.filter(pl.col("kind") == "kernel")
    conv = ops.filter(pl.col("category") == "conv")
    conversions = ops.filter(pl.col("name").str.contains(CONVERSION))
    if conv["n"].sum() == 0 or conversions["n"].sum() == 0:
        return None
    conv_ns = conv["dur_ns"].sum()
    # the library converting: MIOpen where its transposes are most of the conversion time
    miopen_ns = conversions.filter(pl.col("name").str.contains(MIOPEN_CONVERSION))["dur_ns"].sum()
    lib, layout = (("MIOpen", "miopenTensorNHWC layout") if miopen_ns * 2 > conversions["dur_ns"].sum()
                   else ("cuDNN", "CUDNN_TENSOR_NHWC descriptors"))
    nhwc_ns = conv.filter(pl.col("name").str.contains(NHWC_CONV))["dur_ns"].sum()
    nhwc = nhwc_ns * 2 > conv_ns
    if nhwc and conversions["dur_ns"].sum() * 100 < NEGLIGIBLE_PCT * conv_ns:
        return None                    # already channels_last: the few conversions are at the edges
    if nhwc:
        beside = (f"; they feed {conv['n'].sum():,} convolution kernels ({ms(conv_ns)}, "
                  f"{100 * nhwc_ns / conv_ns:.0f} % of it in NHWC kernels): {lib} converts the NCHW tensors for them")
    else:
        beside = f"; beside {conv['n'].sum():,} NCHW convolution kernels ({ms(conv_ns)})"
    return kernel_finding(
        "channels_last", "transpose", conversions, ev,
        f"{conversions['n'].sum():,} NCHW<->NHWC conversion kernels",
        ev.said(f"{'train' if ev.training else 'run'} in channels_last: model.to(memory_format=torch.channels_last) "
                f"and inputs x.to(memory_format=torch.channels_last), in FP16/BF16, so {lib} runs NHWC convolutions "
                "without conversions",
                "keep activations NHWC end to end (TensorFlow/Keras: data_format='channels_last'; JAX/Flax: NHWC, "
                f"the default; {lib}: {layout}), in FP16/BF16, so {lib} runs NHWC convolutions "
                "without conversions"),
        beside)
