"""The Parquet store: a folder of Parquet files plus a `runs` manifest.

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

Modules: `layout` (paths and errors, the check that a manifest path stays in the store),
`writer` (one table file), `staging` (the staging area, `RankData`, `Staged`, owners and
stale folders), `manifest` (`Store`: the manifest, the commit, `remove`), `read` (DuckDB
views over the files), `duck` (every DuckDB connection's settings, `traceq sql`'s lock),
`exchange` (DuckDB <-> polars: `fetch_pl`, `register_pl`).
Importing the package loads no data library: DuckDB, pyarrow and polars are imported by the
functions that use them.
"""
from __future__ import annotations

from .exchange import fetch_pl, register_pl
from .layout import DEFAULT_STORE, MANIFEST, resolve_store_path, run_dir
from .manifest import Store
from .read import table_view
from .staging import RankData, Staged
from .writer import TableWriter

__all__ = ["DEFAULT_STORE", "MANIFEST", "RankData", "Staged", "Store", "TableWriter", "fetch_pl", "register_pl",
           "resolve_store_path", "run_dir", "table_view"]
