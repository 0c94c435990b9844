"""The run's findings: every advice rule (traceq/advice) on a scope, kernel and stall rules,
ranked as `traceq diagnose` ranks them; what the "Fix first" line above the other analyses'
tables shows, so that line names the same first finding as diagnose and the report.

In one process `run_findings(scope)` computes the stall attribution at diagnose's defaults
(`traceq.engine.stall_attribution`) and runs the rules. For a run mapped over its ranks,
each rank's task also returns `rank_advice(scope)` (its stalls, busy ends, the host calls the
rules cite, its evidence parts) and `findings_of_ranks` reduces them. Either way the findings
are kept beside the store (traceq.engine.findings_cache) and read from there while the run
and the code are unchanged.
"""
from __future__ import annotations

# The advice rules, the store and the stall attribution are imported where they are used: the
# analyses' modules import this one when the registry is built (`traceq --help` too).


def run_findings(scope, stalls=None) -> list:
    """Every finding of the scope: `stalls` is the scope's Stalls result, computed here
    (diagnose's default minimum gap, no data pattern) when not given."""
    from ..advice import findings
    from . import findings_cache
    from .stall_attribution import stalls_scoped

    from ..advice.run_facts import run_facts
    from .ledger import with_ledger
    from .path_facts import with_path

    key, fs = findings_cache.load(scope, stalls)
    if fs is not None:
        return fs
    if stalls is None:
        stalls = stalls_scoped(scope)
    if getattr(stalls, "facts", None) is None:
        stalls.facts = run_facts(scope, stalls)
    with_ledger(scope, stalls.facts, data_pattern=stalls.data_pattern)
    with_path(scope, stalls.facts)   # the bound (its findings first) weighs the critical path, as diagnose's
    fs = findings(scope, stalls)
    findings_cache.save(scope, key, fs)
    return fs


def fix_first_line(fs, headline: str | None) -> str | None:
    """`headline` with the "Fix first" line above it (when there is a finding). `fs`: the
    findings, or a Scope to compute them of (`run_findings`)."""
    from ..advice import fix_first

    first = fix_first(fs if isinstance(fs, list) else run_findings(fs))
    return "\n".join(x for x in (first, headline) if x) or None


# ---------------------------------------------------------------- a run mapped over its ranks
def rank_advice(scope, min_gap_us: float | None = None, data_pattern: str | None = None) -> dict:
    """What the run's findings need of one rank: its Stalls (at diagnose's default minimum
    gap unless given), per device its first op start and last op end, the host calls the
    stall rules cite, its advice evidence parts and its RunFacts (traceq.advice.run_facts) with
    its critical path (traceq.engine.path_facts)."""
    from ..advice.base import evidence_parts
    from ..advice.rules import HOST_CALLS
    from ..advice.rules.stall_facts import host_calls
    from .stall_attribution import DEFAULT_MIN_GAP_US, rank_stalls

    from ..advice.run_facts import run_facts

    st, ends = rank_stalls(scope, DEFAULT_MIN_GAP_US if min_gap_us is None else min_gap_us, data_pattern)
    st.host_calls = {where: host_calls(scope, where) for where in HOST_CALLS}
    from .ledger import with_ledger
    from .path_facts import with_path

    return {"stalls": st, "busy_ends": ends, "ev": evidence_parts(scope),
            "facts": with_path(scope, with_ledger(scope, run_facts(scope, st), data_pattern=data_pattern))}


def stalls_of_ranks(scope, outs: list[dict], min_gap_us: float, data_pattern: str | None):
    """The run's Stalls from the ranks' `rank_advice` parts."""
    from .stall_attribution import reduce_stalls

    return reduce_stalls(scope, [o["stalls"] for o in outs], [o["busy_ends"] for o in outs], min_gap_us,
                         data_pattern)


def findings_of_ranks(scope, outs: list[dict], key: str | None, stalls=None) -> list:
    """The run's findings from the ranks' `rank_advice` parts; `stalls`: the run's Stalls when
    already reduced. Kept beside the store under `key` (None: not kept, the stalls are not at
    diagnose's defaults)."""
    from ..advice import findings
    from ..advice.base import merge_evidence
    from . import findings_cache
    from .stall_attribution import DEFAULT_MIN_GAP_US

    from ..advice.run_facts import merge_facts

    st = stalls if stalls is not None else stalls_of_ranks(scope, outs, DEFAULT_MIN_GAP_US, None)
    st.facts = merge_facts([o["facts"] for o in outs])
    fs = findings(scope, st, merge_evidence([o["ev"] for o in outs]))
    if key is not None:
        findings_cache.save(scope, key, fs)
    return fs


def map_with_findings(scope, fn, window: str | None = None, **params) -> tuple[list[dict], list]:
    """`map_ranks(scope, fn, ...)` and the run's findings: those kept beside the store, the
    ranks' tasks then skipping what the findings need (`fn` is called with advice=False);
    else computed from the `rank_advice` parts the tasks return (advice=True), and kept."""
    from . import findings_cache
    from .per_rank import map_ranks

    key, fs = findings_cache.load(scope)
    outs = map_ranks(scope, fn, window, advice=fs is None, **params)
    return outs, fs if fs is not None else findings_of_ranks(scope, outs, key)
