"""Stall causes (queries/stalls_gaps.sql): one synthetic Kineto trace per cause, shaped like
the real situation it names, whose expected split is derived here independently: every
microsecond of every GPU-idle gap is classified by plain Python over the events written
(the lowest precedence level of the host events covering it)."""
from __future__ import annotations

import pytest
from kineto_synth import HOST_TID, Trace
from scoped import diagnose, stalls

from traceq.ingest import ingest

CAUSES = ["data_loading", "communication", "synchronization", "blocking_copy", "memory_management",
          "launch_overhead", "host_compute", "unattributed"]
MEM = ("cudaMalloc", "cudaFree", "hipMalloc", "hipFree", "cudaHostAlloc", "cudaFreeHost")


def level(e: dict, pageable: set[int]) -> str | None:
    """The cause a host event stands for (the precedence is the order of CAUSES)."""
    name, cat = e["name"], e["cat"]
    if cat == "user_annotation":
        return "data_loading" if name.startswith("enumerate(DataLoader)") else None
    if cat == "cpu_op":
        if name.startswith(("nccl:", "c10d::")):
            return "communication"
        if name in ("aten::item", "aten::_local_scalar_dense"):
            return "synchronization"
        return "host_compute" if e["tid"] == HOST_TID else None
    if cat == "cuda_runtime":
        if "Synchronize" in name:
            return "synchronization"
        if (name.startswith(("cudaMemcpy", "hipMemcpy")) and "Async" not in name) or \
                e.get("args", {}).get("correlation") in pageable:
            return "blocking_copy"
        if name.startswith(MEM):
            return "memory_management"
        return "launch_overhead" if e["tid"] == HOST_TID else None
    return None


def reference_split(t: Trace, min_gap_us: int = 50) -> dict[str, int]:
    pageable = {e["args"]["correlation"] for e in t.events
                if e["cat"] == "gpu_memcpy" and "Pageable" in e["name"]}
    host = [(e["ts"], e["ts"] + e["dur"], level(e, pageable)) for e in t.events]
    host = [h for h in host if h[2]]
    out = dict.fromkeys(CAUSES, 0)
    for a, b in t.gaps(min_gap_us):
        for us in range(a, b):
            covering = [CAUSES.index(c) for s, e, c in host if s <= us and us + 1 <= e]
            out[CAUSES[min(covering)] if covering else "unattributed"] += 1000
    return out


def measured(store, min_gap_us=50) -> dict[str, int]:
    res = stalls(store, min_gap_us=min_gap_us)
    return {r["cause"]: r["idle_ns"] for r in res.causes.iter_rows(named=True)}


def _store(t: Trace, tmp_path):
    ingest([t.write(tmp_path / "t.pt.trace.json.gz")], store=tmp_path / "s", jobs=1)
    return tmp_path / "s"


def _check(t, tmp_path, cause, bound, finding, min_gap_us=50):
    store = _store(t, tmp_path)
    expected = reference_split(t, min_gap_us)
    got = measured(store, min_gap_us)
    assert got == expected
    assert max(got, key=got.get) == cause
    d = diagnose(store, min_gap_us=min_gap_us).row(0, named=True)
    assert d["bound"] == bound
    assert finding in [f["id"] for f in d["findings"]]
    return d


def test_memory_management_allocator_churn(tmp_path):
    """MI300X ResNet DDP shape: the host sits in hipFree/hipMalloc between kernels, GPU idle."""
    t = Trace()
    for i in range(10):
        base = i * 1000
        t.launch("Cijk_Alik_Bljk_HHS_BH_MT128x128", base, 10, base + 20, 200, api="hipLaunchKernel")
        t.cpu_op("aten::empty", base + 230, 400)
        t.runtime("hipFree", base + 240, 460)
        t.runtime("hipMalloc", base + 710, 60)
        t.cpu_op("aten::relu", base + 780, 170)
    t.launch("last", 10_000, 10, 10_020, 100, api="hipLaunchKernel")
    d = _check(t, tmp_path, "memory_management", "memory_management", "allocator_churn")
    churn = next(f for f in d["findings"] if f["id"] == "allocator_churn")
    assert "hipFree ×10" in churn["evidence"] and "hipMalloc ×10" in churn["evidence"]


def test_allocator_calls_under_gpu_work_are_not_churn(tmp_path):
    """The same hipFree calls while a long kernel runs: nothing to win, no advice."""
    t = Trace()
    t.launch("long", 0, 10, 20, 5000, api="hipLaunchKernel")
    for i in range(10):
        t.runtime("hipFree", 100 + 400 * i, 300)
    t.launch("next", 5030, 10, 5040, 100, api="hipLaunchKernel")
    store = _store(t, tmp_path)
    assert measured(store)["memory_management"] == 0
    assert "allocator_churn" not in [f["id"] for f in diagnose(store).row(0, named=True)["findings"]]


def test_synchronization_device_synchronize_bound(tmp_path):
    """The host waits in cudaDeviceSynchronize (and .item()) across GPU-idle gaps."""
    t = Trace()
    for i in range(8):
        base = i * 1000
        t.launch("k", base, 10, base + 20, 100)
        t.runtime("cudaDeviceSynchronize", base + 15, 700)
        t.cpu_op("aten::item", base + 720, 150)
        t.runtime("cudaStreamSynchronize", base + 730, 100)
    t.launch("k", 8000, 10, 8020, 100)
    _check(t, tmp_path, "synchronization", "sync", "remove_syncs")


def test_blocking_copy_sync_memcpy_and_pageable_async(tmp_path):
    """cudaMemcpy (synchronous) and a pageable cudaMemcpyAsync keep the host busy while the GPU idles."""
    t = Trace()
    for i in range(6):
        base = i * 1000
        t.launch("k", base, 10, base + 20, 100)
        t.launch("Memcpy HtoD (Pageable -> Device)", base + 150, 500, base + 640, 5,
                 api="cudaMemcpyAsync" if i % 2 else "cudaMemcpy", cat="gpu_memcpy")
        t.cpu_op("aten::add", base + 700, 100)
    t.launch("k", 6000, 10, 6020, 100)
    _check(t, tmp_path, "blocking_copy", "sync", "remove_syncs")
    store = tmp_path / "s"
    d = diagnose(store).row(0, named=True)
    assert "pinned_memory" in [f["id"] for f in d["findings"]]   # the pageable copies


def test_host_compute_cpu_bound(tmp_path):
    """LLM-serving shape: framework ops on the CPU with no CUDA call, GPU idle between launches."""
    t = Trace()
    for i in range(10):
        base = i * 500
        t.cpu_op("aten::linear", base, 490)
        t.launch("ampere_sgemm_128x64_nn", base + 470, 10, base + 485, 15)
    d = _check(t, tmp_path, "host_compute", "host", "host_bound")
    assert d["bound_share_pct"] > 50


def _host_computes_in_gaps(launch_offset_us: int) -> Trace:
    """10 kernels of 50 µs at base+400 (base = 1000 + 500·i), each launched by a 3 µs call at
    base+launch_offset_us; the host computes (aten::linear) over [base−40, base+390]. Gaps:
    9 × [base−50, base+400] = 450 µs (4,050 µs of a 4,550 µs GPU span), 430 µs of each in
    host compute, 20 µs with nothing recorded (-100: the launch call lies before the gap)."""
    t = Trace()
    for i in range(10):
        base = 1000 + 500 * i
        t.cpu_op("aten::linear", base - 40, 430)
        t.launch("ampere_sgemm_128x64_nn", base + launch_offset_us, 3, base + 400, 50)
    return t


def test_host_compute_with_the_next_kernel_already_queued_is_not_host_bound(tmp_path):
    """Every kernel is launched 100 µs before the gap in front of it begins (a deep queue: the
    host ran ahead), so the GPU waited on something else while the host computed: HTA counts
    such idle time as "other", not host_wait. The attribution of the gap time is unchanged;
    the verdict is "unattributed", never host-bound, and no host_bound finding. The time
    ledger's window is the capture, [900, 5950) µs = 5,050 µs (the first launch call at 900 to
    the last kernel's end), 4,550 µs of it idle: the first kernel's launch call [900, 903) is
    launch; from its return the GPU had the kernel queued, so everything else is unattributed
    (4,547 µs, 90.04 %), the host computing in it included."""
    t = _host_computes_in_gaps(-100)
    store = _store(t, tmp_path)
    got = measured(store)
    assert got == reference_split(t) and got["host_compute"] == 9 * 430_000 and got["unattributed"] == 9 * 20_000
    st = stalls(store)
    assert st.queued_gaps() == 9 and st.queued_ns("gap_ns") == 9 * 450_000
    d = diagnose(store).row(0, named=True)
    assert d["bound"] == "unattributed"
    assert d["bound_share_pct"] == pytest.approx(100 * 4547 / 5050, abs=0.01)
    assert "host_bound" not in [f["id"] for f in d["findings"] + d["also_seen"]]
    assert "in 9 of the gaps (80.2 % of the step windows) the next GPU op was already launched" in d["evidence"]
    assert "(unattributed 90.0 %, launch 0.1 %)" in d["evidence"]


def test_host_compute_while_the_next_kernel_is_not_launched_is_host_bound(tmp_path):
    """The same trace with each launch after the host compute (base+395, inside the gap): the host
    was late for the whole gap, so its host compute and the time with nothing recorded make it
    host-bound. The ledger's window is [960, 5950) µs = 4,990 µs (the first host op to the last
    kernel's end): host compute 10 × 430 µs; of the 20 µs the compute leaves in each gap, the
    launch call takes 3 and the 2 µs after it returns have the kernel queued, so 15 µs of each
    of the 9 gaps and 5 µs before the first kernel are the late host's: 4,440 µs (88.98 %)."""
    d = _check(_host_computes_in_gaps(395), tmp_path, "host_compute", "host", "host_bound")
    assert d["bound_share_pct"] == pytest.approx(100 * 4440 / 4990, abs=0.01)
    f = next(f for f in d["findings"] if f["id"] == "host_bound")
    assert f["gpu_ms"] == pytest.approx(4.44) and "already launched" not in f["evidence"]
    assert "next GPU op was already launched" not in d["evidence"]


def test_launch_overhead_many_tiny_kernels(tmp_path):
    """Launch-bound: 30 µs launch calls back to back, 3 µs kernels."""
    t = Trace()
    for i in range(200):
        t.launch("void at::native::vectorized_elementwise_kernel<4, AddFunctor>", i * 30, 30, i * 30 + 31, 3)
    d = _check(t, tmp_path, "launch_overhead", "launch", "launch_overhead", min_gap_us=10)
    f = next(f for f in d["findings"] if f["id"] == "launch_overhead")
    assert "100 % of 200 kernels < 10 µs" in f["evidence"]


def test_launch_idle_without_launch_evidence_gives_no_launch_advice(tmp_path):
    """Long kernels with cheap launches: the small launch share of the gaps is no reason for CUDA graphs."""
    t = Trace()
    for i in range(10):
        base = i * 2000
        t.launch("long_kernel", base, 60, base + 100, 1800)
    store = _store(t, tmp_path)
    assert measured(store)["launch_overhead"] > 0
    assert "launch_overhead" not in [f["id"] for f in diagnose(store).row(0, named=True)["findings"]]


def test_data_loading_dataloader_in_the_gap(tmp_path):
    """The training loop waits in DataLoader.__next__ while the GPU idles."""
    t = Trace()
    for i in range(5):
        base = i * 3000
        t.step(i, base, 3000)
        t.annotation("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", base, 2000)
        t.cpu_op("aten::copy_", base + 2000, 100)
        t.launch("k", base + 2100, 10, base + 2120, 800)
    d = _check(t, tmp_path, "data_loading", "data", "dataloader")
    assert "num_workers=0" in next(f for f in d["findings"] if f["id"] == "dataloader")["advice"]


def test_communication_host_waits_in_collective(tmp_path):
    """The host is inside nccl:all_reduce (a blocking collective) while the GPU idles."""
    t = Trace()
    for i in range(5):
        base = i * 1000
        t.launch("k", base, 10, base + 20, 200)
        t.cpu_op("nccl:all_reduce", base + 230, 700)
        t.runtime("cudaStreamSynchronize", base + 300, 500)
    t.launch("k", 5000, 10, 5020, 100)
    store = _store(t, tmp_path)
    assert measured(store) == reference_split(t)
    d = diagnose(store).row(0, named=True)
    assert d["bound"] == "communication"


def test_slow_dataloader_sample_is_data_bound_cpu_only(tmp_path):
    """The real CPU-only sample: no GPU work, so no_gpu; its DataLoader wait share makes the
    dataloader finding."""
    from conftest import SAMPLES

    ingest([SAMPLES / "slow_dataloader"], store=tmp_path / "s", jobs=1)
    d = diagnose(tmp_path / "s").row(0, named=True)
    assert d["bound"] == "no_gpu" and "(> 5 %: the dataloader finding)" in d["evidence"]
    assert [f["id"] for f in d["findings"]] == ["dataloader"]
    ingest([SAMPLES / "fast_dataloader"], store=tmp_path / "f", jobs=1)
    d = diagnose(tmp_path / "f").row(0, named=True)
    assert d["bound"] == "no_gpu" and d["findings"] == []


def test_graph_launches_are_counted_by_api_name_prefix(tmp_path):
    """launch_stats counts runtime/driver calls named cudaGraphLaunch*, cuGraphLaunch* or
    hipGraphLaunch* (a prefix, case as written): 2 + 1 + 1 here; a name that only contains
    the words (myCudaGraphLaunch) or a CPU op of that name does not count."""
    t = Trace()
    for i, api in enumerate(["cudaGraphLaunch", "cudaGraphLaunch_v10000", "cuGraphLaunch", "hipGraphLaunch",
                             "cudaLaunchKernel", "myCudaGraphLaunch"]):
        t.launch("k", i * 1000, 10, i * 1000 + 20, 100, api=api)
    t.cpu_op("cudaGraphLaunch", 9000, 10)
    res = stalls(_store(t, tmp_path))
    assert res.launch.row(0, named=True)["graph_launches"] == 4
