"""Lanes of a track: complete ("X") events that partially overlap on one track (a host thread
whose ops overlap without nesting, GPU ops overlapping on one stream) are moved to extra
lanes, so that every lane's events nest properly — what Perfetto's and Chrome's JSON
importers need (a slice that ends after its parent is truncated or dropped with an import
error).

`lanes(track, start, end)` gives each event its lane (0 = the track itself). The check is
one vectorised sweep over all tracks (the sweep of traceq.ingest.common.nesting_depth, with
the tie order the importers use: at equal times an end before a start, the longer of two
slices starting together first); only the tracks where it finds an overlap are walked event
by event (a stack per lane).

Proper nesting <=> every close of the sweep happens when the number of open slices of its
track equals the slice's depth + 1 (closes are last-in first-out): the first close that is
not the top of its track's stack finds more slices open than its depth + 1.
"""
from __future__ import annotations

import numpy as np


def _sweep_bad(track: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per event: True when it closes out of order (its track does not nest)."""
    n = len(start)
    seq = np.empty(n, np.int64)   # the order of the opens: by start, the longer first
    seq[np.lexsort((-end, start, track))] = np.arange(n)
    time = np.concatenate([start, end])
    # at equal times: ends (0) before starts (1); zero-length slices close right after opening (2)
    phase = np.concatenate([np.ones(n, np.int8), np.where(end == start, 2, 0).astype(np.int8)])
    # opens in their order; closes at one time the last-opened first
    tie = np.concatenate([seq, -seq])
    both = np.concatenate([track, track])
    order = np.lexsort((tie, phase, time, both))
    is_open = order < n
    open_now = np.cumsum(np.where(is_open, 1, -1))
    depth = np.empty(n, np.int64)
    depth[order[is_open]] = open_now[is_open] - 1
    at_close = np.empty(n, np.int64)
    at_close[order[~is_open] - n] = open_now[~is_open]   # after the close: depth when in order
    return at_close != depth


def _walk(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Lanes of one track's events, event by event: each goes to the first lane where it
    nests in (or follows) what is open there."""
    order = np.lexsort((-end, start))
    lane_of = np.zeros(len(start), np.int64)
    stacks: list[list[int]] = []
    for i in order.tolist():
        s, e = int(start[i]), int(end[i])
        for k, stack in enumerate(stacks):
            while stack and stack[-1] <= s:
                stack.pop()
            if not stack or e <= stack[-1]:
                stack.append(e)
                lane_of[i] = k
                break
        else:
            stacks.append([e])
            lane_of[i] = len(stacks) - 1
    return lane_of


def lanes(track: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The lane (0, 1, ...) of each event on its track (module doc). `track`: an int64 key per
    event; `start`/`end`: int64 ns (an end before its start is taken as the start)."""
    track = np.asarray(track, np.int64)
    start = np.asarray(start, np.int64)
    end = np.maximum(np.asarray(end, np.int64), start)
    out = np.zeros(len(start), np.int64)
    if len(start) == 0:
        return out
    bad = _sweep_bad(track, start, end)
    for t in np.unique(track[bad]).tolist():
        idx = np.flatnonzero(track == t)
        out[idx] = _walk(start[idx], end[idx])
    return out


def nests(track: np.ndarray, start: np.ndarray, end: np.ndarray) -> bool:
    """True when every track's events nest properly (tests, and a check after `lanes`)."""
    if len(start) == 0:
        return True
    start = np.asarray(start, np.int64)
    return not _sweep_bad(np.asarray(track, np.int64), start, np.maximum(np.asarray(end, np.int64), start)).any()
