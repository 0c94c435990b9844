"""`traceq diagnose`: one verdict per run and rank — what bounds the run — then the
evidence-gated findings (traceq/advice) ranked by estimated time to win per step.

The verdict compares shares of the GPU span (Σ per device of first op start → last op
end): `gpu` (busy: not in an idle gap >= --min-gap-us) and the stall causes of the idle
gaps (queries/stalls_gaps.sql) grouped as `data` (data_loading), `communication`, `sync`
(synchronization + blocking_copy), `memory_management`, `launch` (launch_overhead), `host`
(host_compute) and `unattributed`. Only what the host was seen doing while the GPU waited
for it counts against the host: `host` and `launch` take their gap time only from gaps the
host was late for (the op ending the gap was not yet launched when the gap began: HTA's
host_wait). Idle time with no recorded host activity, and host
compute/launch time in gaps whose next op was already queued (the GPU waited on something
the trace does not show, not on the host), are `unattributed`: never host-bound.
The bound is `gpu` when the GPU is busy for at least half of the span, else the largest
idle share (`unattributed` when that is what traceq cannot explain). A rank without GPU
ops is `data` when it waits for data more than 5 % of step time, else `host`, or `unknown`
when the ingest found the file truncated (its GPU events may be missing); a truncation is
named in the evidence of every verdict.
"""
from __future__ import annotations

from ..advice import evidence_for, findings
from ..advice.base import floor_words
from ..advice.stall_advice import DATA_WAIT_ADVICE_PCT
from ..engine import findings_cache
from ..engine.per_rank import map_ranks, mapped
from ..engine.scope import Scope, open_scope
from ..engine.stall_attribution import DEFAULT_MIN_GAP_US, stalls_scoped
from ..engine.truncation import cut_words, truncation
from ..lazy import polars as pl
from .spec import EXECUTOR_PARAMS, Analysis, Block, Out, Param, Result

BOUND_OF_CAUSE = {
    "data_loading": "data", "communication": "communication", "synchronization": "sync", "blocking_copy": "sync",
    "memory_management": "memory_management", "launch_overhead": "launch", "host_compute": "host",
    "unattributed": "unattributed",
}
# causes that blame the host for being late: they count only in gaps whose next op was not yet queued
HOST_LATE = {"launch_overhead": "launch_ns", "host_compute": "host_ns"}
BOUNDS = ("gpu", "data", "host", "launch", "sync", "memory_management", "communication", "unattributed")



def schema() -> dict:
    """One row per rank. `stepped`: the rank has steps (advice.base.Evidence.stepped), so gains
    are per step, else the whole trace's; for the table's wording, not in the JSON, whose shape
    is an interface."""
    finding = pl.Struct({"id": pl.String, "category": pl.String, "evidence": pl.String, "gpu_ms": pl.Float64,
                         "est_gain_ms_per_step": pl.Float64, "advice": pl.String})
    return {"run": pl.String, "rank": pl.Int64, "bound": pl.String, "bound_share_pct": pl.Float64,
            "evidence": pl.String, "findings": pl.List(finding), "stepped": pl.Boolean}


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


def _cpu_only(st, truncated: str | None) -> tuple[str, float, str]:
    what = ("no GPU ops in scope (CPU-only trace)" if truncated is None else
            f"no GPU ops in scope, but {cut_words(truncated)} "
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
    from there while the run and the code are unchanged (traceq.engine.findings_cache)."""
    key, kept = findings_cache.load_verdict(one, min_gap_us)
    if kept is not None:
        verdict_row, fs = kept
    else:
        st = stalls_scoped(one, min_gap_us)
        bound, share, ev = verdict(st, truncation(one))
        facts = evidence_for(one)
        fs = findings(one, st, facts)
        verdict_row = {"bound": bound, "bound_share_pct": round(share, 2), "evidence": ev, "stepped": facts.stepped}
        findings_cache.save(one, key, fs, verdict_row)
    return {**verdict_row, "findings": [f.as_dict() for f in fs]}


def diagnose_scoped(scope: Scope, min_gap_us: float = DEFAULT_MIN_GAP_US) -> pl.DataFrame:
    """One row per rank of the scope: run, rank, bound, bound_share_pct, evidence, the
    findings (list of {id, category, evidence, gpu_ms, est_gain_ms_per_step, advice}) and
    stepped (the rank has steps).
    A run of several ranks on an executor: one task per rank (traceq.engine.per_rank)."""
    if mapped(scope):
        outs = map_ranks(scope, rank_part, min_gap_us=min_gap_us)
        return pl.DataFrame([o["row"] for o in outs], schema=schema())
    ranks = [r[0] for r in scope.con.execute("SELECT rank FROM scope_window ORDER BY rank").fetchall()]
    rows = []
    for r in ranks:
        one = scope if len(ranks) == 1 else open_scope(scope.store, scope.run, r, scope.steps,
                                                       scope.step_pattern, scope.skip_first)
        rows.append({"run": scope.run, "rank": r, **_diagnosed(one, min_gap_us)})
    return pl.DataFrame(rows, schema=schema())


def headline(row: dict) -> str:
    return f"run {row['run']} rank {row['rank']}: {bound_words(row['bound'], row['bound_share_pct'])} — {row['evidence']}"


def rank_part(scope: Scope, min_gap_us: float) -> dict:
    """One rank's verdict and findings (a task of the per-rank map)."""
    return {"row": diagnose_scoped(scope, min_gap_us).row(0, named=True)}


# ---------------------------------------------------------------- the command
def compute(scope: Scope, min_gap_us: float = DEFAULT_MIN_GAP_US) -> Out:
    return Out(diagnose_scoped(scope, min_gap_us))


def to_json(res: Result) -> dict:
    return {"runs": res.df.drop("stepped").to_dicts()}


def csv_tables(res: Result) -> list:
    """One row per finding, the rank's verdict repeated."""
    flat = (res.df.drop("stepped").rename({"evidence": "bound_evidence"}).explode("findings")
            .with_columns(pl.col("findings").struct.unnest()).drop("findings"))
    return [(None, flat)]


def view(res: Result) -> list[Block]:
    """Per rank: the verdict line, then its findings (gain, GPU or idle time) with each one's
    evidence and advice under the table."""
    df, out = res.df, []
    for row in df.iter_rows(named=True):
        fs = pl.DataFrame(row["findings"], schema=df.schema["findings"].inner.to_schema())
        # a rank without steps counts as one step, the whole trace: its gain is no per-step
        # figure, and the per-step floor does not apply to it
        per_step = row["stepped"]
        if fs.height == 0:
            out.append(Block(lines=[headline(row), f"no findings above the floor ({floor_words(per_step)})\n"]))
            continue
        gain = "gain (ms/step)" if per_step else "gain (ms in all, no steps)"
        shown = fs.select("id", "category", pl.col("est_gain_ms_per_step").alias(gain),
                          pl.col("gpu_ms").alias("GPU/idle (ms)"))
        notes = [f"{i}. {f['id']}: {f['evidence']}\n   advice: {f['advice']}"
                 for i, f in enumerate(fs.iter_rows(named=True), 1)]
        out.append(Block(shown, headline(row), notes=notes))
    return out


# ---------------------------------------------------------------- the report
def report_section(ctx) -> list:
    """"Fix first": the run's verdict (all ranks pooled) and its findings ranked by estimated
    gain per step, placed first in the run's part; from the stalls its section computed."""
    from ..report.parts import Section

    st = ctx.results.get("stalls")
    if st is None:
        return []
    sec = Section("fix", ANALYSIS.report, lead=True,
                  intro="What bounds this run (largest share of the GPU span: GPU busy, or the stall cause of the "
                        "idle gaps) and the findings whose evidence is in the trace, largest estimated gain per step "
                        "first (traceq diagnose, per rank).")
    with ctx.guard(sec, "diagnose"):
        bound, share, evidence = verdict(st, truncation(ctx.scope))
        sec.headline = f"{bound_words(bound, share)} — {evidence}"
        ev = evidence_for(ctx.scope)
        fs = findings(ctx.scope, st, ev)
        sec.advice = [f"{f.id} — up to {f.gain()}: {f.advice}. Evidence: {f.evidence}" for f in fs]
        if not fs:
            sec.notes.append(f"No finding above the floor ({floor_words(ev.stepped)}).")
    return [sec]


ANALYSIS = Analysis(
    name="diagnose",
    help="What bounds the run and what to fix first: one verdict per rank (gpu, data, host, launch, sync, "
         "memory_management or communication bound, with its share of the GPU span and the evidence), then "
         "findings ranked by estimated time to win per step, each citing its evidence (kernel names, counts, "
         "ms, % of GPU time, ms per step) and its advice. A run of several ranks is diagnosed one rank per "
         "task on the executor.\n\n"
         "JSON: {\"runs\": [{\"run\", \"rank\", \"bound\", \"bound_share_pct\", \"evidence\", "
         "\"findings\": [{\"id\", \"category\", \"evidence\", \"gpu_ms\", \"est_gain_ms_per_step\", \"advice\"}]}]}; "
         "CSV: one row per finding, the rank's verdict repeated.",
    examples=("traceq diagnose --format json",),
    compute=compute,
    params=(Param("min_gap_us", float, DEFAULT_MIN_GAP_US, "Smallest GPU idle gap to count, µs.", "US"),
            *EXECUTOR_PARAMS),
    per_rank=True,
    view=view,
    json=to_json,
    csv=csv_tables,
    report="Fix first",
    report_section=report_section,
    order=55,
    report_order=90,   # after the stalls section it reads; placed first (Section.lead)
)
