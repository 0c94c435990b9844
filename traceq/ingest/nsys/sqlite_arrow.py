"""Integer columns of big SQLite tables as Arrow tables, read in rowid-range chunks on several cores.

A query is cut into chunks of about CHUNK_ROWS rows by rowid range (`rowid BETWEEN a AND b`
is a B-tree seek, so a chunk costs what its rows cost). Each chunk is read by the ADBC SQLite
driver straight into Arrow (C, no Python object per value, no GIL) on its own connection, so
chunks are read side by side; `traceq.threads.ordered_map` hands the results back in order with a bounded
number in flight, so memory stays proportional to the chunk size, not to the table.

Values are integers or NULL. A chunk whose values ADBC cannot type as int64 (text, blobs,
reals: a hostile or damaged export) is read again by `sqlite3` with every value coerced
(`as_int`): integers as they are, reals that fit int64 truncated, anything else NULL.
"""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

CHUNK_ROWS = 1 << 16
_ROWID_NAMES = ("rowid", "_rowid_", "oid")


def as_int(expr: str) -> str:
    """An SQL expression as an integer whatever its storage class: integers as they are,
    reals that fit int64 truncated, anything else (text, blobs, 1e300) NULL."""
    return (f"(CASE typeof({expr}) WHEN 'integer' THEN {expr} WHEN 'real' THEN CASE WHEN abs({expr}) < 4.6e18 "
            f"THEN CAST({expr} AS INTEGER) END END)")


@dataclass(frozen=True)
class IntQuery:
    """SELECT <expr AS alias, ...> FROM table WHERE where: every column read as int64."""

    table: str
    select: tuple[tuple[str, str], ...]   # (alias, SQL expression)
    where: str = "1"

    def sql(self, rows: tuple[str, int, int] | None, coerce: bool = False) -> str:
        cols = ", ".join(f"{as_int(e) if coerce else e} AS {a}" for a, e in self.select)
        cond = self.where if rows is None else f"({self.where}) AND {rows[0]} BETWEEN {rows[1]} AND {rows[2]}"
        return f'SELECT {cols} FROM "{self.table}" WHERE {cond}'

    @property
    def schema(self) -> pa.Schema:
        return pa.schema([(a, pa.int64()) for a, _ in self.select])


def chunks(con: sqlite3.Connection, table: str, columns: set[str],
           chunk_rows: int | None = None) -> list[tuple[str, int, int] | None]:
    """Rowid ranges of about `chunk_rows` rows covering `table` ([] when it is empty; [None],
    one chunk of the whole table, when its rowids cannot be used)."""
    step = chunk_rows or CHUNK_ROWS
    taken = {c.lower() for c in columns}
    rowid = next((n for n in _ROWID_NAMES if n not in taken), None)
    if rowid is None:
        return [None]
    try:
        # two queries: SQLite answers a lone min() or max() from the B-tree edge, both at once by a scan
        (lo,), (hi,) = (con.execute(f'SELECT {f}({rowid}) FROM "{table}"').fetchone() for f in ("min", "max"))
    except sqlite3.Error:   # WITHOUT ROWID table, or a view
        return [None]
    if lo is None:
        return []
    return [(rowid, a, min(a + step - 1, hi)) for a in range(lo, hi + 1, step)]


def read_chunk(path: Path, query: IntQuery, rows: tuple[str, int, int] | None) -> pa.RecordBatch:
    """One chunk of `query` as one record batch of int64 columns (module doc)."""
    table = _adbc(path, query.sql(rows), rows)
    if table is None:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            values = con.execute(query.sql(rows, coerce=True)).fetchall()
        finally:
            con.close()
        table = pa.Table.from_pylist([dict(zip(query.schema.names, v)) for v in values], schema=query.schema)
    table = table.combine_chunks()
    return table.to_batches()[0] if table.num_rows else pa.RecordBatch.from_pylist([], schema=query.schema)


def _adbc(path: Path, sql: str, rows: tuple[str, int, int] | None) -> pa.Table | None:
    """The query's result via ADBC when every column comes back int64 (or all NULL), else None."""
    try:
        import adbc_driver_sqlite.dbapi as adbc

        with adbc.connect(f"{path.resolve().as_uri()}?mode=ro") as acon, acon.cursor() as cur:
            if rows is not None:   # the chunk in one batch
                cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(rows[2] - rows[1] + 1)})
            cur.execute(sql)
            table = cur.fetch_arrow_table()
    except Exception:  # noqa: BLE001 - ImportError, or values ADBC cannot type: the caller coerces
        return None
    if not all(pa.types.is_int64(t) or pa.types.is_null(t) for t in table.schema.types):
        return None
    return table.cast(pa.schema([(n, pa.int64()) for n in table.schema.names]))


