"""The analyses' SQL: one documented `.sql` file per analysis (its header comment states the
definition, the parameters and the output columns with units), the shared macros, and the one
runner every analysis uses to execute them.

    load(name)                 the text of traceq/queries/<name>.sql
    install_macros(con)        the shared macros (intervals.sql, framework_macros.sql, the
                               host-API classes of traceq.rules.host_api, the collective types
                               of traceq.rules.collective_type)
    run_script(con, name, p)   every statement of a file, each bound to the $parameters it names;
                               the last statement's result as a polars DataFrame
    output_columns(name)       (column, meaning) pairs of a file's `-- Output columns:` block
"""
from __future__ import annotations

import re
from functools import cache
from pathlib import Path

_DIR = Path(__file__).parent


@cache
def load(name: str) -> str:
    """Text of `traceq/queries/<name>.sql`."""
    return (_DIR / f"{name}.sql").read_text()


def install_macros(con) -> None:
    """Define the shared macros on a DuckDB connection (idempotent)."""
    from ..rules.collective_type import macro as collective_macro
    from ..rules.host_api import macros

    con.execute(load("intervals"))
    con.execute(load("framework_macros"))
    con.execute(macros())
    con.execute(collective_macro())


def run_script(con, name_or_sql: str, params: dict | None = None):
    """Run every statement of `traceq/queries/<name>.sql` (or of the SQL text given) on `con`;
    return the result of the last one as a polars DataFrame. A statement gets only the
    `$parameters` it names (outside comments)."""
    import polars as pl

    from ..store import fetch_pl

    sql = load(name_or_sql) if re.fullmatch(r"\w+", name_or_sql) else name_or_sql
    params = params or {}
    statements = con.extract_statements(sql)
    result = pl.DataFrame()
    for i, stmt in enumerate(statements):
        code = re.sub(r"--[^\n]*", "", stmt.query)
        used = {k: v for k, v in params.items() if re.search(r"\$" + k + r"\b", code)}
        if i == len(statements) - 1:
            result = fetch_pl(con, stmt.query, used)
        else:
            con.execute(stmt.query, used or None)
    return result


@cache
def output_columns(name: str) -> tuple[tuple[str, str], ...]:
    """(column, meaning) pairs from the `-- Output columns:` block of a query's header comment."""
    out, inside = [], False
    for line in load(name).splitlines():
        if not line.startswith("--"):
            if inside:
                break
            continue
        text = line[2:]
        if text.strip().lower().startswith("output columns"):
            inside = True
            continue
        if inside:
            m = re.match(r"\s{1,4}(\w+)\s{2,}(.*\S)", text)
            if m:
                out.append((m.group(1), m.group(2)))
            elif out and text.strip() and text.startswith("      "):   # continuation line
                col, meaning = out[-1]
                out[-1] = (col, f"{meaning} {text.strip()}")
            elif not text.strip():
                break
    return tuple(out)
