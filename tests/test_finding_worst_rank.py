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


def test_report_cards_read_the_ledger_with_the_worst_rank(store, tmp_path):
    """The report's GPU idle card is summary's idle (the ledger's, over the step windows); its
    exposed comm card is the mean per step over the ranks (250 µs) with rank 1's 400 µs."""
    import re

    from traceq.cli import app
    from traceq.report.parts import ms

    r = CliRunner()
    summ = json.loads(r.invoke(app, ["summary", "--store", str(store), "-f", "json"]).output)["rows"]
    idle = 100.0 * sum(x["idle_ns"] for x in summ) / sum(x["span_ns"] for x in summ)
    out = r.invoke(app, ["report", "--store", str(store), "-o", str(tmp_path / "r.html")])
    assert out.exit_code == 0, out.output
    html = (tmp_path / "r.html").read_text()
    cards = {m[0]: (m[1], m[2]) for m in re.findall(
        r'<div class="label">([^<]+)</div><div class="value">([^<]+)</div><div class="hint">([^<]*)</div>', html)}
    assert cards["GPU idle"][0] == f"{idle:.1f} %" and "of the step windows" in cards["GPU idle"][1]
    assert cards["exposed comm"][0] == ms(250_000) + " / step"
    assert f"{ms(400_000)} on rank 1" in cards["exposed comm"][1]
