"""Critical path: what bounds each step, and what a fix would win (--what-if).

Per step and rank (or per step across the ranks joined by their collectives, --ranks all):
the chain of events each of which the next one waited for last, from the step's start to the
later of its end and the end of the last GPU op it launched; it covers that span exactly.
Definitions: traceq/engine/critical_path.py (bounds, what-if), cp_graph.py (the graph),
cp_host.py (the host timeline); SQL: traceq/queries/critical_path_host.sql, critical_path_gpu.sql.
"""
from __future__ import annotations

from ..engine.scope import Scope
from ..lazy import polars as pl
from .spec import Analysis, Block, Column, Out, Param, cols, top_param

# the report's section draws the path of a run of up to this many host and GPU ops; the graph
# costs ~400 bytes an op (24 M ops: over 20 GB: the report was killed for it)
REPORT_MAX_EVENTS = 4_000_000
BOUNDS = ("cpu", "data_loading", "launch", "gpu", "gpu_gap", "communication", "sync", "memcpy")
COLUMNS = (
    Column("rank", "the rank (null: the ranks joined, --ranks all)"),
    Column("step", "the step"),
    Column("start_ns", "the step's start, ns (the rank's clock; joined: the run's common clock)"),
    Column("since_first_ns", "the step's start, ns since the run's first event, the x = 0 of the report's "
                             "timeline: its first GPU op or step/DataLoader span of all ranks on the common clock "
                             "when every rank has a clock offset, else of the step's rank; the terminal shows this "
                             "in place of start_ns"),
    Column("span_ns", "from the step's start to the later of its end and the end of the last GPU op it "
                      "launched, ns"),
    Column("path_ns", "the critical path's length, ns: the span, exactly"),
    Column("predicted_step_ns", "the span re-timed with the --what-if factors, ns"),
    Column("bound", "the bound with the most path time"),
    Column("bound_pct", "its share of the path, %"),
    Column("next_bound", "with --what-if: the bound with the most time on the re-timed path"),
    Column("bounding_rank", "joined: the rank holding the most path time outside communication"),
    Column("wait_ns", "joined: time the path's ranks spent in collectives waiting for a later rank, ns"),
)
# tables `bounds` (rank, step, bound, ns, pct: the path time of each bound on a rank, % of the
# step's path; joined, a step's rows are per rank the path crossed) and `what_if` (the same of
# the re-timed path); `ops` (rank, name, kind, category, ns, pct): the ops on the path
NOTE = "the path covers each step's span exactly (docs/critical_path.md)"


def _dominant(bounds: dict) -> tuple[str | None, float | None]:
    tot = sum(bounds.values())
    if not tot:
        return None, None
    b, v = max(sorted(bounds.items()), key=lambda kv: kv[1])
    return b, round(100 * v / tot, 2)


def tables(run: str, res: dict, joined: bool, factors: dict, top: int) -> Out:
    steps = res["steps"]
    rows, bounds_rows, wi_rows = [], [], []
    for s in steps:
        b, pct = _dominant(s["bounds"])
        row = {"rank": s["rank"], "step": s["step"], "start_ns": s["start_ns"], "span_ns": s["span_ns"],
               "path_ns": s["path_ns"], "bound": b, "bound_pct": pct}
        if factors:
            row["predicted_step_ns"] = s["predicted_ns"]
            row["next_bound"] = _dominant(s["what_if"])[0]
        if joined:
            row["bounding_rank"] = max(sorted(s["by_rank"].items()), key=lambda kv: kv[1])[0] if s["by_rank"] else None
            row["wait_ns"] = s["wait_ns"]
        rows.append(row)
        tot = sum(s["bounds"].values()) or 1
        for rk in sorted(s["bounds_by_rank"]):
            for bound in BOUNDS:
                v = s["bounds_by_rank"][rk].get(bound)
                if v:
                    bounds_rows.append({"rank": rk, "step": s["step"], "bound": bound, "ns": int(v),
                                        "pct": round(100 * v / tot, 2)})
        wtot = sum(s["what_if"].values()) or 1
        for bound in BOUNDS:
            if s["what_if"].get(bound):
                wi_rows.append({"rank": s["rank"], "step": s["step"], "bound": bound,
                                "ns": int(round(s["what_if"][bound])), "pct": round(100 * s["what_if"][bound] / wtot, 2)})
    order = [c.name for c in COLUMNS if any(c.name in r for r in rows)] if rows else \
        ["rank", "step", "start_ns", "span_ns", "path_ns", "bound", "bound_pct"]
    df = pl.DataFrame(rows, schema_overrides={"rank": pl.Int32, "bounding_rank": pl.Int32}, infer_schema_length=None) \
        if rows else pl.DataFrame(schema={c: pl.Int64 if c.endswith("_ns") or c in ("rank", "step") else pl.String
                                          for c in order})
    df = df.select([c for c in order if c in df.columns])
    bschema = {"rank": pl.Int32, "step": pl.Int64, "bound": pl.String, "ns": pl.Int64, "pct": pl.Float64}
    seg = res["segments"]
    if seg.height:
        d = seg.with_columns(ns=pl.col("end_ns") - pl.col("start_ns"))
        tot = d.group_by("rank").agg(pl.col("ns").sum().alias("tot"))
        ops = (d.group_by("rank", "name", "kind", pl.coalesce("category", "bound").alias("category"))
               .agg(pl.col("ns").sum()).join(tot, on="rank")
               .with_columns(pct=(100 * pl.col("ns") / pl.col("tot")).round(2)).drop("tot")
               .sort(["ns", "rank", "name", "kind", "category"], descending=[True, False, False, False, False],
                     nulls_last=True))
        ops = ops.head(top) if top else ops
    else:
        ops = pl.DataFrame(schema={"rank": pl.Int32, "name": pl.String, "kind": pl.String, "category": pl.String,
                                   "ns": pl.Int64, "pct": pl.Float64})
    out_tables = {"bounds": pl.DataFrame(bounds_rows, schema=bschema), "ops": ops}
    if factors:
        out_tables["what_if"] = pl.DataFrame(wi_rows, schema=bschema)
    return Out(df, headline(run, df, steps, factors, joined), tables=out_tables, notes=[NOTE],
               value={"segments": seg})


def headline(run: str, df: pl.DataFrame, steps: list, factors: dict, joined: bool) -> str:
    if not steps:
        return f"run {run}: no steps with GPU or host activity in scope"
    agg: dict[str, float] = {}
    for s in steps:
        for k, v in s["bounds"].items():
            agg[k] = agg.get(k, 0) + v
    tot = sum(agg.values()) or 1
    top = [kv for kv in sorted(agg.items(), key=lambda kv: (-kv[1], kv[0]))[:3] if kv[1] >= 0.0005 * tot]
    mean_ms = sum(s["span_ns"] for s in steps) / len(steps) / 1e6
    who = "ranks joined" if joined else (f"rank {steps[0]['rank']}" if len({s['rank'] for s in steps}) == 1
                                         else f"{len({s['rank'] for s in steps})} ranks")
    text = (f"run {run}: critical path of {len(steps)} step(s), {who}, mean span {mean_ms:,.3f} ms: "
            + ", ".join(f"{k} {100 * v / tot:.1f} %" for k, v in top))
    if joined and "bounding_rank" in df.columns and df.height:
        br = df["bounding_rank"].drop_nulls().mode().sort().to_list()
        wait = sum(s["wait_ns"] for s in steps) / len(steps) / 1e6
        if br:
            text += f"; bounding rank {br[0]}" + (f", others waiting for it {wait:,.3f} ms/step" if wait > 0 else "")
    if factors:
        pred = [s["predicted_ns"] for s in steps if s["predicted_ns"] is not None]
        if pred:
            p_ms = sum(pred) / len(pred) / 1e6
            wagg: dict[str, float] = {}
            for s in steps:
                for k, v in s["what_if"].items():
                    wagg[k] = wagg.get(k, 0) + v
            wt = sum(wagg.values()) or 1
            nb = max(sorted(wagg.items()), key=lambda kv: kv[1]) if wagg else (None, 0)
            what = " ".join(f"{k}={v:g}" for k, v in factors.items())
            text += (f"; what-if {what}: mean step {mean_ms:,.3f} → {p_ms:,.3f} ms "
                     f"({100 * (p_ms - mean_ms) / mean_ms:+.1f} %)" if mean_ms else "")
            if nb[0]:
                text += f", then bound by {nb[0]} ({100 * nb[1] / wt:.1f} %)"
    return text


def compute(scope: Scope, what_if: tuple = (), ranks: str = "each", data_pattern: str | None = None,
            top: int = 20) -> Out:
    from ..engine.critical_path import parse_what_if, run_paths
    from ..errors import TraceqError

    if top is not None and top < 0:
        raise TraceqError(f"--top {top}: expected 0 (all) or a positive number")
    factors = parse_what_if(what_if)
    joined = ranks == "all"
    res = run_paths(scope, joined=joined, factors=factors, data_pattern=data_pattern)
    out = tables(scope.run, res, joined, factors, top)
    if "start_ns" in out.df.columns:
        at = out.df.columns.index("start_ns") + 1
        out.df = out.df.insert_column(at, since_first(scope, out.df, res["ranks"] if joined else None))
    return out


def since_first(scope: Scope, df: pl.DataFrame, joined_ranks: list | None) -> pl.Series:
    """`start_ns` of the rows as ns since the origin of the report's timeline
    (report/timeline.py `origin`): its first drawn event of all ranks on the run's common clock
    when every rank has a clock offset, else the rank's own first. Rows of the ranks joined
    (`joined_ranks`: the ranks whose steps were joined) are on the common clock of the first of
    those ranks (engine/cp_load.py `offsets`): + the least offset of those ranks is the run's."""
    from ..report.timeline import origin

    o = origin(scope)
    if joined_ranks is not None:
        base = min((o.off_ns.get(r, 0) for r in joined_ranks), default=0)
        shift = None if o.common_ns is None else base - o.common_ns
        return (df["start_ns"] + shift if shift is not None else pl.repeat(None, df.height, dtype=pl.Int64, eager=True)
                ).cast(pl.Int64).alias("since_first_ns")
    at = {r: o.of(r) for r in df["rank"].unique().to_list()}
    return (df["start_ns"] - df["rank"].replace_strict(at, default=None, return_dtype=pl.Int64)).alias("since_first_ns")


def view(res) -> list[Block]:
    # times since the run's first event, as the report's timeline: not the rank's clock (epoch ns)
    shown = res.df.drop("start_ns") if "since_first_ns" in res.df.columns else res.df
    blocks = [Block(shown, res.headline, notes=res.notes, drop_first=("path_ns", "since_first_ns", "wait_ns"),
                    max_rows=200, more=", --steps A:B picks steps")]
    ops = res.tables.get("ops")
    if ops is not None and ops.height:
        blocks.append(Block(ops, title="On the path, longest first", drop_first=("kind",)))
    wi = res.tables.get("what_if")
    if wi is not None and wi.height:
        blocks.append(Block(wi, title="Re-timed path (what-if), by bound", max_rows=200))
    return blocks


def _json(res) -> dict:
    return {"analysis": "critical_path", "run": res.run, "rank": res.rank, "steps": res.steps,
            "labels": res.labels, "headline": res.headline, "units": res.units(),
            "rows": res.rows_df().to_dicts(), "bounds": res.tables["bounds"].to_dicts(),
            "ops": res.tables["ops"].to_dicts(),
            **({"what_if": res.tables["what_if"].to_dicts()} if "what_if" in res.tables else {})}


def _csv(res) -> list:
    out = [(None, res.rows_df()), ("bounds", res.tables["bounds"]), ("ops", res.tables["ops"])]
    if "what_if" in res.tables:
        out.append(("what_if", res.tables["what_if"]))
    return out


COLORS = {"cpu": "#9467bd", "data_loading": "#bcbd22", "launch": "#2ca02c", "gpu": "#1f77b4",
          "gpu_gap": "#c7c7c7", "communication": "#ff7f0e", "sync": "#d62728", "memcpy": "#e377c2"}


def path_figure(bounds: pl.DataFrame):
    """Stacked bars: per step (and rank) its path time in each bound, ms."""
    import plotly.graph_objects as go

    from ..report.figures import base_layout, esc

    if not bounds.height:
        return None
    keys = bounds.select("rank", "step").unique(maintain_order=True)
    many = keys["rank"].n_unique() > 1
    x = [esc(f"r{r} · {s}" if many else str(s)) if r is not None else esc(f"all · {s}")
         for r, s in keys.iter_rows()]
    fig = go.Figure()
    fig.update_layout(base_layout("Critical path per step, by bound (ms)", height=380))
    for b in BOUNDS:
        sub = keys.join(bounds.filter(pl.col("bound") == b), on=["rank", "step"], how="left", nulls_equal=True)
        if sub["ns"].drop_nulls().len() == 0:
            continue
        fig.add_trace(go.Bar(name=b, x=x, y=(sub["ns"].fill_null(0) / 1e6).to_list(), marker_color=COLORS[b],
                             hovertemplate="step %{x}: %{y:,.3f} ms<extra>" + b + "</extra>"))
    fig.update_layout(barmode="stack", xaxis_title="step", yaxis_title="ms", xaxis_type="category")
    return fig


PATH_BARS = 20_000   # the path's bars drawn on the timeline, at most (the longest kept)


def path_timeline(scope, segments: pl.DataFrame, ranks: list[int] | None = None):
    """The report's GPU timeline (report/timeline.py) with a lane per rank on top: the critical
    path's segments, adjacent ones of one bound merged, coloured by bound (of `ranks` alone
    when given: a run of many)."""
    from ..report import timeline as tlm

    tl = tlm.segments(scope, ranks=ranks)
    if ranks is not None:
        segments = segments.filter(pl.col("rank").is_in(ranks))
    if not segments.height or not tl.segments.height:
        return None
    # the timeline's origin (report/timeline.py): the first start of all ranks on the common
    # clock, else of each rank on its own
    origins = dict(tl.segments.group_by("rank").agg(pl.col("start_ns").min()).iter_rows())
    off = dict(scope.df("SELECT rank, coalesce(clock_offset_ns, 0) + coalesce(clock_refine_ns, 0) AS off "
                        "FROM runs WHERE run = $run").iter_rows()) if tl.aligned else {}
    if tl.aligned:
        origins = {r: min(origins.values()) for r in set(origins) | set(off)}
    seg = (segments.sort("rank", "start_ns", "end_ns", "step")
           .with_columns(grp=((pl.col("bound") != pl.col("bound").shift(1)) | (pl.col("rank") != pl.col("rank").shift(1))
                              | (pl.col("start_ns") != pl.col("end_ns").shift(1))).fill_null(True).cum_sum())
           .group_by("grp", maintain_order=True)
           .agg(pl.col("rank").first(), pl.col("bound").first(), pl.col("start_ns").min(), pl.col("end_ns").max(),
                pl.len().alias("n"), pl.col("name").first()))
    if seg.height > PATH_BARS:
        seg = (seg.with_columns(d_=pl.col("end_ns") - pl.col("start_ns"))
               .sort(["d_", "rank", "start_ns"], descending=[True, False, False]).head(PATH_BARS)
               .sort("rank", "start_ns").drop("d_"))
    ranks = sorted(seg["rank"].unique().to_list())
    lanes = [f"rank {r} · critical path" for r in ranks]
    shift = seg["rank"].replace_strict(off, default=0, return_dtype=pl.Int64) if off else pl.lit(0, pl.Int64)
    origin = seg["rank"].replace_strict(origins, default=0, return_dtype=pl.Int64)
    path = seg.with_columns(s_=pl.col("start_ns") + shift, e_=pl.col("end_ns") + shift, o_=origin).select(
        pl.col("rank").cast(tl.segments["rank"].dtype), pl.lit("host").alias("side"),
        pl.lit(None, tl.segments["device"].dtype).alias("device"), pl.lit(None, tl.segments["stream"].dtype).alias("stream"),
        pl.col("bound").alias("cat"), pl.when(pl.col("n") > 1).then(pl.format("{} ({} segments)", "name", "n"))
        .otherwise(pl.col("name")).alias("name"),
        pl.col("s_").alias("start_ns"), pl.col("e_").alias("end_ns"), pl.col("n").cast(pl.Int64),
        (pl.col("e_") - pl.col("s_")).alias("busy_ns"), pl.lit(True).alias("exact"),
        pl.lit(tl.segments["bucket_ns"].min()).cast(tl.segments["bucket_ns"].dtype).alias("bucket_ns"),
        pl.format("rank {} · critical path", "rank").alias("lane"),
        ((pl.col("s_") - pl.col("o_")) / 1e6).alias("x0_ms"), ((pl.col("e_") - pl.col("o_")) / 1e6).alias("x1_ms"),
        pl.col("rank").replace_strict({r: i for i, r in enumerate(ranks)}, return_dtype=pl.Int32).alias("lane_idx"))
    rest = tl.segments.with_columns(pl.col("lane_idx") + len(lanes))
    both = pl.concat([path.select(rest.columns), rest], how="vertical_relaxed")
    fig = tlm.figure(tlm.Timeline(both, lanes + tl.lanes, tl.buckets, tl.n_ops, tl.aligned),
                     "The critical path on the timeline")
    return fig


def on_path(segments: pl.DataFrame, chosen: list, k: int = 2) -> list[tuple[int, str]]:
    """The `k` ranks holding the most path time, beyond those `chosen` already (a run of many)."""
    if not segments.height:
        return []
    held = [r for r, _ in chosen]
    top = (segments.filter(~pl.col("rank").is_in(held)).group_by("rank")
           .agg((pl.col("end_ns") - pl.col("start_ns")).sum().alias("d")).sort(["d", "rank"], descending=[True, False]))
    return [(int(r), "on the critical path") for r in top["rank"].head(k).to_list()]


def report_section(ctx) -> list:
    """Per-step path bars by bound, and the ops on the path."""
    from ..report.html import table
    from ..report.many_ranks import chosen_ranks, chosen_words, many
    from ..report.parts import Section, add, add_table

    sec = Section("critical_path", ANALYSIS.report,
                  intro="Each step's critical path: the chain of events each of which the next waited for last, from "
                        "the step's start to the end of the last GPU op it launched. A bound's bar is the path time "
                        "it holds; shortening anything off the path does not shorten the step.")
    with ctx.guard(sec, "critical_path"):
        from ..engine.path_facts import scope_events

        events = scope_events(ctx.scope)
        if events > REPORT_MAX_EVENTS:   # the graph holds every op in memory (~400 bytes each)
            sec.notes.append(f"The critical path is not drawn for {events:,} host and GPU ops: the report draws it "
                             f"up to {REPORT_MAX_EVENTS:,} (its graph holds every op in memory; "
                             f"`traceq critical-path --run {ctx.scope.run}` computes it).")
            return [sec]
        n = ctx.scope.df("SELECT count(*) AS n FROM scope_window")["n"][0]
        out = compute(ctx.scope, ranks="all" if n > 1 else "each", top=15)
        sec.headline = out.headline
        ctx.results["critical_path"] = out
        add(sec, path_figure(out.tables["bounds"]), "critical-path")
        if many(ctx.manifest.height):
            chosen = chosen_ranks(ctx) + on_path(out.value["segments"], chosen_ranks(ctx))
            add(sec, path_timeline(ctx.scope, out.value["segments"], [r for r, _ in chosen]),
                "critical-path-timeline")
            sec.notes.append(f"The timeline: {chosen_words(chosen, ctx.manifest.height)} The path of every rank: "
                             "`traceq critical-path --ranks all -f csv`.")
        else:
            add(sec, path_timeline(ctx.scope, out.value["segments"]), "critical-path-timeline")
        add_table(sec, table(out.tables["ops"]), "critical-path-ops")
    return [sec]


ANALYSIS = Analysis(
    name="critical_path",
    help="Critical path per step: the chain of events each of which the next waited for last, and what bounds "
         "the step (cpu, data_loading, launch, gpu, gpu_gap, communication, sync, memcpy).\n\n"
         "A step spans from its start to the later of its end and the end of the last GPU op it launched; the path "
         "covers it exactly. The graph: host work of each process (its threads read as one timeline), launches "
         "to their GPU ops, stream order, waits across streams, blocking calls waiting for the GPU op they "
         "waited for, and with --ranks all collectives matched across ranks (a collective ends when its last "
         "rank arrives). --what-if CATEGORY=FACTOR (repeatable; a bound or a kernel category such as gemm) "
         "re-times the step with those durations scaled: the predicted step, and what bounds it next.",
    examples=("traceq critical-path", "traceq critical-path --what-if data_loading=0",
              "traceq critical-path --what-if gemm=0.5 --what-if communication=0.8 -f json",
              "traceq critical-path --ranks all"),
    compute=compute,
    params=(Param("what_if", str, None, "Scale a category's durations and re-time: data_loading=0, gemm=0.5 "
                  "(repeatable).", "CATEGORY=FACTOR", multiple=True),
            Param("ranks", str, "each", "each: a path per rank; all: the ranks joined by their collectives, one "
                  "path per step.", "each|all", choices=("each", "all")),
            Param("data_pattern", str, None, "Regex: regions whose name matches also count as data loading.",
                  "REGEX"),
            top_param(20, "Ops on the path to list (0 = all).")),
    columns=COLUMNS,
    sort=("rank", "step"),
    drop_first=("path_ns", "since_first_ns", "wait_ns"),
    view=view,
    json=_json,
    csv=_csv,
    report="Critical path: what bounds each step",
    report_section=report_section,
    order=42,
    tables=(("bounds", cols("rank: rank", "step: step number", "bound: what bounds this part of the path "
                            "(cpu, data_loading, launch, gpu, gpu_gap, communication, sync, memcpy)",
                            "ns: time of the path with that bound, ns", "pct: share of the step's path, %")),
            ("ops", cols("rank: rank", "name: op, kernel or gap on the path", "kind: host | gpu | gap",
                         "category: its bound (or kernel category)", "ns: its time on the path, ns",
                         "pct: share of the path, %"))),
)
