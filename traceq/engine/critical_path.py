"""The critical path of each step, and the what-if: what bounds a step, and what a fix wins.

A step spans from its start to the later of its end and the end of the last GPU op launched in
it. Its critical path is the chain of events, each the one its successor waited for last
(engine/cp_graph.py), walked back from the step's end to its start: the path covers the span
exactly, and every instant of it is one segment with one bound:

  cpu            host work: framework ops, Python, untraced host time
  data_loading   host work inside a data-loading interval (DataLoader, timer IO, --data-pattern)
  launch         launch calls on the host, and the delay from a launch call to its op's start
  gpu            a kernel running (not communication)
  gpu_gap        the stream idle between two of its ops (the next one was launched already)
  communication  a collective kernel, or a CPU-side collective call
  sync           the host waiting past the GPU op it waited for, a sync call's own time, a
                 stream waiting on another stream
  memcpy         a copy or memset on the GPU, a blocking copy call on the host

What-if (`--what-if CATEGORY=FACTOR`): the durations of that category are scaled — a bound
above (host work by class, GPU ops by their bound) or a kernel category (gemm, conv,
attention, ...: the most specific one given applies) — and the step is re-timed through the
same graph: each event starts when its last predecessor arrives. `sync=0` also drops the host's
waits for the GPU. Time the graph cannot explain (an event later than all its predecessors)
is kept as it was. The predicted step is the re-timed span; its path gives the next bound.
"""
from __future__ import annotations

import numpy as np

from ..errors import TraceqError
from ..lazy import polars as pl
from . import cp_graph, cp_host
from .cp_graph import BOUNDS, CHAIN, GAP, LAUNCH, RUN, SYNC, XRANK, XSTREAM

UNTRACED = "(untraced host time)"
EDGE_NAMES = {LAUNCH: "(launch delay)", GAP: "(stream gap)", XSTREAM: "(wait on another stream)"}
EDGE_BOUND = {LAUNCH: "launch", GAP: "gpu_gap", XSTREAM: "sync", SYNC: "sync", XRANK: "communication"}
SEGMENT_SCHEMA = {"rank": pl.Int32, "step": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64,
                  "bound": pl.String, "kind": pl.String, "name": pl.String, "category": pl.String,
                  "pid": pl.Int64, "tid": pl.Int64, "device": pl.Int32, "stream": pl.Int64}


def parse_what_if(items) -> dict[str, float]:
    """{category: factor} from CATEGORY=FACTOR strings; one-line errors for the rest."""
    from ..rules.categories import CATEGORIES

    known = set(BOUNDS) | set(CATEGORIES) | {"other"}
    out: dict[str, float] = {}
    for item in items or ():
        key, sep, val = str(item).partition("=")
        key = key.strip()
        try:
            factor = float(val)
        except ValueError:
            factor = float("nan")
        if not sep or not key or not np.isfinite(factor) or factor < 0:
            raise TraceqError(f"--what-if {item!r}: expected CATEGORY=FACTOR with a factor >= 0, "
                              "e.g. data_loading=0 or gemm=0.5")
        if key not in known:
            raise TraceqError(f"--what-if {item!r}: unknown category {key!r}; use a bound "
                              f"({', '.join(BOUNDS)}) or a kernel category ({', '.join(CATEGORIES)})")
        out[key] = factor
    return out


def op_bound(kind: str, category: str) -> str:
    if kind in ("memcpy", "memset"):
        return "memcpy"
    return "communication" if category == "communication" else "gpu"


class Solver:
    """One graph: the recorded arrivals (vectorised), the re-timing, and the walk back."""

    def __init__(self, g: cp_graph.Graph) -> None:
        self.g = g
        self._busy: dict = {}
        self._lists = None
        gp = g.gpu
        self.op_kind = gp["kind"].to_list()
        self.op_kind_a = gp["kind"].to_numpy()
        self.op_cat = gp["category"].to_list()
        self.op_name = gp["name"].to_list()
        self.op_bound = [op_bound(k, c) for k, c in zip(self.op_kind, self.op_cat)]
        self.op_bound_code = np.array([BOUNDS.index(b) for b in self.op_bound], dtype=np.int64)
        self.op_bound_s = np.array(self.op_bound, dtype=object)
        self.op_frame = gp.select("name", "category", "pid", "device", "stream")
        self.op_pid, self.op_dev, self.op_stream = gp["pid"].to_list(), gp["device"].to_list(), gp["stream"].to_list()
        self.host_name_s = g.host["name"]
        self.host_tid_a = g.host["tid"].to_numpy()
        # recorded arrival of each node: its binding edge and the time no edge explains
        n = len(g.t)
        self.bind = np.full(n, -1, dtype=np.int64)
        self.slack = np.zeros(n, dtype=np.float64)
        if len(g.src):
            v = g.t[g.src] + g.base
            dst = np.repeat(np.arange(n), np.diff(g.indptr))
            o = np.lexsort((-np.arange(len(v)), v, dst))   # per node, the last arrival last (first edge on ties)
            last = np.r_[dst[o][1:] != dst[o][:-1], True]
            best = o[last]
            self.bind[dst[best]] = best
            self.slack[dst[best]] = np.maximum(g.t[dst[best]] - v[best], 0)

    def busy(self, rank: int, device) -> np.ndarray:
        """(n, 2) the union of the GPU ops of (rank, device), rank clock."""
        key = (rank, device)
        if key not in self._busy:
            dev = pl.col("device").is_null() if device is None else pl.col("device") == device
            gp = self.g.gpu.filter((pl.col("rank") == rank) & dev).sort("start_ns")
            s_, e_ = gp["start_ns"].to_numpy(), gp["end_ns"].to_numpy()
            if len(s_):
                reach = np.maximum.accumulate(e_)
                new = np.r_[True, s_[1:] > reach[:-1]]
                first = np.flatnonzero(new)
                last = np.r_[first[1:], len(s_)] - 1
                self._busy[key] = np.stack([s_[first], reach[last]], axis=1).astype(np.int64)
            else:
                self._busy[key] = np.zeros((0, 2), dtype=np.int64)
        return self._busy[key]

    # ---- weights under factors
    def weights(self, factors: dict[str, float]) -> np.ndarray:
        g = self.g
        w = g.base.copy()
        if not factors:
            return w
        f_cls = np.array([1.0 if c == "wait" else factors.get(cp_graph.CLASS_BOUND[c], 1.0)
                          for c in cp_host.CLASSES])
        f_cls[cp_host.WAIT] = 0.0
        m = g.kind == CHAIN
        if m.any():
            w[m] = g.chain_vec[g.ref[m]] @ f_cls
        f_op = np.array([factors.get(c, factors.get(b, 1.0)) for c, b in zip(self.op_cat, self.op_bound)])
        for k in (RUN, XRANK):
            m = g.kind == k
            if m.any():
                w[m] = w[m] * f_op[g.ref[m]]
        for k, name in ((LAUNCH, "launch"), (GAP, "gpu_gap")):
            m = g.kind == k
            w[m] = w[m] * factors.get(name, 1.0)
        if factors.get("sync", 1.0) == 0:
            w[g.kind == SYNC] = np.nan     # the host no longer waits for the GPU
        return w

    # ---- one window re-timed
    def retime(self, a: int, b: int, w: np.ndarray) -> tuple[list, list]:
        g = self.g
        t = g.t
        indptr, src = g.indptr, g.src
        new = [0.0] * (b - a)
        bind = [-1] * (b - a)
        slack = self.slack
        for n in range(a, b):
            best, be = None, -1
            for e in range(int(indptr[n]), int(indptr[n + 1])):
                we = w[e]
                if we != we:   # NaN: dropped
                    continue
                p = int(src[e])
                v = (new[p - a] if p >= a else float(t[p])) + we
                if best is None or v > best:
                    best, be = v, e
            new[n - a] = float(t[n]) if best is None else best + slack[n]
            bind[n - a] = be
        return new, bind

    # ---- the walk back from a step's end
    def walk_recorded(self, end_node: int, lo: float) -> list[tuple]:
        """walk() on the recorded times and arrivals (plain lists: the loop is the cost)."""
        if self._lists is None:
            self._lists = (self.g.t.astype(np.float64).tolist(), self.bind.tolist(), self.g.src.tolist())
        t, bind, src = self._lists
        out = []
        n = end_node
        while True:
            tn = t[n]
            if tn <= lo:
                break
            e = bind[n]
            if e < 0:
                out.append((-1, n, lo, tn))
                break
            p = src[e]
            tp = t[p]
            out.append((e, n, tp if tp > lo else lo, tn))
            if tp <= lo:
                break
            n = p
        return out

    def walk(self, end_node: int, lo: float, time_of, bind_of) -> list[tuple]:
        """[(edge or -1, node, t0, t1)] from the step's end back to lo, latest first."""
        g = self.g
        out = []
        n = end_node
        while True:
            tn = time_of(n)
            if tn <= lo:
                break
            e = bind_of(n)
            if e < 0:
                out.append((-1, n, lo, tn))
                break
            p = int(g.src[e])
            tp = time_of(p)
            out.append((e, n, max(tp, lo), tn))
            if tp <= lo:
                break
            n = p
        return out


def end_of_step(g: cp_graph.Graph, ranks_steps: list[tuple]) -> tuple[list[int], float]:
    """The candidate end nodes of a step and its recorded end (common clock): each rank's host
    point at the step's end and the ends of the GPU ops launched inside the step."""
    cands, end = [], -np.inf
    gp = g.gpu
    call = gp["call_start_ns"].fill_null(0).to_numpy()
    has = ~gp["call_start_ns"].is_null().to_numpy()
    start = gp["start_ns"].to_numpy()
    rank = gp["rank"].to_numpy()
    for r, pid, lo_r, hi_r in ranks_steps:
        off = g.offsets.get(r, 0)
        node = g.host_node(r, pid, hi_r + off)
        if node is not None:
            cands.append(node)
            end = max(end, float(g.t[node]))
        inside = (rank == r) & np.where(has, (call >= lo_r) & (call < hi_r), (start >= lo_r) & (start < hi_r))
        rows = np.flatnonzero(inside)
        if len(rows):
            ends = g.gpu_end_node[rows]
            cands.extend(ends.tolist())
            end = max(end, float(g.t[ends].max()))
    return cands, end


def segments_of(solver: Solver, path: list[tuple], step: int) -> pl.DataFrame:
    """The path's edges as segments (rank's own clock), in time order; host stretches in the
    pieces of their process's timeline (cp_host), untraced time between pieces as such."""
    g = solver.g
    if not path:
        return pl.DataFrame(schema=SEGMENT_SCHEMA)
    m = len(path)
    e = np.fromiter((x[0] for x in path), dtype=np.int64, count=m)
    n = np.fromiter((x[1] for x in path), dtype=np.int64, count=m)
    t0 = np.fromiter((x[2] for x in path), dtype=np.float64, count=m)
    t1 = np.fromiter((x[3] for x in path), dtype=np.float64, count=m)
    r = g.node_rank[n].astype(np.int64)
    off = np.array([g.offsets.get(int(x), 0) - g.t0 for x in r.tolist()], dtype=np.int64)
    a_ = np.round(t0).astype(np.int64) - off
    b_ = np.round(t1).astype(np.int64) - off
    kind = np.where(e >= 0, g.kind[np.clip(e, 0, None)], -1)
    ref = np.where(e >= 0, g.ref[np.clip(e, 0, None)], -1)
    frames = []
    # GPU ops running, launch delays, cross-stream waits: columns from the ops
    for ks, kind_name, named in (((RUN, XRANK), "gpu", True), ((LAUNCH, XSTREAM), "edge", False)):
        sel = np.flatnonzero(np.isin(kind, ks))
        if not len(sel):
            continue
        rows = ref[sel]
        gp = solver.op_frame[rows.tolist()]
        if named:
            bound, name = solver.op_bound_s[rows], gp["name"]
        else:
            bound = np.array([edge_bound(solver, int(k), int(x)) for k, x in zip(kind[sel], rows)], dtype=object)
            name = np.array([EDGE_NAMES[int(k)] for k in kind[sel]], dtype=object)
        frames.append(pl.DataFrame({
            "rank": r[sel].astype(np.int32), "step": np.full(len(sel), step, dtype=np.int64),
            "start_ns": a_[sel], "end_ns": b_[sel], "bound": bound, "kind": np.full(len(sel), kind_name, dtype=object),
            "name": name, "category": gp["category"], "pid": gp["pid"], "tid": [None] * len(sel),
            "device": gp["device"], "stream": gp["stream"]}, schema=SEGMENT_SCHEMA))
    out: list[dict] = []
    stretches: dict = {}          # timeline key -> [(a, b)] host stretches, rank clock
    for i in np.flatnonzero(~np.isin(kind, (RUN, XRANK, LAUNCH, XSTREAM))).tolist():
        k, rf, rk = int(kind[i]), int(ref[i]), int(r[i])
        base = {"rank": rk, "step": step, "start_ns": int(a_[i]), "end_ns": int(b_[i]), "pid": None, "tid": None,
                "device": None, "stream": None, "category": None}
        if k < 0:
            host = g.node_type[n[i]] == cp_graph.HOST
            out.append({**base, "bound": "cpu" if host else "gpu_gap", "kind": "host" if host else "edge",
                        "name": UNTRACED if host else "(stream idle)"})
        elif k == CHAIN:
            stretches.setdefault(g.chain_tl[rf], []).append((int(a_[i]), int(b_[i])))
        elif k == SYNC:
            out.append({**base, "bound": "sync", "kind": "edge", "name": solver.host_name_s[rf],
                        "pid": int(g.host["pid"][rf]), "tid": int(solver.host_tid_a[rf])})
        else:   # GAP
            seg = {**base, "category": solver.op_cat[rf], "pid": solver.op_pid[rf], "device": solver.op_dev[rf],
                   "stream": solver.op_stream[rf], "bound": "gpu_gap", "kind": "edge", "name": EDGE_NAMES[GAP]}
            out.extend(split_busy(solver.busy(rk, seg["device"]), seg))
    if out:
        frames.append(pl.DataFrame(out, schema=SEGMENT_SCHEMA))
    for key, iv in stretches.items():
        frames.append(host_pieces(solver, key, np.array(iv, dtype=np.int64).reshape(-1, 2), step))
    if not frames:
        return pl.DataFrame(schema=SEGMENT_SCHEMA)
    return (pl.concat(frames, how="vertical_relaxed").select(list(SEGMENT_SCHEMA))
            .filter(pl.col("end_ns") > pl.col("start_ns")).sort(["start_ns", "end_ns"]))


def host_pieces(solver: Solver, key: tuple, iv: np.ndarray, step: int) -> list[dict]:
    """The timeline pieces inside the stretches `iv` (n, 2) of process `key`, adjacent pieces
    of one owner merged; time the timeline does not cover is untraced host time."""
    g = solver.g
    rank, pid = key
    tl = g.timelines.get(key)
    base = {"rank": rank, "step": step, "pid": pid, "device": None, "stream": None, "category": None,
            "kind": "host"}
    if tl is None:
        iv = iv[iv[:, 1] > iv[:, 0]]
        return pl.DataFrame({**{k: [v] * len(iv) for k, v in base.items()}, "tid": [None] * len(iv),
                             "start_ns": iv[:, 0], "end_ns": iv[:, 1], "bound": ["cpu"] * len(iv),
                             "name": [UNTRACED] * len(iv)}, schema_overrides=SEGMENT_SCHEMA)
    B = tl.bounds
    # every stretch with the timeline's bounds inside it as extra cuts
    j0 = np.clip(np.searchsorted(B, iv[:, 0], side="right") - 1, 0, len(B) - 1)
    j1 = np.clip(np.searchsorted(B, iv[:, 1], side="left"), 0, len(B) - 1)
    cnt = np.maximum(j1 - j0, 0) + 1
    sid = np.repeat(np.arange(len(iv)), cnt)
    j = np.repeat(j0, cnt) + (np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt))
    inside = j < len(B) - 1
    lo_ = np.where(inside, B[np.clip(j, 0, len(B) - 1)], iv[sid, 1])
    hi_ = np.where(inside, B[np.clip(j + 1, 0, len(B) - 1)], iv[sid, 1])
    s = np.maximum(lo_, iv[sid, 0])
    e = np.minimum(hi_, iv[sid, 1])
    jj = np.clip(j, 0, len(tl.owner) - 1)
    covered = inside & (s >= B[0]) & (e <= B[-1])
    own = np.where(covered, tl.owner[jj], -1)
    cls = np.where(covered, tl.cls[jj], cp_host.CPU)
    # untraced time: stretch parts before the timeline's first bound or after its last
    ex = np.concatenate([np.stack([iv[:, 0], np.minimum(iv[:, 1], B[0])], axis=1),
                         np.stack([np.maximum(iv[:, 0], B[-1]), iv[:, 1]], axis=1)])
    s, e = np.r_[s, ex[:, 0]], np.r_[e, ex[:, 1]]
    own, cls = np.r_[own, np.full(len(ex), -1)], np.r_[cls, np.full(len(ex), cp_host.CPU)]
    keep = e > s
    s, e, own, cls = s[keep], e[keep], own[keep], cls[keep]
    o = np.argsort(s, kind="stable")
    s, e, own, cls = s[o], e[o], own[o], cls[o]
    if not len(s):
        return pl.DataFrame(schema=SEGMENT_SCHEMA)
    # merge adjacent pieces of one owner and class
    new = np.r_[True, (own[1:] != own[:-1]) | (cls[1:] != cls[:-1]) | (s[1:] != e[:-1])]
    first = np.flatnonzero(new)
    last = np.r_[first[1:], len(s)] - 1
    own1 = own[first]
    has = own1 >= 0
    names = solver.host_name_s.gather(np.clip(own1, 0, None)).to_numpy().astype(object)
    names[~has] = UNTRACED
    tids = np.where(has, solver.host_tid_a[np.clip(own1, 0, None)], tl.main_tid)
    n = len(first)
    return pl.DataFrame({
        "rank": np.full(n, rank, dtype=np.int32), "step": np.full(n, step, dtype=np.int64),
        "start_ns": s[first], "end_ns": e[last],
        "bound": np.array([cp_graph.CLASS_BOUND[c] for c in cp_host.CLASSES], dtype=object)[cls[first]],
        "kind": np.full(n, "host", dtype=object), "name": names, "category": [None] * n,
        "pid": np.full(n, pid, dtype=np.int64), "tid": tids.astype(np.int64),
        "device": [None] * n, "stream": [None] * n}, schema=SEGMENT_SCHEMA)


BUSY_NAME = "(GPU busy on another stream)"


def split_busy(busy: np.ndarray, seg: dict) -> list[dict]:
    """A stream's gap cut where other streams of the device ran ops: there the op waited for
    the GPU (bound gpu), elsewhere the GPU was idle (gpu_gap)."""
    a, b = seg["start_ns"], seg["end_ns"]
    if not len(busy) or b <= a:
        return [seg]
    i = max(int(np.searchsorted(busy[:, 1], a, side="right")), 0)
    out, t = [], a
    while i < len(busy) and busy[i, 0] < b:
        s_, e_ = max(int(busy[i, 0]), a), min(int(busy[i, 1]), b)
        if s_ > t:
            out.append({**seg, "start_ns": t, "end_ns": s_})
        if e_ > s_:
            out.append({**seg, "start_ns": s_, "end_ns": e_, "bound": "gpu", "name": BUSY_NAME})
            t = e_
        i += 1
    if t < b:
        out.append({**seg, "start_ns": t, "end_ns": b})
    return out


def what_if_bounds(solver: Solver, path: list[tuple], w: np.ndarray, factors: dict) -> dict[str, float]:
    """{bound: ns} of a re-timed path: host stretches split by class under the factors."""
    g = solver.g
    f_cls = np.array([0.0 if c == "wait" else factors.get(cp_graph.CLASS_BOUND[c], 1.0) for c in cp_host.CLASSES])
    out: dict[str, float] = {}
    for e, n, t0, t1 in path:
        length = t1 - t0
        if e < 0:
            b = "cpu" if g.node_type[n] == cp_graph.HOST else "gpu_gap"
            out[b] = out.get(b, 0.0) + length
            continue
        k = int(g.kind[e])
        if k == CHAIN:
            vec = g.chain_vec[int(g.ref[e])] * f_cls
            tot = vec.sum()
            if tot > 0:
                for i, v in enumerate(vec):
                    if v:
                        b = cp_graph.CLASS_BOUND[cp_host.CLASSES[i]]
                        out[b] = out.get(b, 0.0) + length * v / tot
            else:
                out["cpu"] = out.get("cpu", 0.0) + length
            continue
        b = solver.op_bound[int(g.ref[e])] if k in (RUN, XRANK) else edge_bound(solver, k, int(g.ref[e]))
        out[b] = out.get(b, 0.0) + length
    return out


def edge_bound(solver: Solver, k: int, ref: int) -> str:
    """The bound of a delay edge: a copy's or memset's launch delay is the copy's (a pageable
    or blocking copy stages the data on the host before the GPU op runs)."""
    if k == LAUNCH and solver.op_kind[ref] in ("memcpy", "memset"):
        return "memcpy"
    return EDGE_BOUND[k]


def covered(busy: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Time inside the sorted disjoint intervals `busy` (n, 2) before each t."""
    if not len(busy):
        return np.zeros(len(t), dtype=np.int64)
    cum = np.r_[0, np.cumsum(busy[:, 1] - busy[:, 0])]
    j = np.searchsorted(busy[:, 0], t, side="right") - 1
    jj = np.clip(j, 0, None)
    part = np.clip(t - busy[jj, 0], 0, busy[jj, 1] - busy[jj, 0])
    return np.where(j >= 0, cum[jj] + part, 0)


def path_bounds(solver: Solver, path: list[tuple]) -> dict:
    """{rank: {bound: ns}} of a recorded path without its segments (what diagnose weighs):
    host stretches by their timeline's class integrals, stream gaps cut by the device's busy
    time, as segments_of cuts them."""
    g = solver.g
    out: dict = {}
    if not path:
        return out
    e = np.fromiter((x[0] for x in path), dtype=np.int64, count=len(path))
    n = np.fromiter((x[1] for x in path), dtype=np.int64, count=len(path))
    t0 = np.fromiter((x[2] for x in path), dtype=np.float64, count=len(path))
    t1 = np.fromiter((x[3] for x in path), dtype=np.float64, count=len(path))
    r = g.node_rank[n]
    off = np.array([g.offsets.get(int(x), 0) - g.t0 for x in r.tolist()], dtype=np.int64)
    a_ = np.round(t0).astype(np.int64) - off
    b_ = np.round(t1).astype(np.int64) - off
    ln = b_ - a_
    kind = np.where(e >= 0, g.kind[np.clip(e, 0, None)], -1)
    ref = np.where(e >= 0, g.ref[np.clip(e, 0, None)], -1)
    code = {b: i for i, b in enumerate(BOUNDS)}
    acc: dict = {}

    def add(rr, bb, vv):
        for x, y, v in zip(rr.tolist(), bb.tolist(), vv.tolist()):
            if v > 0:
                acc[(x, y)] = acc.get((x, y), 0) + v

    m = kind < 0
    add(r[m], np.where(g.node_type[n[m]] == cp_graph.HOST, code["cpu"], code["gpu_gap"]), ln[m])
    m = (kind == RUN) | (kind == XRANK)
    add(r[m], solver.op_bound_code[ref[m]], ln[m])
    m = kind == LAUNCH
    add(r[m], np.where(np.isin(solver.op_kind_a[ref[m]], ("memcpy", "memset")), code["memcpy"], code["launch"]), ln[m])
    for k in (XSTREAM, SYNC):
        m = kind == k
        add(r[m], np.full(int(m.sum()), code[EDGE_BOUND[k]]), ln[m])
    gi = np.flatnonzero(kind == GAP)
    if len(gi):
        dev = np.array([solver.op_dev[int(x)] if solver.op_dev[int(x)] is not None else -1 for x in ref[gi].tolist()])
        for rk, d in set(zip(r[gi].tolist(), dev.tolist())):
            sel = gi[(r[gi] == rk) & (dev == d)]
            busy = solver.busy(rk, None if d == -1 else d)
            inside = covered(busy, b_[sel]) - covered(busy, a_[sel])
            add(r[sel], np.full(len(sel), code["gpu"]), inside)
            add(r[sel], np.full(len(sel), code["gpu_gap"]), ln[sel] - inside)
    m = np.flatnonzero(kind == CHAIN)
    if len(m):
        keys = [g.chain_tl[int(x)] for x in ref[m].tolist()]
        groups: dict = {}
        for j, key in zip(m.tolist(), keys):
            groups.setdefault(key, []).append(j)
        cls_code = np.array([code[cp_graph.CLASS_BOUND[c]] for c in cp_host.CLASSES])
        for (rk, pid), idx in groups.items():
            idx = np.array(idx)
            tl = g.timelines.get((rk, pid))
            if tl is None:
                add(np.array([rk]), np.array([code["cpu"]]), np.array([int(ln[idx].sum())]))
                continue
            vec = (tl.integral(b_[idx]) - tl.integral(a_[idx])).sum(axis=0)
            add(np.full(len(vec), rk), cls_code, vec)
            add(np.array([rk]), np.array([code["cpu"]]), np.array([int(ln[idx].sum() - vec.sum())]))
    for (x, y), v in acc.items():
        out.setdefault(x, {})[BOUNDS[y]] = out.setdefault(x, {}).get(BOUNDS[y], 0) + int(v)
    return out


def solve_step(solver: Solver, ranks_steps: list[tuple], step: int, factors: dict | None = None,
               w: np.ndarray | None = None, detail: bool = True) -> dict:
    """One step (on one rank, or on several joined): its span, path, segments, bounds, and
    with factors the predicted span and the re-timed path's bounds."""
    g = solver.g
    lo = min(float(lo_r + g.offsets.get(r, 0) - g.t0) for r, _, lo_r, _ in ranks_steps)
    cands, end = end_of_step(g, ranks_steps)
    out = {"step": step, "lo": lo, "span_ns": 0, "segments": pl.DataFrame(schema=SEGMENT_SCHEMA), "wait_ns": 0.0, "predicted_ns": None,
           "what_if": {}}
    if not cands or end <= lo:
        return out
    end_node = max(cands, key=lambda c: (g.t[c], c))
    path = solver.walk_recorded(end_node, lo)
    out["span_ns"] = int(round(end - lo))
    if detail:
        out["segments"] = segments_of(solver, path, step)
    else:
        out["bounds_by_rank"] = path_bounds(solver, path)
    out["wait_ns"] = cross_rank_wait(solver, path)
    if factors:
        a = int(np.searchsorted(g.t, lo, side="right"))
        b = int(max(cands)) + 1
        new, bind = solver.retime(a, b, w)

        def time_of(n):
            return new[n - a] if n >= a else float(g.t[n])

        def bind_of(n):
            return bind[n - a] if n >= a else -1
        new_end = max(cands, key=lambda c: (time_of(c), c))
        p2 = solver.walk(new_end, lo, time_of, bind_of)
        out["predicted_ns"] = int(round(time_of(new_end) - lo))
        out["what_if"] = what_if_bounds(solver, p2, w, factors)
    return out


def cross_rank_wait(solver: Solver, path: list[tuple]) -> float:
    """Time the path's ranks spent in collectives waiting for the rank the path moved to."""
    g = solver.g
    wait = 0.0
    for e, n, t0, t1 in path:
        if e >= 0 and int(g.kind[e]) == XRANK:
            own_start = float(g.t[g.gpu_start_node[int(g.ref[e])]])
            wait += max(float(g.t[int(g.src[e])]) - own_start, 0.0)
    return wait


def run_paths(scope, joined: bool = False, factors: dict | None = None, data_pattern: str | None = None,
              detail: bool = True) -> dict:
    """Every step of the scope: {"steps": [per-step dicts], "segments": frame (SEGMENT_SCHEMA),
    "ranks": the ranks with steps (joined: those the graph joins)}.
    A step dict: rank (None when joined), step, start_ns (rank clock; joined: the common clock of
    the run's first rank), span_ns, path_ns, predicted_ns, wait_ns, bounds {bound: ns},
    bounds_by_rank {rank: {bound: ns}}, by_rank {rank: ns outside communication}, what_if
    {bound: ns}. `detail=False`: the bounds without the segments (an empty frame), faster."""
    from .cp_load import graphs

    factors, (steps_out, segs, ranks) = factors or {}, ([], [], set())
    for g, st in graphs(scope, joined, data_pattern):
        ranks.update(st["rank"].to_list())
        solver = Solver(g)
        w = solver.weights(factors) if factors else None
        if joined:
            groups = [(int(s), list(d.select("rank", "pid", "start_ns", "end_ns").iter_rows()))
                      for (s,), d in st.group_by(["step"], maintain_order=True)]
        else:
            groups = [(int(s), [(r, p, a, b)]) for r, s, a, b, p in
                      st.select("rank", "step", "start_ns", "end_ns", "pid").iter_rows()]
        for step, rs in groups:
            res = solve_step(solver, rs, step, factors, w, detail)
            steps_out.append({
                "rank": None if joined else rs[0][0], "step": step,
                "start_ns": int(round(res["lo"])) + g.t0 - (0 if joined else g.offsets.get(rs[0][0], 0)),
                "span_ns": res["span_ns"], "predicted_ns": res["predicted_ns"],
                "wait_ns": int(round(res["wait_ns"])), "what_if": res["what_if"],
                "fast": res.get("bounds_by_rank")})
            if detail:
                segs.append(res["segments"].with_columns(sid=pl.lit(len(steps_out) - 1, pl.Int32)))
    frame = pl.concat(segs, how="vertical_relaxed") if segs else \
        pl.DataFrame(schema={**SEGMENT_SCHEMA, "sid": pl.Int32})
    # per step: path time by bound, by rank and bound, and by rank outside communication
    per = (frame.group_by("sid", "rank", "bound").agg((pl.col("end_ns") - pl.col("start_ns")).sum().alias("ns"))
           .sort("sid", "rank", "bound"))
    for s_ in steps_out:
        s_.update(bounds={}, bounds_by_rank={}, by_rank={}, path_ns=0)
    rows = per.iter_rows() if detail else [
        (sid, rk, b, v) for sid, s_ in enumerate(steps_out) for rk, d in sorted((s_.pop("fast") or {}).items())
        for b, v in sorted(d.items())]
    for sid, rk, b, v in rows:
        s_ = steps_out[sid]
        s_["bounds"][b] = s_["bounds"].get(b, 0) + v
        s_["bounds_by_rank"].setdefault(rk, {})[b] = v
        s_["path_ns"] += v
        if b != "communication":
            s_["by_rank"][rk] = s_["by_rank"].get(rk, 0) + v
    for s_ in steps_out:
        s_.pop("fast", None)
    return {"steps": steps_out, "segments": frame.drop("sid"), "ranks": sorted(ranks)}


def path_segments(scope) -> pl.DataFrame:
    """The critical path's segments of every step of the scope (ranks joined when the run has
    several): SEGMENT_SCHEMA, rank's own clock, in path order per step."""
    n = scope.df("SELECT count(*) AS n FROM scope_window")["n"][0]
    return run_paths(scope, joined=n > 1)["segments"]
