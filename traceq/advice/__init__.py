"""Evidence-gated advice: each rule (one module in traceq/advice/rules/) states the evidence
that triggers it and what rules it out, computes that evidence with SQL over the store
views, and returns a `Finding` that cites it (kernel names, counts, ms, % of GPU time,
ms per step). `findings(scope)` runs every rule, ranks what it finds by estimated time to
win per step — the findings of the scope's bound (traceq.advice.bound) first: faster
kernels win nothing while the GPU waits for something else — and sets what is below the floor (< 1 % of GPU time, or of the GPU span for
idle time) apart as "also seen" (`Findings.also`): seen, never advised first.

The advice names PyTorch APIs only where the scope shows PyTorch (queries/framework.sql,
`Evidence.said`); elsewhere the same finding gets the fix in CUDA/HIP runtime calls and
framework-neutral terms.

Rules that need the stall attribution (memory_management, synchronization, launch
overhead, data loading, host compute, exposed communication, warm-up, idle in a user range)
run only when a `Stalls` result is passed in, with its `RunFacts` (run_facts.py: computed
here when the result has none); the kernel-evidence rules (channels_last, zero_grad, fused
optimizer, pinned memory, mixed precision, fuse elementwise) always run. A capture whose
largest idle cost is start-up (the warmup finding ahead of launch_overhead) gets no
launch_overhead or allocator_churn finding; one whose GPU ran under MIN_GPU_WORK_NS in all (a
capture of start-up) gets its idle findings other than warm-up and data waits as "also seen"
only: with no GPU work there was nothing to feed. The findings of a cost the verdict takes out
as off the critical path (traceq.advice.bound) are "also seen" too. The rules take the facts they are given (the scope, its evidence, the stall result):
advice never imports the analyses; traceq.engine.findings runs them for a run.
"""
from __future__ import annotations

from .base import FLOOR_PCT, MIN_GPU_WORK_NS, Evidence, Finding, Findings, evidence_for
from .bound import FINDINGS_OF_BOUND, bound_and_off

# the time ledger's labels (traceq.engine.ledger) whose time each idle-time finding claims
LEDGER_OF_FINDING = {
    "dataloader": ("data_ns",), "exposed_communication": ("communication_ns", "communication_wait_ns"),
    "remove_syncs": ("sync_ns", "blocking_copy_ns"), "allocator_churn": ("memory_management_ns",),
    "warmup": ("warmup_ns",), "launch_overhead": ("launch_ns",),
    "host_bound": ("host_compute_ns", "late_unattributed_ns"),
    "idle_in_range": ("late_unattributed_ns",),
}
from .rules import KERNEL_RULES, NOT_WITH_WARMUP, NOT_WITHOUT_GPU_WORK, STALL_RULES


def findings(scope, stalls=None, ev: Evidence | None = None) -> Findings:
    """Every finding of every applicable rule, largest estimated gain first: those above the
    floor as the list, those below it in `.also`."""
    ev = ev or evidence_for(scope)
    out: list[Finding] = []
    for rule in KERNEL_RULES:
        f = rule(scope, ev)
        if f is not None:
            out.append(f)
    if stalls is not None:
        if getattr(stalls, "facts", None) is None:
            from .run_facts import run_facts

            stalls.facts = run_facts(scope, stalls)
        span_ns = stalls.facts.span_ns or _span_ns(stalls)
        for rule in STALL_RULES:
            f = rule(scope, ev, stalls)
            if f is not None:
                f.base_ns = span_ns
                out.append(f)
    if stalls is not None and getattr(stalls.facts, "ledger", None):
        out = on_ledger(out, stalls.facts.ledger, getattr(stalls.facts, "ledger_ranks", None))
    out = _without_startup_lookalikes(out)
    if stalls is not None and (stalls.facts.busy_ns or 0) < MIN_GPU_WORK_NS:
        for f in out:   # the GPU ran nothing to judge: nothing kept it from being fed
            if f.id in NOT_WITHOUT_GPU_WORK:
                f.also = True
    for f in out:
        f.stepped = ev.stepped
    bound, off = bound_and_off(stalls.facts) if stalls is not None else (None, [])
    for f in out:   # a cost off the critical path: removing it does not shorten the step
        if any(f.id in FINDINGS_OF_BOUND.get(b, ()) for b in off):
            f.also = True
    first = FINDINGS_OF_BOUND.get(bound, ())
    ranked = sorted(out, key=lambda f: (f.id not in first, -f.est_gain_ms_per_step, f.id))
    return Findings([f for f in ranked if not f.below_floor(ev)], [f for f in ranked if f.below_floor(ev)])


def on_ledger(fs: list[Finding], t: dict, ranks: dict | None = None) -> list[Finding]:
    """The idle-time findings with the time the ledger gives their cause (LEDGER_OF_FINDING):
    each idle instant of a step has one label, so no two of them claim the same time and
    together they never exceed the step windows. A finding's gain per step is scaled with its
    time; one whose cause has no time in the ledger is dropped. `idle_in_range` (unexplained
    idle named by the user range it fell in) is at most the ledger's unexplained host time
    (late_unattributed_ns), and host_bound claims the rest of that with host_compute.
    With the totals of several ranks (`ranks`: {rank: totals}), each such finding names the
    rank where its ledger time per step is largest (Finding.worst: the gain scaled by that
    rank's time per step over the mean's)."""
    out = []
    ranged = next((f.gpu_ms for f in fs if f.id == "idle_in_range"), 0.0)
    ranged_ns = min(t.get("late_unattributed_ns", 0), round(ranged * 1e6))
    for f in fs:
        cols = LEDGER_OF_FINDING.get(f.id)
        if cols is None or not t.get("window_ns") or f.gpu_ms <= 0:   # gpu_ms 0: a share of step time, no GPU time
            out.append(f)
            continue
        ns = sum(t[c] for c in cols)
        if f.id == "idle_in_range":
            ns = ranged_ns
        elif f.id == "host_bound":   # the host late, computing or in what the trace does not record
            ns -= ranged_ns           # ... less what idle_in_range names by its user range
        if ns <= 0:
            continue
        f.est_gain_ms_per_step *= ns / (f.gpu_ms * 1e6)
        if abs(ns - f.gpu_ms * 1e6) > 0.005 * ns and "time ledger" not in f.evidence:
            f.evidence = (f"{ns / 1e6:,.2f} ms in the time ledger ({100.0 * ns / t['window_ns']:.1f} % of the step "
                          f"windows, every idle instant counted once; traceq steps); in the stall gaps: " + f.evidence)
        f.gpu_ms = ns / 1e6
        f.base_ns = t["window_ns"]
        if ranks and len(ranks) > 1 and f.id not in ("idle_in_range", "host_bound") and t.get("steps"):
            f.worst = _worst_rank(f.est_gain_ms_per_step, ns / t["steps"], cols, ranks)
        out.append(f)
    return out


def _worst_rank(gain: float, mean_per_step_ns: float, cols, ranks: dict) -> list | None:
    """[gain on the worst rank, ms/step; that rank]: the rank whose `cols` time per step is
    largest (ties: the lower rank), the gain scaled by its time per step over the mean."""
    per = {r: sum(x[c] for c in cols) / x["steps"] for r, x in ranks.items() if x.get("steps")}
    if not per or mean_per_step_ns <= 0:
        return None
    r = min(per, key=lambda k: (-per[k], k))
    return [gain * per[r] / mean_per_step_ns, int(r)]


def _without_startup_lookalikes(fs: list[Finding]) -> list[Finding]:
    """Without launch_overhead and allocator_churn when start-up (the warmup finding) costs
    more than they do: a capture of start-up shows module loads and first allocations
    that look like both."""
    warm = next((f for f in fs if f.id == "warmup"), None)
    if warm is None:
        return fs
    return [f for f in fs if f.id not in NOT_WITH_WARMUP or f.gpu_ms > warm.gpu_ms]


def _span_ns(stalls) -> int | None:
    """The GPU span the stall causes' shares are of (idle_pct = 100 · idle_ns / span)."""
    for r in stalls.causes.iter_rows(named=True):
        if r["idle_ns"] and r["idle_pct"]:
            return round(100.0 * r["idle_ns"] / r["idle_pct"])
    return None


def fix_first(fs: list[Finding]) -> str | None:
    """The one-line "Fix first" headline of the other analyses: the top finding of `fs`
    (`traceq.engine.findings.run_findings(scope)`), or None when there is none."""
    if not fs:
        return None
    f = fs[0]
    more = f"; +{len(fs) - 1} more" if len(fs) > 1 else ""
    if not f.stepped:
        gain = f"up to {f.gain()}; the trace has no steps"
    elif round(f.gpu_ms, 2):   # a data wait of a CPU-only trace has no GPU time to add up
        gain = f"up to {f.gain()}, {f.gpu_ms:,.2f} ms in all"
    else:
        gain = f"up to {f.gain()}"
    return (f"Fix first: {f.id} ({gain}){more} "
            "— traceq diagnose shows the evidence and the stall causes")


__all__ = ["FLOOR_PCT", "Evidence", "Finding", "Findings", "evidence_for", "findings", "fix_first"]
