"""Render analysis results (polars DataFrames) as rich tables, JSON or CSV.

Column names carry their unit as a suffix, and rendering derives headers from it:
`*_ns` durations are shown in µs, ms or s (one unit per table), `pct`/`*_pct` as %, `*_s` in
seconds, `*_bytes` in MiB (binary, as every byte figure traceq prints: GiB, MiB, KiB). JSON/CSV keep the raw column names and full values; tables
shorten long names in the middle, right-align numbers, and lose colour off a TTY.
A share whose whole is zero or undefined (a zero-length GPU span, no communication) is null
in JSON, empty in CSV and `UNDEFINED` ("–") in tables: never 0 or 100.
"""
from __future__ import annotations

import json
import math
import re
import sys
from typing import Iterable

import polars as pl

FORMATS = ("table", "json", "csv")
UNDEFINED = "–"   # a share (%) of a zero or undefined whole, in tables and headlines
from .text import NAME_WIDTH, shorten, shorten_distinct, shorten_path


def with_short_names(df: pl.DataFrame, width: int = NAME_WIDTH, full: bool = False) -> pl.DataFrame:
    """For tables: a `name` column next to an `identity` column shows the kernel's unique short
    label (traceq.kernels.labels) instead of a middle-cut signature; `identity` and `library`
    are then dropped (JSON/CSV keep all three). `full` (--wide): the full name instead."""
    if "name" not in df.columns or "identity" not in df.columns:
        return df
    if full:
        return df.drop([c for c in ("identity", "library") if c in df.columns])
    from .kernels.labels import short_labels

    labels = short_labels(df["name"].to_list(), df["identity"].to_list(), width)
    return df.with_columns(name=pl.Series(labels, dtype=pl.String)).drop(
        [c for c in ("identity", "library") if c in df.columns])


def duration_unit(values: pl.Series) -> tuple[str, float]:
    vals = values.drop_nulls().abs()
    vals = vals.filter(vals > 0)          # zeros (no GPU work, ...) say nothing about the scale
    ref = vals.median() if len(vals) else 0
    if ref is None or ref < 1e6:
        return "µs", 1e3
    if ref < 1e10:
        return "ms", 1e6
    return "s", 1e9


def pct_text(v, digits: int = 2) -> str:
    """A share as a table cell: `UNDEFINED` when null or NaN (its whole was zero or undefined)."""
    return UNDEFINED if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"


def header_and_formatter(name: str, series: pl.Series, ns_unit=None, wide: bool = False):
    if name.endswith("_ns"):
        unit, div = ns_unit or duration_unit(series)
        return f"{name[:-3]} ({unit})", lambda v: "" if v is None else f"{v / div:,.{1 if unit != 's' else 3}f}" if unit == "µs" else f"{v / div:,.3f}"
    if name == "pct" or name.endswith("_pct"):
        return ("%" if name == "pct" else f"{name[:-4]} (%)"), pct_text
    if name.endswith("_s"):
        return f"{name[:-2]} (s)", lambda v: "" if v is None else f"{v:.5f}"
    if name.endswith("_bytes"):
        return f"{name[:-6]} (MiB)", lambda v: "" if v is None else f"{v / 2**20:,.2f}"
    if series.dtype.is_integer():
        return name, lambda v: "" if v is None else f"{v:,}"
    if series.dtype.is_float():
        return name, lambda v: "" if v is None or math.isnan(v) else f"{v:,.3f}"
    if name == "file" and series.dtype == pl.String:
        return name, lambda v: "" if v is None else str(v)     # cut to the column's width (_fit)
    if name in ("name", "kernel", "region") or series.dtype == pl.String:
        return name, lambda v: "" if v is None else str(v) if wide else shorten(str(v))
    return name, lambda v: "" if v is None else str(v)


def to_json(df: pl.DataFrame) -> str:
    return json.dumps(df.to_dicts(), default=str, indent=1)


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_CONTROL_KEEP_NL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def clean(text, newlines: bool = False) -> str:
    """A string from a trace or a user, safe for a terminal: control characters (ANSI escapes
    included) are shown as visible escapes (ESC -> '\\x1b'), so nothing reaches the terminal raw.
    Rich markup is never interpreted because everything is printed as `rich.text.Text`."""
    if text is None:
        return ""
    pattern = _CONTROL_KEEP_NL if newlines else _CONTROL
    return pattern.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))


def console(stderr: bool = False, file=None, width: int | None = None):
    """A rich console: colour and terminal width on a TTY; plain otherwise (pipes, files, tests),
    as wide as TRACEQ_WIDTH, else COLUMNS (`COLUMNS=100 traceq runs | cat`), else 200 columns,
    so output is stable. NO_COLOR is honoured by rich. Markup and emoji codes are off: every
    printed string is data."""
    from rich.console import Console

    stream = file or (sys.stderr if stderr else sys.stdout)
    tty = hasattr(stream, "isatty") and stream.isatty()
    if width is None and not tty:
        width = pipe_width()
    return Console(file=stream, highlight=False, soft_wrap=False, width=width, markup=False, emoji=False,
                   color_system="auto" if tty else None, force_terminal=tty or None)


PIPE_WIDTH = 200   # the width of output that goes to no terminal, when neither variable says one


def pipe_width() -> int:
    """TRACEQ_WIDTH, else COLUMNS (a positive number), else PIPE_WIDTH."""
    import os

    for var in ("TRACEQ_WIDTH", "COLUMNS"):
        value = os.environ.get(var, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return PIPE_WIDTH


def print_text(con, text: str | None) -> None:
    """Print a headline / note / warning from trace data literally (no markup, no control chars)."""
    from rich.text import Text

    if text is not None:
        con.print(Text(clean(text, newlines=True)))


TEXT_MIN = 16        # a name column shrinks to this (middle ellipsis) before whole columns are dropped
NAME_READABLE = 40   # ... but not below this while a secondary column (drop_first) can go instead
READABLE_COLUMNS = frozenset({"name", "kernel", "region", "key", "file"})
# Text columns that may be shortened on a narrow terminal (plus the first column of any table);
# other text columns (e.g. "1.23 ms / 4.56 ms" values) are kept whole, like numbers.
NAME_COLUMNS = frozenset({"name", "kernel", "region", "key", "file", "devices", "labels", "domain", "metric",
                          "advice", "step_source", "source", "formats", "rank_ids"})


def _table_width(widths: Iterable[int]) -> int:
    """Width of a SIMPLE_HEAD table: cells + 1 padding each side + 1 separator per column + 1 edge."""
    widths = list(widths)
    return sum(w + 3 for w in widths) + 1 if widths else 0


def layout(names: list[str], headers: list[str], cells: list[list[str]], numeric: list[bool], width: int,
           drop_first: Iterable[str] = (), wide: bool = False) -> tuple[list[int], dict[int, int], list[int]]:
    """Which columns fit in `width` and how wide each is. Numbers are never cut: names shrink to
    NAME_READABLE, then the secondary `drop_first` columns go (in their order), then text shrinks
    to TEXT_MIN, then other columns go from the right (never the first column). Returns (kept column indices, width per kept column, dropped)."""
    from rich.cells import cell_len

    n = len(names)
    full = [max([cell_len(h)] + [cell_len(c) for c in col]) for h, col in zip(headers, cells)]
    shrinks = [not numeric[i] and (i == 0 or names[i] in NAME_COLUMNS) for i in range(n)]
    mins = [min(full[i], max(cell_len(headers[i]), TEXT_MIN)) if shrinks[i] else full[i] for i in range(n)]
    # a name column keeps a readable width (NAME_READABLE) while secondary columns (drop_first)
    # can go; only then do names shrink further, and other columns go from the right
    readable = [min(full[i], max(cell_len(headers[i]), NAME_READABLE))
                if shrinks[i] and (i == 0 or names[i] in READABLE_COLUMNS) else mins[i] for i in range(n)]
    keep, dropped = list(range(n)), []
    if not wide:
        secondary = [names.index(c) for c in drop_first if c in names]
        order = [(i, readable) for i in secondary]
        order += [(i, mins) for i in secondary + [i for i in reversed(range(1, n)) if i not in secondary]]
        for i, floor in order:
            if _table_width(floor[k] for k in keep) <= width:
                if floor is mins:
                    break
                continue
            if i == 0 or len(keep) == 1 or i not in keep:
                continue
            keep.remove(i)
            dropped.append(i)
    widths = {i: full[i] for i in keep}
    excess = _table_width(widths.values()) - width
    if excess > 0 and not wide:
        for floor in (readable, mins):      # names keep a readable width as long as they can
            for i in sorted((i for i in keep if shrinks[i]), key=lambda i: -widths[i]):
                cut = max(0, min(excess, widths[i] - floor[i]))
                widths[i] -= cut
                excess -= cut
                if excess <= 0:
                    break
            if excess <= 0:
                break
    return keep, widths, dropped


def _fit(column: str, cells: list[str], width: int) -> list[str]:
    """Cells cut to `width`: a `file` column keeps each path's file name (shorten_path) where
    that keeps paths distinct; any other text is cut in the middle, distinct names distinct."""
    if column == "file":
        paths = [shorten_path(c, width) for c in cells]
        if len(set(paths)) == len(set(cells)):
            return paths
    return shorten_distinct(cells, width)


def emit(df: pl.DataFrame, fmt: str = "table", *, headline: str | None = None, title: str | None = None,
         highlight: Iterable[int] = (), notes: Iterable[str] = (), file=None, drop_first: Iterable[str] = (),
         wide: bool = False, max_rows: int | None = None, more: str = "", undefined: Iterable[str] = ()) -> None:
    """Print `df` in `fmt`. `highlight` = row indices to emphasise (e.g. avoidable kernels);
    `notes` = advice lines printed under the table (table format only). On a terminal too
    narrow for every column, `drop_first` columns (then others, from the right) are left out
    and named in a footnote; `wide=True` keeps all of them (the table is then wider than the
    terminal). A number is never cut. A table longer than `max_rows` shows its first
    `max_rows` rows and a line saying how many there are, that JSON/CSV give them all, and
    `more` (a hint); JSON and CSV always hold every row."""
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
    from rich.text import Text

    total = df.height
    if max_rows is not None and total > max_rows:
        df = df.head(max_rows)
        highlight = [i for i in highlight if i < max_rows]
    df = with_short_names(df, full=wide)
    con = console(file=out)
    print_text(con, headline)
    ns_cols = [c for c in df.columns if c.endswith("_ns") and df[c].dtype.is_numeric()]
    ns_unit = duration_unit(pl.concat([df[c].cast(pl.Float64) for c in ns_cols])) if ns_cols else None
    headers, cells, numeric = [], [], []
    for name in df.columns:
        header, f = header_and_formatter(name, df[name], ns_unit, wide)
        if name in undefined:      # a statistic that is undefined there (its reason is in `notes`)
            f = (lambda g: lambda v: UNDEFINED if v is None else g(v))(f)
        headers.append(clean(header))
        cells.append([clean(f(v)) for v in df[name].to_list()])
        numeric.append(df[name].dtype.is_numeric())
    keep, widths, dropped = layout(list(df.columns), headers, cells, numeric, con.width, drop_first, wide)
    need = _table_width(widths.values())
    if need > con.width:       # --wide (or nothing left to drop): never let rich squeeze a column
        con = console(file=out, width=need)
    table = Table(title=Text(clean(title)) if title else None, box=box.SIMPLE_HEAD, header_style="bold",
                  title_justify="left")
    for i in keep:
        table.add_column(Text(headers[i]), justify="right" if numeric[i] else "left", no_wrap=True,
                         width=widths[i], overflow="ellipsis")
    marked = set(highlight)
    shown = {i: cells[i] if numeric[i] else _fit(df.columns[i], cells[i], widths[i]) for i in keep}
    for r in range(df.height):
        row = [Text(shown[i][r]) for i in keep]
        table.add_row(*row, style="yellow" if r in marked else None)
    if df.height == 0:
        con.print(Text("(no rows)"))
    else:
        con.print(table)
    if total > df.height:
        print_text(con, f"(the first {df.height:,} of {total:,} rows; --format csv or --format json gives all of "
                        f"them{more})")
    if dropped and df.height:
        print_text(con, f"(not shown, {con.width} columns wide: {', '.join(headers[i] for i in sorted(dropped))}; "
                        "--wide shows every column)")
    for note in notes:
        print_text(con, note)
