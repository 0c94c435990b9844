"""What every ingestor returns, and the small helpers they share."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa


@dataclass
class Parsed:
    """One source file translated to canonical tables (see traceq.schema) plus facts for `runs`.

    `rank` is what the file itself says (None if it says nothing); the dispatcher applies
    `--rank` and the file-name fallback.
    """

    tables: dict[str, pa.Table]
    format: str
    format_version: str | None = None
    rank: int | None = None
    world_size: int | None = None
    host: str | None = None
    devices: list[dict] = field(default_factory=list)
    clock_offset_ns: int = 0
    warnings: list[str] = field(default_factory=list)


_RANK_PATTERNS = [
    re.compile(r"rank[-_.]?(\d+)", re.I),
    re.compile(r"mpi[-_.]?(\d+)", re.I),
    re.compile(r"worker[-_.]?(\d+)", re.I),
    re.compile(r"(?:^|[._-])r(\d+)(?=[._-]|$)", re.I),
]


def rank_from_filename(path: str | Path) -> int | None:
    """A rank written in the file name: `rank3`, `rank-0.`, `.mpi3`, `worker1`, `.r1.`."""
    name = Path(path).name
    for pat in _RANK_PATTERNS:
        m = pat.search(name)
        if m:
            return int(m.group(1))
    return None


_API_SUFFIX = re.compile(r"_v\d+$")


def strip_api_suffix(name: str) -> str:
    """`cudaLaunchKernel_v7000` -> `cudaLaunchKernel`."""
    return _API_SUFFIX.sub("", name)


def strip_api_suffix_expr(col):
    """The same as a polars expression (vectorised)."""
    return col.str.replace(r"_v\d+$", "")


def nesting_depth(pid, tid, start_ns, end_ns):
    """Nesting level (0 = outermost) of each interval among the intervals of its thread.

    Vectorised: per (pid, tid), depth = (intervals that started before, longest first on
    ties) − (intervals that had already ended). Exact for properly nested intervals;
    for partly overlapping ones it counts the intervals still open at the start.
    Inputs are equal-length numpy-compatible int arrays; returns an int32 array.
    """
    import numpy as np

    pid = np.asarray(pid, dtype=np.int64)
    tid = np.asarray(tid, dtype=np.int64)
    start = np.asarray(start_ns, dtype=np.int64)
    end = np.asarray(end_ns, dtype=np.int64)
    n = len(start)
    depth = np.zeros(n, dtype=np.int32)
    if n == 0:
        return depth
    order = np.lexsort((-end, start, tid, pid))
    p, t = pid[order], tid[order]
    bounds = np.flatnonzero((p[1:] != p[:-1]) | (t[1:] != t[:-1])) + 1
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, n]):
        idx = order[lo:hi]
        s = start[idx]
        ends = np.sort(end[idx])
        closed = np.searchsorted(ends, s, side="right")
        depth[idx] = np.arange(hi - lo) - closed
    return np.maximum(depth, 0)
