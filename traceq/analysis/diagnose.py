"""`traceq diagnose`: one verdict per run and rank — what bounds the run — then the
evidence-gated findings (traceq/advice) ranked by estimated time to win per step.

The verdict compares shares of the GPU span (Σ per device of first op start → last op
end): `gpu` (busy: not in an idle gap >= --min-gap-us) and the stall causes of the idle
gaps (queries/stalls_gaps.sql) grouped as `data` (data_loading), `communication`, `sync`
(synchronization + blocking_copy), `memory_management`, `launch` (launch_overhead), `host`
(host_compute) and `unattributed`. Only what the host was seen doing while the GPU waited
for it counts against the host: `host` and `launch` take their gap time only from gaps the
host was late for (the op ending the gap was not yet launched when the gap began: HTA's
host_wait, REFERENCE A1.4). Idle time with no recorded host activity, and host
compute/launch time in gaps whose next op was already queued (the GPU waited on something
the trace does not show, not on the host), are `unattributed`: never host-bound.
The bound is `gpu` when the GPU is busy for at least half of the span, else the largest
idle share (`unattributed` when that is what traceq cannot explain). A rank without GPU
ops is `data` when it waits for data more than 5 % of step time, else `host`, or `unknown`
when the ingest found the file truncated (its GPU events may be missing); a truncation is
named in the evidence of every verdict.
"""
from __future__ import annotations

import json

import polars as pl

from ..advice import cache, evidence_for, findings
from ..schema import TRUNCATED_WARNING
from .scope import Scope, open_scope
from .stalls import DATA_WAIT_ADVICE_PCT, DEFAULT_MIN_GAP_US, stalls_scoped

BOUND_OF_CAUSE = {
    "data_loading": "data", "communication": "communication", "synchronization": "sync", "blocking_copy": "sync",
    "memory_management": "memory_management", "launch_overhead": "launch", "host_compute": "host",
    "unattributed": "unattributed",
}
# causes that blame the host for being late: they count only in gaps whose next op was not yet queued
HOST_LATE = {"launch_overhead": "launch_ns", "host_compute": "host_ns"}
BOUNDS = ("gpu", "data", "host", "launch", "sync", "memory_management", "communication", "unattributed")

FINDING = pl.Struct({"id": pl.String, "category": pl.String, "evidence": pl.String, "gpu_ms": pl.Float64,
                     "est_gain_ms_per_step": pl.Float64, "advice": pl.String})
SCHEMA = {"run": pl.String, "rank": pl.Int64, "bound": pl.String, "bound_share_pct": pl.Float64,
          "evidence": pl.String, "findings": pl.List(FINDING),
          # the rank has steps (advice.base.Evidence.stepped): gains are per step, else the whole
          # trace's. For the table's wording; not in the JSON, whose shape is an interface
          "stepped": pl.Boolean}


def _launch_words(st) -> str:
    la = st.launch
    if la is None or la.height == 0 or not la["launches"].sum():
        return ""
    n = int(la["launches"].sum())
    k = int(la["kernels"].sum())
    mean_cpu = float((la["mean_launch_ns"].fill_null(0) * la["launches"]).sum() / n)
    delay = float((la["mean_delay_ns"].fill_null(0) * la["launches"]).sum() / n)
    short = float((la["short_kernels_pct"] * la["kernels"]).sum() / max(k, 1))
    return (f"; launches {n:,} (mean CPU {mean_cpu / 1e3:.1f} µs, mean launch delay {delay / 1e3:.1f} µs), "
            f"{short:.0f} % of {k:,} kernels < 10 µs, {int(la['graph_launches'].sum()):,} graph launches")


def _queue_words(st, span_ns: float) -> str:
    if not st.queued_gaps():
        return ""
    moved = [f"{cause} {100 * st.queued_ns(col) / span_ns:.1f} %" for cause, col in HOST_LATE.items()
             if st.queued_ns(col)]
    return (f"; in {st.queued_gaps():,} of the gaps ({100 * st.queued_ns('gap_ns') / span_ns:.1f} % of the span) the "
            "next GPU op was already launched when the gap began: the GPU waited on something the trace does not "
            "show, not on the host" + (f" (counted as unattributed, not host: {', '.join(moved)})" if moved else ""))


def truncation(scope: Scope) -> str | None:
    """The ingest's truncation warning of the scope's ranks (runs.warnings, schema.TRUNCATED_WARNING),
    e.g. "rank 0: file is truncated or malformed after 15,000 complete events", or None."""
    rows = scope.df("SELECT m.rank, m.warnings FROM runs m JOIN scope_window w ON w.rank = m.rank "
                    "WHERE m.run = $run ORDER BY m.rank")
    cut = []
    for r in rows.iter_rows(named=True):
        for w in json.loads(r["warnings"] or "[]"):
            if w.startswith(TRUNCATED_WARNING):
                cut.append((r["rank"], w.split(";")[0]))
    if not cut:
        return None
    return "; ".join(w if rows.height == 1 else f"rank {rank}: {w}" for rank, w in cut)


def _cut_words(cut: str) -> str:
    """A scope without GPU ops whose trace file was cut (`truncation`), in words."""
    return f"the trace file was truncated ({cut}): its GPU events may be missing"


def no_gpu_reason(scope: Scope) -> str:
    """Why a scope has no GPU ops, in words for a headline: the ingest's truncation warning
    when it found the file cut (`truncation`), else the guess of a CPU-only trace."""
    cut = truncation(scope)
    return _cut_words(cut) if cut else "CPU-only trace?"


def _cpu_only(st, truncated: str | None) -> tuple[str, float, str]:
    what = ("no GPU ops in scope (CPU-only trace)" if truncated is None else
            f"no GPU ops in scope, but {_cut_words(truncated)} "
            "(Kineto writes them after the CPU ops), so this is not known to be a CPU-only run")
    pct = st.data_wait_pct()
    if pct is not None and pct > DATA_WAIT_ADVICE_PCT:
        return "data", pct, (f"{what}; {st.wait_words} {pct:.1f} % of step time "
                             f"(> {DATA_WAIT_ADVICE_PCT:g} %) over {st.steps.height} steps")
    # cut before its GPU events, a trace says nothing of what bounds the run: "unknown", not host
    return ("host" if truncated is None else "unknown"), 100.0 - (pct or 0.0), (
        what + (": the host does all the work" if truncated is None else "")
        + ("" if pct is None else f"; {st.wait_words} {pct:.1f} % of step time"))


def verdict(st, truncated: str | None = None) -> tuple[str, float, str]:
    """(bound, share %, evidence) of one scope's stall result (see the module docstring);
    `truncated`: the ingest's truncation warning (`truncation`), named in the evidence."""
    c = st.causes
    if c.height == 0:
        return _cpu_only(st, truncated)
    shares = dict.fromkeys(BOUNDS, 0.0)
    idle = float(c["idle_pct"].fill_null(0).sum())
    shares["gpu"] = max(0.0, 100.0 - idle)
    idle_ns = float(c["idle_ns"].fill_null(0).sum())
    span_ns = idle_ns * 100.0 / idle if idle else 0.0
    for r in c.iter_rows(named=True):
        pct = r["idle_pct"] or 0.0
        if r["cause"] in HOST_LATE and span_ns:
            moved = 100.0 * st.queued_ns(HOST_LATE[r["cause"]]) / span_ns
            shares["unattributed"] += moved
            pct -= moved
        shares[BOUND_OF_CAUSE[r["cause"]]] += pct
    if shares["gpu"] >= idle:
        bound = "gpu"
    else:
        bound = max(BOUNDS[1:], key=lambda b: (shares[b], -BOUNDS.index(b)))
    causes = ", ".join(f"{r['cause']} {r['idle_pct']:.1f} %" for r in c.sort("idle_ns", descending=True).iter_rows(named=True)
                       if r["idle_ns"])
    ev = (f"GPU busy {shares['gpu']:.1f} % of the GPU span; idle in {st.gaps.height:,} gaps >= {st.min_gap_us:g} µs: "
          f"{idle:.1f} %" + (f" ({causes})" if causes else "") + (_queue_words(st, span_ns) if span_ns else "")
          + _launch_words(st))
    if truncated is not None:
        ev += f"; the trace file was truncated ({truncated}): events after the cut are missing"
    return bound, shares[bound], ev


def bound_words(bound: str, share: float) -> str:
    """The verdict in words: "host-bound (68.3 %)", or for idle time traceq cannot explain
    "GPU idle, cause unattributed (47.0 %)", or for a truncated trace left without GPU ops
    "bound unknown (...)"."""
    if bound == "unattributed":
        return f"GPU idle, cause unattributed ({share:.1f} %)"
    if bound == "unknown":
        return "bound unknown (the trace was cut before its GPU events)"
    return f"{bound}-bound ({share:.1f} %)"


def _diagnosed(one: Scope, min_gap_us: float) -> dict:
    """bound, bound_share_pct, evidence, findings and stepped of a one-rank scope. At the
    default minimum gap they are kept beside the store with the scope's findings (the
    `run_findings` of the other analyses' "Fix first" line: the same findings) and read
    from there while the run and the code are unchanged (traceq.advice.cache)."""
    key, kept = cache.load_verdict(one, min_gap_us)
    if kept is not None:
        verdict_row, fs = kept
    else:
        st = stalls_scoped(one, min_gap_us)
        bound, share, ev = verdict(st, truncation(one))
        facts = evidence_for(one)
        fs = findings(one, st, facts)
        verdict_row = {"bound": bound, "bound_share_pct": round(share, 2), "evidence": ev, "stepped": facts.stepped}
        cache.save(one, key, fs, verdict_row)
    return {**verdict_row, "findings": [f.as_dict() for f in fs]}


def diagnose_scoped(scope: Scope, min_gap_us: float = DEFAULT_MIN_GAP_US) -> pl.DataFrame:
    """One row per rank of the scope: run, rank, bound, bound_share_pct, evidence, the
    findings (list of {id, category, evidence, gpu_ms, est_gain_ms_per_step, advice}) and
    stepped (the rank has steps).
    A run of several ranks on an executor: one task per rank (traceq.analysis.per_rank)."""
    from . import per_rank

    if per_rank.mapped(scope):
        return per_rank.diagnose(scope, min_gap_us)
    ranks = [r[0] for r in scope.con.execute("SELECT rank FROM scope_window ORDER BY rank").fetchall()]
    rows = []
    for r in ranks:
        one = scope if len(ranks) == 1 else open_scope(scope.store, scope.run, r, scope.steps,
                                                       scope.step_pattern, scope.skip_first)
        rows.append({"run": scope.run, "rank": r, **_diagnosed(one, min_gap_us)})
    return pl.DataFrame(rows, schema=SCHEMA)


def diagnose(store=None, run: str | None = None, rank: int | None = None, steps: str | None = None,
             min_gap_us: float = DEFAULT_MIN_GAP_US, *, step_pattern: str | None = None,
             skip_first: int = 0) -> pl.DataFrame:
    """Verdict and ranked findings per rank of a run (see the module docstring); JSON of
    `traceq diagnose --format json` is {"runs": diagnose(...).drop("stepped").to_dicts()}."""
    return diagnose_scoped(open_scope(store, run, rank, steps, step_pattern, skip_first), min_gap_us)


def headline(row: dict) -> str:
    return f"run {row['run']} rank {row['rank']}: {bound_words(row['bound'], row['bound_share_pct'])} — {row['evidence']}"
