"""What bounds a scope: the shares of its GPU span by avoidable cost (the verdict of
`traceq diagnose`, whose module docstring defines each), and the bound they give. Here, in
the advice, because the findings are ordered by it: the finding of the bound's cost comes
first (Fix first names what the verdict names); faster kernels win nothing while the GPU
waits for something else.

The critical path weighs the shares where one exists (`PathFacts`, set on the RunFacts by
traceq.engine.path_facts: the path's bounds summed over the scope's steps; several ranks
add up, a path-time weighted average of theirs). The two vocabularies, path bound <-> verdict
bound (PATH_OF_BOUND):
  data_loading  <-> data
  communication <-> communication
  sync, memcpy  <-> sync (a host blocked), copy
  launch        <-> launch
  cpu           <-> host; memory_management and warmup are host calls too (cpu, launch, sync)
  gpu, gpu_gap  <-> gpu
The path is computed for scopes with steps and GPU ops, of up to 300,000 host and GPU ops
(engine/path_facts: a trace without steps would be one step from its first event to its last;
the path costs ~3 µs an op, paid by the first "Fix first" line of a run); else the rule
without a path decides. The path is weighed only when its steps cover the GPU's time (PATH_COVER_MIN..MAX of it; a
trace without steps is one step from its first to its last event, mostly host time around a
short GPU span: not the span the shares are of). Then (`path_weighed`):
  (b) kernels on at least PATH_GPU_BOUND_PCT (60 %) of the path: the bound is `gpu`, whatever
      idle gaps the GPU has (they are not what the step waits for);
  (a) an avoidable cost whose path bounds hold under PATH_OFF_PCT (2 %) of the path is off the
      path: its GPU idle time (when at least OFF_MIN_PCT, 1 %, of the span) is not counted
      (removing it does not shorten the step). Only the idle part: the GPU busy with exposed
      communication or copies is kept as measured. Communication is never taken out
      (NOT_OFF_PATH): a rank waiting for its peers in a collective run on worker threads
      (gloo) is host time on its own path (sample_traces/gpu/ddp_gloo_straggler: rank 0 waits
      ~20 ms a step in gloo:broadcast on gloo's threads, its path says cpu 93 %).
The rest is the rule without a path (`bound_of`). Conservative by design: the path removes a
cost only when it holds ~nothing of the path, and names `gpu` only when kernels dominate it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..lazy import polars as pl

AVOIDABLE = ("data", "communication", "host", "launch", "sync", "memory_management", "copy", "warmup")
BOUNDS = ("gpu", *AVOIDABLE, "unattributed", "no_gpu", "unknown")
GPU_BOUND_AVOIDABLE_PCT = 10.0     # avoidable costs under this share of the span: GPU-bound
UNATTRIBUTED_BOUND_PCT = 50.0      # unexplained idle at least this share (and the largest): unattributed
# the critical path (module docstring)
PATH_BOUNDS = ("cpu", "data_loading", "launch", "gpu", "gpu_gap", "communication", "sync", "memcpy")
PATH_OF_BOUND = {
    "data": ("data_loading",), "communication": ("communication",), "sync": ("sync", "memcpy"),
    "copy": ("memcpy", "sync"), "launch": ("launch",), "host": ("cpu",),
    "memory_management": ("cpu", "launch", "sync"), "warmup": ("cpu", "launch", "sync"),
}
BOUND_OF_PATH = {"data_loading": "data", "communication": "communication", "sync": "sync", "memcpy": "copy",
                 "launch": "launch", "cpu": "host", "gpu": "gpu", "gpu_gap": "gpu"}
PATH_GPU_BOUND_PCT = 60.0   # kernels on at least this share of the path: GPU-bound
PATH_OFF_PCT = 2.0          # a cost whose path bounds hold less of the path is off the path
OFF_MIN_PCT = 1.0           # ... and its GPU idle time taken out when at least this share of the span
NOT_OFF_PATH = ("communication",)   # never taken out (module docstring)
PATH_COVER_MIN, PATH_COVER_MAX = 0.5, 2.0   # the steps' spans / the GPU span, for the path to be weighed
# the findings that measure each avoidable cost (traceq/advice/rules)
FINDINGS_OF_BOUND = {
    "data": ("dataloader",), "communication": ("exposed_communication",), "host": ("host_bound", "idle_in_range"),
    "launch": ("launch_overhead",), "sync": ("remove_syncs",), "memory_management": ("allocator_churn",),
    "copy": ("pinned_memory",), "warmup": ("warmup",),
}


@dataclass
class PathFacts:
    """The critical path of a scope's steps (traceq.engine.critical_path), as data: the number
    of steps, the time they cover (ns, per rank the union of the step spans, summed) and Σ per
    path bound of the path's time (ns)."""
    steps: int = 0
    span_ns: int = 0
    ns: dict = field(default_factory=dict)
    gpu_extent_ns: int = 0     # Σ per rank of first GPU op start -> last GPU op end (all devices)

    def shares(self) -> dict[str, float]:
        """Each path bound's share of the path, % (every PATH_BOUNDS key)."""
        total = sum(self.ns.values())
        return {b: (100.0 * self.ns.get(b, 0) / total if total else 0.0) for b in PATH_BOUNDS}

    def dominant(self) -> str | None:
        sh = self.shares()
        return max(PATH_BOUNDS, key=lambda b: (sh[b], -PATH_BOUNDS.index(b))) if sum(self.ns.values()) else None

    def words(self, top: int = 3) -> str:
        """"data_loading 87.0 %, cpu 10.6 %": the largest bounds of at least 1 %."""
        sh = self.shares()
        return ", ".join(f"{b} {sh[b]:.1f} %" for b in sorted(PATH_BOUNDS, key=lambda b: -sh[b])[:top]
                         if sh[b] >= 1.0)

    def weighed(self, gpu_span_ns: int) -> bool:
        """Whether the verdict weighs this path: steps whose spans cover the GPU's time (its
        extent over all devices, else `gpu_span_ns`, the Σ per device)."""
        base = self.gpu_extent_ns or gpu_span_ns
        return bool(self.steps and sum(self.ns.values()) and base
                    and PATH_COVER_MIN <= self.span_ns / base <= PATH_COVER_MAX)


def merge_paths(parts) -> PathFacts | None:
    """The path of several ranks: steps, spans and each bound's time summed (None: none had one)."""
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    ns: dict = {}
    for p in parts:
        for b, v in p.ns.items():
            ns[b] = ns.get(b, 0) + v
    return PathFacts(sum(p.steps for p in parts), sum(p.span_ns for p in parts), ns,
                     sum(p.gpu_extent_ns for p in parts))


# the time ledger's labels (traceq.engine.ledger) each bound's share adds up; `host` also takes
# the unattributed idle the host had not issued the next op for (late_unattributed_ns: host
# time the trace does not record), `unattributed` the rest (queued idle nothing explains)
LEDGER_OF_BOUND = {
    "gpu": ("compute_ns",), "data": ("data_ns",), "communication": ("communication_ns", "communication_wait_ns"),
    "sync": ("sync_ns", "blocking_copy_ns"), "memory_management": ("memory_management_ns",),
    "warmup": ("warmup_ns",), "launch": ("launch_ns",), "host": ("host_compute_ns", "late_unattributed_ns"),
    "copy": ("copy_ns",), "busy": ("busy_ns",), "idle": ("idle_ns",),
}


def ledger_shares(t: dict) -> dict[str, float]:
    """Every bound's share of the step windows, %, from the ledger's totals `t`: each instant
    of a window counts for exactly one bound, so the shares of gpu, the avoidable costs and
    unattributed add up to 100 %."""
    out = dict.fromkeys((*BOUNDS, "idle", "busy"), 0.0)
    w = t.get("window_ns") or 0
    if not w:
        return out
    for b, cols in LEDGER_OF_BOUND.items():
        out[b] = 100.0 * sum(t[c] for c in cols) / w
    out["unattributed"] = 100.0 * (t["unattributed_ns"] - t["late_unattributed_ns"]) / w
    return out


def shares(facts) -> dict[str, float]:
    """Every bound's share of the step windows, % (defined in traceq.analyses.diagnose's
    docstring), and `idle` and `busy`: the time ledger's (`ledger_shares`) when the facts carry
    it; else, without a ledger, of the GPU span from the stall gaps."""
    if getattr(facts, "ledger", None):
        return ledger_shares(facts.ledger)
    span = facts.span_ns
    out = dict.fromkeys((*BOUNDS, "idle", "busy"), 0.0)
    if not span:
        return out
    g = facts.gaps
    ns = dict.fromkeys(out, 0)
    if g is not None and g.height:
        late = g.filter(~pl.col("queued").fill_null(False))
        queued = g.filter(pl.col("queued").fill_null(False))
        ns["idle"] = int(g["gap_ns"].sum())
        ns["data"] = int(g["data_ns"].sum())
        ns["communication"] = int(g["comm_ns"].sum())
        ns["sync"] = int(g["sync_ns"].sum() + g["copy_ns"].sum())
        memory = int(g["memory_ns"].sum())
        ns["memory_management" if facts.churn else "warmup"] += memory
        ns["warmup"] += int(g["warm_ns"].sum())
        ns["launch"] = int(late["launch_ns"].sum())
        ns["host"] = int(late["host_ns"].sum() + late["unattributed_ns"].sum())
        ns["unattributed"] = int(queued["launch_ns"].sum() + queued["host_ns"].sum() + queued["unattributed_ns"].sum())
    ns["communication"] += facts.exposed_comm_ns
    ns["copy"] = facts.exposed_copy_ns
    ns["busy"] = span - ns["idle"]
    ns["gpu"] = max(0, ns["busy"] - facts.exposed_comm_ns - facts.exposed_copy_ns)
    return {k: 100.0 * v / span for k, v in ns.items()}


def bound_of(sh: dict[str, float]) -> str:
    """The bound of the shares `shares` gives (a scope with GPU work)."""
    best = max(AVOIDABLE, key=lambda b: (sh[b], -AVOIDABLE.index(b)))
    if sh["unattributed"] >= UNATTRIBUTED_BOUND_PCT and sh["unattributed"] > sh[best]:
        return "unattributed"
    if sum(sh[b] for b in AVOIDABLE) < GPU_BOUND_AVOIDABLE_PCT:
        return "gpu"
    return best


def path_weighed(sh: dict[str, float], facts) -> tuple[dict[str, float], str | None, list[str]]:
    """The shares with the critical path weighed (module docstring): (the shares, the bound the
    path decides — `gpu` when kernels dominate it — or None, the avoidable costs taken out as
    off the path). The shares unchanged when the facts have no path or it is not weighed."""
    path = getattr(facts, "path", None)
    if path is None or not path.weighed(facts.span_ns):
        return sh, None, []
    ps = path.shares()
    if ps["gpu"] >= PATH_GPU_BOUND_PCT:
        return sh, "gpu", []
    out, off = dict(sh), []
    exposed = {"communication": 100.0 * facts.exposed_comm_ns / facts.span_ns, "copy": sh["copy"]}
    for b in AVOIDABLE:
        idle = max(0.0, sh[b] - exposed.get(b, 0.0))
        if b not in NOT_OFF_PATH and idle >= OFF_MIN_PCT and sum(ps[p] for p in PATH_OF_BOUND[b]) < PATH_OFF_PCT:
            out[b] = sh[b] - idle
            off.append(b)
    return out, None, off


def bound_with_path(sh: dict[str, float], facts) -> tuple[str, list[str]]:
    """The bound of the shares with the facts' critical path weighed: (bound, the costs taken
    out as off the path)."""
    weighed, decided, off = path_weighed(sh, facts)
    return (decided or bound_of(weighed)), off


def bound_for(facts) -> str | None:
    """The bound of a scope's RunFacts (its critical path weighed); None without GPU work (no_gpu)."""
    return bound_and_off(facts)[0]


def bound_and_off(facts) -> tuple[str | None, list[str]]:
    """(`bound_for(facts)`, the avoidable costs the critical path takes out as off it)."""
    if facts is None or not facts.span_ns:
        return None, []
    return bound_with_path(shares(facts), facts)
