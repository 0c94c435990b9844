"""What `traceq sql`, the escape hatch of DuckDB SQL over the store, may run.

By default only queries: every statement must be a SELECT (WITH, FROM-first, VALUES,
DESCRIBE, SHOW, SUMMARIZE are SELECTs to DuckDB) or an EXPLAIN of one. Anything else —
COPY … TO, CREATE, INSERT, ATTACH, EXPORT, INSTALL/LOAD, SET, PRAGMA, CALL — is refused
with one line naming it.

`allow_writes=True` runs any statement, except one that names a path inside the store:
no string literal of a statement other than a query may resolve (after `~` expansion,
relative to the working directory, symlinks followed) to the store folder or below it.
This is deliberately coarse: the store is only ever written by `traceq ingest`.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from .errors import TraceqError

_EXPLAIN = re.compile(r"^\s*EXPLAIN(\s+ANALY[SZ]E)?\s+", re.I)
_LITERAL = re.compile(r"'((?:[^']|'')*)'")


def _statements(con, query: str):
    import duckdb

    try:
        return con.extract_statements(query)
    except duckdb.Error as exc:
        raise TraceqError(f"sql: {str(exc).strip().splitlines()[0]}") from None


def _kind(stmt) -> str:
    return stmt.type.name if hasattr(stmt.type, "name") else str(stmt.type).rsplit(".", 1)[-1]


def _first_word(text: str) -> str:
    m = re.match(r"\s*(\w+)", text)
    return m.group(1).upper() if m else "?"


def _is_query(con, stmt) -> bool:
    kind = _kind(stmt)
    if kind == "SELECT":
        return True
    if kind == "EXPLAIN":   # EXPLAIN ANALYZE executes its statement: look inside
        inner = _EXPLAIN.sub("", stmt.query, count=1)
        return inner != stmt.query and all(_kind(s) == "SELECT" for s in _statements(con, inner))
    return False


def _inside(path: str, store: Path) -> bool:
    if not path or "://" in path:
        return False
    p = Path(os.path.expanduser(path))
    p = (Path.cwd() / p) if not p.is_absolute() else p
    root = store.resolve()
    target = p.resolve()
    return target == root or root in target.parents


def check(con, query: str, store: Path, *, allow_writes: bool = False) -> None:
    """Raise TraceqError unless `query` may run (see the module docstring)."""
    for stmt in _statements(con, query):
        if _is_query(con, stmt):
            continue
        word = _first_word(stmt.query)
        if not allow_writes:
            raise TraceqError(f"sql: {word} refused: `traceq sql` runs queries only (SELECT); "
                              "--allow-writes permits statements that write outside the store")
        for lit in _LITERAL.findall(stmt.query):
            lit = lit.replace("''", "'")
            if _inside(lit, store):
                raise TraceqError(f"sql: {word} refused: {lit!r} is inside the store {store}; "
                                  "only `traceq ingest` writes there")
