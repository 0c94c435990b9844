"""Tables in a real terminal: the real CLI runs in a pseudo-terminal of 80, 100, 120 and 200
columns (window size set on the pty, COLUMNS unset, so rich measures the terminal itself).
No number may be cut: every numeric cell shown equals the cell of the same row and column in
a full-width rendering; columns left out are named in a footnote; --wide shows them all.
"""
from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from rich.cells import cell_len

from conftest import SAMPLES

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
NUMBER = re.compile(r"^[+-]?[\d,]*\.?\d+$")
WIDTHS = (80, 100, 120, 200)
COMMANDS = {
    "hotspots": ["hotspots", "--run", "nsys_sample"],
    "summary": ["summary", "--run", "nsys_sample"],
    "breakdown": ["breakdown", "--run", "nsys_sample"],
    "stalls": ["stalls", "--run", "slow_dataloader"],
    "diff": ["diff", "slow_dataloader", "nsys_sample", "--top", "5"],
    "runs": ["runs"],
    "overview": ["overview", "--run", "slow_dataloader"],
    "operators": ["operators", "--run", "slow_dataloader"],
    "critical-path": ["critical-path", "--run", "slow_dataloader", "--what-if", "data_loading=0"],
}


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TRACEQ_WIDTH", "FORCE_COLOR",
                                                            "TRACEQ_STORE")}
    env.update(NO_COLOR="1", TERM="xterm-256color", PYTHONIOENCODING="utf-8")
    return env


def in_pty(args, cwd: Path, cols: int) -> str:
    """Run `traceq ARGS` with stdout/stderr on a pty `cols` wide; the text it printed."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 60, cols, 0, 0))
    p = subprocess.Popen([sys.executable, "-m", "traceq", *args], stdin=slave, stdout=slave, stderr=slave,
                         cwd=cwd, env=_env(), close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:          # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    assert p.wait(timeout=120) == 0, b"".join(chunks).decode(errors="replace")
    os.close(master)
    return ANSI.sub("", b"".join(chunks).decode()).replace("\r\n", "\n")


def piped(args, cwd: Path, width: int = 1000) -> str:
    env = dict(_env(), TRACEQ_WIDTH=str(width))
    r = subprocess.run([sys.executable, "-m", "traceq", *args], cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def tables(text: str, footnotes: list | None = None) -> list[tuple[list[tuple[str, int, int]], list[str]]]:
    """Each table as (columns as (header, start, end), row lines); `footnotes` gets, per
    table, the "(not shown ...)" note printed under it ("" when none)."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        if "───" in line and i > 0:
            header = lines[i - 1]
            cols = [(m.group(), m.start(), m.end()) for m in re.finditer(r"\S+(?: \S+)*", header)]
            rows = []
            j = i + 1
            while j < len(lines) and lines[j].strip():
                rows.append(lines[j])
                j += 1
            note = ""
            if j + 1 < len(lines) and lines[j + 1].startswith("(not shown"):
                k = j + 1
                while k < len(lines) and "every column)" not in note:
                    note += " " + lines[k].strip()
                    k += 1
            if footnotes is not None:
                footnotes.append(note)
            out.append((cols, rows))
    return out


def cell(row: str, start: int, end: int, right: bool) -> str:
    """The cell under a header spanning [start, end): right-aligned cells end at `end`."""
    if right:
        m = re.search(r"(\S+(?: \S+)*)$", row[:end].rstrip() if len(row) >= end and row[end - 1] != " " else "")
        return m.group(1).split("   ")[-1].strip() if m else ""
    return row[start:].split("  ")[0].strip()


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("pty")
    r = subprocess.run([sys.executable, "-m", "traceq", "ingest", str(SAMPLES / "nsys_sample.sqlite"),
                        str(SAMPLES / "slow_dataloader"), "-q"], cwd=d, env=_env(), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return d


def _numeric_cells(text: str) -> list[list[dict[str, str]]]:
    """Per table, per row: header -> cell, for right-aligned (numeric) columns."""
    out = []
    for cols, rows in tables(text):
        parsed = []
        for row in rows:
            parsed.append({h: cell(row, s, e, right=True) for h, s, e in cols})
        out.append(parsed)
    return out


@pytest.mark.parametrize("cols", WIDTHS)
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_numbers_are_never_cut_and_dropped_columns_are_named(work, name, cols):
    args = COMMANDS[name]
    full = piped(args, work)
    got = in_pty(args, work, cols)
    for line in got.splitlines():
        assert cell_len(line.rstrip()) <= cols, f"line wider than the {cols}-column terminal: {line!r}"
    notes: list[str] = []
    ref_tables, got_tables = tables(full), tables(got, notes)
    assert len(got_tables) == len(ref_tables) and got_tables, got
    for (ref_cols, ref_rows), (got_cols, got_rows), foot in zip(ref_tables, got_tables, notes):
        assert len(got_rows) == len(ref_rows)
        ref_headers = [h for h, _, _ in ref_cols]
        shown = [h for h, _, _ in got_cols]
        assert all(h in ref_headers for h in shown), (shown, ref_headers)   # headers are never cut either
        dropped = [h for h in ref_headers if h not in shown]
        if dropped:
            for h in dropped:
                assert h in foot, f"column {h!r} left out at {cols} columns but not named: {got}"
            assert "--wide" in foot
        ref_pos = {h: (s, e) for h, s, e in ref_cols}
        got_pos = {h: (s, e) for h, s, e in got_cols}
        checked = 0
        for ref_row, got_row in zip(ref_rows, got_rows):
            for h in shown:
                want = cell(ref_row, *ref_pos[h], right=True)
                if not NUMBER.match(want) or h == ref_headers[0]:
                    continue
                assert cell(got_row, *got_pos[h], right=True) == want, (h, got_row, ref_row)
                checked += 1
        assert checked or not ref_rows or len(shown) == 1 or not any(
            NUMBER.match(cell(r, *ref_pos[h], right=True)) for r in ref_rows for h in shown[1:])


def test_hotspots_at_120_columns_keeps_median_and_full_values(work):
    """The issue's case: at 120 columns the header read `median (` and 406.5 showed as `40`.
    Issue 37: names keep a readable width (40+) while the secondary statistics (stddev, min,
    max: hotspots' drop_first) go, so the name is whole and min/max are named as not shown."""
    got = in_pty(COMMANDS["hotspots"], work, 120)
    header = next(line for line in got.splitlines() if line.lstrip().startswith("name"))
    assert "median (µs)" in header and "count" in header and "%" in header
    row = next(line for line in got.splitlines() if line.lstrip().startswith("[CUDA memcpy"))   # 6 H2D copies
    assert row.lstrip().startswith("[CUDA memcpy Host-to-Device] ")
    assert re.search(r"memcpy +6 +1,680\.0 +79\.98 +280\.0 +280\.0 *$", row), row
    assert "(not shown, 120 columns wide: min (µs), max (µs), stddev (µs); --wide shows every column)" in got


@pytest.mark.parametrize("cols", (80, 100))
def test_wide_shows_every_column(work, cols):
    full = piped(COMMANDS["hotspots"], work)
    got = in_pty([*COMMANDS["hotspots"], "--wide"], work, cols)
    assert "not shown" not in got
    (ref_cols, ref_rows), = tables(full)
    (got_cols, got_rows), = tables(got)
    assert [h for h, _, _ in got_cols] == [h for h, _, _ in ref_cols]
    for ref_row, got_row in zip(ref_rows, got_rows):
        for (h, s, e), (_, gs, ge) in zip(ref_cols[1:], got_cols[1:]):
            assert cell(got_row, gs, ge, True) == cell(ref_row, s, e, True)
