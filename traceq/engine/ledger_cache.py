"""The time ledger of a scope, kept beside the store, so that every command after the first
reads its rows from a small Parquet file instead of sweeping the run's events again (the
ledger is what summary, overview, overlap, stalls, steps, diagnose and the report all read).

Where: `<store>/.cache/ledger/<scope id>-<key>.parquet`, one file per run, scope (rank, the
ranks of the scope, --steps, --step-pattern, --skip-first) and data pattern, holding the
ledger's rows (traceq.engine.ledger.STEP_COLUMNS); the key is in the name (written with
polars alone: no pyarrow import on the way of a command), and writing a scope's file removes
its files of other keys.
Key: the traceq code (version, size and modification time of every source file), the run's
manifest rows (a re-ingested run has new ingest ids, so it never matches an old key), the
scope and the data pattern: the key of the findings cache (engine/findings_cache.py) and the
pattern. A file whose key differs is recomputed and replaced.
Never in the way: written to a temporary name and moved into place (a reader sees a whole
file or none); a store that cannot be written or an unreadable file means the ledger is
computed, as without the cache; TRACEQ_FINDINGS_CACHE=0 turns this cache off too. Deleting
`.cache` loses nothing.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from ..lazy import polars as pl

CACHE_DIR = ".cache/ledger"


def _scope_id(scope, data_pattern: str | None) -> str:
    ranks = [int(r) for (r,) in scope.con.execute("SELECT DISTINCT rank FROM scope_window ORDER BY rank").fetchall()]
    return json.dumps([scope.run, scope.rank, scope.steps, scope.step_pattern, scope.skip_first, ranks,
                       data_pattern or None])


def _where(scope, data_pattern: str | None) -> Path | None:
    """The file of the scope's ledger under its current key; None with the cache off or no key."""
    from .findings_cache import enabled, key_part

    if not enabled():
        return None
    try:
        sid = _scope_id(scope, data_pattern)
        code, rows = key_part(scope)
    except Exception:   # noqa: BLE001 - no key, no cache: the ledger is computed
        return None
    h = hashlib.sha256(code)
    h.update(sid.encode())
    h.update(rows)
    name = hashlib.sha256(sid.encode()).hexdigest()[:32]
    return Path(scope.store.path) / CACHE_DIR / f"{name}-{h.hexdigest()[:32]}.parquet"


def load(scope, data_pattern: str | None) -> tuple[Path | None, pl.DataFrame | None]:
    """(where it is kept, the kept rows when a file of the current key exists, else None)."""
    where = _where(scope, data_pattern)
    if where is None:
        return None, None
    try:
        return where, pl.read_parquet(where)
    except Exception:   # noqa: BLE001 - missing, damaged or foreign: computed again
        return where, None


def save(where: Path | None, steps: pl.DataFrame) -> None:
    """Keep the rows under the key, and drop the scope's files of other keys (nothing with the
    cache off or a store we cannot write)."""
    if where is None:
        return
    tmp = where.with_name(f".{where.name}.{os.getpid()}.tmp")
    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        steps.write_parquet(tmp)
        os.replace(tmp, where)
        scope_part = where.name.split("-")[0]
        for old in where.parent.glob(f"{scope_part}-*.parquet"):
            if old != where:
                old.unlink(missing_ok=True)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass
