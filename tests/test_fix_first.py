"""The "Fix first" line that heads hotspots, summary, overlap, breakdown and stalls names the
same first finding as `traceq diagnose` (issue 13: "the same findings head every analysis"):
the kernel-evidence rules *and* the stall rules, ranked by estimated gain per step
(traceq.engine.findings.run_findings). Before, the line ranked the kernel-evidence rules alone and
named e.g. pinned_memory where diagnose put a 30 ms/step DataLoader stall first.

Each expected gain is derived here from the events the test writes, not from traceq."""
from __future__ import annotations

import pytest
from conftest import SAMPLES
from kineto_synth import Trace
from scoped import diagnose

from traceq.advice import findings
from traceq.analyses import summary as summary_mod
from traceq.analyses.registry import REGISTRY, compute
from traceq.engine import per_rank
from traceq.engine.findings import map_with_findings, run_findings
from traceq.engine.scope import open_scope
from traceq.executor import ExecutorSpec
from traceq.ingest import ingest

LINED = ("hotspots", "summary", "overlap", "breakdown", "stalls")
CONVERSION_US, HOST_US, STEP_US = 100, 8_000, 10_000
# the GPU idles from the conversion's end (530 + CONVERSION_US) to the next convolution
# (STEP_US + 20); the host was late until the launch call returned (STEP_US + 10): 10 µs of
# it in the launch call, the rest computing (HOST_US) or running what the trace does not
# record: host_bound's evidence. The last 10 µs the kernel was queued (the time ledger).
LATE_US = STEP_US + 20 - (530 + CONVERSION_US) - 10 - 10


def _host_bound_cnn(steps: int = 2) -> Trace:
    """Per 10 ms step: a 500 µs NCHW convolution, then a 100 µs cuDNN NCHW->NHWC conversion
    (channels_last's evidence: 100 µs/step), then the host computes 8 ms (aten::linear, no
    CUDA call) while the GPU idles; the next step's convolution is launched only after that
    (the host was late for the whole gap: host_bound's evidence, LATE_US per step)."""
    t = Trace()
    for i in range(steps):
        base = i * STEP_US
        t.step(i + 1, base, STEP_US)
        t.launch("implicit_convolve_sgemm", base, 10, base + 20, 500)
        t.launch("void cudnn::ops::nchwToNhwcKernel<float>", base + 30, 10, base + 530, CONVERSION_US)
        t.cpu_op("aten::linear", base + 700, HOST_US)
    t.launch("implicit_convolve_sgemm", steps * STEP_US, 10, steps * STEP_US + 20, 500)
    return t


def _first_line(res) -> str:
    return (res.headline or "").splitlines()[0]


def test_the_line_names_diagnose_first_finding_not_the_first_kernel_finding(tmp_path):
    store = tmp_path / "s"
    ingest([_host_bound_cnn().write(tmp_path / "t.pt.trace.json.gz")], store=store, jobs=1)
    # the kernel-evidence rules alone (the old line) put channels_last first: 0.10 ms/step
    kernel = findings(open_scope(store))
    assert [f.id for f in kernel] == ["channels_last"]
    assert kernel[0].est_gain_ms_per_step == pytest.approx(CONVERSION_US / 1000)
    # diagnose: the host late LATE_US per gap, 2 gaps over 2 steps, ahead of channels_last
    d = diagnose(store).row(0, named=True)
    assert [f["id"] for f in d["findings"]] == ["host_bound", "channels_last"]
    assert d["findings"][0]["est_gain_ms_per_step"] == pytest.approx(LATE_US / 1000)
    want = f"Fix first: host_bound (up to {LATE_US / 1000:,.2f} ms/step, {2 * LATE_US / 1000:,.2f} ms in all); +1 more"
    for name in LINED:
        assert _first_line(compute(REGISTRY[name], store)).startswith(want), name


def test_a_stall_finding_heads_where_no_kernel_finding_exists(tmp_path):
    """The same host-bound loop without the conversions: no kernel finding, so the old line
    was absent; now it names diagnose's first finding."""
    t = Trace()
    for i in range(3):
        base = i * STEP_US
        t.step(i + 1, base, STEP_US)
        t.launch("implicit_convolve_sgemm", base, 10, base + 20, 500)
        t.cpu_op("aten::linear", base + 700, HOST_US)
    t.launch("implicit_convolve_sgemm", 3 * STEP_US, 10, 3 * STEP_US + 20, 500)
    store = tmp_path / "s"
    ingest([t.write(tmp_path / "t.pt.trace.json.gz")], store=store, jobs=1)
    assert findings(open_scope(store)) == []
    first = diagnose(store).row(0, named=True)["findings"][0]
    late_us = STEP_US + 20 - 520 - 10 - 10   # no conversion: the gap starts at the convolution's end
    assert first["id"] == "host_bound" and first["est_gain_ms_per_step"] == pytest.approx(late_us / 1000)
    for name in LINED:
        assert _first_line(compute(REGISTRY[name], store)).startswith(
            f"Fix first: host_bound (up to {late_us / 1000:,.2f} ms/step, {3 * late_us / 1000:,.2f} ms in all)"), name


def test_a_cpu_only_data_stall_gives_no_gpu_time_in_the_line(tmp_path):
    """The slow DataLoader sample (CPU-only): diagnose's first finding is the DataLoader wait; the
    line gives its time per step and no "0.00 ms in all" of GPU time it does not have."""
    store = tmp_path / "s"
    ingest([SAMPLES / "slow_dataloader"], store=store, jobs=1)
    first = diagnose(store).row(0, named=True)["findings"][0]
    assert first["id"] == "dataloader" and first["gpu_ms"] == 0
    line = _first_line(compute(REGISTRY["summary"], store))
    assert line.startswith(f"Fix first: dataloader (up to {first['est_gain_ms_per_step']:,.2f} ms/step) — ")


def _churn_rank(frees: int) -> Trace:
    """GPU idle while the host frees and allocates device memory (hipFree, hipMalloc) between
    kernels, `frees` times, then a final kernel."""
    t = Trace()
    for i in range(frees):
        base = i * 1000
        t.launch("Cijk_Alik_Bljk_HHS_BH_MT128x128", base, 10, base + 20, 200, api="hipLaunchKernel")
        t.runtime("hipFree", base + 240, 460)
        t.runtime("hipMalloc", base + 710, 60)
    t.launch("Cijk_Alik_Bljk_HHS_BH_MT128x128", frees * 1000, 10, frees * 1000 + 20, 200, api="hipLaunchKernel")
    return t


def test_a_run_mapped_over_its_ranks_gives_the_line_of_the_whole_run(tmp_path, monkeypatch):
    """Two ranks that free and allocate device memory (hipFree, hipMalloc) in three GPU-idle
    gaps each, spread over the capture: recurring allocator calls, so the time ledger labels
    them memory_management (not one-off warm-up) and the run has allocator churn. A run mapped
    over its ranks (--jobs) must rank the same findings as the run analysed in one process:
    the ledger's rows and the allocator calls the rule counts are summed over the ranks. Both
    paths compute: the findings kept beside the store (traceq.engine.findings_cache) are off."""
    monkeypatch.setenv("TRACEQ_FINDINGS_CACHE", "0")
    store = tmp_path / "s"
    for rank in (0, 1):
        ingest([_churn_rank(3).write(tmp_path / f"r{rank}.pt.trace.json.gz")], store=store, run="ddp", rank=rank,
               jobs=1)
    whole = run_findings(open_scope(store, "ddp"))
    churn = next(f for f in whole if f.id == "allocator_churn")
    # three gaps per rank, [220, 1020) µs + 1000 i: hipFree (460 µs) and hipMalloc (60 µs) lie inside each
    assert churn.gpu_ms == pytest.approx(2 * 3 * 0.520) and "hipFree ×6" in churn.evidence
    mapped_scope = open_scope(store, "ddp", executor=ExecutorSpec("local", jobs=1))
    assert per_rank.mapped(mapped_scope)
    _, mapped = map_with_findings(mapped_scope, summary_mod.rank_part, "all")
    assert [f.as_dict() for f in mapped] == [f.as_dict() for f in whole]
    for name in ("summary", "overlap", "breakdown", "stalls"):
        assert _first_line(compute(REGISTRY[name], store, run="ddp", jobs=1)) == \
            _first_line(compute(REGISTRY[name], store, run="ddp")), name
