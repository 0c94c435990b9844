"""Lookup maps built chunk by chunk (traceq.ingest.first_by_key) and the nsys sync-call map
built on them (traceq.ingest.nsys.activity.Waits): checked against plain dicts of first occurrences."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from traceq.ingest.first_by_key import first_by_key, joined
from traceq.ingest.nsys.activity import Waits


@pytest.mark.parametrize("seed", range(6))
def test_first_by_key_gives_each_keys_first_value(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 3000))
    ordered = seed % 2 == 0   # in key order (the no-sort path) or shuffled with repeats
    keys = np.arange(n, dtype=np.int64) * 3 - 500 if ordered else rng.integers(-50, 400, n)
    values = rng.integers(0, 250, n).astype(np.uint8)
    first: dict[int, int] = {}
    for k, v in zip(keys.tolist(), values.tolist()):
        first.setdefault(k, v)
    got_keys, got_values = first_by_key(keys.copy(), values.copy())
    assert got_keys.tolist() == sorted(first)
    assert got_values.tolist() == [first[k] for k in sorted(first)]


def test_joined_keeps_order_and_common_dtype_and_empties_the_list():
    pieces = [np.array([1, 2], np.uint32), np.array([], np.uint32), np.array([3], np.int64), np.array([4, 5], np.uint8)]
    out = joined(pieces)
    assert out.tolist() == [1, 2, 3, 4, 5] and out.dtype == np.int64 and pieces == []


def _calls(rows):
    return pa.RecordBatch.from_arrays([pa.array([r[0] for r in rows], pa.int64()), pa.array([r[1] for r in rows], pa.int64()),
                                       pa.array([r[2] for r in rows], pa.string())], names=["pid", "correlation", "api"])


@pytest.mark.parametrize("late_big_id", [False, True])
def test_sync_calls_map_to_the_first_call_of_their_process_whatever_the_id_size(late_big_id):
    """Sync calls in three chunks, with repeats, calls of two processes sharing correlation
    ids, calls without a pid or correlation (they match nothing), and, in the last chunk, a
    correlation beyond 2**39 that no int64 key holds: the map switches to pid/correlation
    pairs mid-stream and must answer as a dict of first occurrences does."""
    big = 1 << 40
    chunks = [
        [(7, 10, "Stream Sync"), (7, 11, "Context Sync"), (9, 10, "Event Sync"), (None, 12, "Stream Sync")],
        [(7, 10, "Event Sync"), (7, 5, "Stream Wait Event"), (9, None, "Context Sync"), (9, 3, "Stream Sync")],
        [(9, 3, "Context Sync"), (7, big if late_big_id else 99, "Stream Sync"), (7, 4, "Context Sync")],
    ]
    first: dict[tuple, str] = {}
    waits = Waits()
    for rows in chunks:
        waits.add(_calls(rows))
        for pid, corr, api in rows:
            if pid is not None and corr is not None:
                first.setdefault((pid, corr), api)
    waits.finish()
    assert waits.fits is not late_big_id
    asked = [(7, 10), (7, 11), (9, 10), (7, 5), (9, 3), (7, big if late_big_id else 99), (7, 4), (7, 3), (8, 10),
             (None, 12), (9, None)]
    got = waits.api(pa.array([a[0] for a in asked], pa.int64()), pa.array([a[1] for a in asked], pa.int64()))
    assert got.to_pylist() == [first.get(a) for a in asked]
    assert got.to_pylist()[:3] == ["Stream Sync", "Context Sync", "Event Sync"]
