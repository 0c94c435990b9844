"""A finding's gain per step names the worst rank beside the mean (issue 46: "6.7 ms/step
mean, 11.8 on rank 1"): two ranks whose exposed all-reduce per step differs, worked out by
hand (µs). The mean is the run's ledger time over its steps; the worst rank's is its own."""
from __future__ import annotations

import gzip
import json

import pytest
from kineto_synth import Trace
from typer.testing import CliRunner

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def rank_trace(comm_us: int) -> Trace:
    """Two steps of 210 + `comm_us` µs; each: a 200 µs GEMM launched at its start, an
    all-reduce of `comm_us` right after it to the step's end (exposed: nothing else runs),
    the host inside nccl:all_reduce."""
    t = Trace()
    for k in range(2):
        s = (210 + comm_us) * k
        t.step(k + 1, s, 210 + comm_us)
        t.launch("gemm_kernel", s, 10, s + 10, 200)
        t.cpu_op("nccl:all_reduce", s + 20, 15)
        t.launch(NCCL, s + 25, 5, s + 210, comm_us)
    return t


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from traceq.ingest import ingest

    d = tmp_path_factory.mktemp("worst")
    for rank, comm in ((0, 100), (1, 400)):
        p = rank_trace(comm).write(d / "run" / f"rank{rank}.json.gz")
        doc = json.loads(gzip.decompress(p.read_bytes()))
        doc["distributedInfo"] = {"rank": rank, "world_size": 2, "backend": "nccl"}
        p.write_bytes(gzip.compress(json.dumps(doc).encode()))
    ingest([d / "run"], d / "store", run="run", jobs=1)
    return d / "store"


def test_exposed_communication_names_the_worst_rank(store):
    from traceq.cli import app
    from traceq.engine.findings import run_findings
    from traceq.engine.scope import open_scope

    f = {f.id: f for f in run_findings(open_scope(store, "run"))}["exposed_communication"]
    # exposed per step: rank 0 100 µs, rank 1 400 µs; the run's mean over its 4 steps 250 µs
    assert f.gpu_ms == pytest.approx((2 * 100 + 2 * 400) / 1000)
    assert f.worst[1] == 1 and f.worst[0] == pytest.approx(f.est_gain_ms_per_step * 400 / 250)
    assert f.gain() == f"{f.est_gain_ms_per_step:,.2f} ms/step mean, {f.worst[0]:,.2f} on rank 1"
    text = " ".join(CliRunner().invoke(app, ["hotspots", "--store", str(store)]).output.split())
    assert f"Fix first: exposed_communication (up to {f.gain()}," in text


def test_one_rank_has_no_worst(store):
    from traceq.engine.findings import run_findings
    from traceq.engine.scope import open_scope

    f = {f.id: f for f in run_findings(open_scope(store, "run", rank=1))}["exposed_communication"]
    assert f.worst is None and f.gpu_ms == pytest.approx(0.8) and " on rank" not in f.gain()
