"""The analyses' SQL, one documented file per analysis (see each file's header comment)."""
from __future__ import annotations

from functools import cache
from pathlib import Path

_DIR = Path(__file__).parent


@cache
def load(name: str) -> str:
    """Text of `traceq/queries/<name>.sql`."""
    return (_DIR / f"{name}.sql").read_text()


def install_macros(con) -> None:
    """Define the shared macros (intervals.sql, framework_macros.sql) on a DuckDB connection
    (idempotent)."""
    con.execute(load("intervals"))
    con.execute(load("framework_macros"))


@cache
def output_columns(name: str) -> tuple[tuple[str, str], ...]:
    """(column, meaning) pairs from the `-- Output columns:` block of a query's header comment."""
    import re

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
