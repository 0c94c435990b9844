"""diagnose weighs the critical path (traceq.advice.bound's docstring): on the real GPU samples
(sample_traces/gpu, committed, each recorded with a known bound) the `critical_path` object of
the JSON names the bound the scenario was built with and the verdict agrees; on a synthetic
trace whose path is worked out by hand, GPU idle off the path is not the verdict."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from kineto_synth import GPU_PID, HOST_PID, HOST_TID, STREAM, Trace
from typer.testing import CliRunner

from traceq.cli import app
from traceq.ingest import ingest

GPU_SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces" / "gpu"
# scenario -> (the path's dominant bound, the verdict), as make_gpu_samples.py built them
EXPECTED = {
    "train_slow_loader": ("data_loading", "data"),   # a DataLoader sleeping per batch
    "train_gpu_bound": ("gpu", "gpu"),                # 8192² bf16 GEMMs
    "train_small_sync": ("cpu", "host"),              # tiny kernels, a .item() per step
}


def _diagnose(store: Path, run: str) -> list[dict]:
    env = {"NO_COLOR": "1", "TRACEQ_STORE": "", "TRACEQ_FINDINGS_CACHE": "0"}
    r = CliRunner().invoke(app, ["diagnose", "--run", run, "--format", "json", "--store", str(store)], env=env)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["runs"]


@pytest.fixture(scope="module")
def gpu_store(tmp_path_factory):
    store = tmp_path_factory.mktemp("gpu") / "s"
    for name in EXPECTED:
        ingest(sorted((GPU_SAMPLES / name).glob("rank*.pt.trace.json.gz")), store=store, run=name, jobs=1)
    return store


@pytest.mark.parametrize("run", sorted(EXPECTED))
def test_real_sample_path_names_its_bound_and_the_verdict_agrees(gpu_store, run):
    path_bound, verdict = EXPECTED[run]
    (rec,) = _diagnose(gpu_store, run)
    cp = rec["critical_path"]
    assert cp["weighed"] and cp["steps"] == 4            # ProfilerStep#2..5 (schedule active=4)
    assert cp["bound"] == path_bound
    assert set(cp["shares"]) == {"cpu", "data_loading", "launch", "gpu", "gpu_gap", "communication", "sync",
                                 "memcpy"}
    assert sum(cp["shares"].values()) == pytest.approx(100.0, abs=0.05)
    assert cp["shares"][path_bound] > 60.0
    assert rec["bound"] == verdict
    assert "critical path of 4 steps: " + path_bound in rec["evidence"]


def _off_path_idle_trace() -> Trace:
    """One step, 0..880 µs, one host thread, two devices. The host launches K0 on device 0
    (call 10..15, K0 runs 20..820), K1 on device 1 (call 20..25, runs 30..60), then blocks in
    cudaDeviceSynchronize 30..825 (waiting for K0), then launches K2 on device 1 (call
    830..835, runs 840..870).
    Device 1 idles 60..840 (780 µs) while the host is in the sync call (60..825: 765 µs):
    in the time ledger (the step's window [0, 880) on each device: 1,760 µs) sync is that
    and device 0's wait 820..825 after K0: 770/1,760 = 43.8 %, the largest avoidable cost, so
    without the path the verdict is sync.
    The critical path from the step's end (880) back: host after K2's launch, the launch,
    the sync call's return (825) after K0's end (820), K0 (20..820), its launch delay and
    call, the host from 0: K0 holds 800 of the 880 µs = 90.9 % (>= 60 %): GPU-bound — device
    1's idle is off the path (removing the sync does not shorten the step)."""
    t = Trace()
    t.step(1, 0, 880)
    t.launch("K0_long_gemm", 10, 5, 20, 800)
    t._corr += 1   # K1 on device 1
    t._x("cuda_runtime", "cudaLaunchKernel", 20, 5, correlation=t._corr)
    t._x("kernel", "K1_small", 30, 30, pid=GPU_PID + 1, tid=STREAM, correlation=t._corr, device=1, stream=STREAM)
    t.runtime("cudaDeviceSynchronize", 30, 795)
    t._corr += 1   # K2 on device 1
    t._x("cuda_runtime", "cudaLaunchKernel", 830, 5, correlation=t._corr)
    t._x("kernel", "K2_small", 840, 30, pid=GPU_PID + 1, tid=STREAM, correlation=t._corr, device=1, stream=STREAM)
    assert HOST_PID != GPU_PID + 1 and HOST_TID
    return t


def test_gpu_idle_off_the_path_is_not_the_verdict(tmp_path):
    d = tmp_path / "t"
    ingest([_off_path_idle_trace().write(d / "t.pt.trace.json.gz")], store=d / "s", run="offpath", jobs=1)
    (rec,) = _diagnose(d / "s", "offpath")
    cp = rec["critical_path"]
    assert cp["steps"] == 1 and cp["weighed"]
    assert cp["shares"]["gpu"] == pytest.approx(100.0 * 800 / 880, abs=0.05)
    assert cp["bound"] == "gpu"
    # the sync idle is measured (770 of 1,760 µs) but is not the verdict
    assert "sync 43.8 %" in rec["evidence"]
    assert rec["bound"] == "gpu"
    assert rec["bound_share_pct"] == pytest.approx(100.0 * (800 + 60) / 1760, abs=0.05)
    assert "kernels >= 60 % of the path: GPU-bound" in rec["evidence"]
