"""The precedence sweep of the stall attribution: every GPU idle gap split by the lowest level
of host activity that covers each instant of it (traceq/queries/stalls_gaps.sql states the
levels; stalls_activity.sql lists the gaps and the activity with its level).

One pass over every rank and device at once, in numpy: the edges (+1 at a start, −1 at an
end) of the gaps (level 0) and of the activities (levels 1-7), sorted by (rank, device, t);
at each distinct instant, the number of open intervals of each level is the running sum of
the edges so far (the intervals of one GPU all close before the next GPU's edges begin, so one
running sum over the whole sorted list restarts at zero on each GPU). The segment from an
instant to the next one of the same GPU lies inside a gap when a gap is open, and takes the
lowest level open there (8, unattributed, when none). The gap it lies in is the last gap
started at or before it: the count of gap starts so far. A gap's time per level is the sum
of its segments (exact integers).

`gap_levels(rows)` takes stalls_activity.sql's columns (rank, device, start_ns, end_ns,
level) as numpy arrays and returns, per gap, rank, device, start_ns and l1 … l7 (ns at each
level; the rest of the gap is unattributed). The SQL this replaces (a window of eight running
sums per GPU) took seconds per hundred thousand gaps; this takes milliseconds.
"""
from __future__ import annotations

LEVELS = 7   # levels 1-7 of stalls_gaps.sql; 0 is the gap itself, 8 unattributed


def gap_levels(rank, device, start_ns, end_ns, level) -> dict:
    """Per gap (the level-0 rows, in (rank, device, start) order): its rank, device, start_ns
    and l1..l7, the ns of its segments whose lowest covering level is 1..7."""
    import numpy as np

    rank = np.asarray(rank, dtype=np.int64)
    device = np.asarray(device, dtype=np.int64)
    start_ns = np.asarray(start_ns, dtype=np.int64)
    end_ns = np.asarray(end_ns, dtype=np.int64)
    level = np.asarray(level, dtype=np.int64)
    names = ("rank", "device", "start_ns")
    if not len(level) or not (level == 0).any():
        return {**{k: np.zeros(0, np.int32 if k != "start_ns" else np.int64) for k in names},
                **{f"l{k}": np.zeros(0, np.int64) for k in range(1, LEVELS + 1)}}
    # one GPU id ordered as (rank, device); times from the earliest
    d_lo = int(device.min())
    width = int(device.max()) - d_lo + 1
    gpu = (rank - int(rank.min())) * width + (device - d_lo)
    t0 = int(min(start_ns.min(), end_ns.min()))
    t_bits = max(1, int(max(start_ns.max(), end_ns.max()) - t0).bit_length())
    g_bits = max(1, int(gpu.max()).bit_length())
    is_gap = level == 0
    gaps = np.flatnonzero(is_gap)[_order(gpu[is_gap], start_ns[is_gap] - t0, g_bits, t_bits)]
    out = {"rank": rank[gaps].astype(np.int32), "device": device[gaps].astype(np.int32), "start_ns": start_ns[gaps]}
    n_gaps = len(gaps)

    # the edges (+1 at a start, -1 at an end), sorted by GPU then time
    e_gpu = np.concatenate([gpu, gpu])
    e_t = np.concatenate([start_ns, end_ns]) - t0
    e_lvl = np.concatenate([level, level])
    e_up = np.concatenate([np.ones(len(level), bool), np.zeros(len(level), bool)])
    order = _order(e_gpu, e_t, g_bits, t_bits)
    e_gpu, e_t, e_lvl, e_up = e_gpu[order], e_t[order], e_lvl[order], e_up[order]

    # distinct instants per GPU; the open count of each level after each instant
    new_gpu = np.empty(len(e_t), bool)
    new_gpu[0] = True
    new_gpu[1:] = e_gpu[1:] != e_gpu[:-1]
    new_pt = new_gpu.copy()
    new_pt[1:] |= e_t[1:] != e_t[:-1]
    pt = np.cumsum(new_pt) - 1                       # instant index of each edge
    m = int(pt[-1]) + 1
    width = LEVELS + 1
    cell = pt * width + e_lvl
    # one bincount of the signed edges (exact: counts are small integers), summed in place as
    # int32: a third of the memory of two int64 bincounts and their difference (millions of
    # instants x 8 levels on a run of many millions of ops)
    delta = np.bincount(cell, weights=np.where(e_up, 1.0, -1.0), minlength=m * width).astype(np.int32)
    counts = np.cumsum(delta.reshape(m, width), axis=0, out=delta.reshape(m, width)).T
    gap_starts = np.cumsum(np.bincount(pt[(e_lvl == 0) & e_up], minlength=m).astype(np.int64))

    first = np.flatnonzero(new_pt)                   # the first edge of each instant
    p_t = e_t[first]
    same_gpu_next = np.zeros(m, bool)
    same_gpu_next[:-1] = ~new_gpu[first[1:]]         # the next instant is on the same GPU
    idx = np.flatnonzero(same_gpu_next & (counts[0] > 0))
    ns = p_t[idx + 1] - p_t[idx]
    lowest = np.full(len(idx), LEVELS + 1, np.int64)
    for k in range(LEVELS, 0, -1):                   # the lowest open level wins
        lowest[counts[k][idx] > 0] = k
    gap_of = gap_starts[idx] - 1                     # the last gap started at or before it
    # integer sums: bincount's float64 weights are exact below 2**53 ns (104 days)
    per = np.rint(np.bincount(gap_of * (LEVELS + 2) + lowest, weights=ns, minlength=n_gaps * (LEVELS + 2))
                  ).astype(np.int64).reshape(n_gaps, LEVELS + 2)
    for k in range(1, LEVELS + 1):
        out[f"l{k}"] = per[:, k].copy()
    return out


def _order(gpu, t, g_bits: int, t_bits: int):
    """The permutation that sorts by (gpu, t), both non-negative: one sort of (gpu, t) packed
    into one int64 when both fit in 63 bits (GPU ids of a few thousand GPUs and spans of days
    do), else a two-key lexsort."""
    import numpy as np

    if g_bits + t_bits <= 63:
        return np.argsort((gpu << t_bits) | t)
    return np.lexsort((t, gpu))
