"""Plotly figures of the report, built from the analyses' DataFrames (no analysis here).

Every builder returns a `plotly.graph_objects.Figure`, or None when its input has no rows
(the section then says so instead of showing an empty chart). Colours are fixed per
category, so a category looks the same in every chart of a report.
"""
from __future__ import annotations

import polars as pl

# A stable colour per category (traceq.rules.categories) and per host span source.
_COLORS = {
    "gemm": "#1f77b4", "conv": "#17becf", "attention": "#9467bd", "normalization": "#bcbd22",
    "elementwise": "#2ca02c", "reduce": "#8c564b", "optimizer": "#e377c2", "communication": "#ff7f0e",
    "memcpy": "#d62728", "memset": "#f7b6d2", "transpose": "#ffbb78", "moe_routing": "#c49c94", "sync": "#7f7f7f",
    "other": "#c7c7c7",
    "step": "#aec7e8", "dataloader": "#d62728",
}
_SPARE = ["#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#31a354", "#756bb1"]

COMPUTE, NON_COMPUTE, IDLE = "#1f77b4", "#ff7f0e", "#d9d9d9"
AVOIDABLE = "#d62728"
EXPOSED, OVERLAPPED = "#d62728", "#2ca02c"
DATA_WAIT, OTHER = "#d62728", "#9ecae1"


def category_color(cat: str | None) -> str:
    if cat in _COLORS:
        return _COLORS[cat]
    return _SPARE[sum(map(ord, cat or "")) % len(_SPARE)]


TEMPLATE = "plotly_white"


def base_layout(title: str | None, height: int = 360) -> dict:
    # template "none" here: the page applies TEMPLATE to every figure in the browser, so its
    # ~7 KB are in the file once, and plotly.py does not deep-copy it per figure (~90 ms each)
    # the title at the very top, the legend on the left just above the plot: plotly's toolbar
    # (top right of the figure, shown on hover) covers neither
    return dict(
        title=dict(text=title, x=0, xanchor="left", yref="container", y=1, yanchor="top", pad=dict(t=8),
                   font=dict(size=15)) if title else None,
        template="none", height=height, margin=dict(l=60, r=20, t=76 if title else 44, b=50),
        font=dict(family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif", size=12),
        legend=dict(orientation="h", y=1.02, yanchor="bottom", x=0, xanchor="left"),
        hoverlabel=dict(namelength=-1),
    )


def _fig(layout: dict):
    import plotly.graph_objects as go

    fig = go.Figure()
    fig.update_layout(layout)
    return fig


def esc(text: str) -> str:
    """Plotly renders labels and hover text as a subset of HTML: `f<float>` must stay text."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _short(names: list[str], width: int = 48) -> list[str]:
    from ..text import shorten

    return [esc(shorten(n or "", width)) for n in names]


# ---------------------------------------------------------------- categories (hotspots)
def category_bars(hot: pl.DataFrame, title: str = "GPU time per category"):
    """Total GPU op time per category (hotspots rows summed); avoidable categories in red."""
    import plotly.graph_objects as go

    if hot is None or hot.height == 0:
        return None
    cat = (hot.group_by("category").agg(pl.col("total_ns").sum(), pl.col("count").sum(), pl.col("avoidable").any())
           .sort("total_ns", descending=True))
    total = cat["total_ns"].sum() or 1
    fig = _fig(base_layout(title, height=340))
    fig.add_trace(go.Bar(
        x=cat["category"].to_list(), y=(cat["total_ns"] / 1e6).to_list(),
        marker=dict(color=[category_color(c) for c in cat["category"]],
                    line=dict(color=[AVOIDABLE if a else "rgba(0,0,0,0)" for a in cat["avoidable"]], width=2.5)),
        customdata=list(zip(cat["count"].to_list(), (100 * cat["total_ns"] / total).round(1).to_list(),
                            ["avoidable" if a else "" for a in cat["avoidable"]])),
        hovertemplate="%{x}: %{y:,.3f} ms (%{customdata[1]} %), %{customdata[0]:,} ops %{customdata[2]}<extra></extra>",
        showlegend=False,
    ))
    fig.update_layout(yaxis_title="GPU time (ms)", xaxis_title=None)
    return fig


# ---------------------------------------------------------------- summary (temporal breakdown)
def rank_breakdown(summary: pl.DataFrame, title: str = "GPU time per rank: compute, non-compute, idle"):
    """Stacked bars per rank of compute / non-compute / idle time (the HTA temporal breakdown)."""
    import plotly.graph_objects as go

    if summary is None or summary.height == 0 or "span_ns" not in summary.columns:
        return None
    df = summary.sort("rank")
    ranks = [f"rank {r}" for r in df["rank"]]
    fig = _fig(base_layout(title, height=max(220, 70 + 34 * df.height)))
    for col, label, color in (("compute_ns", "compute", COMPUTE), ("non_compute_ns", "non-compute", NON_COMPUTE),
                              ("idle_ns", "idle", IDLE)):
        if col not in df.columns:
            continue
        pct = (100 * df[col] / df["span_ns"]).fill_nan(None).round(1).to_list()
        fig.add_trace(go.Bar(y=ranks, x=(df[col] / 1e6).to_list(), name=label, orientation="h",
                             marker_color=color, customdata=pct,
                             hovertemplate="%{y} " + label + ": %{x:,.3f} ms (%{customdata} % of span)<extra></extra>"))
    fig.update_layout(barmode="stack", xaxis_title="ms of the rank's GPU span", yaxis=dict(autorange="reversed"),
                      legend_traceorder="normal")
    return fig


# ---------------------------------------------------------------- regions (breakdown)
def region_bars(regions: pl.DataFrame, top: int = 25, title: str = "Regions: CPU time vs GPU time"):
    """Grouped horizontal bars per region name: CPU total and GPU busy (and projected) time."""
    import plotly.graph_objects as go

    if regions is None or regions.height == 0:
        return None
    cpu = _first(regions, "cpu_total_ns", "cpu_ns", "cpu_time_ns")
    if cpu is None:
        return None
    df = regions
    if "rank" in df.columns and df["rank"].n_unique() > 1:   # per-rank rows: sum over ranks
        aggs = [pl.col(c).sum() for c in df.columns if c.endswith("_ns") and df[c].dtype.is_numeric()]
        df = df.group_by("region" if "region" in df.columns else "name").agg(aggs)
    name_col = "region" if "region" in df.columns else "name"
    df = df.sort(cpu, descending=True).head(top)
    names = df[name_col].fill_null("").to_list()
    fig = _fig(base_layout(title, height=max(260, 90 + 26 * df.height * 2)))
    series = [(cpu, "CPU time", "#9467bd")]
    for cols, label, color in ((("gpu_busy_ns", "gpu_busy_total_ns"), "GPU busy", "#2ca02c"),
                               (("gpu_proj_ns", "gpu_projected_ns", "gpu_proj_total_ns"), "GPU projected", "#98df8a")):
        c = _first(df, *cols)
        if c is not None:
            series.append((c, label, color))
    for col, label, color in series:
        fig.add_trace(go.Bar(y=_short(names), x=(df[col].fill_null(0) / 1e6).to_list(), name=label, orientation="h",
                             marker_color=color, customdata=[esc(n) for n in names],
                             hovertemplate="%{customdata}<br>" + label + ": %{x:,.3f} ms<extra></extra>"))
    fig.update_layout(barmode="group", xaxis_title="total time (ms)", yaxis=dict(autorange="reversed"),
                      margin=dict(l=300, r=20, t=50, b=50))
    return fig


def _first(df: pl.DataFrame, *cols: str) -> str | None:
    for c in cols:
        if c in df.columns:
            return c
    return None


MAX_STEP_BARS = 1200   # per-step charts: more (step, rank) bars than this are averaged over windows of steps


def _step_axis(df: pl.DataFrame) -> tuple[pl.DataFrame, list, dict]:
    """x values for per-step charts: the step number, or (step, rank) pairs on a two-level
    axis when there are several ranks. Returns the rows in x order, x, and the xaxis layout.
    With more than MAX_STEP_BARS rows (long timer logs), consecutive steps are averaged in
    windows of k steps, labelled "first–last"."""
    step = _first(df, "step", "step_index")
    title = "step"
    if step and df.height > MAX_STEP_BARS:
        n_ranks = df["rank"].n_unique() if "rank" in df.columns else 1
        n_steps = df[step].n_unique()
        k = -(-n_steps * n_ranks // MAX_STEP_BARS)
        order = df[step].unique().sort()
        win = pl.DataFrame({step: order, "_win": pl.int_range(0, len(order), eager=True) // k})
        keys = ["rank", "_win"] if "rank" in df.columns else ["_win"]
        nums = [c for c in df.columns if c.endswith(("_ns", "_pct")) and df[c].dtype.is_numeric()]
        df = (df.join(win, on=step).group_by(keys)
              .agg(pl.col(step).min().alias("_lo"), pl.col(step).max().alias("_hi"), *[pl.col(c).mean() for c in nums])
              .with_columns(pl.format("{}–{}", "_lo", "_hi").alias("_step"), pl.col("_lo").alias(step)))
        title = f"steps (mean of each window of {k})"
    else:
        df = df.with_columns((pl.col(step).cast(pl.String) if step else pl.lit("all")).alias("_step"))
    multi = "rank" in df.columns and df["rank"].n_unique() > 1
    if not multi:
        df = df.sort(step) if step else df
        return df, df["_step"].to_list(), dict(title=title, type="category")
    df = df.sort([step, "rank"] if step else ["rank"])
    x = [df["_step"].to_list(), [f"r{r}" for r in df["rank"]]]
    return df, x, dict(title=title + ", rank", type="multicategory")


# ---------------------------------------------------------------- stalls
def stall_chart(steps: pl.DataFrame, title: str = "Data-loading stalls per step"):
    """Per step (and rank, on a two-level axis): time waiting on data stacked under the rest of
    the step; diamonds: GPU idle while the host waited for data."""
    import plotly.graph_objects as go

    if steps is None or steps.height == 0:
        return None
    step_col = _first(steps, "step_ns", "step_time_ns", "dur_ns")
    wait_col = _first(steps, "data_wait_ns", "wait_data_ns", "data_ns")
    if step_col is None or wait_col is None:
        return None
    df, x, xaxis = _step_axis(steps)
    wait = df[wait_col].fill_null(0)
    fig = _fig(base_layout(title, height=360))
    fig.add_trace(go.Bar(x=x, y=(wait / 1e6).to_list(), name="waiting on data", marker_color=DATA_WAIT,
                         hovertemplate="step %{x}: data wait %{y:,.3f} ms<extra></extra>"))
    fig.add_trace(go.Bar(x=x, y=((df[step_col] - wait).clip(0) / 1e6).to_list(), name="rest of step", marker_color=OTHER,
                         hovertemplate="step %{x}: rest %{y:,.3f} ms<extra></extra>"))
    idle_col = _first(df, "gpu_idle_waiting_ns", "gpu_idle_data_ns")
    if idle_col is not None and df[idle_col].fill_null(0).sum() > 0:
        fig.add_trace(go.Scatter(x=x, y=(df[idle_col].fill_null(0) / 1e6).to_list(), name="GPU idle while waiting",
                                 mode="markers", marker=dict(symbol="diamond", size=9, color="#000000"),
                                 hovertemplate="step %{x}: GPU idle while loading data %{y:,.3f} ms<extra></extra>"))
    fig.update_layout(barmode="stack", xaxis=xaxis, yaxis_title="ms")
    return fig


# ---------------------------------------------------------------- overlap
def overlap_chart(steps: pl.DataFrame, title: str = "Communication per step: overlapped vs exposed"):
    """Per step (and rank): communication time hidden behind compute, with the exposed rest on top."""
    import plotly.graph_objects as go

    if steps is None or steps.height == 0:
        return None
    comm = _first(steps, "comm_ns")
    over = _first(steps, "overlapped_ns", "overlap_ns")
    exposed = _first(steps, "exposed_ns", "exposed_comm_ns")
    if comm is None or over is None or exposed is None or steps[comm].fill_null(0).sum() == 0:
        return None
    df, x, xaxis = _step_axis(steps)
    fig = _fig(base_layout(title, height=360))
    fig.add_trace(go.Bar(x=x, y=(df[over].fill_null(0) / 1e6).to_list(), name="overlapped", marker_color=OVERLAPPED,
                         hovertemplate="step %{x}: overlapped %{y:,.3f} ms<extra></extra>"))
    fig.add_trace(go.Bar(x=x, y=(df[exposed].fill_null(0) / 1e6).to_list(), name="exposed", marker_color=EXPOSED,
                         hovertemplate="step %{x}: exposed %{y:,.3f} ms<extra></extra>"))
    fig.update_layout(barmode="stack", xaxis=xaxis, yaxis_title="communication (ms)")
    return fig


# ---------------------------------------------------------------- diff
def diff_category_bars(cat: pl.DataFrame, a: str, b: str, title: str | None = None):
    """Per category: total GPU time in A and B (grouped bars)."""
    import plotly.graph_objects as go

    if cat is None or cat.height == 0:
        return None
    ta, tb = _first(cat, "total_a_ns", "a_total_ns", "a_ns"), _first(cat, "total_b_ns", "b_total_ns", "b_ns")
    if ta is None or tb is None:
        return None
    name = _first(cat, "category", "name", "key")
    df = cat.with_columns((pl.col(tb).fill_null(0) - pl.col(ta).fill_null(0)).abs().alias("_d")).sort("_d", descending=True).head(20)
    fig = _fig(base_layout(title or f"GPU time per category: {esc(a)} vs {esc(b)}", height=360))
    for col, label, color in ((ta, a, "#9ecae1"), (tb, b, "#08519c")):
        fig.add_trace(go.Bar(x=df[name].to_list(), y=(df[col].fill_null(0) / 1e6).to_list(), name=esc(label),
                             marker_color=color, hovertemplate="%{x}: %{y:,.3f} ms (" + esc(label) + ")<extra></extra>"))
    fig.update_layout(barmode="group", yaxis_title="GPU time (ms)")
    return fig


# ---------------------------------------------------------------- comparison of runs (compare)
def metric_bars(df: pl.DataFrame, metric: str):
    """One metric across configurations (traceq.experiments.compare rows): mean with ±sd bars.
    Values in s are drawn in ms."""
    import plotly.graph_objects as go

    d = df.filter(pl.col("metric") == metric)
    if d.height == 0:
        return None
    unit = d["unit"][0] or ""
    scale, shown = (1e3, "ms") if unit == "s" else (1.0, unit)
    fig = _fig(base_layout(esc(f"{metric} ({shown})"), height=300))
    fig.add_trace(go.Bar(
        x=_short(d["config"].to_list(), 32), y=(d["mean"] * scale).to_list(),
        error_y=dict(type="data", array=(d["sd"].fill_null(0) * scale).to_list(), visible=True),
        customdata=list(zip(d["runs"].to_list(), d["change_pct"].to_list())),
        hovertemplate="%{x}<br>mean %{y:.4g} " + esc(shown) + " ± sd<br>%{customdata[0]} run(s), "
                      "change %{customdata[1]:+.1f} %<extra></extra>",
        marker_color="#4c78a8"))
    fig.update_layout(yaxis_title=esc(shown), showlegend=False)
    return fig


# ---------------------------------------------------------------- roofline
def roofline_figure(pts: pl.DataFrame, roofs: list[tuple[str, float]], peak_tbps: float | None,
                    device: str | None, title: str = "Roofline: achieved TFLOP/s per op and shape"):
    """Log-log roofline: x = arithmetic intensity (flop/byte), y = achieved TFLOP/s, one point
    per roofline row sized by its GPU time and coloured by op family; a horizontal roof per
    peak (dtype, unit) of the device and the bandwidth slope y = intensity × peak TB/s."""
    import math

    import plotly.graph_objects as go

    if pts is None or pts.height == 0:
        return None
    fig = _fig(base_layout(title + (f" on {esc(device)}" if device else ""), height=460))
    xs = pts["intensity"].to_list()
    lo, hi = max(min(xs) / 4, 1e-3), max(xs) * 4
    if peak_tbps:
        for name, peak in roofs[:3]:
            ridge = peak / peak_tbps
            x = [lo, min(max(ridge, lo), hi * 10), hi * 10]
            fig.add_trace(go.Scatter(x=x, y=[min(v * peak_tbps, peak) for v in x], mode="lines",
                                     line=dict(width=1.5, dash="dot" if name != roofs[0][0] else "solid",
                                               color="#444"),
                                     name=f"roof {esc(name)} {peak:,.0f} TFLOP/s, {peak_tbps:g} TB/s",
                                     hoverinfo="skip"))
    total = max(pts["kernel_ns"].sum(), 1)
    for cat in pts["category"].unique(maintain_order=True).to_list():
        d = pts.filter(pl.col("category") == cat)
        size = [6 + 40 * math.sqrt(v / total) for v in d["kernel_ns"].to_list()]
        fig.add_trace(go.Scatter(
            x=d["intensity"].to_list(), y=d["tflops"].to_list(), mode="markers", name=esc(cat or "other"),
            marker=dict(size=size, color=category_color(cat), opacity=0.75, line=dict(width=0.5, color="#333")),
            customdata=list(zip(_short(d["op"].to_list(), 40), _short(d["input_dims"].fill_null("").to_list(), 60),
                                (d["kernel_ns"] / 1e6).round(3).to_list(),
                                d["roofline_pct"].round(1).to_list())),
            hovertemplate="%{customdata[0]} %{customdata[1]}<br>%{y:,.2f} TFLOP/s at %{x:,.1f} flop/B, "
                          "%{customdata[2]} ms, %{customdata[3]} % of roofline<extra></extra>"))
    fig.update_layout(xaxis=dict(type="log", title="arithmetic intensity (flop/byte)"),
                      yaxis=dict(type="log", title="achieved TFLOP/s"))
    return fig
