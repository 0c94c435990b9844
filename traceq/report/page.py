"""`traceq report`: one self-contained HTML file per store selection.

    build_report(store, runs=None, out_path="report.html", title=None) -> ReportResult

The page holds, per run: the facts the store has (ranks, devices, labels, file names — never
paths or environment), headline numbers per run and rank (step time, GPU idle %, exposed
communication, data wait %), a down-sampled GPU timeline (traceq/report/timeline.py), then
the report section of every analysis that declares one (`Analysis.report_section`, in the
registry's report order); with exactly two runs, the sections of the analyses of two runs
(diff); with two or more, those of the analyses of many runs (compare).

Self-contained: plotly.js is inlined once, each figure is JSON drawn by `Plotly.newPlot`, CSS is
inline; nothing is fetched at view time (no CDN, fonts or images). This module assembles the
page; what a section shows is the analysis module's business.
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path, PurePath

from ..lazy import polars as pl
from .html import Table, table
from ..advice.base import WORST_RANK_FACTOR
from .many_ranks import chosen_ranks, chosen_words, many
from .parts import Card, RunPart, RunReport, Section, add, ms, pct, slug


@dataclass
class ReportResult:
    path: Path
    bytes: int
    runs: list[str]
    seconds: float
    warnings: list[str] = field(default_factory=list)
    sections: list[str] = field(default_factory=list)   # "run/section" ids rendered


def resolve_runs(store, runs: list[str] | None) -> list[str]:
    """The runs asked for (checked to exist), or the most recently ingested one."""
    from ..engine.scope import resolve_run
    from ..errors import TraceqError
    from ..store import Store

    st = store if isinstance(store, Store) else Store(store)
    if not st.exists():
        raise TraceqError(f"no traceq store at {st.path}: ingest a trace first (traceq ingest FILE), "
                          "or point --store / TRACEQ_STORE at one")
    con = st.connect()
    if not runs:
        return [resolve_run(con, None, st)]
    out = []
    for r in runs:
        name = resolve_run(con, r, st)
        if name not in out:
            out.append(name)
    return out


def build_report(store=None, runs: list[str] | None = None, out_path: str | Path = "report.html",
                 title: str | None = None) -> ReportResult:
    """Write the HTML report of `runs` (default: the most recent run) to `out_path`, atomically."""
    from ..version import __version__
    from ..errors import TraceqError
    from ..store import Store
    from .html import render_page

    t0 = time.perf_counter()
    st = store if isinstance(store, Store) else Store(store)
    names = resolve_runs(st, runs)
    warnings: list[str] = []
    parts = [run_part(st, r, warnings) for r in names]
    diff = _one(many_runs_sections(st, names, warnings, pair=True))
    comparison = _one(many_runs_sections(st, names, warnings, pair=False))
    title = title or ("traceq report: " + (" vs ".join(names) if len(names) <= 3 else f"{len(names)} runs"))
    page = render_page({
        "title": title,
        "runs": parts,
        "diff": diff,
        "comparison": comparison,
        "version": __version__,
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    })
    out = Path(out_path)
    data = page.encode("utf-8")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except OSError as exc:
        raise TraceqError(f"cannot write report ({exc.strerror or exc})", out) from None
    sections = [f"{p.run}/{s.id}" for p in parts for s in p.sections]
    if diff is not None:
        sections.append("diff")
    if comparison is not None:
        sections.append("compare")
    return ReportResult(out, len(data), names, time.perf_counter() - t0, warnings, sections)


# ---------------------------------------------------------------- one run
def run_part(store, run: str, warnings: list[str]) -> RunPart:
    """One run's part of the page: its facts, headline cards, rank table and the report
    sections of every analysis that has one, in the registry's report order (a section
    marked `lead`, the verdict, goes first)."""
    from ..analyses.registry import REGISTRY
    from ..engine.scope import open_scope

    scope = open_scope(store, run)
    manifest = scope.df("SELECT * FROM runs WHERE run = $run ORDER BY rank")
    ctx = RunReport(store, run, scope, manifest, warnings)
    summarised = many(manifest.height)
    if summarised:   # the straggler first: the timelines draw it (report/many_ranks.py)
        _ranks_first(ctx)
    sections = [] if summarised else [_timeline(ctx)]
    for spec in sorted(REGISTRY.values(), key=_report_order):
        if spec.report_section is not None and spec.runs == 1 and spec.scope != "store":
            sections += spec.report_section(ctx)
    if summarised:   # drawn last, for the ranks the sections found, and placed first
        sections.insert(0, _timeline(ctx))
    sections.sort(key=lambda s: not s.lead)
    cards, rank_table, more, note = _headline(scope, manifest, ctx.results)
    return RunPart(run, slug(run), _facts(manifest), cards, rank_table, sections, more, note)


def _ranks_first(ctx: RunReport) -> None:
    """traceq ranks' result (the straggler) for the ranks the timelines of a many-rank run draw;
    its section reuses it. A failure is left to that section to report."""
    from ..analyses.ranks import ranks

    try:
        ctx.results["ranks"] = ranks(ctx.store, ctx.run)
    except Exception:        # noqa: BLE001 - the ranks section shows the error
        pass


@dataclass
class RunsReport:
    """What the report section of an analysis of several runs gets (diff: exactly two, compare:
    two or more)."""
    store: object
    runs: list[str]
    warnings: list


def many_runs_sections(store, runs: list[str], warnings: list[str], pair: bool) -> list[Section]:
    """The sections of the analyses of two runs (`pair`: diff, when exactly two are reported)
    or of the store's runs (compare, when two or more are)."""
    from ..analyses.registry import REGISTRY

    out: list[Section] = []
    for spec in sorted(REGISTRY.values(), key=_report_order):
        if spec.report_section is None:
            continue
        if pair and spec.runs == 2 and len(runs) == 2:
            out += spec.report_section(RunsReport(store, runs, warnings))
        elif not pair and spec.scope == "store" and len(runs) >= 2:
            out += spec.report_section(RunsReport(store, runs, warnings))
    return out


def _one(sections: list[Section]) -> Section | None:
    return sections[0] if sections else None


def _report_order(spec) -> tuple:
    return (spec.order if spec.report_order is None else spec.report_order, spec.name)


def _timeline(ctx: RunReport) -> Section:
    """The GPU timeline of the run: a figure of the page itself, not of an analysis."""
    from . import timeline

    sec = Section("timeline", "GPU timeline",
                  intro="GPU kernels, copies and memsets per rank, device and stream, with the host's ProfilerSteps "
                        "and DataLoader calls above them. Down-sampled: ops shorter than one pixel bucket "
                        "(1/1500 of the rank's span) are merged per stream and category (lighter bars; hover for counts). "
                        "Drag to zoom, double-click to reset.")
    with ctx.guard(sec, "timeline"):
        chosen = chosen_ranks(ctx) if many(ctx.manifest.height) else None
        tl = timeline.segments(ctx.scope, ranks=[r for r, _ in chosen] if chosen is not None else None)
        add(sec, timeline.figure(tl), "timeline")
        if chosen is not None:
            sec.notes.append(f"Summarised: {chosen_words(chosen, ctx.manifest.height)} Every rank: "
                             "`traceq export` writes the whole run as a Perfetto trace.")
        if sec.plots:
            merged = int(tl.segments.filter(~pl.col("exact"))["n"].sum()) if tl.segments.height else 0
            sec.notes.append(f"{tl.n_ops:,} ops and spans drawn as {tl.segments.height:,} bars "
                             f"({merged:,} short ops merged; {tl.buckets:,} buckets per rank span).")
        else:
            sec.notes.append("No GPU ops, ProfilerSteps or DataLoader spans in this run.")
    return sec


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


def _headline(scope, manifest: pl.DataFrame,
              res: dict) -> tuple[list[Card], Table | None, list[Table], str | None]:
    """Cards for the run (step time, GPU idle %, exposed comm, data wait %, MFU) and a per-rank
    table; for a run of many ranks its quantiles, the worst ranks and the note saying so."""
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
        cards.append(Card("step time (mean)", ms(steps["step_ns"].mean()),
                          f"{steps.height} {' + '.join(what.get(s, s) for s in src)}"
                          + (f", slowest rank {per.sort('step_mean_ns', descending=True)['rank'][0]}" if per.height > 1 else "")))
        wait = st.data_wait_pct()
        waiting = "on the DataLoader" if st.pytorch else "for data (timer IO or data regions)"
        cards.append(Card("data wait", pct(wait), f"host waiting {waiting}, share of step time (> 5 % = data-bound)",
                          bad=wait is not None and wait > 5))
    if summ is not None and summ.height:
        span = summ["span_ns"].sum()
        idle = 100 * summ["idle_ns"].sum() / span if span else None
        comp = 100 * summ["compute_ns"].sum() / span if span else None
        ranks = ranks.join(summ.select("rank", "span_ns", "idle_pct", "compute_pct", "non_compute_pct")
                           .with_columns(pl.col("rank").cast(pl.Int64)), on="rank", how="left")
        # summary's default window is the time ledger's: span = the step windows
        where = (f"of the step windows ({ms(span)}, the time ledger)" if summ.height == 1
                 else f"of the step windows summed over {summ.height} ranks (the time ledger)")
        worst = ""
        if summ.height > 1 and summ["idle_pct"].drop_nulls().len():
            w = summ.sort(["idle_pct", "rank"], descending=[True, False], nulls_last=True).row(0, named=True)
            worst = f"; most idle: rank {w['rank']} {pct(w['idle_pct'])}"
        cards.append(Card("GPU idle", pct(idle), f"{where}; compute {pct(comp)}{worst}",
                          bad=idle is not None and idle > 20))
    elif summ is not None:
        cards.append(Card("GPU idle", "—", "no GPU kernels, copies or memsets in this run"))
    if ov is not None and ov.height:
        comm = ov.filter(pl.col("comm_ns") > 0)
        ranks = ranks.join(ov.select("rank", "comm_ns", "overlap_pct", "exposed_ns", "exposed_step_pct")
                           .with_columns(pl.col("rank").cast(pl.Int64)), on="rank", how="left")
        if comm.height:
            # per rank its exposed time per step (the whole capture's when it has no steps),
            # the card the mean over the ranks with communication, and the worst rank beside it
            per = comm.with_columns((pl.col("exposed_ns") / pl.col("steps").clip(1)).alias("_per"))
            per_step = float(per["_per"].mean())
            w = per.sort(["_per", "rank"], descending=[True, False]).row(0, named=True)
            worst = (f"; {ms(w['_per'])} on rank {w['rank']}"
                     if comm.height > 1 and w["_per"] > WORST_RANK_FACTOR * per_step else "")
            with_steps = comm.filter(pl.col("step_ns") > 0)
            ex_pct = ((with_steps["exposed_step_pct"] * with_steps["step_ns"]).sum() / with_steps["step_ns"].sum()
                      if with_steps.height else None)
            over = 100 * comm["overlapped_ns"].sum() / comm["comm_ns"].sum()
            mean = " (mean of ranks)" if comm.height > 1 else ""
            cards.append(Card("exposed comm", ms(per_step) + " / step" if comm["steps"].max() else ms(per_step),
                              (f"{pct(ex_pct)} of step time{mean}{worst}; " if ex_pct is not None else
                               (f"{mean.strip()}{worst}; " if mean else ""))
                              + f"{pct(over)} of communication overlapped", bad=ex_pct is not None and ex_pct > 10))
        else:
            cards.append(Card("exposed comm", "—", "no communication kernels"))
    rl = res.get("roofline")
    if rl is not None and rl[1].mfu_pct is not None:
        eff = rl[1]
        cards.append(Card("MFU", pct(eff.mfu_pct), f"modelled FLOPs / (GPU span × {eff.peak_tflops:,.0f} TFLOP/s "
                                                    f"{eff.peak_dtype}); the model covers {pct(eff.modelled_pct)} of GPU time"))
    rank_cols = [c for c in ("rank", "steps", "step_mean_ns", "data_wait_pct", "span_ns", "idle_pct", "compute_pct",
                             "non_compute_pct", "comm_ns", "overlap_pct", "exposed_ns", "exposed_step_pct")
                 if c in ranks.columns]
    t = table(ranks.select(rank_cols), max_rows=1024) if len(rank_cols) > 1 and not many(ranks.height) else None
    if t is not None:
        t.kind = "ranks"
    elif len(rank_cols) > 1 and ranks.height:
        return (cards, *_rank_summary(ranks.select(rank_cols)))
    return cards, t, [], None


def _rank_summary(ranks: pl.DataFrame) -> tuple[Table | None, list[Table], str | None]:
    """The headline per rank of a many-rank run: quantiles, the worst ranks by mean step time
    (else, when it is the same on every rank, GPU idle %, else exposed communication) and the
    note saying so."""
    from .many_ranks import WORST_RANKS, key_metric, note, quantile_table, words, worst_table

    n = ranks.height
    q = quantile_table(ranks, f"Per rank: quantiles over {n} ranks")
    by = key_metric(ranks, ("step_mean_ns", "idle_pct", "exposed_ns"))
    w = worst_table(ranks, by, f"Per rank: the {min(WORST_RANKS, n)} worst ranks by highest {words(by)}") if by else None
    if q is None:
        return None, [], None
    q.kind = "ranks-quantiles"
    if w is not None:
        w.kind = "ranks-worst"
    return q, [w] if w is not None else [], note(n, "traceq summary -f csv` and `traceq overlap -f csv")
