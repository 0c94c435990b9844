"""Robust statistics used by the experiment commands; one definition each.

- `iqr_filter`: drop values outside [Q1 − 1.5·IQR, Q3 + 1.5·IQR] (quartiles by linear
  interpolation, numpy's default), as Extra-Deep does with training-step runtimes.
- `robust_median`: the median of what `iqr_filter` keeps.
- `trimmed_mean`: the mean without one minimum and one maximum (mila's report: with n ≥ 3
  runs; fewer runs are averaged as they are).
- `sd`: sample standard deviation (n − 1); undefined (None) for fewer than two values: one
  repetition says nothing about the spread, and 0 would claim it is none.
"""
from __future__ import annotations

import numpy as np


def iqr_filter(values) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    if x.size < 4:
        return x
    q1, q3 = np.percentile(x, [25, 75])
    iqr = q3 - q1
    return x[(x >= q1 - 1.5 * iqr) & (x <= q3 + 1.5 * iqr)]


def robust_median(values) -> float | None:
    x = iqr_filter(values)
    return float(np.median(x)) if x.size else None


def trimmed_mean(values) -> float | None:
    x = np.sort(np.asarray(values, dtype=float))
    if x.size == 0:
        return None
    if x.size >= 3:
        x = x[1:-1]
    return float(x.mean())


def sd(values) -> float | None:
    x = np.asarray(values, dtype=float)
    return float(x.std(ddof=1)) if x.size > 1 else None


def mean(values) -> float | None:
    x = np.asarray(values, dtype=float)
    return float(x.mean()) if x.size else None
