"""Evidence-gated advice: each rule (one module in traceq/advice/rules/) states the evidence
that triggers it and what rules it out, computes that evidence with SQL over the store
views, and returns a `Finding` that cites it (kernel names, counts, ms, % of GPU time,
ms per step). `findings(scope)` runs every rule, drops what is below the floor (< 1 % of
GPU time AND < 0.1 ms per step) and ranks the rest by estimated time to win per step.

The advice names PyTorch APIs only where the scope shows PyTorch (queries/framework.sql,
`Evidence.said`); elsewhere the same finding gets the fix in CUDA/HIP runtime calls and
framework-neutral terms.

Rules that need the stall attribution (memory_management, synchronization, launch
overhead, data loading, host compute) run only when a `Stalls` result is passed in; the
kernel-evidence rules (channels_last, zero_grad, fused optimizer, pinned memory) always
run. The rules take the facts they are given (the scope, its evidence, the stall result):
advice never imports the analyses; traceq.engine.findings runs them for a run.
"""
from __future__ import annotations

from .base import FLOOR_MS_PER_STEP, FLOOR_PCT, Evidence, Finding, evidence_for
from .rules import KERNEL_RULES, STALL_RULES


def findings(scope, stalls=None, ev: Evidence | None = None) -> list[Finding]:
    """Every finding of every applicable rule above the floor, largest estimated gain first."""
    ev = ev or evidence_for(scope)
    out: list[Finding] = []
    for rule in KERNEL_RULES:
        f = rule(scope, ev)
        if f is not None:
            out.append(f)
    if stalls is not None:
        span_ns = _span_ns(stalls)
        for rule in STALL_RULES:
            f = rule(scope, ev, stalls)
            if f is not None:
                f.base_ns = span_ns
                out.append(f)
    kept = [f for f in out if not f.below_floor(ev)]
    for f in kept:
        f.stepped = ev.stepped
    return sorted(kept, key=lambda f: (-f.est_gain_ms_per_step, f.id))


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


__all__ = ["FLOOR_MS_PER_STEP", "FLOOR_PCT", "Evidence", "Finding", "evidence_for", "findings", "fix_first"]
