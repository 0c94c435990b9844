"""The Parquet store (DESIGN §2): a folder of Parquet files plus a `runs` manifest.

Layout under the store folder:

    runs.parquet                                  the manifest: one row per (run, rank)
    <table>/run=<run>/rank=<N>/<ingest id>.parquet one file per run/rank/table (zstd);
                                                  <run> percent-encoded (see `run_dir`)
    .staging/                                     files being written by an ingest
    .lock                                         held while the manifest is replaced

The manifest is the single source of truth: a table file that it does not list is
invisible. An ingest writes its files under `.staging/`, moves them into place, then
replaces `runs.parquet` atomically (`os.replace`) under the lock. A process killed at any
point therefore leaves the store readable and exactly as it was (at worst with orphan
files, which the next commit deletes).
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from . import schema
from .errors import TraceqError

if TYPE_CHECKING:   # reading the store needs DuckDB only; pyarrow/numpy are imported to write
    import pyarrow as pa

DEFAULT_STORE = ".traceq"
MANIFEST = "runs.parquet"


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


class Store:
    def __init__(self, path: str | Path | None = None):
        self.path = resolve_store_path(path)

    # ---------------------------------------------------------------- reading
    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST

    def exists(self) -> bool:
        return self.manifest_path.exists()

    def manifest(self) -> pa.Table:
        import pyarrow.parquet as pq

        if not self.manifest_path.exists():
            return schema.RUNS.empty_table()
        try:
            # one file, read as a whole: not `pq.read_table`, which goes through pyarrow.dataset
            # (30 ms of imports on each ingest into an existing store)
            with pq.ParquetFile(self.manifest_path) as f:
                return f.read()
        except Exception as exc:  # corrupt manifest: say so, do not guess
            raise self._unreadable(exc) from None

    def _unreadable(self, exc: Exception) -> TraceqError:
        return TraceqError(f"store manifest is unreadable ({str(exc).splitlines()[0][:160]}); the store cannot be "
                           "repaired in place: re-ingest the traces into a new store", self.manifest_path)

    def _read_manifest(self, con) -> bool:
        """TEMP TABLE runs on `con`: the manifest, read by DuckDB (no pyarrow). False: no manifest."""
        if not self.manifest_path.exists():
            return False
        try:
            source = f"read_parquet({_sql_str(str(self.manifest_path))}, hive_partitioning = false)"
            con.execute(f"CREATE TEMP TABLE runs AS SELECT *{_missing_nulls(con, source, schema.RUNS_COLUMNS)} FROM {source}")
        except Exception as exc:  # noqa: BLE001 - corrupt manifest: say so, do not guess
            raise self._unreadable(exc) from None
        return True

    def manifest_rows(self) -> list[dict]:
        return self.manifest().to_pylist()

    def connect(self, runs: list[str] | None = None, only: tuple[str, int] | None = None):
        """A DuckDB connection with the views runs, gpu_ops, host_ops, regions, timer_stats, metrics.
        `runs`: the table views read only these runs' files (faster on a store of many runs;
        the `runs` view still lists every run). `only=(run, rank)`: that rank's files alone."""
        import duckdb

        con = duckdb.connect(":memory:")
        # `runs` is read once (a temp table): the table views below and every query see the same
        # manifest even while an ingest replaces it
        con.execute("SET enable_external_file_cache = false")
        if not self._read_manifest(con):
            _empty_view(con, "runs", schema.RUNS_COLUMNS)
        self.table_views(con, runs, only)
        return con

    def table_views(self, con, runs: list[str] | None = None, only: tuple[str, int] | None = None) -> None:
        """(Re)create the table views of a `connect` connection over the files its `runs` lists
        (`runs`, `only`: as for `connect`): a connection opened with `runs=[]` to pick the run
        gets the run's table data without reading the manifest again."""
        rows = [(run, rank, json.loads(files or "{}"))
                for run, rank, files in con.execute("SELECT run, rank, files FROM runs").fetchall()]
        for table in schema.TABLE_COLUMNS:
            files = []
            for run, rank, tables in rows:
                if runs is not None and run not in runs:
                    continue
                if only is not None and (run, rank) != only:
                    continue
                rel = tables.get(table)
                if rel:
                    files.append(str(self.path / rel))
            table_view(con, table, files)

    # ---------------------------------------------------------------- writing
    def _ensure(self) -> None:
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            (self.path / ".staging").mkdir(exist_ok=True)
        except OSError as exc:
            raise TraceqError(f"cannot create store ({exc.strerror})", self.path) from None

    def missing_root(self) -> Path | None:
        """The topmost folder of the store's path that does not exist yet (the path itself
        when only it is missing), None when the store folder exists: what a failed first
        ingest must take away again (`remove_if_unused`)."""
        if self.path.exists():
            return None
        root = self.path
        while not root.parent.exists() and root.parent != root:
            root = root.parent
        return root

    def remove_if_unused(self, root: Path | None) -> None:
        """After a failed ingest into a fresh path (`root` = `missing_root()` before it): remove
        the store folder and the parents the ingest created, when nothing was committed (no
        manifest) and no other ingest is staging there. Only empty folders are removed (rmdir):
        anything another process put there stays."""
        if root is None or self.exists():
            return
        try:
            os.rmdir(self.path / ".staging")      # fails while another ingest stages here
        except FileNotFoundError:
            pass
        except OSError:
            return
        with contextlib.suppress(OSError):
            (self.path / ".lock").unlink(missing_ok=True)
        p = self.path
        while True:
            try:
                os.rmdir(p)
            except OSError:
                return
            if p == root or p.parent == p:
                return
            p = p.parent

    def stage(self, data: RankData, fill=None) -> Staged:
        """Write the rank's tables (with run/rank columns) to a fresh staging folder: the
        tables of `data`, or what `fill(open_table)` writes piece by piece (a streaming
        reader, see `Parsed.fill`; `open_table(name)` gives a `TableWriter`). A write that
        fails (full disk, read-only store), or a `fill` that raises, removes the folder."""
        self._ensure()
        sdir = self.path / ".staging" / uuid.uuid4().hex
        try:
            sdir.mkdir()
            return self._stage_into(sdir, data) if fill is None else self._stage_filled(sdir, data, fill)
        except OSError as exc:
            shutil.rmtree(sdir, ignore_errors=True)
            raise _write_error(exc, self.path) from None
        except BaseException:
            shutil.rmtree(sdir, ignore_errors=True)
            raise

    @contextlib.contextmanager
    def scratch(self):
        """A scratch folder in the staging area for one reader (raw parts, an inflated .gz),
        on the store's file system (shared with Dask workers); removed in every case."""
        self._ensure()
        d = self.path / ".staging" / f"{uuid.uuid4().hex}.scratch"
        try:
            d.mkdir()
        except OSError as exc:
            raise _write_error(exc, self.path) from None
        try:
            yield d
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def _stage_into(self, sdir: Path, data: RankData) -> Staged:
        from concurrent.futures import ThreadPoolExecutor

        import numpy as np
        import pyarrow as pa
        import pyarrow.parquet as pq

        tables = {table: schema.conform(table, data.tables.get(table)) for table in schema.TABLES}
        counts = {table: t.num_rows for table, t in tables.items()}

        def write(table: str) -> None:
            t = _with_run_rank_columns(tables[table], data.run, data.rank)
            pq.write_table(t, sdir / f"{table}.parquet", **_layout(t.schema), row_group_size=ROW_GROUP)

        todo = [table for table, n in counts.items() if n]
        with ThreadPoolExecutor(max_workers=max(1, len(todo))) as pool:   # pyarrow writes without the GIL
            list(pool.map(write, todo))
        return Staged(data, sdir, {table: f"{table}.parquet" for table in todo}, counts)

    def _stage_filled(self, sdir: Path, data: RankData, fill) -> Staged:
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

    @contextlib.contextmanager
    def _locked(self):
        self._ensure()
        try:
            lock = open(self.path / ".lock", "a")
        except OSError as exc:
            raise _write_error(exc, self.path) from None
        with lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def commit(self, staged: list[Staged], *, force: bool = False, align=None) -> list[str]:
        """Move staged ranks into place and replace the manifest atomically.

        A rank already in the store with the same source sha256 is skipped unless `force`;
        a rank present with a different source is an error unless `force` (never lose data
        silently). All or nothing: an error leaves the manifest as it was.
        Returns a status per staged rank: "added", "replaced" or "unchanged".
        `align(store_path, rows, runs)` (traceq.clocks.align_rows), when given, sets the
        clock_refine_ns of the manifest rows {(run, rank): row} of the runs this commit
        changed, from their files already in place, before the one manifest write.
        """
        try:
            return self._commit(staged, force, align)
        except OSError as exc:   # full disk, read-only store: the manifest was not replaced
            raise _write_error(exc, self.path) from None

    def _commit(self, staged: list[Staged], force: bool, align=None) -> list[str]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        statuses: list[str] = []
        with self._locked():
            rows = self.manifest_rows()
            keep = {(r["run"], r["rank"]): r for r in rows}
            superseded: list[str] = []
            now = datetime.now(timezone.utc).replace(tzinfo=None)
            for st in staged:   # check every rank before touching anything
                d = st.data
                old = keep.get((d.run, d.rank))
                if old is not None and old["source_sha256"] != d.source_sha256 and not force:
                    raise TraceqError(f"run {d.run!r} already has a rank {d.rank} from another file "
                                      f"({old['source_path']}); choose a new run name with --run NAME, "
                                      "or --force to replace it", d.source_path)
            moved: list[Path] = []   # table files placed by this commit: removed again if it fails
            for st in staged:
                d = st.data
                key = (d.run, d.rank)
                old = keep.get(key)
                if old is not None and old["source_sha256"] == d.source_sha256 and not force:
                    statuses.append("unchanged")
                    continue
                ingest_id = st.staging_dir.name
                rel_files = {}
                for table, fname in st.files.items():
                    rel = Path(table) / run_dir(d.run) / f"rank={d.rank}" / f"{ingest_id}.parquet"
                    (self.path / rel).parent.mkdir(parents=True, exist_ok=True)
                    os.replace(st.staging_dir / fname, self.path / rel)
                    rel_files[table] = str(rel)
                    moved.append(self.path / rel)
                if old is not None:
                    superseded.extend(json.loads(old["files"] or "{}").values())
                keep[key] = {
                    "run": d.run, "rank": d.rank, "world_size": d.world_size,
                    "source_path": d.source_path, "source_sha256": d.source_sha256,
                    "source_format": d.source_format, "format_version": d.format_version,
                    "host": d.host, "devices": json.dumps(d.devices),
                    "clock_offset_ns": d.clock_offset_ns, "ingested_at": now,
                    "labels": json.dumps(d.labels, sort_keys=True), "warnings": json.dumps(d.warnings),
                    "n_gpu_ops": st.counts.get("gpu_ops", 0), "n_host_ops": st.counts.get("host_ops", 0),
                    "n_regions": st.counts.get("regions", 0), "n_timer_stats": st.counts.get("timer_stats", 0),
                    "files": json.dumps(rel_files, sort_keys=True), "source_bytes": d.source_bytes,
                }
                statuses.append("replaced" if old is not None else "added")
            if any(s != "unchanged" for s in statuses):
                tmp = self.path / f".{MANIFEST}.{uuid.uuid4().hex}.tmp"
                try:
                    if align is not None:
                        align(self.path, keep, {st.data.run for st, s in zip(staged, statuses) if s != "unchanged"})
                    ordered = sorted(keep.values(), key=lambda r: (r["run"], r["rank"]))
                    pq.write_table(pa.Table.from_pylist(ordered, schema=schema.RUNS), tmp)
                    os.replace(tmp, self.manifest_path)
                except BaseException:
                    for f in moved:   # the manifest never listed them: take them back out
                        with contextlib.suppress(OSError):
                            f.unlink()
                    raise
                finally:
                    with contextlib.suppress(OSError):
                        tmp.unlink()
                for rel in superseded:
                    with contextlib.suppress(OSError):
                        (self.path / rel).unlink()
            self._collect_garbage(keep.values())
        for st in staged:
            shutil.rmtree(st.staging_dir, ignore_errors=True)
        return statuses

    def discard(self, staged: list[Staged]) -> None:
        for st in staged:
            shutil.rmtree(st.staging_dir, ignore_errors=True)

    def _collect_garbage(self, rows) -> None:
        """Delete table files the manifest does not reference (left by killed ingests)."""
        live = {str(self.path / rel) for r in rows for rel in json.loads(r["files"] or "{}").values()}
        for table in schema.TABLES:
            tdir = self.path / table
            if not tdir.is_dir():
                continue
            for f in tdir.rglob("*.parquet"):
                if str(f) not in live:
                    with contextlib.suppress(OSError):
                        f.unlink()
        staging = self.path / ".staging"
        if staging.is_dir():
            for d in staging.iterdir():
                # staging folders of other live ingests are younger than a minute; leave those
                with contextlib.suppress(OSError):
                    if datetime.now().timestamp() - d.stat().st_mtime > 3600:
                        shutil.rmtree(d, ignore_errors=True)


ROW_GROUP = 1 << 18
STREAM_ROW_GROUP = 1 << 16
# ... or fewer, once the pending rows hold this many bytes: 65 k GPU ops with kernel signatures
# are ~30 MB in Arrow (one row group filling while the one before is encoded: 2x that)
STREAM_GROUP_BYTES = 8 << 20
# zstd level 1 + dictionaries on text only: 2x faster to write than the defaults, smaller files
_WRITE_OPTIONS = {"compression": "zstd", "compression_level": 1}
# Columns written without min/max statistics: free-form names (kernel signatures of hundreds of
# characters). Their statistics cost a third of writing gpu_ops (0.84 -> 0.46 s for 1.25 M
# rows of the benchmark's nsys export) and prune nothing: every row group holds many names,
# and the analyses match names by pattern. Every other column keeps its statistics.
_NO_STATISTICS = frozenset({"name", "identity"})


def _layout(s: pa.Schema) -> dict:
    """The writer options of a table with schema `s`: compression, dictionaries on text,
    statistics on every column but the free-form names."""
    import pyarrow as pa

    text = [f.name for f in s if pa.types.is_string(f.type) or pa.types.is_dictionary(f.type)]
    return {**_WRITE_OPTIONS, "use_dictionary": text,
            "write_statistics": [f.name for f in s if f.name not in _NO_STATISTICS]}


def _with_run_rank_columns(t: pa.Table, run: str, rank: int) -> pa.Table:
    """The table as stored: `run` (dictionary), `rank` (int32), then the schema's columns.
    (`pa.repeat`, not a NumPy array: pyarrow's conversion of one imports numpy.ma, 7 ms.)"""
    import pyarrow as pa

    n = t.num_rows
    t = t.add_column(0, "rank", pa.repeat(pa.scalar(rank, pa.int32()), n))
    return t.add_column(0, "run", pa.DictionaryArray.from_arrays(pa.repeat(pa.scalar(0, pa.int32()), n),
                                                                 pa.array([run], pa.string())))


class TableWriter:
    """One staged table file written piece by piece (a streaming reader): each piece is
    conformed to the table's schema and gets the run/rank columns; the file has the layout
    of `Store.stage`'s but smaller row groups (STREAM_ROW_GROUP rows or STREAM_GROUP_BYTES
    bytes, whichever comes first: less held in memory).
    No file until the first row.

    Row groups are encoded and written on a thread of their own (pyarrow releases the GIL),
    so the reader goes on translating meanwhile; at most one row group is being written
    while the next one fills (memory stays bounded). A write error is raised by the next
    `write`, `restart` or `close`."""

    def __init__(self, path: Path, table: str, run: str, rank: int):
        self.path, self.table, self.run, self.rank = path, table, run, rank
        self.rows = 0
        self._writer = None   # a pyarrow.parquet.ParquetWriter once the first rows arrive
        self._pending: list[pa.Table] = []
        self._pending_rows = self._pending_bytes = 0
        self._pool = None      # the writing thread, once there is a row group to write
        self._busy = None      # the row group being written (a Future)

    def write(self, t: pa.Table) -> None:
        t = schema.conform(self.table, t)
        if t.num_rows == 0:
            return
        self._pending.append(_with_run_rank_columns(t, self.run, self.rank))
        self._pending_rows += t.num_rows
        self._pending_bytes += self._pending[-1].nbytes
        self.rows += t.num_rows
        if self._pending_rows >= STREAM_ROW_GROUP or self._pending_bytes >= STREAM_GROUP_BYTES:
            self._flush(wait=False)

    def _flush(self, wait: bool = True) -> None:
        if self._pending:
            import pyarrow as pa

            t = pa.concat_tables(self._pending)
            self._pending, self._pending_rows, self._pending_bytes = [], 0, 0
            self._wait()   # one row group in flight at a time, in order
            if self._pool is None:
                from concurrent.futures import ThreadPoolExecutor

                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"write-{self.table}")
            self._busy = self._pool.submit(self._write_group, t)
        if wait:
            self._wait()

    def _write_group(self, t: pa.Table) -> None:
        import pyarrow.parquet as pq

        if self._writer is None:
            self._writer = pq.ParquetWriter(self.path, t.schema, **_layout(t.schema))
        self._writer.write_table(t, row_group_size=1 << 30)

    def _wait(self) -> None:
        busy, self._busy = self._busy, None
        if busy is not None:
            busy.result()

    def restart(self) -> None:
        """Forget what was written (a reader that must write its table again): the next
        write starts the file anew."""
        self._pending, self._pending_rows, self._pending_bytes, self.rows = [], 0, 0, 0
        try:
            self._wait()
        finally:
            self._close_file()
        self.path.unlink(missing_ok=True)

    def close(self) -> None:
        try:
            self._flush()
        finally:
            try:
                self._wait()   # after a failed flush: let the thread finish before the file closes
            finally:
                self._close_file()
                if self._pool is not None:
                    self._pool.shutdown()
                    self._pool = None

    def _close_file(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def table_view(con, table: str, files: list[str]) -> None:
    """CREATE VIEW `table` (a table of schema.TABLES) over these Parquet files of it. A file
    written before a column was added reads as NULL in that column."""
    columns = schema.TABLE_COLUMNS[table]
    if not files:
        _empty_view(con, table, [("run", schema.STR), ("rank", schema.I32), *columns])
        return
    listing = "[" + ", ".join(_sql_str(f) for f in files) + "]"
    source = f"read_parquet({listing}, union_by_name = true, hive_partitioning = false)"
    con.execute(f"CREATE OR REPLACE VIEW {table} AS SELECT *{_missing_nulls(con, source, columns)} FROM {source}")


def _missing_nulls(con, source: str, columns: list[tuple[str, str]]) -> str:
    """`, NULL::T AS c` for each column that `source` lacks (written before it was added)."""
    have = {r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
    return "".join(f', NULL::{_DUCK_TYPES.get(t, "VARCHAR")} AS "{name}"' for name, t in columns if name not in have)


def _write_error(exc: OSError, path: Path) -> TraceqError:
    return TraceqError(f"cannot write to the store ({exc.strerror or exc}); nothing was changed", path)


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


_DUCK_TYPES = {"string": "VARCHAR", "int64": "BIGINT", "int32": "INTEGER", "bool": "BOOLEAN", "double": "DOUBLE",
               "timestamp[us]": "TIMESTAMP"}


def _empty_view(con, name: str, columns: list[tuple[str, str]]) -> None:
    """A view with these (column, Arrow type name) columns and no rows."""
    cols = ", ".join(f'NULL::{_DUCK_TYPES[t]} AS "{c}"' for c, t in columns)
    con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT {cols} WHERE false")


# Arrow between DuckDB and polars: through pyarrow (a pyarrow Table), or, where `ARROW_STREAMS`
# is set, through the Arrow PyCapsule stream interface directly (the same columns and values,
# without importing pyarrow and numpy: ~0.15 s of a command's start-up). The command line sets
# it (traceq.cli.main); it is off by default because DuckDB 2.0 then reports its objects as
# leaked on stderr when the interpreter shuts down, which the CLI avoids by ending the process
# with os._exit once its output is flushed (traceq.cli.main).
ARROW_STREAMS = False


class _Stream:
    """A polars frame seen only through `__arrow_c_stream__` (DuckDB scans it without pyarrow)."""

    def __init__(self, df) -> None:
        self.df = df

    def __arrow_c_stream__(self, requested_schema=None):
        return self.df.__arrow_c_stream__(requested_schema)


def register_pl(con, name: str, df) -> None:
    """Make polars frame `df` readable as `name` on a DuckDB connection (`con.register`)."""
    if ARROW_STREAMS:
        con.register(name, _Stream(df))
    else:
        con.register(name, df.to_arrow())


def fetch_pl(con, sql: str, params: dict | None = None):
    """Run `sql` on a DuckDB connection and return a polars DataFrame (via Arrow)."""
    import polars as pl

    rel = con.sql(sql, params=params or None)
    if rel is None:   # a statement without a result (CREATE, SET, ...)
        return pl.DataFrame()
    if ARROW_STREAMS:
        df = pl.DataFrame(rel)
    else:
        df = pl.from_arrow(rel.to_arrow_table())
    # DuckDB sums of BIGINT are HUGEINT/DECIMAL: whole numbers become Int64, others Float64
    fix = [pl.col(c).cast(pl.Int64 if t.scale == 0 else pl.Float64)
           for c, t in df.schema.items() if isinstance(t, pl.Decimal)]
    return df.with_columns(fix) if fix else df
