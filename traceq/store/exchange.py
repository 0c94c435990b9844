"""Query results between DuckDB and polars: `fetch_pl` (SQL -> polars DataFrame) and
`register_pl` (polars DataFrame -> a name DuckDB can query).

The data go through pyarrow (a pyarrow Table) or, where `ARROW_STREAMS` is set, through the
Arrow PyCapsule stream interface directly (the same columns and values, without importing
pyarrow and numpy: ~0.15 s of a command's start-up). The command line sets it
(traceq.cli.main); it is off by default because DuckDB 2.0 then reports its objects as leaked
on stderr when the interpreter shuts down, which the CLI avoids by ending the process with
os._exit once its output is flushed (traceq.cli.main). Set it on this module
(`traceq.store.exchange.ARROW_STREAMS`): the functions read it here.
"""
from __future__ import annotations

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
