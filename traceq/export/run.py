"""`export_run`: one run of the store -> one Chrome-trace JSON file (traceq.export.chrome
writes the events; docs/export.md). A rank at a time, a table at a time: memory holds one
rank's tables, never the document.

Besides the ranks' events: diagnose's findings of the run as global instant events ("ph":
"i", "s": "g", at the run's start: a finding has no time of its own), the critical path
when `segments` are given (traceq.export.path_marks), and the document's metadata:
`displayTimeUnit` "ns", `baseTimeNanoseconds` (the epoch ns of ts 0, so that re-ingesting
the file keeps the common clock), `otherData`, and for a one-rank export `distributedInfo`
(its rank and world size, so re-ingesting gives the same rank) and `deviceProperties`.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import TraceqError
from .chrome import FORMATS, Tracks, Writer, run_clock, write_rank

# runs.devices key -> the deviceProperties name Kineto writes it under
_DEVICE_KEYS = {"id": "id", "name": "name", "sm_count": "numSms", "memory_bytes": "totalGlobalMem",
                "compute_major": "computeMajor", "compute_minor": "computeMinor",
                "max_threads_per_block": "maxThreadsPerBlock", "max_threads_per_sm": "maxThreadsPerMultiprocessor",
                "regs_per_block": "regsPerBlock", "regs_per_sm": "regsPerMultiprocessor", "warp_size": "warpSize",
                "shared_mem_per_block": "sharedMemPerBlock", "shared_mem_per_sm": "sharedMemPerMultiprocessor",
                "shared_mem_per_block_optin": "sharedMemPerBlockOptin"}


@dataclass
class Exported:
    """What `export_run` wrote: the file, the run, its ranks (each with its row counts), the
    events written, the findings and path segments marked, notes (why something is not), the
    file's size in bytes and the seconds it took."""
    path: Path
    run: str
    ranks: list[dict]
    events: int
    findings: int
    segments: int
    notes: list[str] = field(default_factory=list)
    bytes: int = 0
    seconds: float = 0.0


def export_run(store=None, run: str | None = None, path="trace.json", *, format: str = "perfetto",
               rank: int | None = None, segments=None, findings: bool = True, scope=None) -> Exported:
    """Write run `run` (default: the most recently ingested) of `store`, or its rank `rank`,
    as a Chrome-trace JSON at `path` (gzip when it ends in .gz). `segments`: the critical path
    to mark (traceq.export.path_marks), None for none; `findings`: mark diagnose's findings."""
    from ..engine.scope import open_scope
    from .path_marks import add_path

    t0 = time.perf_counter()
    if format not in FORMATS:
        raise TraceqError(f"--format {format!r}: choose perfetto or chrome")
    path = Path(path)
    if not path.parent.is_dir():
        raise TraceqError("cannot write: no such directory", str(path.parent))
    scope = scope or open_scope(store, run, rank, only_run=True)
    con, run = scope.con, scope.run
    from ..store import fetch_pl

    manifest = fetch_pl(con, "SELECT * FROM runs WHERE run = $run ORDER BY rank", {"run": run})
    ranks = [rank] if rank is not None else manifest["rank"].to_list()
    clock = run_clock(con, run, ranks)
    tracks = Tracks()
    writer = Writer(path, tracks)
    notes: list[str] = []
    try:
        counts = [write_rank(writer, con, run, r, clock, tracks, sort=10 * i) for i, r in enumerate(ranks)]
        n_findings = _findings(writer, scope, notes) if findings else 0
        n_segments = add_path(writer, segments, clock) if segments is not None else 0
        writer.close(_tail(manifest, run, ranks, rank, clock, format))
    except BaseException:
        writer.abort()
        raise
    return Exported(path, run, counts, writer.n_events, n_findings, n_segments, notes, path.stat().st_size,
                    time.perf_counter() - t0)


def _findings(writer: Writer, scope, notes: list[str]) -> int:
    """diagnose's findings of the scope, one global instant each at ts 0 (the run's start)."""
    from ..engine.findings import run_findings

    try:
        fs = run_findings(scope)
    except TraceqError as exc:   # e.g. a run without GPU ops: nothing to diagnose
        notes.append(f"findings not marked: {exc}")
        return 0
    for f in fs:
        writer.event({"ph": "i", "s": "g", "cat": "finding", "name": f"{f.id}: {f.gain()}", "pid": 0, "tid": 0,
                      "ts": 0.0, "args": {"id": f.id, "category": f.category, "gain": f.gain(),
                                            "est_gain_ms_per_step": round(f.est_gain_ms_per_step, 4),
                                            "evidence": f.evidence, "advice": f.advice}})
    return len(fs)


def _tail(manifest, run: str, ranks: list[int], rank: int | None, clock, fmt: str) -> dict:
    from ..version import __version__

    rows = {r["rank"]: r for r in manifest.iter_rows(named=True)}
    tail = {"displayTimeUnit": "ns", "baseTimeNanoseconds": clock.origin_ns}
    one = rank if rank is not None else (ranks[0] if len(ranks) == 1 else None)
    if one is not None:
        row = rows.get(one, {})
        tail["distributedInfo"] = {"rank": one, "world_size": row.get("world_size") or len(manifest)}
        devices = json.loads(row.get("devices") or "[]")
        tail["deviceProperties"] = [{_DEVICE_KEYS[k]: v for k, v in d.items() if k in _DEVICE_KEYS} for d in devices]
    tail["otherData"] = {"traceq_version": __version__, "exported_as": fmt, "run": run, "ranks": ranks,
                         "origin_ns": clock.origin_ns, "rank_shift_ns": {str(r): clock.shift[r] for r in ranks},
                         "source_formats": sorted({str(rows[r]["source_format"]) for r in ranks if r in rows})}
    return tail
