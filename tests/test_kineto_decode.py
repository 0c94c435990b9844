"""The fast Kineto decoder (kineto_decode) against the robust one: where it does not refuse,
its raw rows equal the robust decoder's, column by column; where it cannot vouch for that
(odd types, malformed JSON, ambiguous structure) it refuses (None)."""
from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traceq.ingest import kineto, kineto_decode
from traceq.ingest.kineto_decode import decode_fast
from traceq.ingest.kineto_raw import RAW_SCHEMA

from conftest import SAMPLES, SHARED_TRACES, shared_trace
from fuzzing import kineto_document



def reference(text: bytes) -> pa.Table:
    """The robust decoder's raw relation of a document (typed msgspec decode, coercion of odd
    chunks, `kineto._columns`, the X/B/E and non-Trace filter)."""
    trace = msgspec.json.decode(text.lstrip(b"\xef\xbb\xbf"), type=kineto._Trace | list[msgspec.Raw])
    raws = trace if isinstance(trace, list) else trace.traceEvents
    tables = []
    for i in range(0, len(raws), kineto._CHUNK):
        chunk = raws[i:i + kineto._CHUNK]
        try:
            evs = kineto._EVENTS.decode(b"[" + b",".join(chunk) + b"]")
        except msgspec.ValidationError:
            evs = kineto._coerce_chunk(chunk)
        kept = [e for e in evs if e is not None and e.ph in kineto._KEPT_PH and e.cat not in kineto._TRACE_CATS]
        tables.append(pa.table(kineto._columns(kept, True)))
    return pa.concat_tables(tables) if tables else pa.table(kineto._columns([], True))


def fast(text: bytes, tmp: Path, threads: int = 2):
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / "trace.json"
    path.write_bytes(text)
    return decode_fast(path, tmp / "work", threads)


def rows(decoded) -> pa.Table:
    return pa.concat_tables([pq.read_table(p) for p in decoded.parts])


def same(x, y) -> bool:
    return x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y))


def assert_equal(decoded, text: bytes) -> None:
    got, want = rows(decoded), reference(text)
    assert got.schema == RAW_SCHEMA
    assert got.num_rows == want.num_rows
    for col in want.column_names:
        a, b = got[col].to_pylist(), want[col].to_pylist()
        bad = [i for i, (x, y) in enumerate(zip(a, b)) if not same(x, y)]
        assert not bad, f"{col}: row {bad[0]}: fast {a[bad[0]]!r} != robust {b[bad[0]]!r}"
    items = msgspec.json.decode(text.lstrip(b"\xef\xbb\xbf"), type=kineto._Trace | list[msgspec.Raw])
    items = items if isinstance(items, list) else items.traceEvents
    assert decoded.n_items == len(items)
    assert decoded.not_objects == 0
    assert decoded.first == bytes(items[0])[:4096]


def _plain(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


# ------------------------------------------------------------------ real traces
KINETO = sorted(p.relative_to(SHARED_TRACES).as_posix() for p in (SHARED_TRACES / "kineto").rglob("*.json*")) \
    if (SHARED_TRACES / "kineto").exists() else ["kineto/hta/trace_diff/control/control.json.gz"]


@pytest.mark.parametrize("rel", KINETO)
def test_shared_traces_equal_robust_rows(rel, tmp_path):
    text = _plain(shared_trace(rel))
    decoded = fast(text, tmp_path)
    if decoded is None:
        # refused: only traces with types the fast path does not vouch for (a string grid,
        # both spellings of "External id")
        assert rel.endswith(("triton_example.json.gz", "resnet50_num_workers_0.worker0.pt.trace.json.gz"))
        return
    assert_equal(decoded, text)


@pytest.mark.parametrize("name", ["fast_dataloader", "slow_dataloader"])
def test_sample_traces_equal_robust_rows(name, tmp_path):
    text = _plain(SAMPLES / name / "rank0.pt.trace.json.gz")
    decoded = fast(text, tmp_path)
    assert decoded is not None
    assert_equal(decoded, text)
    assert decoded.meta.traceEvents is None and decoded.meta.schemaVersion is not None


def test_many_parts_keep_file_order_with_one_or_two_threads(tmp_path, monkeypatch):
    """Parts cut every few KB: rows stay in file order, whatever the thread count."""
    text = _plain(SAMPLES / "slow_dataloader" / "rank0.pt.trace.json.gz")
    monkeypatch.setattr(kineto_decode, "MIN_SPLIT", 0)
    monkeypatch.setattr(kineto_decode, "PART_BYTES", 16 << 10)
    one = fast(text, tmp_path / "one", threads=1)
    two = fast(text, tmp_path / "two", threads=2)
    assert one is not None and two is not None
    assert_equal(one, text)
    assert rows(one).equals(rows(two))
    assert not list((tmp_path / "two" / "work").glob("fast-*.json"))   # the JSON parts are removed


# ------------------------------------------------------------------ synthetic, by hand
def _doc(events, **meta) -> bytes:
    return json.dumps({**meta, "traceEvents": events}).encode()


KERNEL = {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 100, "dur": 5,
          "args": {"External id": 12, "correlation": 3, "device": 0, "stream": 7, "grid": [4, 2, 1],
                   "block": [128, 1, 1], "registers per thread": 90}}


def test_values_converted_as_the_raw_relation_says(tmp_path):
    events = [
        KERNEL,
        {"ph": "X", "cat": "cpu_op", "name": "op", "pid": "stream 7", "tid": "0x1f", "ts": "12.5", "dur": 2.25,
         "args": {"External id": "0x10", "correlation": "stream 9"}},
        {"ph": "B", "cat": "user_annotation", "name": "r", "pid": "-3", "tid": "99999999999999999999", "ts": 7,
         "args": {"finished": "FALSE"}},
        {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce", "pid": 0, "tid": 7, "ts": 200, "dur": 1,
         "args": {"In msg nelems": 1000, "Out msg nelems": "2000", "dtype": "BFloat16", "Collective name": "allreduce",
                  "Process Group Name": "0", "Process Group Description": "default_pg", "Group size": 8, "Seq": 41,
                  "finished": False, "kind": "HtoD"}},
        {"ph": "X", "cat": "Trace", "name": "window", "ts": 0, "dur": 1000},
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}},
        {"ph": "E", "pid": "-3", "tid": 1, "ts": 9},
    ]
    text = _doc(events, schemaVersion=1)
    decoded = fast(text, tmp_path)
    assert decoded is not None
    t = rows(decoded).to_pylist()
    assert [r["ph"] for r in t] == ["X", "X", "B", "X", "E"]
    assert t[0]["external_id"] == 12 and t[0]["grid_x"] == 4 and t[0]["block_y"] == 1 and t[0]["registers"] == 90
    assert (t[1]["pid"], t[1]["tid"], t[1]["ts"], t[1]["dur"]) == (7, 31, 12.5, 2.25)
    assert (t[1]["external_id"], t[1]["correlation"]) == (16, 9)
    assert (t[2]["pid"], t[2]["tid"], t[2]["unfinished"]) == (-3, None, True)
    assert t[3]["bytes"] == 2000 * 2 and t[3]["unfinished"] is True and t[3]["arg_kind"] == "HtoD"
    assert (t[3]["collective"], t[3]["pg_name"], t[3]["pg_desc"], t[3]["group_size"], t[3]["seq"]) == \
        ("allreduce", "0", "default_pg", 8, 41)
    assert decoded.n_items == 7
    assert_equal(decoded, text)


def test_lower_case_external_id_trace(tmp_path):
    ev = {**KERNEL, "args": {"external id": 77, "correlation": 1}}
    text = _doc([ev, {**ev, "ts": 200}])
    decoded = fast(text, tmp_path)
    assert decoded is not None
    assert rows(decoded)["external_id"].to_pylist() == [77, 77]
    assert_equal(decoded, text)


def test_bare_array_and_metadata_after_the_events(tmp_path):
    text = json.dumps([KERNEL, KERNEL]).encode()
    decoded = fast(text, tmp_path / "a")
    assert decoded is not None and decoded.n_items == 2
    assert_equal(decoded, text)
    text = (b'{"schemaVersion": 1, "traceEvents": [' + json.dumps(KERNEL).encode() +
            b'], "logs": ["a]", "b"], "traceName": "x]", "baseTimeNanoseconds": 5}')
    decoded = fast(text, tmp_path / "b")
    assert decoded is not None and decoded.meta.baseTimeNanoseconds == 5
    assert_equal(decoded, text)


REFUSED = {
    "truncated": _doc([KERNEL, KERNEL])[:-30],
    "ts as a bool": _doc([{**KERNEL, "ts": True}]),
    "pid as a float": _doc([{**KERNEL, "pid": 1.5}]),
    "name as a number": _doc([{**KERNEL, "name": 5}]),
    "grid as a string": _doc([{**KERNEL, "args": {**KERNEL["args"], "grid": "[1,1,1]"}}]),
    "ts with an underscore": _doc([{**KERNEL, "ts": "1_000"}]),
    "tid with a plus sign": _doc([{**KERNEL, "tid": "+7"}]),
    "non-object item": _doc([KERNEL, 5]),
    "args not an object": _doc([{**KERNEL, "args": [1]}]),
    "both External id spellings": _doc([KERNEL, {**KERNEL, "args": {"external id": 1}}]),
    "NaN literal": _doc([KERNEL]).replace(b'"dur": 5', b'"dur": NaN'),
    "trailing comma": _doc([KERNEL]).replace(b'"registers per thread": 90}', b'"registers per thread": 90,}'),
    "duplicate key": _doc([KERNEL]).replace(b'{"ph": "X"', b'{"ph": "B", "ph": "X"'),
    "nested traceEvents first": b'{"meta": {"traceEvents": []}, "traceEvents": ' + json.dumps([KERNEL]).encode() + b"}",
    "empty event list": _doc([]),
    "not a trace": b'{"a": 1}',
    "1e400": _doc([KERNEL]).replace(b'"dur": 5', b'"dur": 1e400'),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_refuses_what_it_cannot_vouch_for(case, tmp_path):
    assert fast(REFUSED[case], tmp_path) is None
    assert not list((tmp_path / "work").glob("fast-*"))   # nothing left behind


def test_a_cut_inside_a_string_is_refused(tmp_path, monkeypatch):
    """The first event's name holds `}, {` past the middle of the array: the one cut (at the
    first candidate after the middle) lands inside it, the part before it is no JSON array,
    and the file is refused."""
    text = _doc([{**KERNEL, "name": "x" * 1000 + "}, {" + "y" * 10}, KERNEL])
    start, end = text.index(b"[") + 1, text.rindex(b"]")
    monkeypatch.setattr(kineto_decode, "MIN_SPLIT", 0)
    monkeypatch.setattr(kineto_decode, "PART_BYTES", (end - start) // 2 + 1)
    middle = start + (end - start) // 2
    assert text.find(b"}, {", middle) < text.find(b"yyy")   # the first candidate is inside the name
    assert fast(text, tmp_path) is None
    monkeypatch.setattr(kineto_decode, "PART_BYTES", 1 << 20)   # not cut: accepted
    decoded = fast(text, tmp_path / "whole")
    assert decoded is not None
    assert_equal(decoded, text)


# ------------------------------------------------------------------ the fuzz corpus
def check_fuzzed(doc: bytes, tmp: Path, split: bool, part_bytes: int) -> bool:
    """Where the fast decoder takes `doc` (optionally cut every `part_bytes`), its rows equal
    the robust decoder's; returns whether it took it."""
    if split:
        kineto_decode.PART_BYTES, kineto_decode.MIN_SPLIT = part_bytes, 0
    try:
        decoded = fast(doc, tmp)
    finally:
        kineto_decode.PART_BYTES, kineto_decode.MIN_SPLIT = PART_BYTES, MIN_SPLIT
    if decoded is not None:
        assert_equal(decoded, doc)
    return decoded is not None


PART_BYTES, MIN_SPLIT = kineto_decode.PART_BYTES, kineto_decode.MIN_SPLIT


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(doc=kineto_document(), split=st.booleans())
def test_fuzz_fast_rows_equal_robust_rows(doc, split, tmp_path_factory):
    check_fuzzed(doc, tmp_path_factory.mktemp("fz"), split, 300)


@st.composite
def plausible_document(draw) -> bytes:
    """Mostly well-typed traces (the fuzz corpus above is mostly refused): ids and times as
    numbers or strings of every shape the fast path accepts."""
    ident = st.one_of(st.integers(-(2**63), 2**64 - 1), st.sampled_from(
        ["stream 7", "0x1f", "-0X7", "1890023232", "Spans", "", "-3", "99999999999999999999999", "12.7", "a-5b",
         "x9999999999999999999", "007", "-0"]), st.none())
    time = st.one_of(st.integers(-(2**70), 2**70), st.floats(allow_nan=False, allow_infinity=False),
                     st.sampled_from(["12", "-1.5e3", "1e400", "0.000001", "123456789012345678901234567890"]), st.none())
    text = st.one_of(st.text(max_size=8), st.none())
    args = st.fixed_dictionaries({}, optional={
        "External id": ident, "correlation": ident, "stream": ident, "device": ident, "bytes": ident,
        "registers per thread": ident, "Group size": ident, "Seq": ident,
        "grid": st.one_of(st.lists(st.integers(-(2**40), 2**40), max_size=4), st.none()),
        "block": st.lists(st.integers(0, 1024), max_size=3),
        "finished": st.one_of(st.sampled_from(["false", "FaLsE", "true", False, True, 0, 7]), st.none()),
        "kind": text, "dtype": st.one_of(st.sampled_from(["float", "Half", "int8", "complex"]), text),
        "In msg nelems": time, "Out msg nelems": time, "Collective name": text,
        "Process Group Name": text, "Process Group Description": text, "other": st.integers()})
    event = st.fixed_dictionaries({"ph": st.sampled_from(["X", "X", "B", "E", "i", "M", "f"])}, optional={
        "cat": st.one_of(st.sampled_from(["kernel", "cpu_op", "Trace", "trace", "cuda_runtime"]), text),
        "name": text, "pid": ident, "tid": ident, "ts": time, "dur": time, "args": st.one_of(args, st.none())})
    events = draw(st.lists(event, min_size=1, max_size=30))
    return json.dumps(events if draw(st.booleans()) else {"traceEvents": events}, indent=draw(st.sampled_from([None, 2]))).encode()


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(doc=plausible_document(), split=st.booleans())
def test_plausible_traces_equal_robust_rows(doc, split, tmp_path_factory):
    check_fuzzed(doc, tmp_path_factory.mktemp("pl"), split, 200)
