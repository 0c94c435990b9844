"""What the critical path reads from the store for a scope: the host activity, the GPU ops
and their launches, the steps and the thread each runs on, the data-loading intervals, the
ranks' clocks and their collective instances; and the graphs built from them (one per rank, or
one for all the ranks joined by their collectives).

A rank without steps (no ProfilerStep#N, --step-pattern region or timer BATCH) is one step,
numbered 0, from its first event to its last host event's end. The thread of a step is the
thread of the region that is the step; without one, the thread with the most host ops.
"""
from __future__ import annotations

import numpy as np

from ..lazy import polars as pl
from ..queries import install_macros, load as load_sql, run_script
from . import cp_graph
from .scope import Scope

STEP_THREADS = """
SELECT s.rank, s.step, s.start_ns, s.end_ns, r.pid, r.tid
FROM scope_steps s
LEFT JOIN (SELECT DISTINCT rank, pid, tid, start_ns, end_ns FROM regions
           WHERE run = $run AND coalesce(domain, '') <> 'gpu') r
  ON r.rank = s.rank AND r.start_ns = s.start_ns AND r.end_ns = s.end_ns
ORDER BY s.rank, s.start_ns
"""
BUSIEST_THREAD = """
SELECT rank, arg_max(pid, n) AS pid, arg_max(tid, n) AS tid FROM (
    SELECT rank, pid, tid, count(*) AS n FROM host_ops
    WHERE run = $run AND rank IN (SELECT rank FROM scope_window) AND kind <> 'graph_op'
    GROUP BY rank, pid, tid)
GROUP BY rank
"""
WHOLE_RANK = """
SELECT w.rank, least(h.lo, g.lo) AS lo, h.hi AS hi FROM scope_window w
LEFT JOIN (SELECT rank, min(start_ns) AS lo, max(end_ns) AS hi FROM host_ops
           WHERE run = $run AND kind <> 'graph_op' GROUP BY rank) h ON h.rank = w.rank
LEFT JOIN (SELECT rank, min(start_ns) AS lo FROM gpu_ops WHERE run = $run GROUP BY rank) g ON g.rank = w.rank
"""
STREAM_WAITS = f"""
SELECT DISTINCT rank FROM host_ops
WHERE run = $run AND rank IN (SELECT rank FROM scope_window) AND regexp_matches(name, '{cp_graph.STREAM_WAIT}')
"""


def steps(scope: Scope) -> pl.DataFrame:
    """rank, step, start_ns, end_ns, pid, tid: the scope's steps and the thread of each."""
    scope.ensure_steps()
    st = scope.df(STEP_THREADS).unique(["rank", "step", "start_ns"], keep="first", maintain_order=True)
    busy = scope.df(BUSIEST_THREAD)
    ranks = scope.df("SELECT rank FROM scope_window")["rank"].to_list()
    have = set(st["rank"].to_list())
    whole = scope.df(WHOLE_RANK).filter(~pl.col("rank").is_in(list(have)) & pl.col("hi").is_not_null())
    if whole.height:
        st = pl.concat([st, whole.select("rank", pl.lit(0, pl.Int64).alias("step"), pl.col("lo").alias("start_ns"),
                                         pl.col("hi").alias("end_ns"), pl.lit(None, pl.Int64).alias("pid"),
                                         pl.lit(None, pl.Int64).alias("tid"))], how="vertical_relaxed")
    st = (st.join(busy.rename({"pid": "bpid", "tid": "btid"}), on="rank", how="left")
          .with_columns(pid=pl.coalesce("pid", "bpid"), tid=pl.coalesce("tid", "btid"))
          .drop("bpid", "btid").filter(pl.col("pid").is_not_null() & pl.col("rank").is_in(ranks)))
    return st.sort(["rank", "start_ns"])


def offsets(scope: Scope, ranks: list[int]) -> dict[int, int]:
    """{rank: ns to the run's common clock} (traceq/clocks.py)."""
    rows = scope.df("SELECT rank, clock_offset_ns, clock_refine_ns FROM runs WHERE run = $run").iter_rows()
    off = {int(r): int(o or 0) + int(f or 0) for r, o, f in rows}
    base = min((off.get(r, 0) for r in ranks), default=0)
    return {r: off.get(r, 0) - base for r in ranks}


def instances(scope: Scope, gpu: pl.DataFrame) -> pl.DataFrame:
    """(rank, row, inst): each communication kernel (row of `gpu`) and its collective
    instance across ranks (queries/ranks_rank.sql's key)."""
    inst = run_script(scope.con, "ranks_rank", {"run": scope.run, "rank": None})
    if inst.height == 0:
        return pl.DataFrame(schema={"rank": pl.Int32, "row": pl.UInt32, "inst": pl.String})
    inst = inst.with_columns(inst=pl.concat_str(["grp", "coll", pl.col("k").cast(pl.String)], separator="\x1f"))
    comm = (gpu.with_row_index("row").filter((pl.col("kind") == "kernel") & (pl.col("category") == "communication"))
            .select("rank", "row", "stream", "start_ns", "end_ns"))
    hit = (comm.join(inst.select("rank", pl.col("start_ns").alias("i_s"), pl.col("end_ns").alias("i_e"), "inst"),
                     on="rank")
           .filter((pl.col("start_ns") >= pl.col("i_s")) & (pl.col("end_ns") <= pl.col("i_e")))
           .sort(["row", "i_s"]).unique("row", keep="first"))
    return hit.select(pl.col("rank").cast(pl.Int32), "row", "inst")


def data_intervals(scope: Scope, data_pattern: str | None) -> dict[int, np.ndarray]:
    """{rank: (n, 2) sorted disjoint data-loading intervals} (queries/stalls_data.sql)."""
    df = run_script(scope.con, "stalls_data", {"run": scope.run, "data_pattern": data_pattern or None})
    out = {}
    for (r,), d in df.group_by(["key"]):
        d = d.sort("start_ns")
        out[int(r)] = np.stack([d["start_ns"].to_numpy(), d["end_ns"].to_numpy()], axis=1)
    return out


def graphs(scope: Scope, joined: bool, data_pattern: str | None = None):
    """(graph, steps frame) pairs, to iterate once: one graph per rank, or one joining all
    ranks (`joined`)."""
    install_macros(scope.con)
    st = steps(scope)
    host = scope.df(load_sql("critical_path_host"))
    gpu = scope.df(load_sql("critical_path_gpu"))
    data = data_intervals(scope, data_pattern)
    waits = set(scope.df(STREAM_WAITS)["rank"].to_list())
    ranks = sorted(set(st["rank"].to_list()))
    mains = {(int(r), int(p)): int(t) for r, p, t in st.select("rank", "pid", "tid").unique().iter_rows()}
    if joined:
        off = offsets(scope, ranks)
        inst = instances(scope, gpu) if len(ranks) > 1 else None
        g = cp_graph.build(host, gpu, st, mains, data, off, inst, waits)
        return [(g, st)]
    return _each_rank(ranks, _by_rank(host), _by_rank(gpu), _by_rank(st), mains, data, waits)


def _each_rank(ranks, hosts, gpus, steps_, mains, data, waits):
    """Each rank's (graph, steps), built when the caller comes to it, its rows let go after:
    one rank's graph is held at a time."""
    for r in ranks:
        s = steps_[0].pop(r, steps_[1])
        yield cp_graph.build(hosts[0].pop(r, hosts[1]), gpus[0].pop(r, gpus[1]), s, mains, data, {r: 0}, None,
                             waits), s


def _by_rank(df: pl.DataFrame) -> tuple[dict, pl.DataFrame]:
    """({rank: its rows of `df`, in order}, the empty frame of a rank without rows): split once
    (a filter per rank would read every rank's rows each time)."""
    return ({r: d for (r,), d in df.partition_by("rank", as_dict=True).items()} if df.height else {}), df.clear()

