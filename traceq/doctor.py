"""`traceq doctor`: verify every file the store's manifest lists, and say what to re-ingest.

For each (run, rank) of `runs.parquet` and each of its table files: the file exists, is a
readable Parquet file, holds the number of rows the manifest recorded (n_gpu_ops, ...), and
its text columns are valid UTF-8 (DuckDB refuses to read a file that is not, so every query
of the store would fail). A damaged rank is repaired by re-ingesting its source file with
--force (the manifest keeps its path); a run with invalid text by `traceq rm RUN` and a new
ingest. An unreadable manifest cannot be repaired in place: re-ingest everything into a
fresh store. `stale_staging` lists what killed ingests left in the staging area.
"""
from __future__ import annotations

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from .store import Store, staging
from .store.layout import listed_files

PROBLEMS = {"run": pl.String, "rank": pl.Int64, "table": pl.String, "file": pl.String, "problem": pl.String,
            "reingest": pl.String}


def check_store(store: Store | str | None = None) -> tuple[pl.DataFrame, int]:
    """(problems, files checked): one row per damaged file with the command that repairs it.
    Raises TraceqError when the manifest itself is unreadable."""
    st = store if isinstance(store, Store) else Store(store)
    problems, checked = [], 0
    for row in st.manifest_rows():
        files = listed_files(st.path, row["files"], st.manifest_path)
        for table, path in sorted(files.items()):
            checked += 1
            problem = None
            repair = (f"traceq ingest {row['source_path']} --run {row['run']!r} --rank {row['rank']} --force")
            if not path.is_file():
                problem = "missing"
            else:
                try:
                    n = pq.read_metadata(path).num_rows
                    expected = row.get(f"n_{table}")
                    if expected is not None and n != expected:
                        problem = f"holds {n} rows, the manifest says {expected}"
                    else:
                        pq.read_table(path, columns=[]) if n == 0 else pq.ParquetFile(path).read_row_group(0)
                        bad = bad_text_column(path)
                        if bad:
                            problem = f"invalid UTF-8 in column {bad!r}"
                            repair = (f"traceq rm {row['run']!r}, then traceq ingest {row['source_path']} "
                                      f"--run {row['run']!r}")
                except Exception as exc:  # noqa: BLE001 - any read failure is damage to report
                    problem = f"unreadable Parquet ({str(exc).splitlines()[0][:120]})"
            if problem:
                problems.append({"run": row["run"], "rank": row["rank"], "table": table, "file": str(path),
                                 "problem": problem, "reingest": repair})
    return pl.DataFrame(problems, schema=PROBLEMS), checked


def bad_text_column(path) -> str | None:
    """The first text column of Parquet file `path` that holds invalid UTF-8, else None
    (the text columns of one row group at a time)."""
    f = pq.ParquetFile(path)
    text = [fld.name for fld in f.schema_arrow
            if pa.types.is_string(fld.type) or pa.types.is_large_string(fld.type)
            or (pa.types.is_dictionary(fld.type) and pa.types.is_string(fld.type.value_type))]
    if not text:
        return None
    for g in range(f.num_row_groups):
        group = f.read_row_group(g, columns=text)
        for name, col in zip(group.column_names, group.columns):
            for chunk in col.chunks:
                try:
                    (chunk.dictionary if pa.types.is_dictionary(chunk.type) else chunk).validate(full=True)
                except pa.ArrowInvalid:
                    return name
    return None


def stale_staging(store: Store | str | None = None) -> list[tuple[str, int, str]]:
    """(folder, bytes, why) of each staging folder no live ingest owns (the next ingest
    removes them)."""
    st = store if isinstance(store, Store) else Store(store)
    return [(str(d), staging.size_bytes(d), why) for d, why in staging.stale(st.path)]
