"""Text that reaches the store: valid UTF-8 and JSON of bounded depth.

Parquet string columns must hold valid UTF-8 (DuckDB refuses the whole file otherwise: every
analysis of the run fails), and Python's json recurses once per nesting level (100 k levels:
RecursionError). The readers of small JSON/text formats use these helpers at their edge:

    repair_utf8(data)       bytes with invalid UTF-8 replaced by U+FFFD, and how many
    json_depth(line)        the nesting depth of JSON text, strings ignored, without parsing
    loads_capped(line)      json.loads after the depth check (TooDeep beyond MAX_DEPTH)
    clean_text(s)           a str with lone surrogates (JSON "\\ud800" escapes) replaced by U+FFFD
    check_utf8(table, ...)  the last guard before a table is written: its strings are UTF-8
"""
from __future__ import annotations

import json
import re

import numpy as np

MAX_DEPTH = 64   # JSON nesting these formats never need (a timer record is flat)
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_REPLACEMENT = "\ufffd".encode()


class TooDeep(ValueError):
    """JSON nested deeper than MAX_DEPTH levels."""


def repair_utf8(data: bytes) -> tuple[bytes, int]:
    """`data` with each invalid UTF-8 sequence replaced by U+FFFD, and the number replaced."""
    try:
        data.decode("utf-8")
        return data, 0
    except UnicodeDecodeError:
        fixed = data.decode("utf-8", "replace")
        n = fixed.count("\ufffd") - data.count(_REPLACEMENT)
        return fixed.encode("utf-8"), n


def clean_text(s: str) -> str:
    """`s` with lone surrogates (which json.loads makes of "\\ud800" escapes and UTF-8 cannot
    hold) replaced by U+FFFD."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def json_depth(line: bytes) -> int:
    """The deepest nesting of [ and { in JSON text (inside strings ignored); linear time. An
    unclosed string counts its brackets too (the text is not valid JSON anyway)."""
    if b"[" not in line and b"{" not in line:
        return 0
    bare = _STRING.sub(b'""', line)
    a = np.frombuffer(bare, np.uint8)
    step = (np.isin(a, (ord("["), ord("{"))).astype(np.int32)
            - np.isin(a, (ord("]"), ord("}"))).astype(np.int32))
    return int(np.cumsum(step).max(initial=0))


def loads_capped(line: bytes | str):
    """json.loads, refusing (TooDeep) text nested deeper than MAX_DEPTH before decoding it."""
    raw = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else line
    if json_depth(raw) > MAX_DEPTH:
        raise TooDeep(f"nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(line)
    except RecursionError:   # cannot happen below MAX_DEPTH; kept as the last guard
        raise TooDeep(f"nested deeper than {MAX_DEPTH} levels") from None


def check_utf8(table, what: str) -> None:
    """Assert that every string column of the Arrow table holds valid UTF-8 (the readers repair
    their input first: a failure here is a reader bug, never written to the store)."""
    import pyarrow as pa

    for name, col in zip(table.column_names, table.columns):
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            try:
                col.validate(full=True)
            except pa.ArrowInvalid as exc:
                raise AssertionError(f"{what}: column {name} is not valid UTF-8 ({exc})") from None
