"""The pieces one run's part of the HTML report is made of, shared by the page (traceq/report/
page.py) and the report sections of the analyses (each analysis module's `report_section`):
`Section`, `Card`, `RunPart`, the per-run context `RunReport` handed to every section, `Guard`
(an analysis that fails leaves its error in its section and a warning, not a broken report)
and the number formats of the page.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from .html import Plot, Table, plot


@dataclass
class Section:
    id: str
    title: str
    intro: str | None = None
    headline: str | None = None
    plots: list[Plot] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    lead: bool = False      # placed before the run's other sections (the verdict)


@dataclass
class Card:
    label: str
    value: str
    hint: str = ""
    bad: bool = False


@dataclass
class RunPart:
    run: str
    anchor: str
    facts: list[tuple[str, str]]
    cards: list[Card]
    ranks: Table | None
    sections: list[Section]
    rank_tables: list[Table] = field(default_factory=list)   # beside `ranks`, a many-rank run's summary
    rank_note: str | None = None


class Guard:
    """Run one analysis; on failure record the error in the section and a warning."""

    def __init__(self, section: Section, warnings: list[str], what: str):
        self.section, self.warnings, self.what = section, warnings, what

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is None or not isinstance(exc, Exception):
            return False
        if os.environ.get("TRACEQ_DEBUG") == "1":
            return False
        msg = f"{self.what} failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        self.section.error = msg
        self.warnings.append(msg)
        return True


def ms(ns) -> str:
    if ns is None:
        return "—"
    return f"{ns / 1e6:,.1f} ms" if abs(ns) >= 1e5 else f"{ns / 1e3:,.1f} µs"


def pct(v) -> str:
    return "—" if v is None else f"{v:.1f} %"


def slug(text: str) -> str:
    """HTML id of a run's section: readable, and distinct for distinct names (`a b`, `a_b`)."""
    import hashlib
    import re

    readable = re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")[:60] or "x"
    return f"run-{readable}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


@dataclass
class RunReport:
    """What every report section of one run gets: the run's scope (one DuckDB connection that
    all sections share), its manifest rows, the warnings list and `results`, the tables the
    sections computed by analysis name (the headline cards read them; a section reuses what
    an earlier one computed)."""
    store: object
    run: str
    scope: object
    manifest: object
    warnings: list
    results: dict = field(default_factory=dict)

    def guard(self, section: Section, what: str) -> Guard:
        return Guard(section, self.warnings, f"run {self.run}: {what}")


def add(sec: Section, fig, kind: str) -> None:
    p = plot(fig)
    if p is not None:
        p.kind = kind
        sec.plots.append(p)


def add_table(sec: Section, t: Table | None, kind: str) -> None:
    if t is not None:
        t.kind = kind
        sec.tables.append(t)
