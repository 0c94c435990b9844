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
    """Define the shared interval macros (intervals.sql) on a DuckDB connection (idempotent)."""
    con.execute(load("intervals"))
