"""The precedence sweep of the stall attribution (traceq/engine/level_sweep.py), by hand."""
from __future__ import annotations

import numpy as np

from traceq.engine.level_sweep import gap_levels

T0 = 1_700_000_000_000_000_000   # epoch ns, as traces carry them


def _run(rows):
    cols = list(zip(*rows))
    return gap_levels(*(np.array(c, dtype=np.int64) for c in cols))


def test_segments_take_the_lowest_open_level():
    # GPU (rank 0, device 0): gap [10, 20); sync (3) over [12, 15), data (1) over [14, 18)
    # -> [10,12) nothing, [12,14) sync, [14,18) data (1 beats 3), [18,20) nothing
    got = _run([(0, 0, T0 + 10, T0 + 20, 0), (0, 0, T0 + 12, T0 + 15, 3), (0, 0, T0 + 14, T0 + 18, 1)])
    assert got["rank"].tolist() == [0] and got["start_ns"].tolist() == [T0 + 10]
    assert [got[f"l{k}"][0] for k in range(1, 8)] == [4, 0, 2, 0, 0, 0, 0]


def test_gpus_apart_activity_outside_gaps_and_touching_gaps():
    rows = [
        # rank 1 device 0: two gaps that touch at 30 (a zero-length busy interval between)
        (1, 0, T0 + 20, T0 + 30, 0), (1, 0, T0 + 30, T0 + 40, 0),
        (1, 0, T0 + 25, T0 + 35, 7),      # host compute over both: 5 ns in each
        (1, 0, T0 + 0, T0 + 20, 2),       # ends where the first gap begins: nothing
        # rank 0 device 1: one gap; launch (6) covering it all, memory (5) inside
        (0, 1, T0 + 100, T0 + 110, 0), (0, 1, T0 + 90, T0 + 120, 6), (0, 1, T0 + 101, T0 + 103, 5),
        # rank 0 device 0: an activity of another GPU's time does not leak
        (0, 0, T0 + 100, T0 + 110, 4),
    ]
    got = _run(rows)
    # gaps in (rank, device, start) order
    assert list(zip(got["rank"].tolist(), got["device"].tolist(), got["start_ns"].tolist())) == [
        (0, 1, T0 + 100), (1, 0, T0 + 20), (1, 0, T0 + 30)]
    assert got["l6"].tolist() == [8, 0, 0] and got["l5"].tolist() == [2, 0, 0]
    assert got["l7"].tolist() == [0, 5, 5] and got["l2"].tolist() == [0, 0, 0]
    assert got["l4"].tolist() == [0, 0, 0]


def test_no_gaps():
    got = _run([(0, 0, T0, T0 + 5, 3)])
    assert len(got["rank"]) == 0 and len(got["l1"]) == 0
