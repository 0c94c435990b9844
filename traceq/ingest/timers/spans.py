"""Span logs written by other tools: CSV (with a header), a JSON array of objects, or JSONL,
one span per row, read through a column mapping (`ingest --input-format spans --map ...`).

The mapping names the columns: `name=COL` (the region name), `start=COL` and either `end=COL`
or `dur=COL`, `unit=s|ms|us|ns` (the unit of those columns, default s), optionally `tid=COL`
(a thread or stream id, default 0). Without `start`, spans given by their duration are laid
end to end in file order from 0 (a log of `step,phase,seconds` rows). E.g.

    --map name=phase,start=t0,end=t1,unit=s      --map name=phase,dur=seconds

Rows become `regions` with source "timer" (so `breakdown --by timer` shows them), pid 0,
depth = how many spans of the same thread are open when the span starts (the timer log's
nesting, `common.nesting_depth`). A missing column or a value that is not a number is one
error naming the file, the row and the column; invalid UTF-8 is replaced by U+FFFD
(counted in a warning); JSON nested deeper than 64 levels is refused.
"""
from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import numpy as np
import pyarrow as pa

from ...errors import BadInput, TraceqError
from ..common import Parsed, nesting_depth, read_bytes
from ..safe_text import TooDeep, check_utf8, loads_capped, repair_utf8
from .log_order import OUT_SCHEMA

UNITS = {"s": 1e9, "ms": 1e6, "us": 1e3, "µs": 1e3, "ns": 1.0}
KEYS = ("name", "start", "end", "dur", "unit", "tid")


def parse_map(spec: str | None) -> dict[str, str]:
    """'name=phase,start=t0,end=t1,unit=s' -> {'name': 'phase', ...}, checked."""
    if not spec:
        raise TraceqError("--input-format spans needs --map name=COL,start=COL,end=COL[,unit=s] "
                          "(or dur=COL instead of end)")
    out: dict[str, str] = {}
    for part in spec.split(","):
        if not part.strip():
            continue
        key, sep, col = part.partition("=")
        key, col = key.strip(), col.strip()
        if not sep or not col:
            raise TraceqError(f"--map {spec!r}: expected key=column, got {part!r}")
        if key not in KEYS:
            raise TraceqError(f"--map: unknown key {key!r} (choose from {', '.join(KEYS)})")
        out[key] = col
    if "name" not in out:
        raise TraceqError("--map: name=COLUMN is required (the span's name)")
    if ("end" in out) == ("dur" in out):
        raise TraceqError("--map: give exactly one of end=COLUMN or dur=COLUMN")
    if "end" in out and "start" not in out:
        raise TraceqError("--map: end=COLUMN needs start=COLUMN")
    if out.get("unit", "s") not in UNITS:
        raise TraceqError(f"--map: unit {out['unit']!r}: choose s, ms, us or ns")
    return out


def _rows(text: str, path: Path) -> list[dict]:
    body = text.lstrip("\ufeff \t\r\n")
    try:
        if body.startswith("["):
            rows = loads_capped(body)
        elif body.startswith("{"):
            rows = [loads_capped(line) for line in body.splitlines() if line.strip()]
        else:
            rows = list(csv.DictReader(io.StringIO(body)))
    except TooDeep as exc:
        raise BadInput(str(exc), path) from None
    except ValueError as exc:
        raise BadInput(f"not a span log (CSV with a header, a JSON array or JSONL): {exc}", path) from None
    except csv.Error as exc:
        raise BadInput(f"not a CSV span log: {exc}", path) from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise BadInput("not a span log: expected objects (a JSON array of objects, or one per line)", path)
    return rows


def _column(rows: list[dict], key: str, col: str, path: Path, scale: float) -> np.ndarray:
    out = np.empty(len(rows), np.int64)
    for i, r in enumerate(rows):
        if col not in r:
            raise BadInput(f"row {i + 1}: no column {col!r} (--map {key}={col}; columns: "
                           f"{', '.join(map(str, r))})", path)
        try:
            x = float(r[col]) * scale
        except (TypeError, ValueError):
            raise BadInput(f"row {i + 1}: column {col!r} ({key}) is not a number: {str(r[col])[:40]!r}", path) from None
        if not math.isfinite(x) or abs(x) >= 2.0**63:
            raise BadInput(f"row {i + 1}: column {col!r} ({key}) is out of range", path)
        out[i] = round(x)
    return out


def read_spans(path: str | Path, spec: str | None) -> Parsed:
    """A span log -> `regions` rows, ordered by start, tid, depth."""
    path = Path(path)
    m = parse_map(spec)
    data, bad = repair_utf8(read_bytes(path))
    rows = _rows(data.decode("utf-8"), path)
    warnings = [f"replaced {bad} invalid UTF-8 sequence(s) by U+FFFD"] if bad else []
    if not rows:
        raise BadInput("the span log holds no rows", path)
    scale = UNITS[m.get("unit", "s")]
    for key in ("name", "tid"):
        if key in m and m[key] not in rows[0]:
            raise BadInput(f"no column {m[key]!r} (--map {key}={m[key]}; columns: {', '.join(map(str, rows[0]))})", path)
    if "end" in m:
        start = _column(rows, "start", m["start"], path, scale)
        end = _column(rows, "end", m["end"], path, scale)
    else:
        dur = _column(rows, "dur", m["dur"], path, scale)
        start = (_column(rows, "start", m["start"], path, scale) if "start" in m
                 else np.concatenate([[0], np.cumsum(dur)[:-1]]).astype(np.int64))
        end = start + dur
    if (end < start).any():
        i = int(np.argmax(end < start))
        raise BadInput(f"row {i + 1}: the span ends before it starts", path)
    tid = _column(rows, "tid", m["tid"], path, 1.0) if "tid" in m else np.zeros(len(rows), np.int64)
    pid = np.zeros(len(rows), np.int64)
    names = pa.array([str(r.get(m["name"]) if r.get(m["name"]) is not None else "") for r in rows], pa.string())
    depth = nesting_depth(pid, tid, start, end)
    order = np.lexsort((depth, tid, start))
    n = len(order)
    table = pa.table({
        "pid": pa.array(pid[order]), "tid": pa.array(tid[order]),
        "source": pa.repeat(pa.scalar("timer", pa.string()), n), "name": names.take(pa.array(order)),
        "start_ns": pa.array(start[order]), "end_ns": pa.array(end[order]),
        "depth": pa.array(np.asarray(depth)[order], pa.int32()),
        "device": pa.nulls(n, pa.int32()), "gpu_dur_ns": pa.nulls(n, pa.int64()),
        "unfinished": pa.array(np.zeros(n, bool)),
    }, schema=OUT_SCHEMA)
    check_utf8(table.select(["name"]), f"{path}: spans")
    return Parsed(tables={"regions": table}, format="spans", clock_offset_ns=0, warnings=warnings)
