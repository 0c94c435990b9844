"""The operator view's call trees: per op call its host and device self/total time, tensor-core
time and tensor-core eligibility, as the TensorBoard profiler plugin (torch-tb-profiler 0.4.3:
event_parser.py, op_tree.py, node.py) defines them. SQL inputs: traceq/queries/operators_nodes.sql
(the tree's nodes) and operators_launches.sql (the runtime calls and the GPU time they launched).

Definitions:
  tree        per thread, the nodes nest by time: a node's parent is the innermost node whose
              span holds it (a node starting where another ends is no child of it; of two equal
              spans the later one is the child). A node that starts inside its parent but ends
              after it overlaps instead of nesting: the plugin leaves it out (with everything
              hanging on it: its launch calls), its would-be children hang on the enclosing node.
              The sweep is traceq/engine/op_owner.py's `nest`; nodes of no duration are points.
  dedup       a cpu_op node whose only child is a cpu_op of the same name absorbs it (repeatedly):
              one call, the outer call's span and input shapes, the inner one's children and
              launch calls (the outer one's own launch calls are dropped, as the plugin does,
              after torch.autograd.profiler's EventList._remove_dup_nodes).
  launches    plugin window: a runtime call belongs to the op whose Kineto "External id" it
              carries (none: 0, or no such op). traceq's window: to the innermost node around
              its start on its thread (any source); driver calls count too.
  host_total  the call's span; host_self = host_total − its children's spans − its launch calls'
              spans.
  device_self the GPU time (kernels, copies, memsets) its own launch calls launched;
              device_total = device_self summed over its subtree (itself included).
  tc_self/tc_total  the same over tensor-core kernels only (gpu_ops.tensor_core).
  tc_eligible the op's name is eligible (plugin: its TC_OP_Allowlist, exact names; traceq:
              traceq.kernels.tensor_cores.tensor_core_eligible with the recorded input types),
              or it is a cpu_op with a node below it that is eligible by name or launched
              tensor-core kernels itself.
Every step works on whole columns (polars, and NumPy index arrays for the tree after the sweep:
bincount, gather, running sums, searchsorted); no per-event Python.
"""
from __future__ import annotations

import numpy as np

from ..lazy import polars as pl
from .op_owner import THREAD, nest

# the plugin's TC_OP_Allowlist (torch_tb_profiler/profiler/tensor_core.py, 0.4.3): op names, exact
TB_ELIGIBLE_OPS = frozenset((
    "aten::_convolution", "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::conv_tbc",
    "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d", "aten::convolution",
    "aten::cudnn_convolution", "aten::cudnn_convolution_transpose", "aten::prelu", "aten::addmm", "aten::addmv",
    "aten::addr", "aten::matmul", "aten::mm", "aten::mv", "aten::linear", "aten::addbmm", "aten::baddbmm",
    "aten::bmm", "aten::chain_matmul", "aten::linalg_multi_dot", "aten::_thnn_fused_lstm_cell",
    "aten::_thnn_fused_gru_cell", "aten::lstm_cell", "aten::gru_cell", "aten::rnn_tanh_cell",
    "aten::rnn_relu_cell", "CudnnConvolutionBackward", "BmmBackward0", "aten::cudnn_convolution_transpose_backward",
    "CudnnConvolutionTransposeBackward", "MmBackward", "aten::cudnn_convolution_backward_weight", "aten::addmm_",
    "AddmvBackward", "MvBackward", "aten::cudnn_convolution_transpose_backward_weight",
    "aten::cudnn_convolution_transpose_backward_input", "AddmmBackward", "aten::cudnn_convolution_backward_input",
    "AddbmmBackward", "aten::cudnn_convolution_backward"))

def plugin_times(df: pl.DataFrame) -> pl.DataFrame:
    """start_ns/end_ns as the plugin sees them: it reads `ts` and `dur` as float µs and ends a
    span at ts + dur, so on traces with absolute epoch µs (~1.7e15: a double resolves 0.25 µs) a
    child that ends a few ns after its parent may end with it. Each time is the exact ns value
    of that double (ts = the double nearest the recorded µs, end = the double nearest ts + dur)."""
    def as_float(ns):
        return (ns // 1000).cast(pl.Float64) + (ns % 1000).cast(pl.Float64) / 1000.0

    def as_ns(us):
        whole = us.floor()
        return whole.cast(pl.Int64) * 1000 + ((us - whole) * 1000.0).round().cast(pl.Int64)

    ts = as_float(pl.col("start_ns"))
    end = ts + as_float(pl.col("end_ns") - pl.col("start_ns"))
    return df.with_columns(start_ns=as_ns(ts), end_ns=as_ns(end))


# overlapping nodes are dropped in rounds (each round drops those whose parent is sound)
MAX_ROUNDS = 64


def _tree(nodes: pl.DataFrame, extra: pl.DataFrame | None = None) -> tuple[pl.DataFrame, int, pl.DataFrame | None]:
    """(node_id, parent_id) of the nodes kept, how many overlapping nodes were left out, and for
    the `extra` points (THREAD columns, t_ns) (pt, node_id): the innermost kept node around each.
    `nodes`: node_id, THREAD columns, start_ns, end_ns."""
    alive = nodes
    dropped = 0
    for _ in range(MAX_ROUNDS):
        spans = alive.filter(pl.col("end_ns") > pl.col("start_ns"))
        zero = alive.filter(pl.col("end_ns") <= pl.col("start_ns"))
        zpts = zero.select(*THREAD, t_ns=pl.col("start_ns"))
        n_zero = zpts.height
        if extra is not None:
            zpts = pl.concat([zpts, extra.select(*THREAD, "t_ns")], how="vertical_relaxed")
        par, inner = nest(spans, zpts)
        # sweep indices (rows of `spans`, of the points) -> node ids, by position
        sid, s_start, s_end = spans["node_id"], spans["start_ns"], spans["end_ns"]
        par = par.sort("call_id")                      # one row per span, in row order
        p_idx = par["parent_id"]
        kids = pl.DataFrame({"node_id": sid, "parent_id": sid.gather(p_idx),
                             "start_ns": s_start, "end_ns": s_end,
                             "p_start": s_start.gather(p_idx), "p_end": s_end.gather(p_idx)})
        zin = (pl.DataFrame({"pt": pl.int_range(0, n_zero, dtype=pl.UInt32, eager=True)})
               .join(inner, on="pt", how="left").sort("pt")["call_id"])
        zkids = pl.DataFrame({"node_id": zero["node_id"], "parent_id": sid.gather(zin),
                              "start_ns": zero["start_ns"], "end_ns": zero["end_ns"],
                              "p_start": s_start.gather(zin), "p_end": s_end.gather(zin)})
        tree = pl.concat([kids, zkids])
        bad = tree.filter(pl.col("end_ns") > pl.col("p_end"))
        if not bad.height:
            ext = None
            if extra is not None:
                ext = inner.filter(pl.col("pt") >= n_zero)
                ext = pl.DataFrame({"pt": ext["pt"] - n_zero, "node_id": sid.gather(ext["call_id"])})
            return tree.select("node_id", "parent_id"), dropped, ext
        # sound: the parent holds the start (later ones may sit on a wrong parent until the
        # overlapping node is gone) and is not overlapping itself
        flagged = bad["node_id"]
        drop = bad.filter((pl.col("start_ns") >= pl.col("p_start")) & (pl.col("start_ns") < pl.col("p_end"))
                          & ~pl.col("parent_id").is_in(flagged.implode()))["node_id"]
        if not len(drop):
            drop = bad.sort("start_ns").head(1)["node_id"]
        dropped += len(drop)
        alive = alive.filter(~pl.col("node_id").is_in(drop.implode()))
    raise RuntimeError(f"operator trees: still overlapping calls after {MAX_ROUNDS} rounds")


def calls_of(nodes: pl.DataFrame, launches: pl.DataFrame, plugin: bool, eligible) -> tuple[pl.DataFrame, int]:
    """Per op call (`op` nodes kept in the tree after dedup): the nodes' columns and host_total_ns,
    host_self_ns, device_self_ns, device_total_ns, tc_self_ns, tc_total_ns, tc_eligible, t0 and
    level (sorted by rank, t0, pid, tid, end_ns, level: the plugin's traversal order, thread by
    thread, children before their parent); and how many overlapping nodes were left out.
    `nodes`: operators_nodes.sql's rows sorted by rank, pid, tid, start_ns, end_ns descending
    (pre-order); `launches`: operators_launches.sql's;
    `plugin`: the plugin's launch link (External id) and dedup, else traceq's (the call around the
    launch); `eligible(name, input_types) -> bool`: tensor-core eligibility by name."""
    if plugin:
        nodes, launches = plugin_times(nodes), plugin_times(launches)
    nodes = nodes.with_row_index("node_id").with_columns(clock=pl.lit("host"), dur_ns=pl.col("end_ns") - pl.col("start_ns"))
    pts = None if plugin else launches.select(*THREAD[:3], clock=pl.lit("host"), t_ns=pl.col("start_ns"))
    tree, dropped, around = _tree(nodes.select("node_id", *THREAD, "start_ns", "end_ns"), pts)
    # from here on, arrays indexed by node_id (the nodes' row numbers, in pre-order: thread,
    # start, longer first)
    n = nodes.height
    node_ids = tree["node_id"].to_numpy().astype(np.int64)
    alive = np.zeros(n, bool)
    alive[node_ids] = True
    parent = np.full(n, -1, np.int64)
    parent[node_ids] = tree["parent_id"].fill_null(-1).to_numpy().astype(np.int64)
    has_parent = parent >= 0
    up = np.where(has_parent, parent, 0)
    cpu = nodes["cpu_op"].to_numpy()
    name = nodes["name"].cast(pl.Categorical).to_physical().to_numpy()
    # dedup: a cpu_op whose only child is a cpu_op of its name absorbs it (chains: repeatedly)
    n_kids = np.bincount(parent[alive & has_parent], minlength=n)
    absorbed = (alive & has_parent & (n_kids[up] == 1) & cpu & cpu[up] & (name == name[up]))
    head = np.arange(n)
    head[absorbed] = parent[absorbed]
    while True:
        nxt = head[head]
        if np.array_equal(nxt, head):
            break
        head = nxt
    swallowed = np.zeros(n, bool)
    swallowed[parent[absorbed]] = True
    final = alive & ~absorbed
    fparent = np.where(has_parent, head[up], -1)
    # launch calls -> the node they belong to (-1: none)
    if plugin:
        by_ext = (nodes.filter(pl.col("cpu_op") & pl.col("external_id").is_not_null() & (pl.col("external_id") != 0))
                  .select("rank", "external_id", "node_id")
                  .unique(["rank", "external_id"], keep="first"))   # node order: thread by thread, by start
        owner = (launches.select("rank", "external_id").join(by_ext, on=["rank", "external_id"], how="left",
                                                             maintain_order="left")["node_id"]
                 .fill_null(-1).to_numpy().astype(np.int64))
        ok = owner >= 0
        ok[ok] = alive[owner[ok]] & ~swallowed[owner[ok]]      # dropped and absorbing ops lose them
    else:
        owner = np.full(launches.height, -1, np.int64)
        owner[around["pt"].to_numpy()] = around["node_id"].to_numpy()
        ok = owner >= 0
    owner = head[owner[ok]]

    def per_node(values, at, mask=None) -> np.ndarray:
        w = np.asarray(values, np.float64) if mask is None else np.asarray(values, np.float64)[mask]
        return np.rint(np.bincount(at, weights=w, minlength=n)).astype(np.int64)

    l_dur = (launches["end_ns"] - launches["start_ns"]).to_numpy()
    rt_ns = per_node(l_dur, owner, ok)
    gpu_ns = per_node(launches["gpu_ns"].to_numpy(), owner, ok)
    tc_ns = per_node(launches["tc_ns"].to_numpy(), owner, ok)
    dur = nodes["dur_ns"].to_numpy()
    kid = final & has_parent
    child_ns = per_node(dur[kid], fparent[kid])
    pairs = nodes.filter(pl.Series(final)).select("name", "input_types").unique()
    by_name = (nodes.select("name", "input_types")
               .join(pairs.with_columns(by_name=pl.Series([eligible(a, b) for a, b in pairs.iter_rows()],
                                                          dtype=pl.Boolean)),
                     on=["name", "input_types"], how="left", nulls_equal=True, maintain_order="left")
               ["by_name"].fill_null(False).to_numpy())
    seed = (by_name | (cpu & (tc_ns > 0))).astype(np.int64)
    # subtree sums: in pre-order a node's subtree is the run of nodes from it up to the last one
    # of its thread that starts before its end, so each sum is a difference of running sums
    idx = np.nonzero(final)[0]
    thread = nodes.select(pl.struct("rank", "pid", "tid").rle_id())[:, 0].to_numpy().astype(np.int64)[idx]
    start, end = nodes["start_ns"].to_numpy()[idx], nodes["end_ns"].to_numpy()[idx]
    grp = np.cumsum(np.r_[0, np.diff(thread) != 0]) if len(idx) else thread
    t_min = start[np.r_[0, np.nonzero(np.diff(thread))[0] + 1]][grp] if len(idx) else start   # sorted: the first
    width = int((end - t_min).max()) + 1 if len(idx) else 1
    key_s, key_e = thread * width + (start - t_min), thread * width + (end - t_min)
    pos = np.arange(len(idx))
    last = np.maximum(pos, np.searchsorted(key_s, key_e, side="left") - 1)

    def subtree(v: np.ndarray) -> np.ndarray:
        c = np.cumsum(v[idx])
        return c[last] - c + v[idx]

    cols = {"host_total_ns": dur[idx], "host_self_ns": dur[idx] - child_ns[idx] - rt_ns[idx],
            "device_self_ns": gpu_ns[idx], "device_total_ns": subtree(gpu_ns), "tc_self_ns": tc_ns[idx],
            "tc_total_ns": subtree(tc_ns),
            "tc_eligible": by_name[idx] | (cpu[idx] & (subtree(seed) > 0)), "t0": t_min, "level": -pos}
    out = (nodes[idx].with_columns(**{k: pl.Series(k, v) for k, v in cols.items()})
           .filter(pl.col("op")))
    return out, dropped
