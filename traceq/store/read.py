"""Reading a store with DuckDB: the manifest as the temporary table `runs` of a connection, and
one view per canonical table (schema.TABLES) over the Parquet files the manifest lists.

Only DuckDB is needed here (no pyarrow, no numpy). A file written before a column was added to
its table reads as NULL in that column.
"""
from __future__ import annotations

from pathlib import Path

from .. import schema
from .layout import MANIFEST, check_manifest_columns, listed_files, manifest_present, unreadable_manifest

# DuckDB's name of each Arrow type name that schema's columns use
DUCK_TYPES = {"string": "VARCHAR", "int64": "BIGINT", "int32": "INTEGER", "bool": "BOOLEAN", "double": "DOUBLE",
              "timestamp[us]": "TIMESTAMP"}


def sql_str(s: str) -> str:
    """`s` as an SQL string literal."""
    return "'" + s.replace("'", "''") + "'"


def file_pattern(path: str) -> str:
    """Path `path` as DuckDB's file readers must be given it to read that file and no other:
    DuckDB globs a path with * ? or [ (a store `st[1]` would read a store `st1`), so each of
    those characters becomes a class that matches only itself ([*], [?], [[])."""
    if any(c in path for c in "*?["):
        path = "".join(f"[{c}]" if c in "*?[" else c for c in path)
    return path


def file_literal(path: str) -> str:
    """`file_pattern(path)` as an SQL string literal."""
    return sql_str(file_pattern(path))


def connect(root: Path, runs: list[str] | None = None, only: tuple | None = None):
    """A DuckDB connection to the store in folder `root` with the views runs, gpu_ops, host_ops,
    regions, timer_stats, metrics, memory_events (`runs`, `only`: as for `table_views`)."""
    from .duck import connect as duck_connect

    con = duck_connect()
    # `runs` is read once (a temp table): the table views below and every query see the same
    # manifest even while an ingest replaces it
    con.execute("SET enable_external_file_cache = false")
    if not read_manifest(con, root / MANIFEST):
        empty_view(con, "runs", schema.RUNS_COLUMNS)
    table_views(con, root, runs, only)
    return con


def read_manifest(con, manifest_path: Path) -> bool:
    """TEMP TABLE runs on `con`: the manifest, read by DuckDB (no pyarrow). False: no manifest."""
    if not manifest_present(manifest_path):
        return False
    try:
        source = f"read_parquet({file_literal(str(manifest_path))}, hive_partitioning = false)"
        names = [d[0] for d in con.execute(f"SELECT * FROM {source} LIMIT 0").description]
    except Exception as exc:  # noqa: BLE001 - corrupt manifest: say so, do not guess
        raise unreadable_manifest(exc, manifest_path) from None
    check_manifest_columns(names, manifest_path)
    try:
        con.execute(f"CREATE TEMP TABLE runs AS SELECT *{missing_nulls(con, source, schema.RUNS_COLUMNS)} FROM {source}")
    except Exception as exc:  # noqa: BLE001 - corrupt manifest: say so, do not guess
        raise unreadable_manifest(exc, manifest_path) from None
    return True


def table_views(con, root: Path, runs: list[str] | None = None, only: tuple | None = None) -> None:
    """(Re)create the table views of a `connect` connection over the files its `runs` lists.

    `runs`: the views read only these runs' files (faster on a store of many runs; the `runs`
    table still lists every run). `only=(run, rank)`: that rank's files alone;
    `only=(run, (rank, ...))`: those ranks' files (a batch of ranks of the per-rank map). A connection
    opened with `runs=[]` to pick the run gets the run's table data this way without reading
    the manifest again."""
    for table, files in store_files(con, root, runs, only).items():
        table_view(con, table, files)


def store_files(con, root: Path, runs: list[str] | None = None, only: tuple | None = None) -> dict[str, list[str]]:
    """{table: [path, ...]} of the files the `runs` table of `con` lists (`runs`, `only`: as for
    `table_views`); every path checked to stay inside the store (`listed_files`)."""
    rows = [(run, rank, listed_files(root, files))
            for run, rank, files in con.execute("SELECT run, rank, files FROM runs").fetchall()]
    if only is not None:
        wanted = {(only[0], r) for r in (only[1] if isinstance(only[1], (tuple, list)) else (only[1],))}
    out = {}
    for table in schema.TABLE_COLUMNS:
        files = []
        for run, rank, tables in rows:
            if runs is not None and run not in runs:
                continue
            if only is not None and (run, rank) not in wanted:
                continue
            path = tables.get(table)
            if path is not None:
                files.append(str(path))
        out[table] = files
    return out


def arrow_views(con, root: Path) -> None:
    """The views of `connect` on `con` (a fresh connection), the table views over Arrow datasets
    opened here instead of DuckDB's read_parquet: DuckDB then needs no access to the store's
    folder (traceq.sql_guard locks it out). A file without a column reads as NULL in it."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    if not read_manifest(con, root / MANIFEST):
        empty_view(con, "runs", schema.RUNS_COLUMNS)
    for table, files in store_files(con, root).items():
        if not files:
            empty_view(con, table, [("run", schema.STR), ("rank", schema.I32), *schema.TABLE_COLUMNS[table]])
            continue
        full = pa.schema([("run", pa.string()), ("rank", pa.int32()), *schema.table_schema(table)])
        con.register(f"traceq_{table}_files", ds.dataset(files, schema=full, format="parquet"))
        con.execute(f"CREATE OR REPLACE VIEW {table} AS SELECT * FROM traceq_{table}_files")


def table_view(con, table: str, files: list[str]) -> None:
    """CREATE VIEW `table` (a table of schema.TABLES) over these Parquet files of it. A file
    written before a column was added reads as NULL in that column."""
    columns = schema.TABLE_COLUMNS[table]
    if not files:
        empty_view(con, table, [("run", schema.STR), ("rank", schema.I32), *columns])
        return
    listing = "[" + ", ".join(file_literal(f) for f in files) + "]"
    source = f"read_parquet({listing}, union_by_name = true, hive_partitioning = false)"
    con.execute(f"CREATE OR REPLACE VIEW {table} AS SELECT *{missing_nulls(con, source, columns)} FROM {source}")


def missing_nulls(con, source: str, columns: list[tuple[str, str]]) -> str:
    """`, NULL::T AS c` for each column that `source` lacks (written before it was added)."""
    have = {r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
    return "".join(f', NULL::{DUCK_TYPES.get(t, "VARCHAR")} AS "{name}"' for name, t in columns if name not in have)


def empty_view(con, name: str, columns: list[tuple[str, str]]) -> None:
    """A view with these (column, Arrow type name) columns and no rows."""
    cols = ", ".join(f'NULL::{DUCK_TYPES[t]} AS "{c}"' for c, t in columns)
    con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT {cols} WHERE false")
