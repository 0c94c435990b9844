"""Invariants of the time ledger (traceq.engine.ledger) on small random Kineto traces
(hypothesis): a few steps, kernels on two streams, NCCL all-reduces, copies, host runtime calls
(cudaStreamSynchronize, cudaMalloc, cudaFree), cpu_ops and DataLoader spans, all in integer µs.
Each example is ingested into a temporary store and its ledger checked against plain-Python
interval arithmetic written here, independently of the ledger's SQL and sweep: the windows
(steps stretched to the end of the GPU ops they launched, tiled), busy = |∪ GPU ops ∩
windows|, communication = |(∪ comm ∖ ∪ compute) ∩ windows|, and the partition identities."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kineto_synth import Trace

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
DATALOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
US = 1000


def union(iv):
    out = []
    for s, e in sorted((s, e) for s, e in iv if e > s):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [tuple(x) for x in out]


def intersect(a, b):
    a, b, out, i, j = union(a), union(b), [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def minus(a, b):
    """a ∖ b."""
    out = []
    b = union(b)
    for s, e in union(a):
        cur = s
        for bs, be in b:
            if be <= cur or bs >= e:
                continue
            if bs > cur:
                out.append((cur, bs))
            cur = max(cur, be)
        if cur < e:
            out.append((cur, e))
    return out


def measure(iv):
    return sum(e - s for s, e in union(iv))


gpu_op = st.tuples(st.sampled_from(["kernel", "nccl", "memcpy"]), st.sampled_from([7, 8]),
                   st.integers(0, 2400), st.integers(1, 20), st.integers(0, 300), st.integers(1, 300))
host_op = st.tuples(st.sampled_from(["cudaStreamSynchronize", "cudaMalloc", "cudaFree", "aten::mm", DATALOADER]),
                    st.integers(0, 2400), st.integers(1, 200))
trace_spec = st.tuples(
    st.lists(st.tuples(st.integers(0, 200), st.integers(100, 900)), min_size=0, max_size=3),   # steps: gap, length
    st.lists(gpu_op, min_size=1, max_size=8),
    st.lists(host_op, max_size=6))


def build(spec):
    """(Trace, steps [(start, end)] µs, ops [(cls, start, end, issued)] µs) of a spec."""
    steps_spec, ops_spec, host_spec = spec
    t, steps, at = Trace(), [], 0
    for n, (gap, length) in enumerate(steps_spec, start=1):
        at += gap
        t.step(n, at, length)
        steps.append((at, at + length))
        at += length
    ops = []
    for kind, stream, ts, dur, lag, k_dur in ops_spec:
        name, api, cat, cls = {"kernel": ("gemm_kernel", "cudaLaunchKernel", "kernel", "compute"),
                               "nccl": (NCCL, "cudaLaunchKernel", "kernel", "communication"),
                               "memcpy": ("Memcpy HtoD (Pinned -> Device)", "cudaMemcpyAsync", "gpu_memcpy",
                                          "copy")}[kind]
        k_ts = ts + dur + lag
        t.launch(name, ts, dur, k_ts, k_dur, api=api, cat=cat, stream=stream)
        ops.append((cls, k_ts, k_ts + k_dur, ts))
    for name, ts, dur in host_spec:
        if name == DATALOADER:
            if steps:   # without ProfilerSteps the DataLoader iterations would be the steps
                t.annotation(name, ts, dur)
        elif name.startswith("aten::"):
            t.cpu_op(name, ts, dur)
        else:
            t.runtime(name, ts, dur)
    return t, steps, ops


def expected_windows(t: Trace, steps, ops):
    """The windows by hand (µs): each step to the later of its end and the end of the last op
    whose launch call starts in it, tiled; no steps: the capture's first event to its last."""
    if not steps:
        ev = [(e["ts"], e["ts"] + e["dur"]) for e in t.events if e.get("ph") == "X"]
        return [(min(s for s, _ in ev), max(e for _, e in ev))]
    out, prev = [], None
    for s, e in steps:
        reach = max([e] + [end for _, _, end, issued in ops if s <= issued < e])
        lo = s if prev is None else max(s, prev)
        out.append((lo, max(lo, reach)))
        prev = reach if prev is None else max(prev, reach)
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace_spec)
def test_ledger_partitions_and_matches_interval_arithmetic(spec):
    from traceq.engine.ledger import LABEL_COLUMNS, ledger
    from traceq.engine.scope import open_scope
    from traceq.ingest import ingest

    t, steps, ops = build(spec)
    d = Path(tempfile.mkdtemp(prefix="ledger-prop-"))
    try:
        ingest([t.write(d / "t.json.gz")], d / "store", run="p", jobs=1)
        rows = ledger(open_scope(d / "store", "p")).steps.sort("start_ns")
    finally:
        shutil.rmtree(d, ignore_errors=True)
    wins = expected_windows(t, steps, ops)
    lo, hi = wins[0][0], wins[-1][1]
    if not any(e > lo and s < hi for _, s, e, _ in ops):   # no GPU op reaches a window: no row
        assert rows.height == 0
        return
    assert set(rows["device"]) == {0}
    got = rows.to_dicts()
    assert len(got) == len(wins)
    shift = got[0]["start_ns"] - wins[0][0] * US   # the store's clock may be the trace's µs plus a base
    windows = [((r["start_ns"] - shift), (r["end_ns"] - shift)) for r in got]
    assert windows == [(lo * US, hi * US) for lo, hi in wins]
    for (lo, hi), nxt in zip(windows, windows[1:]):
        assert lo <= hi <= nxt[0]   # disjoint, in time order
    ns = [(c, s * US, e * US) for c, s, e, _ in ops]
    busy_all = [(s, e) for _, s, e in ns]
    compute = [(s, e) for c, s, e in ns if c == "compute"]
    comm = [(s, e) for c, s, e in ns if c == "communication"]
    for r, w in zip(got, windows):
        assert sum(r[c] for c in LABEL_COLUMNS) == r["window_ns"] == w[1] - w[0]
        assert r["busy_ns"] == r["compute_ns"] + r["communication_ns"] + r["copy_ns"] <= r["window_ns"]
        assert r["idle_ns"] == r["window_ns"] - r["busy_ns"]
        assert r["overlapped_comm_ns"] >= 0 and r["comm_ns"] >= r["communication_ns"]
        assert 0 <= r["late_unattributed_ns"] <= r["unattributed_ns"]
        assert r["busy_ns"] == measure(intersect(busy_all, [w]))
        assert r["compute_ns"] == measure(intersect(compute, [w]))
        assert r["comm_ns"] == measure(intersect(comm, [w]))
        assert r["communication_ns"] == measure(intersect(minus(comm, compute), [w]))
