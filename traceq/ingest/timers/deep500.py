"""Deep500 timer statistics: the text of `print_all_time_stats` / `save_all_time_stats` (a plain
`Timer`: one section ending in `---`; a `CPUGPUTimer`: `CPU` and `GPU` sections) -> `timer_stats`
rows (key, clock cpu|gpu, min/mean/median/max/stdev in seconds).

Hostile input: invalid UTF-8 is replaced by U+FFFD (counted in a warning); a statistic that
is nan or ±inf is undefined and stored as null (counted in a warning); a file with no key
statistics at all (a header and no valid row) is refused rather than stored as an empty run.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import pyarrow as pa

from ...errors import BadInput
from ..common import Parsed, read_bytes
from ..safe_text import check_utf8, repair_utf8


_NUM = r"(\S+)"
_STATS_LINE = re.compile(rf"^min:\s*{_NUM}\s+mean:\s*{_NUM}\s+median:\s*{_NUM}\s+max:\s*{_NUM}\s+stdev:\s*{_NUM}$")
_FIELDS = ("min_s", "mean_s", "median_s", "max_s", "stdev_s")


def read_stats(path: str | Path) -> Parsed:
    """Deep500 `print_all_time_stats` text -> `timer_stats` rows (one per key and clock).

    Grammar (blank lines ignored): a key line is any line followed by a stats line
    `min: x mean: x median: x max: x stdev: x`; `CPU` / `GPU` lines open a clock section
    (CPUGPUTimer); `---` closes a section. A plain Timer's section is the CPU clock. When a key
    appears more than once on a clock (stats printed repeatedly), the last one is kept.
    """
    path = Path(path)
    raw, n_replaced = repair_utf8(read_bytes(path))
    text = raw.decode("utf-8-sig")
    lines = [(n, s.strip()) for n, s in enumerate(text.splitlines(), start=1) if s.strip()]
    if not lines:
        raise BadInput("empty file", path)
    truncated_tail = not text.endswith(("\n", "\r"))
    warnings: list[str] = []
    rows: dict[tuple[str, str], tuple] = {}
    repeated = undefined = 0
    clock = "cpu"
    closed = True
    i = 0
    while i < len(lines):
        n, line = lines[i]
        nxt = lines[i + 1][1] if i + 1 < len(lines) else None
        if line.startswith("min:"):
            if i == len(lines) - 1 and truncated_tail and not _STATS_LINE.match(line):
                warnings.append(f"line {n}: truncated stats line skipped (the file ends mid-line)")
                break
            raise BadInput(f"line {n}: stats line without a key line before it", path)
        if line == "---":
            closed = True
            i += 1
            continue
        if nxt is not None and nxt.startswith("min:"):
            m = _STATS_LINE.match(nxt)
            if m is None:
                if i + 1 == len(lines) - 1 and truncated_tail:
                    warnings.append(f"line {lines[i + 1][0]}: truncated stats line of key {line!r} skipped "
                                    "(the file ends mid-line)")
                    break
                raise BadInput(f"line {lines[i + 1][0]}: expected 'min: x mean: x median: x max: x "
                               "stdev: x'", path)
            values = []
            for field, s in zip(_FIELDS, m.groups()):
                try:
                    x = float(s)
                except ValueError:
                    raise BadInput(f"line {lines[i + 1][0]}: {field[:-2]} value {s[:40]!r} is not a "
                                   "number", path) from None
                if not math.isfinite(x):   # nan/inf: undefined, stored as null
                    undefined += 1
                    x = None
                values.append(x)
            if (line, clock) in rows:
                repeated += 1
                del rows[(line, clock)]
            rows[(line, clock)] = tuple(values)
            closed = False
            i += 2
            continue
        if line in ("CPU", "GPU"):
            clock = line.lower()
            closed = False
            i += 1
            continue
        if nxt is None:
            warnings.append(f"line {n}: key {line!r} has no stats line (file truncated?); skipped")
            closed = True
            break
        raise BadInput(f"line {n}: unexpected {line[:60]!r} (expected CPU, GPU, a key line followed by "
                       "its 'min: .. stdev: ..' line, or ---)", path)
    if not closed:
        warnings.append("the last section has no closing '---' (file truncated?)")
    if repeated:
        warnings.append(f"{repeated} key stats appear more than once (stats printed repeatedly?); "
                        "kept the last of each")
    if undefined:
        warnings.append(f"{undefined} statistics are nan or inf (undefined): stored as null")
    if n_replaced:
        warnings.append(f"{n_replaced} invalid UTF-8 sequence(s) replaced by U+FFFD")
    if not rows:
        raise BadInput("no key statistics (a key line followed by 'min: .. stdev: ..'): not a "
                       "Deep500 stats file, or cut before its first key", path)
    keys = [k for k, _ in rows]
    clocks = [c for _, c in rows]
    cols = list(zip(*rows.values())) if rows else [[] for _ in _FIELDS]
    table = pa.table({
        "key": pa.array(keys, pa.string()),
        "clock": pa.array(clocks, pa.string()),
        **{f: pa.array(list(c), pa.float64()) for f, c in zip(_FIELDS, cols)},
    })
    check_utf8(table, f"{path}: timer_stats")
    return Parsed(tables={"timer_stats": table}, format="deep500_stats", warnings=warnings)
