"""Kernel identity (traceq.kernels.identity): function name without return type, template
arguments and parameters; wrappers keep their kernel argument; malformed names never raise."""
import polars as pl
import pytest

from traceq.kernels.identity import identities, kernel_identity, kernel_library

CASES = [
    ("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, "
     "at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 2> >(int, at::native::AUnaryFunctor<float, "
     "float, float, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 2>)",
     "at::native::vectorized_elementwise_kernel"),
    # wrapper: the template argument is the kernel
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_nn_align1>(cutlass_80_tensorop_s1688gemm_256x128_32x3_nn_align1::Params)",
     "cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_nn_align1>"),
    ("void cutlass::device_kernel<flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwd<2, cute::tuple<int> > > >(flash::Params)",
     "cutlass::device_kernel<flash::FlashAttnFwdSm90>"),
    ("void cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688dgrad_optimized_tf32_64x128_32x3_nhwc_align4>(cutlass_tensorop_s1688dgrad_optimized_tf32_64x128_32x3_nhwc_align4::Params)",
     "cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688dgrad_optimized_tf32_64x128_32x3_nhwc_align4>"),
    # anonymous namespaces in both spellings
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<2>, "
     "at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float>, float>(int)",
     "at::native::(anonymous namespace)::multi_tensor_apply_kernel"),
    ("void at::native::<unnamed>::distribution_elementwise_grid_stride_kernel<float, (int)4, void at::native::templates::cuda::normal_and_transform<float>(at::TensorIteratorBase &)>(long, T3)",
     "at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel"),
    ("<unnamed>::nvfuser_none_f0_c0_r0_g0(<unnamed>::Tensor<<unnamed>::__half, (int)3, (int)3>)",
     "(anonymous namespace)::nvfuser_none_f0_c0_r0_g0"),
    # lambdas and operator() inside template arguments do not leak into the identity
    ("void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
     "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4> >(at::native::ReduceOp<float>)",
     "at::native::reduce_kernel"),
    ("void at::native::unrolled_elementwise_kernel<at::native::copy_device_to_device(at::TensorIterator &, bool)::[lambda() (instance 3)]::operator ()() const>(int)",
     "at::native::unrolled_elementwise_kernel"),
    # an operator as the function itself
    ("void foo::Bar<int>::operator()(int) const", "foo::Bar::operator()"),
    # no template, no parameters
    ("ampere_sgemm_128x64_nn", "ampere_sgemm_128x64_nn"),
    ("triton_poi_fused_add_cos_sin_0", "triton_poi_fused_add_cos_sin_0"),
    ("saxpy(double *, double *, double *, double, int)", "saxpy"),
    ("void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>(cudnn::ops::nchw2nhwc_params_t<float>, float const*, float*)",
     "cudnn::ops::nchwToNhwcKernel"),
    # a space before the parameter list (nsys/older profilers)
    ("void vllm::paged_attention_v1_kernel (unsigned short*, vllm::paged_attention_v1_kernel const *, int)",
     "vllm::paged_attention_v1_kernel"),
    # runtime labels stay as they are
    ("Memcpy HtoD (Pageable -> Device)", "Memcpy HtoD (Pageable -> Device)"),
    ("[CUDA memset]", "[CUDA memset]"),
    # truncated names (profilers cut long names): keep what precedes the cut
    ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::Tens",
     "at::native::elementwise_kernel"),
    ("void at::native::sbtopk::gatherTopK<float, unsigned int, 2, false>(at::cuda::detail::Tenso", "at::native::sbtopk::gatherTopK"),
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x4_nn_al", "cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x4_nn_al>"),
    ("triton_per_fused__to_copy_add_addmm_native_layer_nor...", "triton_per_fused__to_copy_add_addmm_native_layer_nor..."),
    # mangled names: the nested name; a wrapper adds its argument's names
    ("_ZN19cutlass_cudnn_train6KernelINS_4conv6kernel23ImplicitGemmConvolutionINS1_11threadblock22ImplicitGemmMultistage",
     "cutlass_cudnn_train::Kernel<conv::kernel::ImplicitGemmConvolution>"),
    ("_Z5saxpyifPfS_", "saxpy"),
]


@pytest.mark.parametrize(("name", "identity"), CASES)
def test_identity(name, identity):
    assert kernel_identity(name) == identity


@pytest.mark.parametrize("name", ["", "<", "(", "void", "void <>()", "a<b(c>d)", "::", "operator", "{lambda()#1}",
                                  "void f<<<<", ")))(((", "_Z", "_ZN", "_ZN99x", "x" * 5000 + "<"])
def test_malformed_names_never_raise(name):
    out = kernel_identity(name)
    assert isinstance(out, str) and isinstance(kernel_library(out), str)


def test_identities_computed_per_distinct_name_keep_row_order():
    names = pl.Series(["ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)", None, "ampere_sgemm_128x64_nn",
                       "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)"])
    df = identities(names)
    assert df["identity"].to_list() == ["ncclKernel_AllReduce_RING_LL_Sum_float", "", "ampere_sgemm_128x64_nn",
                                        "ncclKernel_AllReduce_RING_LL_Sum_float"]
    assert df["library"].to_list() == ["NCCL/RCCL", "other", "cuBLAS", "NCCL/RCCL"]


# ---------------------------------------------------------------- short labels for tables
from traceq.kernels.labels import short_labels  # noqa: E402

ADD4 = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int)"
ADD2 = "void at::native::vectorized_elementwise_kernel<2, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int)"
MUL = "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3> >(int)"


def _blake(name: str) -> str:
    import hashlib

    return hashlib.blake2b(name.encode(), digest_size=16).hexdigest()[:4]


def test_short_labels_disambiguate_deterministically():
    names = [MUL, ADD4, ADD2, "ampere_sgemm_128x64_nn", MUL, None]
    labels = short_labels(names, [kernel_identity(n) if n else None for n in names])
    assert labels == ["at::native::vectorized_elementwise_kernel[BinaryFunctor]",
                      # same words, different template numbers: tagged by a hash of the full name
                      f"at::native::vectorized_elementwise_kernel #{_blake(ADD4)}",
                      f"at::native::vectorized_elementwise_kernel #{_blake(ADD2)}",
                      "ampere_sgemm_128x64_nn", "at::native::vectorized_elementwise_kernel[BinaryFunctor]", None]
    # order of rows does not change a name's label
    assert short_labels(list(reversed(names)), [kernel_identity(n) if n else None for n in reversed(names)]) == list(reversed(labels))


def test_short_labels_without_identity_fall_back_to_the_name():
    assert short_labels(["x" * 100, "y"], [None, None], width=20) == ["xxxxxxxxxx…xxxxxxxxx", "y"]


@pytest.mark.shared
def test_short_labels_unique_on_every_shared_trace():
    """Per trace, every distinct kernel name gets its own label (the table never shows two
    kernels alike)."""
    import json

    from conftest import SHARED_TRACES

    path = SHARED_TRACES / "kernel_labels.json"
    if not path.exists():
        pytest.skip("../shared/traces absent")
    per_trace: dict[str, set[str]] = {}
    for label in json.loads(path.read_text())["labels"]:
        for trace in label["traces"]:
            per_trace.setdefault(trace, set()).add(label["name"])
    for trace, names in per_trace.items():
        names = sorted(names)
        labels = short_labels(names, [kernel_identity(n) for n in names])
        assert len(set(labels)) == len(names), trace
        assert all(len(lab) <= 64 for lab in labels)


def test_hotspots_headline_names_the_top_kernel_by_its_table_label(tmp_path):
    """Synthetic: MUL 500 µs and ADD4 300 µs (same identity, 62.5 % and 37.5 %). The headline
    names the top hotspot as the table's first row does, not by a signature cut mid-list."""
    from kineto_synth import Trace
    from typer.testing import CliRunner

    from traceq.cli import app
    from traceq.ingest import ingest

    t = Trace()
    t.step(1, 0, 2000)
    t.launch(MUL, 0, 10, 20, 500)
    t.launch(ADD4, 30, 10, 600, 300)
    ingest([t.write(tmp_path / "t.json.gz")], store=tmp_path / "s", jobs=1)
    out = CliRunner().invoke(app, ["hotspots", "--store", str(tmp_path / "s")], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    label = "at::native::vectorized_elementwise_kernel[BinaryFunctor]"
    assert f"top hotspot: {label} (62.5 %)" in out.output
    first_row = next(line for line in out.output.splitlines() if "62.5" in line and "top hotspot" not in line)
    assert first_row.split()[0] == label
