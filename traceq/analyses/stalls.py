"""Data-loading stalls and other GPU starvation: per step the host's data wait and the GPU
idle time while it waited, and GPU idle gaps split by what the host was doing (the stall
attribution of traceq.engine.stall_attribution, whose SQL states the definitions), with
advice when data wait exceeds 5 % of step time (the TensorBoard profiler's rule).
"""
from __future__ import annotations

from ..advice.stall_advice import DATA_WAIT_ADVICE_PCT, advice, largest_idle_label, ledger_top
from ..engine.findings import fix_first_line, findings_of_ranks, rank_advice, run_findings, stalls_of_ranks
from ..engine.findings_cache import load as load_kept_findings
from ..engine.per_rank import map_ranks, mapped
from ..engine.scope import Scope
from ..engine.stall_attribution import Stalls, check_stalls_args, stalls_scoped
from .spec import EXECUTOR_PARAMS, STEPS_HINT, TABLE_ROWS, Analysis, Block, Column, Out, Param, Result, sql_columns


def _ms(ns) -> str:
    return f"{ns / 1e6:,.1f} ms"


def headline(res: Stalls, scope: Scope) -> str:
    """One line on data loading: the host's data-wait share of step time and the verdict,
    e.g. "DataLoader wait 41.3 % of step time (7 steps, mean step 52.1 ms) — data-bound"."""
    where = f"run {scope.run}{'' if scope.rank is None else f' rank {scope.rank}'}"
    st = res.steps
    pct = res.data_wait_pct()
    if pct is None:
        return f"{where}: no steps with a duration in scope"
    if set(st["step_source"]) == {"trace"} and not st["data_wait_ns"].sum():
        return (f"{where}: no ProfilerStep, timer BATCH or DataLoader regions, and no data loading seen "
                "(--data-pattern marks your own regions as data loading)")
    timer_only = set(st["step_source"]) == {"BATCH"}
    what, of, unit = ("IO", "BATCH time", "batch") if timer_only else (res.wait_words, "step time", "step")
    verdict = "data-bound" if pct > DATA_WAIT_ADVICE_PCT else "not data-bound"
    line = (f"{where}: {what} {pct:.1f} % of {of} ({st.height} {unit}{'es' if timer_only else 's'}, "
            f"mean {unit} {_ms(st['step_ns'].mean())}) — {verdict}")
    idle_wait = st["gpu_idle_waiting_ns"].drop_nulls()
    if len(idle_wait):
        line += f"; GPU idle while loading data {100 * idle_wait.sum() / st['step_ns'].sum():.1f} % of {of}"
    elif st.height:
        line += " (CPU-only: no GPU ops)"
    return line


def ledger_words(res: Stalls, scope: Scope, data_pattern: str | None) -> str | None:
    """The time ledger's GPU idle of the scope and its largest cause, the idle figure summary,
    overview, diagnose and steps print ("GPU idle 45.0 % of the step windows (...)"); None
    without windows."""
    from ..engine.ledger import ledger

    # the findings' facts carry the ledger's totals (a run mapped over its ranks: summed over
    # them), so the ledger is not computed again
    t = getattr(getattr(res, "facts", None), "ledger", None) or ledger(scope, data_pattern).totals()
    res.ledger = t
    w = t["window_ns"]
    if not w:
        return None
    top = largest_idle_label(t)
    words = f"GPU idle {100.0 * t['idle_ns'] / w:.1f} % of the step windows (the time ledger, traceq steps"
    if t[top + "_ns"]:
        words += f"; largest cause {top.replace('_', ' ')} {100.0 * t[top + '_ns'] / w:.1f} %"
    return words + ")"


def causes_headline(res: Stalls) -> str:
    """One line on GPU idle time: the time ledger's idle (ledger_words, when computed), then
    the share of the GPU span in gaps >= min gap, and the main cause of those gaps."""
    lead = res.ledger_words
    text = _gaps_headline(res)
    return f"{lead}; {text}" if lead and res.causes.height else text


def _gaps_headline(res: Stalls) -> str:
    c = res.causes
    if c.height == 0:
        return "no GPU ops in scope (CPU-only trace): GPU idle gaps not analysed"
    if res.gaps.height == 0:
        return f"no GPU idle gaps >= {res.min_gap_us:g} µs"
    top = c.sort("idle_ns", descending=True).row(0, named=True)
    text = (f"in {res.gaps.height:,} gaps >= {res.min_gap_us:g} µs: GPU idle {c['idle_pct'].sum():.1f} % of the GPU span ("
            f"{_ms(c['idle_ns'].sum())}); largest cause: "
            f"{top['cause'].replace('_', ' ')} ({top['share_pct']:.0f} % of that idle time)")
    lead = ledger_top(res.ledger)
    if lead and lead[0] == "warmup" and top["cause"] != "warmup":
        # the gaps' causes are the host's activity alone; the ledger tells one-off calls apart
        text += (f" — the gaps count one-off start-up calls as {top['cause'].replace('_', ' ')}; the ledger "
                 "separates them (warmup), and the advice follows it")
    return text


# ---------------------------------------------------------------- the command
def compute(scope: Scope, min_gap_us: float = 50.0, data_pattern: str | None = None, table: str = "both") -> Out:
    if mapped(scope):
        res, fs = _reduce(scope, min_gap_us, data_pattern)
    else:   # the findings' stall rules read this command's stalls (its --min-gap-us, --data-pattern)
        res = stalls_scoped(scope, min_gap_us, data_pattern)
        fs = run_findings(scope, res)
    df = res.steps if table == "both" else getattr(res, table)
    res.ledger_words = ledger_words(res, scope, res.data_pattern)
    return Out(df, fix_first_line(fs, headline(res, scope)), tables={"causes": res.causes} if table == "both" else {},
               notes=advice(res), value=res)


def view(res: Result) -> list[Block]:
    st, table, notes = res.value, res.params["table"], res.notes
    out = []
    if table in ("both", "steps"):
        shown = st.steps.drop("start_ns")
        if shown.height and shown["gpu_idle_ns"].null_count() == shown.height:
            shown = shown.drop("gpu_idle_ns", "gpu_idle_waiting_ns", "gpu_idle_waiting_pct")
        highlight = [i for i, p in enumerate(st.steps["data_wait_pct"]) if p is not None and p > DATA_WAIT_ADVICE_PCT]
        out.append(Block(shown, res.headline, highlight=highlight, notes=notes if table == "steps" else [],
                         drop_first=res.analysis.drop_first, max_rows=TABLE_ROWS, more=STEPS_HINT))
    if table in ("both", "causes"):
        if st.causes.height:
            out.append(Block(st.causes, causes_headline(st), notes=notes, drop_first=("gaps_main", "gaps")))
        else:   # CPU-only: say so instead of printing an empty table
            out.append(Block(lines=[causes_headline(st), *notes]))
    if table == "gaps":
        out.append(Block(st.gaps, causes_headline(st), notes=notes, max_rows=TABLE_ROWS,
                         more=", --min-gap-us N keeps the longer gaps"))
    if table == "launch":
        out.append(Block(st.launch, causes_headline(st)))
    return out


def _reduce(scope: Scope, min_gap_us: float, data_pattern: str | None):
    """(the run's Stalls, findings) of a run mapped over its ranks: causes from every rank's
    gaps and GPU span (stalls.sql); the findings' stall rules read these stalls (the
    command's minimum gap and data pattern)."""
    data_pattern = check_stalls_args(scope, min_gap_us, data_pattern)
    outs = map_ranks(scope, rank_advice, min_gap_us=min_gap_us, data_pattern=data_pattern)
    res = stalls_of_ranks(scope, outs, min_gap_us, data_pattern)
    key, fs = load_kept_findings(scope, res)
    if fs is None:
        fs = findings_of_ranks(scope, outs, key, res)   # sets res.facts
    else:   # the ranks' facts (and their ledger totals) without the findings
        from ..advice.run_facts import merge_facts

        res.facts = merge_facts([o["facts"] for o in outs])
    return res, fs


# ---------------------------------------------------------------- the report
def report_section(ctx) -> list:
    """Per step the data wait (chart and table), and the GPU idle gaps by cause."""
    from ..report import figures
    from ..report.html import table
    from ..report.many_ranks import many, ranks_of, step_boxes, summarise, worst
    from ..report.parts import Section, add, add_table

    sec = Section("stalls", ANALYSIS.report,
                  intro="Per step: the time the host spent waiting for data (DataLoader, timer IO or data regions) and the "
                        "rest of the step; "
                        "GPU idle gaps ≥ 50 µs attributed to what the host was doing (data_loading, communication, "
                        "synchronization, blocking_copy, memory_management, launch_overhead, host_compute, "
                        "unattributed).")
    with ctx.guard(sec, "stalls"):
        st = stalls_scoped(ctx.scope)
        ctx.results["stalls"] = st
        sec.headline = headline(st, ctx.scope)
        st.ledger_words = ledger_words(st, ctx.scope, st.data_pattern)   # the advice follows the ledger
        summarised = many(ranks_of(st.steps))
        if summarised:
            bad = worst(st.steps, ("data_wait_ns", "gpu_idle_ns", "step_ns"))["rank"].to_list()
            add(sec, step_boxes(st.steps, "data_wait_ns", "Data wait per step (distribution over the ranks; lines: "
                                "the worst ranks)", worst_ranks=bad), "stalls")
        else:
            add(sec, figures.stall_chart(st.steps), "stalls")
        sec.advice = list(advice(st))
        cols = [c for c in ("rank", "step", "step_source", "step_ns", "data_wait_ns", "data_wait_pct", "gpu_idle_ns",
                            "gpu_idle_waiting_ns", "gpu_idle_waiting_pct") if c in st.steps.columns]
        steps_df = st.steps.select(cols)
        if steps_df.height and "gpu_idle_ns" in steps_df.columns and steps_df["gpu_idle_ns"].null_count() == steps_df.height:
            steps_df = steps_df.drop([c for c in ("gpu_idle_ns", "gpu_idle_waiting_ns", "gpu_idle_waiting_pct")
                                      if c in steps_df.columns])
        if summarised:
            by = ("gpu_idle_waiting_ns", "data_wait_ns", "gpu_idle_ns", "step_ns")
            summarise(sec, steps_df, by, "traceq stalls --table steps -f csv", "stall-steps", what="Per step",
                      rows="step")
        else:
            add_table(sec, table(steps_df, caption="Per step", max_rows=60), "stall-steps")
        if st.causes.height:
            add_table(sec, table(st.causes, caption="GPU idle gaps by cause"), "stall-causes")
    return [sec]


ANALYSIS = Analysis(
    name="stalls",
    help="Data-loading stalls and other GPU starvation.\n\n"
         "GPU idle gaps of at least --min-gap-us are split by what the host was doing, in precedence order: "
         "data_loading (DataLoader spans, timer IO regions, --data-pattern regions), communication (host in "
         "collectives), synchronization (cuda*Synchronize, .item()), blocking_copy (synchronous or pageable "
         "copies), memory_management (cudaMalloc/cudaFree/hipFree/...), launch_overhead (launching thread in "
         "other CUDA API calls), host_compute (CPU ops with no CUDA call), unattributed. "
         "--table launch: launch statistics per rank. Per step: host time waiting for data, GPU "
         "idle while waiting, and their share of the step, with advice when data wait exceeds 5 % of step "
         "time. Steps are ProfilerSteps, else timer BATCH regions, else the iterations between DataLoader "
         "calls. CPU-only traces still get the per-step data-wait share.",
    examples=("traceq stalls", "traceq stalls --min-gap-us 200 --data-pattern 'decode|augment'",
              "traceq stalls --table steps --format csv -o steps.csv"),
    compute=compute,
    params=(Param("min_gap_us", float, 50.0, "Smallest GPU idle gap to count, µs.", "US"),
            Param("data_pattern", str, None, "Regex: regions whose name matches also count as data loading "
                  "(e.g. 'load|decode').", "REGEX"),
            Param("table", str, "both", "Which table: both (steps, and causes as a second table), causes, "
                  "steps, gaps (every gap) or launch (launch statistics per rank).", "both|causes|steps|gaps|launch",
                  choices=("both", "causes", "steps", "gaps", "launch")), *EXECUTOR_PARAMS),
    per_rank=True,
    columns=sql_columns("stalls_steps", Column("gpu_idle_waiting_pct", "100 · gpu_idle_waiting_ns / step_ns, %")),
    sort=("rank", "step"),
    drop_first=("gpu_idle_ns", "step_source", "gpu_idle_waiting_ns"),
    tables=(("causes", sql_columns("stalls")),),
    view=view,
    report="Data-loading stalls and GPU starvation",
    report_section=report_section,
    order=50,
)
