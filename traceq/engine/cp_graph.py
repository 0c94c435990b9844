"""The critical path's graph: what each event of a run waited for.

Nodes (times on the run's common clock when several ranks are joined, else the rank's own):
  host point   an instant on a process's host timeline (engine/cp_host.py) where the path can
               enter or leave the host: a launch call's start, the end of a blocking call (sync,
               blocking copy), a step's start and end
  GPU start, GPU end   of every kernel, memcpy and memset

Edges (node <- predecessor, and the weight the what-if re-times):
  chain    host point <- the previous point of its process: the host work between them, per
           class (cp_host.CLASSES; time a blocking call spent waiting weighs nothing)
  run      GPU end <- its start: the op's duration
  launch   GPU start <- its launch call's start: the launch delay
  gap      GPU start <- the end of the op before it on its stream: the stream's gap
  xstream  GPU start <- the end of an op on another stream of the device that ended after both
           of the above, in a rank that waits on events across streams (cudaStreamWaitEvent,
           hipStreamWaitEvent), or for a kernel replayed from a graph (a graph orders its
           streams inside it): the cross-stream wait
  sync     blocking call's end <- the end of the last GPU op of its process that ended inside
           the call: what it waited for
  xrank    (ranks joined) a collective kernel's end <- the start of the same collective
           instance on every other rank (matched by process group and sequence number, as
           `traceq ranks` matches them): a collective ends when its last rank arrives; its own
           run edge then weighs the time after the last arrival

Which predecessor an event waited for is the one that arrived last. For the what-if, an edge
that was not the last to arrive keeps at most the typical delay of its kind on the rank (the
median of the launch delays and stream gaps that did bind), so a faster GPU can make a kernel
wait for its launch; an edge that bound keeps its delay. Re-timing with no factor gives back
every recorded time exactly.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..lazy import polars as pl
from . import cp_host

CHAIN, RUN, LAUNCH, GAP, XSTREAM, SYNC, XRANK = range(7)
EDGE_KINDS = ("chain", "run", "launch", "gap", "xstream", "sync", "xrank")
HOST, GPU_START, GPU_END = range(3)
BOUNDS = ("cpu", "data_loading", "launch", "gpu", "gpu_gap", "communication", "sync", "memcpy")
# host classes -> bounds (wait never lies on the path)
CLASS_BOUND = {"wait": "sync", "data_loading": "data_loading", "sync": "sync", "memcpy": "memcpy",
               "launch": "launch", "communication": "communication", "cpu": "cpu"}
STREAM_WAIT = r"(?i)^(cuda|cu|hip)StreamWaitEvent"


@dataclass
class Graph:
    t: np.ndarray                 # int64 node times - t0, sorted (node id = position): small
                                  # enough that float64 arithmetic on them is exact to the ns
    t0: int                       # the time (common clock) that node times count from
    node_rank: np.ndarray         # int32
    node_type: np.ndarray         # int8 HOST | GPU_START | GPU_END
    node_ref: np.ndarray          # int64: GPU op row, or host point index
    indptr: np.ndarray            # CSR of predecessors by node
    src: np.ndarray               # predecessor node of each edge
    kind: np.ndarray              # int8 edge kind
    base: np.ndarray              # float64 weight before factors (run: duration; others: delay)
    ref: np.ndarray               # int64: GPU op row (run, launch, gap, xstream, xrank), host
                                  # row (sync), chain row (chain)
    chain_vec: np.ndarray         # (chains, classes) int64: host time per class of each chain
    chain_span: np.ndarray        # (chains, 2) int64: the stretch of each chain edge
    chain_tl: list                # (rank, pid) of each chain edge
    gpu: pl.DataFrame             # critical_path_gpu.sql's frame (+ row order)
    host: pl.DataFrame            # critical_path_host.sql's frame
    timelines: dict               # {(rank, pid): HostTimeline}
    offsets: dict                 # {rank: ns added to the rank's times}
    point_t: np.ndarray           # host points: time (common clock)
    point_key: list               # host points: (rank, pid)
    points_by_key: dict = field(default_factory=dict)   # {(rank, pid): (sorted times, node ids)}
    gpu_start_node: np.ndarray = None
    gpu_end_node: np.ndarray = None

    def host_node(self, rank: int, pid: int, t: int) -> int | None:
        """The node of the host point of (rank, pid) at time t (common clock, not - t0), if any."""
        hit = self.points_by_key.get((rank, pid))
        if hit is None:
            return None
        ts, ids = hit
        j = int(np.searchsorted(ts, t))
        return int(ids[j]) if j < len(ts) and ts[j] == t else None


def _median(x: np.ndarray) -> float:
    return float(np.median(x)) if len(x) else 0.0


def sync_deps(host: pl.DataFrame, gpu: pl.DataFrame) -> pl.DataFrame:
    """(row, rank, pid, dep, dep_end_ns): each blocking call (row of `host`) and the GPU op
    (row of `gpu`) of its process that ended last inside the call, when one did."""
    calls = host.with_row_index("row").filter(pl.col("cls").is_in(["sync", "memcpy"]))
    out = []
    if calls.height and gpu.height:
        g = gpu.with_row_index("dep").select("rank", "pid", "dep", "end_ns").sort(["rank", "pid", "end_ns"])
        for (rank, pid), c in calls.group_by(["rank", "pid"]):
            gg = g.filter(pl.col("rank") == rank, pl.col("pid") == pid)
            if gg.height == 0:
                continue
            ends = gg["end_ns"].to_numpy()
            j = np.searchsorted(ends, c["end_ns"].to_numpy(), side="right") - 1
            ok = (j >= 0) & (ends[np.clip(j, 0, None)] >= c["start_ns"].to_numpy())
            if ok.any():
                jj = j[ok]
                out.append(pl.DataFrame({"row": c["row"].to_numpy()[ok], "rank": rank, "pid": pid,
                                         "dep": gg["dep"].to_numpy()[jj], "dep_end_ns": ends[jj]}))
    if not out:
        return pl.DataFrame(schema={"row": pl.UInt32, "rank": pl.Int32, "pid": pl.Int64, "dep": pl.UInt32,
                                    "dep_end_ns": pl.Int64})
    return pl.concat(out, how="vertical_relaxed")


def build(host: pl.DataFrame, gpu: pl.DataFrame, steps: pl.DataFrame, main_threads: dict,
          data: dict, offsets: dict, instances: pl.DataFrame | None = None,
          stream_waits: set | None = None) -> Graph:
    """The graph of the ranks in `host`/`gpu`. `steps` (rank, step, start_ns, end_ns, pid) puts
    host points at step boundaries on the step's process; `instances` (rank, row, inst): the
    collective instance of each communication kernel (row of `gpu`), to join the ranks;
    `stream_waits`: the ranks whose host waits on events across streams."""
    gpu = gpu.with_columns(pl.col("category").fill_null("other"))
    waits = sync_deps(host, gpu)
    timelines = cp_host.build(host, main_threads, data, waits.select("row", "rank", "pid", "dep_end_ns"))
    off = np.array([offsets.get(r, 0) for r in range(max([*offsets, 0]) + 1)], dtype=np.int64)

    # host points, per process
    # (a column with nulls comes out of polars as float64: fill them, times must stay int64)
    g_rank, g_pid = gpu["rank"].to_numpy(), gpu["pid"].fill_null(-1).to_numpy()
    call_t = gpu["call_start_ns"].fill_null(0).to_numpy()
    has_call = ~gpu["call_start_ns"].is_null().to_numpy()
    pts = [pl.DataFrame({"rank": g_rank[has_call], "pid": g_pid[has_call], "t": call_t[has_call]})]
    hrow = host.with_row_index("row")
    if waits.height:
        w = waits.join(hrow.select("row", "end_ns"), on="row")
        pts.append(w.select("rank", "pid", pl.col("end_ns").alias("t")))
    pts.append(steps.select("rank", "pid", pl.col("start_ns").alias("t")))
    pts.append(steps.select("rank", "pid", pl.col("end_ns").alias("t")))
    points = (pl.concat([p.with_columns(pl.col("rank").cast(pl.Int32), pl.col("pid").cast(pl.Int64),
                                        pl.col("t").cast(pl.Int64)) for p in pts])
              .filter(pl.col("t").is_not_null()).unique().sort(["rank", "pid", "t"]))
    p_rank, p_pid, p_t = points["rank"].to_numpy(), points["pid"].to_numpy(), points["t"].to_numpy()
    n_pts, n_gpu = points.height, gpu.height

    # nodes: host points, GPU starts, GPU ends; sorted by common time (GPU ends before host
    # points at an instant, host points before GPU starts: a launch precedes its kernel; the
    # end of an op of no duration after its start)
    t_all = np.concatenate([p_t + off[p_rank], gpu["start_ns"].to_numpy() + off[g_rank],
                            gpu["end_ns"].to_numpy() + off[g_rank]]).astype(np.int64)
    typ = np.concatenate([np.full(n_pts, HOST), np.full(n_gpu, GPU_START), np.full(n_gpu, GPU_END)]).astype(np.int8)
    prio = np.choose(typ, [1, 2, 0])
    # the end of an op of no duration goes with the starts, right after its own start (ops in
    # stream order: a start at 2i, an end at 2i + 1)
    zero = (gpu["end_ns"] == gpu["start_ns"]).to_numpy()
    prio[n_pts + n_gpu:][zero] = 2
    ref = np.concatenate([np.arange(n_pts), np.arange(n_gpu), np.arange(n_gpu)]).astype(np.int64)
    tie = np.concatenate([np.arange(n_pts), 2 * np.arange(n_gpu), 2 * np.arange(n_gpu) + 1]).astype(np.int64)
    rank_all = np.concatenate([p_rank, g_rank, g_rank]).astype(np.int32)
    order = np.lexsort((tie, prio, t_all))
    node_of = np.empty(len(order), dtype=np.int64)
    node_of[order] = np.arange(len(order))
    pt_node, gs_node, ge_node = node_of[:n_pts], node_of[n_pts:n_pts + n_gpu], node_of[n_pts + n_gpu:]

    E_dst, E_src, E_kind, E_base, E_ref = [], [], [], [], []

    def add(dst, src, kind, base, ref_):
        E_dst.append(np.asarray(dst, dtype=np.int64)), E_src.append(np.asarray(src, dtype=np.int64))
        E_kind.append(np.full(len(E_dst[-1]), kind, dtype=np.int8))
        E_base.append(np.asarray(base, dtype=np.float64)), E_ref.append(np.asarray(ref_, dtype=np.int64))

    # chain edges: consecutive points of a process
    chain_vec, chain_span, chain_tl = [], [], []
    points_by_key = {}
    key_change = np.r_[True, (p_rank[1:] != p_rank[:-1]) | (p_pid[1:] != p_pid[:-1])]
    starts = np.flatnonzero(key_change)
    ends = np.r_[starts[1:], n_pts]
    n_chain = 0
    for a, b in zip(starts, ends):
        key = (int(p_rank[a]), int(p_pid[a]))
        points_by_key[key] = (p_t[a:b] + off[key[0]], pt_node[a:b])
        tl = timelines.get(key)
        if b - a < 2:
            continue
        tt = p_t[a:b]
        if tl is not None:
            integ = tl.integral(tt)
            vec = np.diff(integ, axis=0)
        else:
            vec = np.zeros((b - a - 1, len(cp_host.CLASSES)), dtype=np.int64)
            vec[:, cp_host.CPU] = np.diff(tt)
        # time the timeline does not cover (before its first op, after its last) is host time
        gapless = np.diff(tt) - vec.sum(axis=1)
        vec[:, cp_host.CPU] += np.maximum(gapless, 0)
        w = vec.copy()
        w[:, cp_host.WAIT] = 0
        add(pt_node[a + 1:b], pt_node[a:b - 1], CHAIN, w.sum(axis=1), np.arange(n_chain, n_chain + b - a - 1))
        chain_vec.append(vec)
        chain_span.append(np.stack([tt[:-1], tt[1:]], axis=1))
        chain_tl.extend([key] * (b - a - 1))
        n_chain += b - a - 1

    # GPU: run edges, stream order, launches
    g_s, g_e = gpu["start_ns"].to_numpy(), gpu["end_ns"].to_numpy()
    dur = (g_e - g_s).astype(np.float64)
    add(ge_node, gs_node, RUN, dur, np.arange(n_gpu))
    dev, stream = gpu["device"].fill_null(-1).to_numpy(), gpu["stream"].fill_null(-1).to_numpy()
    same = np.r_[False, (g_rank[1:] == g_rank[:-1]) & (dev[1:] == dev[:-1]) & (stream[1:] == stream[:-1])]
    prev = np.where(same, np.arange(n_gpu) - 1, -1)
    # the launch point of each op: the host point of its call
    launch_node = np.full(n_gpu, -1, dtype=np.int64)
    if has_call.any():
        kp = points.with_row_index("p").select("rank", "pid", "t", "p")
        lk = (pl.DataFrame({"rank": g_rank[has_call].astype(np.int32), "pid": g_pid[has_call].astype(np.int64),
                            "t": call_t[has_call].astype(np.int64), "row": np.flatnonzero(has_call)})
              .join(kp, on=["rank", "pid", "t"], how="left"))
        launch_node[lk["row"].to_numpy()] = pt_node[lk["p"].to_numpy()]
    MIN = np.iinfo(np.int64).min
    P = np.where(prev >= 0, g_e[np.clip(prev, 0, None)], MIN)
    L = np.where(has_call, call_t, MIN)
    L = np.where(L <= g_s, L, MIN)      # a call after its op: the clocks disagree
    P = np.where(P <= g_s, P, MIN)
    # cross-stream waits: the latest end on another stream of the device after both others
    X = np.full(n_gpu, MIN, dtype=np.int64)
    X_src = np.full(n_gpu, -1, dtype=np.int64)
    graph_op = gpu["graph"].fill_null(False).to_numpy()
    if stream_waits or graph_op.any():
        arrive = np.maximum(P, L)
        for (r, d), grp in gpu.with_row_index("row").group_by(["rank", "device"]):
            # kernels replayed from a graph wait across streams inside the graph, where the
            # host records no stream-wait call
            every = r in (stream_waits or ())
            if not every and not graph_op[grp["row"].to_numpy()].any():
                continue
            rows_ = grp["row"].to_numpy()
            strm = grp["stream"].fill_null(-1).to_numpy()
            starts_ = g_s[rows_]
            for sv in np.unique(strm):
                on = rows_[strm == sv]
                o = np.argsort(g_e[on], kind="stable")
                ends_, src_ = g_e[on][o], on[o]
                j = np.searchsorted(ends_, starts_, side="right") - 1
                cand = np.where(j >= 0, ends_[np.clip(j, 0, None)], MIN)
                better = (strm != sv) & (cand > X[rows_]) & (cand > arrive[rows_]) & (every | graph_op[rows_])
                X[rows_[better]] = cand[better]
                X_src[rows_[better]] = src_[np.clip(j, 0, None)][better]
    latest = np.maximum(np.maximum(P, L), X)
    x_binds = (X > MIN) & (X == latest)
    launch_binds = ~x_binds & has_call & (L > MIN) & (L == latest) & (L > P)
    gap_binds = ~x_binds & ~launch_binds & (P > MIN)
    # typical delays per rank: the median of those that bound
    typ_launch = {r: _median((g_s - L)[launch_binds & (g_rank == r)]) for r in np.unique(g_rank)}
    typ_gap = {r: _median((g_s - P)[gap_binds & (g_rank == r)]) for r in np.unique(g_rank)}
    tl_ = np.array([typ_launch.get(r, 0.0) for r in g_rank]) if n_gpu else np.empty(0)
    tg_ = np.array([typ_gap.get(r, 0.0) for r in g_rank]) if n_gpu else np.empty(0)
    ok = (prev >= 0) & (P > MIN)
    d_gap = (g_s - P).astype(np.float64)
    add(gs_node[ok], ge_node[prev[ok]], GAP, np.where(gap_binds, d_gap, np.minimum(d_gap, tg_))[ok], np.flatnonzero(ok))
    ok = (launch_node >= 0) & (L > MIN)
    d_l = (g_s - L).astype(np.float64)
    add(gs_node[ok], launch_node[ok], LAUNCH, np.where(launch_binds, d_l, np.minimum(d_l, tl_))[ok], np.flatnonzero(ok))
    ok = X_src >= 0
    add(gs_node[ok], ge_node[X_src[ok]], XSTREAM, (g_s - X).astype(np.float64)[ok], np.flatnonzero(ok))

    # blocking calls wait for the GPU
    if waits.height:
        w = waits.join(hrow.select("row", "end_ns"), on="row")
        sn = [_node_at(points_by_key, int(r), int(p), int(t) + int(off[int(r)]))
              for r, p, t in zip(w["rank"], w["pid"], w["end_ns"])]
        sn = np.array(sn, dtype=np.int64)
        add(sn, ge_node[w["dep"].to_numpy()], SYNC, (w["end_ns"] - w["dep_end_ns"]).to_numpy().astype(np.float64),
            w["row"].to_numpy())

    # ranks joined by their collectives
    if instances is not None and instances.height:
        inst = instances.with_columns(s=pl.Series(g_s[instances["row"].to_numpy()] + off[g_rank[instances["row"].to_numpy()]]))
        first = inst.sort("s").group_by(["inst", "rank"], maintain_order=True).first()
        last_arrival = first.group_by("inst").agg(pl.col("s").max().alias("smax"), pl.len().alias("n"))
        both = inst.join(last_arrival.filter(pl.col("n") > 1), on="inst")
        rows = both["row"].to_numpy()
        after = np.maximum(g_e[rows] + off[g_rank[rows]] - both["smax"].to_numpy(), 0).astype(np.float64)
        # the run edge weighs the time after the last arrival (`dur` is the run edges' array)
        dur[rows] = np.minimum(dur[rows], after)
        fr = first.select("inst", "rank", pl.col("row").alias("frow"))
        pairs = both.select("inst", "rank", "row").join(fr, on="inst", suffix="_o").filter(pl.col("rank") != pl.col("rank_o"))
        if pairs.height:
            pr, pf = pairs["row"].to_numpy(), pairs["frow"].to_numpy()
            a_map = dict(zip(rows.tolist(), after.tolist()))
            add(ge_node[pr], gs_node[pf], XRANK, [a_map[int(x)] for x in pr], pr)

    dst = np.concatenate(E_dst) if E_dst else np.empty(0, dtype=np.int64)
    src = np.concatenate(E_src) if E_src else np.empty(0, dtype=np.int64)
    kind = np.concatenate(E_kind) if E_kind else np.empty(0, dtype=np.int8)
    base = np.concatenate(E_base) if E_base else np.empty(0)
    eref = np.concatenate(E_ref) if E_ref else np.empty(0, dtype=np.int64)
    keep = src < dst                               # an edge must point forward in time
    dst, src, kind, base, eref = dst[keep], src[keep], kind[keep], base[keep], eref[keep]
    o = np.lexsort((kind, dst))
    dst, src, kind, base, eref = dst[o], src[o], kind[o], base[o], eref[o]
    n_nodes = len(order)
    indptr = np.zeros(n_nodes + 1, dtype=np.int64)
    np.add.at(indptr, dst + 1, 1)
    indptr = np.cumsum(indptr)
    t0 = int(t_all.min()) if len(t_all) else 0
    return Graph(
        t=t_all[order] - t0, t0=t0, node_rank=rank_all[order], node_type=typ[order], node_ref=ref[order],
        indptr=indptr, src=src, kind=kind, base=base, ref=eref,
        chain_vec=np.concatenate(chain_vec) if chain_vec else np.zeros((0, len(cp_host.CLASSES)), dtype=np.int64),
        chain_span=np.concatenate(chain_span) if chain_span else np.zeros((0, 2), dtype=np.int64),
        chain_tl=chain_tl, gpu=gpu, host=host, timelines=timelines, offsets=offsets,
        point_t=p_t, point_key=list(zip(p_rank.tolist(), p_pid.tolist())), points_by_key=points_by_key,
        gpu_start_node=gs_node, gpu_end_node=ge_node)


def _node_at(points_by_key: dict, rank: int, pid: int, t: int) -> int:
    ts, ids = points_by_key[(rank, pid)]
    return int(ids[int(np.searchsorted(ts, t))])
