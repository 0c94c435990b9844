"""The analyses as the tests call them on a store: open the scope (`open_scope(store, run,
rank, steps, step_pattern, skip_first)`), then call the analysis' scoped function with its
parameters, in one process. Each returns exactly what that scoped function returns (a frame,
diff's dict of frames, the `Stalls` of traceq.engine.stall_attribution); the public API
(`traceq.open_store(store).<analysis>(...)`) is tested through the registry elsewhere."""
from __future__ import annotations

from traceq.analyses.breakdown import breakdown_scoped, instances_scoped, timer_scoped
from traceq.analyses.diagnose import diagnose_scoped
from traceq.analyses.diff import diff_scoped
from traceq.analyses.hotspots import hotspots_scoped
from traceq.analyses.overlap import overlap_scoped
from traceq.analyses.summary import summary_scoped
from traceq.engine.scope import open_scope
from traceq.engine.stall_attribution import DEFAULT_MIN_GAP_US, stalls_scoped


def _scope(store, run=None, rank=None, steps=None, step_pattern=None, skip_first=0):
    return open_scope(store, run, rank, steps, step_pattern, skip_first)


def summary(store=None, run=None, rank=None, steps=None, window="all", *, step_pattern=None, skip_first=0):
    return summary_scoped(_scope(store, run, rank, steps, step_pattern, skip_first), window)


def overlap(store=None, run=None, rank=None, steps=None, window="all", by="rank", *, step_pattern=None,
            skip_first=0):
    return overlap_scoped(_scope(store, run, rank, steps, step_pattern, skip_first), window, by)


def breakdown(store=None, run=None, rank=None, steps=None, by="all", *, step_pattern=None, skip_first=0):
    return breakdown_scoped(_scope(store, run, rank, steps, step_pattern, skip_first), by)


def breakdown_instances(store=None, run=None, rank=None, steps=None, by="all", *, step_pattern=None,
                        skip_first=0):
    return instances_scoped(_scope(store, run, rank, steps, step_pattern, skip_first), by)


def timer_breakdown(store=None, run=None, rank=None, steps=None, *, step_pattern=None, skip_first=0):
    return timer_scoped(_scope(store, run, rank, steps, step_pattern, skip_first))


def stalls(store=None, run=None, rank=None, steps=None, min_gap_us=DEFAULT_MIN_GAP_US, data_pattern=None, *,
           step_pattern=None, skip_first=0):
    return stalls_scoped(_scope(store, run, rank, steps, step_pattern, skip_first), min_gap_us, data_pattern)


def diagnose(store=None, run=None, rank=None, steps=None, min_gap_us=DEFAULT_MIN_GAP_US, *, step_pattern=None,
             skip_first=0):
    return diagnose_scoped(_scope(store, run, rank, steps, step_pattern, skip_first), min_gap_us)


def diff(store=None, run_a=None, run_b=None, rank=None, steps=None, top=None, *, step_pattern=None, skip_first=0):
    """Run B against run A (the baseline); `rank` and `steps` apply to both runs."""
    a = _scope(store, run_a, rank, steps, step_pattern, skip_first)
    b = open_scope(a.store, run_b, rank, steps, step_pattern, skip_first)
    return diff_scoped(a, b, top)


def hotspots(store=None, run=None, rank=None, steps=None, *, step_pattern=None, skip_first=0):
    """Every kernel, copy and memset name, longest total first (filter or head it yourself)."""
    return hotspots_scoped(_scope(store, run, rank, steps, step_pattern, skip_first))
