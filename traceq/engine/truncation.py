"""Why a scope may have no GPU ops: the ingest's truncation warning of its ranks (a file
cut before Kineto wrote its GPU events), named by every verdict and headline that would
otherwise call the trace CPU-only."""
from __future__ import annotations

import json

from ..schema import TRUNCATED_WARNING
from .scope import Scope


def truncation(scope: Scope) -> str | None:
    """The ingest's truncation warning of the scope's ranks (runs.warnings, schema.TRUNCATED_WARNING),
    e.g. "rank 0: file is truncated or malformed after 15,000 complete events", or None."""
    rows = scope.df("SELECT m.rank, m.warnings FROM runs m JOIN scope_window w ON w.rank = m.rank "
                    "WHERE m.run = $run ORDER BY m.rank")
    cut = []
    for r in rows.iter_rows(named=True):
        for w in json.loads(r["warnings"] or "[]"):
            if w.startswith(TRUNCATED_WARNING):
                cut.append((r["rank"], w.split(";")[0]))
    if not cut:
        return None
    return "; ".join(w if rows.height == 1 else f"rank {rank}: {w}" for rank, w in cut)


def truncation_by_rank(scope: Scope) -> dict[int, str | None]:
    """`truncation` of each rank of the scope alone (one query)."""
    rows = scope.df("SELECT w.rank, m.warnings FROM scope_window w LEFT JOIN runs m ON m.rank = w.rank "
                    "AND m.run = $run ORDER BY w.rank")
    out = {}
    for r in rows.iter_rows(named=True):
        cut = [w.split(";")[0] for w in json.loads(r["warnings"] or "[]") if w.startswith(TRUNCATED_WARNING)]
        out[r["rank"]] = "; ".join(cut) if cut else None
    return out


def cut_words(cut: str) -> str:
    """A scope without GPU ops whose trace file was cut (`truncation`), in words."""
    return f"the trace file was truncated ({cut}): its GPU events may be missing"


def no_gpu_reason(scope: Scope) -> str:
    """Why a scope has no GPU ops, in words for a headline: the ingest's truncation warning
    when it found the file cut (`truncation`), else the guess of a CPU-only trace."""
    cut = truncation(scope)
    return cut_words(cut) if cut else "CPU-only trace?"
