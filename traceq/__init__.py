"""traceq: trace analysis for deep-learning training (nsys SQLite, Kineto JSON, timer logs).

The Python API mirrors the CLI:

    import traceq
    s = traceq.open_store(".traceq")
    df = s.hotspots(run="baseline", top=10)   # polars DataFrame; df.headline is the verdict

`traceq.ingest(...)` and the module-level functions `traceq.hotspots(store, ...)` (plain
DataFrames) work too. Heavy libraries are imported lazily so `traceq --help` stays fast.
"""
from __future__ import annotations

__version__ = "0.1.0"

_API = {
    "open_store": ("traceq.api", "open_store"),
    "TraceStore": ("traceq.api", "TraceStore"),
    "Result": ("traceq.registry", "Result"),
    "REGISTRY": ("traceq.analyses", "REGISTRY"),
    "ingest": ("traceq.ingest", "ingest"),
    "Store": ("traceq.store", "Store"),
    "hotspots": ("traceq.analyses", "hotspots"),
    "runs": ("traceq.analyses", "runs"),
    "sql": ("traceq.analyses", "sql"),
    "summary": ("traceq.analyses", "summary"),
    "overlap": ("traceq.analyses", "overlap"),
    "breakdown": ("traceq.analyses", "breakdown"),
    "stalls": ("traceq.analyses", "stalls"),
    "diff": ("traceq.analyses", "diff"),
    "diagnose": ("traceq.analysis.diagnose", "diagnose"),
    "timer_breakdown": ("traceq.analyses", "timer_breakdown"),
}


__all__ = ["__version__", *_API]


def __dir__():
    return sorted(__all__)


def __getattr__(name: str):
    if name in _API:
        import importlib

        mod, attr = _API[name]
        return getattr(importlib.import_module(mod), attr)
    raise AttributeError(name)
