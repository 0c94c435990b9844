"""Render analysis results (polars DataFrames) as rich tables, JSON or CSV (DESIGN §5).

Column names carry their unit as a suffix, and rendering derives headers from it:
`*_ns` durations are shown in µs, ms or s (one unit per table), `pct`/`*_pct` as %, `*_s` in
seconds, `*_bytes` in MB. JSON/CSV keep the raw column names and full values; tables
shorten long names in the middle, right-align numbers, and lose colour off a TTY.
"""
from __future__ import annotations

import json
import math
import sys
from typing import Iterable

import polars as pl

FORMATS = ("table", "json", "csv")
NAME_WIDTH = 60


def shorten(text: str, width: int = NAME_WIDTH) -> str:
    """Shorten in the middle: 'void at::native::vectorized_el…<float>(int, float)'."""
    if text is None or len(text) <= width:
        return text
    keep = width - 1
    head = (keep + 1) // 2
    return text[:head] + "…" + text[len(text) - (keep - head):]


def with_short_names(df: pl.DataFrame, width: int = NAME_WIDTH) -> pl.DataFrame:
    """For tables: a `name` column next to an `identity` column shows the kernel's unique short
    label (traceq.kernels.labels) instead of a middle-cut signature; `identity` and `library`
    are then dropped (JSON/CSV keep all three)."""
    if "name" not in df.columns or "identity" not in df.columns:
        return df
    from .kernels.labels import short_labels

    labels = short_labels(df["name"].to_list(), df["identity"].to_list(), width)
    return df.with_columns(name=pl.Series(labels, dtype=pl.String)).drop(
        [c for c in ("identity", "library") if c in df.columns])


def _duration_unit(values: pl.Series) -> tuple[str, float]:
    vals = values.drop_nulls().abs()
    vals = vals.filter(vals > 0)          # zeros (no GPU work, ...) say nothing about the scale
    ref = vals.median() if len(vals) else 0
    if ref is None or ref < 1e6:
        return "µs", 1e3
    if ref < 1e10:
        return "ms", 1e6
    return "s", 1e9


def _header_and_formatter(name: str, series: pl.Series, ns_unit=None):
    if name.endswith("_ns"):
        unit, div = ns_unit or _duration_unit(series)
        return f"{name[:-3]} ({unit})", lambda v: "" if v is None else f"{v / div:,.{1 if unit != 's' else 3}f}" if unit == "µs" else f"{v / div:,.3f}"
    if name == "pct":
        return "%", lambda v: "" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.2f}"
    if name.endswith("_pct"):
        return f"{name[:-4]} (%)", lambda v: "" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.2f}"
    if name.endswith("_s"):
        return f"{name[:-2]} (s)", lambda v: "" if v is None else f"{v:.5f}"
    if name.endswith("_bytes"):
        return f"{name[:-6]} (MB)", lambda v: "" if v is None else f"{v / 1e6:,.2f}"
    if series.dtype.is_integer():
        return name, lambda v: "" if v is None else f"{v:,}"
    if series.dtype.is_float():
        return name, lambda v: "" if v is None or math.isnan(v) else f"{v:,.3f}"
    if name in ("name", "kernel", "region") or series.dtype == pl.String:
        return name, lambda v: "" if v is None else shorten(str(v))
    return name, lambda v: "" if v is None else str(v)


def to_json(df: pl.DataFrame) -> str:
    return json.dumps(df.to_dicts(), default=str, indent=1)


def console(stderr: bool = False, file=None):
    """A rich console: colour and terminal width on a TTY; plain and 200 columns wide
    otherwise (pipes, files, tests), so output is stable. NO_COLOR is honoured by rich."""
    import os

    from rich.console import Console

    stream = file or (sys.stderr if stderr else sys.stdout)
    tty = hasattr(stream, "isatty") and stream.isatty()
    width = None if tty else int(os.environ.get("TRACEQ_WIDTH", "200"))
    return Console(file=stream, highlight=False, soft_wrap=False, width=width,
                   color_system="auto" if tty else None, force_terminal=tty or None)


def emit(df: pl.DataFrame, fmt: str = "table", *, headline: str | None = None, title: str | None = None,
         highlight: Iterable[int] = (), notes: Iterable[str] = (), file=None) -> None:
    """Print `df` in `fmt`. `highlight` = row indices to emphasise (e.g. avoidable kernels);
    `notes` = advice lines printed under the table (table format only)."""
    out = file or sys.stdout
    if fmt == "json":
        out.write(to_json(df) + "\n")
        return
    if fmt == "csv":
        out.write(df.write_csv())
        return
    if fmt != "table":
        from .errors import TraceqError

        raise TraceqError(f"unknown --format {fmt!r} (choose table, json or csv)")
    from rich import box
    from rich.table import Table

    df = with_short_names(df)
    con = console(file=out)
    if headline:
        con.print(headline, markup=False)
    table = Table(title=title, box=box.SIMPLE_HEAD, header_style="bold", title_justify="left")
    ns_cols = [c for c in df.columns if c.endswith("_ns") and df[c].dtype.is_numeric()]
    ns_unit = _duration_unit(pl.concat([df[c].cast(pl.Float64) for c in ns_cols])) if ns_cols else None
    headers, cells = [], []
    for name in df.columns:
        header, f = _header_and_formatter(name, df[name], ns_unit)
        headers.append(header)
        cells.append([f(v) for v in df[name].to_list()])
    for name, header, col in zip(df.columns, headers, cells):
        if df[name].dtype.is_numeric():
            # numbers are never cut: only text columns shrink on a narrow terminal
            width = max([len(header)] + [len(c) for c in col])
            table.add_column(header, justify="right", no_wrap=True, min_width=width)
        else:
            table.add_column(header, justify="left", no_wrap=True, overflow="ellipsis")
    marked = set(highlight)
    for i, row in enumerate(zip(*cells)) if cells else []:
        table.add_row(*row, style="yellow" if i in marked else None)
    if df.height == 0:
        con.print("(no rows)")
    else:
        con.print(table)
    for note in notes:
        con.print(note, markup=False)
