"""Validation at the edge: event times every ingestor must pass before anything is stored.

An event is dropped (and counted in one warning with an example) when its times

- are missing or cannot be represented: not a finite number, or beyond ±2**62 ns (int64 ns
  with headroom, so that `end - start` and sums of a few of them cannot overflow);
- are inverted: it ends before it starts;
- lie absurdly far from the trace's own span. "Absurd" is defined robustly, from the
  middle half of the trace's start times (immune to a minority of garbage values):
  with q25/q75 the quartiles of all valid start times and w = max(q75 - q25, 1 s), an
  event is kept only if  q25 - 1000·w <= start  and  end <= q75 + 1000·w.
  For a trace whose middle half spans a second that allows ~17 minutes beyond it; for a
  one-hour capture, 1000 hours. Profilers killed mid-write, clock wraps and `1e300`
  placeholders are far beyond that; real activity never is.

Nothing here is kept silently: each ingestor reports the count and one example.
"""
from __future__ import annotations

from typing import Callable

import polars as pl

from .ns_times import LIMIT_NS

ABSURD_FACTOR = 1000
MIN_WIDTH_NS = 1_000_000_000


def representable(expr: pl.Expr) -> pl.Expr:
    """True where a float64 ns value is finite and within ±LIMIT_NS."""
    return expr.is_finite() & (expr.abs() <= float(LIMIT_NS))


def _bounds(frames: list[pl.DataFrame]) -> tuple[int, int, int] | None:
    """(lowest start, highest end, margin) of the events kept, in ns (module doc)."""
    parts = [f.select(pl.col("start_ns").filter(sane())) for f in frames if f.height]
    starts = pl.concat(parts) if parts else pl.DataFrame({"start_ns": []}, schema={"start_ns": pl.Int64})
    if starts.height == 0:
        return None
    q25, q75 = starts.select(pl.col("start_ns").quantile(0.25, "lower").alias("q25"),
                             pl.col("start_ns").quantile(0.75, "higher").alias("q75")).row(0)
    return _margin(int(q25), int(q75))


def bounds_of(starts) -> tuple[int, int, int] | None:
    """The bounds (see `_bounds`) from the start times (int64 ns) of the sane events alone,
    for readers that stream their events and collect only these: a numpy array, reordered
    in place (the quartiles are order statistics: polars' "lower"/"higher" quantiles)."""
    import numpy as np

    n = len(starts)
    if n == 0:
        return None
    lo, hi = int(np.floor((n - 1) * 0.25)), int(np.ceil((n - 1) * 0.75))
    starts.partition([lo, hi])
    return _margin(int(starts[lo]), int(starts[hi]))


def _margin(q25: int, q75: int) -> tuple[int, int, int]:
    w = max(q75 - q25, MIN_WIDTH_NS)
    return q25 - ABSURD_FACTOR * w, q75 + ABSURD_FACTOR * w, ABSURD_FACTOR * w


def keep_expr(bounds: tuple[int, int, int] | None) -> pl.Expr:
    """The rows `check_times` keeps, given the trace's bounds."""
    keep = sane()
    if bounds is not None:
        keep = keep & (pl.col("start_ns") >= bounds[0]) & (pl.col("end_ns") <= bounds[1])
    return keep


def sane() -> pl.Expr:
    """True where `start_ns`/`end_ns` are present, ordered and within ±LIMIT_NS."""
    s, e = pl.col("start_ns"), pl.col("end_ns")
    return (s.is_not_null() & e.is_not_null() & (e >= s)
            & (s.abs() <= LIMIT_NS) & (e.abs() <= LIMIT_NS)).fill_null(False)


def check_times(frames: dict[str, pl.DataFrame], describe: Callable[[dict], str],
                what: str = "events", reference: list[pl.DataFrame] = ()) -> tuple[dict[str, pl.DataFrame], str | None]:
    """Drop the rows of `frames` (each with Int64 `start_ns`/`end_ns`; null = missing or not
    representable) whose times are invalid or absurd (module doc). Returns the kept frames and
    one warning (None when nothing was dropped) counting the drops with an example, which
    `describe(row)` formats from the first dropped row. `reference` frames (already checked)
    count for the trace's span too."""
    present = [f.select("start_ns", "end_ns") for f in [*frames.values(), *reference] if f.height]
    bounds = _bounds(present)
    keep = keep_expr(bounds)
    out, dropped, example = {}, 0, None
    for name, f in frames.items():
        if f.height == 0:
            out[name] = f
            continue
        mask = f.select(keep.alias("k"))["k"]
        n_bad = int(mask.len() - mask.sum())
        if n_bad:
            if example is None:
                example = describe(f.filter(~mask).row(0, named=True))
            f = f.filter(mask)
            dropped += n_bad
        out[name] = f
    return out, dropped_message(dropped, bounds, example, what)


def dropped_message(dropped: int, bounds: tuple[int, int, int] | None, example: str | None,
                    what: str = "events") -> str | None:
    """The one warning of `check_times` (None when nothing was dropped)."""
    if not dropped:
        return None
    span = "" if bounds is None else f" (kept: within {_fmt_ns(bounds[2])} of the middle half of the trace)"
    return (f"dropped {dropped} {what} whose times are missing, inverted, not representable as int64 ns "
            f"or absurdly far from the trace's span{span}; e.g. {example}")


def _fmt_ns(v: int) -> str:
    return f"{v / 1e9:,.0f} s"


def fmt_value(v) -> str:
    """A raw time value for a warning: short, and safe for any type."""
    if v is None:
        return "missing"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)[:40]
