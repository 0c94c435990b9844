"""The findings of a run's scope, kept beside the store so that the "Fix first" line of every
analysis after the first one reads a small file instead of computing the stall attribution
again (`traceq.engine.findings.run_findings`), and so does `traceq diagnose` at its defaults,
which keeps its verdict with them (traceq/analyses/diagnose.py).

Where: `<store>/.cache/findings/<scope id>.json`, one file per run and scope (rank, --steps,
--step-pattern, --skip-first), holding `{"key": ..., "findings": [...]}` and, once diagnose
has run at its default minimum gap, `"verdict": {"bound", "bound_share_pct", "evidence",
"gpu_idle_pct", "stepped", "critical_path"}` (the critical path's shares the verdict weighed).
Key: what the findings are computed from. The traceq code (its version, and the size and
modification time of every source file of the package), the run's manifest rows (each
ingest writes files with new ingest ids, so a re-ingested run never matches an old key) and
the scope. A file whose key differs is recomputed and replaced.
Never in the way: the file is written to a temporary name and moved into place
(`os.replace`), so a reader sees a whole file or none; a store that cannot be written
(read-only, full disk) or an unreadable file means the findings are computed, as without
the cache. The cache is not part of the store's interface: deleting `.cache` loses nothing,
and TRACEQ_FINDINGS_CACHE=0 turns it off (the findings are computed every time).
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, fields
from pathlib import Path

from ..advice.base import Finding, Findings

CACHE_DIR = ".cache/findings"
_FIELDS = {f.name for f in fields(Finding)}
_code: str | None = None


def _code_fingerprint() -> str:
    """traceq's version and the size and mtime of each of its source files (.py, .sql, .toml)."""
    global _code
    if _code is None:
        from ..version import __version__

        root = Path(__file__).resolve().parent.parent
        h = hashlib.sha256(__version__.encode())
        for p in sorted(root.rglob("*")):
            if p.suffix in (".py", ".sql", ".toml") and "__pycache__" not in p.parts:
                st = p.stat()
                h.update(f"{p.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
        _code = h.hexdigest()
    return _code


def _scope_id(scope, rank="scope") -> str:
    """The scope's id; with `rank`, that of the scope narrowed to that one rank (`--rank`)."""
    return json.dumps([scope.run, scope.rank if rank == "scope" else rank, scope.steps, scope.step_pattern,
                       scope.skip_first])


def _path(scope, rank="scope") -> Path:
    name = hashlib.sha256(_scope_id(scope, rank).encode()).hexdigest()[:32]
    return Path(scope.store.path) / CACHE_DIR / f"{name}.json"


def key_part(scope) -> tuple[bytes, bytes]:
    """What every key of the run shares: the code and the run's manifest rows."""
    rows = scope.con.execute("SELECT * FROM runs WHERE run = $run ORDER BY rank",
                             {"run": scope.run}).fetchall()
    return _code_fingerprint().encode(), repr(rows).encode()


def _key(scope, rank="scope", run_part: tuple[bytes, bytes] | None = None) -> str:
    code, rows = key_part(scope) if run_part is None else run_part
    h = hashlib.sha256(code)
    h.update(_scope_id(scope, rank).encode())
    h.update(rows)
    return h.hexdigest()


def _kept_at(min_gap_us: float, data_pattern: str | None = None) -> bool:
    """Whether findings of stalls with this minimum gap and data pattern are the ones kept:
    diagnose's defaults (minimum gap 50 µs, no data pattern)."""
    from .stall_attribution import DEFAULT_MIN_GAP_US

    return min_gap_us == DEFAULT_MIN_GAP_US and data_pattern is None


def enabled() -> bool:
    return os.environ.get("TRACEQ_FINDINGS_CACHE", "1").strip() != "0"


def _read(scope, rank="scope", run_part: tuple[bytes, bytes] | None = None) -> tuple[str | None, dict | None]:
    """(the scope's key, its kept document when the key matches, else None); with `rank`, of
    the scope narrowed to that rank."""
    if not enabled():
        return None, None
    key = _key(scope, rank, run_part)
    try:
        doc = json.loads(_path(scope, rank).read_text())
        return key, (doc if isinstance(doc, dict) and doc.get("key") == key else None)
    except (OSError, ValueError):
        return key, None


def _findings(doc: dict) -> Findings:
    def one(f: dict) -> Finding:
        return Finding(**{k: v for k, v in f.items() if k in _FIELDS})

    return Findings([one(f) for f in doc["findings"]], [one(f) for f in doc.get("also_seen", [])])


def load(scope, stalls=None) -> tuple[str | None, list[Finding] | None]:
    """(the scope's key, its cached findings or None) for findings computed with `stalls`
    (None: at diagnose's defaults); (None, None) with the cache off or other stalls than
    those kept (`save` then keeps nothing)."""
    if stalls is not None and not _kept_at(stalls.min_gap_us, stalls.data_pattern):
        return None, None
    key, doc = _read(scope)
    try:
        return key, (None if doc is None else _findings(doc))
    except (TypeError, KeyError, AttributeError):
        return key, None


def load_verdict(scope, min_gap_us: float, rank="scope",
                 run_part: tuple[bytes, bytes] | None = None) -> tuple[str | None, tuple[dict, list[Finding]] | None]:
    """(the scope's key, (its kept `traceq diagnose` verdict, its findings) or None): the
    verdict is kept only by diagnose, at its default minimum gap (`save(..., verdict=)`);
    (None, None) with the cache off or another minimum gap. With `rank`: of the scope
    narrowed to that rank (`open_scope(..., rank=rank)`'s), `run_part` its run's (`load_verdicts`)."""
    if not _kept_at(min_gap_us):
        return None, None
    key, doc = _read(scope, rank, run_part)
    try:
        if doc is None or not isinstance(doc.get("verdict"), dict):
            return key, None
        v = doc["verdict"]
        verdict = {"bound": str(v["bound"]), "bound_share_pct": float(v["bound_share_pct"]),
                   "evidence": str(v["evidence"]), "gpu_idle_pct": v.get("gpu_idle_pct"),
                   "stepped": bool(v["stepped"]),
                   "critical_path": v.get("critical_path")}
        return key, (verdict, _findings(doc))
    except (TypeError, KeyError, AttributeError, ValueError):
        return key, None


def rank_ids(scope, ranks: list[int]) -> dict:
    """{rank: the `rank` argument of `load_verdict`/`save` that names the scope of that rank
    alone}: the scope itself when it is narrowed to one rank (`--rank`, a per-rank task) or
    its run has one rank, else the rank (`open_scope(..., rank=r)`'s scope; never the
    whole run's, whose findings are pooled over its ranks)."""
    if scope.rank is not None:
        return dict.fromkeys(ranks, "scope")
    n = scope.con.execute("SELECT count(*) FROM runs WHERE run = $run", {"run": scope.run}).fetchone()[0]
    return {r: "scope" if n == 1 else r for r in ranks}


def load_verdicts(scope, ids: dict, min_gap_us: float) -> tuple[dict, dict]:
    """`load_verdict` of each rank of the scope alone (`ids`: `rank_ids`), the code and the
    manifest read once: ({rank: key}, {rank: (verdict, findings) or None})."""
    if not _kept_at(min_gap_us) or not enabled():
        return dict.fromkeys(ids), dict.fromkeys(ids)
    part = key_part(scope)
    keys, kept = {}, {}
    for r in ids:
        keys[r], kept[r] = load_verdict(scope, min_gap_us, ids[r], part)
    return keys, kept


def save(scope, key: str | None, fs: list[Finding], verdict: dict | None = None, rank="scope") -> None:
    """Keep the scope's findings (and diagnose's verdict: bound, bound_share_pct, evidence,
    stepped) under `key` (None: the cache is off); with `rank`, those of the scope narrowed to
    that rank."""
    if key is None:
        return
    path = _path(scope, rank)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = {"key": key, "findings": [asdict(f) for f in fs],
               "also_seen": [asdict(f) for f in getattr(fs, "also", [])]}
        if verdict is not None:
            doc["verdict"] = verdict
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, path)
    except OSError:   # a store we cannot write to: the findings are computed each time
        try:
            tmp.unlink()
        except OSError:
            pass
