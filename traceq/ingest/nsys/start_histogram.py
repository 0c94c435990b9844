"""Where the quartiles of a stream of start times lie, in bounded memory.

The absurd-time rule (`validate`) needs the exact lower/upper quartiles of all valid start
times. A streaming reader (nsys) knows them only after a second read of every time, held in
memory at 8 bytes per record. Most traces never need them: the rule keeps every record whose
times lie within 1000x the middle half's width (at least 1000 s) of that half. So the first
pass also counts start times per bucket (`StartHistogram`); the quartiles then lie in known
buckets, and when even the least favourable quartiles inside those buckets keep every record
(`keeps_all`), the exact quartiles would keep them all too: no second read.

Buckets are 2**shift ns wide, at most MAX_BUCKETS of them between the lowest and highest
start seen; the shift grows (neighbouring buckets merge) as the span grows. A one-hour capture
ends with buckets of ~0.07 s against margins of at least 1000 s; a trace with garbage times
far away ends with wide buckets, the proof fails and the reader computes the exact quartiles.
"""
from __future__ import annotations

import math

import numpy as np

from ..validate import ABSURD_FACTOR, MIN_WIDTH_NS

MAX_BUCKETS = 1 << 16


class StartHistogram:
    """Counts of start times (int64 ns) per bucket of 2**shift ns."""

    def __init__(self) -> None:
        self.shift = 0
        self.base = 0                      # bucket number of counts[0]
        self.counts = np.zeros(0, np.int64)
        self.n = 0

    def copy(self) -> StartHistogram:
        h = StartHistogram()
        h.shift, h.base, h.counts, h.n = self.shift, self.base, self.counts.copy(), self.n
        return h

    def add(self, starts: np.ndarray) -> None:
        """Count these start times (valid ones: no nulls)."""
        if len(starts) == 0:
            return
        lo, hi = int(starts.min()), int(starts.max())
        if self.n == 0:
            self.base, self.counts = lo >> self.shift, np.zeros(1, np.int64)
        while True:
            first = min(self.base, lo >> self.shift)
            last = max(self.base + len(self.counts) - 1, hi >> self.shift)
            if last - first < MAX_BUCKETS:
                break
            self._coarsen()
        if first < self.base or last >= self.base + len(self.counts):
            wider = np.zeros(last - first + 1, np.int64)
            wider[self.base - first:self.base - first + len(self.counts)] = self.counts
            self.base, self.counts = first, wider
        self.counts += np.bincount((starts >> self.shift) - self.base, minlength=len(self.counts))
        self.n += len(starts)

    def _coarsen(self) -> None:
        """Buckets twice as wide: bucket b goes to b >> 1."""
        base = self.base >> 1
        merged = np.zeros(((self.base + len(self.counts) - 1) >> 1) - base + 1, np.int64)
        np.add.at(merged, ((np.arange(len(self.counts)) + self.base) >> 1) - base, self.counts)
        self.shift, self.base, self.counts = self.shift + 1, base, merged

    def range_of(self, rank: int) -> tuple[int, int]:
        """The lowest and highest value the start of this rank (0-based, in sorted order)
        can have: its bucket's first and last ns."""
        i = int(np.searchsorted(np.cumsum(self.counts), rank, side="right"))
        b = self.base + i
        return b << self.shift, ((b + 1) << self.shift) - 1

    def keeps_all(self, lowest_start: int, highest_end: int) -> bool:
        """True when the absurd-time rule, with the exact quartiles of the counted starts
        (`validate.bounds_of`: ranks floor((n-1)/4) and ceil(3(n-1)/4)), keeps every record
        whose starts are >= lowest_start and ends <= highest_end, wherever in their buckets
        the quartiles lie. False when that cannot be shown (then compute them exactly)."""
        if self.n == 0:
            return False
        _, q25_max = self.range_of(math.floor((self.n - 1) * 0.25))
        q75_min, _ = self.range_of(math.ceil((self.n - 1) * 0.75))
        # the narrowest middle half the buckets allow gives the tightest bounds on both sides
        margin = ABSURD_FACTOR * max(q75_min - q25_max, MIN_WIDTH_NS)
        return q25_max - margin <= lowest_start and highest_end <= q75_min + margin
