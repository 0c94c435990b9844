"""Kernel categories (traceq/rules/categories.toml) on real kernel names from many libraries.

REAL: (name, category, library, source). `shared:<path>` = a trace under ../shared/traces (names
longer than 220 characters are cut there, as profilers cut them; identity copes); `public:` = a
public repository or document quoting profiler output (found with the code-search tools; the
find_string id is given where the tool named no repository). Categories are hand-checked from the
kernel's own function, never from its template arguments.
"""
import json
import os
from collections import Counter

import polars as pl
import pytest

from traceq.rules.categories import (CATEGORIES, Rule, builtin_rules, classify, compile_rules, first_match)
from traceq.errors import TraceqError
from conftest import SHARED_TRACES

PUBLIC = [
    # LLM inference (vLLM / FlashInfer / flash-attn / TensorRT-LLM / cuBLASLt)
    ("void vllm::rms_norm_kernel<c10::BFloat16>(...)", "normalization", "vLLM", "public:find_string 60323729625"),
    ("void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(...)", "normalization", "vLLM", "public:find_string 60323729625"),
    ("void vllm::rotary_embedding_kernel<c10::BFloat16, true>(...)", "elementwise", "vLLM", "public:find_string 60323729625"),
    ("void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>, true>(c10::BFloat16*, c10::BFloat16 const*, int)",
     "elementwise", "vLLM", "public:find_string 60323729625"),
    ("void vllm::paged_attention_v1_kernel (unsigned short*, vllm::paged_attention_v1_kernel const *, vllm::paged_attention_v1_kernel const , int)",
     "attention", "vLLM", "public:find_string 56862140681"),
    ("void vllm::reshape_and_cache_kernel", "attention", "vLLM", "public:find_string 11043714010"),
    ("void flashinfer::norm::RMSNormKernel<(unsigned int)8, __half>(T2 *, T2 *, T2 *, unsigned int, unsigned int, unsigned int, float, float)",
     "normalization", "FlashInfer", "public:LAKiTU64/rag-demo documents/test_doc.md"),
    ("void flashinfer::BatchQKApplyRotaryPosIdsCosSinCacheHeadParallelismKernel<(bool)0, (unsigned int)128, (unsigned int)8, (unsigned int)16, __half, long>(T5 *, T5 *)",
     "elementwise", "FlashInfer", "public:LAKiTU64/rag-demo documents/test_doc.md"),
    ("nvjet_hsh_96x128_64x7_2x1_v_bz_TNN", "gemm", "cuBLASLt", "public:LAKiTU64/rag-demo documents/test_doc.md"),
    ("void at::native::index_elementwise_kernel<(int)128, (int)4, void at::native::gpu_index_kernel<void at::native::index_put_kernel_impl<at::native::OpaqueType<(int)2>>(at::TensorIterator &, c10::ArrayRef<long>, c10::ArrayRef<long>)",
     "elementwise", "ATen", "public:LAKiTU64/rag-demo documents/test_doc.md"),
    ("nvjet_sm100_tst_32x64_64x16_4x2_2cta_h_bz_splitK_bias_TNN", "gemm", "cuBLASLt", "public:find_string 61814580396"),
    ("bmm_MxE4m3_MxE2m1MxE4m3_Fp32_Ab32_Bb32_Cb32_t128x8x512_s3_et128x8_m128x8x32_c1x1x1_rM_TN_transOut_schPd2x1x2x3_biasFp32M_bN_tma_ldgstsSf_rgTma_clmp_swiGlu_dynB_sm100f",
     "gemm", "TensorRT-LLM", "public:find_string 61814580396"),
    ("bmm_Bfloat16_MxE2m1MxE4m3_Fp32_Ab32_Bb32_t128x8x256_s4_et128x8_m128x8x32_c1x1x1_rM_TN_tran", "gemm", "TensorRT-LLM",
     "public:find_string 55023554927"),
    ("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128,",
     "attention", "flash-attn", "public:find_string 53950673203"),
    ("void at::native::sbtopk::gatherTopK<float, unsigned int, 2, false>(at::cuda::detail::TensorInfo<float const, unsigned int>, u",
     "sort", "ATen", "public:find_string 61151496362"),
    ("at::native::bitonicSortKVInPlace", "sort", "ATen", "public:find_string 61006744269"),
    # NCCL / RCCL (2.19+ device kernel names)
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "communication", "NCCL/RCCL", "public:find_string 54986638559"),
    ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", "communication", "NCCL/RCCL", "public:find_string 53127463604"),
    ("ncclDevKernel_SendRecv", "communication", "NCCL/RCCL", "public:find_string 3007114934"),
    # DeepEP: its layout kernel counts tokens per rank/expert before any transfer (routing);
    # a CUB scan in a namespace ending in dpsk::ep stays sort (DeepSeek profile-data, as quoted)
    ("void dpsk::ep::cuda::get_dispatch_layout(long const*, int*, int*, int*, bool*, int, int)", "moe_routing", "DeepEP",
     "public:find_string 62564708034"),
    ("void dpsk::ep::internode::dispatch<false, 8, true, 8>(int4*, float*, long*, float*)", "communication", "DeepEP",
     "public:find_string 63026425278"),
    ("ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)", "communication", "NCCL/RCCL", "public:find_string 70995825446"),
    # AMD: hipBLASLt / CK / AITER / MIOpen
    ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x16x128_MI16x16x1", "gemm", "hipBLASLt/Tensile", "public:find_string 69168494169"),
    ("void ck::kernel_gemm_xdl_cshuffle_v3<ck::GridwiseGemmMultiD_ABScale_xdl_cshuffle_v3<ck::tensor_layout::gemm::RowMajor, c",
     "gemm", "CK", "public:find_string 67506527723"),
    ("void ck::kernel_gemm_xdl_cshuffle_v3_multi_d_blockscale_b_preshuffle<ck::GridwiseGemmMultiD_blockscale_xdl_cshuffle_v3_b_pre",
     "gemm", "CK", "public:find_string 56920394064"),
    ("igemm_fwd_gtcx3_nhwc_fp16_bx0_ex0_bt128x128x32_wt32x32x8_ws1x1_wr2x2_ta1x8x2x1_1x4x1x64_tb1x8x2x1_1x4x1x64_gkgs",
     "conv", "MIOpen", "public:find_string 16075841920"),
    ("miopenSp3AsmConv_v30_3_1_gfx9_fp32_f2x3_stride1", "conv", "MIOpen", "public:find_string 53092042145"),
    ("MIOpenBatchNormFwdTrainSpatial", "normalization", "MIOpen", "public:find_string 16075841920"),
    ("SubTensorOpWithScalar1d", "elementwise", "MIOpen", "public:find_string 16075841920"),
    # TensorRT / Myelin
    ("__myl_FcCast_myl0_12", "gemm", "TensorRT", "public:find_string 56032613004"),
    ("__myl_SiluMul_myl0_3", "elementwise", "TensorRT", "public:find_string 56032613004"),
    # torch.compile / Inductor
    ("triton_per_fused__to_copy_add_addmm_native_layer_nor...", "normalization", "Triton", "public:find_string 19094249720"),
    ("triton_per_fused_native_group_norm_native_group_norm_backward_0", "normalization", "Triton", "public:find_string 49592605700"),
    ("triton_per_fused_add_embedding_mean_mul_pow_rsqrt_6", "reduce", "Triton", "public:find_string 36503075450"),
    ("triton_per_fused_mul_0", "reduce", "Triton", "public:find_string 4202624000"),
    # xmma kernels name their library by suffix: `_cublas` (or none) cuBLAS, `_trt` TensorRT, `_cudnn*` cuDNN
    ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
     "gemm", "cuBLAS", "public:find_string 11922789791"),
    ("sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize96x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel", "gemm", "cuBLAS",
     "public:find_string 9331929340"),
    ("sm89_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize64x64x64_stage4_warpsize2x2x1_tensor16x8x32_bias_f32_execute_kernel_trt",
     "gemm", "TensorRT", "public:find_string 54896317660"),
    ("sm80_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize64x128x32_stage5_warpsize2x2x1_tensor16x8x16_aligna2_alignc2_execute_kernel_trt",
     "gemm", "TensorRT", "public:find_string 68637675581"),
    ("sm80_xmma_fprop_implicit_gemm_interleaved_i8f32_i8i32_f32_nchw_vect_c_32kcrs_vect_c_32_nchw_vect_c_32_tilesize64x32x64_stage6_warpsize2x1x1_g1_tensor16x8x32_simple_t1r1s1_execute_kernel_trt",
     "conv", "TensorRT", "public:find_string 37864707856"),
    ("sm50_xmma_pooling_coalescedC_NHWC_kMAX_2_False_execute_kernel_trt", "reduce", "TensorRT", "public:find_string 70175670547"),
    ("trt_turing_h1688cudnn_256x64_ldg8_relu_exp_small_nhwc_tn_v1", "conv", "TensorRT", "public:find_string 70175670547"),
    ("sm80_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize256x64x32_stage3_warpsize4x1x1_g1_tensor16x8x16_execute_kernel__5x_cudnn",
     "conv", "cuDNN", "public:find_string 66483145024"),
    ("void cudnn::engines_precompiled::nchwToNhwcKernel<__half, __half, float, (bool)0, (bool)1, (cudnnKernelDataType_t)0>(cudnn::engines_precompiled::nchw2nhwc_params_t<T3>, const T1 *",
     "transpose", "cuDNN", "public:find_string 66483145024"),
    # pooling: a windowed reduction, not a convolution (cuDNN, ATen, MIOpen)
    ("void cudnn::detail::pooling_fw_4d_kernel<float, float, cudnn::detail::maxpooling_func<float, (cudnnNanPropagation_t)0>, 0, false>(cudnnTensorStruct, float const*, cudnnTensorStruct, float*,",
     "reduce", "cuDNN", "public:find_string 13993349215"),
    ("void cudnn::ops::pooling_bw_kernel_max<__half, float, cudnn::maxpooling_func<float, (cudnnNanPropagation_t)0>, false>(cudnnTensorStruct, __half const*, cudnnTensorStruct, __half const*,",
     "reduce", "cuDNN", "public:find_string 21376749645"),
    ("void pooling_bw_kernel_max_nchw_fully_packed_large<float, float, 2, (cudnnNanPropagation_t)0>(cudnnTensorStruct, float const*, cudnnTensorStruct, float const*, cudnnTensorSt",
     "reduce", "cuDNN", "public:find_string 46903736271"),
    ("avg_pool2d_out_cuda_frame_nhwc", "reduce", "other", "public:find_string 57753866840"),
    ("mloPoolingG", "reduce", "MIOpen", "public:ROCm/rocm-libraries#1723"),
    ("mloPoolingNDFwd", "reduce", "MIOpen", "public:ROCm/rocm-libraries#1723"),
    ("mloPoolingMaxBwd", "reduce", "MIOpen", "public:ROCm/rocm-libraries#1723"),
    # nvFuser: nvfuser_<scheduler>_f*_c*_r*_g*
    ("nvfuser_pointwise_f0_c1_r0_g0", "elementwise", "nvFuser", "public:find_string 42505504045"),
    ("_ZN76_GLOBAL__N__00000000_37___tmp_kernel_pointwise_f0_c1_r0_g0_cu_8995cef2_3255329nvfuser_pointwise_f0_c1_r0_g0ENS_6TensorIfLi2ELi2EEES1_S1_",
     "elementwise", "nvFuser", "public:find_string 8844981553"),
    ("nvfuser_inner_persistent_f0_c1_r0_g0", "reduce", "nvFuser", "public:find_string 16660607914"),
    ("nvfuser_inner_outer_persistent_f0_c1_r0_g0", "reduce", "nvFuser", "public:find_string 25460566076"),
    ("nvfuser_reduction_f0_c1_r0_g0", "reduce", "nvFuser", "public:find_string 44108223742"),
    # plain user kernels
    ("vecAdd(double*, double*, double*, int)", "elementwise", "other", "public:find_string 38264402865"),
    ("vectorAdd(float const*, float const*, float*, int)", "elementwise", "other", "public:find_string 29180050365"),
    ("VectorAdd(float const*, float const*, float*, int)", "elementwise", "other", "public:find_string 69787550421"),
    ("vector_add(float*, float const*, float const*, int)", "elementwise", "other", "public:find_string 8915486984"),
    ("daxpy_kernel(int, double, double*, double*)", "elementwise", "other", "public:find_string 22629333776"),
    # MoE routing: gate top-k, histogram/offsets/align, sort by expert, permute, combine
    ("void moe_align_block_size_kernel<int>(const T1 *, int *, ...", "moe_routing", "other", "public:find_string 55046451490"),
    ("void count_and_sort_expert_tokens_kernel<int>(int const*, int*, int*, unsigned long)", "moe_routing", "other",
     "public:find_string 61694377084"),
    ("void topkGatingSoftmax<__nv_bfloat16, 8, 128, 4, 16>(cons...", "moe_routing", "other", "public:find_string 55539473759"),
    ("vllm::moe::topkGatingSoftmax", "moe_routing", "vLLM", "public:find_string 61162742926"),
    ("vllm::moe::moe_sum_kernel", "moe_routing", "vLLM", "public:find_string 52708140463"),
    ("vllm::moe::grouped_topk_fused_kernel", "moe_routing", "vLLM", "public:find_string 52708140463"),
    ("vllm::moe::moe_align_block_size_small_batch_expert_kernel", "moe_routing", "vLLM", "public:find_string 52708140463"),
    ("moe_sum_reduce_warp_per_token_vec_kernel", "moe_routing", "other", "public:find_string 69588250129"),
    ("moe_fused_gate_kernel", "moe_routing", "other", "public:find_string 69588250129"),
    ("tensorrt_llm::kernels::moeSoftmax", "moe_routing", "TensorRT-LLM", "public:find_string 57044462618"),
    ("tensorrt_llm::kernels::moeTopK", "moe_routing", "TensorRT-LLM", "public:find_string 57044462618"),
    ("tensorrt_llm::kernels::computeExpertFirstTokenOffsetKernel", "moe_routing", "TensorRT-LLM", "public:find_string 57044462618"),
    ("tensorrt_llm::kernels::expandInputRowsKernel", "moe_routing", "TensorRT-LLM", "public:find_string 57044462618"),
    ("finalizeMoeRoutingKernel", "moe_routing", "other", "public:find_string 70767050413"),
    ("fusedBuildExpertMapsSortFirstToken", "moe_routing", "other", "public:find_string 57515817343"),
    ("routingMainKernel", "moe_routing", "other", "public:find_string 53513329779"),
    ("routingIndicesClusterKernel", "moe_routing", "other", "public:find_string 53513329779"),
    ("aiter::grouped_topk_opt_sort_kernel", "moe_routing", "AITER", "public:find_string 55301687767"),
    ("ck_tile::MoeSortingKernel", "moe_routing", "CK", "public:find_string 55301687767"),
    ("aiter::mxfp4_quant_moe_sort_kernel<256,32>", "moe_routing", "AITER", "public:find_string 55301687767"),
    ("compute_expert_offsets", "moe_routing", "other", "public:find_string 70196210505"),
    ("kernel_moe_histogram", "moe_routing", "other", "public:find_string 66518524794"),
    # AMD: MIOpen convolutions, layout transposes, activations, LRN; RCCL
    ("igemm_wrw_gtcx3_nhwc_fp16_bx0_ex1_bt256x256x32_wt32x32x8_ws2x2_wr2x2_ta1x4x1x8_1x8x1x32_tb1x4x1x8_1x8x1x32_gkgs",
     "conv", "MIOpen", "public:find_string 16075841920"),
    ("igemm_bwd_gtcx3_nhwc_fp16_bx0_ex0_bt128x128x32_wt32x32x8_ws1x1_wr2x2_ta1x8x2x1_1x4x1x64_tb1x8x1x2_1x4x1x64_gkgs",
     "conv", "MIOpen", "public:find_string 16075841920"),
    ("MIOpenBatchNormBwdSpatial", "normalization", "MIOpen", "public:find_string 16075841920"),
    ("rccl_main_kernel(ncclDevComm*, unsigned long, ncclWork*)", "communication", "NCCL/RCCL", "public:find_string 16075841920"),
    ("naive_conv_fwd_nchw_half_double_half", "conv", "MIOpen", "public:find_string 25496905643"),
    ("gcnAsmConv1x1U", "conv", "MIOpen", "public:find_string 48987465461"),
    ("batched_transpose_32x16_dword", "transpose", "MIOpen", "public:find_string 52925924477"),
    ("batched_transpose_16x32_dword", "transpose", "MIOpen", "public:find_string 52993993753"),
    ("batched_transpose_32x32_half", "transpose", "MIOpen", "public:find_string 52284416728"),
    ("general_4d_reorder_1p_dword_nchw2nhwc", "transpose", "MIOpen", "public:find_string 39182814611"),
    ("transpose_NCHW2CNHW_V1_1D_WG_float", "transpose", "MIOpen", "public:find_string 7608327254"),
    ("transpose_CNHW2NCHW_V1_1D_WG_float", "transpose", "MIOpen", "public:find_string 7608327254"),
    ("MIOpenActiveFwd2DLite", "elementwise", "MIOpen", "public:find_string 52508327521"),
    ("Op2dTensorLite", "elementwise", "MIOpen", "public:find_string 52508327521"),
    ("MIOpenLRNAcrossChannels4", "normalization", "MIOpen", "public:find_string 56731184937"),
]

SHARED = [
    ('Cijk_Ailk_Bjlk_SB_Bias_AS_SAV_UserArgs_MT64x16x16_MI16x16x1_SN_LDSB0_AFC1_AFEM1_AFEM1_ASEM1_CLR1_CADS0_EPS0_GRVWA1_GRVWB1_GSUAMB_ISA90a_IU1_K1_LBSPPA0_LBSPPB0_LBSPPM0_LPA0_LPB0_LPM0_LRVW1_LWPMn1_MIAV0_MIWT1_1_MO40_NTn1_N',
     'gemm', 'hipBLASLt/Tensile', 'shared:kineto/hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz'),
    ('Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0_AFC1_AFEM1_AFEM1_ASEM1_CLR1_CADS0_EPS0_GRVWA2_GRVWB2_GSUAMB_ISA90a_IU1_K1_LBSPPA128_LBSPPB128_LBSPPM0_LPA8_LPB8_LPM0_LRVW4_LWPMn1_MIAV0_MIWT1_1_MO40_NT',
     'gemm', 'hipBLASLt/Tensile', 'shared:kineto/hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz'),
    ('void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>',
     'gemm', 'CUTLASS', 'shared:kineto/hta/call_stack/backward_thread.json'),
    ('ampere_gcgemm_64x64_nt',
     'gemm', 'cuBLAS', 'shared:kineto/hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz'),
    ('ampere_sgemm_32x32_sliced1x4_tn',
     'gemm', 'cuBLAS', 'shared:kineto/hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz'),
    ('cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1',
     'conv', 'cuDNN', 'shared:kineto/hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz'),
    ('sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_warpsize2x2x1_g1_tensor16x8x8_alignc4_execute_kernel_cudnn',
     'conv', 'cuDNN', 'shared:kineto/hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz'),
    ('void at::native::(anonymous namespace)::adaptive_average_pool<float>(float const*, float*, int, int, int, int, long, long, long)',
     'reduce', 'ATen', 'shared:kineto/hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz'),
    ('void at::native::(anonymous namespace)::fused_dropout_kernel_vec<float, float, unsigned int, 1, 4, bool>(at::cuda::detail::TensorInfo<float, unsigned int>, at::cuda::detail::TensorInfo<float, unsigned int>, at::cuda::det',
     'rng', 'ATen', 'shared:kineto/hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz'),
    ('at::cuda::(anonymous namespace)::spin_kernel(long)',
     'other', 'ATen', 'shared:kineto/hta/critical_path/cuda_event_sync/event_sync_trace.json.gz'),
    ('ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)',
     'communication', 'NCCL/RCCL', 'shared:kineto/hta/df_index_resolver/df_index_resolver.json.gz'),
    ('void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::CUDAFunctor_add<float> >(at::TensorIteratorBase&, at::native::CUDAFunctor_add<float> const&)::{lambda(int)#1}>(int, at::native::gpu_kern',
     'elementwise', 'ATen', 'shared:kineto/hta/df_index_resolver/df_index_resolver.json.gz'),
    ('void epilogue::impl::globalKernel<float, float, float, true, true>(int, int, long, float*, cublasLtEpilogue_t, int, float*, long, void*, long, long, long, float*, long, int*)',
     'other', 'other', 'shared:kineto/hta/df_index_resolver/df_index_resolver.json.gz'),
    ('void magma_sgemmEx_kernel<float, float, float, true, false, 6, 4, 6, 3, 4>(int, int, int, Tensor, int, Tensor, int, Tensor, int, Tensor, int, int, int, float const*, float const*, float, float, int, cublasLtEpilogue_t, i',
     'gemm', 'other', 'shared:kineto/hta/df_index_resolver/df_index_resolver.json.gz'),
    ('volta_sgemm_32x32_sliced1x4_nt',
     'gemm', 'cuBLAS', 'shared:kineto/hta/df_index_resolver/df_index_resolver.json.gz'),
    ('volta_sgemm_64x64_tt',
     'gemm', 'cuBLAS', 'shared:kineto/hta/df_index_resolver/df_index_resolver.json.gz'),
    ('_ZN19cutlass_cudnn_train6KernelINS_4conv6kernel23ImplicitGemmConvolutionINS1_11threadblock22ImplicitGemmMultistageINS_4gemm9GemmShapeILi128ELi128ELi32EEENS4_52Conv2dWgradOutputGradientTileAccessIteratorOptimizedINS_11Mat',
     'conv', 'cuDNN', 'shared:kineto/hta/nccl_parser_config/nccl_data.json.gz'),
    ('ampere_sgemm_32x128_nt',
     'gemm', 'cuBLAS', 'shared:kineto/hta/nccl_parser_config/nccl_data.json.gz'),
    ('cudnn_infer_ampere_scudnn_128x64_relu_xregs_large_nn_v1',
     'conv', 'cuDNN', 'shared:kineto/hta/nccl_parser_config/nccl_data.json.gz'),
    ('ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)',
     'communication', 'NCCL/RCCL', 'shared:kineto/hta/nccl_parser_config/nccl_data.json.gz'),
    ('sm80_xmma_dgrad_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x128x32_stage5_warpsize2x2x1_g1_tensor16x8x8_execute_kernel_cudnn_infer',
     'conv', 'cuDNN', 'shared:kineto/hta/nccl_parser_config/nccl_data.json.gz'),
    ('sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_warpsize2x2x1_g1_tensor16x8x8_alignc4_execute_kernel_cudnn_infer',
     'conv', 'cuDNN', 'shared:kineto/hta/nccl_parser_config/nccl_data.json.gz'),
    ('sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize256x64x32_stage3_warpsize4x2x1_g1_tensor16x8x8_execute_kernel_cudnn_infer',
     'conv', 'cuDNN', 'shared:kineto/hta/nccl_parser_config/nccl_data.json.gz'),
    ('sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x128x32_stage5_warpsize2x2x1_g1_tensor16x8x8_execute_kernel_cudnn_infer',
     'conv', 'cuDNN', 'shared:kineto/hta/nccl_parser_config/nccl_data.json.gz'),
    ('sm80_xmma_wgrad_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x16_stage4_warpsize2x2x1_g1_tensor16x8x8_execute_split_k_kernel_cudnn_train',
     'conv', 'cuDNN', 'shared:kineto/hta/nccl_parser_config/nccl_data.json.gz'),
    ('sm80_xmma_wgrad_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x128x32_stage5_warpsize2x2x1_g1_tensor16x8x8_t1r1s1_execute_kernel_cudnn_train',
     'conv', 'cuDNN', 'shared:kineto/hta/nccl_parser_config/nccl_data.json.gz'),
    ('sm80_xmma_wgrad_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x64x64_stage4_warpsize2x2x1_g1_tensor16x8x8_execute_kernel_cudnn_train',
     'conv', 'cuDNN', 'shared:kineto/hta/nccl_parser_config/nccl_data.json.gz'),
    ('void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>(cudnn::ops::nchw2nhwc_params_t<float>, float const*, float*)',
     'transpose', 'cuDNN', 'shared:kineto/hta/nccl_parser_config/nccl_data.json.gz'),
    ('void cudnn::ops::nhwcToNchwKernel<float, float, float, true, false, (cudnnKernelDataType_t)0>(cudnn::ops::nhwc2nchw_params_t<float>, float const*, float*)',
     'transpose', 'cuDNN', 'shared:kineto/hta/nccl_parser_config/nccl_data.json.gz'),
    ('void cutlass::Kernel<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(cutlass_80_simt_sgemm_128x32_8x5_nn_align1::Params)',
     'gemm', 'CUTLASS', 'shared:kineto/hta/nccl_parser_config/nccl_data.json.gz'),
    ('void cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688dgrad_optimized_tf32_256x64_16x4_nhwc_unity_stride_align4>(cutlass_tensorop_s1688dgrad_optimized_tf32_256x64_16x4_nhwc_unity_stride_align4::Params)',
     'conv', 'cuDNN', 'shared:kineto/hta/nccl_parser_config/nccl_data.json.gz'),
    ('void cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688dgrad_optimized_tf32_64x256_32x4_nhwc_align4>(cutlass_tensorop_s1688dgrad_optimized_tf32_64x256_32x4_nhwc_align4::Params)',
     'conv', 'cuDNN', 'shared:kineto/hta/nccl_parser_config/nccl_data.json.gz'),
    ('void cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688fprop_optimized_tf32_128x128_32x4_nhwc_align4>(cutlass_tensorop_s1688fprop_optimized_tf32_128x128_32x4_nhwc_align4::Params)',
     'conv', 'cuDNN', 'shared:kineto/hta/nccl_parser_config/nccl_data.json.gz'),
    ('void cutlass_cudnn_train::Kernel<cutlass_cudnn_train::reduction::kernel::ReduceSplitK<cutlass_cudnn_train::MatrixShape<4, 128>, cutlass_cudnn_train::epilogue::thread::LinearCombination<float, 4, float, float, (cutlass_cu',
     'conv', 'cuDNN', 'shared:kineto/hta/nccl_parser_config/nccl_data.json.gz'),
    ('void cutlass_cudnn_train::Kernel<cutlass_tensorop_s1688wgrad_optimized_tf32_256x64_16x4_nhwc_align4>(cutlass_tensorop_s1688wgrad_optimized_tf32_256x64_16x4_nhwc_align4::Params)',
     'conv', 'cuDNN', 'shared:kineto/hta/nccl_parser_config/nccl_data.json.gz'),
    ('cask_cudnn_infer::computeBOffsetsKernel(cask_cudnn_infer::ComputeBOffsetsParams)',
     'conv', 'cuDNN', 'shared:kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz'),
    ('cask_cudnn_train::computeWgradBOffsetsKernel(cask_cudnn_train::ComputeWgradBOffsetsParams)',
     'conv', 'cuDNN', 'shared:kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz'),
    ('cask_cudnn_train::computeWgradSplitKOffsetsKernel(cask_cudnn_train::ComputeSplitKOffsetsParams)',
     'conv', 'cuDNN', 'shared:kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz'),
    ('cudnn_infer_volta_scudnn_128x32_sliced1x4_ldg4_relu_exp_medium_nhwc_tn_v1',
     'conv', 'cuDNN', 'shared:kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz'),
    ('cudnn_infer_volta_scudnn_128x32_sliced1x4_ldg4_relu_exp_small_nhwc_tn_v1',
     'conv', 'cuDNN', 'shared:kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz'),
    ('cudnn_infer_volta_scudnn_128x64_3dconv_fprop_medium_nn_v1',
     'conv', 'cuDNN', 'shared:kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz'),
    ('cudnn_infer_volta_scudnn_128x64_relu_medium_nn_v1',
     'conv', 'cuDNN', 'shared:kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz'),
    ('cudnn_infer_volta_scudnn_128x64_relu_small_nn_v1',
     'conv', 'cuDNN', 'shared:kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz'),
    ('cudnn_infer_volta_scudnn_128x64_relu_xregs_large_nn_v1',
     'conv', 'cuDNN', 'shared:kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz'),
    ('cudnn_infer_volta_scudnn_128x64_stridedB_interior_nn_v1',
     'conv', 'cuDNN', 'shared:kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz'),
    ('cudnn_infer_volta_scudnn_128x64_stridedB_small_nn_v1',
     'conv', 'cuDNN', 'shared:kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz'),
    ('cudnn_infer_volta_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1',
     'conv', 'cuDNN', 'shared:kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz'),
    ('cudnn_train_volta_scudnn_128x128_stridedB_splitK_interior_nn_v1',
     'conv', 'cuDNN', 'shared:kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz'),
    ('cudnn_train_volta_scudnn_128x128_stridedB_splitK_medium_nn_v1',
     'conv', 'cuDNN', 'shared:kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz'),
    ('cudnn_train_volta_scudnn_128x64_stridedB_splitK_xregs_large_nn_v1',
     'conv', 'cuDNN', 'shared:kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz'),
    ('void at::native::(anonymous namespace)::CatArrayBatchedCopy_aligned16_contig<at::native::(anonymous namespace)::OpaqueType<4u>, unsigned int, 1, 128, 1>(at::native::(anonymous namespace)::OpaqueType<4u>*, at::native::(an',
     'elementwise', 'ATen', 'shared:kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz'),
    ('void cask_cudnn_infer::computeOffsetsKernel3D<false>(cask_cudnn_infer::ComputeOffsetsParams)',
     'conv', 'cuDNN', 'shared:kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz'),
    ('void cask_cudnn_infer::computeOffsetsKernel<true, false>(cask_cudnn_infer::ComputeOffsetsParams)',
     'conv', 'cuDNN', 'shared:kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz'),
    ('void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, true, true, false>(cublasLt::cublasSplitKParams<float>, float const*, float const*, float*, float const*, float const*, float const*, float cons',
     'gemm', 'cuBLASLt', 'shared:kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz'),
    ('void cudnn::bn_bw_1C11_singleread<float, 512, true, 1, 2, 0>(cudnn::bn_bw_1C11_args<float>)',
     'normalization', 'cuDNN', 'shared:kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz'),
    ('void cudnn::cnn::reduce_wgrad_nchw_helper<float, float>(void*, void const*, float, int, int)',
     'conv', 'cuDNN', 'shared:kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz'),
    ('volta_sgemm_64x64_tn',
     'gemm', 'cuBLAS', 'shared:kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz'),
    ('ampere_sgemm_32x128_tn',
     'gemm', 'cuBLAS', 'shared:kineto/hta/trace_diff/control/control.json.gz'),
    ('ampere_sgemm_32x32_sliced1x4_nn',
     'gemm', 'cuBLAS', 'shared:kineto/hta/trace_diff/control/control.json.gz'),
    ('ampere_sgemm_64x32_sliced1x4_nt',
     'gemm', 'cuBLAS', 'shared:kineto/hta/trace_diff/control/control.json.gz'),
    ('ampere_sgemm_64x64_nn',
     'gemm', 'cuBLAS', 'shared:kineto/hta/trace_diff/control/control.json.gz'),
    ('std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float, float, float, float, false, true, true, false, 7, cublasGemvParams<cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched',
     'gemm', 'other', 'shared:kineto/hta/trace_diff/control/control.json.gz'),
    ('void at::native::(anonymous namespace)::searchsorted_cuda_kernel<float, long>(long*, float const*, float const*, long const*, long, long, long, bool, bool)',
     'sort', 'ATen', 'shared:kineto/hta/trace_diff/control/control.json.gz'),
    ('void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float, float const*, float const*, float const*, float*, float*, float*)',
     'normalization', 'ATen', 'shared:kineto/hta/trace_diff/control/control.json.gz'),
    ('void at::native::indexFuncLargeIndex<float, int, unsigned int, 1, 1, -2, true, at::native::(anonymous namespace)::ReduceAdd>(at::cuda::detail::TensorInfo<float, unsigned int>, at::cuda::detail::TensorInfo<float, unsigned',
     'elementwise', 'ATen', 'shared:kineto/hta/trace_diff/control/control.json.gz'),
    ('void at::native::index_elementwise_kernel<128, 4, at::native::index_copy_kernel_impl<at::native::OpaqueType<4> >(at::TensorIterator&, long, long, long)::{lambda(int)#1}>(int, at::native::index_copy_kernel_impl<at::native',
     'elementwise', 'ATen', 'shared:kineto/hta/trace_diff/control/control.json.gz'),
    ('void at::to_dense_representation_kernel<float>(long, long, long const*, float const*, long const*, float*)',
     'other', 'ATen', 'shared:kineto/hta/trace_diff/control/control.json.gz'),
    ('void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align1>(cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align1::Params)',
     'gemm', 'CUTLASS', 'shared:kineto/hta/trace_diff/control/control.json.gz'),
    ('ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)',
     'communication', 'NCCL/RCCL', 'shared:kineto/hta/trace_diff/test/test.json.gz'),
    ('split_embedding_backward_codegen_rowwise_adagrad_unweighted_find_long_segments(at::GenericPackedTensorAccessor<int, 1ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<int, 1ul, at::RestrictPtrTraits, int>,',
     'embedding', 'fbgemm', 'shared:kineto/hta/trace_diff/test/test.json.gz'),
    ('split_embedding_backward_codegen_rowwise_adagrad_weighted_find_long_segments(at::GenericPackedTensorAccessor<int, 1ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<int, 1ul, at::RestrictPtrTraits, int>, a',
     'embedding', 'fbgemm', 'shared:kineto/hta/trace_diff/test/test.json.gz'),
    ('void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel<float, float>(long, long, float const*, float const*, float const*, float const*, float*, float*)',
     'normalization', 'ATen', 'shared:kineto/hta/trace_diff/test/test.json.gz'),
    ('void at::native::(anonymous namespace)::layer_norm_grad_input_kernel<float, float>(float const*, float const*, float const*, float const*, float const*, float*, int)',
     'normalization', 'ATen', 'shared:kineto/hta/trace_diff/test/test.json.gz'),
    ('void bounds_check_indices_kernel<long>(at::GenericPackedTensorAccessor<long, 1ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<long, 1ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<long,',
     'embedding', 'fbgemm', 'shared:kineto/hta/trace_diff/test/test.json.gz'),
    ('void cub::DeviceCompactInitKernel<cub::ReduceByKeyScanTileState<int, int, true>, int*>(cub::ReduceByKeyScanTileState<int, int, true>, int, int*)',
     'sort', 'CUB', 'shared:kineto/hta/trace_diff/test/test.json.gz'),
    ('void cub::DeviceRadixSortExclusiveSumKernel<cub::DeviceRadixSortPolicy<long, int, int>::Policy800, int>(int*)',
     'sort', 'CUB', 'shared:kineto/hta/trace_diff/test/test.json.gz'),
    ('void cub::DeviceRadixSortHistogramKernel<cub::DeviceRadixSortPolicy<long, int, int>::Policy800, false, long, int>(int*, long const*, int, int, int)',
     'sort', 'CUB', 'shared:kineto/hta/trace_diff/test/test.json.gz'),
    ('void cub::DeviceRadixSortOnesweepKernel<cub::DeviceRadixSortPolicy<long, int, int>::Policy800, false, long, int, int, int>(int*, int*, int*, int const*, long*, long const*, int*, int const*, int, int, int)',
     'sort', 'CUB', 'shared:kineto/hta/trace_diff/test/test.json.gz'),
    ('void cub::DeviceScanInitKernel<cub::ScanTileState<int, true> >(cub::ScanTileState<int, true>, int)',
     'sort', 'CUB', 'shared:kineto/hta/trace_diff/test/test.json.gz'),
    ('void cub::DeviceScanKernel<cub::AgentScanPolicy<128, 15, int, (cub::BlockLoadAlgorithm)3, (cub::CacheLoadModifier)0, (cub::BlockStoreAlgorithm)3, (cub::BlockScanAlgorithm)2, cub::MemBoundScaling<128, 15, int> >, int*, in',
     'sort', 'CUB', 'shared:kineto/hta/trace_diff/test/test.json.gz'),
    ('void fbgemm_gpu::permute_2D_lengths_kernel<int>(int, int, int const*, int const*, int*)',
     'embedding', 'fbgemm', 'shared:kineto/hta/trace_diff/test/test.json.gz'),
    ('void fbgemm_gpu::permute_indices_weights_kernel<true, int, float>(int, int, int, int const*, float const*, int const*, int const*, int const*, int*, float*)',
     'embedding', 'fbgemm', 'shared:kineto/hta/trace_diff/test/test.json.gz'),
    ('void linearize_index_kernel<long>(at::GenericPackedTensorAccessor<long, 1ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<long, 1ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<long, 1ul,',
     'embedding', 'fbgemm', 'shared:kineto/hta/trace_diff/test/test.json.gz'),
    ('void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>, float, float, float, float, float, float, adamMode_t, float, int, int>(int, int volatile*, TensorListMetadata<4>, AdamFunctor<float>, float, float',
     'optimizer', 'Apex', 'shared:kineto/hta/trace_diff/test/test.json.gz'),
    ('void permute_pooled_embs_kernel<float>(float const*, long const*, long const*, long const*, float*, long, long, long)',
     'embedding', 'fbgemm', 'shared:kineto/hta/trace_diff/test/test.json.gz'),
    ('void recat_copy_async_kernel<float>(long const*, long const*, float const*, float*, long, long, long)',
     'embedding', 'fbgemm', 'shared:kineto/hta/trace_diff/test/test.json.gz'),
    ('void split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_cta_per_row_1<float, float, float, 5ul>(at::GenericPackedTensorAccessor<float, 2ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<flo',
     'embedding', 'fbgemm', 'shared:kineto/hta/trace_diff/test/test.json.gz'),
    ('void split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_warp_per_row_1<float, float, float, 5ul>(at::GenericPackedTensorAccessor<float, 2ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<fl',
     'embedding', 'fbgemm', 'shared:kineto/hta/trace_diff/test/test.json.gz'),
    ('void split_embedding_backward_codegen_rowwise_adagrad_weighted_kernel_cta_per_row_1<float, float, float, 1ul>(at::GenericPackedTensorAccessor<float, 2ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<float',
     'embedding', 'fbgemm', 'shared:kineto/hta/trace_diff/test/test.json.gz'),
    ('void split_embedding_backward_codegen_rowwise_adagrad_weighted_kernel_warp_per_row_1<float, float, float, 1ul>(at::GenericPackedTensorAccessor<float, 2ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<floa',
     'embedding', 'fbgemm', 'shared:kineto/hta/trace_diff/test/test.json.gz'),
    ('void split_embedding_codegen_forward_unweighted_kernel<float, float, float, long, 5ul>(at::GenericPackedTensorAccessor<float, 1ul, at::RestrictPtrTraits, long>, at::GenericPackedTensorAccessor<float, 1ul, at::RestrictPtr',
     'embedding', 'fbgemm', 'shared:kineto/hta/trace_diff/test/test.json.gz'),
    ('void split_embedding_codegen_forward_weighted_kernel<float, float, float, long, 1ul>(at::GenericPackedTensorAccessor<float, 1ul, at::RestrictPtrTraits, long>, at::GenericPackedTensorAccessor<float, 1ul, at::RestrictPtrTr',
     'embedding', 'fbgemm', 'shared:kineto/hta/trace_diff/test/test.json.gz'),
    ('void split_embedding_codegen_grad_indice_weights_kernel<float, float, float, 1ul>(at::GenericPackedTensorAccessor<float, 2ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<float, 1ul, at::RestrictPtrTraits',
     'embedding', 'fbgemm', 'shared:kineto/hta/trace_diff/test/test.json.gz'),
    ('volta_sgemm_32x32_sliced1x4_tn',
     'gemm', 'cuBLAS', 'shared:kineto/hta/trace_diff/test/test.json.gz'),
    ('volta_sgemm_64x32_sliced1x4_nn',
     'gemm', 'cuBLAS', 'shared:kineto/hta/trace_diff/test/test.json.gz'),
    ('ampere_sgemm_128x128_tt',
     'gemm', 'cuBLAS', 'shared:kineto/hta/trace_filter/sampled_rank-0.json.gz'),
    ('void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel_32x32<float, float>(long, long, float const*, float const*, float const*, float const*, float*, float*)',
     'normalization', 'ATen', 'shared:kineto/hta/trace_filter/sampled_rank-0.json.gz'),
    ('void at::native::_scatter_gather_elementwise_kernel<128, 4, at::native::_cuda_scatter_gather_internal_kernel<true, float>::operator()<at::native::ReduceAdd>(at::TensorIterator&, long, long, long, at::native::ReduceAdd co',
     'elementwise', 'ATen', 'shared:kineto/hta/trace_filter/sampled_rank-0.json.gz'),
    ('void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, at::native::MaxOps<float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MaxOps<float>, unsigned int, float, 4>)',
     'reduce', 'ATen', 'shared:kineto/hta/trace_filter/sampled_rank-0.json.gz'),
    ('void fbgemm_gpu::(anonymous namespace)::_FP8rowwise_to_float_cuda_kernel<float>(unsigned char const*, int, int, float*, bool)',
     'elementwise', 'fbgemm', 'shared:kineto/hta/trace_filter/sampled_rank-0.json.gz'),
    ('void fbgemm_gpu::(anonymous namespace)::_compute_FP8_quantize_cuda_kernel<float>(float const*, float const*, int, int, unsigned char*, bool)',
     'elementwise', 'fbgemm', 'shared:kineto/hta/trace_filter/sampled_rank-0.json.gz'),
    ('void fbgemm_gpu::(anonymous namespace)::_get_FP8_qparam_cuda_kernel<float>(float const*, int, int, unsigned char*, float*, bool)',
     'elementwise', 'fbgemm', 'shared:kineto/hta/trace_filter/sampled_rank-0.json.gz'),
    ('void fbgemm_gpu::_offsets_range_cuda_kernel<int>(long, long, int const*, int*)',
     'embedding', 'fbgemm', 'shared:kineto/hta/trace_filter/sampled_rank-0.json.gz'),
    ('void gemmk1_kernel<float, 256, 5, false, false, false, false, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float, true, true>(cublasGemm',
     'gemm', 'cuBLAS', 'shared:kineto/hta/trace_filter/sampled_rank-0.json.gz'),
    ('void scal_kernel<float, float, 1, false, 6, 5, 5, 3>(cublasTransposeParams<float>, float const*, float*, float const*)',
     'elementwise', 'cuBLAS', 'shared:kineto/hta/trace_filter/sampled_rank-0.json.gz'),
    ('void (anonymous namespace)::elementwise_kernel_with_index<int, at::native::arange_cuda_out(c10::Scalar const&, c10::Scalar const&, c10::Scalar const&, at::Tensor&)::{lambda()#1}::operator()() const::{lambda()#4}::operato',
     'elementwise', 'other', 'shared:kineto/hta/trace_filter/sampled_rank-1.json.gz'),
    ('void at::native::(anonymous namespace)::CatArrayBatchedCopy<int, unsigned int, 1, 128, 1>(int*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<int, unsigned int, 128, 1>, at::native::(anonymous namespace)::',
     'elementwise', 'ATen', 'shared:kineto/hta/trace_filter/sampled_rank-1.json.gz'),
    ('void at::native::(anonymous namespace)::LayerNormForwardCUDAKernel<float, float>(long, float const*, float const*, float const*, float const*, float const*, float*)',
     'normalization', 'ATen', 'shared:kineto/hta/trace_filter/sampled_rank-1.json.gz'),
    ('void at::native::(anonymous namespace)::RowwiseMomentsCUDAKernel<float, float>(long, float, float const*, float*, float*)',
     'normalization', 'ATen', 'shared:kineto/hta/trace_filter/sampled_rank-1.json.gz'),
    ('void at::native::(anonymous namespace)::indexSelectLargeIndex<long, long, unsigned int, 1, 1, -2, true>(at::cuda::detail::TensorInfo<long, unsigned int>, at::cuda::detail::TensorInfo<long, unsigned int>, at::cuda::detail',
     'elementwise', 'ATen', 'shared:kineto/hta/trace_filter/sampled_rank-1.json.gz'),
    ('void at_cuda_detail::cub::DeviceScanInitKernel<at_cuda_detail::cub::ScanTileState<long, true> >(at_cuda_detail::cub::ScanTileState<long, true>, int)',
     'sort', 'CUB', 'shared:kineto/hta/trace_filter/sampled_rank-1.json.gz'),
    ('void at_cuda_detail::cub::DeviceScanKernel<at_cuda_detail::cub::AgentScanPolicy<128, 15, long, (at_cuda_detail::cub::BlockLoadAlgorithm)3, (at_cuda_detail::cub::CacheLoadModifier)0, (at_cuda_detail::cub::BlockStoreAlgori',
     'sort', 'CUB', 'shared:kineto/hta/trace_filter/sampled_rank-1.json.gz'),
    ('void compute_cuda_kernel<long>(long*, long*, long*, long, long)',
     'other', 'other', 'shared:kineto/hta/trace_filter/sampled_rank-1.json.gz'),
    ('void cub::DeviceReduceByKeyKernel<cub::DispatchReduceByKey<long*, long*, cub::ConstantInputIterator<int, int>, int*, int*, cub::Equality, cub::Sum, int>::PtxReduceByKeyPolicy, long*, long*, cub::ConstantInputIterator<int',
     'reduce', 'CUB', 'shared:kineto/hta/trace_filter/sampled_rank-1.json.gz'),
    ('void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_tt_align4>(cutlass_80_tensorop_s1688gemm_256x64_16x4_tt_align4::Params)',
     'gemm', 'CUTLASS', 'shared:kineto/hta/trace_filter/sampled_rank-1.json.gz'),
    ('void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x4_nt_align4>(cutlass_80_tensorop_s1688gemm_64x64_32x4_nt_align4::Params)',
     'gemm', 'CUTLASS', 'shared:kineto/hta/trace_filter/sampled_rank-1.json.gz'),
    ('void fbgemm_gpu::permute_2D_data_kernel<false, int, int, decltype(nullptr)>(int, int, int, int const*, decltype(nullptr) const*, int const*, int const*, int const*, int*, decltype(nullptr)*)',
     'embedding', 'fbgemm', 'shared:kineto/hta/trace_filter/sampled_rank-1.json.gz'),
    ('void gemvNSP_kernel<float, float, float, float, 1, 32, 4, 1024, cublasGemvParams<cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float> >(c',
     'gemm', 'cuBLAS', 'shared:kineto/hta/trace_filter/sampled_rank-1.json.gz'),
    ('void sgemm_largek_lds64<true, true, 6, 3, 4, 5, 2, 66>(float*, float const*, float const*, int, int, int, int, int, int, float const*, float const*, float, float, int, int, int*, int*)',
     'gemm', 'other', 'shared:kineto/hta/trace_filter/sampled_rank-1.json.gz'),
    ('triton_poi_fused_add_cos_sin_0',
     'elementwise', 'Triton', 'shared:kineto/hta/triton_example/triton_example.json.gz'),
    ('cask_cudnn::computeWgradBOffsetsKernel(cask_cudnn::ComputeWgradBOffsetsParams)',
     'conv', 'cuDNN', 'shared:kineto/param/resnet_kineto.json.gz'),
    ('cask_cudnn::computeWgradSplitKOffsetsKernel(cask_cudnn::ComputeSplitKOffsetsParams)',
     'conv', 'cuDNN', 'shared:kineto/param/resnet_kineto.json.gz'),
    ('cudnn_turing_scudnn_128x64_stridedB_splitK_xregs_large_nn_v1',
     'conv', 'cuDNN', 'shared:kineto/param/resnet_kineto.json.gz'),
    ('cudnn_volta_scudnn_128x128_relu_medium_nn_v1',
     'conv', 'cuDNN', 'shared:kineto/param/resnet_kineto.json.gz'),
    ('cudnn_volta_scudnn_128x64_relu_small_nn_v1',
     'conv', 'cuDNN', 'shared:kineto/param/resnet_kineto.json.gz'),
    ('cudnn_volta_scudnn_128x64_relu_xregs_large_nn_v1',
     'conv', 'cuDNN', 'shared:kineto/param/resnet_kineto.json.gz'),
    ('cudnn_volta_scudnn_128x64_stridedB_splitK_xregs_large_nn_v1',
     'conv', 'cuDNN', 'shared:kineto/param/resnet_kineto.json.gz'),
    ('cudnn_volta_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1',
     'conv', 'cuDNN', 'shared:kineto/param/resnet_kineto.json.gz'),
    ('void at::native::(anonymous namespace)::max_pool_backward_nchw<float, float>(float const*, long const*, int, long, long, long, int, int, int, int, int, int, int, int, int, int, float*)',
     'reduce', 'ATen', 'shared:kineto/param/resnet_kineto.json.gz'),
    ('void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float>, f',
     'optimizer', 'ATen', 'shared:kineto/param/resnet_kineto.json.gz'),
    ('void at::native::(anonymous namespace)::nll_loss_backward_reduce_cuda_kernel_2d<float, long>(float*, float*, long*, float*, float*, bool, int, int, long, long)',
     'reduce', 'ATen', 'shared:kineto/param/resnet_kineto.json.gz'),
    ('void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*, float*, float*, long*, float*, bool, long, long, long, long)',
     'reduce', 'ATen', 'shared:kineto/param/resnet_kineto.json.gz'),
    ('void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 32, true, 1>(float, float, float, float, cudnnTensorStruct, float const*, cudnnTensorStruct, float const*, cudnnTensorStruct, float*, float const*, float*, float*, ',
     'normalization', 'cuDNN', 'shared:kineto/param/resnet_kineto.json.gz'),
    ('void cudnn::bn_fw_tr_1C11_singleread<float, 512, true, 1, 2, 0>(cudnn::bn_fw_tr_1C11_args<float>)',
     'normalization', 'cuDNN', 'shared:kineto/param/resnet_kineto.json.gz'),
    ('void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, int, int, float const*, int, float const*, int, float*, kernel_grad_params, unsigned long long, int, unsigned long long, int, float, int, int, int)',
     'conv', 'cuDNN', 'shared:kineto/param/resnet_kineto.json.gz'),
    ('void cudnn::ops::scalePackedTensor_kernel<float, float>(long, float*, float)',
     'elementwise', 'cuDNN', 'shared:kineto/param/resnet_kineto.json.gz'),
    ('void cudnn::winograd_nonfused::winogradWgradData4x4<float, float>(cudnn::winograd_nonfused::WinogradDataParams<float, float>)',
     'conv', 'cuDNN', 'shared:kineto/param/resnet_kineto.json.gz'),
    ('void cudnn::winograd_nonfused::winogradWgradDelta4x4<float, float>(cudnn::winograd_nonfused::WinogradDeltaParams<float, float>)',
     'conv', 'cuDNN', 'shared:kineto/param/resnet_kineto.json.gz'),
    ('void cudnn::winograd_nonfused::winogradWgradOutput4x4<float, float>(cudnn::winograd_nonfused::WinogradWgradOutputParams<float, float>)',
     'conv', 'cuDNN', 'shared:kineto/param/resnet_kineto.json.gz'),
    ('void wgrad_alg0_engine<float, 128, 6, 8, 3, 3, 5, false, 512>(int, int, int, float const*, int, float*, float const*, kernel_grad_params, unsigned long long, int, float, int, int, int, int)',
     'conv', 'cuDNN', 'shared:kineto/param/resnet_kineto.json.gz'),
    ('volta_sgemm_64x64_nn',
     'gemm', 'cuBLAS', 'shared:kineto/param/resnet_kineto.json.gz'),
    ('volta_sgemm_64x64_nt',
     'gemm', 'cuBLAS', 'shared:kineto/param/resnet_kineto.json.gz'),
    ('cask_cudnn::computeBOffsetsKernel(cask_cudnn::ComputeBOffsetsParams)',
     'conv', 'cuDNN', 'shared:kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz'),
    ('cask_cudnn::computeOffsetsKernel(cask_cudnn::ComputeOffsetsParams)',
     'conv', 'cuDNN', 'shared:kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz'),
    ('void (anonymous namespace)::softmax_warp_backward<float, float, float, 10, true>(float*, float const*, float const*, int, int, int)',
     'reduce', 'other', 'shared:kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz'),
    ('void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true>(float*, float const*, int, int, int)',
     'reduce', 'other', 'shared:kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz'),
    ('void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, 512, true, 1>(cudnnTensorStruct, float const*, cudnnTensorStruct, float*, float const*, float const*, float, float, float*, float*, float*, float*, float, float)',
     'normalization', 'cuDNN', 'shared:kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz'),
    ('void cudnn::cnn::im2col4d_kernel<float, long>(cudnn::cnn::im2col4d_params, cudnnConvolutionStruct, cudnnTensor4dStruct, float const*, float*)',
     'conv', 'cuDNN', 'shared:kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz'),
    ('void cudnn::cnn::wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, 512>(int, int, int, float const*, int, float*, float const*, kernel_grad_params, unsigned long long, int, float, int, int, int, int)',
     'conv', 'cuDNN', 'shared:kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz'),
    ('void cunn_ClassNLLCriterion_updateGradInput_kernel<float>(float*, float*, long*, float*, float*, int, int, int, int, long)',
     'reduce', 'other', 'shared:kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz'),
    ('void cunn_ClassNLLCriterion_updateOutput_kernel<float, float>(float*, float*, float*, long*, float*, int, int, int, int, long)',
     'reduce', 'other', 'shared:kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz'),
    ('void explicit_convolve_sgemm<float, int, 128, 6, 7, 3, 3, 5, 0, false>(int, int, int, float const*, int, float const*, int, float*, kernel_conv_params, unsigned long long, int, unsigned long long, int, float, float, int,',
     'conv', 'cuDNN', 'shared:kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz'),
    ('void implicit_convolve_sgemm<float, float, 512, 6, 8, 3, 3, 5, 1, false, true, true>(int, int, int, float const*, int, float*, float const*, kernel_conv_params, unsigned long long, int, float, float, int, float const*, f',
     'conv', 'cuDNN', 'shared:kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz'),
    ('volta_scudnn_128x128_stridedB_medium_nn_v1',
     'conv', 'cuDNN', 'shared:kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz'),
    ('volta_scudnn_128x128_stridedB_splitK_medium_nn_v1',
     'conv', 'cuDNN', 'shared:kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz'),
    ('volta_scudnn_128x128_stridedB_splitK_small_nn_v1',
     'conv', 'cuDNN', 'shared:kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz'),
    ('volta_scudnn_128x64_relu_interior_nn_v1',
     'conv', 'cuDNN', 'shared:kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz'),
    ('volta_scudnn_128x64_relu_medium_nn_v1',
     'conv', 'cuDNN', 'shared:kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz'),
    ('volta_scudnn_128x64_relu_small_nn_v1',
     'conv', 'cuDNN', 'shared:kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz'),
    ('volta_scudnn_128x64_relu_xregs_large_nn_v1',
     'conv', 'cuDNN', 'shared:kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz'),
    ('volta_scudnn_128x64_stridedB_interior_nn_v1',
     'conv', 'cuDNN', 'shared:kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz'),
    ('volta_scudnn_128x64_stridedB_small_nn_v1',
     'conv', 'cuDNN', 'shared:kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz'),
    ('volta_scudnn_128x64_stridedB_splitK_xregs_large_nn_v1',
     'conv', 'cuDNN', 'shared:kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz'),
    ('volta_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1',
     'conv', 'cuDNN', 'shared:kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz'),
    ('compute_gemm_pointers(float2 **, const float2 *, int, const float2 *, int, const float2 *, int, int)',
     'gemm', 'other', 'shared:nsys/DLProf/nsys_profile.sqlite'),
    ('void cudnn::winograd_nonfused::winogradForwardData9x9_5x5<float, float>(cudnn::winograd_nonfused::WinogradDataParams<T1, T2>)',
     'conv', 'cuDNN', 'shared:nsys/DLProf/nsys_profile.sqlite'),
    ('void cudnn::winograd_nonfused::winogradForwardOutput9x9_5x5<float, float>(cudnn::winograd_nonfused::WinogradOutputParams<T1, T2>)',
     'conv', 'cuDNN', 'shared:nsys/DLProf/nsys_profile.sqlite'),
    ('void gemv2N_kernel<int, int, float2, float2, float2, (int)128, (int)8, (int)4, (int)4, (int)1, cublasGemvParams<cublasGemvTensorStridedBatched<const float2>, cublasGemvTensorStridedBatched<float2>, float2>>(T11)',
     'gemm', 'cuBLAS', 'shared:nsys/DLProf/nsys_profile.sqlite'),
    ('void gemv2T_kernel_val<int, int, float2, float2, float2, (int)128, (int)16, (int)2, (int)2, (bool)0, cublasGemvParams<cublasGemvTensorBatched<const float2>, cublasGemvTensorBatched<float2>, float2>>(T11, T5, T5)',
     'gemm', 'cuBLAS', 'shared:nsys/DLProf/nsys_profile.sqlite'),
    ('cudnn::gemm::computeOffsetsKernel(cudnn::gemm::ComputeOffsetsParams)',
     'conv', 'cuDNN', 'shared:nsys/DLProf/w_Relu/nsys_profile.sqlite'),
    ('void at::native::<unnamed>::max_pool_forward_nchw<float, float>(int, const T1 *, int, int, int, int, int, int, int, int, int, int, int, int, int, int, T1 *, long *)',
     'reduce', 'ATen', 'shared:nsys/DLProf/w_Relu/nsys_profile.sqlite'),
    ('void at::native::unrolled_elementwise_kernel<at::native::BinaryFunctor<float, float, float, at::native::AddFunctor<float>>, at::detail::Array<char *, (int)3>, OffsetCalculator<(int)2, unsigned int, (bool)0>, OffsetCalcul',
     'elementwise', 'ATen', 'shared:nsys/DLProf/w_Relu/nsys_profile.sqlite'),
    ('void cudnn::detail::explicit_convolve_sgemm<float, int, (int)128, (int)5, (int)5, (int)3, (int)3, (int)3, (int)0, (bool)1>(int, int, int, const T1 *, int, const T1 *, int, T1 *, kernel_conv_params, int, int, float, float',
     'conv', 'cuDNN', 'shared:nsys/DLProf/w_Relu/nsys_profile.sqlite'),
    ('void cudnn::detail::implicit_convolve_sgemm<float, float, (int)128, (int)5, (int)5, (int)3, (int)3, (int)3, (int)1, (bool)1, (bool)0, (bool)1>(int, int, int, const T1 *, int, T2 *, T1 *, kernel_conv_params, int, float, f',
     'conv', 'cuDNN', 'shared:nsys/DLProf/w_Relu/nsys_profile.sqlite'),
    ('void cudnn::winograd::generateWinogradTilesKernel<(int)0, float, float>(cudnn::winograd::GenerateWinogradTilesParams<T2, T3>)',
     'conv', 'cuDNN', 'shared:nsys/DLProf/w_Relu/nsys_profile.sqlite'),
    ('void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(cudnn::winograd_nonfused::WinogradDataParams<T1, T2>)',
     'conv', 'cuDNN', 'shared:nsys/DLProf/w_Relu/nsys_profile.sqlite'),
    ('void cudnn::winograd_nonfused::winogradForwardFilter4x4<float, float>(cudnn::winograd_nonfused::WinogradFilterParams<T1, T2>)',
     'conv', 'cuDNN', 'shared:nsys/DLProf/w_Relu/nsys_profile.sqlite'),
    ('void cudnn::winograd_nonfused::winogradForwardFilter9x9_5x5<float, float>(cudnn::winograd_nonfused::WinogradFilterParams<T1, T2>)',
     'conv', 'cuDNN', 'shared:nsys/DLProf/w_Relu/nsys_profile.sqlite'),
    ('void cudnn::winograd_nonfused::winogradForwardOutput4x4<float, float>(cudnn::winograd_nonfused::WinogradOutputParams<T1, T2>)',
     'conv', 'cuDNN', 'shared:nsys/DLProf/w_Relu/nsys_profile.sqlite'),
    ('void fft2d_c2r_16x16<float, (bool)0>(T1 *, float2 *, int, int, int, int, int, int, int, int, int, int, float, float, int, T1 *, T1 *)',
     'conv', 'cuDNN', 'shared:nsys/DLProf/w_Relu/nsys_profile.sqlite'),
    ('void fft2d_r2c_16x16<float>(float2 *, const T1 *, int, int, int, int, int, int, int, int)',
     'conv', 'cuDNN', 'shared:nsys/DLProf/w_Relu/nsys_profile.sqlite'),
    ('void flip_filter<float, float>(T2 *, const T1 *, int, int, int, int)',
     'other', 'other', 'shared:nsys/DLProf/w_Relu/nsys_profile.sqlite'),
    ('void gemmSN_NN_kernel<float, (int)128, (int)2, (int)4, (int)8, (int)3, (int)4, cublasGemvTensorStridedBatched<const float>, cublasGemvTensorStridedBatched<float>>(cublasGemmSmallNParams<T8, T9, T1>)',
     'gemm', 'cuBLAS', 'shared:nsys/DLProf/w_Relu/nsys_profile.sqlite'),
    ('void im2col4d_kernel<float, int>(im2col4d_params, cudnnConvolutionStruct, cudnnTensor4dStruct, const T1 *, T1 *, int)',
     'conv', 'cuDNN', 'shared:nsys/DLProf/w_Relu/nsys_profile.sqlite'),
    ('void splitKreduce_kernel<float, float, float>(cublasSplitKParams<T3>, const T1 *, const T2 *, T2 *, const T3 *, const T3 *)',
     'gemm', 'cuBLAS', 'shared:nsys/DLProf/w_Relu/nsys_profile.sqlite'),
    ('volta_cgemm_32x32_tn',
     'gemm', 'cuBLAS', 'shared:nsys/DLProf/w_Relu/nsys_profile.sqlite'),
    ('volta_gcgemm_32x32_nt',
     'gemm', 'cuBLAS', 'shared:nsys/DLProf/w_Relu/nsys_profile.sqlite'),
    ('void build_GPU2<128, 4>(int*, int*, int*, int, int, int, int*, int*, int, int*, int, int, int, short*)',
     'other', 'other', 'shared:nsys/Mordred-Deprecated/report1.sqlite'),
    ('void probe_GPU2<128, 4>(int*, int*, int*, int*, int*, int*, int*, int*, int, int, int, int, int*, int*, int*, int*, int, int*, int, int*, int, int*, int, int*, int, int, int, int, int, int*, int*, int*, int*, int*, int*,',
     'other', 'other', 'shared:nsys/Mordred-Deprecated/report1.sqlite'),
    ('void at::native::<unnamed>::distribution_elementwise_grid_stride_kernel<float, (int)4, void at::native::templates::cuda::normal_and_transform<float, float, at::CUDAGeneratorImpl *, void at::native::templates::cuda::norma',
     'rng', 'ATen', 'shared:nsys/llama3-inference/demo.sqlite'),
    ('<unnamed>::nvfuser_none_f0_c0_r0_g0(<unnamed>::Tensor<<unnamed>::__half, (int)3, (int)3>, <unnamed>::Tensor<<unnamed>::__half, (int)3, (int)3>, <unnamed>::TensorMap, <unnamed>::TensorMap, <unnamed>::Tensor<<unnamed>::__h',
     'other', 'nvFuser', 'shared:nsys/nvFuser/report1_matmul_h100.sqlite'),
    ('nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NTN',
     'gemm', 'cuBLASLt', 'shared:nsys/nvFuser/report1_matmul_h100.sqlite'),
    ('void at::native::vectorized_elementwise_kernel<(int)4, at::native::AbsFunctor<c10::Half>, std::array<char *, (unsigned long)2>>(int, T2, T3)',
     'elementwise', 'ATen', 'shared:nsys/nvFuser/report1_matmul_h100.sqlite'),
    ('void clover::par_ranged1d_kernel<build_field(global_variables &)::[lambda(int) (instance 1)]>(clover::Range1d, T1)',
     'other', 'other', 'shared:nsys/pipit/perlmutter-cloverleaf-cuda.sqlite'),
    ('void clover::par_reduce_kernel<field_summary(global_variables &, parallel_ &)::[lambda(int) (instance 1)]>(T1)',
     'reduce', 'other', 'shared:nsys/pipit/perlmutter-cloverleaf-cuda.sqlite'),
    ('saxpy(double *, double *, double *, double, int)',
     'elementwise', 'other', 'shared:nsys/pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite'),
    ('sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas',
     'gemm', 'cuBLAS', 'shared:kineto/tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz'),
    ('void cudnn::engines_precompiled::nchwToNhwcKernel<__nv_bfloat16, __nv_bfloat16, float, false, true, (cudnnKernelDataType_t)0>(cudnn::engines_precompiled::nchw2nhwc_params_t<float>, __nv_bfloat16 const*, __nv_bfloat16*)',
     'transpose', 'cuDNN', 'shared:kineto/tracelens/h100/Falconsai_nsfw_image_detection__1016002.json.gz'),
    ('void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8>(cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8::Params)',
     'conv', 'cuDNN', 'shared:kineto/tracelens/h100/Falconsai_nsfw_image_detection__1016002.json.gz'),
    ('igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt64x64x16_wt16x16x4_ws1x1_wr2x2_ta1x1x4x1_1x16x1x16_tb1x1x4x1_1x16x1x16_me',
     'conv', 'MIOpen', 'shared:kineto/tracelens/mi300/Falconsai_nsfw_image_detection__1016002.json.gz'),
    ('batched_transpose_256x4_half',
     'transpose', 'MIOpen', 'shared:kineto/tracelens/mi300/Falconsai_nsfw_image_detection__1016002.json.gz'),
    ('batched_transpose_128x4_half',
     'transpose', 'MIOpen', 'shared:kineto/tracelens/mi300/Falconsai_nsfw_image_detection__1016002.json.gz'),
    ('MIOpenBatchNormFwdTrainSpatialFinalMeanVariance',
     'normalization', 'MIOpen', 'shared:kineto/tracelens/perf_model_normalization/normalization_layer_test.json.gz'),
    # OpenAI triton_kernels MoE (gpt-oss on vLLM, ROCm): routing histogram/indices, the combine, the expert GEMM
    ('_combined_routing_compute',
     'moe_routing', 'other', 'shared:kineto/tracelens/inference/vllm_decode_full/graph_execution.json.gz'),
    ('_combined_routing_memset',
     'moe_routing', 'other', 'shared:kineto/tracelens/inference/vllm_decode_full/graph_execution.json.gz'),
    ('_sum_bitmatrix_rows',
     'moe_routing', 'other', 'shared:kineto/tracelens/inference/vllm_decode_full/graph_execution.json.gz'),
    ('_finalize_matmul_scatter_bf16',
     'moe_routing', 'other', 'shared:kineto/tracelens/inference/vllm_decode_full/graph_execution.json.gz'),
    ('_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1',
     'gemm', 'other', 'shared:kineto/tracelens/inference/vllm_decode_full/graph_execution.json.gz'),
    ('_topk_forward',            # a bare top-k: nothing in the name says it routes experts
     'sort', 'other', 'shared:kineto/tracelens/inference/vllm_decode_full/graph_execution.json.gz'),

]
REAL = PUBLIC + SHARED


def _classified(rows):
    names = [r[0] for r in rows]
    return classify(pl.Series(names), pl.Series(["kernel"] * len(names)))


@pytest.mark.parametrize(("name", "category", "library", "source"), REAL, ids=[f"{i}" for i in range(len(REAL))])
def test_real_kernel_names(name, category, library, source):
    got = _classified([(name,)]).row(0, named=True)
    assert (got["category"], got["library"]) == (category, library), (source, got["identity"])


def test_enough_real_names_and_every_rule_has_one():
    assert len(REAL) >= 150 and len({r[0] for r in REAL}) == len(REAL)
    rules = list(builtin_rules())
    compiled = compile_rules(rules)
    df = _classified(REAL)
    hits = Counter(first_match(n, "kernel", i, lib, compiled) for (n, *_), i, lib in
                   zip(REAL, df["identity"], df["library"]))
    for kind in ("sync", "memcpy", "memset"):       # kind rules: the runtime labels of real traces
        hits[first_match("[CUDA memcpy Host-to-Device]", kind, "", "runtime", compiled)] += 1
    unused = [(i, r) for i, r in enumerate(rules) if hits[i] == 0]
    # rules no name in REAL exercises must be exercised by CONSTRUCTED below
    covered = {first_match(n, k, *_id_lib(n), compiled) for n, k, _ in CONSTRUCTED}
    assert [r for i, r in unused if i not in covered] == []
    assert set(r.category for r in rules) <= set(CATEGORIES)


def _id_lib(name):
    row = _classified([(name,)]).row(0, named=True)
    return row["identity"], row["library"]


# Rules that no shared/public name above reaches, each with a name of the form the library
# really emits (see the README table); kept apart so REAL stays real.
CONSTRUCTED = [
    ("__amd_rocclr_copyBuffer", "kernel", "memcpy"),
    ("__amd_rocclr_fillBufferAligned", "kernel", "memset"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)", "kernel", "memset"),
    ("triton_tem_fused_convolution_0", "kernel", "conv"),
    ("triton_tem_fused_flex_attention_0", "kernel", "attention"),
    ("triton_tem_fused_mm_0", "kernel", "gemm"),
    ("void fbgemm_gpu::f8f8bf16_rowwise_kernel<int>(int)", "kernel", "gemm"),
    ("void flashinfer::BatchPrefillWithPagedKVCacheKernel<int>(int)", "kernel", "attention"),
    ("void cutlass::device_kernel<flash::FlashAttnFwdSm90<int> >(flash::Params)", "kernel", "attention"),
    ("void at::native::(anonymous namespace)::embedding_backward_feature_kernel<float, float, long>(long const*, float const*, float*, int, long, int)", "kernel", "embedding"),
    ("void cudnn::ops::nchwToNhwcKernel<float>(int)", "kernel", "transpose"),
    ("c10d::allreduce_", "kernel", "communication"),
    ("void deep_gemm::fp8_gemm_kernel<128>(int)", "kernel", "gemm"),
    ("void rocblas_gemvt_kernel<int>(int)", "kernel", "gemm"),
    ("MIOpenCvFwd11x11", "kernel", "conv"),                                  # library fallback: MIOpen -> conv
    ("void rocblas_trsm_small_kernel<float>(int)", "kernel", "gemm"),        # library fallback: rocBLAS -> gemm
    # nvFuser's transpose and matmul schedulers (NVIDIA/Fuser csrc/scheduler/scheduler_types.cpp names them)
    ("<unnamed>::nvfuser_transpose_f0_c1_r0_g0(<unnamed>::Tensor<float, (int)2, (int)2>)", "kernel", "transpose"),
    ("<unnamed>::nvfuser_matmul_f0_c1_r0_g0(<unnamed>::Tensor<<unnamed>::__half, (int)2, (int)2>)", "kernel", "gemm"),
]


@pytest.mark.parametrize(("name", "kind", "category"), CONSTRUCTED)
def test_constructed_names(name, kind, category):
    assert classify(pl.Series([name]), pl.Series([kind]))["category"][0] == category


def test_kinds_decide_runtime_ops():
    df = classify(pl.Series(["Memcpy HtoD (Pageable -> Device)", "Memset (Device)", "cudaDeviceSynchronize", "[CUDA memset]"]),
                  pl.Series(["memcpy", "memset", "sync", "memset"]))
    assert df["category"].to_list() == ["memcpy", "memset", "sync", "memset"]
    assert df["library"].to_list()[:2] == ["runtime", "runtime"]


def test_template_arguments_do_not_decide():
    """The issue's failures: types inside template arguments decided the category."""
    names = ["void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, vllm::_typeConvert<c10::BFloat16> const*)",
             "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4> >(int)",
             "void at::native::<unnamed>::distribution_elementwise_grid_stride_kernel<float, (int)4, void at::native::templates::cuda::normal_and_transform<float, float, at::CUDAGeneratorImpl *, void at::native::templates::cuda::normal_kernel<at::CUDAGeneratorImpl *>(int)>(int)",
             "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false>(flash::Flash_fwd_params)"]
    got = classify(pl.Series(names), pl.Series(["kernel"] * 4))["category"].to_list()
    assert got == ["normalization", "reduce", "rng", "attention"]


def test_user_rules_first_new_and_old_keys(tmp_path, monkeypatch):
    f = tmp_path / "rules.toml"
    f.write_text('[[rule]]\ncategory = "attention"\nidentity = "^vllm::rms_norm"\n\n'
                 '[[rule]]\ncategory = "other"\npattern = "ampere_sgemm"\n\n'
                 '[[rule]]\ncategory = "embedding"\nlibrary = "^cuDNN$"\nkinds = ["kernel"]\n')
    monkeypatch.setenv("TRACEQ_CATEGORIES", str(f))
    got = classify(pl.Series(["void vllm::rms_norm_kernel<float>(float*)", "ampere_sgemm_128x64_nn", "volta_scudnn_128x64_relu_small_nn_v1",
                              "triton_poi_fused_add_0"]), pl.Series(["kernel"] * 4))["category"].to_list()
    assert got == ["attention", "other", "embedding", "elementwise"]


@pytest.mark.parametrize("text", ['[[rule]]\npattern = "x"\n', '[[rule]]\ncategory = "gemm"\n',
                                  '[[rule]]\ncategory = "gemm"\nidentity = "("\n', '[[rule]]\ncategory = "gemm"\nidentiy = "x"\n'])
def test_bad_user_rules_name_the_file(tmp_path, monkeypatch, text):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    monkeypatch.setenv("TRACEQ_CATEGORIES", str(f))
    with pytest.raises(TraceqError) as e:
        classify(pl.Series(["x"]), pl.Series(["kernel"]))
    assert "bad.toml" in str(e.value)


def _labels():
    path = SHARED_TRACES / "kernel_labels.json"
    if not path.exists():
        pytest.skip("../shared/traces absent")
    return json.loads(path.read_text())["labels"]


def labelled_coverage() -> dict[str, float]:
    """Per trace key: % of the labelled kernel time whose predicted category is the label or in `accept`."""
    labels = _labels()
    got = classify(pl.Series([l["name"] for l in labels]), pl.Series(["kernel"] * len(labels)))["category"]
    ok, total = Counter(), Counter()
    for label, cat in zip(labels, got):
        right = cat == label["category"] or cat in label["accept"]
        for trace, share in label["share_pct"].items():
            total[trace] += share
            ok[trace] += share if right else 0.0
    return {t: 100 * ok[t] / total[t] for t in total}


@pytest.mark.shared
def test_labelled_kernel_time_is_classified_right_on_every_trace():
    cov = labelled_coverage()
    assert len(cov) == 15
    assert {t: round(v, 1) for t, v in cov.items() if v < 97.0} == {}
