"""The TensorBoard profiler plugin's window (`--window tb`): the steps torch-tb-profiler 0.4.3
analyses, per rank of a scope, as its StepParser builds them (ProfilerStep#N spans moved to the
device side, the tail it distrusts dropped). The definition is written out in
traceq/queries/tb_steps.sql; `ensure_tb_steps` runs it once per connection.
"""
from __future__ import annotations

from .scope import Scope


def ensure_tb_steps(scope: Scope) -> None:
    """Temp table tb_steps(rank, step, idx, start_ns, end_ns, matched) for the scope's ranks (and
    the views tb_host, tb_regions, tb_device the plugin's event typing reads; tb_steps.sql)."""
    from ..queries import run_script

    if getattr(scope, "_tb_steps_ready", False):
        return
    run_script(scope.con, "tb_steps", {"run": scope.run})
    scope._tb_steps_ready = True
