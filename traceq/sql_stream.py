"""The results of `traceq sql`, written without holding them in memory (issue 51, items 4-5),
and the capped reads of the MCP `sql` tool.

    write(con, query, fmt, output)   table / json / csv to the terminal or to a file
    capped(con, query, ...)          at most N rows and B bytes, within a time limit, the cut said
    run_query(...)                   the guarded connection (traceq.sql_guard) and `write`

How a result travels:
- to a file (`-o FILE`), or as CSV/JSON to stdout: a result of up to SMALL_ROWS rows is
  fetched at once (DuckDB -> polars, as every analysis does; no pyarrow); a larger one is
  fetched again as a stream of Arrow record batches of BATCH_ROWS rows, each written and
  dropped before the next is read, so `SELECT * FROM range(100000000)` runs in bounded memory
  (benchmarks/bench_sql_stream.py measures it). The query then runs twice: once up to
  SMALL_ROWS + 1 rows, once in full.
- a file is written beside its final name and renamed onto it when complete: an error or an
  interrupt leaves the old file (or none), never a partial one.
- a terminal table shows the first TERMINAL_ROWS rows and says that more were cut.
- CSV cannot hold a nested value: lists, structs, maps and arrays are written as JSON text
  (`[1,2]`, `{"k":"v"}`), blobs as lowercase hex; JSON keeps nested values nested and writes
  blobs as hex too; unions are JSON text, bit strings and intervals DuckDB's text, in both
  (`printable`). DECIMAL sums become Int64 (whole) or Float64, as everywhere in traceq.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import threading

from .errors import TraceqError

SMALL_ROWS = 100_000     # a result up to this many rows is fetched at once (no pyarrow)
BATCH_ROWS = 65_536      # rows per Arrow record batch when streaming
TERMINAL_ROWS = 200      # rows a terminal table shows (the analyses' TABLE_ROWS)


# ---------------------------------------------------------------- values CSV and JSON can hold
NESTED = frozenset({"list", "struct", "map", "array"})   # JSON text in CSV, nested in JSON
AS_JSON = frozenset({"union"})                          # JSON text in both
AS_TEXT = frozenset({"bit", "interval", "varint", "bignum"})   # DuckDB's own text in both


def printable(rel, csv: bool):
    """`rel` with every column CSV (`csv`) or JSON can write, converted by DuckDB (a polars
    frame cannot hold every DuckDB type): nested values as JSON text (CSV), unions as JSON
    text, blobs as lowercase hex, bit strings and intervals as DuckDB's text. A name seen
    before gets `_1`, `_2`, ... (as DuckDB's CREATE TABLE AS names them; a frame holds each
    name once)."""
    exprs, changed, seen = [], False, set()
    for i, (name, typ) in enumerate(zip(rel.columns, rel.types), 1):
        if name in seen:
            name = next(f"{name}_{k}" for k in range(1, len(seen) + 2) if f"{name}_{k}" not in seen)
            changed = True
        seen.add(name)
        kind, ref = str(getattr(typ, "id", typ)).lower(), f"#{i}"
        if kind == "blob":
            ref = f"lower(hex({ref}))"
        elif kind in AS_JSON or (csv and kind in NESTED):
            ref = f"CAST(to_json({ref}) AS VARCHAR)"
        elif kind in AS_TEXT:
            ref = f"CAST({ref} AS VARCHAR)"
        changed |= ref != f"#{i}"
        exprs.append(f'{ref} AS "{name.replace(chr(34), chr(34) * 2)}"')
    return rel.project(", ".join(exprs)) if changed else rel


def _whole_numbers(df):
    """DECIMAL (DuckDB's sums of BIGINT) as Int64 when whole, else Float64, as fetch_pl does."""
    import polars as pl

    fix = [pl.col(c).cast(pl.Int64 if t.scale == 0 else pl.Float64)
           for c, t in df.schema.items() if isinstance(t, pl.Decimal)]
    return df.with_columns(fix) if fix else df


def _dumps(rows: list[dict]) -> str:
    """`rows` as `json.dumps(rows, indent=1)` prints them inside its list (no brackets): one
    encoder call per batch."""
    return json.dumps(rows, default=str, indent=1)[2:-2]


class _Writer:
    """CSV or JSON (one list of row objects, the same bytes as render.emit), one frame at a time."""

    def __init__(self, fmt: str, out) -> None:
        self.fmt, self.out, self.rows = fmt, out, 0

    def add(self, df) -> None:
        df = _whole_numbers(df)
        if self.fmt == "csv":
            if self.rows == 0 or df.height:
                self.out.write(df.write_csv(include_header=self.rows == 0))
        elif df.height:
            self.out.write(("[\n" if self.rows == 0 else ",\n") + _dumps(df.to_dicts()))
        self.rows += df.height

    def close(self) -> None:
        if self.fmt == "json":
            self.out.write("\n]\n" if self.rows else "[]\n")


# ---------------------------------------------------------------- fetching
def _frame(rel):
    """A relation's rows as a polars DataFrame (through Arrow streams where the CLI set them)."""
    import polars as pl

    from .store import exchange

    if exchange.ARROW_STREAMS:
        return pl.DataFrame(rel)
    return pl.from_arrow(rel.to_arrow_table())


def _batches(rel):
    """The relation's rows as polars frames of up to BATCH_ROWS rows, one at a time."""
    import polars as pl

    reader = rel.to_arrow_reader(BATCH_ROWS)
    for batch in reader:
        yield pl.from_arrow(batch)


def sql_error(exc: Exception, strict: bool = False) -> TraceqError:
    """A DuckDB error of a `traceq sql` statement as one line."""
    msg = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if strict and type(exc).__name__ == "PermissionException":
        return TraceqError(f"sql: refused (strict: the store's tables only, no file or path outside them): {msg}")
    if type(exc).__name__ == "InterruptException":
        return TraceqError("sql: stopped (interrupted or past the time limit)")
    return TraceqError(f"sql: {msg}")


def _relation(con, query: str, strict: bool):
    import duckdb

    try:
        return con.sql(query)
    except duckdb.Error as exc:
        raise sql_error(exc, strict) from None


# ---------------------------------------------------------------- writing
@contextlib.contextmanager
def atomic_file(path: str):
    """A text file that appears at `path` only when the block completes (temp file + rename)."""
    target = os.path.abspath(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(target) + ".", suffix=".part",
                                   dir=os.path.dirname(target))
    except OSError as exc:
        raise TraceqError(f"cannot write: {exc.strerror}", path) from None
    try:
        mask = os.umask(0)
        os.umask(mask)
        os.fchmod(fd, 0o666 & ~mask)
        with open(fd, "w", encoding="utf-8", newline="") as fh:
            yield fh
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise TraceqError(f"cannot write: {exc.strerror}", path) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _rows_to(rel, fmt: str, out, strict: bool) -> None:
    import duckdb

    w = _Writer(fmt, out)
    try:
        rel = printable(rel, fmt == "csv")
        head = _frame(rel.limit(SMALL_ROWS + 1))
        if head.height <= SMALL_ROWS:
            w.add(head)
        else:
            del head
            for df in _batches(rel):
                w.add(df)
    except duckdb.Error as exc:
        raise sql_error(exc, strict) from None
    w.close()


def _table_to(rel, out, strict: bool) -> None:
    import duckdb

    from .render import console, emit, print_text

    try:
        head = _whole_numbers(_frame(printable(rel, csv=True).limit(TERMINAL_ROWS + 1)))
    except duckdb.Error as exc:
        raise sql_error(exc, strict) from None
    emit(head.head(TERMINAL_ROWS), "table", file=out)
    if head.height > TERMINAL_ROWS:
        print_text(console(file=out), f"(the first {TERMINAL_ROWS} rows; the result has more: "
                                      "-f csv -o FILE or -f json -o FILE writes all of them)")


def write(con, query: str, fmt: str = "table", output: str | None = None, *, strict: bool = False,
          out=None) -> None:
    """Write the result of `query` on `con` (module docstring) to `output`, else to `out` (stdout)."""
    if fmt not in ("table", "json", "csv"):
        raise TraceqError(f"unknown --format {fmt!r} (choose table, json or csv)")
    rel = _relation(con, query, strict)
    if output is not None:
        with atomic_file(output) as fh:
            _emit(rel, fmt, fh, strict)
        return
    _emit(rel, fmt, out or sys.stdout, strict)


def _emit(rel, fmt: str, out, strict: bool) -> None:
    import polars as pl

    if rel is None:   # a statement without a result (--allow-writes: COPY, CREATE, ...)
        from .render import emit

        emit(pl.DataFrame(), fmt, file=out)
    elif fmt == "table":
        _table_to(rel, out, strict)
    else:
        _rows_to(rel, fmt, out, strict)


def run_query(query: str, store=None, fmt: str = "table", output: str | None = None, *,
              allow_writes: bool = False, strict: bool = False) -> None:
    """`traceq sql`: the guarded connection of traceq.sql_guard, then `write`."""
    from .sql_guard import connect
    from .store import Store

    st = store if isinstance(store, Store) else Store(store)
    write(connect(st, query, allow_writes=allow_writes, strict=strict), query, fmt, output, strict=strict)


# ---------------------------------------------------------------- capped reads (the MCP tool)
def capped(con, query: str, *, max_rows: int, max_bytes: int, seconds: float, strict: bool = True) -> dict:
    """At most `max_rows` rows and about `max_bytes` bytes of JSON of `query`'s result, read in
    batches; DuckDB is interrupted after `seconds`. The answer says where it was cut and why:
    {"columns", "types", "rows", "row_count", "cut"} (cut: None when every row is there)."""
    import duckdb

    timer = threading.Timer(seconds, con.interrupt)
    timer.start()
    rows: list[dict] = []
    size, cut = 0, None
    try:
        rel = _relation(con, query, strict)
        if rel is None:
            return {"columns": [], "types": [], "rows": [], "row_count": 0, "cut": None}
        columns, types = list(rel.columns), [str(t) for t in rel.types]
        for df in _batches(printable(rel, csv=False).limit(max_rows + 1)):
            for row in _whole_numbers(df).to_dicts():
                if len(rows) == max_rows:
                    cut = f"row cap: the first {max_rows:,} rows; the result has more"
                    break
                n = len(json.dumps(row, default=str, ensure_ascii=False))
                if size + n > max_bytes:
                    cut = f"byte cap: the first {len(rows):,} rows ({size:,} bytes of JSON); the next would pass {max_bytes:,}"
                    break
                rows.append(row)
                size += n
            if cut:
                break
    except duckdb.InterruptException:
        raise TraceqError(f"sql: stopped at the time limit ({seconds:g} s); nothing returned") from None
    except duckdb.Error as exc:
        raise sql_error(exc, strict) from None
    finally:
        timer.cancel()
    return {"columns": columns, "types": types, "rows": rows, "row_count": len(rows), "cut": cut}
