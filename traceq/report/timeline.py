"""The report's timeline: GPU ops per (rank, device, stream) lane plus the host's step and
DataLoader spans per rank, down-sampled so the size of the page does not grow with the trace.

Down-sampling rule (pixel buckets), per rank:

- the rank's time span is cut into `TIMELINE_BUCKETS` equal buckets (1500: about one per
  horizontal pixel of a full-width plot on a desktop screen), width `w = span / 1500`;
- an op (or span) lasting at least `w` is drawn exactly, with its name in the hover: it
  covers at least one pixel, so it is what the eye sees;
- shorter ops are merged per (lane, category, bucket) into one bar from their first start
  to their last end, and neighbouring bars of the same lane and category less than one
  bucket apart are joined; the hover says how many ops a bar merges and how busy they kept
  the lane. Ops and gaps narrower than a pixel cannot be told apart anyway, so nothing
  visible is lost, and idle gaps of a bucket or more stay visible; every bar is drawn at
  least one bucket wide so that an isolated short op is not lost either;
- a segment budget caps the whole figure at `MAX_SEGMENTS` (30,000) bars: when the rule
  above yields more (many ranks and streams), the buckets are coarsened in proportion and the
  query re-run. Why 30,000: the figure is one SVG path per category (not one element per
  bar), so the browser draws 30k bars in about a second, and at ~210 bytes of JSON per bar
  (coordinates + hover text) the timeline stays under ~6.5 MB however large the run — with
  the 4.8 MB of inlined plotly.js and the bounded tables and charts (top-N rows, per-step
  charts averaged beyond 1200 bars) that keeps every report below ~12 MB, under the 20 MB
  budget. The 250 MB benchmark run needs ~3,000 bars (one rank, four streams); eight such
  ranks ~24,000.

x is milliseconds since the run's first event: ranks are aligned with `runs.clock_offset_ns`
(plus `runs.clock_refine_ns`, the run's common clock from matched collectives, where ingest
computed it) when every rank has a raw offset, otherwise each rank starts at its own first event.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

TIMELINE_BUCKETS = 1500
MAX_SEGMENTS = 30_000
MIN_BUCKETS = 50
ALT_STEP_COLOR = "#7ea6d8"

# The events the timeline draws: GPU ops (lane = rank/device/stream) and host spans (lane = rank/source).
EVENTS_SQL = """
    SELECT rank, 'gpu' AS side, device, stream, coalesce(category, 'other') AS cat, name, start_ns, end_ns
    FROM gpu_ops
    WHERE run = $run AND kind IN ('kernel', 'memcpy', 'memset') AND end_ns >= start_ns
    UNION ALL
    SELECT rank, 'host', NULL, NULL, source, name, start_ns, end_ns
    FROM regions
    WHERE run = $run AND source IN ('step', 'dataloader') AND coalesce(domain, '') <> 'gpu' AND end_ns >= start_ns
"""
# Segments of one run: those events, bucketed as the module docstring says. $buckets = buckets per rank span.
_SEGMENTS_SQL = """
WITH ev AS (""" + EVENTS_SQL + """), bounds AS (
    SELECT rank, min(start_ns) AS t0, max(end_ns) AS t1,
           greatest((max(end_ns) - min(start_ns)) // $buckets, 1) AS w
    FROM ev GROUP BY rank
), b AS (
    SELECT ev.*, bounds.w, (ev.start_ns - bounds.t0) // bounds.w AS bucket
    FROM ev JOIN bounds USING (rank)
),
-- short ops: one bar per (lane, category, bucket) ...
small AS (
    SELECT rank, side, device, stream, cat, any_value(w) AS w, min(start_ns) AS s, max(end_ns) AS e,
           count(*) AS n, sum(end_ns - start_ns) AS busy
    FROM b WHERE end_ns - start_ns < w
    GROUP BY rank, side, device, stream, cat, bucket
), prev AS (
    SELECT *, max(e) OVER (PARTITION BY rank, side, device, stream, cat ORDER BY s
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_e
    FROM small
), islands AS (
    -- ... then neighbouring bars closer than one bucket are joined (the gap is under a pixel)
    SELECT *, sum(CASE WHEN prev_e IS NULL OR s > prev_e + w THEN 1 ELSE 0 END)
                  OVER (PARTITION BY rank, side, device, stream, cat ORDER BY s ROWS UNBOUNDED PRECEDING) AS island
    FROM prev
)
SELECT rank, side, device, stream, cat, name, start_ns, end_ns,
       1::BIGINT AS n, (end_ns - start_ns)::BIGINT AS busy_ns, true AS exact, w AS bucket_ns
FROM b WHERE end_ns - start_ns >= w
UNION ALL
SELECT rank, side, device, stream, cat, NULL, min(s), max(e), sum(n)::BIGINT, sum(busy)::BIGINT, false, any_value(w)
FROM islands
GROUP BY rank, side, device, stream, cat, island
"""


@dataclass
class Timeline:
    segments: pl.DataFrame      # rank, side, device, stream, cat, name, start_ns, end_ns, n, busy_ns, exact, lane, x0_ms, x1_ms
    lanes: list[str]            # lane labels, top to bottom
    buckets: int                # buckets per rank span actually used
    n_ops: int                  # ops and spans represented
    aligned: bool               # ranks aligned on the common clock (clock_offset_ns + clock_refine_ns)


def clock(scope) -> tuple[pl.DataFrame, bool]:
    """(rank, off: ns to the run's common clock, traceq/clocks.py) of every rank of the run, and
    whether the timeline aligns the ranks on it: when every rank has a raw offset."""
    offsets = scope.df("SELECT rank, coalesce(clock_offset_ns, 0) AS raw, "
                       "coalesce(clock_offset_ns, 0) + coalesce(clock_refine_ns, 0) AS off FROM runs WHERE run = $run")
    return offsets.drop("raw"), offsets.height > 0 and bool((offsets["raw"] != 0).all())


@dataclass
class Origin:
    """Where the timeline's x = 0 lies: `common_ns` on the run's common clock when `aligned`,
    else `first_ns[rank]` on each rank's own clock."""
    aligned: bool
    first_ns: dict              # {rank: its first event the timeline draws (none drawn: its first event), own clock}
    off_ns: dict                # {rank: ns to the run's common clock}
    common_ns: int | None       # min over ranks of first_ns + off_ns (null: no event)

    def of(self, rank: int) -> int | None:
        """The origin on `rank`'s own clock (null: the rank has no event)."""
        if self.aligned:
            return None if self.common_ns is None else self.common_ns - self.off_ns.get(rank, 0)
        return self.first_ns.get(rank)


def origin(scope) -> Origin:
    """The origin of the timeline of `scope.run`, from the events it draws (a rank none of
    whose events it draws counts from its first host op, GPU op or region), as `segments` and
    `figure` place it; `traceq critical-path` shows its step starts from it."""
    first = scope.df("WITH ev AS (" + EVENTS_SQL + "), drawn AS (SELECT rank, min(start_ns) AS t FROM ev GROUP BY rank), "
                     "anything AS (SELECT rank, min(start_ns) AS t FROM ("
                     "SELECT rank, start_ns FROM gpu_ops WHERE run = $run UNION ALL "
                     "SELECT rank, start_ns FROM host_ops WHERE run = $run UNION ALL "
                     "SELECT rank, start_ns FROM regions WHERE run = $run) GROUP BY rank) "
                     "SELECT rank, coalesce(drawn.t, anything.t) AS first_ns, drawn.t IS NOT NULL AS drawn "
                     "FROM anything LEFT JOIN drawn USING (rank)")
    offsets, aligned = clock(scope)
    off = dict(offsets.iter_rows())
    firsts = dict(first.select("rank", "first_ns").iter_rows())
    # the timeline's x = 0 is its first drawn event; only when it draws none, the first of any
    pool = first.filter(pl.col("drawn")) if first["drawn"].any() else first
    common = min((t + off.get(r, 0) for r, t in pool.select("rank", "first_ns").iter_rows()), default=None)
    return Origin(aligned, firsts, off, common)


def segments(scope, buckets: int = TIMELINE_BUCKETS, max_segments: int = MAX_SEGMENTS,
             ranks: list[int] | None = None) -> Timeline:
    """The down-sampled timeline of `scope.run` (every rank of it, or those in `ranks`; the step
    window is not applied: the timeline shows the whole capture)."""
    sql = _SEGMENTS_SQL
    if ranks is not None:   # a few ranks of a run of many (report/many_ranks.py)
        keep = ", ".join(str(int(r)) for r in ranks) or "NULL"
        sql = sql.replace("WHERE run = $run AND", f"WHERE run = $run AND rank IN ({keep}) AND")
    df = scope.df(sql, {"buckets": buckets})
    for _ in range(4):   # coarsen until within budget (usually zero or one extra pass)
        if df.height <= max_segments or buckets <= MIN_BUCKETS:
            break
        buckets = max(MIN_BUCKETS, int(buckets * max_segments / df.height * 0.9))
        df = scope.df(sql, {"buckets": buckets})
    if df.height > max_segments:   # still too many (pathological lane count): keep the busiest
        df = df.sort("busy_ns", descending=True).head(max_segments)
    n_ops = int(df["n"].sum()) if df.height else 0

    offsets, aligned = clock(scope)
    if df.height == 0:
        return Timeline(df, [], buckets, 0, aligned)
    if aligned:
        df = df.join(offsets, on="rank", how="left").with_columns(
            (pl.col("start_ns") + pl.col("off")).alias("start_ns"), (pl.col("end_ns") + pl.col("off")).alias("end_ns")).drop("off")
        origin = pl.col("start_ns").min()
    else:
        origin = pl.col("start_ns").min().over("rank")
    df = df.with_columns(
        ((pl.col("start_ns") - origin) / 1e6).alias("x0_ms"),
        # a bar is drawn at least one bucket wide, so an isolated short op stays visible
        ((pl.max_horizontal(pl.col("end_ns"), pl.col("start_ns") + pl.col("bucket_ns")) - origin) / 1e6).alias("x1_ms"),
        pl.when(pl.col("side") == "host")
        .then(pl.format("rank {} · {}", pl.col("rank"), pl.col("cat")))
        .otherwise(pl.format("rank {} · gpu {} · stream {}", pl.col("rank"),
                             pl.col("device").cast(pl.String).fill_null("?"), pl.col("stream").cast(pl.String).fill_null("?")))
        .alias("lane"),
    )
    lane_order = (df.select("rank", "side", "cat", "device", "stream", "lane")
                  .with_columns(pl.when(pl.col("side") == "host").then(pl.col("cat")).otherwise(None).alias("hk"))
                  .group_by("lane").agg(pl.col("rank").first(), pl.col("side").first(), pl.col("hk").first(),
                                        pl.col("device").first(), pl.col("stream").first())
                  .sort(["rank", "side", "hk", "device", "stream"], descending=[False, True, True, False, False],
                        nulls_last=True))
    lanes = lane_order["lane"].to_list()
    index = {lane: i for i, lane in enumerate(lanes)}
    df = df.with_columns(pl.col("lane").replace_strict(index, return_dtype=pl.Int32).alias("lane_idx"))
    return Timeline(df, lanes, buckets, n_ops, aligned)


def _dur(e: pl.Expr) -> pl.Expr:
    """Duration in ns -> '12.3 µs' / '4.562 ms' (vectorised)."""
    return (pl.when(e < 1_000_000).then(pl.format("{} µs", (e / 1e3).round(1)))
            .otherwise(pl.format("{} ms", (e / 1e6).round(3))))


def figure(tl: Timeline, title: str | None = None):
    """One horizontal line segment per bar, one trace (= one SVG path) per category and kind
    (exact / merged); merged bars are drawn lighter. None when there is nothing to draw."""
    import plotly.graph_objects as go

    from .figures import base_layout, category_color

    if tl.segments.height == 0:
        return None
    busy, extent = _dur(pl.col("busy_ns")), _dur(pl.col("end_ns") - pl.col("start_ns"))
    # plotly reads hover text as (a subset of) HTML: `void f<float>(...)` must stay text
    raw = pl.col("name").fill_null("")
    cut = pl.when(raw.str.len_chars() > 90).then(raw.str.slice(0, 89) + "…").otherwise(raw)   # a cut shows
    name = (cut.str.replace_all("&", "&amp;", literal=True)
            .str.replace_all("<", "&lt;", literal=True).str.replace_all(">", "&gt;", literal=True))
    seg = tl.segments.with_columns(
        pl.when(pl.col("exact"))
        .then(pl.format("{}<br>{} · {}", name, pl.col("cat"), busy))
        .otherwise(pl.format("{} {} ops merged<br>busy {} of {}", pl.col("n"), pl.col("cat"), busy, extent))
        .alias("hover"))
    n_lanes = len(tl.lanes)
    lane_px = 24 if n_lanes <= 24 else 16
    width_px = max(4, int(lane_px * 0.7))
    order = (seg.group_by("cat").agg(pl.col("busy_ns").sum())
             .sort(["busy_ns", "cat"], descending=[True, False])["cat"].to_list())   # ties by name: one order
    # consecutive steps touch: every other one is drawn a shade darker so they can be told apart
    seg = seg.sort("start_ns").with_columns(
        ((pl.col("cat") == "step") & (pl.int_range(pl.len()).over("lane_idx", "cat") % 2 == 1)).alias("alt"))
    fig = go.Figure()
    for cat in order:
        shown_legend = False
        for exact, alt in ((True, False), (True, True), (False, False), (False, True)):
            part = seg.filter((pl.col("cat") == cat) & (pl.col("exact") == exact) & (pl.col("alt") == alt))
            if part.height == 0:
                continue
            n = part.height
            x = np.full(3 * n, np.nan)
            x[0::3] = part["x0_ms"].to_numpy()
            x[1::3] = part["x1_ms"].to_numpy()
            y = np.full(3 * n, np.nan)
            y[0::3] = y[1::3] = part["lane_idx"].to_numpy()
            hover = part["hover"].to_list()
            text: list = [None] * (3 * n)
            text[0::3] = hover
            text[1::3] = hover
            fig.add_trace(go.Scatter(
                x=x, y=y, text=text, mode="lines", name=cat, legendgroup=cat, showlegend=not shown_legend,
                # simplify=False: plotly would otherwise drop sub-pixel segments (the merged bars)
                line=dict(color=ALT_STEP_COLOR if alt else category_color(cat), width=width_px, simplify=False),
                opacity=1.0 if exact else 0.6, connectgaps=False,
                hovertemplate="%{text}<br>at %{x:,.3f} ms<extra></extra>",
            ))
            shown_legend = True
    fig.update_layout(base_layout(title, height=max(200, 110 + lane_px * n_lanes)))
    fig.update_layout(
        xaxis=dict(title="time (ms) since " + ("the run's first event" if tl.aligned else "each rank's first event"),
                   zeroline=False, showgrid=True),
        yaxis=dict(tickvals=list(range(n_lanes)), ticktext=tl.lanes, fixedrange=True, range=[n_lanes - 0.5, -0.5],
                   showgrid=False, zeroline=False, ticks="outside", ticklen=6, tickcolor="rgba(0,0,0,0)"),
        hovermode="closest", legend=dict(orientation="h", y=1.0, yanchor="bottom", x=0, xanchor="left"),
        margin=dict(l=190, r=20, t=40 if not title else 70, b=50),
    )
    return fig
