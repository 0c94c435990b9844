"""Every DuckDB connection traceq opens: `connect()` (settings in one place) and `lock_down`
(what `traceq sql` adds: no file access but the paths it is given, configuration locked).

Settings of every connection:
- `autoinstall_known_extensions = false`: a query never downloads an extension (a `read_csv`
  of an https URL would otherwise install httpfs into ~/.duckdb; issue 36 item 16).
- `memory_limit`: TRACEQ_MEMORY_LIMIT when set (DuckDB's syntax: `4GB`, `800MiB`), else half
  of the process's address-space limit (`ulimit -v`) when it has one, else DuckDB's default
  (80% of the memory DuckDB sees, cgroup limits included).
- `temp_directory`: TRACEQ_TEMP_DIRECTORY when set, else a folder of this process under the
  system temporary directory (`<tmp>/traceq-duckdb-<pid>-<n>`): what exceeds the memory limit
  spills there instead of failing. DuckDB creates it only when it spills and removes its files
  when the connection closes. Never inside the store (`traceq sql` must not write there).
"""
from __future__ import annotations

import itertools
import os
import resource
import tempfile

MEMORY_ENV = "TRACEQ_MEMORY_LIMIT"
TEMP_ENV = "TRACEQ_TEMP_DIRECTORY"
_count = itertools.count()


def memory_limit() -> str | None:
    """The memory_limit setting of traceq's connections (see the module docstring), or None
    for DuckDB's default."""
    env = os.environ.get(MEMORY_ENV, "").strip()
    if env:
        return env
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft not in (resource.RLIM_INFINITY, -1) and soft > 0:
        return f"{max(soft // 2, 64 << 20) >> 20}MiB"
    return None


def temp_directory() -> str:
    env = os.environ.get(TEMP_ENV, "").strip()
    if env:
        return env
    return os.path.join(tempfile.gettempdir(), f"traceq-duckdb-{os.getpid()}-{next(_count)}")


def connect():
    """A new in-memory DuckDB connection with traceq's settings (module docstring)."""
    import duckdb

    from ..errors import TraceqError

    con = duckdb.connect(":memory:")
    con.execute("SET autoinstall_known_extensions = false")
    limit = memory_limit()
    try:
        if limit:
            con.execute("SET memory_limit = ?", [limit])
    except duckdb.Error as exc:
        raise TraceqError(f"{MEMORY_ENV}={limit!r}: {str(exc).splitlines()[0]}") from None
    con.execute("SET temp_directory = ?", [temp_directory()])
    return con


def lock_down(con, files: list[str], directories: list[str]) -> None:
    """Take file access away from `con` except to these files and folders (read and write:
    DuckDB does not tell them apart), no extension loading or installing, then lock the
    configuration so no statement can undo it (SET of anything is refused from then on)."""
    con.execute("SET autoload_known_extensions = false")
    con.execute("SET allow_community_extensions = false")
    con.execute("SET allowed_paths = ?", [sorted(set(files))])
    con.execute("SET allowed_directories = ?", [sorted(set(directories))])
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
