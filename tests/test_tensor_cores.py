"""Tensor cores (traceq/rules/tensor_cores.toml, traceq.kernels.tensor_cores): real kernel names
both ways per vendor, op eligibility (the TensorBoard plugin's definition and where traceq
differs), the `gpu_ops.tensor_core` column stored at ingest (Kineto and nsys), and the
mixed-precision rule reading it (with the name test for stores from before the column)."""
from __future__ import annotations

import pyarrow.parquet as pq
import pytest
from conftest import shared_trace
from kineto_synth import Trace

from traceq.advice import evidence_for
from traceq.advice.rules.mixed_precision import mixed_precision
from traceq.engine.scope import open_scope
from traceq.ingest import ingest
from traceq.kernels.tensor_cores import tensor_core_eligible, uses_tensor_cores
from traceq.store import Store

# Kernel names as the shared traces recorded them (file under ../shared/traces in the comment).
NVIDIA_TENSOR = [
    # hta/trace_filter/sampled_rank-0 (A100): CUTLASS TF32 tensor-op GEMM (s1688 = HMMA.1688 TF32)
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x5_tn_align4>(cutlass_80_tensorop_s1688gemm_128x128_32x5_tn_align4::Params)",
    # hta/trace_filter: cuDNN xmma implicit-GEMM convolution, TF32
    "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_warpsize2x2x1_g1_tensor16x8x8_alignc4_execute_kernel_cudnn",
    "void cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688dgrad_optimized_tf32_64x256_32x4_nhwc_align4>(cutlass_tensorop_s1688dgrad_optimized_tf32_64x256_32x4_nhwc_align4::Params)",
    # hta/trace_filter: a mangled CUTLASS convolution (TensorOpMultiplicand operand layouts)
    "_ZN19cutlass_cudnn_train6KernelINS_4conv6kernel23ImplicitGemmConvolutionINS1_11threadblock22ImplicitGemmMultistageINS_4gemm9GemmShapeILi128ELi128ELi32EEENS4_52Conv2dWgradOutputGradientTileAccessIteratorOptimizedINS_11MatrixShapeILi128ELi32EEENS_10tfloat32_tENS_9transform29PitchLinearWarpRakedThreadMapINS_16PitchLinearShapeILi128ELi32EEELi128ENSF_ILi8ELi4EEELi4EEENS_12AlignedArrayISC_Li4ELi16EEEEENSD_11threadblock25RegularTileAccessIteratorISB_SC_NS_6layout40ColumnMajorTensorOpMultiplicandCongruousILi32ELi32EEELi1ESI_Li16EEE",
    # tracelens/h100 (H100): cuBLAS sm90 xmma BF16, CUTLASS bf16 tensor-op and WMMA GEMMs, flash attention
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
    "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8>(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8::Params)",
    "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8::Params)",
    "void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8>(cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8::Params)",
    "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, false, false, false, true, true, false>(pytorch_flash::Flash_fwd_params)",
    # nsys/nvFuser/report1_matmul_h100: cuBLAS 12 Hopper GEMM
    "nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NTN",
]
NVIDIA_NOT = [
    # FP32 SIMT GEMMs/convolutions: hta/*, tb_plugin, nsys/DLProf
    "volta_sgemm_128x64_nt", "ampere_sgemm_32x32_sliced1x4_tn", "volta_scudnn_128x64_relu_interior_nn_v1",
    "cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1",
    "void cutlass::Kernel<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(cutlass_80_simt_sgemm_128x32_8x5_nn_align1::Params)",
    "void magma_sgemmEx_kernel<float, float, float, true, false, 6, 4, 6, 3, 4>(int, int, int, Tensor, int, Tensor, int, Tensor, int, Tensor, int, int, int, float const*, float const*, float, float, int, c10::cuda::CUDAStream)",
    "void implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3, 1, false, true, true>(int, int, int, float const*, int, float*, float const*, kernel_conv_params, unsigned long long, int, float, float, int, float const*, float const*, bool, int, int)",
    "ampere_gcgemm_64x64_nt", "volta_cgemm_32x32_tn",
    # GEMV, small-N GEMM, split-K reduction
    "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false, cublasGemvParams<cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float> >(cublasGemvParams<cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float>, float, float)",
    "void splitKreduce_kernel<float, float, float, float, true, false, false>(cublasSplitKParams<float>, float const*, float const*, float*, float const*, float const*, float const*, float const*, float*, void*, long, float*, int*)",
    "void gemmSN_NN_kernel<float, (int)128, (int)2, (int)4, (int)8, (int)3, (int)4, cublasGemvTensorStridedBatched<const float>, cublasGemvTensorStridedBatched<float>>(cublasGemmSmallNParams<T8, T9, T1>)",
    # a kernel whose name holds "summary" (umma is no word there): nsys/pipit cloverleaf
    "void clover::par_reduce_kernel<field_summary(global_variables &, parallel_ &)::[lambda(int) (instance 1)]>(T1)",
    # Triton: no evidence either way (tracelens/inference, hta/triton_example)
    "triton_poi_fused_0", "triton_poi_fused_constant_pad_nd_moe_forward_0",
    # vLLM's KV-cache copy is no flash-attention kernel
    "void vllm::reshape_and_cache_flash_kernel<__hip_bfloat16, __hip_bfloat16, (vllm::Fp8KVCacheDataType)0>(__hip_bfloat16 const*, __hip_bfloat16 const*, __hip_bfloat16*, __hip_bfloat16*, long const*, long, long, long, long, long, int, int, int, float const*, float const*)",
    # elementwise
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
]
# Public names beyond the shared traces: cuBLAS's FP32 xmma kernels are SIMT ("_ffma_"), Volta/Turing
# cuBLAS/cuDNN MMA-shape names, CUTLASS 3, Hopper xmma with hgmma, cuDNN SDPA
NVIDIA_PUBLIC = {
    "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas": False,
    "volta_h884gemm_64x64_ldg8_nn": True, "volta_fp16_s884cudnn_fp16_256x128_ldg8_relu_f2f_exp_small_nhwc2nchw_tn_v1": True,
    "turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_tn": True, "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_tn": True,
    "cutlass_tensorop_i16832gemm_s8_256x128_64x3_tn_align16": True,
    "void cutlass::device_kernel<cutlass3x_sm90_tensorop_s64x128x16gemm_bf16_bf16_f32_bf16_bf16_128x128x64_1x1x1_0_tnn_align8_warpspecialized_cooperative_epi_tma>(cutlass3x_sm90_tensorop_s64x128x16gemm_bf16_bf16_f32_bf16_bf16_128x128x64_1x1x1_0_tnn_align8_warpspecialized_cooperative_epi_tma::Params)": True,
    "sm90_xmma_gemm_f16f16_f16f32_f32_nt_n_tilesize128x128x64_stage4_gmmastage2_warpgroupsize1x1x1_hgmma64x128x16": True,
    "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x128_4x1x1_cga1x1x1_kernel0_0": True,
    "fmha_cutlassF_f16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::half_t, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)": True,
    "fmha_cutlassF_f32_aligned_64x64_rf_sm50(PyTorchMemEffAttention::AttentionKernel<float, cutlass::arch::Sm50, true, 64, 64, 64, true, true>::Params)": False,
    "void flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::half_t, Flash_kernel_traits<128, 64, 128, 8, cutlass::half_t> >, true, false, false, false, false, true, false, false>(Flash_bwd_params)": True,
    "fused_moe_kernel": False,          # vLLM/SGLang Triton MoE GEMM: Triton, no evidence
}
AMD_TENSOR = [
    # tracelens/mi300 (MI300X, gfx942): hipBLASLt BF16 GEMM with a 16x16 MFMA instruction
    "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT32x32x256_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_CLR1_CADS0_DTVA0_DTVB0_EPS0_FDSI0_GRPM1_GRVWA8_GRVWB8_GSUAMB_GLS0_ISA942_IU1_K1_LBSPPA512_LBSPPB512_LBSPPM0_LPA16_LPB16_LPM0_LRVW8_LWPMn1_MIAV0_MIWT1_1_MO40_NTn1_NTA0_NTB0_NTC0_NTD4_NEPBS0_NLCA1_NLCB1_ONLL1_PGR2_PLR1_PKA1_SIA3_SS1_SPO0_SRVW0_SSO0_SVW4_SK3_SKXCCM0_TLDS1_ULSGRO0_USL1_UIOFGRO0_USFGROn1_VSn1_VWA4_VWB1_WSGRA0_WSGRB0_WS64_WG16_16_1",
    # hta/amd_trace (MI250): Tensile FP32 (SB) GEMM on MFMA, gfx90a
    "Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0_AFC1_AFEM1_AFEM1_ASEM1_CLR1_CADS0_EPS0_GRVWA2_GRVWB2_GSUAMB_ISA90a_IU1_K1_LBSPPA128_LBSPPB128_LBSPPM0_LPA8_LPB8_LPM0_LRVW4_LWPMn1_MIAV0_MIWT4_1_MO40_NTn1_NTA0_NTB0_NTC0_NTD0_NEPBS0_NLCA1_NLCB1_ONLL1_PGR2_PLR1_PKA1_SIA3_SS1_SPO0_SRVW0_SSO0_SVW4_SK0_SKXCCM0_TLDS1_ULSGRO0_USL1_UIOFGRO0_USFGROn1_VSn1_VWA2_VWB1_WSGRA0_WSGRB0_WS64_WG16_16_1",
    # tracelens/mi300: MIOpen implicit-GEMM convolution of the xdlops generation (gtcx3, MFMA wave tile 16x16x4)
    "igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt64x64x16_wt16x16x4_ws1x1_wr2x2_ta1x1x4x1_1x16x1x16_tb1x1x4x1_1x16x1x16_me",
    # public: Composable Kernel XDL GEMM, CK-tile FMHA, MIOpen xdlops, aiter asm
    "void ck::kernel_gemm_xdl_cshuffle_v3<ck::GridwiseGemm_xdl_cshuffle_v3<ck::tensor_layout::gemm::RowMajor>, true, (ck::InMemoryDataOperationEnum)0, 1, (ck::TailNumber)0>(ck::GridwiseGemm_xdl_cshuffle_v3<ck::tensor_layout::gemm::RowMajor>::Argument)",
    "void ck_tile::kentry<64, 1, ck_tile::FmhaFwdKernel<ck_tile::BlockFmhaPipelineQRKSVSAsync<ck_tile::BlockFmhaPipelineProblem<ck_tile::bf16_t> > > >(ck_tile::FmhaFwdKernel::Kargs)",
    "gridwise_convolution_implicit_gemm_v4r4_xdlops_nchw_kcyx_nkhw",
    "_ZN5aiter42fmoe_bf16_blockscaleFp8_g1u1_vs_silu_1tg_32x256_mfmaE",
]
AMD_NOT = [
    # tracelens/mi300: Triton attention and MoE kernels (no evidence), MIOpen elementwise "SubTensorOp"
    "attn_fwd", "kernel_unified_attention_2d", "_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1_swiglu",
    "SubTensorOpWithScalar1d",
    # public: a Tensile kernel without a matrix instruction (vector ALU), rocBLAS GEMV
    "Cijk_Ailk_Bljk_SB_MT64x64x8_SN_APM1_AF0EM1_AF1EM1_AMAS3_ASE_ASGT_ASLT_ASAE01_ASCE01_ASEM1_BL1_DTL0_EPS1_FL0_GRVW4_GSU1_ISA906_IU1_K1_KLA_LBSPP0_LPA0_LPB0_LDL1_LRVW4_MDA2_NLCA1_NLCB1_ONLL1_PK0_PGR1_PLR1_RK0_SU32_SUM0_SUS256_SVW4_SNLL0_TT4_4_USFGRO0_VAW1_VS1_VW4_WG16_16_1_WGM1",
    "void rocblas_gemvn_kernel<64, 16, int, float, float const*, float const*, float*>(int, int, float const*, long, float const* const*, long, long, float const* const*, long, long, float const*, long, float* const*, long, long)",
]


@pytest.mark.parametrize("name", NVIDIA_TENSOR + AMD_TENSOR)
def test_tensor_core_kernels_by_their_names(name):
    assert uses_tensor_cores(name)


@pytest.mark.parametrize("name", NVIDIA_NOT + AMD_NOT)
def test_kernels_without_tensor_core_evidence(name):
    assert not uses_tensor_cores(name)


@pytest.mark.parametrize("name,expected", sorted(NVIDIA_PUBLIC.items()))
def test_public_nvidia_kernel_names(name, expected):
    assert uses_tensor_cores(name) is expected


def test_op_eligibility_follows_the_tensorboard_allowlist_and_its_dtypes():
    # the plugin's TC_OP_Allowlist by name (no types: the name decides)
    for op in ("aten::mm", "aten::addmm", "aten::bmm", "aten::linear", "aten::matmul", "aten::conv2d",
               "aten::cudnn_convolution", "aten::_convolution", "aten::lstm_cell", "CudnnConvolutionBackward",
               "MmBackward0", "autograd::engine::evaluate_function: AddmmBackward0"):
        assert tensor_core_eligible(op, None), op
    # traceq adds attention, FP8 and INT8 GEMMs
    for op in ("aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention",
               "aten::_scaled_mm", "aten::_int_mm"):
        assert tensor_core_eligible(op, None), op
    # ...and leaves out matrix-vector products, outer products and prelu (SIMT / elementwise)
    for op in ("aten::mv", "aten::addmv", "aten::addr", "aten::prelu", "aten::add", "aten::relu", "", "aten::mm_foo"):
        assert not tensor_core_eligible(op, None), op
    # with recorded input types: half/bf16/fp8/int8 and fp32 (TF32) are eligible, fp64/complex/ints not
    assert tensor_core_eligible("aten::mm", ["c10::BFloat16", "c10::BFloat16"])
    assert tensor_core_eligible("aten::addmm", ["float", "float", "float", "Scalar", "Scalar"])
    assert tensor_core_eligible("aten::_scaled_mm", ["c10::Float8_e4m3fn", "c10::Float8_e4m3fn", "float", "float"])
    assert tensor_core_eligible("aten::_int_mm", ["signed char", "signed char"])
    assert not tensor_core_eligible("aten::mm", ["double", "double"])
    assert not tensor_core_eligible("aten::bmm", ["c10::complex<float>", "c10::complex<float>"])
    assert tensor_core_eligible("aten::linear", ["", "", ""])     # no known type: the name decides


# ------------------------------------------------------------------ stored at ingest
def _ingested(trace: Trace, tmp_path, device: str = "synthetic GPU"):
    path = trace.write(tmp_path / "t.pt.trace.json.gz")
    if device != "synthetic GPU":
        text = path.read_bytes()
        import gzip
        path.write_bytes(gzip.compress(gzip.decompress(text).replace(b'"synthetic GPU"', f'"{device}"'.encode())))
    ingest([path], store=tmp_path / "s", jobs=1)
    return tmp_path / "s"


def _stored(store) -> dict:
    rows = Store(store).connect().execute("SELECT name, kind, tensor_core FROM gpu_ops").fetchall()
    return {(name, kind): tc for name, kind, tc in rows}


def test_kineto_ingest_stores_tensor_core_per_kernel_and_null_for_copies(tmp_path):
    """Two launches of one tensor-core GEMM, an FP32 SIMT GEMM, a Triton kernel and a copy: the
    column says true/false per kernel name, null for the memcpy."""
    t = Trace()
    h884, sgemm = "volta_h884gemm_64x64_ldg8_nn", "volta_sgemm_128x64_nt"
    t.launch(h884, 0, 5, 10, 100)
    t.launch(h884, 10, 5, 120, 100)
    t.launch(sgemm, 20, 5, 230, 100)
    t.launch("triton_poi_fused_add_0", 30, 5, 340, 10)
    t.launch("Memcpy HtoD (Pageable -> Device)", 40, 5, 360, 10, api="cudaMemcpyAsync", cat="gpu_memcpy")
    got = _stored(_ingested(t, tmp_path))
    assert got == {(h884, "kernel"): True, (sgemm, "kernel"): False, ("triton_poi_fused_add_0", "kernel"): False,
                   ("Memcpy HtoD (Pageable -> Device)", "memcpy"): None}


def test_nsys_ingest_stores_tensor_core(tmp_path):
    """nsys/nvFuser/report1_matmul_h100: one cuBLAS nvjet GEMM among ATen/nvFuser kernels."""
    ingest([shared_trace("nsys/nvFuser/report1_matmul_h100.sqlite")], store=tmp_path / "s", jobs=1)
    rows = Store(tmp_path / "s").connect().execute("SELECT name, kind, tensor_core FROM gpu_ops").fetchall()
    kernels = {name: tc for name, kind, tc in rows if kind == "kernel"}
    assert {n for n, tc in kernels.items() if tc} == {"nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NTN"}
    assert all(tc is False for n, tc in kernels.items() if not n.startswith("nvjet"))
    assert {tc for name, kind, tc in rows if kind != "kernel"} == {None}


# ------------------------------------------------------------------ the mixed-precision rule reads the column
def _mi250_fp32_mfma_trace() -> Trace:
    """An MI250 run whose GEMMs are Tensile FP32 (SB) kernels on MFMA (as hta/amd_trace's): FP32 by
    the name, matrix cores by the MI16x16x1 instruction: mixed precision must not be advised."""
    t = Trace()
    name = ("Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0_AFC1_ISA90a_IU1_K1_WG16_16_1")
    for i in range(10):
        t.launch(name, i * 1000, 5, i * 1000 + 10, 900)
    return t


def _finding(store):
    scope = open_scope(store)
    return mixed_precision(scope, evidence_for(scope))


def _rewrite_gpu_ops(store, change) -> None:
    for path in store.rglob("*.parquet"):
        if "gpu_ops" in str(path):
            pq.write_table(change(pq.read_table(path)), path)


def test_mixed_precision_reads_the_stored_column_and_the_name_for_old_stores(tmp_path):
    store = _ingested(_mi250_fp32_mfma_trace(), tmp_path, device="AMD Instinct MI250X / MI250")
    assert _stored(store) and all(_stored(store).values())
    assert _finding(store) is None                      # stored: on matrix cores
    # an old store (no tensor_core column): the rule tests the name itself, same verdict
    _rewrite_gpu_ops(store, lambda t: t.drop(["tensor_core"]))
    assert _finding(store) is None
    # the stored column is what the rule reads: said false, the FP32 GEMMs are advised
    import pyarrow as pa
    _rewrite_gpu_ops(store, lambda t: t.append_column("tensor_core", pa.array([False] * t.num_rows)))
    fd = _finding(store)
    assert fd is not None and fd.id == "mixed_precision"
