"""Mixed precision: FP32 GEMMs and convolutions on a GPU with tensor cores.

Fires when: GEMM/convolution kernels (category gemm or conv: the ops tensor cores run)
compute in FP32 without tensor cores (cuBLAS `*sgemm*`, cuDNN `*scudnn*` and `<float, ...>`
engines, `*_f32f32_f32*`/`*fp32*` kernels, Tensile `Cijk_*_SB_*`), they are at least
MIN_PCT of GPU time and most of the GEMM/convolution time, on a GPU with tensor cores
(NVIDIA Volta or later, AMD CDNA: known from the device name, or from architecture-named
kernels such as volta_*/ampere_*/sm80_*).
Ruled out by: tensor-core kernels (the stored `gpu_ops.tensor_core`, traceq.kernels.tensor_cores;
a store from before that column: the same test on the name) or kernels whose name says they
compute in half/bf16/TF32, doing most of the GEMM/convolution time (mixed precision is
already on); GPUs without tensor cores or
unknown GPUs without architecture-named kernels; below the floor.
Estimated gain: half of those kernels' time per step (tensor cores run FP16/BF16 GEMMs
several times faster than FP32 SIMT; half is a conservative bound, the TensorBoard profiler
gives the same recommendation from the same evidence).
"""
from __future__ import annotations

import re

from ...kernels.tensor_cores import uses_tensor_cores
from ...lazy import polars as pl

from ..base import Evidence, Finding, kernel_finding

FP32 = (r"(?i)sgemm|scudnn|_f32f32_f32|(^|_)fp32(_|$)|_float(_|$)|<float,|<float>|^Cijk_\w*_SB_"
        r"|gemmSN_|gemmk1_kernel")
# names that say the kernel computes in half/bf16/TF32, tensor cores or not (maxwell_fp16_sgemm_fp16,
# *_hgemm_*): not the FP32 this rule is about
LOW_PRECISION_KERNEL = r"(?i)bf16|f16|fp16|half|tf32|hgemm"
TC_DEVICE = re.compile(r"(?i)V100|\bT4\b|A100|A30\b|A40\b|A10G?\b|A16\b|\bA2\b|A[2456]000|A4500|H100|H200|H800|A800|GH200|"
                       r"B100|B200|GB200|\bL4\b|L40|RTX|TITAN V|Quadro GV|MI[123]\d\d|gfx90a|gfx94\d|gfx95\d|gfx908")
NO_TC_DEVICE = re.compile(r"(?i)GTX|P100|P40|P4\b|K80|K40|M40|M60|Tesla [PKM]\d")
ARCH_KERNEL = r"(?i)^(void )?(volta|turing|ampere|hopper|ada|blackwell)_|(^|_)sm(7\d|8\d|9\d|1\d\d)_|cutlass_(7\d|8\d|9\d)"
AMPERE_PLUS_DEVICE = re.compile(r"(?i)A100|A30\b|A40\b|A10G?\b|A16\b|\bA2\b|A[2456]000|A4500|H100|H200|H800|A800|GH200|B100|"
                                r"B200|GB200|\bL4\b|L40|RTX [345]0\d0|RTX A\d")
AMPERE_PLUS_KERNEL = r"(?i)^(void )?(ampere|hopper|ada|blackwell)_|(^|_)sm(8\d|9\d|1\d\d)_|cutlass_(8\d|9\d)"
# AMD GPUs whose matrix cores take bf16 (CDNA2 MI200, CDNA3 MI300): bf16 advice, no TF32 words
BF16_AMD_DEVICE = re.compile(r"(?i)MI[23]\d\d|gfx90a|gfx94\d|gfx95\d")
MIN_PCT = 10.0     # of GPU time


def _tensor_cores(ev: Evidence, kernels: pl.DataFrame) -> tuple[bool, bool, bool]:
    """(the GPU has tensor/matrix cores, they take bf16, it is an NVIDIA Ampere or later: TF32)."""
    names = kernels["name"]
    if ev.devices and NO_TC_DEVICE.search(ev.devices) and not TC_DEVICE.search(ev.devices):
        return False, False, False
    tc = bool(TC_DEVICE.search(ev.devices or "")) or bool(names.str.contains(ARCH_KERNEL).any())
    ampere = bool(AMPERE_PLUS_DEVICE.search(ev.devices or "")) or bool(names.str.contains(AMPERE_PLUS_KERNEL).any())
    return tc, ampere or bool(BF16_AMD_DEVICE.search(ev.devices or "")), ampere


def _on_tensor_cores(ops: pl.DataFrame) -> pl.Expr:
    """The stored tensor_core verdict of each kernel; where it is null (a store ingested before
    the column existed) the same test on the name (traceq.kernels.tensor_cores)."""
    if "tensor_core" in ops.columns and ops["tensor_core"].null_count() == 0:
        return pl.col("tensor_core")    # the rule table is ingest's: not loaded when the store has the column
    stored = pl.col("tensor_core") if "tensor_core" in ops.columns else pl.lit(None, pl.Boolean)
    return pl.coalesce(stored, pl.col("name").map_elements(uses_tensor_cores, return_dtype=pl.Boolean))


def mixed_precision(scope, ev: Evidence) -> Finding | None:
    kernels = ev.ops.filter(pl.col("kind") == "kernel")
    mm = kernels.filter(pl.col("category").is_in(["gemm", "conv"]))
    if not mm.height:
        return None
    fp32 = mm.filter(pl.col("name").str.contains(FP32) & ~pl.col("name").str.contains(LOW_PRECISION_KERNEL)
                     & ~_on_tensor_cores(mm))
    ns, mm_ns = fp32["dur_ns"].sum(), mm["dur_ns"].sum()
    if not ns or ev.pct(ns) < MIN_PCT or 2 * ns < mm_ns:
        return None
    tc, bf16, ampere = _tensor_cores(ev, kernels)
    if not tc:
        return None
    tf32 = (" or, for FP32 accuracy, TF32 tensor cores: torch.set_float32_matmul_precision('high') and "
            "torch.backends.cudnn.allow_tf32=True") if ampere else ""
    if bf16:
        amp = ("torch.autocast('cuda', dtype=torch.bfloat16) for forward and loss" if ev.training else
               "run inference in bf16: model.to(torch.bfloat16) or torch.autocast('cuda', dtype=torch.bfloat16)")
    else:   # Volta/Turing (or a GPU known only by its kernels' names): fp16 tensor cores
        amp = ("torch.autocast('cuda', dtype=torch.float16) for forward and loss with torch.amp.GradScaler (float16: "
               "this GPU is not known to have bf16 tensor cores)" if ev.training else
               "run inference in fp16: model.half() or torch.autocast('cuda', dtype=torch.float16)")
    fd = kernel_finding(
        "mixed_precision", "gemm", fp32, ev,
        f"{fp32['n'].sum():,} FP32 GEMM/convolution kernels without tensor cores ({100 * ns / mm_ns:.0f} % of the "
        f"GEMM/convolution time) on a GPU with tensor cores",
        ev.said(f"enable mixed precision (AMP) so GEMMs and convolutions run on tensor cores: {amp}{tf32}",
                "compute GEMMs and convolutions in FP16/BF16 on tensor cores (cublasGemmEx/cublasLt with half or "
                "bfloat16 inputs, cudnnSetConvolutionMathType(CUDNN_TENSOR_OP_MATH); rocBLAS/hipBLASLt and MIOpen "
                "half/bf16 on AMD)" + (", or TF32 (CUBLAS_COMPUTE_32F_FAST_TF32) where FP32 accuracy is needed"
                                        if ampere else "")),
        "; est. gain: half of their time (tensor cores run these several times faster)")
    fd.est_gain_ms_per_step /= 2
    fd.cited_ms = [m / 2 for m in fd.cited_ms]     # what hotspots calls avoidable: the estimated part
    return fd
