"""The sweep of the time ledger: every instant of every step window labelled once
(traceq/queries/ledger.sql states the labels and their precedence; traceq/engine/ledger.py
builds the inputs and reads the result).

One pass over every rank and device at once, in numpy, as the stall attribution's sweep
(level_sweep.py): the edges (+1 at a start, -1 at an end) of the windows (type 0), the GPU
ops (types 1-3: compute, communication, copy), the host activity (types 4-11), the queued
idle intervals (type 12) and the idle after a rank's last GPU op (type 13), sorted by (GPU,
time). At each distinct instant the running sum of
the edges gives the number of open intervals of each type. The segment from an instant to
the next one of the same GPU lies in a window when a window is open, and takes:
  the lowest GPU class open (1 compute, 2 communication, 3 copy), else
  the lowest host label open (4-11), where in queued idle launch (10) and host_compute (11)
  do not count, else 12 (unattributed).
The window a segment lies in is the last window started at or before it (windows of one GPU
are disjoint, sorted by start). A window's time per label is the sum of its segments (exact
integers), so the labels of a window add up to the window exactly.

`sweep(...)` returns per window its time at each label (ns) and its communication time
(segments where a communication op runs, hidden or not).
"""
from __future__ import annotations

LABELS = ("compute", "communication", "copy", "data", "communication_wait", "sync", "blocking_copy",
          "memory_management", "warmup", "launch", "host_compute", "unattributed")
QUEUED = 12            # the type of a queued idle interval
TAIL = 13              # the type of idle no GPU op ends (after the rank's last op)
N_TYPES = 14           # 0 window, 1..11 labels, 12 queued, 13 tail
UNATTRIBUTED = 12      # label id of `unattributed` (labels are 1-based: LABELS[i - 1])


def sweep(gpu, start_ns, end_ns, kind, n_windows: int):
    """`gpu`, `start_ns`, `end_ns`, `kind` (numpy int arrays): every interval; kind 0 rows
    are the windows, numbered 0..n_windows-1 in (gpu, start, end) order (the caller sorts
    them so). Returns (per_label, comm_ns, late_ns): an (n_windows, N_TYPES) int64 array of ns
    per label id (columns 1-12 used), and per window the time with communication running and the
    unattributed time outside queued idle (the host had not issued the next op yet)."""
    import numpy as np

    per = np.zeros((n_windows, N_TYPES), np.int64)
    comm = np.zeros(n_windows, np.int64)
    late = np.zeros(n_windows, np.int64)
    if n_windows == 0 or len(kind) == 0:
        return per, comm, late
    gpu = np.asarray(gpu, np.int64)
    start_ns = np.asarray(start_ns, np.int64)
    end_ns = np.asarray(end_ns, np.int64)
    kind = np.asarray(kind, np.int64)
    t0 = int(start_ns.min())
    e_gpu = np.concatenate([gpu, gpu])
    e_t = np.concatenate([start_ns, end_ns]) - t0
    e_kind = np.concatenate([kind, kind])
    e_up = np.concatenate([np.ones(len(kind), bool), np.zeros(len(kind), bool)])
    order = np.lexsort((e_t, e_gpu))
    e_gpu, e_t, e_kind, e_up = e_gpu[order], e_t[order], e_kind[order], e_up[order]

    new_gpu = np.empty(len(e_t), bool)
    new_gpu[0] = True
    new_gpu[1:] = e_gpu[1:] != e_gpu[:-1]
    new_pt = new_gpu.copy()
    new_pt[1:] |= e_t[1:] != e_t[:-1]
    pt = np.cumsum(new_pt) - 1
    m = int(pt[-1]) + 1
    delta = np.bincount(pt * N_TYPES + e_kind, weights=np.where(e_up, 1.0, -1.0),
                        minlength=m * N_TYPES).astype(np.int32)
    counts = np.cumsum(delta.reshape(m, N_TYPES), axis=0, out=delta.reshape(m, N_TYPES)).T
    win_starts = np.cumsum(np.bincount(pt[(e_kind == 0) & e_up], minlength=m).astype(np.int64))

    first = np.flatnonzero(new_pt)
    p_t = e_t[first]
    same_next = np.zeros(m, bool)
    same_next[:-1] = ~new_gpu[first[1:]]
    idx = np.flatnonzero(same_next & (counts[0] > 0))
    ns = p_t[idx + 1] - p_t[idx]
    label = np.full(len(idx), UNATTRIBUTED, np.int64)
    queued = counts[QUEUED][idx] > 0
    for k in range(11, 3, -1):                       # host labels: the lowest open wins
        open_k = counts[k][idx] > 0
        if k in (10, 11):
            open_k &= ~queued
        label[open_k] = k
    for k in (3, 2, 1):                              # a running GPU op beats any host label
        label[counts[k][idx] > 0] = k
    win = win_starts[idx] - 1
    per += np.rint(np.bincount(win * N_TYPES + label, weights=ns, minlength=n_windows * N_TYPES)
                   ).astype(np.int64).reshape(n_windows, N_TYPES)
    comm += np.rint(np.bincount(win, weights=np.where(counts[2][idx] > 0, ns, 0), minlength=n_windows)
                    ).astype(np.int64)
    tail = counts[TAIL][idx] > 0
    late += np.rint(np.bincount(win, weights=np.where((label == UNATTRIBUTED) & ~queued & ~tail, ns, 0),
                                minlength=n_windows)
                    ).astype(np.int64)
    return per, comm, late
