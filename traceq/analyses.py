"""The Python API of every analysis, one import away: `traceq.analyses.hotspots(store, ...)`.

Each function takes the store (path or `Store`; default ./.traceq) and the scope
(`run=`, `rank=`, `steps=`) and returns polars DataFrame(s); the CLI renders the same.
"""
from __future__ import annotations

from .analysis.breakdown import breakdown, timer_breakdown
from .analysis.catalog import runs, sql
from .analysis.diff import diff
from .analysis.hotspots import hotspots
from .analysis.overlap import overlap
from .analysis.stalls import stalls
from .analysis.summary import summary

__all__ = ["breakdown", "diff", "hotspots", "overlap", "runs", "sql", "stalls", "summary", "timer_breakdown"]
