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
from .op_owner import THREAD, ancestors, nest

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
        par, inner_all = nest(spans, zpts)
        inner = inner_all.filter(pl.col("pt") < n_zero)
        sid = spans["node_id"]
        # map sweep indices (rows of `spans`/`zero`) to node ids
        ids = sid.to_frame("node_id").with_row_index("i")
        kids = (par.join(ids, left_on="call_id", right_on="i").join(
            ids.rename({"node_id": "parent_node"}), left_on="parent_id", right_on="i", how="left")
            .select("node_id", pl.col("parent_node").alias("parent_id")))
        zid = zero["node_id"].to_frame("node_id").with_row_index("pt")
        zkids = (zid.join(inner, on="pt", how="left")
                 .join(ids.rename({"node_id": "parent_node"}), left_on="call_id", right_on="i", how="left")
                 .select("node_id", pl.col("parent_node").alias("parent_id")))
        tree = pl.concat([kids, zkids])
        span = alive.select("node_id", "start_ns", "end_ns")
        bad = (tree.join(span, on="node_id")
               .join(span.rename({"node_id": "parent_id", "start_ns": "p_start", "end_ns": "p_end"}),
                     on="parent_id")
               .filter(pl.col("end_ns") > pl.col("p_end")))
        if not bad.height:
            ext = None
            if extra is not None:
                ext = (inner_all.filter(pl.col("pt") >= n_zero).with_columns(pt=pl.col("pt") - n_zero)
                       .join(ids, left_on="call_id", right_on="i").select("pt", "node_id"))
            return tree, dropped, ext
        # sound: the parent holds the start (later ones may sit on a wrong parent until the
        # overlapping node is gone) and is not overlapping itself
        flagged = bad["node_id"]
        drop = bad.filter((pl.col("start_ns") >= pl.col("p_start")) & (pl.col("start_ns") < pl.col("p_end"))
                          & ~pl.col("parent_id").is_in(flagged.implode()))["node_id"]
        if not len(drop):
            drop = bad.sort("start_ns").head(1)["node_id"]
        dropped += len(drop)
        alive = alive.filter(~pl.col("node_id").is_in(drop.implode()))
    spans = alive.filter(pl.col("end_ns") > pl.col("start_ns"))
    ids = spans["node_id"].to_frame("node_id").with_row_index("i")
    _, inner = nest(spans, extra) if extra is not None else (None, None)
    ext = None if inner is None else inner.join(ids, left_on="call_id", right_on="i").select("pt", "node_id")
    return tree, dropped, ext


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
    # subtree sums over the final tree
    chain = ancestors(final.select(pl.col("node_id").alias("call_id"), pl.col("parent_id"), pl.lit(0).alias("depth")))
    seed = final.select(pl.col("node_id").alias("call_id"), "gpu_ns", "tc_ns",
                        seed=pl.col("by_name") | (pl.col("cpu_op") & (pl.col("tc_ns") > 0)))
    below = (chain.join(seed, on="call_id").group_by("anc_id")
             .agg(device_total_ns=pl.col("gpu_ns").sum(), tc_total_ns=pl.col("tc_ns").sum(), any_seed=pl.col("seed").any(),
                  depth=pl.len()))
    depth = chain.group_by("call_id").agg(level=pl.len())
    first_t = final.group_by("rank", "pid", "tid").agg(t0=pl.col("start_ns").min())
    out = (final.filter(pl.col("op"))
           .join(below.rename({"anc_id": "node_id"}).drop("depth"), on="node_id", how="left")
           .join(depth.rename({"call_id": "node_id"}), on="node_id", how="left")
           .join(first_t, on=["rank", "pid", "tid"], how="left")
           .with_columns(host_total_ns=pl.col("dur_ns"),
                         host_self_ns=pl.col("dur_ns") - pl.col("child_ns") - pl.col("rt_ns"),
                         device_self_ns=pl.col("gpu_ns"), tc_self_ns=pl.col("tc_ns"),
                         tc_eligible=pl.col("by_name") | (pl.col("cpu_op") & pl.col("any_seed")))
           .with_columns(level=-pl.col("level").cast(pl.Int64)))
    return out, dropped
