"""What every ingestor returns, and the small helpers they share."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pyarrow as pa

from ..errors import BadInput


class NotATrace(BadInput):
    """The file is no trace of a format traceq reads (a damaged trace is a plain BadInput): a
    file of a directory that raises it is skipped with a warning, a file named alone fails."""


@dataclass
class Parsed:
    """One source file translated to canonical tables (see traceq.schema) plus facts for `runs`.

    `rank` is what the file itself says (None if it says nothing); the dispatcher applies
    `--rank` and the file-name fallback.

    A reader that streams its tables (Kineto) leaves `tables` empty and sets `fill`:
    `fill(open_table)` writes each table piece by piece through `open_table(name).write(t)`
    (see `Store.stage`), and appends its late warnings to `warnings`.
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
    labels: dict[str, str] = field(default_factory=dict)   # run labels the file itself states (mila results)
    fill: Callable | None = None


_RANK_PATTERNS = [
    re.compile(r"rank[-_.]?(\d+)", re.I),
    re.compile(r"mpi[-_.]?(\d+)", re.I),
    re.compile(r"worker[-_.]?(\d+)", re.I),
]   # never `r<N>`: in Extra-Deep / Extra-P names (docs/experiments.md) that is the repetition


def read_bytes(path: Path) -> bytes:
    """The bytes of a source file; an unreadable one is BadInput."""
    try:
        return path.read_bytes()
    except IsADirectoryError:
        raise BadInput("is a directory", path) from None
    except OSError as exc:
        raise BadInput(exc.strerror or str(exc), path) from None


def rank_from_filename(path: str | Path) -> int | None:
    """A rank written in the file name: `rank3`, `rank-0.`, `.mpi3`, `worker1` (not `.r1.`, a
    repetition)."""
    name = Path(path).name
    for pat in _RANK_PATTERNS:
        m = pat.search(name)
        if m:
            return int(m.group(1))
    return None


_API_SUFFIX = re.compile(r"_v\d+$")


def strip_api_suffix_expr(col):
    """The same as a polars expression (vectorised)."""
    return col.str.replace(r"_v\d+$", "")


def nesting_depth(pid, tid, start_ns, end_ns):
    """Nesting level of each interval on its thread (0 = outermost): how many of the thread's
    intervals are open when it opens. For push/pop ranges this is the NVTX stack depth.

    One vectorised sweep over open (+1) and close (-1) events sorted by (pid, tid, time); at
    equal times intervals that end close first (adjacent intervals do not nest), then
    intervals open longest first (parent before child), then zero-length intervals close.
    Each thread's events sum to zero, so one running sum over all threads serves them all.
    """
    import numpy as np

    pid = np.asarray(pid, dtype=np.int64)
    tid = np.asarray(tid, dtype=np.int64)
    start = np.asarray(start_ns, dtype=np.int64)
    end = np.maximum(np.asarray(end_ns, dtype=np.int64), start)
    n = len(start)
    time = np.concatenate([start, end])
    phase = np.concatenate([np.ones(n, np.int8), np.where(end == start, 2, 0).astype(np.int8)])
    longest_first = np.concatenate([-end, np.zeros(n, np.int64)])
    order = np.lexsort((longest_first, phase, time, np.concatenate([tid, tid]), np.concatenate([pid, pid])))
    is_open = order < n
    open_now = np.cumsum(np.where(is_open, 1, -1))
    depth = np.empty(n, np.int32)
    depth[order[is_open]] = open_now[is_open] - 1
    return depth


class Collected:
    """An `open_table` target that keeps the pieces in memory: what a reader's `fill` writes when
    it is called without a work folder (tests, the Python API's in-memory reads)."""

    def __init__(self) -> None:
        self.pieces: list[pa.Table] = []

    def write(self, table: pa.Table) -> None:
        self.pieces.append(table)
