"""The HTML report: page.py assembles it (build_report), parts.py holds what a page is made of,
html.py renders it, figures.py, timeline.py and ranks_timeline.py draw its charts. What each
analysis shows is its own `report_section` (traceq/analyses)."""
from __future__ import annotations

from .page import ReportResult, build_report

__all__ = ["ReportResult", "build_report"]
