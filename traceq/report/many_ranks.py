"""The report of a run of many ranks: per-rank tables and figures summarised.

A run of more than `MANY_RANKS` ranks (16) would give every per-rank table hundreds of rows and
every per-rank figure hundreds of bars, lanes or traces. Above that count a section shows
instead:

- a quantile table: per numeric column its min, p10, p25, median, p75, p90 and max over the
  rows (quantiles interpolated linearly between the two nearest values, numpy's default; null
  values left out), the rank (and step, for rows per step) where the min and the max are;
- the `WORST_RANKS` (5) worst ranks by the section's key metric (idle %, exposed
  communication, arrival lateness, ...), every column of their rows;
- figures as distributions (a box per metric or per step, across the ranks) plus the worst
  ranks' own bars or traces; the timelines draw a few chosen ranks (rank 0, the straggler or
  worst rank, the median rank) and say which;
- a note saying the table is summarised and which command prints every rank
  (`traceq <analysis> -f csv`).

At `MANY_RANKS` ranks or fewer nothing here is called and the page is what it always was.
"""
from __future__ import annotations

from ..lazy import polars as pl

MANY_RANKS = 16      # a run of more ranks than this gets summarised per-rank tables and figures
WORST_RANKS = 5      # the worst ranks listed (and drawn) beside a summary
QUANTILES = (("min", 0.0), ("p10", 0.10), ("p25", 0.25), ("median", 0.50), ("p75", 0.75), ("p90", 0.90),
             ("max", 1.0))
IDENTITY = ("rank", "step", "device")    # columns that say which row, never summarised


def many(n_ranks: int | None) -> bool:
    """True when a run of `n_ranks` ranks gets the summarised report."""
    return n_ranks is not None and n_ranks > MANY_RANKS


def ranks_of(df) -> int:
    return df["rank"].n_unique() if df is not None and "rank" in df.columns and df.height else 0


def where(row: dict) -> str:
    """'rank 3' or 'rank 3 step 7': which row a min or max is in."""
    return " ".join(f"{c} {row[c]}" for c in IDENTITY if c in row and row[c] is not None) or "—"


def quantiles(df, columns: list[str] | None = None):
    """(frame, at): the frame has one row per statistic (`stat`: min, p10, ..., max) and one
    column per numeric column of `df` (or `columns`); `at[column]` is (where the min is, where
    the max is), as `where` words it (the first such row in `df`'s order)."""
    cols = columns or [c for c in df.columns if c not in IDENTITY and df[c].dtype.is_numeric()
                       and df[c].dtype != pl.Boolean]
    rows, at = [], {}
    for name, q in QUANTILES:
        row = {"stat": name}
        for c in cols:
            v = df[c].drop_nulls().drop_nans() if df[c].dtype.is_float() else df[c].drop_nulls()
            row[c] = float(v.quantile(q, interpolation="linear")) if v.len() else None
        rows.append(row)
    ident = [c for c in IDENTITY if c in df.columns]
    for c in cols:
        d = df.select(*ident, c).with_row_index("_i").filter(pl.col(c).is_not_null() & pl.col(c).is_not_nan()
                                                               if df[c].dtype.is_float() else pl.col(c).is_not_null())
        if not d.height:
            at[c] = ("—", "—")
            continue
        lo = d.sort([c, "_i"]).row(0, named=True)
        hi = d.sort([c, "_i"], descending=[True, False]).row(0, named=True)
        at[c] = (where(lo), where(hi))
    schema = {"stat": pl.String, **{c: pl.Float64 for c in cols}}
    return pl.DataFrame(rows, schema=schema), at


def quantile_table(df, caption: str, columns: list[str] | None = None):
    """The quantile table of `df` for the page (report.html.Table): the min and max rows name
    their rank beside each value."""
    from .html import table

    q, at = quantiles(df, columns)
    if len(q.columns) <= 1:
        return None
    t = table(q, caption=caption, max_rows=len(QUANTILES))
    if t is None:
        return None
    for i, (name, _) in enumerate(QUANTILES):
        if name not in ("min", "max"):
            continue
        side = 0 if name == "min" else 1
        t.rows[i] = [cell if j == 0 or not cell[0] else (f"{cell[0]} ({at[col][side]})", cell[1])
                     for j, (col, cell) in enumerate(zip(q.columns, t.rows[i]))]
    return t


def key_metric(df, by) -> str | None:
    """`by` itself, or of several candidates the first whose worst value differs between the
    ranks (a metric equal on every rank names no worst rank), else the first present."""
    cands = [by] if isinstance(by, str) else [c for c in by if c in df.columns]
    for c in cands:
        v = df.group_by("rank").agg(pl.col(c).max())[c].drop_nulls() if "rank" in df.columns else df[c].drop_nulls()
        if v.len() and v.min() != v.max():
            return c
    return cands[0] if cands else None


def worst(df, by, k: int = WORST_RANKS, descending: bool = True):
    """The `k` worst ranks by `by` (a column, or candidates: key_metric): each rank's worst row
    (largest `by`, or smallest when not `descending`), the worst first; ties by rank."""
    by = key_metric(df, by)
    d = df.filter(pl.col(by).is_not_null())
    if d[by].dtype.is_float():
        d = d.filter(~pl.col(by).is_nan())
    d = d.sort([by, "rank"], descending=[descending, False], nulls_last=True)
    return d.unique("rank", keep="first", maintain_order=True).head(k)


def worst_table(df, by, caption: str, k: int = WORST_RANKS, descending: bool = True):
    from .html import table

    return table(worst(df, by, k, descending), caption=caption, max_rows=k)


def words(col: str) -> str:
    """A column as words: exposed_ns -> 'exposed', idle_pct -> 'idle %'."""
    for suffix, unit in (("_ns", ""), ("_pct", " %"), ("_ms", " (ms)"), ("_bytes", " (bytes)")):
        if col.endswith(suffix):
            return col[: -len(suffix)].replace("_", " ") + unit
    return col.replace("_", " ")


def note(n: int, command: str, rows: str = "rank") -> str:
    return (f"Summarised: {n} ranks (more than {MANY_RANKS}): quantiles over the {rows}s and the "
            f"{WORST_RANKS} worst ranks instead of a row per {rows}; every {rows}: `{command}`.")


def summarise(sec, df, by, command: str, kind: str, what: str = "Per rank", descending: bool = True,
              rows: str = "rank", columns: list[str] | None = None) -> None:
    """Add to `sec` the quantile table of `df` and its worst ranks by `by` (a column, or
    candidates: key_metric), with the note."""
    from .parts import add_table

    n = ranks_of(df)
    by = key_metric(df, by)
    add_table(sec, quantile_table(df, f"{what}: quantiles over {n} ranks"
                                  + (f" × {rows}s" if rows != "rank" else ""), columns), f"{kind}-quantiles")
    add_table(sec, worst_table(df, by, f"{what}: the {min(WORST_RANKS, n)} worst ranks by "
                               f"{'highest' if descending else 'lowest'} {words(by)}", descending=descending),
              f"{kind}-worst")
    sec.notes.append(note(n, command, rows))


# ---------------------------------------------------------------- figures
def rank_boxes(df, cols: list[tuple[str, str]], title: str, unit: str, scale: float = 1.0, worst_ranks=()):
    """One box per metric (`cols`: column, label) over the ranks' values, times `scale`; the
    worst ranks drawn as labelled points beside the boxes."""
    import plotly.graph_objects as go

    from .figures import base_layout

    if df is None or not df.height:
        return None
    fig = go.Figure()
    fig.update_layout(base_layout(title, height=380))
    ranks = df["rank"].to_list()
    for col, label in cols:
        if col not in df.columns:
            continue
        fig.add_trace(go.Box(y=(df[col] * scale).to_list(), name=label, boxpoints="outliers",
                             text=[f"rank {r}" for r in ranks], marker_color="#4c78a8", showlegend=False,
                             hovertemplate="%{text}: %{y:,.3f} " + unit + "<extra>" + label + "</extra>"))
    w = df.filter(pl.col("rank").is_in(list(worst_ranks)))
    for r in worst_ranks:
        d = w.filter(pl.col("rank") == r)
        if not d.height:
            continue
        labels = [label for col, label in cols if col in df.columns]
        fig.add_trace(go.Scatter(x=labels, y=[d[col][0] * scale if d[col][0] is not None else None
                                              for col, _ in cols if col in df.columns],
                                 mode="markers", name=f"rank {r}", marker=dict(size=9, symbol="diamond"),
                                 hovertemplate="rank " + str(r) + ": %{y:,.3f} " + unit + "<extra>%{x}</extra>"))
    fig.update_layout(yaxis_title=unit, boxmode="group")
    return fig


def step_boxes(steps, col: str, title: str, unit: str = "ms", scale: float = 1e-6, worst_ranks=()):
    """Per step, a box of `col` over the ranks, and a line per worst rank (its own steps)."""
    import plotly.graph_objects as go

    from .figures import base_layout

    step = "step" if "step" in steps.columns else None
    if steps is None or not steps.height or col not in steps.columns or step is None:
        return None
    d = steps.filter(pl.col(step).is_not_null()).sort(step, "rank")
    x = d[step].cast(pl.String).to_list()
    fig = go.Figure()
    fig.update_layout(base_layout(title, height=380))
    fig.add_trace(go.Box(x=x, y=(d[col] * scale).to_list(), name="all ranks", boxpoints="outliers",
                         text=[f"rank {r}" for r in d["rank"]], marker_color="#4c78a8",
                         hovertemplate="step %{x}, %{text}: %{y:,.3f} " + unit + "<extra></extra>"))
    for r in worst_ranks:
        w = d.filter(pl.col("rank") == r)
        if w.height:
            fig.add_trace(go.Scatter(x=w[step].cast(pl.String).to_list(), y=(w[col] * scale).to_list(),
                                     mode="lines+markers", name=f"rank {r}",
                                     hovertemplate="step %{x}, rank " + str(r) + ": %{y:,.3f} " + unit
                                                   + "<extra></extra>"))
    fig.update_layout(xaxis=dict(title="step", type="category"), yaxis_title=unit)
    return fig


# ---------------------------------------------------------------- the ranks the timelines draw
def chosen_ranks(ctx) -> list[tuple[int, str]]:
    """The ranks a timeline of a many-rank run draws, with why: the first rank, the straggler
    (traceq ranks, when the page computed it; else the rank with the most GPU idle %), the median rank by the same
    measure. Kept in `ctx.results["chosen_ranks"]` so every timeline draws the same."""
    if "chosen_ranks" in ctx.results:
        return ctx.results["chosen_ranks"]
    ranks = sorted(int(r) for r in ctx.manifest["rank"].to_list())
    picked: list[tuple[int, str]] = [(ranks[0], "first rank")] if ranks else []
    metric, label = None, ""
    rr = ctx.results.get("ranks")      # traceq ranks' result, computed by the page first
    straggler = rr.straggler.get("rank") if rr is not None else None
    if rr is not None and "late_arrival_ms" in rr.ranks.columns and rr.ranks["late_arrival_ms"].drop_nulls().len():
        metric, label = rr.ranks.select("rank", pl.col("late_arrival_ms").alias("m")), "arrival lateness"
    elif ctx.results.get("summary") is not None and ctx.results["summary"].height:
        metric, label = ctx.results["summary"].select("rank", pl.col("idle_pct").alias("m")), "GPU idle %"
    if straggler is not None:
        picked.append((int(straggler), "the straggler"))
    elif metric is not None:
        top = metric.drop_nulls().sort(["m", "rank"], descending=[True, False])
        if top.height:
            picked.append((int(top["rank"][0]), f"highest {label}"))
    if metric is not None:
        m = metric.drop_nulls().sort(["m", "rank"])
        if m.height:
            picked.append((int(m["rank"][(m.height - 1) // 2]), f"median {label}"))
    out: list[tuple[int, str]] = []
    for r, why in picked:
        if r not in [o[0] for o in out]:
            out.append((r, why))
        else:
            out = [(o[0], o[1] + ", " + why) if o[0] == r else o for o in out]
    ctx.results["chosen_ranks"] = out
    return out


def chosen_words(chosen: list[tuple[int, str]], n: int) -> str:
    return (f"{n} ranks: drawn here {len(chosen)} of them, "
            + "; ".join(f"rank {r} ({why})" for r, why in chosen)
            + f" (more than {MANY_RANKS} ranks are not drawn lane by lane).")
