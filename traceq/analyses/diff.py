"""What changed from run A to run B: GPU time per kernel category and per kernel name (count,
total in A and B, delta, appeared / disappeared / changed / unchanged), CPU time per region
name, and the summary/overlap headline numbers of both runs side by side.

SQL: traceq/queries/diff_side.sql aggregates one run (each side in its own scope), diff.sql
compares the two. `diff_scoped` returns {"categories", "kernels", "regions", "headline"}
(the last one row), which the CLI prints one after another and JSON as one object.
"""
from __future__ import annotations

from ..engine.scope import Scope, open_scope
from ..lazy import polars as pl
from ..queries import run_script
from ..store import fetch_pl, register_pl
from ..threads import ordered_map
from .spec import Analysis, Block, Out, Param, Result, cols, run_labels, top_param
from .summary import prepare_ops

TABLES = ("categories", "kernels", "regions")


def _steps(scope: Scope) -> dict:
    """The side's steps (stalls_steps.sql, as `stalls` finds them): how many, the mean step
    time (per step number, the slowest rank's duration; mean over steps) and the mean host
    data wait per step and rank. No step facts when the only "step" is the whole trace."""
    from ..engine.stall_attribution import data_steps

    steps = data_steps(scope)
    if not steps.height or set(steps["step_source"]) == {"trace"}:
        return {"steps": 0, "step_rows": 0, "step_ns": None, "data_wait_ns": None}
    per_step = steps.group_by("step").agg(pl.col("step_ns").max())
    return {"steps": per_step.height, "step_rows": steps.height,
            "step_ns": round(per_step["step_ns"].mean()),
            "data_wait_ns": round(steps["data_wait_ns"].fill_null(0).mean())}


def _throughput(scope: Scope, step_ns) -> tuple[float | None, str | None]:
    """Items/s from the run's batch label (batch, b, bs, batch_size) and its step time."""
    from ..experiments.metrics import BATCH_LABELS

    if not step_ns:
        return None, None
    labels = run_labels(scope)
    batch = next((labels[k] for k in BATCH_LABELS if labels.get(k)), None)
    try:
        return float(batch) / (step_ns / 1e9), "items/s"
    except (TypeError, ValueError):
        return None, None


def _side(scope: Scope) -> tuple[dict[str, pl.DataFrame], dict]:
    step_facts = _steps(scope)
    totals = run_script(scope.con, "diff_side", {"run": scope.run}).row(0, named=True)
    tables = {t: fetch_pl(scope.con, f"SELECT * FROM side_{t}") for t in TABLES}
    prepare_ops(scope, "all")   # one op table for both headline analyses
    s = run_script(scope.con, "summary")
    span = s["span_ns"].sum() if s.height else 0
    run_script(scope.con, "overlap_ops", {"run": scope.run})
    o = run_script(scope.con, "overlap", {"run": scope.run, "by": "rank"})
    comm = o["comm_ns"].sum() if o.height else 0
    totals.update(
        idle_pct=100 * s["idle_ns"].sum() / span if span else None,
        compute_pct=100 * s["compute_ns"].sum() / span if span else None,
        overlap_pct=100 * o["overlapped_ns"].sum() / comm if comm else None,
        exposed_ns=int(o["exposed_ns"].sum()) if comm else None,
        **step_facts,
    )
    totals["throughput"], totals["throughput_unit"] = _throughput(scope, totals["step_ns"])
    return tables, totals


def _sub(b, a):
    return None if a is None or b is None else b - a


def diff_scoped(a: Scope, b: Scope, top: int | None = None) -> dict[str, pl.DataFrame]:
    # the two sides on two threads: each scope has its own DuckDB database, and DuckDB and
    # polars release the GIL while they work
    (side_a, tot_a), (side_b, tot_b) = ordered_map(_side, (a, b), 2)
    # the comparison needs only the two sides' frames: a second connection to A's database
    # (its own temp objects and registrations; a new in-memory database costs ~13 ms)
    con = a.con.cursor()
    for prefix, side in (("a", side_a), ("b", side_b)):
        for t, df in side.items():
            register_pl(con, f"{prefix}_{t}", df)
    statuses = dict(run_script(con, "diff").iter_rows())
    out = {t: fetch_pl(con, f"SELECT * FROM diff_{t}") for t in TABLES}
    if top:
        out["kernels"] = out["kernels"].head(top)
        out["regions"] = out["regions"].head(top)
    gpu_a, gpu_b = tot_a["gpu_ns"], tot_b["gpu_ns"]
    step_a, step_b = tot_a["step_ns"], tot_b["step_ns"]
    head = {
        "run_a": a.run, "run_b": b.run, "ranks_a": tot_a["ranks"], "ranks_b": tot_b["ranks"],
        "steps_a": tot_a["steps"], "steps_b": tot_b["steps"],
        "step_a_ns": step_a, "step_b_ns": step_b,
        "step_delta_pct": 100 * (step_b - step_a) / step_a if step_a and step_b is not None else None,
        "data_wait_a_ns": tot_a["data_wait_ns"], "data_wait_b_ns": tot_b["data_wait_ns"],
        "throughput_a": tot_a["throughput"], "throughput_b": tot_b["throughput"],
        "throughput_unit": tot_a["throughput_unit"] or tot_b["throughput_unit"],
        "ops_a": tot_a["ops"], "ops_b": tot_b["ops"],
        "gpu_a_ns": gpu_a, "gpu_b_ns": gpu_b, "gpu_delta_ns": gpu_b - gpu_a,
        "gpu_delta_pct": 100 * (gpu_b - gpu_a) / gpu_a if gpu_a else None,
        "idle_a_pct": tot_a["idle_pct"], "idle_b_pct": tot_b["idle_pct"],
        "idle_delta_pct": _sub(tot_b["idle_pct"], tot_a["idle_pct"]),
        "compute_a_pct": tot_a["compute_pct"], "compute_b_pct": tot_b["compute_pct"],
        "compute_delta_pct": _sub(tot_b["compute_pct"], tot_a["compute_pct"]),
        "overlap_a_pct": tot_a["overlap_pct"], "overlap_b_pct": tot_b["overlap_pct"],
        "overlap_delta_pct": _sub(tot_b["overlap_pct"], tot_a["overlap_pct"]),
        "exposed_a_ns": tot_a["exposed_ns"], "exposed_b_ns": tot_b["exposed_ns"],
        "kernels_appeared": statuses.get("appeared", 0), "kernels_disappeared": statuses.get("disappeared", 0),
        "kernels_changed": statuses.get("changed", 0), "kernels_unchanged": statuses.get("unchanged", 0),
    }
    schema = {k: (pl.String if k in ("run_a", "run_b", "throughput_unit")
                  else pl.Float64 if k.endswith("_pct") or k.startswith("throughput_") else pl.Int64) for k in head}
    out["headline"] = pl.DataFrame([head], schema=schema)
    out["per_step"] = per_step_changes(out, tot_a, tot_b)
    return out


def per_step_changes(out: dict[str, pl.DataFrame], tot_a: dict, tot_b: dict) -> pl.DataFrame:
    """What changed per step, largest |delta| first: the host data wait, each kernel category
    (GPU time) and each region name (CPU time; the steps themselves and the DataLoader regions,
    which are the data wait, left out), each side's
    total divided by its step rows (steps × ranks): ms per step and rank. Empty unless both
    runs have steps."""
    schema = {"what": pl.String, "per_step_a_ns": pl.Int64, "per_step_b_ns": pl.Int64, "delta_ns": pl.Int64}
    na, nb = tot_a["step_rows"], tot_b["step_rows"]
    if not (na and nb):
        return pl.DataFrame(schema=schema)
    rows = [("data wait", tot_a["data_wait_ns"] or 0, tot_b["data_wait_ns"] or 0)]
    for row in out["categories"].iter_rows(named=True):
        rows.append((f"GPU {row['category']}", row["total_a_ns"] / na, row["total_b_ns"] / nb))
    for row in out["regions"].filter(~pl.col("source").is_in(["step", "dataloader"])).iter_rows(named=True):
        rows.append((f"{row['source']} {row['name']}", row["total_a_ns"] / na, row["total_b_ns"] / nb))
    df = pl.DataFrame([(w, round(x), round(y), round(y) - round(x)) for w, x, y in rows], schema=schema, orient="row")
    return df.sort(pl.col("delta_ns").abs(), "what", descending=[True, False])


def _ms(ns) -> str:
    return f"{ns / 1e6:,.1f} ms" if abs(ns) >= 1e6 else f"{ns / 1e3:,.1f} µs"


def _pp(a, b, label: str) -> str | None:
    if a is None or b is None:
        return None
    return f"{label} {a:.1f} % → {b:.1f} % ({b - a:+.1f} pp)"


LEAD_CHANGES = 3


def _lead(result: dict[str, pl.DataFrame], h: dict) -> list[str]:
    """Step time and throughput first, then the largest changes in ms per step."""
    if h["step_a_ns"] is None or h["step_b_ns"] is None:
        return []
    parts = [f"step time {_ms(h['step_a_ns'])} → {_ms(h['step_b_ns'])}"
             + (f" ({h['step_delta_pct']:+.1f} %)" if h["step_delta_pct"] is not None else "")]
    if h["throughput_a"] is not None and h["throughput_b"] is not None:
        parts.append(f"throughput {h['throughput_a']:,.1f} → {h['throughput_b']:,.1f} {h['throughput_unit']}")
    changes = result["per_step"].filter(pl.col("delta_ns") != 0).head(LEAD_CHANGES)
    if changes.height:
        parts.append("per step: " + ", ".join(f"{_short(r['what'])} {_ms(r['per_step_a_ns'])} → {_ms(r['per_step_b_ns'])}"
                                              for r in changes.iter_rows(named=True)))
    return parts


def _short(name: str, width: int = 40) -> str:
    return name if len(name) <= width else name[:width // 2 - 1] + "…" + name[-(width // 2):]


def headline(result: dict[str, pl.DataFrame]) -> str:
    h = result["headline"].row(0, named=True)
    lead = _lead(result, h)
    gpu = (f"GPU time {_ms(h['gpu_a_ns'])} → {_ms(h['gpu_b_ns'])}"
           + (f" ({h['gpu_delta_pct']:+.1f} %)" if h["gpu_delta_pct"] is not None else ""))
    parts = [f"{h['run_a']} → {h['run_b']}: " + "; ".join(lead + [gpu])]
    for a, b, label in (("idle_a_pct", "idle_b_pct", "idle"), ("compute_a_pct", "compute_b_pct", "compute"),
                        ("overlap_a_pct", "overlap_b_pct", "comm overlap")):
        p = _pp(h[a], h[b], label)
        if p:
            parts.append(p)
    parts.append(f"kernels: {h['kernels_appeared']} appeared, {h['kernels_disappeared']} disappeared, "
                 f"{h['kernels_changed']} changed")
    if h["ranks_a"] != h["ranks_b"]:
        parts.append(f"note: {h['ranks_a']} vs {h['ranks_b']} ranks (totals are summed over ranks)")
    if not h["ops_a"] and not h["ops_b"]:
        parts.append("no GPU activity in either run")
    return "; ".join(parts)


# ---------------------------------------------------------------- the command
DIFF_TITLES = {"categories": "per category (GPU time)", "kernels": "per kernel (GPU time)",
               "regions": "per region (CPU time)"}


def compute(a: Scope, b: Scope, top: int = 20, only: str | None = None) -> Out:
    result = diff_scoped(a, b, top or None)
    if only:
        return Out(result[only], headline(result), value=result)
    return Out(result["kernels"], headline(result), value=result,
               tables={t: result[t] for t in ("headline", *TABLES) if t != "kernels"})


def to_json(res: Result):
    result = res.value
    if res.params["only"]:
        return result[res.params["only"]].to_dicts()
    obj = {t: result[t].to_dicts() for t in TABLES}
    obj["per_step"] = result["per_step"].to_dicts()
    obj["headline"] = result["headline"].to_dicts()[0]
    return obj


def csv_tables(res: Result) -> list[tuple[str | None, pl.DataFrame]]:
    if res.params["only"]:
        return [(None, res.df)]
    return [(t, res.value[t]) for t in ("headline", *TABLES)]


def view(res: Result) -> list[Block]:
    result, only = res.value, res.params["only"]
    out = []
    for t in [only] if only else ["headline", *TABLES]:
        line = res.headline if not out else None
        if t == "headline":
            out.append(Block(_metrics_table(result["headline"].row(0, named=True)), line, title="headline"))
        else:
            out.append(Block(result[t], line, title=DIFF_TITLES[t], drop_first=res.analysis.drop_first))
    return out


def _metrics_table(h: dict) -> pl.DataFrame:
    def ms(v):
        return "" if v is None else f"{v / 1e6:,.2f} ms"

    def pct(v):   # undefined (a zero GPU span, no communication): "–"
        from ..render import UNDEFINED

        return UNDEFINED if v is None else f"{v:.2f} %"

    def pp(v):
        return "" if v is None else f"{v:+.2f} pp"

    def delta_ms(a, b):
        return "" if a is None or b is None else f"{(b - a) / 1e6:+,.2f} ms"

    rows = []
    if h["step_a_ns"] is not None or h["step_b_ns"] is not None:
        rows += [("step time", ms(h["step_a_ns"]), ms(h["step_b_ns"]), delta_ms(h["step_a_ns"], h["step_b_ns"])
                  + ("" if h["step_delta_pct"] is None else f" ({h['step_delta_pct']:+.1f} %)")),
                 ("data wait / step", ms(h["data_wait_a_ns"]), ms(h["data_wait_b_ns"]),
                  delta_ms(h["data_wait_a_ns"], h["data_wait_b_ns"])),
                 ("steps", str(h["steps_a"]), str(h["steps_b"]), "")]
    if h["throughput_a"] is not None or h["throughput_b"] is not None:
        def tp(v):
            return "" if v is None else f"{v:,.1f} {h['throughput_unit']}"
        rows.append(("throughput", tp(h["throughput_a"]), tp(h["throughput_b"]),
                     "" if None in (h["throughput_a"], h["throughput_b"]) else f"{h['throughput_b'] - h['throughput_a']:+,.1f}"))
    rows += [
        ("GPU op time", ms(h["gpu_a_ns"]), ms(h["gpu_b_ns"]),
         "" if h["gpu_delta_pct"] is None else f"{h['gpu_delta_ns'] / 1e6:+,.2f} ms ({h['gpu_delta_pct']:+.1f} %)"),
        ("GPU ops", f"{h['ops_a']:,}", f"{h['ops_b']:,}", f"{h['ops_b'] - h['ops_a']:+,}"),
        ("idle (summary)", pct(h["idle_a_pct"]), pct(h["idle_b_pct"]), pp(h["idle_delta_pct"])),
        ("compute (summary)", pct(h["compute_a_pct"]), pct(h["compute_b_pct"]), pp(h["compute_delta_pct"])),
        ("comm overlap", pct(h["overlap_a_pct"]), pct(h["overlap_b_pct"]), pp(h["overlap_delta_pct"])),
        ("exposed comm", ms(h["exposed_a_ns"]), ms(h["exposed_b_ns"]),
         "" if h["exposed_a_ns"] is None or h["exposed_b_ns"] is None else f"{(h['exposed_b_ns'] - h['exposed_a_ns']) / 1e6:+,.2f} ms"),
        ("ranks", str(h["ranks_a"]), str(h["ranks_b"]), ""),
    ]
    # "A: <run>" / "B: <run>": distinct even when a run is compared with itself or named "delta"
    return pl.DataFrame(rows, schema=["metric", f"A: {h['run_a']}", f"B: {h['run_b']}", "delta"], orient="row")


# ---------------------------------------------------------------- the report (two runs)
REPORT_ROWS = 30


def report_section(ctx) -> list:
    """Run B against run A: the headline numbers, GPU time per category (chart and table),
    the kernels and regions that changed most."""
    from ..report import figures
    from ..report.html import table
    from ..report.parts import Guard, Section, add, add_table, ms, pct

    store, run_a, run_b, warnings = ctx.store, ctx.runs[0], ctx.runs[1], ctx.warnings
    sec = Section("diff", f"What changed: {run_a} → {run_b}",
                  intro=f"Run {run_b} compared with {run_a} (the baseline): GPU time per category and per kernel, "
                        "CPU time per region, and the headline numbers. Positive deltas: B takes longer.")
    with Guard(sec, warnings, f"diff {run_a} → {run_b}"):
        a = open_scope(store, run_a)
        b = open_scope(a.store, run_b)
        d = diff_scoped(a, b)
        sec.headline = headline(d)
        h = d["headline"].row(0, named=True)
        rows = []
        for label, ka, kb, kind in (("GPU op time", "gpu_a_ns", "gpu_b_ns", "ns"), ("GPU idle", "idle_a_pct", "idle_b_pct", "pct"),
                                    ("compute", "compute_a_pct", "compute_b_pct", "pct"),
                                    ("comm overlap", "overlap_a_pct", "overlap_b_pct", "pct"),
                                    ("exposed comm", "exposed_a_ns", "exposed_b_ns", "ns"), ("GPU ops", "ops_a", "ops_b", "n")):
            va, vb = h.get(ka), h.get(kb)
            fmt = ms if kind == "ns" else pct if kind == "pct" else (lambda v: "—" if v is None else f"{v:,}")
            if va is None and vb is None:
                continue
            if va is None or vb is None:
                delta = "—"
            elif kind == "pct":
                delta = f"{vb - va:+.1f} pp"
            elif kind == "ns":
                delta = ("+" if vb >= va else "−") + ms(abs(vb - va)) + (f" ({100 * (vb - va) / va:+.1f} %)" if va else "")
            else:
                delta = f"{vb - va:+,}"
            rows.append({"metric": label, run_a: fmt(va), run_b: fmt(vb), "change": delta})
        add_table(sec, table(pl.DataFrame(rows), caption="Headline"), "diff-headline")
        add(sec, figures.diff_category_bars(d["categories"], run_a, run_b), "diff-categories")
        add_table(sec, table(d["categories"], caption="Per category"), "diff-categories")
        k = d["kernels"]
        if k.height:
            k = k.filter(pl.col("status") != "unchanged")
            add_table(sec, table(k.head(REPORT_ROWS), caption=f"Kernels: the {min(REPORT_ROWS, k.height)} largest changes",
                                  widths={"name": 64},
                                  row_classes=["appeared" if s == "appeared" else "disappeared" if s == "disappeared" else ""
                                               for s in k.head(REPORT_ROWS)["status"]]), "diff-kernels")
            sec.notes.append(f"Kernels: red rows appeared in {run_b}, green rows disappeared from it; "
                             f"{k.height:,} kernel names changed in all (traceq diff {run_a} {run_b} lists them).")
        r = d["regions"]
        if r.height:
            add_table(sec, table(r.head(REPORT_ROWS), caption="Regions (CPU time)"), "diff-regions")
    return [sec]


# the columns of diff's tables, for --help and the docs (the per-kernel, per-category and per-region
# tables share the delta columns; the headline is one row of both runs' totals)
DELTA = ("count_a: ops in A", "count_b: ops in B", "total_a_ns: GPU time in A, ns", "total_b_ns: GPU time in B, ns",
         "delta_count: count_b − count_a", "delta_ns: total_b_ns − total_a_ns, ns",
         "delta_pct: 100 · delta_ns / total_a_ns, % (null when A has none)",
         "status: appeared | disappeared | changed | unchanged")
HEADLINE = ("run_a: run A", "run_b: run B", "ranks_a: ranks of A", "ranks_b: ranks of B",
            "steps_a: steps of A (as stalls finds them)", "steps_b: steps of B",
            "step_a_ns: mean step time of A (the slowest rank's per step), ns", "step_b_ns: the same of B, ns",
            "step_delta_pct: 100 · (step_b_ns − step_a_ns) / step_a_ns, %",
            "data_wait_a_ns: host data wait per step in A, ns", "data_wait_b_ns: the same in B, ns",
            "throughput_a: batch label / step time of A (null without one)", "throughput_b: the same of B",
            "throughput_unit: items/s", "ops_a: GPU ops of A", "ops_b: GPU ops of B",
            "gpu_a_ns: GPU op time of A, ns", "gpu_b_ns: GPU op time of B, ns", "gpu_delta_ns: gpu_b_ns − gpu_a_ns, ns",
            "gpu_delta_pct: 100 · gpu_delta_ns / gpu_a_ns, %",
            "idle_a_pct: summary's idle % of A, %", "idle_b_pct: the same of B, %",
            "idle_delta_pct: idle_b_pct − idle_a_pct, percentage points",
            "compute_a_pct: summary's compute % of A, %", "compute_b_pct: the same of B, %",
            "compute_delta_pct: compute_b_pct − compute_a_pct, percentage points",
            "overlap_a_pct: communication overlapped with compute in A, %", "overlap_b_pct: the same in B, %",
            "overlap_delta_pct: overlap_b_pct − overlap_a_pct, percentage points",
            "exposed_a_ns: exposed communication of A, ns", "exposed_b_ns: the same of B, ns",
            "kernels_appeared: kernel names only in B", "kernels_disappeared: kernel names only in A",
            "kernels_changed: kernel names in both whose time changed",
            "kernels_unchanged: kernel names in both with the same count and time")


ANALYSIS = Analysis(
    name="diff",
    help="What changed from run A to run B: GPU time per kernel category and per kernel name (count, total "
         "in A and B, delta, appeared/disappeared/changed), CPU time per region name, and the summary/overlap "
         "headline numbers of both runs.\n\n"
         "--rank and --steps apply to both runs. JSON is one object "
         "{\"categories\": [...], \"kernels\": [...], \"regions\": [...], \"headline\": {...}}; CSV prints each "
         "table after a \"# <table>\" line (or one plain table with --only).",
    examples=("traceq diff baseline amp_channels_last --top 10",),
    compute=compute,
    params=(top_param(20, "Show the N largest kernel and region changes (0 = all)."),
            Param("only", str, None, "Print one table: categories, kernels, regions or headline.", "TABLE",
                  choices=("headline", "categories", "kernels", "regions"))),
    drop_first=("count_a", "count_b", "status", "category", "source", "delta_count", "total_a_ns", "total_b_ns"),
    view=view,
    json=to_json,
    csv=csv_tables,
    runs=2,
    report="What changed: A → B",
    report_section=report_section,
    order=60,
    columns=cols("name: kernel / operation name (full)", "identity: kernel identity",
                 "library: kernel vendor/library", "kind: kernel | memcpy | memset",
                 "category: rule-table category", *DELTA),
    tables=(("categories", cols("category: rule-table category", *DELTA)),
            ("regions", cols("source: region source (nvtx, annotation, step, dataloader, timer)",
                             "name: region name (step numbers masked: ProfilerStep#*)",
                             *(d.replace("GPU time", "CPU time").replace("ops in", "instances in") for d in DELTA))),
            ("headline", cols(*HEADLINE))),
)
