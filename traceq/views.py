"""The registry's functions for each analysis (declared in traceq/analyses.py): how the
analysis is computed on a scope (`<name>`, returning an `Out`) and how the terminal shows it
(`<name>_view`, returning `Block`s). The numbers come from traceq.analysis.*; here they are
only selected and shaped.
"""
from __future__ import annotations

import polars as pl

from .errors import TraceqError
from .registry import TABLE_ROWS, Block, Out, Result

STEPS_HINT = ", --steps A:B picks steps"


# ---------------------------------------------------------------- hotspots
def hotspots(scope, top: int = 20, category: str | list[str] | None = None) -> Out:
    from .analysis.hotspots import headline, hotspots_scoped

    cats = category.split(",") if isinstance(category, str) else category
    cats = [c.strip() for c in cats or [] if c and c.strip()]
    if cats:   # the rule table's module (ingest's) is imported only to check a --category
        from .categories import CATEGORIES

        unknown = [c for c in cats if c not in CATEGORIES]
        if unknown:
            raise TraceqError(f"--category: unknown {', '.join(unknown)} (choose from {', '.join(CATEGORIES)})")
    from .advice import fix_first_line, run_findings

    fs = run_findings(scope)    # evidence-gated advice (traceq/advice): the kernels it cites are highlighted
    everything = hotspots_scoped(scope, fs=fs)
    full = everything.filter(pl.col("category").is_in(cats)) if cats else everything
    df = full.head(top) if top else full
    notes = [f"advice [{f.id}, {f.gain()}]: {f.advice} — {f.evidence}" for f in fs if f.kernels]
    highlight = [i for i, a in enumerate(df["avoidable"]) if a]
    # short labels are made unique over every name of the run, so a filtered table reads the same
    from .kernels.labels import short_labels

    label = dict(zip(everything["name"], short_labels(everything["name"].to_list(), everything["identity"].to_list())))
    return Out(df, fix_first_line(fs, headline(everything, scope, label)), notes=notes, highlight=highlight, value=label)


def hotspots_view(res: Result) -> list[Block]:
    df = res.df.with_columns(identity=pl.col("name").replace_strict(res.value, default=None))
    shown = df.select("name", "identity", "category", "count", "total_ns", "pct", "mean_ns", "median_ns", "min_ns", "max_ns",
                          "stddev_ns")
    return [Block(shown, res.headline, notes=res.notes, highlight=res.highlight, drop_first=res.analysis.drop_first)]


# ---------------------------------------------------------------- summary
def summary(scope, window: str = "all") -> Out:
    from .analysis.summary import headline, summary_scoped

    from .advice import fix_first_line

    from .analysis import per_rank

    df, fs = per_rank.summary(scope, window) if per_rank.mapped(scope) else (summary_scoped(scope, window), scope)
    return Out(df, fix_first_line(fs, headline(df, scope, window)))


# ---------------------------------------------------------------- overlap
def overlap(scope, window: str = "all", by: str = "rank") -> Out:
    from .analysis import per_rank
    from .analysis.overlap import across_ranks, headline, overlap_rows, prepare_overlap

    if per_rank.mapped(scope):
        ranks, step_rows, fs = per_rank.overlap(scope, window, by)
    else:
        prepare_overlap(scope, window)
        ranks, fs = overlap_rows(scope, "rank"), scope
        step_rows = overlap_rows(scope, "step") if by == "step" else None
    across = across_ranks(ranks, scope.con)
    from .advice import fix_first_line

    line = fix_first_line(fs, headline(ranks, across, scope, window))
    if by == "step":
        return Out(step_rows, line)
    if by == "across":
        return Out(across, line)
    return Out(ranks.drop("step"), line, tables={"across": across},
               value={"show_across": ranks.filter(pl.col("comm_ns") > 0).height > 1})


def overlap_view(res: Result) -> list[Block]:
    by = res.params["by"]
    if by == "across":
        return [Block(_across_table(res.df), res.headline)]
    shown = res.df.with_columns(pl.col("step").cast(pl.String)) if "step" in res.df.columns else res.df
    out = [Block(shown, res.headline, drop_first=res.analysis.drop_first,
                 **({"max_rows": TABLE_ROWS, "more": STEPS_HINT} if by == "step" else {}))]
    if by == "rank" and res.value["show_across"]:
        out.append(Block(_across_table(res.tables["across"]), title="across ranks"))
    return out


def _across_table(across: pl.DataFrame) -> pl.DataFrame:
    """The one-row cross-rank summary as a two-column metric/value table (readable width)."""
    a = across.row(0, named=True) if across.height else {}

    def ms(v):
        return "" if v is None else f"{v / 1e6:,.3f} ms"

    def pct(v):
        return "" if v is None else f"{v:.2f} %"

    def three(f, lo, mid, hi):
        return " / ".join(f(a.get(k)) for k in (lo, mid, hi))

    rows = [
        ("ranks with GPU activity / with communication", f"{a.get('ranks', 0)} / {a.get('comm_ranks', 0)}"),
        ("overlap min / median / max", three(pct, "min_overlap_pct", "median_overlap_pct", "max_overlap_pct")),
        ("exposed comm min / median / max", three(ms, "min_exposed_ns", "median_exposed_ns", "max_exposed_ns")),
        ("communication, exposed (all ranks)", f"{ms(a.get('comm_ns'))}, {ms(a.get('exposed_ns'))}"),
        ("overlap (all ranks)", pct(a.get("overlap_pct"))),
        ("slowest rank (longest mean step)", "" if a.get("slowest_rank") is None
         else f"rank {a['slowest_rank']} ({ms(a['slowest_step_ns'])})"),
        ("most exposed rank (waits most in comm)", "" if a.get("most_exposed_rank") is None else f"rank {a['most_exposed_rank']}"),
        ("least exposed rank (others may wait on it)", "" if a.get("least_exposed_rank") is None else f"rank {a['least_exposed_rank']}"),
    ]
    return pl.DataFrame(rows, schema=["across ranks", "value"], orient="row")


# ---------------------------------------------------------------- breakdown
def breakdown(scope, by: str = "all", top: int = 30) -> Out:
    from .analysis import breakdown as bd
    from .analysis import per_rank

    if by == "timer":
        if per_rank.mapped(scope):   # medians need every timer instance: read in one process
            from .analysis.scope import open_scope

            scope = open_scope(scope.store, scope.run, None, scope.steps, scope.step_pattern, scope.skip_first)
        df = bd.timer_scoped(scope)
        notes = (["timer_stats rows: summary-only timer output (Deep500 stats text): no instance counts or totals"]
                 if "timer_stats" in set(df["source"]) else [])
        return Out(df, bd.timer_headline(df, scope), notes=notes)
    full, fs = per_rank.breakdown(scope, by) if per_rank.mapped(scope) else (bd.breakdown_scoped(scope, by), scope)
    df = full.head(top) if top else full
    notes = []
    if top and full.height > top:
        notes.append(f"({full.height - top} more regions; --top 0 shows all)")
    if int(full["unfinished"].sum() or 0):
        notes.append("unfinished: instances still open when the capture ended; counted up to capture end")
    if full.filter(pl.col("source") == "step").height:
        notes.append("note: ProfilerStep counts only launches on its own (main) thread; PyTorch launches backward "
                     "kernels from the autograd thread, so a step's GPU projection can miss them (nsys rule)")
    highlight = [i for i, u in enumerate(df["unfinished"]) if u]
    from .advice import fix_first_line

    return Out(df, fix_first_line(fs, bd.headline(full, scope, by)), notes=notes, highlight=highlight)


def breakdown_view(res: Result) -> list[Block]:
    df = res.df
    if res.params["by"] == "timer":
        return [Block(_timer_rows(df), res.headline, notes=res.notes, drop_first=("stdev_ns", "min_ns", "max_ns"))]
    shown = df.select("source", "name", "instances", "cpu_total_ns", "cpu_mean_ns", "gpu_ops", "gpu_proj_ns",
                      "gpu_busy_ns", "gpu_busy_per_cpu", "unfinished")
    if df["domain"].drop_nulls().len():
        shown = shown.insert_column(2, df["domain"])
    return [Block(shown, res.headline, notes=res.notes, highlight=res.highlight, drop_first=res.analysis.drop_first)]


def _timer_rows(df: pl.DataFrame) -> pl.DataFrame:
    """For the terminal: one row per key and clock (like Deep500's CPU / GPU sections),
    so the table stays narrow; JSON/CSV keep one wide row per key."""
    stats = ("count", "total_ns", "mean_ns", "median_ns", "min_ns", "max_ns", "stdev_ns")
    parts = []
    for clock in ("cpu", "gpu"):
        part = df.select(
            "key", "source", pl.lit(clock).alias("clock"),
            *[pl.col(f"{clock}_{s}" if s != "count" else ("count" if clock == "cpu" else "gpu_count"))
              .cast(pl.Float64 if s != "count" else pl.Int64).alias(s) for s in stats],
            pl.when(pl.lit(clock == "gpu")).then(pl.col("gpu_per_cpu")).alias("gpu_per_cpu"),
        ).with_row_index("_order")
        if clock == "gpu":   # keys never timed on the GPU get no GPU row
            part = part.filter(pl.col("mean_ns").is_not_null())
        parts.append(part)
    out = pl.concat(parts).sort("_order", "clock").drop("_order")
    if set(out["source"]) == {"timer"}:
        out = out.drop("source")
    return out


# ---------------------------------------------------------------- stalls
def stalls(scope, min_gap_us: float = 50.0, data_pattern: str | None = None, table: str = "both") -> Out:
    from .analysis import stalls as sa

    from .advice import fix_first_line, run_findings

    from .analysis import per_rank

    if per_rank.mapped(scope):
        res, fs = per_rank.stalls(scope, min_gap_us, data_pattern)
    else:   # the findings' stall rules read this command's stalls (its --min-gap-us, --data-pattern)
        res = sa.stalls_scoped(scope, min_gap_us, data_pattern)
        fs = run_findings(scope, res)
    df = res.steps if table == "both" else getattr(res, table)
    return Out(df, fix_first_line(fs, sa.headline(res, scope)), tables={"causes": res.causes} if table == "both" else {},
               notes=sa.advice(res), value=res)


def stalls_view(res: Result) -> list[Block]:
    from .analysis import stalls as sa

    st, table, notes = res.value, res.params["table"], res.notes
    out = []
    if table in ("both", "steps"):
        shown = st.steps.drop("start_ns")
        if shown.height and shown["gpu_idle_ns"].null_count() == shown.height:
            shown = shown.drop("gpu_idle_ns", "gpu_idle_waiting_ns", "gpu_idle_waiting_pct")
        highlight = [i for i, p in enumerate(st.steps["data_wait_pct"]) if p is not None and p > sa.DATA_WAIT_ADVICE_PCT]
        out.append(Block(shown, res.headline, highlight=highlight, notes=notes if table == "steps" else [],
                         drop_first=res.analysis.drop_first, max_rows=TABLE_ROWS, more=STEPS_HINT))
    if table in ("both", "causes"):
        if st.causes.height:
            out.append(Block(st.causes, sa.causes_headline(st), notes=notes, drop_first=("gaps_main", "gaps")))
        else:   # CPU-only: say so instead of printing an empty table
            out.append(Block(lines=[sa.causes_headline(st), *notes]))
    if table == "gaps":
        out.append(Block(st.gaps, sa.causes_headline(st), notes=notes, max_rows=TABLE_ROWS,
                         more=", --min-gap-us N keeps the longer gaps"))
    if table == "launch":
        out.append(Block(st.launch, sa.causes_headline(st)))
    return out


# ---------------------------------------------------------------- diff
DIFF_TITLES = {"categories": "per category (GPU time)", "kernels": "per kernel (GPU time)",
               "regions": "per region (CPU time)"}


def diff(a, b, top: int = 20, only: str | None = None) -> Out:
    from .analysis.diff import TABLES, diff_scoped, headline

    result = diff_scoped(a, b, top or None)
    if only:
        return Out(result[only], headline(result), value=result)
    return Out(result["kernels"], headline(result), value=result,
               tables={t: result[t] for t in ("headline", *TABLES) if t != "kernels"})


def diff_json(res: Result):
    from .analysis.diff import TABLES

    result = res.value
    if res.params["only"]:
        return result[res.params["only"]].to_dicts()
    obj = {t: result[t].to_dicts() for t in TABLES}
    obj["headline"] = result["headline"].to_dicts()[0]
    return obj


def diff_csv_tables(res: Result) -> list[tuple[str | None, pl.DataFrame]]:
    from .analysis.diff import TABLES

    if res.params["only"]:
        return [(None, res.df)]
    return [(t, res.value[t]) for t in ("headline", *TABLES)]


def diff_view(res: Result) -> list[Block]:
    from .analysis.diff import TABLES

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

    def pct(v):
        return "" if v is None else f"{v:.2f} %"

    def pp(v):
        return "" if v is None else f"{v:+.2f} pp"

    rows = [
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
