"""Operators: the TensorBoard profiler plugin's Operator view. Per op name (or name and input
shapes): calls, host self/total time, device self/total time (the GPU time its launch calls,
and those of the ops below it, launched), tensor-core eligibility and the share of its device
time in tensor-core kernels. The trees, dedup and links: traceq/engine/op_tree.py (SQL:
traceq/queries/operators_nodes.sql, operators_launches.sql).

Windows: `all` (traceq's scope: op calls that start in the --steps window; launch calls belong
to the call around them, driver calls included; eligibility by traceq's rule with input types);
`tb` (the plugin's: every op call of the trace whatever the steps, launch calls by External id,
runtime calls only, the plugin's eligible-op list). Like torch-tb-profiler 0.4.3, `tb` takes
only calls of the Kineto category `runtime` (PyTorch < 1.10) as launch calls
(host_ops.source_category): on traces whose calls are `cuda_runtime` it links none, so no op
has device time and self host time keeps the calls.
"""
from __future__ import annotations

import json

from ..engine.scope import Scope
from ..errors import TraceqError
from ..lazy import polars as pl
from .spec import Analysis, Block, Column, Out, Param, Result, top_param

REPORT_ROWS = 30
NAME_WIDTH = 44
SHAPE_WIDTH = 24
NO_SHAPES = ("the trace records no input shapes (profile with record_shapes=True): every call is grouped "
             "under the shape []")
NO_STACK = ("call stacks: the store keeps none (Kineto's \"Call stack\" args are not ingested), so there is "
            "no grouping by stack")

COLUMNS = (
    Column("name", "the op (cpu_op name)"),
    Column("input_shape", "its input dims as the trace records them, JSON text (--group-by input-shape; "
                          "[] when not recorded)"),
    Column("calls", "op calls (a call whose only child is a call of the same op counts once)"),
    Column("device_self_ns", "GPU time (kernels, copies, memsets) launched by the op's own runtime calls"),
    Column("device_total_ns", "GPU time launched by the op and every op below it"),
    Column("host_self_ns", "host time of the calls minus their child calls' and their runtime calls' time"),
    Column("host_total_ns", "host time of the calls"),
    Column("tc_eligible", "the op could use tensor cores: an eligible op (GEMM, convolution, ...), or an op "
                          "with one below it, or one that launched tensor-core kernels"),
    Column("tc_self_pct", "share of device_self_ns in tensor-core kernels (gpu_ops.tensor_core)", "%"),
    Column("tc_total_pct", "share of device_total_ns in tensor-core kernels", "%"),
)
FIELDS = ("name", "calls", "device_self_ns", "device_total_ns", "host_self_ns", "host_total_ns", "tc_eligible",
          "tc_self_pct", "tc_total_pct")


def _eligible(window: str):
    if window == "tb":
        from ..engine.op_tree import TB_ELIGIBLE_OPS

        return lambda name, types: name in TB_ELIGIBLE_OPS
    from ..kernels.tensor_cores import tensor_core_eligible

    def by_rule(name, types):
        try:
            parsed = json.loads(types) if types else None
        except ValueError:
            parsed = None
        return tensor_core_eligible(name, parsed if isinstance(parsed, list) else None)
    return by_rule


def operator_calls(scope: Scope, window: str = "all") -> tuple[pl.DataFrame, dict]:
    """(per op call frame of traceq.engine.op_tree.calls_of, facts: dropped overlapping nodes,
    whether shapes are recorded) of the scope."""
    from ..engine.op_tree import calls_of
    from ..queries import load as load_sql

    plugin = window == "tb"
    # of two equal spans the plugin makes the one earlier in the file the parent: the outer
    # call, which also has the smaller External id (the store keeps no file order)
    nodes = scope.df(load_sql("operators_nodes")).sort(
        ["rank", "pid", "tid", "start_ns", "end_ns", pl.col("external_id").fill_null(-1)],
        descending=[False, False, False, False, True, False])
    kinds = ["runtime", "sync_api"] if plugin else ["runtime", "sync_api", "driver"]
    launches = scope.df(load_sql("operators_launches"), {"kinds": kinds, "plugin": plugin})
    calls, dropped = calls_of(nodes, launches, plugin, _eligible(window))
    if not plugin:
        win = scope.df("SELECT rank, lo_ns, hi_ns FROM scope_window")
        calls = (calls.join(win, on="rank", how="left")
                 .filter(pl.col("lo_ns").is_null() | ((pl.col("start_ns") >= pl.col("lo_ns"))
                                                      & (pl.col("start_ns") < pl.col("hi_ns"))))
                 .drop("lo_ns", "hi_ns"))
    shapes = bool(nodes.filter(pl.col("input_dims").is_not_null()).height)
    return calls, {"dropped": dropped, "shapes": shapes}


def table_of(calls: pl.DataFrame, group_by: str = "name", plugin: bool = False) -> pl.DataFrame:
    """The view's rows from operator_calls' frame: one per op name (and input shape)."""
    keys = ["name"] if group_by == "name" else ["name", "input_shape"]
    c = calls.with_columns(input_shape=pl.col("input_dims").fill_null("[]"))
    # the plugin's traversal order: thread by thread (in order of their first call), children
    # before their parent
    order = ["rank", "t0", "pid", "tid", "end_ns", "level", "start_ns"]
    agg = c.group_by(keys).agg(
        calls=pl.len(), device_self_ns=pl.col("device_self_ns").sum(), device_total_ns=pl.col("device_total_ns").sum(),
        host_self_ns=pl.col("host_self_ns").sum(), host_total_ns=pl.col("host_total_ns").sum(),
        # the plugin keeps the eligibility of the group's first call in its traversal order
        tc_eligible=pl.col("tc_eligible").sort_by(order).first() if plugin else pl.col("tc_eligible").any(),
        tc_self_ns=pl.col("tc_self_ns").sum(), tc_total_ns=pl.col("tc_total_ns").sum())
    pct = {"tc_self_pct": ("tc_self_ns", "device_self_ns"), "tc_total_pct": ("tc_total_ns", "device_total_ns")}
    agg = agg.with_columns(
        pl.col("calls").cast(pl.Int64), *(pl.col(c).cast(pl.Int64) for c in FIELDS if c.endswith("_ns")),
        **{k: pl.when(pl.col(d) > 0).then(100.0 * pl.col(n) / pl.col(d)).otherwise(0.0) for k, (n, d) in pct.items()})
    cols = [*FIELDS[:1], *(["input_shape"] if group_by != "name" else []), *FIELDS[1:]]
    return agg.sort(["device_self_ns", "host_self_ns", *keys], descending=[True, True, *([False] * len(keys))]).select(cols)


def headline(df: pl.DataFrame, scope: Scope, window: str) -> str:
    where = f"run {scope.run}{'' if scope.rank is None else f' rank {scope.rank}'}"
    if not df.height:
        return f"{where}: no operator calls in scope (the trace records no cpu_ops)"
    dev = df["device_self_ns"].sum()
    host = df["host_self_ns"].sum()
    parts = [f"{where}: {df['calls'].sum():,} op calls of {df['name'].n_unique():,} ops"
             + (" (the plugin's window: the whole trace)" if window == "tb" else "")]
    if dev:
        top = df.row(0, named=True)
        parts.append(f"top by device self time: {top['name']} {top['device_self_ns'] / 1e6:,.2f} ms "
                     f"({100 * top['device_self_ns'] / dev:.1f} % of {dev / 1e6:,.2f} ms)")
    else:
        top = df.sort("host_self_ns", descending=True).row(0, named=True)
        parts.append(f"no op launched GPU work; top by host self time: {top['name']} "
                     f"{top['host_self_ns'] / 1e6:,.2f} ms ({100 * top['host_self_ns'] / host:.1f} %)" if host else
                     "no op launched GPU work")
    elig = df.filter(pl.col("tc_eligible"))
    if dev and elig.height:
        e_ns = elig["device_self_ns"].sum()
        parts.append(f"tensor-core-eligible ops launched {e_ns / 1e6:,.2f} ms ({100 * e_ns / dev:.1f} %)")
    return "; ".join(parts)


def compute(scope: Scope, group_by: str = "name", window: str = "all", top: int = 30) -> Out:
    if top is not None and top < 0:
        raise TraceqError(f"--top {top}: must be 0 (all) or more")
    calls, facts = operator_calls(scope, window)
    df = table_of(calls, group_by, window == "tb")
    notes = []
    if group_by == "input-shape" and not facts["shapes"]:
        notes.append(NO_SHAPES)
    if facts["dropped"]:
        notes.append(f"{facts['dropped']:,} calls overlap their enclosing call on the same thread instead of "
                     "nesting: left out, as the plugin does")
    notes.append(NO_STACK)
    return Out(df.head(top) if top else df, headline(df, scope, window), notes=notes, value=facts)


def _fmt_shape(text: str | None) -> str:
    from ..text import shorten

    try:
        v = json.loads(text) if text else []
    except ValueError:
        return shorten(text or "", SHAPE_WIDTH)
    return shorten(json.dumps(v, separators=(",", ":")), SHAPE_WIDTH)


def view(res: Result) -> list[Block]:
    from ..text import shorten_distinct

    df = res.df.with_columns(name=pl.Series(shorten_distinct(res.df["name"].to_list(), NAME_WIDTH), dtype=pl.String))
    if "input_shape" in df.columns:
        df = df.with_columns(pl.col("input_shape").map_elements(_fmt_shape, return_dtype=pl.String))
    return [Block(df, res.headline, notes=res.notes, drop_first=res.analysis.drop_first)]


def report_section(ctx) -> list:
    """The headline and the operator table (top ops by device self time)."""
    from ..report.html import table
    from ..report.parts import Section, add_table

    sec = Section("operators", ANALYSIS.report,
                  intro="Per op: calls, host and device self/total time and tensor-core use, as the TensorBoard "
                        "profiler plugin's Operator view defines them (self = without the ops below it; device "
                        "time = GPU time the op's runtime calls launched).")
    with ctx.guard(sec, "operators"):
        calls, _ = operator_calls(ctx.scope)
        df = table_of(calls)
        sec.headline = headline(df, ctx.scope, "all")
        if df.height:
            add_table(sec, table(df.head(REPORT_ROWS), max_rows=REPORT_ROWS), "operators")
    return [sec]


ANALYSIS = Analysis(
    name="operators",
    help="The TensorBoard profiler plugin's Operator view: per op, calls, host and device self/total time, "
         "tensor-core eligibility and tensor-core share.\n\n"
         "Ops are the trace's cpu_ops, nested per thread; self time leaves out the ops below (host: and the "
         "op's runtime calls). Device time is the GPU time (kernels, copies, memsets) the op's runtime calls "
         "launched. --window tb reproduces the plugin's rules and scope (the whole trace; launch calls by "
         "External id; torch-tb-profiler 0.4.3 types only the category 'runtime' of PyTorch < 1.10 as launch "
         "calls, so on later traces it shows no device time).",
    examples=("traceq operators --top 20", "traceq operators --group-by input-shape -f json",
              "traceq operators --window tb"),
    compute=compute,
    params=(Param("group_by", str, "name", "Rows per op name, or per op name and input shapes.", "name|input-shape",
                  choices=("name", "input-shape")),
            Param("window", str, "all", "all: traceq's scope (--steps, --skip-first), launches linked by the call "
                  "around them. tb: the plugin's (every op call of the trace, launches by External id).", "all|tb",
                  flags=("-w",), choices=("all", "tb")),
            top_param(30, "Show the N ops with the most device self time (0 = all).")),
    columns=COLUMNS,
    sort=("device_self_ns descending", "host_self_ns descending"),
    drop_first=("input_shape", "tc_total_pct", "tc_self_pct", "host_total_ns", "device_total_ns"),
    view=view,
    report="Operators: host and device time per op",
    report_section=report_section,
    order=38,
)
