"""The critical path of a scope's steps as the data diagnose's verdict weighs
(traceq.advice.bound.PathFacts): `run_paths` (traceq.engine.critical_path) per rank, its
steps' bounds summed. Here, in the engine, because the advice does not import the engine:
it receives the path as a field of the RunFacts (`with_path`).
"""
from __future__ import annotations


# The verdict weighs the path of scopes with steps and GPU ops (has_steps_and_gpu), up to this
# many host and GPU ops: the path costs about
# 3 µs an op (the 8x replica's 600,000: ~2 s, more than the rest of diagnose), and the findings
# of every analysis's "Fix first" line pay it. Above it the verdict is the rule without a path,
# and `traceq critical-path` gives the path.
MAX_EVENTS = 300_000


def scope_events(scope) -> int:
    """Host and GPU ops of the scope's ranks: what the path's graph would hold (at most)."""
    return int(scope.df("""SELECT (SELECT count(*) FROM host_ops WHERE run = $run AND rank IN (SELECT rank FROM scope_window))
                                + (SELECT count(*) FROM gpu_ops WHERE run = $run AND rank IN (SELECT rank FROM scope_window))
                                AS n""", {"run": scope.run})["n"][0])


def path_facts(scope):
    """PathFacts of the scope (each rank's own path, steps and bound times summed over its
    steps and ranks, the time its steps cover: `covered_ns`), or None when the scope has no step with a path. The verdict stands
    without a path, so an error of the path's engine leaves it None."""
    from ..advice.bound import PathFacts

    try:
        n = scope_events(scope)
        if n > MAX_EVENTS or not has_steps_and_gpu(scope):
            return None
        from .critical_path import run_paths   # (NumPy: only for a path)

        steps = run_paths(scope, detail=False)["steps"]
    except Exception:   # noqa: BLE001 - the path is extra evidence; diagnose never fails for it
        return None
    ns: dict = {}
    for s in steps:
        for b, v in (s.get("bounds") or {}).items():
            ns[b] = ns.get(b, 0) + int(v)
    if not steps or not sum(ns.values()):
        return None
    return PathFacts(len(steps), covered_ns(steps), ns, gpu_extent_ns(scope))


def path_facts_by_rank(scope) -> dict:
    """`path_facts` of each rank of the scope alone ({rank: PathFacts or None}): the counts
    in one query, the paths of every rank that gets one in one `run_paths`, each rank's steps
    then summed apart (a path is each rank's own: the same as the rank alone). When a rank
    is over MAX_EVENTS or the walk fails, each rank's path is computed on its own scope."""
    from ..advice.bound import PathFacts
    from .scope import open_scope

    scope.ensure_steps()
    counts = scope.df("""
        WITH h AS (SELECT rank, count(*) AS n FROM host_ops WHERE run = $run GROUP BY rank),
             g AS (SELECT rank, count(*) AS n FROM gpu_ops WHERE run = $run GROUP BY rank),
             s AS (SELECT rank, count(*) AS n FROM scope_steps GROUP BY rank)
        SELECT w.rank, coalesce(h.n, 0) + coalesce(g.n, 0) AS n, coalesce(s.n, 0) AS steps,
               coalesce(g.n, 0) AS gpu
        FROM scope_window w LEFT JOIN h ON h.rank = w.rank LEFT JOIN g ON g.rank = w.rank
        LEFT JOIN s ON s.rank = w.rank ORDER BY w.rank""", {"run": scope.run})
    out = dict.fromkeys(counts["rank"].to_list())
    want = {r: n for r, n, st, g in counts.iter_rows() if st and g}
    if not want:
        return out
    try:
        if max(want.values()) > MAX_EVENTS:
            raise OverflowError
        from .critical_path import run_paths   # (NumPy: only for a path)

        steps = run_paths(scope, detail=False)["steps"]
        extent = gpu_extents(scope)
    except Exception:   # noqa: BLE001 - each rank on its own, as path_facts would
        for r in want:
            one = open_scope(scope.store, scope.run, r, scope.steps, scope.step_pattern, scope.skip_first)
            try:
                out[r] = path_facts(one)
            finally:
                one.con.close()
        return out
    for r in want:
        mine = [s for s in steps if s["rank"] == r]
        ns: dict = {}
        for s in mine:
            for b, v in (s.get("bounds") or {}).items():
                ns[b] = ns.get(b, 0) + int(v)
        if mine and sum(ns.values()):
            out[r] = PathFacts(len(mine), covered_ns(mine), ns, extent.get(r, 0))
    return out


def gpu_extents(scope) -> dict:
    """`gpu_extent_ns` of each rank of the scope alone ({rank: ns}; {} when unknown)."""
    try:
        df = scope.df("""SELECT g.rank, min(g.start_ns) AS lo, max(g.end_ns) AS hi
                         FROM gpu_ops g JOIN scope_window w ON g.rank = w.rank
                         WHERE g.run = $run AND (w.lo_ns IS NULL OR g.end_ns > w.lo_ns)
                           AND (w.hi_ns IS NULL OR g.start_ns < w.hi_ns)
                         GROUP BY g.rank""", {"run": scope.run})
    except Exception:   # noqa: BLE001 - then the verdict compares with its own GPU span
        return {}
    return {r: int(max(0, (h or 0) - (lo or 0))) for r, lo, h in df.iter_rows()}


def has_steps_and_gpu(scope) -> bool:
    """The path weighs a verdict of GPU work over steps: a scope without GPU ops, or without
    steps (ProfilerStep#N, --step-pattern regions, timer BATCH, DataLoader iterations: a trace
    without them would be one step from its first to its last event), gets none."""
    scope.ensure_steps()
    row = scope.df("""SELECT (SELECT count(*) FROM scope_steps) AS steps,
                             (SELECT count(*) FROM gpu_ops WHERE run = $run
                              AND rank IN (SELECT rank FROM scope_window)) AS gpu""", {"run": scope.run})
    return bool(row["steps"][0]) and bool(row["gpu"][0])


def gpu_extent_ns(scope) -> int:
    """Σ per rank of first GPU op start -> last GPU op end in the scope's window (all devices
    together: the wall time the steps should cover); 0 when unknown."""
    return sum(gpu_extents(scope).values())


def covered_ns(steps: list[dict]) -> int:
    """The time the steps cover, per rank the union of [start, start + span] (a step's span runs
    to the end of the GPU work it launched, so the steps of a GPU running behind overlap)."""
    out = 0
    for r in {s["rank"] for s in steps}:
        iv = sorted((s["start_ns"], s["start_ns"] + s["span_ns"]) for s in steps if s["rank"] == r)
        hi = None
        for a, b in iv:
            if hi is None or a > hi:
                out += b - a
                hi = b
            elif b > hi:
                out += b - hi
                hi = b
    return int(out)


def with_path(scope, facts):
    """`facts` (RunFacts) with the scope's path set, unless it has one; returns `facts`."""
    if facts is not None and getattr(facts, "path", None) is None:
        facts.path = path_facts(scope)
    return facts
