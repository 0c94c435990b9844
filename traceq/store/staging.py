"""The staging area of a store (`.staging/` in the store folder): what an ingest hands over
(`RankData`), writing a rank's table files into a fresh staging folder (`stage`, giving a
`Staged` ready for the commit), scratch folders for readers, creating the store folder and
taking it away again after a failed first ingest; who owns a staging folder (`.owner`: the
host, pid and start time of the ingest that made it) and which ones are stale (`stale`)."""
from __future__ import annotations

import contextlib
import contextvars
import json
import os
import shutil
import socket
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .. import schema
from ..errors import TraceqError
from .layout import LOCK, STAGING, write_error
from .writer import TableWriter, write_table_file

if TYPE_CHECKING:   # pyarrow is imported by the functions that write
    import pyarrow as pa


@dataclass
class RankData:
    """What one ingested source file contributes: canonical tables plus manifest facts."""

    run: str
    rank: int
    tables: dict[str, pa.Table]
    source_path: str
    source_sha256: str
    source_format: str
    format_version: str | None = None
    world_size: int | None = None
    host: str | None = None
    devices: list[dict] = field(default_factory=list)
    clock_offset_ns: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    source_bytes: int | None = None


@dataclass
class Staged:
    """A rank whose table files are written to the staging area, ready to commit."""

    data: RankData
    staging_dir: Path
    files: dict[str, str]   # table -> staged file name
    counts: dict[str, int]


OWNER_FILE = ".owner"
# a staging folder of another host (or without an owner) is stale once nothing in it changed
# for this long (seconds): that host's processes cannot be asked whether they still run
STALE_STAGING_S = 3600
_OWNER: contextvars.ContextVar[dict | None] = contextvars.ContextVar("traceq_staging_owner", default=None)


def _start_ticks(pid: int) -> int | None:
    """The start time of process `pid` (clock ticks since boot; Linux), None where unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def owner_id() -> dict:
    """This process as the owner of staging folders: host, pid, start time."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "start": _start_ticks(os.getpid())}


@contextlib.contextmanager
def owned_by(owner: dict | None):
    """Staging folders made inside this block (this thread) name `owner` (the ingest that
    commits them, when a worker process stages for it), not the worker."""
    token = _OWNER.set(owner)
    try:
        yield
    finally:
        _OWNER.reset(token)


def _make(d: Path) -> None:
    d.mkdir()
    (d / OWNER_FILE).write_text(json.dumps(_OWNER.get() or owner_id()))


def _alive(owner: dict) -> bool:
    try:
        os.kill(int(owner["pid"]), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError, TypeError, KeyError):
        return True
    start = _start_ticks(int(owner["pid"]))
    return owner.get("start") is None or start is None or start == owner["start"]


def _age_s(d: Path) -> float:
    """Seconds since anything in folder `d` (or the folder) last changed."""
    newest = d.stat().st_mtime
    for f in d.iterdir():
        with contextlib.suppress(OSError):
            newest = max(newest, f.stat().st_mtime)
    return time.time() - newest


def stale(root: Path) -> list[tuple[Path, str]]:
    """The staging folders of the store `root` that no live ingest owns, with why: the owner
    process (on this host; pid and start time) is gone, or (another host's, or no owner) nothing changed in it
    for STALE_STAGING_S."""
    out = []
    sdir = root / STAGING
    if not sdir.is_dir():
        return out
    host = socket.gethostname()
    for d in sdir.iterdir():
        try:
            age = _age_s(d) if d.is_dir() else time.time() - d.stat().st_mtime
            try:
                owner = json.loads((d / OWNER_FILE).read_text())
            except (OSError, ValueError):
                owner = None
            if isinstance(owner, dict) and owner.get("host") == host and not _alive(owner):
                out.append((d, f"its ingest (pid {owner.get('pid')}) is gone"))
            elif age > STALE_STAGING_S:
                who = f"owned by {owner.get('host')}" if isinstance(owner, dict) else "no owner"
                out.append((d, f"unchanged for {age / 3600:.1f} h, {who}"))
        except OSError:
            continue
    return out


def size_bytes(d: Path) -> int:
    total = 0
    for f in (d.rglob("*") if d.is_dir() else [d]):
        with contextlib.suppress(OSError):
            total += f.lstat().st_size
    return total


def remove_stale(root: Path) -> None:
    """Remove the stale staging folders of the store `root` (`stale`)."""
    for d, _ in stale(root):
        if d.is_dir():
            shutil.rmtree(d, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                d.unlink()


def ensure(root: Path) -> None:
    """Create the store folder `root` and its staging area if missing."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        (root / STAGING).mkdir(exist_ok=True)
    except OSError as exc:
        raise TraceqError(f"cannot create store ({exc.strerror})", root) from None


def missing_root(root: Path) -> Path | None:
    """The topmost folder of the store path `root` that does not exist yet (`root` itself when
    only it is missing), None when the store folder exists: what a failed first ingest must
    take away again (`remove_if_unused`)."""
    if root.exists():
        return None
    top = root
    while not top.parent.exists() and top.parent != top:
        top = top.parent
    return top


def remove_if_unused(root: Path, top: Path | None, committed: bool) -> None:
    """After a failed ingest into a fresh path (`top` = `missing_root(root)` before it): remove
    the store folder `root` and the parents the ingest created, when nothing was committed
    (`committed`: a manifest exists) and no other ingest is staging there. Only empty folders
    are removed (rmdir): anything another process put there stays."""
    if top is None or committed:
        return
    try:
        os.rmdir(root / STAGING)      # fails while another ingest stages here
    except FileNotFoundError:
        pass
    except OSError:
        return
    with contextlib.suppress(OSError):
        (root / LOCK).unlink(missing_ok=True)
    p = root
    while True:
        try:
            os.rmdir(p)
        except OSError:
            return
        if p == top or p.parent == p:
            return
        p = p.parent


def stage(root: Path, data: RankData, fill=None) -> Staged:
    """Write the rank's tables (with run/rank columns) to a fresh staging folder of the store
    `root`: the tables of `data`, or what `fill(open_table)` writes piece by piece (a streaming
    reader, see `Parsed.fill`; `open_table(name)` gives a `TableWriter`). A write that fails
    (full disk, read-only store), or a `fill` that raises, removes the folder."""
    ensure(root)
    sdir = root / STAGING / uuid.uuid4().hex
    try:
        _make(sdir)
        return _stage_tables(sdir, data) if fill is None else _stage_filled(sdir, data, fill)
    except OSError as exc:
        shutil.rmtree(sdir, ignore_errors=True)
        raise write_error(exc, root) from None
    except BaseException:
        shutil.rmtree(sdir, ignore_errors=True)
        raise


@contextlib.contextmanager
def scratch(root: Path):
    """A scratch folder in the staging area of the store `root` for one reader (raw parts, an
    inflated .gz), on the store's file system (shared with Dask workers); removed in every case."""
    ensure(root)
    d = root / STAGING / f"{uuid.uuid4().hex}.scratch"
    try:
        _make(d)
    except OSError as exc:
        shutil.rmtree(d, ignore_errors=True)
        raise write_error(exc, root) from None
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _stage_tables(sdir: Path, data: RankData) -> Staged:
    from concurrent.futures import ThreadPoolExecutor

    tables = {table: schema.conform(table, data.tables.get(table)) for table in schema.TABLES}
    counts = {table: t.num_rows for table, t in tables.items()}

    def write(table: str) -> None:
        write_table_file(sdir / f"{table}.parquet", tables[table], data.run, data.rank)

    todo = [table for table, n in counts.items() if n]
    with ThreadPoolExecutor(max_workers=max(1, len(todo))) as pool:   # pyarrow writes without the GIL
        list(pool.map(write, todo))
    return Staged(data, sdir, {table: f"{table}.parquet" for table in todo}, counts)


def _stage_filled(sdir: Path, data: RankData, fill) -> Staged:
    writers: dict[str, TableWriter] = {}

    def open_table(table: str) -> TableWriter:
        if table not in writers:
            writers[table] = TableWriter(sdir / f"{table}.parquet", table, data.run, data.rank)
        return writers[table]

    try:
        fill(open_table)
    finally:
        for w in writers.values():
            w.close()
    counts = {table: writers[table].rows if table in writers else 0 for table in schema.TABLES}
    return Staged(data, sdir, {table: f"{table}.parquet" for table, n in counts.items() if n}, counts)
