"""The stall advice follows the time ledger's largest idle cause (traceq.advice.stall_advice):
a one-off module load on the launching thread is `launch_overhead` to the gap attribution
(stalls_gaps.sql: the host is inside a runtime call) but `warmup` to the ledger (it does not
recur), so the advice is to profile steady state, not CUDA graphs; the same call in every step
recurs and stays launch overhead. Hand-made traces (µs), expected shares worked out below."""
from __future__ import annotations

from kineto_synth import Trace
from typer.testing import CliRunner


def trace(load_every_step: bool) -> Trace:
    """Step 1 [0, 1500): a kernel [20, 120), cuModuleLoadData [130, 1330) on the launching
    thread, a kernel launched at 1340 running [1360, 1480). Steps 2-4 [1500 + 300 k, +300): a
    launch at the step's start and its kernel [+20, +280); with `load_every_step`, a 200 µs
    cuModuleLoadData at +30 before a second kernel at +240 (the load recurs)."""
    t = Trace()
    t.step(1, 0, 1500)
    t.launch("gemm_kernel", 0, 10, 20, 100)
    t.runtime("cuModuleLoadData", 130, 1200)
    t.launch("gemm_kernel", 1340, 10, 1360, 120)
    for k in range(3):
        s = 1500 + 300 * k
        t.step(2 + k, s, 300)
        if load_every_step:
            t.launch("gemm_kernel", s, 10, s + 20, 10)
            t.runtime("cuModuleLoadData", s + 30, 200)
            t.launch("gemm_kernel", s + 230, 5, s + 240, 40)
        else:
            t.launch("gemm_kernel", s, 10, s + 20, 260)
    return t


def stalls_out(tmp_path, load_every_step: bool):
    """`traceq stalls`' result (its causes table and advice notes) and its terminal text."""
    from traceq.analyses.stalls import compute
    from traceq.cli import app
    from traceq.engine.scope import open_scope
    from traceq.ingest import ingest

    ingest([trace(load_every_step).write(tmp_path / "t.json.gz")], tmp_path / "s", run="t")
    r = CliRunner().invoke(app, ["stalls", "--store", str(tmp_path / "s")], env={"COLUMNS": "300"})
    assert r.exit_code == 0, r.output
    return compute(open_scope(tmp_path / "s", "t")), r.output


def test_one_off_load_is_warmup_advice_not_launch(tmp_path):
    out, text = stalls_out(tmp_path, False)
    causes = {c["cause"]: c for c in out.tables["causes"].iter_rows(named=True)}
    # the gap [120, 1360) is launch overhead to the gap attribution: the load and the launch call
    assert causes["launch_overhead"]["idle_ns"] == (1200 + 10) * 1000
    advice = [n for n in out.notes if n.startswith("advice [")]
    # ledger idle: step 1 launch [0, 10), unattributed [10, 20) and [120, 130), warmup
    # [130, 1330), launch [1340, 1350), unattributed [1330, 1340) and [1350, 1360), [1480, 1500);
    # steps 2-4: launch [0, 10), unattributed [10, 20) and [280, 300) each
    idle = 10 + 10 + 10 + 1200 + 10 + 10 + 10 + 20 + 3 * (10 + 10 + 20)
    assert advice[0].startswith(f"advice [warmup, {100 * 1200 / idle:.0f} % of GPU idle time in the time ledger]")
    assert "steady-state" in advice[0] and "CUDA graphs" not in " ".join(advice)
    words = " ".join(text.split())
    assert " ".join(advice[0].split()) in words and "the ledger separates them (warmup)" in words


def test_recurring_load_stays_launch_overhead(tmp_path):
    out, text = stalls_out(tmp_path, True)
    advice = [n for n in out.notes if n.startswith("advice [")]
    assert advice and advice[0].startswith("advice [launch overhead,")
    assert "CUDA graphs" in advice[0] and "the ledger separates" not in text
