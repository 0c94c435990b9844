"""Memory: the allocator's events (Kineto `[memory]` instants of profile_memory=True, nsys
CUDA_GPU_MEMORY_USAGE_EVENTS) as the TensorBoard profiler plugin's Memory view shows them.

Per device: the peak of memory allocated and reserved, when the allocated peak was first reached
and in which op and step; the memory curve (table `timeline`, down-sampled); per-step peaks and
allocation/free counts (table `steps`); and the rows: per device and operator, the plugin's
memory statistics. The events and their running totals: traceq/queries/memory.sql.

Operator attribution (the plugin's memory_parser, on each thread's op tree):
  tree       the thread's CPU ops (Kineto cpu_op), with ProfilerStep#N, DataLoader iterations,
             nn.Module python functions and NCCL/Gloo annotations as nodes that are no
             operator; a node's children are the nodes inside it (sorted by start, the longer
             first); an op whose only child is an op of the same name absorbs it (one call).
  event      belongs to the innermost node of its thread whose [start, end) holds its time;
             it counts for that node only when the node is an operator (not a ProfilerStep,
             module, DataLoader, Optimizer.* or (Distributed)DataParallel.forward node): an
             event directly under a step is counted nowhere.
  self_*     of an op name on a device: over its calls, the events it owns (self size increase
             = Σ bytes, self allocation count and size = count and Σ of the allocations).
  the rest   (size increase, allocation count, allocation size): the same over the events of
             the call and of every op call inside it (so nested calls of the same op count twice).
  calls      the op's calls the plugin visits: the outermost ones of each thread, and those whose
             parent holds a memory event of its thread (the plugin's count, whatever the device).
  Rows with all six sums zero are left out. Devices: CPU and GPU<id> only (as the plugin).

Differences from the plugin: with nn.Module nodes and forward/backward links
(fwdbwd flow events), the plugin moves the backward ops under backward module nodes (its module
view); traceq keeps the tree as recorded. Events of nsys have no thread: no op (peak_op null).
"""
from __future__ import annotations

from ..engine.scope import Scope
from ..lazy import polars as pl
from ..queries import run_script
from .spec import Analysis, Block, Column, Out, Param, Result, cols, top_param

TIMELINE_POINTS = 2000        # points per device of the down-sampled curve, at most
EXCLUDED_OPS = ("DataParallel.forward", "DistributedDataParallel.forward")
COMM_ANNOTATIONS = ("nccl:broadcast", "nccl:reduce", "nccl:all_reduce", "nccl:all_gather", "nccl:reduce_scatter",
                    "gloo:broadcast", "gloo:reduce", "gloo:all_reduce", "gloo:all_gather", "gloo:reduce_scatter")
NO_EVENTS = ("no memory events in scope: profile with torch.profiler(profile_memory=True), or nsys with "
             "--cuda-memory-usage=true")

COLUMNS = (
    Column("rank", "the rank"),
    Column("device", "CPU or GPU<id>"),
    Column("name", "the operator"),
    Column("calls", "the op's calls the plugin counts: the outermost of each thread, and those inside a call "
                    "that holds a memory event"),
    Column("size_increase_bytes", "Σ bytes (allocations − frees) of the events of the calls and the ops inside them"),
    Column("self_size_increase_bytes", "Σ bytes of the events the calls own (innermost op)"),
    Column("allocation_count", "allocations of the calls and the ops inside them"),
    Column("self_allocation_count", "allocations the calls own"),
    Column("allocation_size_bytes", "Σ bytes allocated by the calls and the ops inside them"),
    Column("self_allocation_size_bytes", "Σ bytes allocated by the calls themselves"),
)
ROW_FIELDS = tuple(c.name for c in COLUMNS)
_METRICS = ("self_size_increase_bytes", "self_allocation_count", "self_allocation_size_bytes")
_TOTALS = ("size_increase_bytes", "allocation_count", "allocation_size_bytes")


# ---------------------------------------------------------------- the events
def events_of(scope: Scope) -> pl.DataFrame:
    """The scope's memory events with the device's totals after each (queries/memory.sql)."""
    return run_script(scope.con, "memory", {"run": scope.run})


# ---------------------------------------------------------------- the op trees
def _nodes(scope: Scope) -> pl.DataFrame:
    """The nodes of the plugin's op trees on the scope's ranks: rank, tid, name, start_ns,
    end_ns, op_type (a CPU op: the plugin's OPERATOR nodes), is_op (an operator its memory
    table lists)."""
    comm = ", ".join("'" + n + "'" for n in COMM_ANNOTATIONS)
    excluded = ", ".join("'" + n + "'" for n in EXCLUDED_OPS)
    sql = f"""
        SELECT rank, tid, name, start_ns, end_ns, true AS op_type,
               name NOT IN ({excluded}) AND NOT starts_with(name, 'Optimizer.') AS is_op
        FROM host_ops WHERE run = $run AND kind = 'cpu_op' AND rank IN (SELECT rank FROM scope_window)
        UNION ALL
        SELECT rank, tid, name, start_ns, end_ns, false, false
        FROM host_ops WHERE run = $run AND kind = 'python' AND starts_with(name, 'nn.Module: ')
          AND rank IN (SELECT rank FROM scope_window)
        UNION ALL
        SELECT rank, tid, name, start_ns, end_ns, false, false
        FROM regions WHERE run = $run AND rank IN (SELECT rank FROM scope_window) AND coalesce(domain, '') <> 'gpu'
          AND (source IN ('step', 'dataloader') OR source = 'annotation' AND name IN ({comm}))
    """
    df = scope.df(sql)
    return (df.filter(pl.col("start_ns").is_not_null() & pl.col("end_ns").is_not_null() & pl.col("tid").is_not_null())
            .with_columns(pl.col("rank").cast(pl.Int32), pl.col("tid").cast(pl.Int64)))


def attribute(nodes: pl.DataFrame, events: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The plugin's trees and each event's node: (nodes with node_id, parent (after merging),
    merged (absorbed by a same-name parent), processed (holds an event of its thread)),
    (events with node = the innermost node around it, null when none).

    One sweep over every thread, in polars: node starts (+1), node ends (−1) and points (the
    events, and the nodes of zero duration: they hold nothing) sorted by thread and time, ends
    first at an instant, then starts (the longer first), then points; the running count is the
    depth (each thread's starts and ends balance, so one running sum serves all threads); a
    node's parent is the last node started one level up, a point's node the last started at
    its depth (as-of joins)."""
    import numpy as np

    threads = (pl.concat([nodes.select("rank", "tid"), events.filter(pl.col("tid").is_not_null())
                          .select(pl.col("rank").cast(pl.Int32), pl.col("tid").cast(pl.Int64))])
               .unique().sort("rank", "tid").with_row_index("g").with_columns(pl.col("g").cast(pl.Int64)))
    nodes = (nodes.join(threads, on=["rank", "tid"])
             .sort(["g", "start_ns", "end_ns"], descending=[False, False, True], maintain_order=True)
             .with_row_index("node_id").with_columns(pl.col("node_id").cast(pl.Int64)))
    ev = (events.with_row_index("ev_id").with_columns(pl.col("ev_id").cast(pl.Int64))
          .join(threads, on=["rank", "tid"], how="left", maintain_order="left"))
    span = nodes.filter(pl.col("end_ns") > pl.col("start_ns"))
    flat = nodes.filter(pl.col("end_ns") <= pl.col("start_ns"))
    none = pl.lit(None, pl.Int64)
    sweep = pl.concat([   # concatenated in the order that breaks ties: starts by node_id (the longer first)
        span.select("g", t=pl.col("end_ns"), kind=pl.lit(0, pl.Int8), node_id="node_id", ev_id=none),
        span.select("g", t=pl.col("start_ns"), kind=pl.lit(1, pl.Int8), node_id="node_id", ev_id=none),
        flat.select("g", t=pl.col("start_ns"), kind=pl.lit(2, pl.Int8), node_id="node_id", ev_id=none),
        ev.filter(pl.col("g").is_not_null()).select("g", t=pl.col("start_ns"), kind=pl.lit(2, pl.Int8),
                                                    node_id=none, ev_id="ev_id"),
    ])
    sweep = sweep.sort(_sweep_key(sweep), maintain_order=True)
    sweep = sweep.with_columns(depth=pl.when(pl.col("kind") == 1).then(1).when(pl.col("kind") == 0).then(-1)
                               .otherwise(0).cast(pl.Int32).cum_sum()).with_row_index("pos")
    starts = sweep.filter(pl.col("kind") == 1).select("pos", look=_level("g", "depth"), owner="node_id")
    looks = (sweep.filter(pl.col("kind") != 0)
             .with_columns(look=pl.when(pl.col("kind") == 1).then(pl.col("depth") - 1).otherwise(pl.col("depth")))
             .filter(pl.col("look") > 0).with_columns(look=_level("g", "look")))
    found = looks.join_asof(starts, on="pos", by="look", strategy="backward", allow_exact_matches=False,
                            check_sortedness=False)
    n_nodes, n_ev = nodes.height, ev.height
    parent = _scatter(n_nodes, found.filter(pl.col("node_id").is_not_null()), "node_id", "owner")
    owner = _scatter(n_ev, found.filter(pl.col("ev_id").is_not_null()), "ev_id", "owner")
    # processed: the node's [start, end) holds an event of its thread: events come between its
    # start and its end in the sweep (ends before points, starts before points at an instant)
    seen = sweep.select("kind", "node_id", n=pl.col("ev_id").is_not_null().cast(pl.Int64).cum_sum())
    at_start = _scatter(n_nodes, seen.filter(pl.col("kind") == 1), "node_id", "n")
    at_end = _scatter(n_nodes, seen.filter(pl.col("kind") == 0), "node_id", "n")
    nodes = nodes.with_columns(parent=_series(parent), processed=_series(at_end - at_start).fill_null(0) > 0)

    # an op whose only child is an op of the same name absorbs it (repeatedly down a chain)
    has_parent = parent >= 0
    kids = np.bincount(parent[has_parent], minlength=n_nodes)
    up = np.where(has_parent, parent, 0)
    names, op_type = nodes["name"], nodes["op_type"].to_numpy()
    merged = (has_parent & (kids[up] == 1) & op_type & op_type[up]
              & (names == names.gather(up)).fill_null(False).to_numpy())
    nodes = nodes.with_columns(merged=pl.Series(merged))
    rep = np.arange(n_nodes, dtype=np.int64)
    rep[merged] = parent[merged]
    while True:            # follow chains of merged nodes to the one that absorbs them
        nxt = rep[rep]
        if (nxt == rep).all():
            break
        rep = nxt
    parent[has_parent] = rep[parent[has_parent]]
    has_owner = owner >= 0
    owner[has_owner] = rep[owner[has_owner]]
    nodes = nodes.with_columns(parent=_series(parent))
    ev = ev.with_columns(node=_series(owner)).drop("ev_id", "g")
    return nodes, ev


def _subtree_ends(nodes: pl.DataFrame):
    """For each node (in node_id order: by thread, start, the longer first), one past the index
    of its last descendant: the first node of its thread that starts at or after its end (at
    least the node itself for one of zero duration)."""
    import numpy as np

    g, start, end = (nodes[c].to_numpy() for c in ("g", "start_ns", "end_ns"))
    out = np.arange(1, len(g) + 1, dtype=np.int64)
    bounds = np.flatnonzero(np.diff(g)) + 1 if len(g) else np.empty(0, np.int64)
    for a, b in zip(np.concatenate([[0], bounds]), np.concatenate([bounds, [len(g)]])):
        if b > a:
            out[a:b] = np.maximum(out[a:b], a + np.searchsorted(start[a:b], end[a:b], side="left"))
    return out


def _scatter(n: int, df: pl.DataFrame, index: str, value: str):
    """An int64 array of n items, -1 but at df[index]: df[value]."""
    import numpy as np

    out = np.full(n, -1, dtype=np.int64)
    if df.height:
        out[df[index].to_numpy()] = df[value].fill_null(-1).to_numpy()
    return out


def _series(values) -> pl.Series:
    """int64 values, -1 as null."""
    return pl.Series(values).set(pl.Series(values < 0), None) if (values < 0).any() else pl.Series(values)


def _sweep_key(sweep: pl.DataFrame) -> pl.Expr | list[str]:
    """One int64 key ordering the sweep by thread, time, kind (a stable sort keeps the rest of
    the order), when thread, time from the first event and kind fit in 63 bits; else the columns."""
    if not sweep.height:
        return ["g", "t", "kind"]
    lo, hi, groups = sweep["t"].min(), sweep["t"].max(), sweep["g"].max() + 1
    t_bits = max(1, int(hi - lo).bit_length())
    if t_bits + 2 + max(1, int(groups).bit_length()) > 62:
        return ["g", "t", "kind"]
    return (pl.col("g") * (1 << (t_bits + 2))) + ((pl.col("t") - lo) * 4) + pl.col("kind").cast(pl.Int64)


def _level(g: str, depth: str) -> pl.Expr:
    """Thread and depth as one as-of join key (depth below 2**20)."""
    return pl.col(g) * (1 << 20) + pl.col(depth).cast(pl.Int64)


def op_stats(nodes: pl.DataFrame, ev: pl.DataFrame) -> pl.DataFrame:
    """The plugin's memory table: per rank, device and op name (module doc)."""
    devices = [d for d in ev["device"].unique().to_list() if d == "CPU" or (d.startswith("GPU") and d[3:].isdigit())]
    owned = (ev.filter(pl.col("node").is_not_null() & pl.col("device").is_in(devices))
             .join(nodes.select(pl.col("node_id").alias("node"), "is_op"), on="node")
             .filter(pl.col("is_op"))
             .group_by("rank", "device", "node")
             .agg(self_size_increase_bytes=pl.col("bytes").sum(),
                  self_allocation_count=(pl.col("bytes") > 0).sum().cast(pl.Int64),
                  self_allocation_size_bytes=pl.col("bytes").filter(pl.col("bytes") > 0).sum()))
    names = nodes.select(pl.col("node_id").alias("node"), "name", "is_op")
    self_by_name = (owned.join(names, on="node").group_by("rank", "device", "name")
                    .agg(*(pl.col(c).sum() for c in _METRICS)))
    # every op call around an owning call (itself included) adds its events to its totals:
    # the nodes are in pre-order (by thread, start, the longer first), so a node's subtree is
    # the run of nodes of its thread that start before it ends: prefix sums (numpy)
    import numpy as np

    end = _subtree_ends(nodes)
    first = np.arange(nodes.height)
    totals = []
    for (device,), own in owned.group_by("device"):
        acc = np.zeros((nodes.height + 1, 3), dtype=np.int64)
        acc[own["node"].to_numpy() + 1] = own.select(_METRICS).to_numpy()
        acc = np.cumsum(acc, axis=0)
        sums = acc[end] - acc[first]
        totals.append(nodes.select("rank", "name", "is_op")
                      .with_columns(device=pl.lit(device), **{c: pl.Series(sums[:, i]) for i, c in enumerate(_TOTALS)})
                      .filter(pl.col("is_op") & pl.any_horizontal(*(pl.col(c) != 0 for c in _TOTALS))))
    total = (pl.concat(totals).group_by("rank", "device", "name").agg(*(pl.col(c).sum() for c in _TOTALS))
             if totals else pl.DataFrame(schema={"rank": pl.Int32, "device": pl.String, "name": pl.String,
                                                 **{c: pl.Int64 for c in _TOTALS}}))
    parent = nodes["parent"].fill_null(-1).to_numpy()
    visited = (parent < 0) | nodes["processed"].to_numpy()[np.maximum(parent, 0)]   # the parent holds an event
    calls = (nodes.filter(pl.col("is_op") & ~pl.col("merged") & pl.Series(visited))
             .group_by("rank", "name").agg(calls=pl.len().cast(pl.Int64)))
    out = (total.join(self_by_name, on=["rank", "device", "name"], how="left")
           .join(calls, on=["rank", "name"], how="left")
           .with_columns(*(pl.col(c).fill_null(0).cast(pl.Int64) for c in (*_METRICS, *_TOTALS, "calls"))))
    nonzero = pl.any_horizontal(*(pl.col(c) != 0 for c in (*_METRICS, *_TOTALS)))
    # GPUs before the CPU, then the op allocating the most
    return (out.filter(nonzero).select(*ROW_FIELDS)
            .sort([pl.col("rank"), pl.col("device") == "CPU", pl.col("device"), pl.col("allocation_size_bytes"),
                   pl.col("name")], descending=[False, False, False, True, False]))


# ---------------------------------------------------------------- devices, steps, the curve
def devices_of(ev: pl.DataFrame, names: pl.DataFrame, steps: pl.DataFrame | None) -> pl.DataFrame:
    """Per rank and device: the peaks, when the allocated peak was first reached and in which op
    and step, allocations and frees, whether the totals were rebuilt."""
    ev = ev.with_row_index("i")
    first_peak = (ev.filter(pl.col("allocated_bytes") == pl.col("allocated_bytes").max().over("rank", "device"))
                  .group_by("rank", "device").agg(pl.col("start_ns").first().alias("peak_at_ns"),
                                                  pl.col("op").first().alias("peak_op")))
    out = (ev.group_by("rank", "device", maintain_order=True)
           .agg(peak_allocated_bytes=pl.col("allocated_bytes").max(), peak_reserved_bytes=pl.col("reserved_bytes").max(),
                allocations=(pl.col("bytes") > 0).sum().cast(pl.Int64), frees=(pl.col("bytes") < 0).sum().cast(pl.Int64),
                allocated_total_bytes=pl.col("bytes").filter(pl.col("bytes") > 0).sum(),
                rebuilt=pl.col("rebuilt").any())
           .join(first_peak, on=["rank", "device"], how="left"))
    out = out.with_columns(peak_step=step_at(out.select("rank", t="peak_at_ns"), steps))
    return out.select("rank", "device", "peak_allocated_bytes", "peak_reserved_bytes", "peak_at_ns", "peak_op",
                      "peak_step", "allocations", "frees", "allocated_total_bytes", "rebuilt").sort("rank", "device")


def step_at(points: pl.DataFrame, steps: pl.DataFrame | None) -> pl.Series:
    """The step (scope_steps) whose [start, end) holds each point (rank, t); null when none."""
    if steps is None or not steps.height:
        return pl.Series("step", [None] * points.height, pl.String)
    p = points.with_row_index("i").with_columns(pl.col("rank").cast(pl.Int32))
    s = steps.select(pl.col("rank").cast(pl.Int32), pl.col("step").cast(pl.String), t=pl.col("start_ns"),
                     end=pl.col("end_ns")).sort("t")
    hit = (p.filter(pl.col("t").is_not_null()).sort("t").join_asof(s, on="t", by="rank", strategy="backward",
                                                                     check_sortedness=False)
           .with_columns(step=pl.when(pl.col("t") < pl.col("end")).then(pl.col("step"))))
    return p.join(hit.select("i", "step"), on="i", how="left").sort("i")["step"]


def steps_of(ev: pl.DataFrame, steps: pl.DataFrame | None) -> pl.DataFrame:
    """Per rank, device and step: the peaks within the step, allocations and frees."""
    cols = {"rank": pl.Int32, "device": pl.String, "step": pl.String, "peak_allocated_bytes": pl.Int64,
            "peak_reserved_bytes": pl.Int64, "allocations": pl.Int64, "frees": pl.Int64}
    if steps is None or not steps.height or not ev.height:
        return pl.DataFrame(schema=cols)
    at = ev.with_columns(step=step_at(ev.select("rank", t="start_ns"), steps)).filter(pl.col("step").is_not_null())
    order = steps.select(pl.col("rank").cast(pl.Int32), pl.col("step").cast(pl.String), "start_ns")
    return (at.group_by("rank", "device", "step")
            .agg(peak_allocated_bytes=pl.col("allocated_bytes").max(), peak_reserved_bytes=pl.col("reserved_bytes").max(),
                 allocations=(pl.col("bytes") > 0).sum().cast(pl.Int64), frees=(pl.col("bytes") < 0).sum().cast(pl.Int64))
            .join(order, on=["rank", "step"], how="left").sort("rank", "device", "start_ns").drop("start_ns")
            .select(list(cols)))


def timeline_of(ev: pl.DataFrame, points: int = TIMELINE_POINTS) -> pl.DataFrame:
    """The memory curve per rank and device, down-sampled to at most `points` points: the
    events cut into points/4 buckets of equal count, and of each bucket its first and last
    event and those of the most and least memory allocated (so every bucket's extremes, the
    peak among them, stay on the curve). Memory stays constant between two events."""
    buckets = max(1, points // 4)
    df = ev.select("rank", "device", t_ns="start_ns", allocated_bytes="allocated_bytes",
                   reserved_bytes="reserved_bytes").with_columns(
        i=pl.int_range(0, pl.len()).over("rank", "device"), n=pl.len().over("rank", "device"))
    df = df.with_columns(b=(pl.col("i") * buckets // pl.col("n")))
    g = ["rank", "device", "b"]
    keep = ((pl.col("i") == pl.col("i").min().over(g)) | (pl.col("i") == pl.col("i").max().over(g))
            | (pl.col("i") == pl.col("i").filter(pl.col("allocated_bytes") == pl.col("allocated_bytes").max())
               .first().over(g))
            | (pl.col("i") == pl.col("i").filter(pl.col("allocated_bytes") == pl.col("allocated_bytes").min())
               .first().over(g)))
    return df.filter((pl.col("n") <= points) | keep).select("rank", "device", "t_ns", "allocated_bytes", "reserved_bytes")


# ---------------------------------------------------------------- the analysis
def memory_scoped(scope: Scope) -> dict:
    """Every table of the analysis (rows, devices, steps, timeline) and its notes."""
    ev = events_of(scope)
    notes = []
    if not ev.height:
        empty = pl.DataFrame(schema={c: pl.Int64 for c in ROW_FIELDS}).with_columns(
            pl.col("rank").cast(pl.Int32), pl.col("device").cast(pl.String), pl.col("name").cast(pl.String))
        return {"rows": empty, "devices": devices_of(ev.with_columns(op=pl.lit(None, pl.String)), None, None),
                "steps": steps_of(ev, None), "timeline": timeline_of(ev), "notes": notes, "events": 0}
    nodes, owned = attribute(_nodes(scope), ev)
    names = nodes.select(pl.col("node_id").alias("node"), op=pl.when(pl.col("is_op")).then(pl.col("name")))
    ev = owned.join(names, on="node", how="left", maintain_order="left")
    from ..store import fetch_pl

    scope.ensure_steps()
    steps = fetch_pl(scope.con, "SELECT rank, step, start_ns, end_ns FROM scope_steps")
    rebuilt = ev.filter(pl.col("rebuilt"))["device"].unique().sort().to_list()
    if rebuilt:
        notes.append("the trace records no allocator totals on " + ", ".join(rebuilt) + " (PyTorch < 1.10, nsys): "
                     "allocated memory rebuilt as the running sum of the events' bytes, from 0 at the capture's start; "
                     "reserved memory unknown")
    if ev["tid"].is_null().all():
        notes.append("the memory events have no thread (nsys): no op is attributed")
    return {"rows": op_stats(nodes, ev), "devices": devices_of(ev, names, steps), "steps": steps_of(ev, steps),
            "timeline": timeline_of(ev), "notes": notes, "events": ev.height}


def _gib(b) -> str:
    if b is None:
        return "–"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(b) >= size:
            return f"{b / size:,.{2 if unit == 'GiB' else 1}f} {unit}"
    return f"{b:,} B"


def headline(tables: dict, scope: Scope) -> str:
    where = f"run {scope.run}{'' if scope.rank is None else f' rank {scope.rank}'}"
    dev = tables["devices"]
    if not dev.height:
        return f"{where}: {NO_EVENTS}"
    parts = [f"{where}: {tables['events']:,} memory events"]
    for r in dev.sort("peak_allocated_bytes", descending=True, nulls_last=True).head(3).iter_rows(named=True):
        if r["device"] == "CPU" and dev.height > 1:
            continue
        at = f" in {r['peak_op']}" if r["peak_op"] else ""
        step = f" (step {r['peak_step']})" if r["peak_step"] is not None else ""
        who = r["device"] if dev["rank"].n_unique() == 1 else f"{r['device']} rank {r['rank']}"
        parts.append(f"{who} peak "
                     f"{_gib(r['peak_allocated_bytes'])} allocated{at}{step}, {_gib(r['peak_reserved_bytes'])} reserved")
    return "; ".join(parts)


def compute(scope: Scope, top: int = 30) -> Out:
    t = memory_scoped(scope)
    rows = t["rows"]
    return Out(rows.head(top) if top else rows, headline(t, scope),
               tables={"devices": t["devices"], "steps": t["steps"], "timeline": t["timeline"]}, notes=t["notes"],
               value=t)


def view(res: Result) -> list[Block]:
    blocks = [Block(res.tables["devices"].drop("allocated_total_bytes"), res.headline, title="Per device",
                    drop_first=("peak_at_ns", "rebuilt", "frees", "allocations", "peak_step"))]
    blocks.append(Block(res.df, title="Per operator (the plugin's memory table)", notes=res.notes,
                        drop_first=("self_allocation_size_bytes", "self_allocation_count", "allocation_count",
                                    "self_size_increase_bytes", "rank")))
    return blocks


# ---------------------------------------------------------------- the report
def report_section(ctx) -> list:
    """The memory curve per device (allocated and reserved) and the devices table; no section
    when the scope has no memory events."""
    from ..report.html import table
    from ..report.many_ranks import many, ranks_of
    from ..report.parts import Section, add, add_table

    sec = Section("memory", ANALYSIS.report,
                  intro="Memory allocated and reserved per device over time, from the allocator's events "
                        "(torch.profiler profile_memory=True; nsys --cuda-memory-usage=true), and per device the "
                        "peaks with the op and step where memory allocated peaked.")
    with ctx.guard(sec, "memory"):
        t = memory_scoped(ctx.scope)
        if not t["events"]:
            return []      # no memory events recorded: no section (most traces)
        sec.headline = headline(t, ctx.scope)
        if many(ranks_of(t["devices"])):
            _many_ranks(sec, t)
        else:
            add(sec, figure(t["timeline"]), "memory")
            add_table(sec, table(t["devices"]), "memory")
    return [sec]


def _many_ranks(sec, t: dict) -> None:
    """A run of many ranks: the curves of the devices with the highest peaks, the spread of the
    peaks, their quantiles and those devices' rows."""
    from ..report.many_ranks import WORST_RANKS, rank_boxes, summarise, worst
    from ..report.parts import add

    dev = t["devices"]
    by = next((c for c in ("peak_allocated_bytes", "peak_reserved_bytes") if c in dev.columns), None)
    if by is None:
        by = next(c for c in dev.columns if c.endswith("_bytes"))
    bad = worst(dev, by)["rank"].to_list()
    add(sec, rank_boxes(dev, [(by, by.removesuffix("_bytes").replace("_", " "))], "Peak memory per device "
                        "(distribution over the ranks)", "GiB", scale=1 / 2**30, worst_ranks=bad),
        "memory-distribution")
    add(sec, figure(t["timeline"].filter(pl.col("rank").is_in(bad)),
                    f"Memory of the {WORST_RANKS} ranks with the highest peaks"), "memory")
    summarise(sec, dev, by, "traceq memory -f json", "memory", what="Per device")


def figure(timeline: pl.DataFrame, title: str = "Memory per device"):
    """The memory curve: allocated (solid) and reserved (dotted) GiB per device against ms
    from the device's first event, as steps (memory is constant between events)."""
    import plotly.graph_objects as go

    from ..report.figures import base_layout, esc

    if timeline is None or not timeline.height:
        return None
    fig = go.Figure()
    fig.update_layout(base_layout(title, height=400))
    several = timeline["rank"].n_unique() > 1
    for (rank, device), d in timeline.group_by("rank", "device", maintain_order=True):
        label = esc(f"{device}" + (f" rank {rank}" if several else ""))
        x = ((d["t_ns"] - d["t_ns"].min()) / 1e6).to_list()
        fig.add_trace(go.Scatter(x=x, y=(d["allocated_bytes"] / 2**30).to_list(), mode="lines", line_shape="hv",
                                 name=f"{label} allocated"))
        if d["reserved_bytes"].is_not_null().any():
            fig.add_trace(go.Scatter(x=x, y=(d["reserved_bytes"] / 2**30).to_list(), mode="lines", line_shape="hv",
                                     line=dict(dash="dot"), name=f"{label} reserved"))
    fig.update_layout(xaxis_title="ms since the device's first memory event", yaxis_title="GiB")
    return fig


ANALYSIS = Analysis(
    name="memory",
    help="Memory per device and operator, as the TensorBoard profiler plugin's Memory view: peak memory allocated "
         "and reserved per device (when, in which op and step), the memory curve, per-step peaks, and per "
         "operator the allocations and size increase of its calls (self: the events the op owns; else with the ops "
         "inside it).\n\n"
         "Needs the allocator's events: torch.profiler(profile_memory=True) writes [memory] events (PyTorch >= 1.10 "
         "with the totals; older ones only sizes: the totals are rebuilt and said so); nsys "
         "--cuda-memory-usage=true writes CUDA_GPU_MEMORY_USAGE_EVENTS (no ops, no reserved memory). JSON: rows per "
         "operator, tables devices, steps and timeline (the curve, down-sampled).",
    examples=("traceq memory", "traceq memory -f json -o memory.json", "traceq memory --top 0"),
    compute=compute,
    params=(top_param(30, "Show the N operators with the most memory allocated (0 = all)."),),
    columns=COLUMNS,
    sort=("rank", "GPUs before the CPU", "device", "allocation_size_bytes descending", "name"),
    drop_first=("self_allocation_size_bytes", "self_allocation_count", "allocation_count"),
    view=view,
    report="Memory: the curve and peaks per device",
    report_section=report_section,
    order=38,
    tables=(("devices", cols("rank: rank", "device: device id (-1: the CPU)",
                             "peak_allocated_bytes: highest allocated total, bytes",
                             "peak_reserved_bytes: highest reserved total (null when not recorded), bytes",
                             "peak_at_ns: time of the allocated peak, ns",
                             "peak_op: the innermost op running at the peak (null: none, or nsys)",
                             "peak_step: the step of the peak (null outside steps)",
                             "allocations: allocation events", "frees: free events",
                             "allocated_total_bytes: Σ bytes of the allocations, bytes",
                             "rebuilt: the totals were rebuilt from the bytes (older traces, nsys)")),
            ("steps", cols("rank: rank", "device: device id (-1: the CPU)", "step: step number",
                           "peak_allocated_bytes: highest allocated total in the step, bytes",
                           "peak_reserved_bytes: highest reserved total in the step, bytes",
                           "allocations: allocation events in the step", "frees: free events in the step")),
            ("timeline", cols("rank: rank", "device: device id (-1: the CPU)", "t_ns: time, ns",
                              "allocated_bytes: allocated total then, bytes",
                              "reserved_bytes: reserved total then, bytes"))),
)
