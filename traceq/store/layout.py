"""Where a store keeps its files: the store folder and how it is chosen, the names of the
manifest, the staging area and the lock, the path of a table file of one run and rank; and
the errors that name the store when it cannot be read or written."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from urllib.parse import quote

from ..errors import TraceqError

DEFAULT_STORE = ".traceq"
MANIFEST = "runs.parquet"
STAGING = ".staging"
LOCK = ".lock"


def resolve_store_path(path: str | Path | None = None) -> Path:
    """`--store`, else `TRACEQ_STORE`, else `./.traceq`."""
    if path:
        return Path(path)
    env = os.environ.get("TRACEQ_STORE")
    return Path(env) if env else Path(DEFAULT_STORE)


def run_dir(run: str) -> str:
    """The folder name of a run: `run=` + the name percent-encoded (reversible, collision-free).

    The folder is only where the files live: the run name itself is a column inside every
    table file and in the manifest, and the views read it from there (never from the path).
    Names whose encoding is too long for a folder name are cut and suffixed with a hash.
    """
    enc = quote(run, safe="")
    if enc.startswith("."):
        enc = "%2E" + enc[1:]
    if len(enc) > 160:
        enc = enc[:120] + "~" + hashlib.sha256(run.encode()).hexdigest()[:16]
    return f"run={enc}"


def table_file(table: str, run: str, rank: int, ingest_id: str) -> Path:
    """The path, relative to the store folder, of one ingest's file of `table` for (run, rank)."""
    return Path(table) / run_dir(run) / f"rank={rank}" / f"{ingest_id}.parquet"


def write_error(exc: OSError, path: Path) -> TraceqError:
    """The error of a write to the store that failed (full disk, read-only store)."""
    return TraceqError(f"cannot write to the store ({exc.strerror or exc}); nothing was changed", path)


def unreadable_manifest(exc: Exception, manifest_path: Path) -> TraceqError:
    """The error of a manifest that cannot be read: said as such, never guessed around."""
    return TraceqError(f"store manifest is unreadable ({str(exc).splitlines()[0][:160]}); the store cannot be "
                       "repaired in place: re-ingest the traces into a new store", manifest_path)
