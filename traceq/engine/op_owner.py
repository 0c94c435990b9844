"""Which op call owns each GPU op: the link from the kernels, copies and memsets of a scope to
the framework ops (aten::addmm, aten::convolution, ...) whose calls launched them, for the
analyses that measure ops (roofline). SQL inputs: traceq/queries/op_calls.sql (the calls of the
op names asked for) and op_points.sql (each GPU op's point: its launch, or for a kernel replayed
from a CUDA/HIP graph its start inside the captured ops' GPU-time spans).

Definitions:
  enclosing   the calls around a GPU op's point on the same rank, process, thread and clock
              (start <= point <= end). Calls on a thread nest, so they are found by one sweep:
              events sorted by time (call ends first at an instant, then call starts, the longer
              first, then points); the number of calls open after an event is a call's depth
              (1 = outermost) and, at a point, the depth of the innermost call around it; that
              call is the last one started at that depth (an as-of join), its parent the last
              one started at depth - 1 before it.
  wrapper     a call with a call of its own family inside it (aten::linear around aten::addmm,
              aten::matmul around aten::bmm, layer_norm around native_layer_norm): its
              arguments are the inner call's, its work is the inner call's.
  owner       the OUTERMOST enclosing call that is no wrapper; when every enclosing call is a
              wrapper, the innermost. So an op's GPU time is every GPU op its subtree launched,
              memsets, layout transposes and a bias add included (aten::convolution ->
              aten::add_: the convolution's), a wrapper's work goes to the op inside it
              (aten::linear -> aten::addmm: the addmm's) and a copy a wrapper makes outside its
              inner op to the copy (aten::matmul -> aten::clone -> aten::copy_: the copy's).
              No GPU op is counted twice. Transfers (host<->device, peer copies) and GPU ops
              without a launch call have no owner.
The sweep and joins run in polars (sort, cumulative sums, as-of joins): per thread they are
O(n log n), and on the 8x replica they take a fifth of what the same steps cost as DuckDB
temp tables.
"""
from __future__ import annotations

from ..lazy import polars as pl
from ..queries import install_macros, load as load_sql
from ..store import register_pl

THREAD = ["rank", "pid", "tid", "clock"]


def register_names(scope, names: dict[str, str]) -> None:
    """Temp table op_names(name, family): the op names whose calls can own GPU ops."""
    rows = sorted(names.items())
    register_pl(scope.con, "op_names_df", pl.DataFrame(rows, schema={"name": pl.String, "family": pl.String},
                                                       orient="row"))
    scope.con.execute("CREATE OR REPLACE TEMP TABLE op_names AS SELECT * FROM op_names_df")
    scope.con.unregister("op_names_df")


def ancestors(parent: pl.DataFrame) -> pl.DataFrame:
    """(call_id, anc_id, depth): every call and its ancestors, itself included."""
    out = [parent.select("call_id", pl.col("call_id").alias("anc_id"), "depth")]
    links = parent.filter(pl.col("parent_id").is_not_null()).select("call_id", "parent_id", "depth")
    frontier = out[0]
    while frontier.height:
        frontier = (frontier.join(links, left_on="anc_id", right_on="call_id", how="inner", suffix="_p")
                    .select("call_id", pl.col("parent_id").alias("anc_id"), (pl.col("depth_p") - 1).alias("depth")))
        out.append(frontier)
    return pl.concat(out)


def nest(calls: pl.DataFrame, points: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The sweep of the module docstring ("enclosing"): (parent, inner). `calls` has THREAD
    columns, start_ns, end_ns; calls of no duration are left out (treat them as points);
    `points` THREAD columns and t_ns. parent: (call_id, depth, parent_id) per call kept, call_id
    the row index in `calls`, depth 1 = outermost, parent_id null at depth 1. inner: (pt,
    call_id), pt the row index in `points`, call_id the innermost call around it (points inside
    no call are left out)."""
    # the clock as a small integer: only the grouping by thread matters, not the threads' order
    code = pl.col("clock").cast(pl.Categorical).to_physical()
    calls, points = calls.with_columns(clock=code), points.with_columns(clock=code)
    c = calls.with_row_index("call_id").filter(pl.col("end_ns") > pl.col("start_ns"))
    key = [*THREAD]
    starts = c.select(*key, pl.col("start_ns").alias("t"), pl.lit(1, pl.Int8).alias("kind"),
                      (-pl.col("end_ns")).alias("tie"), "call_id", pl.lit(None, pl.UInt32).alias("pt"))
    ends = c.select(*key, pl.col("end_ns").alias("t"), pl.lit(0, pl.Int8).alias("kind"),
                    pl.lit(0, pl.Int64).alias("tie"), "call_id", pl.lit(None, pl.UInt32).alias("pt"))
    pts = (points.with_row_index("pt").filter(pl.col("t_ns").is_not_null() & pl.col("clock").is_not_null())
           .select(*key, pl.col("t_ns").alias("t"), pl.lit(2, pl.Int8).alias("kind"), pl.lit(0, pl.Int64).alias("tie"),
                   pl.lit(None, pl.UInt32).alias("call_id"), "pt"))
    # sorted by thread and time; `th` numbers the threads, and as every call ends on its own
    # thread, the running count of open calls over all events is each thread's own; the as-of
    # joins look up (thread, depth) as one integer
    ev = (pl.concat([starts, ends, pts], how="vertical_relaxed")
          .sort([*key, "t", "kind", "tie", "call_id"], nulls_last=True)
          .with_row_index("seq")
          .with_columns(th=pl.struct(key).rle_id().cast(pl.Int64),
                        open=pl.col("kind").replace_strict({1: 1, 0: -1, 2: 0}, return_dtype=pl.Int64).cum_sum()))
    level = pl.col("th") * (1 << 24) + pl.col("open")
    st = ev.filter(pl.col("kind") == 1).select("seq", pl.col("open").alias("depth"), "call_id", bk=level)
    parent = (st.with_columns(pk=pl.col("bk") - 1)
              .join_asof(st.select("seq", pl.col("bk").alias("pk"), pl.col("call_id").alias("parent_id")),
                         on="seq", by="pk", strategy="backward", allow_exact_matches=False, check_sortedness=False)
              .with_columns(parent_id=pl.when(pl.col("depth") > 1).then(pl.col("parent_id")))
              .select("call_id", "depth", "parent_id"))
    inner = (ev.filter((pl.col("kind") == 2) & (pl.col("open") > 0)).select("seq", "pt", bk=level)
             .join_asof(st.select("seq", "bk", "call_id"), on="seq", by="bk", strategy="backward",
                        check_sortedness=False)
             .select("pt", "call_id"))
    return parent, inner


def owners(calls: pl.DataFrame, points: pl.DataFrame) -> pl.Series:
    """The owning call (row index into `calls`) of each row of `points` (null: none); `calls`
    has THREAD columns, family, start_ns, end_ns; `points` THREAD columns and t_ns."""
    parent, inner = nest(calls, points)
    fam = calls.with_row_index("call_id").select("call_id", "family")
    chain = ancestors(parent)
    wrappers = (chain.filter(pl.col("anc_id") != pl.col("call_id"))
                .join(fam, on="call_id").join(fam.rename({"call_id": "anc_id", "family": "anc_family"}), on="anc_id")
                .filter(pl.col("family") == pl.col("anc_family")).select("anc_id").unique()
                .with_columns(wrapper=pl.lit(True)))
    own = (inner.join(chain, on="call_id").join(wrappers, on="anc_id", how="left")
           .with_columns(pl.col("wrapper").fill_null(False))
           .sort(["pt", "wrapper", pl.when(pl.col("wrapper")).then(-pl.col("depth")).otherwise(pl.col("depth"))])
           .group_by("pt", maintain_order=True).first().select("pt", pl.col("anc_id").alias("owner")))
    return (pl.DataFrame({"pt": pl.arange(0, points.height, dtype=pl.UInt32, eager=True)})
            .join(own, on="pt", how="left").sort("pt")["owner"])


def owned(scope, names: dict[str, str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(calls, GPU ops) of the scope: the calls of `names` ({op name: family}; op_calls.sql) and
    every GPU op (op_points.sql) with `owner`, the row index in `calls` of the call that owns it
    (null: none)."""
    install_macros(scope.con)
    register_names(scope, names)
    calls = scope.df(load_sql("op_calls"))
    points = scope.df(load_sql("op_points"))
    return calls, points.with_columns(owner=owners(calls, points))
