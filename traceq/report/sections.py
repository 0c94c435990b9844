"""What the report shows for one run, and for a pair of runs: runs the analyses (through their
Python API, on one shared scope per run) and turns their tables into plots and HTML tables.

An analysis module that is not installed (traceq.analysis.<name> missing) simply leaves its
section out. An analysis that fails keeps the rest of the report: its section shows the error
and the caller gets a warning (TRACEQ_DEBUG=1 re-raises instead).
"""
from __future__ import annotations

import importlib
import importlib.util
import json
import os
from dataclasses import dataclass, field
from pathlib import PurePath

import polars as pl

from . import figures
from .html import Plot, Table, plot, table

HOTSPOT_ROWS = 40
REGION_ROWS = 30
DIFF_ROWS = 30


@dataclass
class Section:
    id: str
    title: str
    intro: str | None = None
    headline: str | None = None
    plots: list[Plot] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass
class Card:
    label: str
    value: str
    hint: str = ""
    bad: bool = False


@dataclass
class RunPart:
    run: str
    anchor: str
    facts: list[tuple[str, str]]
    cards: list[Card]
    ranks: Table | None
    sections: list[Section]


def analysis(name: str):
    """traceq.analysis.<name>, or None when this traceq has no such module."""
    mod = f"traceq.analysis.{name}"
    if importlib.util.find_spec(mod) is None:
        return None
    return importlib.import_module(mod)


class _Guard:
    """Run one analysis; on failure record the error in the section and a warning."""

    def __init__(self, section: Section, warnings: list[str], what: str):
        self.section, self.warnings, self.what = section, warnings, what

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is None or not isinstance(exc, Exception):
            return False
        if os.environ.get("TRACEQ_DEBUG") == "1":
            return False
        msg = f"{self.what} failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        self.section.error = msg
        self.warnings.append(msg)
        return True


def _ms(ns) -> str:
    if ns is None:
        return "—"
    return f"{ns / 1e6:,.1f} ms" if abs(ns) >= 1e5 else f"{ns / 1e3:,.1f} µs"


def _pct(v) -> str:
    return "—" if v is None else f"{v:.1f} %"


def _slug(text: str) -> str:
    """HTML id of a run's section: readable, and distinct for distinct names (`a b`, `a_b`)."""
    import hashlib
    import re

    readable = re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")[:60] or "x"
    return f"run-{readable}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


# ---------------------------------------------------------------- one run
def _fix_first(scope, res: dict, warnings: list[str]) -> Section:
    """The "Fix first" section: the run's verdict (all ranks pooled) and its evidence-gated
    findings ranked by estimated gain per step (traceq diagnose)."""
    from ..advice import evidence_for, findings
    from ..advice.base import floor_words
    from ..analysis.diagnose import bound_words, truncation, verdict

    sec = Section("fix", "Fix first",
                  intro="What bounds this run (largest share of the GPU span: GPU busy, or the stall cause of the "
                        "idle gaps) and the findings whose evidence is in the trace, largest estimated gain per step "
                        "first (traceq diagnose, per rank).")
    with _Guard(sec, warnings, f"run {scope.run}: diagnose"):
        st = res["stalls"]
        bound, share, evidence = verdict(st, truncation(scope))
        sec.headline = f"{bound_words(bound, share)} — {evidence}"
        ev = evidence_for(scope)
        fs = findings(scope, st, ev)
        sec.advice = [f"{f.id} — up to {f.gain()}: {f.advice}. Evidence: {f.evidence}" for f in fs]
        if not fs:
            sec.notes.append(f"No finding above the floor ({floor_words(ev.stepped)}).")
    return sec


def run_part(store, run: str, warnings: list[str]) -> RunPart:
    from ..analysis.scope import open_scope
    from . import timeline

    scope = open_scope(store, run)
    manifest = scope.df("SELECT * FROM runs WHERE run = $run ORDER BY rank")
    res: dict = {}
    sections: list[Section] = []

    # --- timeline (always)
    sec = Section("timeline", "GPU timeline",
                  intro="GPU kernels, copies and memsets per rank, device and stream, with the host's ProfilerSteps "
                        "and DataLoader calls above them. Down-sampled: ops shorter than one pixel bucket "
                        "(1/1500 of the rank's span) are merged per stream and category (lighter bars; hover for counts). "
                        "Drag to zoom, double-click to reset.")
    with _Guard(sec, warnings, f"run {run}: timeline"):
        tl = timeline.segments(scope)
        _add(sec, timeline.figure(tl), "timeline")
        if sec.plots:
            merged = int(tl.segments.filter(~pl.col("exact"))["n"].sum()) if tl.segments.height else 0
            sec.notes.append(f"{tl.n_ops:,} ops and spans drawn as {tl.segments.height:,} bars "
                             f"({merged:,} short ops merged; {tl.buckets:,} buckets per rank span).")
        else:
            sec.notes.append("No GPU ops, ProfilerSteps or DataLoader spans in this run.")
    sections.append(sec)

    # --- summary + categories (GPU time)
    sec = Section("gpu", "Where GPU time goes",
                  intro="GPU op time per kernel category (avoidable categories outlined in red) and, per rank, the "
                        "split of the GPU span into compute, non-compute (communication, copies, memsets) and idle.")
    hot_mod, sum_mod = analysis("hotspots"), analysis("summary")
    if hot_mod:
        with _Guard(sec, warnings, f"run {run}: hotspots"):
            res["hot"] = hot_mod.hotspots_scoped(scope)
            _add(sec, figures.category_bars(res["hot"]), "categories")
    if sum_mod:
        with _Guard(sec, warnings, f"run {run}: summary"):
            res["summary"] = sum_mod.summary_scoped(scope)
            sec.headline = sum_mod.headline(res["summary"], scope)
            _add(sec, figures.rank_breakdown(res["summary"]), "summary")
    if not sec.plots and not sec.error and not sec.headline:
        from ..analysis.diagnose import no_gpu_reason

        sec.notes.append(f"No GPU kernels, copies or memsets in this run ({no_gpu_reason(scope)}).")
    if hot_mod or sum_mod:
        sections.append(sec)

    # --- hotspots table
    if hot_mod and res.get("hot") is not None:
        sec = Section("hotspots", "Kernel hotspots",
                      intro="Per kernel / copy / memset name (nsys cuda_gpu_kern_sum semantics): count, total and "
                            "per-op statistics, share of all GPU op time. Avoidable work is highlighted with what to do.")
        hot = res["hot"]
        sec.headline = hot_mod.headline(hot, scope)
        if hot.height:
            shown = hot.head(HOTSPOT_ROWS)
            # the advice column shows what kind of avoidable work it is; the full advice is its tooltip
            # and is listed above the table
            shown = shown.with_columns(pl.col("advice").alias("_advice"),
                                       pl.col("advice").str.split(":").list.first().alias("advice"))
            cols = [c for c in ("name", "category", "kind", "count", "total_ns", "pct", "mean_ns", "median_ns",
                                "max_ns", "ranks", "advice") if c in shown.columns]
            t = table(shown.select(cols), max_rows=HOTSPOT_ROWS, titles={"advice": shown["_advice"].to_list()},
                      row_classes=["avoidable" if a else "" for a in shown["avoidable"]])
            t.kind = "hotspots"
            sec.tables.append(t)
            if hot.height > HOTSPOT_ROWS:
                sec.notes.append(f"Top {HOTSPOT_ROWS} of {hot.height:,} names by total time "
                                 "(traceq hotspots --top 0 lists all).")
            adv = (hot.filter(pl.col("avoidable")).group_by("advice")
                   .agg(pl.col("total_ns").sum(), pl.col("category").first(), pl.len().alias("names"))
                   .sort("total_ns", descending=True))
            total = hot["total_ns"].sum() or 1
            sec.advice = [f"{r['category']} — {_ms(r['total_ns'])} ({100 * r['total_ns'] / total:.1f} % of GPU op time, "
                          f"{r['names']} kernel name{'s' if r['names'] != 1 else ''}): {r['advice']}"
                          for r in adv.iter_rows(named=True)]
        sections.append(sec)

    # --- regions (breakdown)
    bd_mod = analysis("breakdown")
    if bd_mod:
        sec = Section("regions", "Regions: CPU versus GPU time",
                      intro="Per region (NVTX range, record_function annotation, DataLoader call, timer key): CPU time "
                            "in the range, and the GPU work launched inside it — projected (first op start to last op "
                            "end) and busy (union of the ops), nsys nvtx_gpu_proj_sum semantics.")
        with _Guard(sec, warnings, f"run {run}: breakdown"):
            bd = bd_mod.breakdown_scoped(scope)
            res["breakdown"] = bd
            sec.headline = bd_mod.headline(bd, scope)
            chart = bd.filter(pl.col("source") != "step") if "source" in bd.columns else bd
            _add(sec, figures.region_bars(chart), "regions")
            cols = [c for c in ("source", "name", "ranks", "instances", "cpu_total_ns", "cpu_mean_ns", "gpu_ops",
                                "gpu_proj_ns", "gpu_busy_ns", "gpu_busy_per_cpu") if c in bd.columns]
            _add_table(sec, table(bd.select(cols), max_rows=REGION_ROWS), "regions")
            if bd.height > REGION_ROWS:
                sec.notes.append(f"Top {REGION_ROWS} of {bd.height:,} regions by CPU time.")
        sections.append(sec)

    # --- stalls
    st_mod = analysis("stalls")
    if st_mod:
        sec = Section("stalls", "Data-loading stalls and GPU starvation",
                      intro="Per step: the time the host spent waiting for data (DataLoader, timer IO or data regions) and the "
                            "rest of the step; "
                            "GPU idle gaps ≥ 50 µs attributed to what the host was doing (data_loading, communication, "
                            "synchronization, blocking_copy, memory_management, launch_overhead, host_compute, "
                            "unattributed).")
        with _Guard(sec, warnings, f"run {run}: stalls"):
            st = st_mod.stalls_scoped(scope)
            res["stalls"] = st
            sec.headline = st_mod.headline(st, scope)
            _add(sec, figures.stall_chart(st.steps), "stalls")
            sec.advice = list(st_mod.advice(st))
            cols = [c for c in ("rank", "step", "step_source", "step_ns", "data_wait_ns", "data_wait_pct", "gpu_idle_ns",
                                "gpu_idle_waiting_ns", "gpu_idle_waiting_pct") if c in st.steps.columns]
            steps_df = st.steps.select(cols)
            if steps_df.height and "gpu_idle_ns" in steps_df.columns and steps_df["gpu_idle_ns"].null_count() == steps_df.height:
                steps_df = steps_df.drop([c for c in ("gpu_idle_ns", "gpu_idle_waiting_ns", "gpu_idle_waiting_pct")
                                          if c in steps_df.columns])
            _add_table(sec, table(steps_df, caption="Per step", max_rows=60), "stall-steps")
            if st.causes.height:
                _add_table(sec, table(st.causes, caption="GPU idle gaps by cause"), "stall-causes")
        sections.append(sec)

    # --- overlap
    ov_mod = analysis("overlap")
    if ov_mod:
        sec = Section("overlap", "Communication / compute overlap",
                      intro="Communication kernel time hidden under compute kernels (overlapped) and not (exposed), "
                            "per step and rank; overlap % = 100 · overlapped / communication (HTA's definition).")
        with _Guard(sec, warnings, f"run {run}: overlap"):
            by_rank = ov_mod.overlap_scoped(scope, by="rank")
            # the step rows reuse the ops overlap_scoped just prepared on this connection
            by_step = (ov_mod.overlap_rows(scope, "step") if hasattr(ov_mod, "overlap_rows")
                       else ov_mod.overlap_scoped(scope, by="step"))
            res["overlap"] = by_rank
            across = ov_mod.across_ranks(by_rank, scope.con) if by_rank.height > 1 else None
            sec.headline = ov_mod.headline(by_rank, across, scope)
            _add(sec, figures.overlap_chart(by_step), "overlap")
            if by_rank.height:
                _add_table(sec, table(by_rank.drop("step", strict=False), caption="Per rank"), "overlap-ranks")
            if across is not None:
                _add_table(sec, table(across, caption="Across ranks"), "overlap-across")
            if by_rank.height == 0 or by_rank["comm_ns"].sum() == 0:
                sec.notes.append("No communication kernels in this run: nothing to overlap.")
        sections.append(sec)

    # --- across ranks (clocks, collectives, straggler)
    rk_mod = analysis("ranks")
    if rk_mod and manifest.height > 1:
        from .ranks_view import ranks_timeline

        sec = Section("ranks", "Across ranks: collectives, skew and stragglers",
                      intro="Every rank's collective kernels on one clock (trace base times, refined by aligning the "
                            "ends of matched collectives), one row per rank: a rank whose bars start late is the one "
                            "the others wait for. Per rank: lateness and waiting; per collective type: arrival skew "
                            "and bus bandwidth (traceq ranks).")
        with _Guard(sec, warnings, f"run {run}: ranks"):
            rr = rk_mod.ranks(store, run)
            sec.headline = rk_mod.headline(rr)
            _add(sec, ranks_timeline(rr.arrivals, rr.straggler["rank"]), "ranks")
            _add_table(sec, table(rr.ranks.drop("raw_offset_ns"), caption="Per rank"), "ranks-table")
            _add_table(sec, table(rr.collectives, caption="Per collective type"), "collectives")
        sections.append(sec)

    if res.get("stalls") is not None:
        sections.insert(0, _fix_first(scope, res, warnings))
    cards, rank_table = _headline(scope, manifest, res)
    return RunPart(run, _slug(run), _facts(manifest), cards, rank_table, sections)


def _add(sec: Section, fig, kind: str) -> None:
    p = plot(fig)
    if p is not None:
        p.kind = kind
        sec.plots.append(p)


def _add_table(sec: Section, t: Table | None, kind: str) -> None:
    if t is not None:
        t.kind = kind
        sec.tables.append(t)


def count_devices(rows: list[dict]) -> dict[str, int]:
    """Distinct devices per name. Every rank of a node may list all the node's GPUs (Kineto's
    deviceProperties, nsys TARGET_INFO_GPU), so a device is counted once per (host, uuid or id);
    one without an id counts once for its rank."""
    seen: set = set()
    devices: dict[str, int] = {}
    for r in rows:
        for i, d in enumerate(json.loads(r.get("devices") or "[]")):
            if not d.get("name"):
                continue
            ident = d.get("uuid") or d.get("id")
            key = (r.get("host"), ident) if ident is not None else (r.get("host"), "rank", r.get("rank"), i)
            if key not in seen:
                seen.add(key)
                devices[d["name"]] = devices.get(d["name"], 0) + 1
    return devices


def _facts(manifest: pl.DataFrame) -> list[tuple[str, str]]:
    """What the store knows about the run that is safe to show: no paths beyond the file
    name, no environment (the store keeps none)."""
    rows = manifest.to_dicts()
    devices = count_devices(rows)
    labels: dict[str, str] = {}
    for r in rows:
        labels.update(json.loads(r.get("labels") or "{}"))
    facts = [("ranks", ", ".join(str(r["rank"]) for r in rows)),
             ("world size", ", ".join(sorted({str(r["world_size"]) for r in rows if r.get("world_size")})) or "—"),
             ("source", ", ".join(sorted({f"{r['source_format']} {r['format_version'] or ''}".strip() for r in rows}))),
             ("files", ", ".join(PurePath(r["source_path"] or "").name for r in rows[:8]) + (" …" if len(rows) > 8 else "")),
             ("devices", ", ".join(f"{n}× {name}" if n > 1 else name for name, n in devices.items()) or "—"),
             ("GPU ops / host ops / regions", f"{sum(r['n_gpu_ops'] or 0 for r in rows):,} / "
                                              f"{sum(r['n_host_ops'] or 0 for r in rows):,} / {sum(r['n_regions'] or 0 for r in rows):,}")]
    if labels:
        facts.append(("labels", ", ".join(f"{k}={v}" for k, v in sorted(labels.items()))))
    warns = [w for r in rows for w in json.loads(r.get("warnings") or "[]")]
    if warns:
        facts.append(("ingest warnings", "; ".join(dict.fromkeys(warns))))
    return facts


def _headline(scope, manifest: pl.DataFrame, res: dict) -> tuple[list[Card], Table | None]:
    """Cards for the run (step time, GPU idle %, exposed comm, data wait %) and a per-rank table."""
    ranks = pl.DataFrame({"rank": manifest["rank"].cast(pl.Int64)})
    st = res.get("stalls")
    summ = res.get("summary")
    ov = res.get("overlap")
    cards: list[Card] = []

    if st is not None and st.steps.height:
        steps = st.steps
        per = steps.group_by("rank").agg(pl.len().alias("steps"), pl.col("step_ns").mean().alias("step_mean_ns"),
                                         pl.col("data_wait_ns").sum(), pl.col("step_ns").sum().alias("_step_sum"))
        per = per.with_columns((100 * pl.col("data_wait_ns") / pl.col("_step_sum")).alias("data_wait_pct")).drop(
            "data_wait_ns", "_step_sum").with_columns(pl.col("rank").cast(pl.Int64))
        ranks = ranks.join(per, on="rank", how="left")
        src = sorted(set(steps["step_source"]))
        what = {"ProfilerStep": "ProfilerSteps", "BATCH": "timer BATCH regions", "DataLoader": "DataLoader iterations",
                "trace": "whole trace"}
        cards.append(Card("step time (mean)", _ms(steps["step_ns"].mean()),
                          f"{steps.height} {' + '.join(what.get(s, s) for s in src)}"
                          + (f", slowest rank {per.sort('step_mean_ns', descending=True)['rank'][0]}" if per.height > 1 else "")))
        pct = st.data_wait_pct()
        waiting = "on the DataLoader" if st.pytorch else "for data (timer IO or data regions)"
        cards.append(Card("data wait", _pct(pct), f"host waiting {waiting}, share of step time (> 5 % = data-bound)",
                          bad=pct is not None and pct > 5))
    if summ is not None and summ.height:
        span = summ["span_ns"].sum()
        idle = 100 * summ["idle_ns"].sum() / span if span else None
        comp = 100 * summ["compute_ns"].sum() / span if span else None
        ranks = ranks.join(summ.select("rank", "span_ns", "idle_pct", "compute_pct", "non_compute_pct")
                           .with_columns(pl.col("rank").cast(pl.Int64)), on="rank", how="left")
        where = (f"of the GPU span ({_ms(span)})" if summ.height == 1
                 else f"of the GPU spans summed over {summ.height} ranks")
        cards.append(Card("GPU idle", _pct(idle), f"{where}; compute {_pct(comp)}", bad=idle is not None and idle > 20))
    elif summ is not None:
        cards.append(Card("GPU idle", "—", "no GPU kernels, copies or memsets in this run"))
    if ov is not None and ov.height:
        comm = ov.filter(pl.col("comm_ns") > 0)
        ranks = ranks.join(ov.select("rank", "comm_ns", "overlap_pct", "exposed_ns", "exposed_step_pct")
                           .with_columns(pl.col("rank").cast(pl.Int64)), on="rank", how="left")
        if comm.height:
            n_steps = max(int(comm["steps"].max() or 0), 1)
            exposed = comm["exposed_ns"].sum() / comm.height
            with_steps = comm.filter(pl.col("step_ns") > 0)
            ex_pct = ((with_steps["exposed_step_pct"] * with_steps["step_ns"]).sum() / with_steps["step_ns"].sum()
                      if with_steps.height else None)
            over = 100 * comm["overlapped_ns"].sum() / comm["comm_ns"].sum()
            cards.append(Card("exposed comm", _ms(exposed / n_steps) + " / step" if comm["steps"].max() else _ms(exposed),
                              (f"{_pct(ex_pct)} of step time; " if ex_pct is not None else "")
                              + f"{_pct(over)} of communication overlapped", bad=ex_pct is not None and ex_pct > 10))
        else:
            cards.append(Card("exposed comm", "—", "no communication kernels"))
    rank_cols = [c for c in ("rank", "steps", "step_mean_ns", "data_wait_pct", "span_ns", "idle_pct", "compute_pct",
                             "non_compute_pct", "comm_ns", "overlap_pct", "exposed_ns", "exposed_step_pct")
                 if c in ranks.columns]
    t = table(ranks.select(rank_cols), max_rows=1024) if len(rank_cols) > 1 else None
    if t is not None:
        t.kind = "ranks"
    return cards, t


# ---------------------------------------------------------------- two runs
def diff_part(store, run_a: str, run_b: str, warnings: list[str]) -> Section | None:
    mod = analysis("diff")
    if mod is None:
        return None
    from ..analysis.scope import open_scope

    sec = Section("diff", f"What changed: {run_a} → {run_b}",
                  intro=f"Run {run_b} compared with {run_a} (the baseline): GPU time per category and per kernel, "
                        "CPU time per region, and the headline numbers. Positive deltas: B takes longer.")
    with _Guard(sec, warnings, f"diff {run_a} → {run_b}"):
        a = open_scope(store, run_a)
        b = open_scope(a.store, run_b)
        d = mod.diff_scoped(a, b)
        sec.headline = mod.headline(d)
        h = d["headline"].row(0, named=True)
        rows = []
        for label, ka, kb, kind in (("GPU op time", "gpu_a_ns", "gpu_b_ns", "ns"), ("GPU idle", "idle_a_pct", "idle_b_pct", "pct"),
                                    ("compute", "compute_a_pct", "compute_b_pct", "pct"),
                                    ("comm overlap", "overlap_a_pct", "overlap_b_pct", "pct"),
                                    ("exposed comm", "exposed_a_ns", "exposed_b_ns", "ns"), ("GPU ops", "ops_a", "ops_b", "n")):
            va, vb = h.get(ka), h.get(kb)
            fmt = _ms if kind == "ns" else _pct if kind == "pct" else (lambda v: "—" if v is None else f"{v:,}")
            if va is None and vb is None:
                continue
            if va is None or vb is None:
                delta = "—"
            elif kind == "pct":
                delta = f"{vb - va:+.1f} pp"
            elif kind == "ns":
                delta = ("+" if vb >= va else "−") + _ms(abs(vb - va)) + (f" ({100 * (vb - va) / va:+.1f} %)" if va else "")
            else:
                delta = f"{vb - va:+,}"
            rows.append({"metric": label, run_a: fmt(va), run_b: fmt(vb), "change": delta})
        _add_table(sec, table(pl.DataFrame(rows), caption="Headline"), "diff-headline")
        _add(sec, figures.diff_category_bars(d["categories"], run_a, run_b), "diff-categories")
        _add_table(sec, table(d["categories"], caption="Per category"), "diff-categories")
        k = d["kernels"]
        if k.height:
            k = k.filter(pl.col("status") != "unchanged")
            _add_table(sec, table(k.head(DIFF_ROWS), caption=f"Kernels: the {min(DIFF_ROWS, k.height)} largest changes",
                                  widths={"name": 64},
                                  row_classes=["appeared" if s == "appeared" else "disappeared" if s == "disappeared" else ""
                                               for s in k.head(DIFF_ROWS)["status"]]), "diff-kernels")
            sec.notes.append(f"Kernels: red rows appeared in {run_b}, green rows disappeared from it; "
                             f"{k.height:,} kernel names changed in all (traceq diff {run_a} {run_b} lists them).")
        r = d["regions"]
        if r.height:
            _add_table(sec, table(r.head(DIFF_ROWS), caption="Regions (CPU time)"), "diff-regions")
    return sec



COMPARE_METRICS = ("step_time", "throughput", "data_wait", "communication")
COMPARE_CATEGORIES = 6


def comparison_part(store, runs: list[str], warnings: list[str]) -> Section | None:
    """Runs side by side (traceq compare): one bar chart per metric, mean ± sd over the
    repetitions of each configuration, and the comparison table."""
    from ..experiments.compare import compare

    sec = Section("compare", "Comparison of " + ", ".join(runs),
                  intro="Per-run metrics side by side (traceq compare): runs whose labels differ only in rep are "
                        "pooled as repetitions; bars show the mean, whiskers ± one sd; change against the first.")
    with _Guard(sec, warnings, "compare"):
        df = compare(store, runs)
        present = df["metric"].unique().to_list()
        cats = (df.filter(pl.col("metric").str.starts_with("gpu.")).group_by("metric").agg(pl.col("mean").max())
                .sort("mean", descending=True).head(COMPARE_CATEGORIES)["metric"].to_list())
        for metric in [m for m in COMPARE_METRICS if m in present] + cats:
            _add(sec, figures.metric_bars(df, metric), f"compare-{metric}")
        _add_table(sec, table(df, caption="Metrics per configuration (s, items/s)", max_rows=200), "compare")
    return sec
