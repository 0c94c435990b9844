"""Terminal output of each analysis command on the repo's sample runs, compared with the
snapshots in tests/snapshots/ (fixed width, no colour), so that layout changes show up in
review. After an intended change: TRACEQ_UPDATE_SNAPSHOTS=1 python -m pytest tests/test_snapshots.py
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SAMPLES

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = os.environ.get("TRACEQ_UPDATE_SNAPSHOTS") == "1"

COMMANDS = {
    "hotspots_nsys": ["hotspots", "--run", "nsys_sample"],
    "hotspots_transpose_memset": ["hotspots", "--run", "nsys_sample", "--category", "transpose,memset"],
    "summary_nsys": ["summary", "--run", "nsys_sample"],
    "overlap_nsys": ["overlap", "--run", "nsys_sample"],
    "breakdown_nsys": ["breakdown", "--run", "nsys_sample"],
    "breakdown_slow_dataloader": ["breakdown", "--run", "slow_dataloader"],
    "stalls_slow_dataloader": ["stalls", "--run", "slow_dataloader"],
    "stalls_fast_dataloader": ["stalls", "--run", "fast_dataloader"],
    "diff_slow_fast": ["diff", "slow_dataloader", "fast_dataloader", "--top", "8"],
    "breakdown_timer": ["breakdown", "--run", "timer_sample", "--by", "timer"],
    "stalls_timer": ["stalls", "--run", "timer_sample"],
}


def run(args, cwd) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TRACEQ_STORE")}
    env.update(NO_COLOR="1", TRACEQ_WIDTH="200", COLUMNS="200", PYTHONIOENCODING="utf-8")
    return subprocess.run([sys.executable, "-m", "traceq", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def sample_store(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("snap")
    files = [SAMPLES / "nsys_sample.sqlite", SAMPLES / "slow_dataloader", SAMPLES / "fast_dataloader",
             SAMPLES / "timer_sample.jsonl"]
    missing = [str(f) for f in files if not f.exists()]
    assert not missing, f"sample traces missing: {missing}"
    r = run(["ingest", *map(str, files), "-q"], work)
    assert r.returncode == 0, r.stderr
    return work


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_terminal_output_matches_snapshot(name, sample_store):
    r = run(COMMANDS[name], sample_store)
    assert r.returncode == 0, r.stderr
    assert "\x1b[" not in r.stdout          # no colour codes off a TTY
    got = r.stdout
    snap = SNAPSHOTS / f"{name}.txt"
    if UPDATE or not snap.exists():
        SNAPSHOTS.mkdir(exist_ok=True)
        snap.write_text(got)
        if not UPDATE:
            pytest.fail(f"snapshot {snap.name} was missing and has been written; review and commit it")
    assert got == snap.read_text(), f"output of `traceq {' '.join(COMMANDS[name])}` changed; see {snap}"


def test_tables_have_units_and_right_aligned_numbers():
    """hotspots_nsys: durations carry their unit in the header, numbers end under their header."""
    lines = (SNAPSHOTS / "hotspots_nsys.txt").read_text().splitlines()
    header = next(line for line in lines if line.lstrip().startswith("name"))
    for col in ("total (µs)", "mean (µs)", "median (µs)", "stddev (µs)", "%"):
        assert col in header
    row = next(line for line in lines if line.lstrip().startswith("[CUDA memcpy Host-to-Device]"))
    # sample: 6 copies, 1,680.0 µs in all (make_nsys_sample.py); right-aligned under "count" / "total (µs)"
    end_count = header.index(" count") + len(" count")
    assert row[:end_count].rstrip().endswith(" 6")
    assert len(row[:end_count].rstrip()) == end_count
    end_total = header.index("total (µs)") + len("total (µs)")
    assert row[:end_total].endswith("1,680.0")
