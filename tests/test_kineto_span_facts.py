"""The facts of translation's first pass that the Kineto decoders save beside each raw part
(`kineto.raw.SpanFacts`): the sane start times and the times of the sane host B/E events.
Checked by hand on a small trace, and against a second method on real traces: polars'
`validate.sane()` over the raw rows, and the quartiles as order statistics of a sorted list."""
from __future__ import annotations

import json
import math

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from traceq.ingest import validate
from traceq.ingest.kineto import events as kineto_events
from traceq.ingest.kineto import rows as kineto_rows
from traceq.ingest.kineto import tables as kineto_tables
from traceq.ingest.kineto import translate as kineto_translate
from traceq.ingest.kineto.raw import GPU_CATS, host_be_path, starts_path

from conftest import SAMPLES, SHARED_TRACES, shared_kineto_traces, shared_trace
from test_kineto_decode import _plain, fast, robust


def margin(q25: int, q75: int) -> tuple[int, int, int]:
    """The trace's bounds from its start-time quartiles, as `validate` defines them: events
    kept within ABSURD_FACTOR x the middle half's width (at least MIN_WIDTH_NS) of that half."""
    w = max(q75 - q25, validate.MIN_WIDTH_NS)
    return q25 - validate.ABSURD_FACTOR * w, q75 + validate.ABSURD_FACTOR * w, validate.ABSURD_FACTOR * w


def saved(decoded) -> tuple[list[int], list[tuple[int, int]]]:
    """The sane starts and host B/E times of all parts, in file order."""
    starts = [int(x) for p in decoded.parts for x in np.load(starts_path(p))]
    be = [tuple(int(v) for v in row) for p in decoded.parts if host_be_path(p).exists()
          for row in np.load(host_be_path(p))]
    return starts, be


def by_polars(decoded) -> tuple[list[int], list[tuple[int, int]], pl.DataFrame]:
    """The same facts from the raw rows, with polars' own sanity expression."""
    rows = pl.from_arrow(pa.concat_tables([pq.read_table(p) for p in decoded.parts]))
    ev = kineto_tables.with_ns(rows).filter(validate.sane())
    host_be = ev.filter(pl.col("ph").is_in(["B", "E"]) & ~pl.col("cat").is_in(sorted(GPU_CATS)).fill_null(False))
    return ev["start_ns"].to_list(), list(host_be.select("start_ns", "end_ns").iter_rows()), ev


def test_by_hand(tmp_path):
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1000, "dur": 5},
        {"ph": "X", "cat": "cpu_op", "name": "no dur", "pid": 1, "tid": 1, "ts": 2000.5},
        {"ph": "X", "cat": "cpu_op", "name": "inverted", "pid": 1, "tid": 1, "ts": 3000, "dur": -1},
        {"ph": "X", "cat": "kernel", "name": "beyond float", "pid": 0, "tid": 7, "ts": "1e400", "dur": 1},
        {"ph": "B", "cat": "user_annotation", "name": "r", "pid": 1, "tid": 1, "ts": 4000},
        {"ph": "E", "cat": "user_annotation", "name": "r", "pid": 1, "tid": 1, "ts": 4010},
        {"ph": "B", "cat": "kernel", "name": "gpu begin", "pid": 0, "tid": 7, "ts": 5000},
        {"ph": "B", "name": "no category", "pid": 1, "tid": 2, "ts": 6000},
        {"ph": "i", "cat": "cpu_op", "name": "instant: not a row", "pid": 1, "tid": 1, "ts": 7000},
    ]
    text = json.dumps({"traceEvents": events}).encode()
    want_starts = [1_000_000, 2_000_500, 4_000_000, 4_010_000, 5_000_000, 6_000_000]
    want_be = [(4_000_000, 4_000_000), (4_010_000, 4_010_000), (6_000_000, 6_000_000)]
    for decoded in (robust(text, tmp_path / "robust"), fast(text, tmp_path / "fast", part_bytes=120)):
        assert decoded is not None
        assert saved(decoded) == (want_starts, want_be)
        bounds, host_be = kineto_translate.span(decoded.parts)
        assert bounds == margin(2_000_500, 5_000_000)   # quartiles of the 6 sane starts
        assert host_be.rows() == want_be


def test_a_trace_without_host_begin_end_saves_no_such_file(tmp_path):
    text = json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1,
                                        "ts": 10, "dur": 1}]}).encode()
    decoded = robust(text, tmp_path)
    assert saved(decoded) == ([10_000], [])
    assert not host_be_path(decoded.parts[0]).exists()
    assert kineto_translate.span(decoded.parts)[1].height == 0


KINETO = shared_kineto_traces()


@pytest.mark.parametrize("rel", KINETO + ["samples/slow_dataloader"])
def test_saved_facts_equal_polars_over_the_raw_rows(rel, tmp_path):
    path = SAMPLES / "slow_dataloader" / "rank0.pt.trace.json.gz" if rel.startswith("samples/") else shared_trace(rel)
    text = _plain(path)
    for decoded in (robust(text, tmp_path / "robust"), fast(text, tmp_path / "fast")):
        if decoded is None:   # the fast path refuses a few odd traces (test_kineto_decode)
            continue
        starts, be, ev = by_polars(decoded)
        assert saved(decoded) == (starts, be)
        bounds, host_be = kineto_translate.span(decoded.parts)
        ordered = sorted(starts)   # the quartiles as order statistics, by hand
        n = len(ordered)
        assert bounds == margin(ordered[math.floor((n - 1) * 0.25)], ordered[math.ceil((n - 1) * 0.75)])
        assert host_be.rows() == be


def test_a_discarded_part_leaves_no_facts_behind(tmp_path):
    out = kineto_rows.RawWriter(tmp_path)
    out.add(kineto_events.EVENTS.decode(b'[{"ph": "X", "cat": "cpu_op", "ts": 1, "dur": 1}]'))
    assert out.close() == [out.path] and starts_path(out.path).exists()
    out.discard()
    assert not list(tmp_path.iterdir())
