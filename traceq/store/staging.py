"""The staging area of a store (`.staging/` in the store folder): what an ingest hands over
(`RankData`), writing a rank's table files into a fresh staging folder (`stage`, giving a
`Staged` ready for the commit), scratch folders for readers, creating the store folder and
taking it away again after a failed first ingest."""
from __future__ import annotations

import contextlib
import os
import shutil
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
        sdir.mkdir()
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
        d.mkdir()
    except OSError as exc:
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
