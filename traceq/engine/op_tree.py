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
All steps are polars joins and group-bys over whole tables (no per-event Python).
"""
from __future__ import annotations

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
    host_self_ns, device_self_ns, device_total_ns, tc_self_ns, tc_total_ns, tc_eligible, order (the
    plugin's traversal order: per thread, children before their parent); and how many overlapping
    nodes were left out. `nodes`: operators_nodes.sql's rows; `launches`: operators_launches.sql's;
    `plugin`: the plugin's launch link (External id) and dedup, else traceq's (the call around the
    launch); `eligible(name, input_types) -> bool`: tensor-core eligibility by name."""
    if plugin:
        nodes, launches = plugin_times(nodes), plugin_times(launches)
    nodes = nodes.with_row_index("node_id").with_columns(clock=pl.lit("host"), dur_ns=pl.col("end_ns") - pl.col("start_ns"))
    pts = None if plugin else launches.select(*THREAD[:3], clock=pl.lit("host"), t_ns=pl.col("start_ns"))
    tree, dropped, around = _tree(nodes, pts)
    kept = nodes.join(tree, on="node_id")
    # dedup: a cpu_op whose only child is a cpu_op of its name absorbs it
    n_kids = tree.filter(pl.col("parent_id").is_not_null()).group_by("parent_id").agg(n_kids=pl.len())
    info = kept.select("node_id", "name", "cpu_op")
    absorbed = (tree.join(n_kids, on="parent_id").filter(pl.col("n_kids") == 1)
                .join(info, on="node_id").join(info.rename({"node_id": "parent_id", "name": "p_name", "cpu_op": "p_cpu"}),
                                               on="parent_id")
                .filter(pl.col("cpu_op") & pl.col("p_cpu") & (pl.col("name") == pl.col("p_name")))
                .select("node_id", pl.col("parent_id").alias("into")))
    head = absorbed
    while True:
        nxt = head.join(absorbed.rename({"node_id": "into", "into": "into2"}), on="into", how="left")
        if nxt["into2"].null_count() == nxt.height:
            break
        head = nxt.select("node_id", pl.coalesce("into2", "into").alias("into"))
    head_of = head.rename({"into": "head"})
    has_absorbed_child = absorbed.select(pl.col("into").alias("node_id")).unique().with_columns(swallowed=pl.lit(True))

    def to_head(df: pl.DataFrame, col: str) -> pl.DataFrame:
        return (df.join(head_of.rename({"node_id": col, "head": "_h"}), on=col, how="left")
                .with_columns(pl.coalesce("_h", col).alias(col)).drop("_h"))

    final = kept.join(absorbed.select("node_id"), on="node_id", how="anti")
    final = to_head(final, "parent_id")
    # launch calls -> the node they belong to
    if plugin:
        by_ext = (nodes.filter(pl.col("cpu_op") & pl.col("external_id").is_not_null() & (pl.col("external_id") != 0))
                  .sort("start_ns").group_by("rank", "external_id", maintain_order=True).first()
                  .select("rank", "external_id", "node_id"))
        owned = launches.join(by_ext, on=["rank", "external_id"], how="inner")
        owned = (owned.join(kept.select("node_id"), on="node_id", how="semi")      # dropped ops lose them
                 .join(has_absorbed_child, on="node_id", how="anti"))              # so do absorbing ones
    else:
        owned = launches.with_row_index("pt").join(around, on="pt").drop("pt")
    owned = to_head(owned, "node_id")
    own = owned.group_by("node_id").agg(rt_ns=(pl.col("end_ns") - pl.col("start_ns")).sum(),
                                        gpu_ns=pl.col("gpu_ns").sum(), tc_ns=pl.col("tc_ns").sum())
    child_ns = final.filter(pl.col("parent_id").is_not_null()).group_by("parent_id").agg(child_ns=pl.col("dur_ns").sum())
    names = final.select("name", "input_types").unique()
    names = names.with_columns(by_name=pl.Series([eligible(n, t) for n, t in names.iter_rows()], dtype=pl.Boolean))
    final = (final.join(own, on="node_id", how="left").join(child_ns.rename({"parent_id": "node_id"}), on="node_id", how="left")
             .join(names, on=["name", "input_types"], how="left", nulls_equal=True)
             .with_columns(pl.col("rt_ns", "gpu_ns", "tc_ns", "child_ns").fill_null(0)))
    # subtree sums: in pre-order (thread, start, longer first: node_id order) a node's subtree
    # is the run of nodes from it up to the last one of its thread that starts before its end,
    # so each sum is a difference of running sums (no walk up the ancestors)
    final = final.sort("node_id").with_columns(
        pos=pl.int_range(pl.len(), dtype=pl.Int64),
        seed=(pl.col("by_name") | (pl.col("cpu_op") & (pl.col("tc_ns") > 0))).cast(pl.Int64))
    final = final.with_columns(cg=pl.col("gpu_ns").cum_sum(), ct=pl.col("tc_ns").cum_sum(), cs=pl.col("seed").cum_sum())
    key = ["rank", "pid", "tid"]
    # one sorted key over all threads: thread number × (longest thread span + 1) + time in thread
    final = final.with_columns(thread=pl.struct(key).rle_id(),
                               t_min=pl.col("start_ns").min().over(key))
    width = int((final["end_ns"] - final["t_min"]).max() or 0) + 1
    starts = final["thread"].cast(pl.Int64) * width + (final["start_ns"] - final["t_min"])
    ends = final["thread"].cast(pl.Int64) * width + (final["end_ns"] - final["t_min"])
    last_pos = (starts.search_sorted(ends, side="left").cast(pl.Int64) - 1)
    final = final.with_columns(last_pos=pl.max_horizontal(pl.col("pos"), last_pos))
    below = final.select(pl.col("cg").gather(pl.col("last_pos")).alias("cg_e"),
                         pl.col("ct").gather(pl.col("last_pos")).alias("ct_e"),
                         pl.col("cs").gather(pl.col("last_pos")).alias("cs_e"), "pos")
    first_t = final.group_by(*key).agg(t0=pl.col("start_ns").min())
    out = (final.join(below, on="pos")
           .with_columns(device_total_ns=pl.col("cg_e") - pl.col("cg") + pl.col("gpu_ns"),
                         tc_total_ns=pl.col("ct_e") - pl.col("ct") + pl.col("tc_ns"),
                         any_seed=(pl.col("cs_e") - pl.col("cs") + pl.col("seed")) > 0)
           .filter(pl.col("op"))
           .join(first_t, on=key, how="left")
           .with_columns(host_total_ns=pl.col("dur_ns"),
                         host_self_ns=pl.col("dur_ns") - pl.col("child_ns") - pl.col("rt_ns"),
                         device_self_ns=pl.col("gpu_ns"), tc_self_ns=pl.col("tc_ns"),
                         tc_eligible=pl.col("by_name") | (pl.col("cpu_op") & pl.col("any_seed")),
                         level=-pl.col("pos"))
           .drop("cg", "ct", "cs", "cg_e", "ct_e", "cs_e", "seed", "thread", "t_min", "last_pos"))
    return out, dropped
