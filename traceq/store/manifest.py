"""The manifest and the commit: `Store`, the handle on one store folder.

The manifest (`runs.parquet`, one row per (run, rank), schema.RUNS) is the single source of
truth: a table file it does not list is invisible. `Store.commit` moves staged table files into
place and then replaces the manifest atomically (`os.replace`) under the store's lock, deciding
per rank whether it is added, replaced or unchanged; table files nobody lists any more are
deleted afterwards. A process killed at any point therefore leaves the store readable and
exactly as it was (at worst with orphan files, which the next commit deletes).

Reading (`connect`, `table_views`) and staging (`stage`, `scratch`, ...) are done by
traceq.store.read and traceq.store.staging; the methods here give them the store's folder.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from .. import schema
from ..errors import TraceqError
from . import read, staging
from .layout import (LOCK, MANIFEST, check_manifest_columns, inside, listed_files, manifest_present, resolve_store_path,
                     table_file, unreadable_manifest,
                     write_error)
from .staging import RankData, Staged

if TYPE_CHECKING:   # reading the store needs DuckDB only; pyarrow is imported to write
    import pyarrow as pa


class Store:
    """The store in folder `path` (`--store`, else `TRACEQ_STORE`, else `./.traceq`)."""

    def __init__(self, path: str | Path | None = None):
        self.path = resolve_store_path(path)

    # ---------------------------------------------------------------- reading
    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST

    def exists(self) -> bool:
        return manifest_present(self.manifest_path)

    def manifest(self) -> pa.Table:
        import pyarrow.parquet as pq

        if not manifest_present(self.manifest_path):
            return schema.RUNS.empty_table()
        try:
            # one file, read as a whole: not `pq.read_table`, which goes through pyarrow.dataset
            # (30 ms of imports on each ingest into an existing store)
            with pq.ParquetFile(self.manifest_path) as f:
                table = f.read()
        except Exception as exc:  # corrupt manifest: say so, do not guess
            raise unreadable_manifest(exc, self.manifest_path) from None
        check_manifest_columns(table.schema.names, self.manifest_path)
        return table

    def manifest_rows(self) -> list[dict]:
        return self.manifest().to_pylist()

    def connect(self, runs: list[str] | None = None, only: tuple | None = None):
        """A DuckDB connection with the views runs, gpu_ops, host_ops, regions, timer_stats, metrics,
        memory_events.
        `runs`: the table views read only these runs' files (faster on a store of many runs;
        the `runs` view still lists every run). `only=(run, rank)`: that rank's files alone,
        `only=(run, (rank, ...))` those ranks' files."""
        return read.connect(self.path, runs, only)

    def table_views(self, con, runs: list[str] | None = None, only: tuple | None = None) -> None:
        """(Re)create the table views of a `connect` connection over the files its `runs` lists
        (`runs`, `only`: as for `connect`): a connection opened with `runs=[]` to pick the run
        gets the run's table data without reading the manifest again."""
        read.table_views(con, self.path, runs, only)

    # ---------------------------------------------------------------- staging
    def missing_root(self) -> Path | None:
        """The topmost folder of the store's path that does not exist yet (the path itself
        when only it is missing), None when the store folder exists: what a failed first
        ingest must take away again (`remove_if_unused`)."""
        return staging.missing_root(self.path)

    def remove_if_unused(self, root: Path | None) -> None:
        """After a failed ingest into a fresh path (`root` = `missing_root()` before it): remove
        the store folder and the parents the ingest created, when nothing was committed (no
        manifest) and no other ingest is staging there. Only empty folders are removed (rmdir):
        anything another process put there stays."""
        if root is None:
            return
        staging.remove_if_unused(self.path, root, self.exists())

    def stage(self, data: RankData, fill=None) -> Staged:
        """Write the rank's tables (with run/rank columns) to a fresh staging folder: the
        tables of `data`, or what `fill(open_table)` writes piece by piece (a streaming
        reader, see `Parsed.fill`; `open_table(name)` gives a `TableWriter`). A write that
        fails (full disk, read-only store), or a `fill` that raises, removes the folder."""
        return staging.stage(self.path, data, fill)

    def scratch(self):
        """A scratch folder in the staging area for one reader (raw parts, an inflated .gz),
        on the store's file system (shared with Dask workers); removed in every case."""
        return staging.scratch(self.path)

    def discard(self, staged: list[Staged]) -> None:
        for st in staged:
            shutil.rmtree(st.staging_dir, ignore_errors=True)

    # ---------------------------------------------------------------- commit
    @contextlib.contextmanager
    def _locked(self):
        staging.ensure(self.path)
        try:
            lock = open(self.path / LOCK, "a")
        except OSError as exc:
            raise write_error(exc, self.path) from None
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
            raise write_error(exc, self.path) from None

    def _commit(self, staged: list[Staged], force: bool, align=None) -> list[str]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        statuses: list[str] = []
        with self._locked():
            rows = self.manifest_rows()
            for r in rows:   # a damaged manifest stops the commit before anything moves
                listed_files(self.path, r["files"], self.manifest_path)
            keep = {(r["run"], r["rank"]): r for r in rows}
            superseded: list[str] = []
            now = datetime.now(timezone.utc).replace(tzinfo=None)
            for st in staged:   # check every rank before touching anything
                d = st.data
                old = keep.get((d.run, d.rank))
                if old is not None and old["source_sha256"] != d.source_sha256 and not force:
                    other = ("this file as it was before, or ingested with other --graph-capture traces or --map"
                             if old["source_path"] == d.source_path else f"another file ({old['source_path']})")
                    raise TraceqError(f"run {d.run!r} already has a rank {d.rank} from {other}; choose a new run "
                                      "name with --run NAME, or --force to replace it", d.source_path)
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
                    rel = table_file(table, d.run, d.rank, ingest_id)
                    (self.path / rel).parent.mkdir(parents=True, exist_ok=True)
                    os.replace(st.staging_dir / fname, self.path / rel)
                    rel_files[table] = str(rel)
                    moved.append(self.path / rel)
                if old is not None:
                    superseded.extend(listed_files(self.path, old["files"], self.manifest_path).values())
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
                for path in superseded:
                    if inside(self.path, path):   # never a file elsewhere (a symlink out of the store)
                        with contextlib.suppress(OSError):
                            path.unlink()
            self._collect_garbage(keep.values())
        for st in staged:
            shutil.rmtree(st.staging_dir, ignore_errors=True)
        return statuses

    def remove(self, runs: list[str]) -> dict[str, int]:
        """Remove runs from the store (`traceq rm`): the manifest is replaced atomically without
        their rows (under the lock, as a commit), then their table files are deleted (a process
        killed in between leaves orphans that the next commit deletes). An unknown run is an
        error and nothing changes. Returns {run: ranks removed}."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not self.exists():
            raise TraceqError("no store here (no runs.parquet): nothing to remove", self.path)
        with self._locked():
            rows = self.manifest_rows()
            known = {r["run"] for r in rows}
            unknown = [r for r in dict.fromkeys(runs) if r not in known]
            if unknown:
                names = ", ".join(repr(r) for r in sorted(known)[:8]) + (", ..." if len(known) > 8 else "")
                raise TraceqError(f"run {unknown[0]!r} is not in the store (runs: {names or 'none'}); nothing was removed",
                                  self.path)
            gone = [r for r in rows if r["run"] in runs]
            files = [p for r in gone for p in listed_files(self.path, r["files"], self.manifest_path).values()]
            kept = [r for r in rows if r["run"] not in runs]
            tmp = self.path / f".{MANIFEST}.{uuid.uuid4().hex}.tmp"
            try:
                pq.write_table(pa.Table.from_pylist(kept, schema=schema.RUNS), tmp)
                os.replace(tmp, self.manifest_path)
            except OSError as exc:
                raise write_error(exc, self.path) from None
            finally:
                with contextlib.suppress(OSError):
                    tmp.unlink()
            for path in files:
                if inside(self.path, path):
                    with contextlib.suppress(OSError):
                        path.unlink()
                    with contextlib.suppress(OSError):   # the run's and rank's folders, once empty
                        path.parent.rmdir()
                        path.parent.parent.rmdir()
        counts: dict[str, int] = {}
        for r in gone:
            counts[r["run"]] = counts.get(r["run"], 0) + 1
        return counts

    def _collect_garbage(self, rows) -> None:
        """Delete table files the manifest does not reference (left by killed ingests), and
        the staging folders no live ingest owns (`staging.stale`)."""
        live = {str(p) for r in rows for p in listed_files(self.path, r["files"], self.manifest_path).values()}
        for table in schema.TABLES:
            tdir = self.path / table
            if not tdir.is_dir():
                continue
            for f in tdir.rglob("*.parquet"):
                if str(f) not in live:
                    with contextlib.suppress(OSError):
                        f.unlink()
        staging.remove_stale(self.path)
