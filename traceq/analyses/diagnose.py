"""`traceq diagnose`: one verdict per run and rank — what bounds the run — then the
evidence-gated findings (traceq/advice) ranked by estimated time to win per step, and
those below the floor (1 % of GPU time, or of the GPU span for idle time) as "also seen".

The verdict names the largest AVOIDABLE cost, as shares of the GPU span (Σ per device of
first op start → last op end; traceq.advice.run_facts):
  data               GPU idle while the host waits for data (stall cause data_loading)
  communication      GPU idle while the host waits in collectives, plus exposed
                     communication: communication kernels with no compute kernel running
  sync               GPU idle while the host blocks (synchronization, blocking_copy)
  memory_management  GPU idle in allocator calls, when they churn (memory given back and
                     allocated again); first-touch allocations are warm-up
  launch             GPU idle while the host was late, inside launch calls
  host               GPU idle while the host was late, computing (framework/Python ops) or
                     running code the trace does not record
  copy               the GPU busy with copies/memsets only (no kernel running)
  warmup             GPU idle during one-off start-up (context creation, module loading,
                     JIT compilation: queries/advice_warm.sql) and first-touch allocations
The bound is `gpu` when those together are under GPU_BOUND_AVOIDABLE_PCT (10 %) of the span:
the GPU is busy with its own work, judged by its kernels. Idle time in gaps whose next op
was already queued, with no host activity that explains it, is `unattributed` (the GPU
waited on something the trace does not show): the bound only when it is at least half of
the span and larger than every avoidable cost. A rank without GPU work (no GPU ops, a
zero-length GPU span, or under MIN_GPU_WORK_NS of GPU work in all) is `no_gpu`, with what
the capture holds, or `unknown` when the ingest found the file cut (Kineto writes the GPU
events last: they may be missing); a truncation is named in
the evidence of every verdict. `gpu_idle_pct` is summary's idle_pct of the rank (all idle
time); the gaps >= --min-gap-us the causes are measured on are a part of it.

The critical path weighs the verdict where the scope's steps have one (traceq.advice.bound's
docstring: the mapping of path bounds to these, and the rule): kernels on >= 60 % of the path
make it `gpu` whatever idle gaps the GPU has; GPU idle charged to a cost whose bound holds
under 2 % of the path is off the path and not counted (fixing it does not shorten the step).
`critical_path` (JSON) is the path's share per bound and its dominant bound, null without one.
"""
from __future__ import annotations

from ..advice import evidence_for, findings
from ..advice.base import floor_words
from ..advice.base import MIN_GPU_WORK_NS   # under it in the whole scope: no GPU work to judge
from ..advice.bound import AVOIDABLE, GPU_BOUND_AVOIDABLE_PCT, PATH_BOUNDS, PATH_GPU_BOUND_PCT, PATH_OFF_PCT, \
    bound_with_path, shares
from ..advice.run_facts import run_facts
from ..advice.stall_advice import DATA_WAIT_ADVICE_PCT
from ..engine import findings_cache
from ..engine.ledger import IDLE_LABELS, with_ledger
from ..engine.path_facts import with_path
from ..engine.per_rank import map_ranks, mapped
from ..engine.scope import Scope, open_scope
from ..engine.stall_attribution import DEFAULT_MIN_GAP_US
from ..engine.truncation import cut_words, truncation
from ..lazy import polars as pl
from .spec import EXECUTOR_PARAMS, Analysis, Block, Out, Param, Result, cols



def schema() -> dict:
    """One row per rank. `stepped`: the rank has steps (advice.base.Evidence.stepped), so gains
    are per step, else the whole trace's; for the table's wording, not in the JSON, whose shape
    is an interface."""
    finding = pl.Struct({"id": pl.String, "category": pl.String, "evidence": pl.String, "gpu_ms": pl.Float64,
                         "est_gain_ms_per_step": pl.Float64, "advice": pl.String})
    return {"run": pl.String, "rank": pl.Int64, "bound": pl.String, "bound_share_pct": pl.Float64,
            "evidence": pl.String, "gpu_idle_pct": pl.Float64, "findings": pl.List(finding),
            "also_seen": pl.List(finding), "stepped": pl.Boolean, "critical_path": path_schema()}


# the critical path of a rank's steps: its dominant bound, steps, whether the verdict weighed it
# (its steps cover the GPU span) and each bound's share of the path, %
def path_schema():
    return pl.Struct({"bound": pl.String, "steps": pl.Int64, "weighed": pl.Boolean,
                      "shares": pl.Struct({b: pl.Float64 for b in PATH_BOUNDS})})


def path_row(facts) -> dict | None:
    """The `critical_path` of a rank's RunFacts (path_schema()), None without a path."""
    path = getattr(facts, "path", None)
    if path is None or facts is None:
        return None
    return {"bound": path.dominant(), "steps": path.steps, "weighed": path.weighed(facts.span_ns),
            "shares": {b: round(v, 2) for b, v in path.shares().items()}}


def _launch_words(st) -> str:
    la = st.launch
    if la is None or la.height == 0:
        return ""
    replayed = int(la["graph_kernels"].sum()) if "graph_kernels" in la.columns else 0
    graphs = (f"; {replayed:,} kernels replayed from {int(la['graph_launches'].sum()):,} graph launches "
              "(graph replays, not launches)") if replayed else ""
    if not la["launches"].sum():
        return graphs
    n = int(la["launches"].sum())
    k = int(la["kernels"].sum())
    mean_cpu = float((la["mean_launch_ns"].fill_null(0) * la["launches"]).sum() / n)
    delay = float((la["mean_delay_ns"].fill_null(0) * la["launches"]).sum() / n)
    short = float((la["short_kernels_pct"] * la["kernels"]).sum() / max(k, 1))
    return (f"; launches {n:,} (mean CPU {mean_cpu / 1e3:.1f} µs, mean launch delay {delay / 1e3:.1f} µs), "
            f"{short:.0f} % of {k:,} kernels < 10 µs, {int(la['graph_launches'].sum()):,} graph launches"
            + (f" replaying {replayed:,} of them" if replayed else ""))


def _no_gpu(st, facts, truncated: str | None) -> tuple[str, float, str]:
    if facts is not None and facts.busy_ns:
        what = (f"the GPU ran {facts.busy_ns / 1e3:,.1f} µs of work in all (under {MIN_GPU_WORK_NS / 1e3:g} µs): "
                "nothing on the GPU to judge")
    else:
        what = "no GPU ops in scope (CPU-only capture)"
    if truncated is not None:
        what = (f"no GPU ops in scope, but {cut_words(truncated)} (Kineto writes them after the CPU ops), so this "
                "is not known to be a CPU-only run")
    pct = st.data_wait_pct()
    if pct is not None:
        n = st.steps.height
        what += (f"; {st.wait_words} {pct:.1f} % of step time over {n} step{'s' if n != 1 else ''}"
                 + (f" (> {DATA_WAIT_ADVICE_PCT:g} %: the dataloader finding)" if pct > DATA_WAIT_ADVICE_PCT else ""))
    # cut before its GPU events, a trace says nothing of what bounds the run: "unknown"
    return ("no_gpu" if truncated is None else "unknown"), 100.0, what


def verdict(st, facts=None, truncated: str | None = None) -> tuple[str, float, str]:
    """(bound, share %, evidence) of one scope's stall result and its RunFacts (see the module
    docstring); `truncated`: the ingest's truncation warning (`truncation`), named in the
    evidence."""
    if st.causes.height == 0 or facts is None or not facts.span_ns or facts.busy_ns < MIN_GPU_WORK_NS:
        return _no_gpu(st, facts, truncated)
    sh = shares(facts)
    avoidable = sum(sh[b] for b in AVOIDABLE)
    bound, off = bound_with_path(sh, facts)
    c = st.causes
    causes = ", ".join(f"{r['cause']} {r['idle_pct']:.1f} %" for r in c.sort("idle_ns", descending=True).iter_rows(named=True)
                       if r["idle_ns"])
    costs = ", ".join(f"{b} {sh[b]:.1f} %" for b in sorted(AVOIDABLE, key=lambda b: -sh[b]) if round(sh[b], 1))
    led = getattr(facts, "ledger", None)
    base = "of the step windows" if led else "of the GPU span"
    busy = [f"GPU busy {sh['busy']:.1f} % {base}"]
    if facts.exposed_comm_ns:
        busy.append(f"exposed communication {100.0 * facts.exposed_comm_ns / facts.span_ns:.1f} %")
    if facts.exposed_copy_ns:
        busy.append(f"copies only {sh['copy']:.1f} %")
    if led:   # the ledger's idle labels (traceq steps): every idle instant once
        idle_causes = ", ".join(f"{c} {100.0 * led[c + '_ns'] / led['window_ns']:.1f} %" for c in sorted(
            IDLE_LABELS, key=lambda c: -led[c + "_ns"]) if round(100.0 * led[c + "_ns"] / led["window_ns"], 1))
        idle = f"; idle {sh['idle']:.1f} %" + (f" ({idle_causes})" if idle_causes else "")
    else:
        idle = (f"; idle in {st.gaps.height:,} gaps >= {st.min_gap_us:g} µs: {sh['idle']:.1f} %"
                + (f" ({causes})" if causes else ""))
    ev = (", ".join(busy) + idle
          + (f"; avoidable: {costs} = {avoidable:.1f} %" if costs else "; avoidable: none")
          + (f" (< {GPU_BOUND_AVOIDABLE_PCT:g} %: GPU-bound)" if bound == "gpu" and avoidable < GPU_BOUND_AVOIDABLE_PCT
             else "")
          + _path_words(facts, off)
          + _queue_words(st, facts, sh)
          + _launch_words(st))
    if truncated is not None:
        ev += f"; the trace file was truncated ({truncated}): events after the cut are missing"
    return bound, sh[bound], ev


def _path_words(facts, off: list[str]) -> str:
    """What the critical path says of the verdict (traceq.advice.bound)."""
    path = getattr(facts, "path", None)
    if path is None:
        return ""
    s = "s" if path.steps != 1 else ""
    if not path.weighed(facts.span_ns):
        return (f"; critical path of {path.steps} step{s} not weighed (its steps span "
                f"{100.0 * path.span_ns / (path.gpu_extent_ns or facts.span_ns):,.0f} % of the GPU's time)")
    ps = path.shares()
    words = f"; critical path of {path.steps} step{s}: {path.words()}"
    if ps["gpu"] >= PATH_GPU_BOUND_PCT:
        return words + f" (kernels >= {PATH_GPU_BOUND_PCT:g} % of the path: GPU-bound)"
    if off:
        words += (f"; off the path (< {PATH_OFF_PCT:g} % of it), GPU idle not counted: " + ", ".join(off))
    return words


def _queue_words(st, facts, sh: dict) -> str:
    """The gaps whose next op was already launched when they began, and the idle time in them
    no host activity explains (unattributed: never the host's)."""
    n = st.queued_gaps()
    if not n or not facts.span_ns:
        return ""
    base = "of the step windows" if getattr(facts, "ledger", None) else "of the span"
    return (f"; in {n:,} of the gaps ({100 * st.queued_ns('gap_ns') / facts.span_ns:.1f} % {base}) the next GPU "
            "op was already launched when the gap began: the GPU waited on something the trace does not show, not "
            f"on the host (unattributed {sh['unattributed']:.1f} %)")


def bound_words(bound: str, share: float) -> str:
    """The verdict in words: "host-bound (68.3 %)", or for idle time traceq cannot explain
    "GPU idle, cause unattributed (47.0 %)", or "no GPU work"."""
    if bound == "unattributed":
        return f"GPU idle, cause unattributed ({share:.1f} %)"
    if bound == "no_gpu":
        return "no GPU work"
    if bound == "unknown":
        return "bound unknown (the trace was cut before its GPU events)"
    return f"{bound}-bound ({share:.1f} %)"


def _diagnosed(scope: Scope, min_gap_us: float) -> dict:
    """{rank: bound, bound_share_pct, evidence, findings and stepped} of every rank of the
    scope, each as the scope narrowed to that rank gives them, computed for all ranks in one
    pass (traceq.engine.rank_facts). At the default minimum gap they are kept beside the
    store per rank with the rank's findings (the `run_findings` of the other analyses' "Fix
    first" line: the same findings) and read from there while the run and the code are
    unchanged (traceq.engine.findings_cache)."""
    from ..engine.rank_facts import rank_facts, scope_ranks

    ranks = scope_ranks(scope)
    ids = findings_cache.rank_ids(scope, ranks)
    keys, kept = findings_cache.load_verdicts(scope, ids, min_gap_us)
    todo = [r for r in ranks if kept[r] is None]
    facts = rank_facts(scope, min_gap_us) if todo else {}
    idle = gpu_idle_pcts(scope) if todo else {}
    out = {}
    for r in ranks:
        if kept[r] is not None:
            verdict_row, fs = kept[r]
        else:
            rf = facts[r]
            st = rf.stalls
            bound, share, ev = verdict(st, st.facts, rf.truncated)
            fs = findings(scope, st, rf.evidence)
            eff = _efficiency_of(scope, r, len(ranks)) if bound == "gpu" else None
            if eff is not None:
                ev += "; " + efficiency_words(eff)
            verdict_row = {"bound": bound, "bound_share_pct": round(share, 2), "evidence": ev,
                           "gpu_idle_pct": idle.get(r), "stepped": rf.evidence.stepped,
                           "critical_path": path_row(st.facts)}
            findings_cache.save(scope, keys[r], fs, verdict_row, ids[r])
        out[r] = {**verdict_row, "findings": [f.as_dict() for f in fs], "also_seen": [f.as_dict() for f in fs.also]}
    return out


def _efficiency_of(scope: Scope, rank: int, ranks: int) -> dict | None:
    """`efficiency` of one rank of the scope (the scope itself when it has one rank)."""
    if ranks == 1:
        return efficiency(scope)
    one = open_scope(scope.store, scope.run, rank, scope.steps, scope.step_pattern, scope.skip_first)
    try:
        return efficiency(one)
    finally:
        one.con.close()


def efficiency(one: Scope) -> dict | None:
    """A GPU-bound rank's efficiency view (traceq roofline): MFU, the share of GPU time the
    performance model covers and the ops losing the most time against their roofline; None
    when the model covers nothing (no shapes recorded, no modelled op)."""
    from .roofline import roofline_scoped

    _, _, eff = roofline_scoped(one)
    if not eff.flop:
        return None
    return eff.to_dict()


def efficiency_words(eff: dict) -> str:
    """The efficiency view in the evidence: what the GPU's busy time achieved."""
    from .roofline import dims_words

    parts = [f"efficiency on {eff['device'] or 'an unrecorded device'}: "
             + (f"MFU {eff['mfu_pct']:.1f} % of {eff['mfu_peak_tflops']:,.0f} TFLOP/s {eff['mfu_dtype']}"
                if eff["mfu_pct"] is not None else
                "MFU unknown (" + ("the trace records no dtypes)" if eff["peaks_known"] else
                                   "device peaks unknown: traceq roofline --peak-tflops)"))
             + f", the performance model covers {eff['modelled_pct'] or 0:.0f} % of GPU op time"]
    worst = [w for w in eff["worst"] if w["roofline_pct"] is not None]
    if worst:
        parts.append("furthest below their roofline by time lost: " + ", ".join(
            f"{w['op']} {dims_words(w['input_dims'])} at {w['roofline_pct']:.0f} % "
            f"({w['bound']}-bound, {w['kernel_ns'] / 1e6:,.2f} ms)" for w in worst) + " (traceq roofline)")
    return "; ".join(parts)


def gpu_idle_pcts(scope: Scope) -> dict:
    """summary's idle_pct of each rank of the scope ({rank: %, rounded to 4 places}; None, or
    no entry, without GPU ops or with a zero span)."""
    from .summary import summary_scoped

    df = summary_scoped(scope)
    return {int(r): (None if v is None else round(float(v), 4)) for r, v in df.select("rank", "idle_pct").iter_rows()}


def diagnose_scoped(scope: Scope, min_gap_us: float = DEFAULT_MIN_GAP_US) -> pl.DataFrame:
    """One row per rank of the scope: run, rank, bound, bound_share_pct, evidence, the
    findings (list of {id, category, evidence, gpu_ms, est_gain_ms_per_step, advice}) and
    stepped (the rank has steps).
    Every rank of the scope in one pass (traceq.engine.rank_facts), each as the scope narrowed
    to that rank alone gives it; a run of several ranks on an executor: a task per rank or
    batch of ranks (traceq.engine.per_rank), each diagnosing its ranks in one pass."""
    if mapped(scope):
        outs = map_ranks(scope, rank_part, min_gap_us=min_gap_us)
        return pl.DataFrame([row for o in outs for row in o["rows"]], schema=schema())
    rows = [{"run": scope.run, "rank": r, **d} for r, d in _diagnosed(scope, min_gap_us).items()]
    return pl.DataFrame(rows, schema=schema())


def headline(row: dict) -> str:
    idle = "" if row.get("gpu_idle_pct") is None else f"GPU idle {row['gpu_idle_pct']:.1f} % (summary); "
    return (f"run {row['run']} rank {row['rank']}: {bound_words(row['bound'], row['bound_share_pct'])}"
            f"{_path_clause(row.get('critical_path'))} — {idle}{row['evidence']}")


def _path_clause(cp: dict | None) -> str:
    """"; critical path: data_loading 87.0 %, cpu 10.6 %": its two largest bounds (>= 1 %),
    when the verdict weighed it."""
    if not cp or not cp.get("weighed") or not cp.get("shares"):
        return ""
    sh = cp["shares"]
    top = [f"{b} {sh[b]:.1f} %" for b in sorted(sh, key=lambda b: -(sh[b] or 0))[:2] if (sh[b] or 0) >= 1.0]
    return f"; critical path: {', '.join(top)}" if top else ""


def rank_part(scope: Scope, min_gap_us: float) -> dict:
    """The verdicts and findings of every rank of the scope (a task of the per-rank map: one
    rank, or a batch of ranks diagnosed in one pass): {"rows": [row per rank]}."""
    return {"rows": diagnose_scoped(scope, min_gap_us).to_dicts()}


# ---------------------------------------------------------------- the command
def compute(scope: Scope, min_gap_us: float = DEFAULT_MIN_GAP_US) -> Out:
    return Out(diagnose_scoped(scope, min_gap_us))


def to_json(res: Result) -> dict:
    # the shape is an interface (issue 31): a gpu-bound rank's efficiency view is in its evidence;
    # its numbers as JSON are `traceq roofline -f json`'s "efficiency"
    return {"runs": res.df.drop("stepped").select(
        "run", "rank", "bound", "bound_share_pct", "evidence", "gpu_idle_pct", "findings", "also_seen",
        "critical_path").to_dicts()}


def csv_tables(res: Result) -> list:
    """One row per finding, the rank's verdict repeated."""
    flat = (res.df.drop("stepped", "also_seen", "critical_path").rename({"evidence": "bound_evidence"})
            .explode("findings")
            .with_columns(pl.col("findings").struct.unnest()).drop("findings"))
    return [(None, flat)]


def view(res: Result) -> list[Block]:
    """Per rank: the verdict line, then its findings (gain, GPU or idle time) with each one's
    evidence and advice under the table."""
    df, out = res.df, []
    for row in df.iter_rows(named=True):
        fs = pl.DataFrame(row["findings"], schema=df.schema["findings"].inner.to_schema())
        # a rank without steps counts as one step, the whole trace: its gain is no per-step figure
        per_step = row["stepped"]
        also = _also_words(row["also_seen"])
        if fs.height == 0:
            out.append(Block(lines=[headline(row), f"no findings above the floor ({floor_words(per_step)})"
                                    + (f"; {also}" if also else "") + "\n"]))
            continue
        gain = "gain (ms/step)" if per_step else "gain (ms in all, no steps)"
        shown = fs.select("id", "category", pl.col("est_gain_ms_per_step").alias(gain),
                          pl.col("gpu_ms").alias("GPU/idle (ms)"))
        notes = [f"{i}. {f['id']}: {f['evidence']}\n   advice: {f['advice']}"
                 for i, f in enumerate(fs.iter_rows(named=True), 1)]
        if also:
            notes.append(also)
        out.append(Block(shown, headline(row), notes=notes))
    return out


def _also_words(also: list[dict] | None) -> str:
    """The findings below the floor, in one line: seen, too small to fix first."""
    if not also:
        return ""
    return ("also seen, not advised first (under the 1 % floor, start-up that does not dominate, off the critical "
            "path, or idle with no GPU work to judge): "
            + ", ".join(f"{f['id']} ({f['gpu_ms']:,.2f} ms)" for f in also))


# ---------------------------------------------------------------- the report
def report_section(ctx) -> list:
    """"Fix first": the run's verdict (all ranks pooled) and its findings ranked by estimated
    gain per step, placed first in the run's part; from the stalls its section computed."""
    from ..report.parts import Section

    st = ctx.results.get("stalls")
    if st is None:
        return []
    sec = Section("fix", ANALYSIS.report, lead=True,
                  intro="What bounds this run (the largest avoidable cost of the GPU span: data, communication, "
                        "host, launch, sync, memory management, copies, warm-up; GPU-bound when those are under 10 %) "
                        "and the findings whose evidence is in the trace: the bound's own first, then by estimated "
                        "gain per step (traceq diagnose, per rank).")
    with ctx.guard(sec, "diagnose"):
        if getattr(st, "facts", None) is None:
            st.facts = run_facts(ctx.scope, st)
        with_ledger(ctx.scope, st.facts, data_pattern=st.data_pattern)
        with_path(ctx.scope, st.facts)
        bound, share, evidence = verdict(st, st.facts, truncation(ctx.scope))
        rl = ctx.results.get("roofline")
        if bound == "gpu" and rl is not None and rl[1].flop:
            evidence += "; " + efficiency_words(rl[1].to_dict())
        sec.headline = f"{bound_words(bound, share)} — {evidence}"
        ev = evidence_for(ctx.scope)
        fs = findings(ctx.scope, st, ev)
        sec.advice = [f"{f.id} — up to {f.gain()}: {f.advice}. Evidence: {f.evidence}" for f in fs]
        if not fs:
            sec.notes.append(f"No finding above the floor ({floor_words(ev.stepped)}).")
        if fs.also:
            sec.notes.append(_also_words([f.as_dict() for f in fs.also]).capitalize() + ".")
    return [sec]


ANALYSIS = Analysis(
    name="diagnose",
    help="What bounds the run and what to fix first: one verdict per rank — the largest avoidable cost (data, "
         "communication, host, launch, sync, memory_management, copy or warmup), gpu when those are under 10 % of "
         "the GPU span, no_gpu without GPU work — with its share of the span and the evidence, then findings "
         "ranked by estimated time to win per step, each citing its evidence (kernel names, counts, ms, % of GPU "
         "time, ms per step) and its advice; findings under 1 % are listed as also seen. A run of several ranks "
         "is diagnosed in one pass over every rank (batches of ranks on the executor when the run is too large "
         "for one process).\n\n"
         "JSON: {\"runs\": [{\"run\", \"rank\", \"bound\", \"bound_share_pct\", \"evidence\", \"gpu_idle_pct\", "
         "\"findings\": [{\"id\", \"category\", \"evidence\", \"gpu_ms\", \"est_gain_ms_per_step\", \"advice\"}], "
         "\"also_seen\": [...], \"critical_path\": {\"bound\", \"steps\", \"weighed\", \"shares\": {bound: %}} or "
         "null}]} (the critical path of the rank's steps weighs the verdict: kernels on >= 60 % of it make it gpu, "
         "GPU idle of a cost under 2 % of it is not counted; a gpu-bound rank's evidence ends with the efficiency view: MFU and the ops "
         "furthest below their roofline, from traceq roofline); CSV: one row per finding, the rank's verdict repeated.",
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
    columns=cols("rank: rank", "bound: what bounds the rank (data, communication, host, launch, sync, "
                 "memory_management, copy, warmup, gpu, no_gpu, unattributed, unknown)",
                 "bound_share_pct: the bound's share of the GPU span, %",
                 "evidence: the numbers the verdict rests on (shares, stall causes, launch statistics)",
                 "gpu_idle_pct: summary's idle_pct of the rank, %",
                 "findings: the advice rules' findings, ranked: id, category, evidence, gpu_ms, "
                 "est_gain_ms_per_step, advice",
                 "also_seen: findings under the 1 % floor, same shape",
                 "stepped: the rank has steps (gains are per step; else in all)",
                 "critical_path: the critical path's bound and shares of the rank's steps (null without one)"),
)
