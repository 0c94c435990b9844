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


# the manifest's columns every traceq version wrote: without them a runs.parquet is not one
# (newer columns a manifest of an older version lacks read as NULL)
REQUIRED_MANIFEST_COLUMNS = ("run", "rank", "files")


def check_manifest_columns(names, manifest_path: Path) -> None:
    """A manifest without the columns every manifest has is damage, said in one line."""
    missing = [c for c in REQUIRED_MANIFEST_COLUMNS if c not in set(names)]
    if missing:
        raise TraceqError(f"store manifest is damaged: it has no {', '.join(missing)} column "
                          f"({'it is not a traceq manifest' if len(missing) == len(REQUIRED_MANIFEST_COLUMNS) else 'of ' + ', '.join(REQUIRED_MANIFEST_COLUMNS)}); "
                          "nothing was read or changed: restore runs.parquet from a backup, or re-ingest the traces "
                          "into a new store", manifest_path)


def manifest_present(manifest_path: Path) -> bool:
    """Whether the store has a manifest; a runs.parquet that is a dangling or looping symlink
    is a damaged store, not "no store" (TraceqError)."""
    if manifest_path.exists():
        return True
    if manifest_path.is_symlink():
        raise TraceqError("store manifest is damaged: runs.parquet is a symlink to nothing (dangling or looping); "
                          "nothing was read or changed: restore it, or re-ingest the traces into a new store",
                          manifest_path)
    return False


def listed_files(root: Path, files_json: str | None, manifest_path: Path | None = None) -> dict[str, Path]:
    """{table: path} of one manifest row's `files` (JSON of paths relative to the store folder
    `root`). A path that leaves the store (absolute, `..`, a symlink out of it) or is not a
    table file is a damaged manifest: TraceqError in one line, never followed (a tampered
    manifest must not make an ingest delete, or a query read, a file elsewhere). The check is
    on the text (no `..`, not absolute, under a table's folder): cheap on every read; a
    delete checks the resolved path as well (`inside`)."""
    import json

    where = manifest_path or root / MANIFEST
    try:
        files = json.loads(files_json or "{}")
    except ValueError:
        files = None
    if not isinstance(files, dict):
        raise TraceqError("store manifest is damaged (a `files` entry is not a JSON object); re-ingest the "
                          "traces into a new store", where)
    out = {}
    for table, rel in files.items():
        p = Path(str(rel))
        if (not isinstance(rel, str) or p.is_absolute() or ".." in p.parts or p.suffix != ".parquet"
                or len(p.parts) < 2 or p.parts[0].startswith(".")):
            raise TraceqError(f"store manifest is damaged: it lists {str(rel)[:120]!r}, which is not a table file "
                              "inside the store; nothing was read or deleted (re-ingest the traces into a new "
                              "store)", where)
        out[str(table)] = root / p
    return out


def inside(root: Path, path: Path) -> bool:
    """Whether `path` (symlinks followed) is inside the store folder `root`."""
    return root.resolve() in path.resolve().parents
