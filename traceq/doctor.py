"""`traceq doctor`: verify every file the store's manifest lists, and say what to re-ingest.

For each (run, rank) of `runs.parquet` and each of its table files: the file exists, is a
readable Parquet file, and holds the number of rows the manifest recorded (n_gpu_ops, ...).
A damaged rank is repaired by re-ingesting its source file with --force (the manifest keeps
its path). An unreadable manifest cannot be repaired in place: re-ingest everything into a
fresh store.
"""
from __future__ import annotations

import json

import polars as pl
import pyarrow.parquet as pq

from .store import Store

PROBLEMS = {"run": pl.String, "rank": pl.Int64, "table": pl.String, "file": pl.String, "problem": pl.String,
            "reingest": pl.String}


def check_store(store: Store | str | None = None) -> tuple[pl.DataFrame, int]:
    """(problems, files checked): one row per damaged file with the command that repairs it.
    Raises TraceqError when the manifest itself is unreadable."""
    st = store if isinstance(store, Store) else Store(store)
    problems, checked = [], 0
    for row in st.manifest_rows():
        files = json.loads(row["files"] or "{}")
        for table, rel in sorted(files.items()):
            checked += 1
            path = st.path / rel
            problem = None
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
                except Exception as exc:  # noqa: BLE001 - any read failure is damage to report
                    problem = f"unreadable Parquet ({str(exc).splitlines()[0][:120]})"
            if problem:
                problems.append({"run": row["run"], "rank": row["rank"], "table": table, "file": str(path),
                                 "problem": problem,
                                 "reingest": f"traceq ingest {row['source_path']} --run {row['run']!r} "
                                             f"--rank {row['rank']} --force"})
    return pl.DataFrame(problems, schema=PROBLEMS), checked
