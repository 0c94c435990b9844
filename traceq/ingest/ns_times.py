"""Event times, float µs -> int64 ns, with NumPy alone.

Both sides of the Kineto raw relation use these: translation, to convert and validate each
chunk (`kineto.tables.with_ns`), and the decoders, which take the facts of translation's
first pass from the rows they write while the rows are at hand (`kineto.raw.SpanFacts`).
The decoding processes run without polars, hence NumPy here.

Conversion (`to_ns`): exact for integer µs and for relative ns-decimal µs (whole µs x 1000 +
the fraction's ns, rounded half to even); not representable (`validate`: not finite or beyond
±LIMIT_NS as ns) where the mask is False, and the ns value there is 0. A null `dur` is 0 ns.
An event is *sane* (`validate.sane`) when start and end are representable, the end is not
before the start and both lie within ±LIMIT_NS.
"""
from __future__ import annotations

import numpy as np

LIMIT_NS = 2**62   # validate's limit (module doc there)


def to_ns(us: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """µs (float64, NaN for null) -> (int64 ns, representable) (module doc). NumPy: a third
    of the time of the same arithmetic as polars expressions."""
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = us * 1000
        ok = np.isfinite(scaled) & (np.abs(scaled) <= float(LIMIT_NS))
        us = np.where(ok, us, 0.0)
        whole = np.floor(us)
        return whole.astype(np.int64) * 1000 + np.round((us - whole) * 1000).astype(np.int64), ok


class Times:
    """start, dur and end in ns of a chunk of raw rows, each with its mask (False: null)."""

    __slots__ = ("start", "start_ok", "dur", "dur_ok", "end", "end_ok")

    def __init__(self, ts: np.ndarray, dur: np.ndarray, dur_null: np.ndarray) -> None:
        """`ts`, `dur`: float64 µs, NaN where null; `dur_null`: where `dur` is null (a NaN
        value that is no null is not representable)."""
        self.start, self.start_ok = to_ns(ts)
        self.dur, self.dur_ok = to_ns(dur)
        self.dur_ok |= dur_null   # null -> 0 ns (the masked value is already 0)
        self.end = self.start + self.dur
        self.end_ok = self.start_ok & self.dur_ok & (np.abs(self.start) <= LIMIT_NS)

    def sane(self) -> np.ndarray:
        return self.end_ok & (self.end >= self.start) & (np.abs(self.end) <= LIMIT_NS)
