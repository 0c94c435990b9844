"""Kernel hotspots: GPU time per kernel, copy and memset name (the semantics of nsys'
cuda_gpu_kern_sum: count, total, mean, median, min, max, stddev, share of all GPU op time),
its category, and the advice of the evidence-gated findings that cite it (layout transposes,
memsets, tiny-kernel swarms, pageable copies); and the columns of the TensorBoard profiler
plugin's Kernel view (tensor cores used, mean blocks per SM, mean estimated achieved
occupancy). `--window tb` selects the plugin's scope: every kernel of the trace.
SQL: traceq/queries/hotspots.sql.
"""
from __future__ import annotations

from ..engine.findings import fix_first_line, run_findings
from ..engine.scope import Scope
from ..engine.truncation import no_gpu_reason
from ..errors import TraceqError
from ..lazy import polars as pl
from ..queries import load as load_sql
from .spec import Analysis, Block, Column, Out, Param, Result, sql_columns, top_param

REPORT_ROWS = 40
# the plugin's Kernel view columns: in the terminal under --window tb, when the trace has them
KERNEL_VIEW = ("tensor_cores", "blocks_per_sm", "est_occupancy_pct")
WINDOWS = ("all", "tb")


def _advice(df: pl.DataFrame, fs: list) -> pl.DataFrame:
    """`advice` for the kernel names an evidence-gated finding (traceq.advice) cites, and
    `avoidable_ns`: the part of the row's time the findings cite (a finding may cite only some
    launches of a name: the optimizer's elementwise kernels, not the model's), at most its total."""
    by_name: dict[str, str] = {}
    cited: dict[str, float] = {}
    for f in fs:
        for i, name in enumerate(f.kernels):
            by_name.setdefault(name, f"{f.id}: {f.advice}")
            ms_ = f.cited_ms[i] if i < len(f.cited_ms) else None
            if ms_ is not None:
                cited[name] = cited.get(name, 0.0) + ms_
    advice = pl.Series("advice", [by_name.get(n) for n in df["name"]], dtype=pl.String)
    part = pl.Series("avoidable_ns", [None if n not in by_name else round(cited[n] * 1e6) if n in cited else t
                                      for n, t in zip(df["name"], df["total_ns"])], dtype=pl.Int64)
    return df.with_columns(advice=advice, avoidable=advice.is_not_null(),
                           avoidable_ns=pl.min_horizontal(part, pl.col("total_ns")))


def hotspots_scoped(scope: Scope, fs: list | None = None, window: str = "all") -> pl.DataFrame:
    """Every kernel, copy and memset name of the scope, longest total first. `fs`: findings of
    the scope (traceq.advice); rows of the kernels they cite get their advice. Only the
    kernel-evidence rules cite kernels, so when not given those are computed. `window` "tb":
    the TensorBoard plugin's Kernel view scope (every kernel of the trace, steps ignored)."""
    from ..advice import findings

    df = scope.df(load_sql("hotspots"), {"tb": window == "tb"})
    return _advice(df, findings(scope) if fs is None else fs)


def headline(df: pl.DataFrame, scope: Scope, labels: dict | None = None) -> str:
    """The verdict line. The top hotspot is named by its table label (`labels`: name -> the
    short label of traceq.kernels.labels) when given, so the line and the table agree; else by
    its name shortened in the middle (a signature is never cut mid-list at its end)."""
    from ..text import shorten

    if df.height == 0:
        return f"run {scope.run}: no GPU kernels, copies or memsets in scope ({no_gpu_reason(scope)})"
    total = df["total_ns"].sum()
    top = df.row(0, named=True)
    avoid = (df.filter(pl.col("avoidable")).group_by("category").agg(pl.col("avoidable_ns").sum().alias("total_ns"))
             .sort("total_ns", descending=True))
    parts = [f"run {scope.run}{'' if scope.rank is None else f' rank {scope.rank}'}: GPU op time {total / 1e6:,.2f} ms "
             f"in {df['count'].sum():,} ops, {df.height} names; top hotspot: {(labels or {}).get(top['name']) or shorten(top['name'], 60)} "
             + (f"({top['pct']:.1f} %)" if top["pct"] is not None else "(share undefined: every op lasts 0 ns)")]
    if avoid.height and total:
        parts.append("avoidable: " + ", ".join(f"{r['category']} {r['total_ns'] / 1e6:,.2f} ms ({100 * r['total_ns'] / total:.1f} %)"
                                                for r in avoid.iter_rows(named=True)))
    return "; ".join(parts)


def graph_replay_notes(scope: Scope) -> list[str]:
    """A line on the kernels replayed from CUDA/HIP graphs (queries/graph_replays.sql), if any."""
    from ..queries import install_macros, load as load_sql

    install_macros(scope.con)
    r = scope.df(load_sql("graph_replays")).row(0, named=True)
    if not r["replayed"]:
        return []
    how = (f"{r['attributed']:,} of them attributed to the ops that captured them" if r["attributed"] else
           "not attributed to ops (ingest with --graph-capture CAPTURE_TRACE to attribute them)")
    return [f"graph replays: {r['replayed']:,} kernels were replayed from {r['graph_launches']:,} CUDA/HIP graph "
            f"launch(es), not launched one by one; {how}"]


# ---------------------------------------------------------------- the command
def compute(scope: Scope, top: int = 20, category: str | list[str] | None = None, window: str = "all") -> Out:
    window = ANALYSIS.param("window").check(window or "all")
    if window == "tb" and (scope.steps or scope.skip_first or scope.step_pattern):
        raise TraceqError("--window tb is the TensorBoard plugin's scope (every kernel of the trace): "
                          "it takes no --steps, --skip-first or --step-pattern")
    cats = category.split(",") if isinstance(category, str) else category
    cats = [c.strip() for c in cats or [] if c and c.strip()]
    if cats:   # the rule table (ingest's) is imported only to check a --category
        from ..rules.categories import CATEGORIES

        unknown = [c for c in cats if c not in CATEGORIES]
        if unknown:
            raise TraceqError(f"--category: unknown {', '.join(unknown)} (choose from {', '.join(CATEGORIES)})")
    fs = run_findings(scope)    # evidence-gated advice (traceq/advice): the kernels it cites are highlighted
    everything = hotspots_scoped(scope, fs=fs, window=window)
    full = everything.filter(pl.col("category").is_in(cats)) if cats else everything
    df = full.head(top) if top else full
    notes = [f"advice [{f.id}, {f.gain()}]: {f.advice} — {f.evidence}" for f in fs if f.kernels]
    notes += graph_replay_notes(scope)
    highlight = [i for i, a in enumerate(df["avoidable"]) if a]
    # short labels are made unique over every name of the run, so a filtered table reads the same
    from ..kernels.labels import short_labels

    label = dict(zip(everything["name"], short_labels(everything["name"].to_list(), everything["identity"].to_list())))
    return Out(df, fix_first_line(fs, headline(everything, scope, label)), notes=notes, highlight=highlight, value=label)


def view(res: Result) -> list[Block]:
    df = res.df.with_columns(identity=pl.col("name").replace_strict(res.value, default=None))
    # the plugin's Kernel view columns (--window tb) when the trace has them; they go first when
    # width is short (JSON and CSV always have them)
    tb = res.params.get("window") == "tb"
    extra = [c for c in KERNEL_VIEW if tb and c in df.columns and df[c].drop_nulls().len()]
    shown = df.select("name", "identity", "category", "count", "total_ns", "pct", "mean_ns", "median_ns", "min_ns",
                      "max_ns", "stddev_ns", *extra)
    # the Kernel view's columns outrank the spread of durations when the user asked for them
    drop = (*res.analysis.drop_first, *reversed(extra))
    return [Block(shown, res.headline, notes=res.notes, highlight=res.highlight, drop_first=drop)]


# ---------------------------------------------------------------- the report
def report_section(ctx) -> list:
    """The hotspot table of the kernels the "Where GPU time goes" section computed
    (traceq/analyses/summary.py), avoidable work highlighted with what to do."""
    from ..report.html import table
    from ..report.parts import Section, ms

    hot = ctx.results.get("hotspots")
    if hot is None:
        return []
    sec = Section("hotspots", ANALYSIS.report,
                  intro="Per kernel / copy / memset name (nsys cuda_gpu_kern_sum semantics): count, total and "
                        "per-op statistics, share of all GPU op time. Avoidable work is highlighted with what to do.")
    sec.headline = headline(hot, ctx.scope)
    if hot.height:
        shown = hot.head(REPORT_ROWS)
        if "identity" in hot.columns:    # the terminal's label (made unique over every name), full name as tooltip
            from ..kernels.labels import short_labels

            label = dict(zip(hot["name"], short_labels(hot["name"].to_list(), hot["identity"].to_list())))
            shown = shown.with_columns(identity=pl.col("name").replace_strict(label, default=None))
        # the advice column shows what kind of avoidable work it is; the full advice is its tooltip
        # and is listed above the table
        shown = shown.with_columns(pl.col("advice").alias("_advice"),
                                   pl.col("advice").str.split(":").list.first().alias("advice"))
        cols = [c for c in ("name", "identity", "category", "kind", "count", "total_ns", "pct", "mean_ns", "median_ns",
                            "max_ns", "ranks", "advice") if c in shown.columns]
        t = table(shown.select(cols), max_rows=REPORT_ROWS, titles={"advice": shown["_advice"].to_list()},
                  row_classes=["avoidable" if a else "" for a in shown["avoidable"]])
        t.kind = "hotspots"
        sec.tables.append(t)
        if hot.height > REPORT_ROWS:
            sec.notes.append(f"Top {REPORT_ROWS} of {hot.height:,} names by total time "
                             "(traceq hotspots --top 0 lists all).")
        adv = (hot.filter(pl.col("avoidable")).group_by("advice")
               .agg(pl.col("avoidable_ns").sum().alias("total_ns"), pl.col("category").first(), pl.len().alias("names"))
               .sort("total_ns", descending=True))
        total = hot["total_ns"].sum() or 1
        sec.advice = [f"{r['category']} — {ms(r['total_ns'])} ({100 * r['total_ns'] / total:.1f} % of GPU op time, "
                      f"{r['names']} kernel name{'s' if r['names'] != 1 else ''}): {r['advice']}"
                      for r in adv.iter_rows(named=True)]
    return [sec]


ANALYSIS = Analysis(
    name="hotspots",
    help="Kernel hotspots: time per kernel name (nsys cuda_gpu_kern_sum semantics), its category, and "
         "advice for avoidable work (layout transposes, memsets, tiny-kernel swarms, pageable copies).",
    examples=("traceq hotspots --top 10 --category transpose,memset", "traceq hotspots -f json -o hot.json",
              "traceq hotspots --window tb --wide   # the TensorBoard plugin's Kernel view"),
    compute=compute,
    params=(
        top_param(20, "Show the N longest (0 = all)."),
        Param("category", str, None, "Only these categories, comma-separated (e.g. transpose,memset).",
              "CAT[,CAT]", flags=("-c",)),
        Param("window", str, "all", "all: the kernels, copies and memsets of the scope (--steps). tb: the "
              "TensorBoard profiler plugin's Kernel view: every kernel of the trace, no copies or memsets, and "
              "its columns (tensor_cores, blocks_per_sm, est_occupancy_pct) in the terminal too.",
              "all|tb", flags=("-w",), choices=WINDOWS),
    ),
    columns=sql_columns("hotspots", Column("advice", "what to change for avoidable work (null otherwise)"),
                        Column("avoidable", "true when advice applies"),
                        Column("avoidable_ns", "the part of total_ns the findings cite (null when none): a "
                                               "finding may cite some launches of a name only")),
    sort=("total_ns descending",),
    drop_first=("stddev_ns", "min_ns", "max_ns", "median_ns", "mean_ns", "category"),
    view=view,
    report="Kernel hotspots",
    report_section=report_section,
    order=10,
    report_order=30,
)
