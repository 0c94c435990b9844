"""diagnose's verdict (the largest avoidable cost, traceq/advice/bound.py) and the rules of
issue 31 (exposed communication, warm-up, idle inside a user range, allocator churn against
first-touch allocations, mixed precision, fuse elementwise, the optimizer the trace names,
inference wording, gpu_idle_pct), each on a small synthetic Kineto trace whose expected
numbers are derived here from the events it writes (µs): one case where the rule fires, one
where it must not. The same rules on every real trace: tests/verdicts/."""
from __future__ import annotations

import pytest
import polars as pl
from kineto_synth import Trace
from scoped import diagnose

from traceq.advice import findings
from traceq.engine.scope import open_scope
from traceq.ingest import ingest

NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
GEMM = "volta_sgemm_128x64_nn"


def _diagnosed(tmp_path, t: Trace, name: str = "t") -> dict:
    d = tmp_path / name
    ingest([t.write(d / "t.pt.trace.json.gz")], store=d / "s", jobs=1)
    return diagnose(d / "s").row(0, named=True)


def _ids(row: dict) -> dict:
    return {f["id"]: f for f in row["findings"]}


# ---------------------------------------------------------------- exposed communication
def test_exposed_communication_is_a_finding_and_the_bound(tmp_path):
    """A compute kernel 0-4000, an all-reduce 3000-7000 (1000 of it under compute), compute
    7000-9000: the GPU is never idle, yet 3000 of the 9000 µs span is communication nothing
    hides (33.3 %): bound communication, not gpu."""
    t = Trace()
    t.launch("void at::native::elementwise_kernel<128, 2>(int)", 0, 5, 0, 4000)
    t.launch(NCCL, 10, 5, 3000, 4000)
    # PyTorch's collective args on the kernel: 1,000,000 floats = 4 MB in 4000 µs, 2 ranks:
    # algbw 1.0 GB/s, bus bandwidth 2(n-1)/n = 1 times that
    t.events[-1]["args"].update({"In msg nelems": 1_000_000, "Out msg nelems": 1_000_000, "dtype": "Float",
                                 "Group size": 2, "Collective name": "allreduce"})
    t.launch("void at::native::elementwise_kernel<128, 2>(int)", 20, 5, 7000, 2000)
    row = _diagnosed(tmp_path, t)
    assert row["bound"] == "communication"
    assert row["bound_share_pct"] == pytest.approx(100 * 3000 / 9000, abs=0.01)
    f = _ids(row)["exposed_communication"]
    assert f["gpu_ms"] == pytest.approx(3.0)
    assert "communication kernels run 4.00 ms, 25 % of it under compute, 3.00 ms with no compute running" in f["evidence"]
    assert "ncclKernel_AllReduce_RING_LL_Sum_float ×1 (4.00 ms, mean message 4.0 MB, bus bandwidth 1.0 GB/s)" \
        in f["evidence"]
    # no backward or optimizer: an inference trace, no DDP gradient-bucket advice; the serving one
    assert "bucket_cap_mb" not in f["advice"] and "inference collectives (tensor/sequence parallel)" in f["advice"]


def test_hidden_communication_is_no_finding(tmp_path):
    """The same all-reduce entirely under a compute kernel (1000-3000 inside 0-4000): nothing
    exposed, no finding, GPU-bound."""
    t = Trace()
    t.launch("void at::native::elementwise_kernel<128, 2>(int)", 0, 5, 0, 4000)
    t.launch(NCCL, 10, 5, 1000, 2000)
    row = _diagnosed(tmp_path, t)
    assert row["bound"] == "gpu" and "exposed_communication" not in _ids(row)
    assert "exposed_communication" not in {f["id"] for f in row["also_seen"]}


# ---------------------------------------------------------------- warm-up
def test_module_loading_is_warmup_not_launch_overhead(tmp_path):
    """Kernel 0-100; the host loads a module (cuModuleLoadData 200-5200) and launches the next
    kernel at 5300 (5310-5400). The 5210 µs gap holds 5000 µs of start-up: warmup 5000/5400 =
    92.6 % of the span, the bound; the 10 µs launch call is no launch_overhead finding."""
    t = Trace()
    t.launch("void at::native::elementwise_kernel<128, 2>(int)", 0, 5, 0, 100)
    t.runtime("cuModuleLoadData", 200, 5000)
    t.launch("void at::native::elementwise_kernel<128, 2>(int)", 5300, 10, 5310, 90)
    row = _diagnosed(tmp_path, t)
    assert (row["bound"], row["bound_share_pct"]) == ("warmup", pytest.approx(100 * 5000 / 5400, abs=0.01))
    f = _ids(row)["warmup"]
    assert f["gpu_ms"] == pytest.approx(5.0) and "cuModuleLoadData ×1 (5.00 ms host)" in f["evidence"]
    assert "profile steady-state steps" in f["advice"]
    assert "launch_overhead" not in _ids(row) and "allocator_churn" not in _ids(row)


def test_first_touch_allocations_are_warmup_and_churn_is_churn(tmp_path):
    """Three steps, each: kernel, then in the gap an allocator call of 2000 µs, then the next
    kernel. Churn: each step frees (cudaFree, 1000 µs) and allocates again (cudaMalloc, 1000
    µs): 3 frees, and all 3 allocations come after the first free: allocator_churn, 6 ms over
    3 steps = 2 ms/step. Recurring: one cudaMalloc of 2000 µs in every step and no free: the
    calls recur through the capture (issue 46: warm-up means one-off), so they are memory
    management too, 6 ms: allocator_churn, not warmup."""
    for churn in (False, True):
        t = Trace()
        for i in range(3):
            base = i * 10_000
            t.step(i + 1, base, 10_000)
            t.launch("void at::native::elementwise_kernel<128, 2>(int)", base, 5, base + 10, 5000)
            if churn:
                t.runtime("cudaFree", base + 5100, 1000)
                t.runtime("cudaMalloc", base + 6100, 1000)
            else:
                t.runtime("cudaMalloc", base + 5100, 2000)
            t.launch("void at::native::elementwise_kernel<128, 2>(int)", base + 7200, 5, base + 7210, 2700)
        row = _diagnosed(tmp_path, t, str(churn))
        ids = _ids(row)
        assert row["bound"] == "memory_management" and "warmup" not in ids
        assert ids["allocator_churn"]["gpu_ms"] == pytest.approx(6.0)
        assert ids["allocator_churn"]["est_gain_ms_per_step"] == pytest.approx(2.0)
        assert ("3 frees, 3 allocations after the first free" if churn else "3 allocations, 0 frees: the calls recur"
                ) in ids["allocator_churn"]["evidence"]


def test_one_off_first_touch_allocation_is_warmup(tmp_path):
    """One cudaMalloc of 2000 µs in the gap of step 1 only (steps 2 and 3 run their kernels
    back to back, 10 µs apart): a one-off first touch, warm-up (2 ms of the 30 ms windows,
    6.7 %: under the 25 % that makes start-up dominate, so it is also seen), no churn."""
    t = Trace()
    for i in range(3):
        base = i * 10_000
        t.step(i + 1, base, 10_000)
        t.launch("void at::native::elementwise_kernel<128, 2>(int)", base, 5, base + 10, 5000)
        if i == 0:
            t.runtime("cudaMalloc", base + 5100, 2000)
            t.launch("void at::native::elementwise_kernel<128, 2>(int)", base + 7200, 5, base + 7210, 2700)
        else:
            t.launch("void at::native::elementwise_kernel<128, 2>(int)", base + 5000, 5, base + 5010, 4900)
    row = _diagnosed(tmp_path, t)
    also = {f["id"]: f for f in row["also_seen"]}
    assert "allocator_churn" not in _ids(row) and "allocator_churn" not in also
    assert also["warmup"]["gpu_ms"] == pytest.approx(2.0)
    assert "1 allocations, 0 frees" in also["warmup"]["evidence"]
    assert "warmup 6.7 %" in row["evidence"]


def test_cudafree_of_nothing_is_no_free(tmp_path):
    """cudaFree(0), the idiom that creates the context, returns at once (0 µs here): two of
    them among the allocations are no frees. The allocations recur through the capture (at 5,
    15 and 25 ms of 30: three of the ledger's ten periods, the last past the middle), so they
    are memory management (issue 46: warm-up means one-off), with 0 frees counted."""
    t = Trace()
    for i in range(3):
        base = i * 10_000
        t.launch("void at::native::elementwise_kernel<128, 2>(int)", base, 5, base + 10, 5000)
        t.runtime("cudaFree", base + 5100, 0)
        t.runtime("cudaMalloc", base + 5200, 1500)
    t.launch("void at::native::elementwise_kernel<128, 2>(int)", 30_000, 5, 30_010, 100)
    row = _diagnosed(tmp_path, t)
    f = {**_ids(row), **{f["id"]: f for f in row["also_seen"]}}
    assert "warmup" not in f and "3 allocations, 0 frees: the calls recur" in f["allocator_churn"]["evidence"]
    assert f["allocator_churn"]["gpu_ms"] == pytest.approx(4.5)


# ---------------------------------------------------------------- idle inside a user range
def test_idle_inside_a_user_range_is_named_by_it(tmp_path):
    """Kernel 0-100; the host is in `ensure_layer_3_weights` (150-4150) doing nothing the trace
    records, then launches at 4200 (kernel 4210-4300); again in `ensure_layer_4_weights`
    (4350-8350), launch at 8400 (8410-8500). Each gap (4110, 4110 µs) less its 10 µs launch call
    is idle the range explains: 8.20 ms, one range once the layer number is masked."""
    t = Trace()
    t.launch("void at::native::elementwise_kernel<128, 2>(int)", 0, 5, 0, 100)
    t.annotation("ensure_layer_3_weights", 150, 4000)
    t.launch("void at::native::elementwise_kernel<128, 2>(int)", 4200, 10, 4210, 90)
    t.annotation("ensure_layer_4_weights", 4350, 4000)
    t.launch("void at::native::elementwise_kernel<128, 2>(int)", 8400, 10, 8410, 90)
    row = _diagnosed(tmp_path, t)
    f = _ids(row)["idle_in_range"]
    assert f["gpu_ms"] == pytest.approx(8.2)
    assert "`ensure_layer_*_weights` 8.20 ms in 2 gaps (2 instances)" in f["evidence"]
    assert "`ensure_layer_*_weights`" in f["advice"]
    assert row["bound"] == "host" and "launch_overhead" not in _ids(row)


def test_pytorch_ranges_do_not_name_idle(tmp_path):
    """The same gap inside `nn.Module: Linear` (PyTorch's own range): no idle_in_range; the
    host's time is host_bound's."""
    t = Trace()
    t.launch("void at::native::elementwise_kernel<128, 2>(int)", 0, 5, 0, 100)
    t.annotation("nn.Module: Linear", 150, 4000)
    t.launch("void at::native::elementwise_kernel<128, 2>(int)", 4200, 10, 4210, 90)
    ids = _ids(_diagnosed(tmp_path, t))
    assert "idle_in_range" not in ids and ids["host_bound"]["gpu_ms"] == pytest.approx(4.1)


# ---------------------------------------------------------------- kernel efficiency
def test_mixed_precision_on_fp32_gemms_of_a_tensor_core_gpu(tmp_path):
    """volta_sgemm (FP32, no tensor cores, on a Volta: the name says so) 6000 of 10000 µs of
    GPU time: mixed_precision, gain half of 6 ms. The same with a half-precision HMMA kernel
    (volta_h884gemm), or an FP32 kernel of a GPU without tensor cores (maxwell_sgemm): none."""
    for kernel, fires in ((GEMM, True), ("volta_h884gemm_64x64_ldg8_nn", False), ("maxwell_sgemm_128x64_nn", False)):
        t = Trace()
        t.launch(kernel, 0, 5, 10, 6000)
        t.launch("void at::native::elementwise_kernel<128, 2>(int)", 20, 5, 6010, 4000)
        ids = _ids(_diagnosed(tmp_path, t, kernel))
        assert ("mixed_precision" in ids) is fires, kernel
        if fires:
            f = ids["mixed_precision"]
            assert f["gpu_ms"] == pytest.approx(6.0) and f["est_gain_ms_per_step"] == pytest.approx(3.0)
            assert "60.0 % of GPU time" in f["evidence"] and "torch.autocast" in f["advice"]
            assert "set_float32_matmul_precision" not in f["advice"]   # Volta: no TF32


def test_fuse_elementwise_only_in_an_uncompiled_model(tmp_path):
    """ATen elementwise kernels 7000 of 10000 µs (70 % >= 25 %): fuse_elementwise, gain half.
    The same beside one Triton kernel (a torch.compile'd model): none."""
    for compiled in (False, True):
        t = Trace()
        for i in range(7):
            t.launch("void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float> >(int)",
                     i * 10, 5, i * 1000, 1000)
        t.launch(GEMM if not compiled else "triton_poi_fused_add_0", 100, 5, 7000, 3000)
        ids = _ids(_diagnosed(tmp_path, t, str(compiled)))
        assert ("fuse_elementwise" in ids) is not compiled
        if not compiled:
            f = ids["fuse_elementwise"]
            assert f["gpu_ms"] == pytest.approx(7.0) and f["est_gain_ms_per_step"] == pytest.approx(3.5)
            assert "torch.compile" in f["advice"]


def test_fused_optimizer_names_the_optimizer_and_skips_fused_ones(tmp_path):
    """Two steps with backward evidence, each an `Optimizer.step#SGD.step` region launching
    120 per-parameter kernels: fused_optimizer with SGD advice. The same 120 kernels named
    multi_tensor_apply_kernel (a foreach optimizer): no finding."""
    for fused in (False, True):
        t = Trace()
        for s in range(2):
            base = s * 100_000
            t.step(s + 1, base, 100_000)
            t.cpu_op("autograd::engine::evaluate_function: MulBackward0", base, 100)
            t.annotation("Optimizer.step#SGD.step", base + 1000, 60_000)
            for i in range(120):
                name = ("void at::native::multi_tensor_apply_kernel<int>(int)" if fused else
                        "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float> >(int)")
                t.launch(name, base + 1000 + i * 400, 5, base + 1010 + i * 400, 100)
        ids = _ids(_diagnosed(tmp_path, t, str(fused)))
        assert ("fused_optimizer" in ids) is not fused
        if not fused:
            advice = ids["fused_optimizer"]["advice"]
            assert "torch.optim.SGD(params, fused=True)" in advice and "AdamW" not in advice


# ---------------------------------------------------------------- workload and idle numbers
def test_inference_gets_no_training_words(tmp_path):
    """A host-late loop without backward or optimizer: the host_bound advice speaks of
    inference, and no advice names optimizers or the training thread."""
    t = Trace()
    for i in range(3):
        base = i * 10_000
        t.step(i + 1, base, 10_000)
        t.launch("void at::native::elementwise_kernel<128, 2>(int)", base, 5, base + 10, 300)
        for k in range(40):
            t.launch("void at::native::elementwise_kernel<128, 2>(int)", base + 400 + k * 20, 15, base + 410 + k * 20, 2)
        t.cpu_op("aten::linear", base + 1500, 8000)
    row = _diagnosed(tmp_path, t)
    text = " ".join(f["advice"] for f in row["findings"] + row["also_seen"])
    assert "host_bound" in _ids(row) and "inference" in _ids(row)["host_bound"]["advice"]
    assert "training" not in text and "optimizer" not in text


def test_gpu_idle_pct_is_summarys(tmp_path):
    """Kernels 0-1000, 1030-2000 (a 30 µs gap, under the 50 µs minimum) and 5000-6000: idle
    30 + 3000 of 6000 µs = 50.5 %, summary's idle_pct; the causes count the 3000 µs gap only."""
    from scoped import summary

    t = Trace()
    t.launch("void at::native::elementwise_kernel<128, 2>(int)", 0, 5, 0, 1000)
    t.launch("void at::native::elementwise_kernel<128, 2>(int)", 10, 5, 1030, 970)
    t.launch("void at::native::elementwise_kernel<128, 2>(int)", 4990, 5, 5000, 1000)
    d = tmp_path / "t"
    ingest([t.write(d / "t.pt.trace.json.gz")], store=d / "s", jobs=1)
    row = diagnose(d / "s").row(0, named=True)
    assert row["gpu_idle_pct"] == pytest.approx(100 * 3030 / 6000)
    assert row["gpu_idle_pct"] == pytest.approx(summary(d / "s")["idle_pct"][0])
    # the ledger: of the capture's 6000 µs, the launch call 4990-4995 runs in the idle (launch),
    # the rest of the idle (3025 µs) has no host activity (unattributed)
    assert "GPU busy 49.5 % of the step windows; idle 50.5 % (unattributed 50.4 %, launch 0.1 %)" in row["evidence"]


def test_a_capture_without_gpu_work_is_no_gpu(tmp_path):
    """A single 2 µs memset-like kernel (under 10 µs of GPU work): no_gpu, not "gpu-bound
    (100 %)"; a CPU-only capture likewise."""
    t = Trace()
    t.launch("void at::native::elementwise_kernel<128, 2>(int)", 0, 5, 10, 2)
    row = _diagnosed(tmp_path, t, "tiny")
    assert row["bound"] == "no_gpu" and "2.0 µs of work in all" in row["evidence"]
    t = Trace()
    t.cpu_op("aten::linear", 0, 1000)
    row = _diagnosed(tmp_path, t, "cpu")
    assert row["bound"] == "no_gpu" and row["evidence"].startswith("no GPU ops in scope (CPU-only capture)")


def test_findings_keep_below_the_floor_apart(tmp_path):
    """findings(): the list holds those above the floor, `.also` those under it."""
    t = Trace()
    t.step(1, 0, 30_000)
    t.launch("implicit_convolve_sgemm", 0, 10, 20, 20_000)
    t.launch("void cudnn::ops::nchwToNhwcKernel<float>", 30, 10, 20_100, 100)     # 0.5 %
    d = tmp_path / "t"
    ingest([t.write(d / "t.pt.trace.json.gz")], store=d / "s", jobs=1)
    fs = findings(open_scope(d / "s"))
    assert [f.id for f in fs] == [] and [f.id for f in fs.also] == ["channels_last"]


def test_hotspots_calls_avoidable_only_what_a_finding_cites(tmp_path):
    """One elementwise kernel name launched 120 times per step by the optimizer (100 µs each:
    12 ms/step) and 50 times by the model (200 µs each, 10 ms/step): hotspots' row holds all
    44 ms of it over 2 steps. fused_optimizer cites the optimizer's 24 ms; fuse_elementwise
    (the model's elementwise time is 20 of 44 ms >= 25 %) half of the model's 20 ms: 34 ms
    avoidable, not the whole row."""
    from scoped import hotspots

    name = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float> >(int)"
    t = Trace()
    for s in range(2):
        base = s * 100_000
        t.step(s + 1, base, 100_000)
        t.cpu_op("autograd::engine::evaluate_function: MulBackward0", base, 100)
        for i in range(50):
            t.launch(name, base + i * 10, 5, base + 500 + i * 200, 200)
        t.annotation("Optimizer.step#SGD.step", base + 20_000, 60_000)
        for i in range(120):
            t.launch(name, base + 20_000 + i * 400, 5, base + 20_010 + i * 400, 100)
    d = tmp_path / "t"
    ingest([t.write(d / "t.pt.trace.json.gz")], store=d / "s", jobs=1)
    row = hotspots(d / "s").filter(pl.col("name") == name).row(0, named=True)
    assert row["total_ns"] == 2 * (50 * 200 + 120 * 100) * 1000
    assert row["avoidable"] and row["avoidable_ns"] == (2 * 120 * 100 + 2 * 50 * 200 // 2) * 1000


def test_a_slow_first_launch_is_warmup(tmp_path):
    """20 launches of 5 µs (kernels of 10 µs every 100 µs, 0-2010), then one launch call of
    6,000 µs (1,200 times the median launch: the kernel's module loads on first use) at 2,100,
    its kernel at 8,110-8,120. The gap 1,920-8,110 holds the slow call: 6,000 of the 8,120 µs
    capture (the ledger's window: first launch call at 0, last kernel end 8,120) is start-up
    (73.9 %), the bound; not launch_overhead."""
    t = Trace()
    for i in range(20):
        t.launch("void at::native::elementwise_kernel<128, 2>(int)", i * 100, 5, i * 100 + 10, 10)
    t.launch("void at::native::elementwise_kernel<128, 4>(int)", 2100, 6000, 8110, 10)
    row = _diagnosed(tmp_path, t)
    assert (row["bound"], row["bound_share_pct"]) == ("warmup", pytest.approx(100 * 6000 / 8120, abs=0.01))
    f = _ids(row)["warmup"]
    assert "cudaLaunchKernel (slow first launch: module loading) ×1 (6.00 ms host)" in f["evidence"]
    assert "launch_overhead" not in _ids(row)



def _slow_launches(kernels: list[str]) -> Trace:
    """Three rounds 4,200 µs apart, no steps: a 3,000 µs launch call of kernels[k] (600 times
    the 5 µs median launch) at 4,200·k, its kernel at +3,010 for 10 µs, then 10 launches of
    5 µs of the same kernel (kernels of 10 µs every 100 µs from +3,110). The capture is
    0-12,420 µs; its periods are tenths of it (1,242 µs), so the rounds fall in periods 0, 3
    and 6."""
    t = Trace()
    for k, name in enumerate(kernels):
        base = 4200 * k
        t.launch(name, base, 3000, base + 3010, 10)
        for i in range(10):
            t.launch(name, base + 3100 + 100 * i, 5, base + 3110 + 100 * i, 10)
    return t


def test_slow_first_launches_of_many_kernels_are_warmup(tmp_path):
    """The first launch of each of three kernels is slow (module loading), in periods 0, 3 and
    6: each kernel's slow launch happens once, so all 3 x 3,000 µs are start-up (9,000 of
    12,420 µs, 72.46 %), although slow launches as such recur through the capture."""
    names = [f"void at::native::elementwise_kernel<128, {k}>(int)" for k in (2, 4, 8)]
    row = _diagnosed(tmp_path, _slow_launches(names))
    assert (row["bound"], row["bound_share_pct"]) == ("warmup", pytest.approx(100 * 9000 / 12420, abs=0.01))
    assert "launch_overhead" not in _ids(row)


def test_a_kernel_whose_launch_is_slow_every_round_is_launch(tmp_path):
    """The same trace with one kernel name: its launch is slow in every round (periods 0, 3
    and 6, into the second half): recurring, so launch time like its 30 fast launches of 5 µs
    (9,150 of 12,420 µs, 73.67 %), not start-up."""
    row = _diagnosed(tmp_path, _slow_launches(["void at::native::elementwise_kernel<128, 2>(int)"] * 3))
    assert (row["bound"], row["bound_share_pct"]) == ("launch", pytest.approx(100 * 9150 / 12420, abs=0.01))
    assert "warmup" not in _ids(row)


def test_idle_findings_without_gpu_work_are_only_also_seen(tmp_path):
    """A capture whose GPU runs one 2 µs kernel after 5,000 µs of framework ops: no GPU work to
    judge (no_gpu), so the host time before it is no host_bound finding; it is seen (also_seen)."""
    t = Trace()
    t.cpu_op("aten::preprocess", 0, 5000)
    t.launch("void at::native::elementwise_kernel<128, 2>(int)", 5000, 5, 5010, 2)
    row = _diagnosed(tmp_path, t)
    assert row["bound"] == "no_gpu"
    assert "host_bound" not in _ids(row) and "host_bound" in {f["id"] for f in row["also_seen"]}

@pytest.mark.shared
def test_exposed_communication_equals_overlaps(tmp_path):
    """The verdict's exposed communication (queries/advice_busy.sql, one sweep per device)
    equals overlap's exposed_ns (queries/overlap.sql, HTA's comm/compute overlap, unions and
    intersections) on HTA's trace_diff control rank: 88.30 ms, a second method."""
    from conftest import shared_trace
    from scoped import overlap

    from traceq.advice.run_facts import run_facts
    from traceq.engine.stall_attribution import stalls_scoped

    ingest([shared_trace("kineto/hta/trace_diff/control/control.json.gz")], store=tmp_path / "s", run="c", jobs=1)
    scope = open_scope(tmp_path / "s", "c")
    f = run_facts(scope, stalls_scoped(scope))
    assert f.exposed_comm_ns == overlap(tmp_path / "s", "c")["exposed_ns"][0] == 88_304_000
