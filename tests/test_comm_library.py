"""Communication kernels by library (traceq/rules/categories.toml) and the collective type of
each (traceq.rules.collective_type): real kernel names per
vendor, names that must stay out, and a synthetic Kineto trace where the category reaches
`overlap` and the launching op gives the type (`traceq ranks`' key, queries/ranks_rank.sql).

Where each name comes from (names are facts, read from the sources or from traces quoted in
public repositories):
  NCCL         ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t: HTA's trace_filter test trace
               (../shared/traces/kineto/hta/trace_filter, launched under nccl:all_to_all);
               ncclDevKernel_AllGather_RING_LL / ncclDevKernel_AllReduce_Sum_f32_RING_LL: NCCL >= 2.19
               traces (tests/test_summary_overlap.py)
  DeepEP       deep_ep::internode_ll::dispatch/combine, deep_ep::intranode::notify_dispatch,
               deep_ep::internode::cached_notify, deep_ep::legacy::layout::get_dispatch_layout:
               deepseek-ai/DeepEP csrc/kernels/{internode,internode_ll,intranode,layout}.cu
               (__global__ kernels in namespaces deep_ep[::legacy]::internode/intranode/internode_ll/
               layout); deep_ep::elastic::dispatch_impl/combine_impl/pp_send_impl:
               deep_ep/include/deep_ep/impls/*.cuh (namespace deep_ep::elastic)
  DeepEP (DeepSeek's profiles)  dpsk::ep::internode::dispatch<false, 8, true, 8>,
               dpsk::ep::internode::notify_dispatch<false, 4>, dpsk::ep::internode::combine,
               dpsk::ep::cuda::get_dispatch_layout; the CUB kernels of cdpsk::ep::CUB_…: the
               traces of deepseek-ai/profile-data (train.json, prefill.json) as quoted in public
               notes on them
  NCCL EP / UCCL  nccl_ep::internode_ll::dispatch<...>, uccl::internode_ll::dispatch: kernel
               names quoted from ep_bench profiles and UCCL's EP port
  MORI (AMD)   mori::moe::EpDispatchInterNodeKernel: ROCm/mori dispatch_combine kernels
  MSCCL++      allgather (an extern "C" __global__ kernel taking mscclpp::SmChannelDeviceHandle*,
               in a public mscclpp-based allgather test)
  NVSHMEM      nvshmemi_proxy_rma_entrypoint, nvshmemi_reduce_kernel: NVSHMEM's host/device sources
  vLLM / SGLang  vllm::cross_device_reduce_1stage/2stage (csrc/custom_all_reduce.cuh),
               sglang::cross_device_reduce_2stage (sgl-kernel custom_all_reduce.cuh, namespace fix
               sgl-project/sglang#6039), aiter::cross_device_reduce_2stage and
               quickreduce::allreduce_prototype_twoshot<AllReduceTwoshot<__half, CodecQ4<__half,4>,
               true>, __half> (vLLM/aiter quick all-reduce on ROCm, quoted from MI355X profiles)
  TensorRT-LLM tensorrt_llm::kernels::oneShotAllReduceKernel / twoShotAllReduceKernel
               (cpp/tensorrt_llm/kernels/customAllReduceKernels.cu, NVIDIA/TensorRT-LLM#2575),
               tensorrt_llm::kernels::ar_fusion::allreduce_fusion_kernel_oneshot_lamport /
               _twoshot_sync (kernels/communicationKernels/allReduceFusionKernels.cu)
  FlashInfer   flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport
               (flashinfer/comm/trtllm_allreduce_fusion.cuh)
  oneCCL       oneccl_alltoall_write_aligned, oneccl_invoke_barrier: SYCL kernel-name classes of
               oneapi-src/oneCCL src/coll/algorithms
  HCCL         hcom_allReduce__428_0_1, hcom_allGather_, hcom_reduceScatter_: Ascend (torch_npu /
               msprof) communication op names
  Not communication: vllm::moe::topkGatingSoftmax (vLLM csrc/moe/topk_softmax_kernels.cu),
               vllm::moe::moe_align_block_size_kernel (vLLM csrc/moe), DeepEP's layout kernels
               (above), cdpsk::ep::CUB_… (above); moe_dispatch_kernel, combine_kernel and
               at::native::dispatch_kernel are made-up names holding the bare words.
"""
from __future__ import annotations

import sys
from pathlib import Path

import polars as pl
import pytest

from traceq.ingest import ingest
from traceq.queries import install_macros, run_script
from traceq.rules.categories import categorize
from traceq.rules.collective_type import TYPES, collective_type, macro, rules

sys.path.insert(0, str(Path(__file__).parent))
from kineto_synth import GPU_PID, Trace  # noqa: E402
from scoped import overlap  # noqa: E402
from traceq.engine.scope import open_scope  # noqa: E402

# (kernel name, its collective type), per vendor: every one is communication
COMM = {
    "NCCL": [("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", "send_recv"),
             ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "all_gather"),
             ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "all_reduce"),
             ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "reduce_scatter"),
             ("ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "broadcast"),
             ("ncclDevKernel_Reduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "reduce")],
    "DeepEP": [("void deep_ep::internode_ll::dispatch<false, 7168>(void*, float*, int*, long*)", "dispatch"),
               ("void deep_ep::internode_ll::combine<7168>(void*, void*, int*)", "combine"),
               ("void deep_ep::intranode::notify_dispatch<8>(int const*, int*, int)", "dispatch"),
               ("void deep_ep::intranode::cached_notify_combine<8>(void**, int*, int)", "combine"),
               ("void deep_ep::intranode::barrier<8>(int**, int)", "barrier"),
               ("void deep_ep::elastic::dispatch_impl<8, 7168>(deep_ep::elastic::DispatchArgs)", "dispatch"),
               ("void deep_ep::elastic::pp_send_impl<4>(void*)", "send_recv")],
    "DeepEP (dpsk)": [("void dpsk::ep::internode::dispatch<false, 8, true, 8>(int4*, float*, long*)", "dispatch"),
                      ("void dpsk::ep::internode::notify_dispatch<false, 4>(int const*, long*, int)", "dispatch"),
                      ("void dpsk::ep::internode::combine<8>(int4*, float*, bool const*)", "combine"),
                      ("void dpsk::ep::internode::cached_notify(int, int, int, int)", None)],
    "NCCL EP / UCCL": [("void nccl_ep::internode_ll::dispatch<(bool)0,(bool)0,(int)7168,(ncclEpLayout_t)1,(bool)1>(void*)",
                        "dispatch"),
                       ("void uccl::internode_ll::dispatch<7168>(void*)", "dispatch")],
    "MORI": [("void mori::moe::EpDispatchInterNodeKernel<float>(mori::moe::EpDispatchCombineArgs<float>)", "dispatch")],
    "MSCCL++": [("allgather(mscclpp::SmChannelDeviceHandle*, mscclpp::DeviceSyncer*, int)", "all_gather")],
    "NVSHMEM": [("void nvshmemi_proxy_rma_entrypoint<(nvshmemi_op_t)0, 1>(void*, void*, rma_bytesdesc_t)", None),
                ("void nvshmemi_reduce_kernel<float, (rdxn_ops_t)0>(int, int, int, float*)", "reduce")],
    "vLLM / SGLang": [("void vllm::cross_device_reduce_1stage<c10::BFloat16, 8>(vllm::RankData*, vllm::RankSignals)",
                       "all_reduce"),
                      ("void vllm::cross_device_reduce_2stage<c10::BFloat16, 8>(vllm::RankData*, vllm::RankSignals)",
                       "all_reduce"),
                      ("void sglang::cross_device_reduce_2stage<__nv_bfloat16, 4>(sglang::RankData*)", "all_reduce"),
                      ("void aiter::cross_device_reduce_2stage<__half, 8>(aiter::RankData*)", "all_reduce"),
                      ("void quickreduce::allreduce_prototype_twoshot<AllReduceTwoshot<__half, CodecQ4<__half,4>, true>, "
                       "__half>(__half const*, __half*, unsigned int)", "all_reduce")],
    "TensorRT-LLM": [("void tensorrt_llm::kernels::oneShotAllReduceKernel<__nv_bfloat16, 8>(AllReduceParams)",
                      "all_reduce"),
                     ("void tensorrt_llm::kernels::twoShotAllReduceKernel<__nv_bfloat16, 8>(AllReduceParams)",
                      "all_reduce"),
                     ("void tensorrt_llm::kernels::ar_fusion::allreduce_fusion_kernel_oneshot_lamport<"
                      "(AllReduceFusionPattern)1, __nv_bfloat16, 8, true, true>(AllReduceFusionParams)", "all_reduce"),
                     ("void tensorrt_llm::kernels::ar_fusion::allreduce_fusion_kernel_twoshot_sync<__nv_bfloat16, 8, "
                      "true>(AllReduceFusionParams, std::array<int, 8>)", "all_reduce")],
    "FlashInfer": [("void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport<"
                    "(AllReduceFusionPattern)0, __nv_bfloat16, 4, true, true>(AllReduceFusionParams<__nv_bfloat16>)",
                    "all_reduce")],
    "oneCCL": [("oneccl_alltoall_write_aligned<float, 4>", "all_to_all"), ("oneccl_invoke_barrier", "barrier")],
    "HCCL": [("hcom_allReduce__428_0_1", "all_reduce"), ("hcom_allGather_", "all_gather"),
             ("hcom_reduceScatter_", "reduce_scatter")],
}
# names that must not be communication, with the category they keep
NOT_COMM = [
    ("void vllm::moe::topkGatingSoftmax<4, 8, 4, 16, long>(float const*, bool const*, float*)", "moe_routing"),
    ("void vllm::moe::moe_align_block_size_kernel<int>(int const*, int*, int*)", "moe_routing"),
    ("void deep_ep::legacy::layout::get_dispatch_layout(long const*, int*, int*, int*, bool*, int, int)", "moe_routing"),
    ("void dpsk::ep::cuda::get_dispatch_layout(long const*, int*, int*, int*, bool*, int, int)", "moe_routing"),
    ("void cdpsk::ep::CUB_201_NS::DeviceScanKernel<int>(int)", "sort"),      # a CUB scan, not DeepEP
    ("moe_dispatch_kernel", "other"),
    ("combine_kernel", "other"),
    ("void at::native::(anonymous namespace)::dispatch_kernel<float>(float*)", "other"),
]


def _categories(names: list[str]) -> list[str]:
    return categorize(pl.Series(names), pl.Series(["kernel"] * len(names))).to_list()


@pytest.mark.parametrize("vendor", sorted(COMM))
def test_communication_kernels_of_each_library_are_communication(vendor):
    names = [n for n, _ in COMM[vendor]]
    assert _categories(names) == ["communication"] * len(names)


# the `library` column (traceq.kernels.identity.LIBRARIES) of each vendor's kernels above:
# None where the name carries no library mark (MSCCL++'s extern "C" allgather)
LIBRARY = {"NCCL": "NCCL/RCCL", "DeepEP": "DeepEP", "DeepEP (dpsk)": "DeepEP", "MORI": "MORI", "MSCCL++": None,
           "NVSHMEM": "NVSHMEM", "vLLM / SGLang": None, "TensorRT-LLM": "TensorRT-LLM", "FlashInfer": "FlashInfer",
           "oneCCL": "oneCCL", "HCCL": "HCCL"}


@pytest.mark.parametrize("vendor", sorted(COMM))
def test_communication_kernels_name_their_library(vendor):
    from traceq.kernels.identity import kernel_identity, kernel_library

    got = [kernel_library(kernel_identity(n)) for n, _ in COMM[vendor]]
    if vendor == "NCCL EP / UCCL":
        assert got == ["NCCL EP", "UCCL"]
    elif vendor == "vLLM / SGLang":   # the engine's own kernels
        assert got == ["vLLM", "vLLM", "SGLang", "AITER", "other"]
    elif LIBRARY[vendor] is None:
        assert got == ["other"] * len(got)
    else:
        assert got == [LIBRARY[vendor]] * len(got)


@pytest.mark.parametrize("vendor", sorted(COMM))
def test_the_kernel_name_gives_the_collective_type(vendor):
    assert [collective_type(n) for n, _ in COMM[vendor]] == [t for _, t in COMM[vendor]]


def test_moe_routing_and_bare_dispatch_combine_words_are_not_communication():
    assert _categories([n for n, _ in NOT_COMM]) == [c for _, c in NOT_COMM]


def test_the_launching_op_wins_over_the_kernel_name():
    send_recv = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"
    dev = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"
    assert collective_type(send_recv) == "send_recv"
    assert collective_type(send_recv, "nccl:all_to_all") == "all_to_all"
    assert collective_type(dev, "c10d::alltoall_base_") == "all_to_all"
    # record_param_comms names no collective: its "Collective name" argument does
    assert collective_type(dev, "record_param_comms", "all_to_all") == "all_to_all"
    assert collective_type(dev, "record_param_comms", "all_to_allv") == "all_to_all"
    assert collective_type(dev, "nccl:send") == "send_recv"
    assert collective_type("ncclDevKernel_AllGather_RING_LL", "nccl:_all_gather_base") == "all_gather"
    assert collective_type("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL", "nccl:_reduce_scatter_base") == "reduce_scatter"
    assert collective_type("ncclDevKernel_Reduce_Sum_f32_RING_LL", "c10d::reduce_") == "reduce"
    assert collective_type("ncclDevKernel_Broadcast_RING_LL", "gloo:broadcast") == "broadcast"
    assert collective_type("some_kernel", "record_param_comms", None) is None


def test_the_duckdb_macro_reads_the_same_table():
    import duckdb

    assert {t for t, _ in rules()} == set(TYPES)
    cases = [(n, op, arg) for v in COMM.values() for n, _ in v for op, arg in ((None, None),)]
    cases += [("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t", "nccl:all_to_all", None),
              ("ncclDevKernel_SendRecv", "record_param_comms", "all_to_all"),
              ("ncclDevKernel_SendRecv", "nccl:recv", None)]
    from traceq.kernels.identity import kernel_identity

    con = duckdb.connect()
    con.execute(macro())
    got = [con.execute("SELECT collective_type(?, ?, ?)", [kernel_identity(n), op, arg]).fetchone()[0]
           for n, op, arg in cases]
    assert got == [collective_type(n, op, arg) for n, op, arg in cases]


COMM_STREAM = 20
SEND_RECV = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"
DPSK = "void dpsk::ep::internode::dispatch<false, 8, true, 8>(int4*, float*, long*, float*)"
DEV_SEND_RECV = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"


def _comm_launch(t: Trace, corr: int, name: str, call_us: int, k_us: int, k_dur: int, **kernel_args) -> None:
    t._x("cuda_runtime", "cudaLaunchKernel", call_us, 5, correlation=corr)
    t._x("kernel", name, k_us, k_dur, pid=GPU_PID, tid=COMM_STREAM, correlation=corr, device=0,
         stream=COMM_STREAM, **kernel_args)


def _trace(tmp_path: Path) -> Path:
    """One step [0, 1000) µs: a GEMM [20, 420) on the compute stream; on the comm stream
    DeepSeek's DeepEP dispatch [300, 600) (traceq once called it compute), an NCCL send/recv
    kernel [730, 830) launched at 720 under c10d::alltoall_base_ > record_param_comms >
    nccl:all_to_all (the annotation, as in HTA's trace_filter trace), and an NCCL >= 2.19
    send/recv kernel [870, 920) launched at 850 under record_param_comms alone, the kernel
    carrying "Collective name": "all_to_all" (PyTorch >= 2.1)."""
    t = Trace()
    t.step(1, 0, 1000)
    t.launch("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn", 10, 5, 20, 400)
    _comm_launch(t, 1, DPSK, 30, 300, 300)
    t.cpu_op("c10d::alltoall_base_", 700, 100)
    t.cpu_op("record_param_comms", 705, 90)
    t.annotation("nccl:all_to_all", 710, 80)
    _comm_launch(t, 2, SEND_RECV, 720, 730, 100)
    t.cpu_op("record_param_comms", 845, 15)
    _comm_launch(t, 3, DEV_SEND_RECV, 850, 870, 50, **{"Collective name": "all_to_all"})
    return t.write(tmp_path / "comm.pt.trace.json.gz")


def test_a_deepep_kernel_counts_as_communication_in_overlap(tmp_path):
    ingest([_trace(tmp_path)], store=tmp_path / "s", jobs=1)
    row = overlap(tmp_path / "s").row(0, named=True)
    # communication: dispatch 300 + send/recv 100 + 50 = 450 µs; under the GEMM [20, 420):
    # [300, 420) = 120 µs; exposed 450 - 120 = 330 µs
    assert (row["comm_ops"], row["comm_ns"], row["overlapped_ns"], row["exposed_ns"]) == (3, 450_000, 120_000, 330_000)
    assert row["overlap_pct"] == pytest.approx(100 * 120 / 450)
    step = overlap(tmp_path / "s", by="step").row(0, named=True)
    # the step: CPU [0, 1000) holds every launch and ends after the last kernel (920): 1000 µs
    assert (step["step"], step["exposed_ns"], step["step_ns"]) == (1, 330_000, 1_000_000)
    assert step["exposed_step_pct"] == pytest.approx(33.0)


def test_the_launching_op_types_the_collective_instances(tmp_path):
    ingest([_trace(tmp_path)], store=tmp_path / "s", jobs=1)
    scope = open_scope(tmp_path / "s")
    install_macros(scope.con)
    got = run_script(scope.con, "ranks_rank", {"run": scope.run, "rank": None})
    # no process group on the kernels: matched by order on their one stream (grp 'stream 0')
    assert got.select("grp", "coll", "k", "start_ns", "end_ns").rows() == [
        ("stream 0", "dispatch", 0, 300_000, 600_000),
        ("stream 0", "all_to_all", 1, 730_000, 830_000),       # nccl:all_to_all, not SendRecv
        ("stream 0", "all_to_all", 2, 870_000, 920_000),       # its "Collective name"
    ]
