"""Deep500's per-clock bookkeeping (`Clock`): the starts and ends of each key, paired by
position, resolved into durations when completed. A `Timer` has one clock (the CPU's,
`cpu_seconds` resolves perf_counter_ns pairs); a `CPUGPUTimer` has a second one whose starts
and ends are CUDA events (traceq.timer.cuda)."""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable


class Clock:
    """Starts/ends per key, paired by position, and the resolved times (seconds) per key.

    `resolve(start, end)` gives the seconds between a start and its end, or None when the
    pair has no measurement (no CUDA): such pairs complete without a time."""

    __slots__ = ("starts", "ends", "times", "resolve")

    def __init__(self, resolve: Callable[[Any, Any], float | None]):
        self.starts: defaultdict[Any, list] = defaultdict(list)
        self.ends: defaultdict[Any, list] = defaultdict(list)
        self.times: dict[Any, list[float]] = {}   # insertion order = Deep500's print order
        self.resolve = resolve

    def is_open(self, key) -> bool:
        return len(self.starts.get(key, ())) != len(self.ends.get(key, ()))

    def check_balanced(self) -> None:
        for key in self.starts:
            if self.is_open(key):
                raise RuntimeError(f"Unbalanced start/end for region type {key}")

    def complete(self, key, ignore_imbalanced: bool = False) -> None:
        starts = self.starts.get(key) or []
        ends = self.ends.get(key) or []
        if not starts and not ends:
            return
        if not ignore_imbalanced and len(starts) != len(ends):
            raise RuntimeError(f"Unbalanced start/end for region type {key}")
        n = len(ends)
        if not n:
            return
        resolve = self.resolve
        for s, e in zip(starts, ends):
            t = resolve(s, e)
            if t is not None:
                self.times.setdefault(key, []).append(t)
        del starts[:n]
        ends.clear()

    def complete_all(self, ignore_imbalanced: bool = False) -> None:
        for key in list(self.starts):
            self.complete(key, ignore_imbalanced)

    def get_time(self, key) -> list[float]:
        self.complete(key)
        return list(self.times.setdefault(key, []))   # Deep500 creates the entry here (print order)


def cpu_seconds(start_ns: int, end_ns: int) -> float:
    """The seconds between two perf_counter_ns readings (the CPU clock's `resolve`)."""
    return (end_ns - start_ns) / 1e9
