"""The Python API of every analysis, one import away: `traceq.analyses.hotspots(store, ...)`."""
from __future__ import annotations

from .analysis.catalog import runs, sql
from .analysis.hotspots import hotspots

__all__ = ["hotspots", "runs", "sql"]
