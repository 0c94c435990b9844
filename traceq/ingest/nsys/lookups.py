"""The export's lookup tables (StringIds, ENUM_*, TARGET_INFO_GPU) read as one row per id.

nsys writes each id once (`StringIds.id` is the table's primary key), but a damaged or edited
export can repeat one. Joined as they are, a repeated id multiplies every row that refers to it
(an NVTX range named through a repeated StringIds id became two ranges). So each id keeps its
first row, in rowid order (the order SQLite stored them: deterministic), and the repeats are
counted (`Repeats`) for the ingest's warning. Text columns are decoded by the connection's
text factory, with replacement for invalid UTF-8 (`reader._connect`).
"""
from __future__ import annotations

import sqlite3

import polars as pl


class Repeats:
    """How many rows of each lookup table repeated an id already read (dropped)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def add(self, table: str, n: int) -> None:
        if n:
            self.counts[table] = self.counts.get(table, 0) + n

    def warning(self) -> str | None:
        """The warning naming what was dropped (None: nothing), then forgets it."""
        if not self.counts:
            return None
        said = ", ".join(f"{t} {n}" for t, n in sorted(self.counts.items()))
        self.counts = {}
        return f"repeated ids in lookup tables, the first row of each id kept (rows dropped: {said})"


def _ordered(con: sqlite3.Connection, query: str) -> list[tuple]:
    """The rows of `query` in rowid order (as stored when the table has no rowid)."""
    try:
        return con.execute(query + " ORDER BY rowid").fetchall()
    except sqlite3.OperationalError:      # a WITHOUT ROWID table: its key is unique anyway
        return con.execute(query).fetchall()


def first_rows(con: sqlite3.Connection, table: str, select: str, repeats: Repeats, where: str = "") -> list[tuple]:
    """`SELECT select FROM table [WHERE where]`: the first row of each value of the first
    column (a NULL key kept as it is); the rows dropped are counted in `repeats`."""
    rows = _ordered(con, f'SELECT {select} FROM "{table}"' + (f" WHERE {where}" if where else ""))
    seen: set = set()
    out = []
    for row in rows:
        if row[0] is not None and row[0] in seen:
            continue
        seen.add(row[0])
        out.append(row)
    repeats.add(table, len(rows) - len(out))
    return out


def first_frame(con: sqlite3.Connection, table: str, select: str, schema: dict, repeats: Repeats) -> pl.DataFrame:
    """As `first_rows`, as a polars frame of `schema` (large tables: StringIds)."""
    df = pl.DataFrame(_ordered(con, f'SELECT {select} FROM "{table}"'), schema=schema, orient="row")
    key = pl.col(next(iter(schema)))
    ids = df.select(n=key.count(), distinct=key.drop_nulls().n_unique()).row(0)
    if ids[0] == ids[1]:                   # no repeats (every real export): the rows as read
        return df
    at = pl.col("row_")
    kept = df.with_row_index("row_").filter(key.is_null() | (at == at.min().over(key))).drop("row_")
    repeats.add(table, df.height - kept.height)
    return kept
