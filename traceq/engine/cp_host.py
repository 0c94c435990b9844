"""The host side of the critical path: each process's threads as one timeline.

A process's threads hand work to each other (PyTorch runs the backward pass on an autograd
thread while the main thread waits inside `loss.backward()`), and the trace records no such
hand-off. So the critical path reads a process as ONE timeline, cut into pieces, each owned by
one op:

  per thread   the innermost op (or host region) around each instant (the sweep of
               engine/op_owner.nest, in numpy); nothing around it: the thread is idle
  merged       the main thread's owner where it runs an op; where the main thread only waits
               (idle, or inside a region with no op in it) the owner of another thread that
               runs an op (the lowest thread id first), else of another thread inside a
               collective's region (Gloo runs `gloo:broadcast` on its own threads while the
               main thread waits for it); else the main thread's region, or idle
  main thread  the thread of the rank's step regions (ProfilerStep#N, ...) in that process, else
               the thread with the most ops

Each piece has a class, the first that holds:
  wait          inside a blocking call (sync, blocking copy) before the GPU op it waited for
                ended: the path never runs here (it is on the GPU meanwhile)
  data_loading  inside a data-loading interval of the rank (stalls_data.sql)
  sync, memcpy, launch, communication   the owner's class (critical_path_host.sql)
  cpu           a framework op, a Python function, a region, or untraced host time

`HostTimeline.integral(t)` gives, per class, the time spent in that class from the timeline's
start up to t, so any stretch of the timeline is broken down by class in O(log n).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..lazy import polars as pl

CLASSES = ("wait", "data_loading", "sync", "memcpy", "launch", "communication", "cpu")
WAIT, DATA, SYNC, MEMCPY, LAUNCH, COMM, CPU = range(len(CLASSES))
_OWNER_CLASS = {"sync": SYNC, "memcpy": MEMCPY, "launch": LAUNCH, "comm": COMM, "cpu": CPU, "region": CPU,
                "comm_region": COMM}
_REGIONS = ("region", "comm_region")


@dataclass
class HostTimeline:
    """One process's merged timeline: pieces [bounds[j], bounds[j+1]) with owner and class."""
    rank: int
    pid: int
    main_tid: int
    bounds: np.ndarray      # int64, sorted, n+1
    owner: np.ndarray       # int64 row of the host frame, -1 = idle
    cls: np.ndarray         # int8 class index
    cum: np.ndarray         # (n+1, classes) int64: time per class before bounds[j]

    def integral(self, t: np.ndarray) -> np.ndarray:
        """(len(t), classes): per class, the time of the timeline before each t (clipped)."""
        t = np.clip(np.asarray(t, dtype=np.int64), self.bounds[0], self.bounds[-1])
        j = np.clip(np.searchsorted(self.bounds, t, side="right") - 1, 0, len(self.cls) - 1)
        out = self.cum[j].copy()
        part = t - self.bounds[j]
        out[np.arange(len(t)), self.cls[j]] += part
        return out

    def pieces(self, t0: int, t1: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The pieces inside [t0, t1]: (start, end, owner, cls), clipped to the stretch."""
        a = max(int(np.searchsorted(self.bounds, t0, side="right")) - 1, 0)
        b = int(np.searchsorted(self.bounds, t1, side="left"))
        b = min(max(b, a + 1), len(self.cls))
        s = np.clip(self.bounds[a:b], t0, t1)
        e = np.clip(self.bounds[a + 1:b + 1], t0, t1)
        return s, e, self.owner[a:b], self.cls[a:b]


def thread_pieces(host: pl.DataFrame) -> pl.DataFrame:
    """Per thread, the pieces between consecutive op boundaries with their innermost owner:
    columns rank, pid, tid, start_ns, end_ns, owner (row of `host`, null = idle).

    The sweep of engine/op_owner.nest, in numpy: boundaries sorted per thread (a call's end
    before a call's start at one instant, the longer call first), the running count of open
    calls is the depth after each boundary, and the owner of the piece after it is the call
    last started at that depth on that thread (an as-of lookup on (thread, depth))."""
    thr = host.select(pl.struct("rank", "pid", "tid").rank("dense").cast(pl.Int64))["rank"].to_numpy() - 1
    s_all, e_all = host["start_ns"].to_numpy(), host["end_ns"].to_numpy()
    rows = np.flatnonzero(e_all > s_all)            # calls of no duration own nothing
    n = len(rows)
    if n == 0:
        return pl.DataFrame(schema={"rank": pl.Int32, "pid": pl.Int64, "tid": pl.Int64, "start_ns": pl.Int64,
                                    "end_ns": pl.Int64, "owner": pl.Int64})
    th = np.r_[thr[rows], thr[rows]]
    t = np.r_[s_all[rows], e_all[rows]]
    kind = np.r_[np.ones(n, dtype=np.int8), np.zeros(n, dtype=np.int8)]
    tie = np.r_[-(e_all[rows] - s_all[rows]), np.zeros(n, dtype=np.int64)]
    row = np.r_[rows, rows]
    # one int64 key (thread, time, kind) when it fits, else a lexsort; ties: the longer call first
    t_rel = t - t.min()
    if th.max() < (1 << 14) and t_rel.max() < (1 << 47):
        o1 = np.argsort(tie, kind="stable")
        key = (th[o1] << 48) | (t_rel[o1] << 1) | kind[o1].astype(np.int64)
        o = o1[np.argsort(key, kind="stable")]
    else:
        o = np.lexsort((tie, kind, t, th))
    th, t, kind, row = th[o], t[o], kind[o], row[o]
    depth = np.cumsum(np.where(kind == 1, 1, -1))
    # pieces: after each boundary, to the next boundary of the same thread (when later)
    nxt_same = np.r_[th[1:] == th[:-1], False]
    t_next = np.r_[t[1:], 0]
    piece = nxt_same & (t_next > t)
    k = np.flatnonzero(piece)
    # owner: the call last started at the piece's depth on its thread
    st = np.flatnonzero(kind == 1)
    key_st = th[st] * (1 << 24) + depth[st]
    key_q = th[k] * (1 << 24) + depth[k]
    uk, inv = np.unique(np.r_[key_st, key_q], return_inverse=True)
    id_st, id_q = inv[:len(st)], inv[len(st):]
    comb_st = id_st.astype(np.int64) * (1 << 32) + st
    order = np.argsort(comb_st, kind="stable")
    comb_sorted = comb_st[order]
    j = np.searchsorted(comb_sorted, id_q.astype(np.int64) * (1 << 32) + k, side="right") - 1
    hit = (j >= 0) & (depth[k] > 0)
    jj = np.clip(j, 0, None)
    hit &= (comb_sorted[jj] >> 32) == id_q
    owner = np.where(hit, row[st[order[jj]]], -1)
    # calls that overlap without nesting (a sync call that outlives the region it began in)
    # break the count: such a piece gets the open call of the thread that started last
    tn = t_next[k]
    bad = np.flatnonzero((owner >= 0) & ((s_all[np.clip(owner, 0, None)] > t[k]) | (e_all[np.clip(owner, 0, None)] < tn)))
    if len(bad):
        by_thr: dict = {}
        for i in bad.tolist():
            th_i = th[k[i]]
            if th_i not in by_thr:
                rr = rows[thr[rows] == th_i]
                rr = rr[np.argsort(s_all[rr], kind="stable")]
                by_thr[th_i] = (rr, s_all[rr])
            rr, ss = by_thr[th_i]
            j = int(np.searchsorted(ss, t[k[i]], side="right")) - 1
            own = -1
            while j >= 0:
                if e_all[rr[j]] >= tn[i]:
                    own = int(rr[j])
                    break
                j -= 1
            owner[i] = own
    first = np.unique(thr, return_index=True)[1]
    keys = host.select("rank", "pid", "tid")[first.tolist()]
    kt = th[k]
    return pl.DataFrame({"rank": keys["rank"].to_numpy()[kt], "pid": keys["pid"].to_numpy()[kt],
                         "tid": keys["tid"].to_numpy()[kt], "start_ns": t[k], "end_ns": t_next[k],
                         "owner": owner}, schema_overrides={"rank": pl.Int32, "pid": pl.Int64, "tid": pl.Int64})


def merge_process(seg: pl.DataFrame, main_tid: int, host_cls: np.ndarray,
                  extra_bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One process's threads (their pieces, `seg`) as one timeline: (bounds, owner)."""
    tids = seg["tid"].unique().sort().to_list()
    if main_tid in tids:
        tids.remove(main_tid)
    tids = [main_tid] + tids
    bounds = np.sort(np.concatenate([seg["start_ns"].to_numpy(), seg["end_ns"].to_numpy(),
                                     np.asarray(extra_bounds, dtype=np.int64)]))
    bounds = bounds[np.r_[True, bounds[1:] != bounds[:-1]]] if len(bounds) else bounds
    if len(bounds) < 2:
        bounds = np.array([bounds[0] if len(bounds) else 0] * 2, dtype=np.int64)
    starts = bounds[:-1]
    owner = np.full(len(starts), -1, dtype=np.int64)
    chosen = np.zeros(len(starts), dtype=bool)    # an op (not a region, not idle) owns it
    comm = np.full(len(starts), -1, dtype=np.int64)   # another thread's collective region
    is_region = np.isin(host_cls, _REGIONS)
    is_comm_region = host_cls == "comm_region"
    main_owner = None
    for tid in tids:
        t = seg.filter(pl.col("tid") == tid)
        s, e = t["start_ns"].to_numpy(), t["end_ns"].to_numpy()
        o = t["owner"].fill_null(-1).to_numpy()
        j = np.searchsorted(s, starts, side="right") - 1
        ok = (j >= 0) & (starts < e[np.clip(j, 0, None)])
        ow = np.where(ok, o[np.clip(j, 0, None)], -1)
        oc = np.clip(ow, 0, None)
        is_op = (ow >= 0) & ~is_region[oc]
        if main_owner is None:
            main_owner = ow
        else:
            take_c = (ow >= 0) & is_comm_region[oc] & (comm < 0)
            comm[take_c] = ow[take_c]
        take = is_op & ~chosen
        owner[take] = ow[take]
        chosen |= take
    owner = np.where(chosen, owner, np.where(comm >= 0, comm, main_owner))
    return bounds, owner


def build(host: pl.DataFrame, main_threads: dict[tuple[int, int], int], data: dict[int, np.ndarray],
          waits: pl.DataFrame) -> dict[tuple[int, int], HostTimeline]:
    """{(rank, pid): HostTimeline}. `host` is critical_path_host.sql's frame; `data` per rank
    the sorted, disjoint data-loading intervals as an (n, 2) array; `waits` (row, dep_end_ns):
    the blocking calls (rows of `host`) and when the GPU op they waited for ended."""
    out: dict[tuple[int, int], HostTimeline] = {}
    if host.height == 0:
        return out
    host_cls = host["cls"].to_numpy()
    owner_cls = np.array([_OWNER_CLASS[c] for c in host_cls], dtype=np.int8)
    wait_end = np.full(host.height, np.iinfo(np.int64).min, dtype=np.int64)
    if waits.height:
        wait_end[waits["row"].to_numpy()] = waits["dep_end_ns"].to_numpy()
    pieces = thread_pieces(host)
    for (rank, pid), seg in pieces.group_by(["rank", "pid"], maintain_order=True):
        main = main_threads.get((rank, pid))
        if main is None:
            main = int(seg.group_by("tid").len().sort(["len", "tid"], descending=[True, False])["tid"][0])
        rows = waits.filter(pl.col("rank") == rank, pl.col("pid") == pid)["dep_end_ns"].to_numpy() \
            if waits.height else np.empty(0, dtype=np.int64)
        bounds, owner = merge_process(seg, main, host_cls, rows)
        n = len(owner)
        cls = np.where(owner >= 0, owner_cls[np.clip(owner, 0, None)], CPU).astype(np.int8)
        starts = bounds[:-1]
        waited = (owner >= 0) & (starts < wait_end[np.clip(owner, 0, None)])
        iv = data.get(rank)
        if iv is not None and len(iv):
            mid = starts + (bounds[1:] - starts) // 2
            k = np.searchsorted(iv[:, 0], mid, side="right") - 1
            inside = (k >= 0) & (mid < iv[np.clip(k, 0, None), 1])
            cls = np.where(inside, DATA, cls).astype(np.int8)
        cls = np.where(waited, WAIT, cls).astype(np.int8)
        dur = np.diff(bounds)
        cum = np.zeros((n + 1, len(CLASSES)), dtype=np.int64)
        onehot = np.zeros((n, len(CLASSES)), dtype=np.int64)
        onehot[np.arange(n), cls] = dur
        cum[1:] = np.cumsum(onehot, axis=0)
        out[(rank, pid)] = HostTimeline(rank, pid, main, bounds, owner, cls, cum)
    return out
