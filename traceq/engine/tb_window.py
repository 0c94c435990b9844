"""The TensorBoard profiler plugin's window (`--window tb`): the steps torch-tb-profiler 0.4.3
analyses, per rank of a scope, as its StepParser builds them (ProfilerStep#N spans moved to the
device side, the tail it distrusts dropped). The definition is written out in
traceq/queries/tb_steps.sql (the event typing: tb_events.sql); `ensure_tb_steps` runs them once
per scope.
"""
from __future__ import annotations

from .scope import Scope


def ensure_tb_steps(scope: Scope) -> None:
    """Temp table tb_steps(rank, step, idx, start_ns, end_ns, matched) for the scope's ranks (and
    the tables tb_host, tb_regions, tb_device of the plugin's event typing, times as it reads them:
    tb_events.sql)."""
    from ..queries import run_script

    if getattr(scope, "_tb_steps_ready", False):
        return
    run_script(scope.con, "tb_events", {"run": scope.run, "plugin_times": True})
    run_script(scope.con, "tb_steps")
    scope._tb_steps_ready = True
