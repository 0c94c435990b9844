"""channels_last: convolutions fed through NCHW<->NHWC layout conversions.

Fires when: convolution kernels exist (category conv) AND transpose kernels that are
layout conversions run (nchwToNhwc / nhwcToNchw and spellings, cuDNN / cuTENSOR layout
transposes).
Ruled out by: no convolution kernels (LLM/DLRM permutes are not layout conversions);
convolution kernels already NHWC (`*nhwc*` in most of the conv time: MIOpen/CK/cuDNN NHWC
kernels); conversions below the floor.
Estimated gain: the conversion kernels' GPU time per step (channels_last removes them).
"""
from __future__ import annotations

import polars as pl

from ..base import Evidence, Finding, kernel_finding, ms

CONVERSION = r"(?i)nchw_?(to|2)_?nhwc|nhwc_?(to|2)_?nchw|cudnn::.*transpose|cutensor.*(transpose|permut)"
NHWC_CONV = r"(?i)nhwc"


def channels_last(scope, ev: Evidence) -> Finding | None:
    ops = ev.ops.filter(pl.col("kind") == "kernel")
    conv = ops.filter(pl.col("category") == "conv")
    conversions = ops.filter(pl.col("name").str.contains(CONVERSION))
    if conv["n"].sum() == 0 or conversions["n"].sum() == 0:
        return None
    conv_ns = conv["dur_ns"].sum()
    nhwc_ns = conv.filter(pl.col("name").str.contains(NHWC_CONV))["dur_ns"].sum()
    if nhwc_ns * 2 > conv_ns:          # convolutions already run NHWC
        return None
    return kernel_finding(
        "channels_last", "transpose", conversions, ev,
        f"{conversions['n'].sum():,} NCHW<->NHWC conversion kernels",
        "train in channels_last: model.to(memory_format=torch.channels_last) and inputs "
        "x.to(memory_format=torch.channels_last), with AMP, so cuDNN runs NHWC convolutions without conversions",
        f"; beside {conv['n'].sum():,} NCHW convolution kernels ({ms(conv_ns)})")
