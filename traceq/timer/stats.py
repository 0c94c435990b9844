"""Statistics of timed regions: `TimeStats` (Deep500's min/mean/median/max/stdev, in
seconds), Deep500's stats text (`print_all_time_stats`) and the per-key means that
`log_wb_all` / `log_mlflow_all` log.

Both work on a timer's sections: (title, clock) pairs, the title None for a `Timer`'s single
CPU clock and "CPU"/"GPU" for a `CPUGPUTimer`'s two; a clock's `times` maps each key's name
to its durations in seconds, in Deep500's print order.
"""
from __future__ import annotations

import statistics
from typing import NamedTuple


class TimeStats(NamedTuple):
    """Statistics of the times of one key, in seconds."""

    min: float
    mean: float
    median: float
    max: float
    stdev: float

    def __str__(self) -> str:
        return (f"min: {self.min:.5f} mean: {self.mean:.5f} median: {self.median:.5f}"
                f" max: {self.max:.5f} stdev: {self.stdev:.5f}")


def construct_stats(times: list[float], what: str) -> TimeStats:
    """The statistics of `times` (stdev 0.0 below two samples); ValueError without times,
    naming `what`."""
    if not times:
        raise ValueError(f"no times recorded for {what}")
    return TimeStats(
        min=min(times),
        mean=statistics.mean(times),
        median=statistics.median(times),
        max=max(times),
        stdev=statistics.stdev(times) if len(times) > 1 else 0.0,
    )


def stats_text(sections) -> str:
    """Deep500's text of completed sections: per section its title (if any), then each key
    with times and its statistics, then "---"; keys without times are skipped."""
    lines: list[str] = []
    for title, clock in sections:
        if title is not None:
            lines.append(title)
        for key, times in clock.times.items():
            if times:
                lines.append(key)
                lines.append(str(construct_stats(times, key)))
        lines.append("---")
    return "\n".join(lines) + "\n"


def means(sections, prefix: str) -> dict[str, float]:
    """The mean time of each key with times in completed sections, named `prefix/key`, or
    `prefix/TITLE/key` for titled sections (a `/` is added to a non-empty `prefix`)."""
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    result = {}
    for title, clock in sections:
        sub = prefix + (f"{title}/" if title else "")
        for key, times in clock.times.items():
            if times:
                result[sub + key] = statistics.mean(times)
    return result
