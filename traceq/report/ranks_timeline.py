"""The report's cross-rank view: every rank's collective kernels on the common clock, one
row per rank, so arrival skew and the straggler are visible (traceq.analyses.ranks)."""
from __future__ import annotations

import polars as pl

from .figures import base_layout, category_color, esc

MAX_INSTANCES = 300   # the first instances of the run; enough to see a pattern, light to draw


def ranks_timeline(arrivals: pl.DataFrame | None, straggler: int | None = None,
                   title: str = "Collectives per rank on the common clock"):
    import plotly.graph_objects as go

    if arrivals is None or arrivals.height == 0:
        return None
    firsts = arrivals.group_by("grp", "coll", "k").agg(pl.col("start_ns").min().alias("t")).sort("t")
    keep = firsts.head(MAX_INSTANCES).select("grp", "coll", "k")
    a = arrivals.join(keep, on=["grp", "coll", "k"]).sort("rank", "start_ns")
    t0 = a["start_ns"].min()
    ranks = sorted(a["rank"].unique().to_list())
    fig = go.Figure()
    fig.update_layout(base_layout(title, height=min(900, 120 + 22 * len(ranks))))
    for coll in sorted(a["coll"].unique().to_list()):
        d = a.filter(pl.col("coll") == coll)
        fig.add_trace(go.Bar(
            y=[f"rank {r}" for r in d["rank"]], x=((d["end_ns"] - d["start_ns"]) / 1e6).to_list(),
            base=((d["start_ns"] - t0) / 1e6).to_list(), orientation="h", name=esc(coll),
            marker_color=category_color("communication") if coll == "AllReduce" else category_color(coll),
            customdata=list(zip((d["late_ns"] / 1e6).to_list(), d["k"].to_list())),
            hovertemplate=esc(coll) + " #%{customdata[1]}: starts %{base:,.3f} ms, "
                          "%{customdata[0]:,.3f} ms after the first rank<extra>%{y}</extra>"))
    fig.update_layout(barmode="overlay", xaxis_title="ms on the common clock (0 = first collective)",
                      yaxis=dict(categoryorder="array", categoryarray=[f"rank {r}" for r in reversed(ranks)]))
    if straggler is not None:
        fig.add_annotation(text=f"straggler: rank {straggler}", xref="paper", yref="paper", x=0, y=1.0,
                           showarrow=False, xanchor="left", yanchor="bottom")
    return fig
