"""traceq: trace analysis for deep-learning training (nsys SQLite, Kineto JSON, timer logs).

The Python API mirrors the CLI:

    import traceq
    s = traceq.open_store(".traceq")
    df = s.hotspots(run="baseline", top=10)   # polars DataFrame; df.headline is the verdict

`traceq.ingest(...)` and the module-level functions `traceq.hotspots(store, ...)` (the same
as `traceq.open_store(store).hotspots(...)`) work too. Heavy libraries
are imported lazily so `traceq --help` stays fast.
"""
from __future__ import annotations

from .version import __version__

_API = {
    "open_store": ("traceq.api", "open_store"),
    "TraceStore": ("traceq.api", "TraceStore"),
    "Result": ("traceq.analyses.spec", "Result"),
    "ingest": ("traceq.ingest", "ingest"),
    "Store": ("traceq.store", "Store"),
    "runs": ("traceq.api", "runs"),
    "sql": ("traceq.api", "sql"),
}


def _analyses() -> list[str]:
    """One function per analysis of the registry: traceq.hotspots(store, ...) is
    traceq.open_store(store).hotspots(...)."""
    import importlib

    return list(importlib.import_module("traceq.analyses.registry").REGISTRY)


__all__ = ["__version__", "REGISTRY", *_API]


def __dir__():
    return sorted({*__all__, *_analyses()})


def __getattr__(name: str):
    import importlib

    if name in _API:
        mod, attr = _API[name]
        return getattr(importlib.import_module(mod), attr)
    if name == "REGISTRY":
        return importlib.import_module("traceq.analyses.registry").REGISTRY
    import importlib.util

    # `from traceq import <submodule>` asks here before importing it: never the registry then
    if name.startswith("_") or importlib.util.find_spec(f"{__name__}.{name}") is not None:
        raise AttributeError(name)
    if name in _analyses():
        return importlib.import_module("traceq.api").analysis_function(name)
    raise AttributeError(name)
