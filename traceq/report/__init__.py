"""`traceq report`: one self-contained HTML file per store selection (DESIGN §5).

    build_report(store, runs=None, out_path="report.html", title=None) -> ReportResult

The page holds, per run: the facts the store has (ranks, devices, labels, file names — never
paths or environment), headline numbers per run and rank (step time, GPU idle %, exposed
communication, data wait %), a down-sampled GPU timeline (see `timeline`), per-category and
per-region bars, the hotspot table with avoidable work and its advice, stall and overlap charts
per step and rank; with exactly two runs, the diff of B against A; with two or more, a
comparison (traceq compare) with one chart per metric.

Self-contained: plotly.js is inlined once, each figure is JSON drawn by `Plotly.newPlot`, CSS is
inline; nothing is fetched at view time (no CDN, fonts or images). Owns: report/ (data to
figures and tables) and templates/report.html.j2 (the page). The analyses live elsewhere.
"""
from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path


@dataclass
class ReportResult:
    path: Path
    bytes: int
    runs: list[str]
    seconds: float
    warnings: list[str] = field(default_factory=list)
    sections: list[str] = field(default_factory=list)   # "run/section" ids rendered


def resolve_runs(store, runs: list[str] | None) -> list[str]:
    """The runs asked for (checked to exist), or the most recently ingested one."""
    from ..analysis.scope import resolve_run
    from ..errors import TraceqError
    from ..store import Store

    st = store if isinstance(store, Store) else Store(store)
    if not st.exists():
        raise TraceqError(f"no traceq store at {st.path}: ingest a trace first (traceq ingest FILE), "
                          "or point --store / TRACEQ_STORE at one")
    con = st.connect()
    if not runs:
        return [resolve_run(con, None, st)]
    out = []
    for r in runs:
        name = resolve_run(con, r, st)
        if name not in out:
            out.append(name)
    return out


def build_report(store=None, runs: list[str] | None = None, out_path: str | Path = "report.html",
                 title: str | None = None) -> ReportResult:
    """Write the HTML report of `runs` (default: the most recent run) to `out_path`, atomically."""
    from .. import __version__
    from ..errors import TraceqError
    from ..store import Store
    from .html import render_page
    from .sections import comparison_part, diff_part, run_part

    t0 = time.perf_counter()
    st = store if isinstance(store, Store) else Store(store)
    names = resolve_runs(st, runs)
    warnings: list[str] = []
    parts = [run_part(st, r, warnings) for r in names]
    diff = diff_part(st, names[0], names[1], warnings) if len(names) == 2 else None
    comparison = comparison_part(st, names, warnings) if len(names) >= 2 else None
    title = title or ("traceq report: " + (" vs ".join(names) if len(names) <= 3 else f"{len(names)} runs"))
    page = render_page({
        "title": title,
        "runs": parts,
        "diff": diff,
        "comparison": comparison,
        "version": __version__,
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    })
    out = Path(out_path)
    data = page.encode("utf-8")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except OSError as exc:
        raise TraceqError(f"cannot write report ({exc.strerror or exc})", out) from None
    sections = [f"{p.run}/{s.id}" for p in parts for s in p.sections]
    if diff is not None:
        sections.append("diff")
    if comparison is not None:
        sections.append("compare")
    return ReportResult(out, len(data), names, time.perf_counter() - t0, warnings, sections)


__all__ = ["ReportResult", "build_report", "resolve_runs"]
