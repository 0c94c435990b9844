"""What `traceq sql`, the escape hatch of DuckDB SQL over the store, may run, and the DuckDB
connection it runs on (`connect`).

The guard is DuckDB's own, not a reading of the statement's text: the connection's file
access is taken away (`enable_external_access = false`) except for the paths the statement
names in string literals (`'...'` or `$$...$$`; a glob: the folder above its first wildcard, or the files
it matches outside the store when that folder holds the store) that resolve outside the store (after `~`,
`..` and symlinks), extension installing and loading are off, and the configuration is
locked (no SET, no PRAGMA that changes a setting). A path DuckDB would read or write that
the statement does not name plainly, or one inside the store, fails with DuckDB's permission
error. No network. DuckDB cannot tell reading a file from writing it, so the store's files
are open to it only where nothing can write: for queries only, DuckDB reads the files the
manifest lists (those exact paths); with writes allowed, it reads the store through Arrow
datasets opened by traceq and cannot open a store file at all.

By default only queries run: every statement must be a SELECT (WITH, FROM-first, VALUES,
DESCRIBE, SHOW, SUMMARIZE, PIVOT, UNPIVOT are queries to DuckDB) or an EXPLAIN of one;
anything else is refused with one line naming it. `allow_writes=True` runs any statement
within the lock: COPY ... TO, EXPORT DATABASE, ATTACH (and writing into the attached file),
CREATE of in-memory tables, under the named paths outside the store only.

`strict=True` (`traceq sql --strict`, and every query of `traceq mcp`): queries only, and
DuckDB reads the store's files and nothing else, whatever the statement names: no path
literal opens a file (`read_csv('/etc/passwd')`, `read_text('/proc/self/environ')`, `glob('/*')`,
ATTACH, COPY fail with DuckDB's permission error), no extension loads, no setting changes.
"""
from __future__ import annotations

import glob
import os
import re
from pathlib import Path

from .errors import TraceqError

_EXPLAIN = re.compile(r"^\s*EXPLAIN(\s+ANALY[SZ]E)?\s+", re.I)
_LITERAL = re.compile(r"'((?:[^']|'')*)'|\$\$(.*?)\$\$", re.S)
_GLOB = re.compile(r"[*?\[{]")
# a MULTI statement is DuckDB's expansion of a PIVOT (an enum of the pivot values, then the query)
_QUERY_WORDS = ("SELECT", "WITH", "FROM", "PIVOT", "PIVOT_WIDER", "UNPIVOT", "PIVOT_LONGER", "VALUES", "(")


def _statements(con, query: str):
    import duckdb

    try:
        return con.extract_statements(query)
    except duckdb.Error as exc:
        raise TraceqError(f"sql: {str(exc).strip().splitlines()[0]}") from None


def _kind(stmt) -> str:
    return stmt.type.name if hasattr(stmt.type, "name") else str(stmt.type).rsplit(".", 1)[-1]


def _first_word(text: str) -> str:
    m = re.match(r"\s*(\w+|\()", text)
    return m.group(1).upper() if m else "?"


def _is_query(con, stmt) -> bool:
    kind = _kind(stmt)
    if kind == "SELECT":
        return True
    if kind == "MULTI":
        return _first_word(stmt.query) in _QUERY_WORDS
    if kind == "EXPLAIN":   # EXPLAIN ANALYZE executes its statement: look inside
        inner = _EXPLAIN.sub("", stmt.query, count=1)
        return inner != stmt.query and all(_is_query(con, s) for s in _statements(con, inner))
    return False


def _target(path: str) -> Path | None:
    """The absolute path a literal names (file:// stripped, ~ expanded), None for a URL."""
    if path.startswith("file://"):
        path = path[len("file://"):]
    if not path or "://" in path or "\0" in path:
        return None
    p = Path(os.path.expanduser(path))
    return p if p.is_absolute() else Path.cwd() / p


def _inside(p: Path, store: Path) -> bool:
    root = store.resolve()
    for t in {Path(os.path.abspath(p)), p.resolve()}:
        if t == root or root in t.parents:
            return True
    return False


def _contains_store(p: Path, store: Path) -> bool:
    root = store.resolve()
    return any(t == root or t in root.parents or t in Path(os.path.abspath(store)).parents
               for t in {Path(os.path.abspath(p)), p.resolve()})


def named_paths(query: str, store: Path) -> tuple[list[str], list[str], list[str]]:
    """(files, folders, inside): what the literals of `query` name outside the store (with
    the files DuckDB writes beside one: .wal, .tmp, tmp_<name>), and the literals that name
    a path inside it."""
    files: list[str] = []
    dirs: list[str] = []
    inside: list[str] = []
    for quoted, dollar in _LITERAL.findall(query):
        lit = quoted.replace("''", "'") if quoted else dollar
        p = _target(lit)
        if p is None:
            continue
        if _inside(p, store):
            inside.append(lit)
            continue
        if _GLOB.search(str(p)):   # a pattern: the folder above its first wildcard, or if that
            parts = p.parts       # folder holds the store, the files it matches now outside it
            k = next(i for i, part in enumerate(parts) if _GLOB.search(part))
            matches = [m for m in glob.glob(str(p), recursive=True) if not _inside(Path(m), store)]
            pattern = p
            p = Path(*parts[:k])
            if _contains_store(p, store):   # DuckDB checks the pattern, then each file it matches
                files += [f for m in matches for f in {m, os.path.abspath(m)}] + [lit, str(pattern)]
                continue
        if _contains_store(p, store):
            continue
        abs_p = os.path.abspath(p)
        for name in {lit, str(p), abs_p}:
            files += [name, name + ".wal", name + ".tmp", os.path.join(os.path.dirname(name), "tmp_" + os.path.basename(name))]
            dirs.append(name)
    return files, dirs, inside


def check(con, query: str, store: Path, *, allow_writes: bool = False, strict: bool = False) -> None:
    """Raise TraceqError unless `query` may run: only queries unless `allow_writes`; never a
    statement other than a query that names a path inside the store (said early, in one line;
    DuckDB's lock refuses it anyway)."""
    for stmt in _statements(con, query):
        if _is_query(con, stmt):
            continue
        word = _first_word(stmt.query)
        if strict:
            raise TraceqError(f"sql: {word} refused: strict mode runs queries only (SELECT) over the store's tables")
        if not allow_writes:
            raise TraceqError(f"sql: {word} refused: `traceq sql` runs queries only (SELECT); "
                              "--allow-writes permits statements that write outside the store")
        inside = named_paths(stmt.query, store)[2]
        if inside:
            raise TraceqError(f"sql: {word} refused: {inside[0]!r} is inside the store {store}; "
                              "only `traceq ingest` writes there")


def connect(st, query: str, *, allow_writes: bool = False, strict: bool = False):
    """The connection `traceq sql` runs `query` on, for store `st` (a traceq.store.Store):
    the store's views over Arrow datasets, then `check`, then file access locked to the paths
    the query names outside the store, or with `strict` to the store's files alone (module
    docstring)."""
    from .store import duck, read

    if strict and allow_writes:
        raise TraceqError("sql: --strict reads the store's tables only; it cannot be combined with --allow-writes")
    if allow_writes:   # DuckDB must not be able to open a store file: a COPY could overwrite it
        con = duck.connect()
        read.arrow_views(con, st.path)
        readable = []
    else:              # queries only: DuckDB reads the store's files itself (no pyarrow to import)
        con = st.connect()
        readable = [g for files in read.store_files(con, st.path).values() for f in files
                    for g in {f, read.file_pattern(f)}]
    check(con, query, st.path, allow_writes=allow_writes, strict=strict)
    files, dirs, _ = ([], [], []) if strict else named_paths(query, st.path)
    duck.lock_down(con, files + readable, dirs)
    return con
