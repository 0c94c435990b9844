"""The fast Kineto decoder (kineto.decode: the event array cut into parts decoded by forked
processes) against the robust one: where it does not refuse, its raw parts hold the robust
decoder's rows, column by column, and the same facts; where it cannot vouch for that (odd
types, malformed JSON, ambiguous structure) it refuses (None)."""
from __future__ import annotations

import gzip
import json
import math
import mmap
import tempfile
from pathlib import Path

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import msgspec.structs

from traceq.ingest.kineto import decode as kineto_decode
from traceq.ingest.kineto import events as kineto_events
from traceq.ingest.kineto import reader as kineto_reader
from traceq.ingest.kineto.decode import decode_fast
from traceq.ingest.kineto.raw import RAW_SCHEMA

from conftest import SAMPLES, SHARED_TRACES, shared_kineto_traces, shared_trace
from fuzzing import kineto_document



def robust(text: bytes, tmp: Path):
    """The robust decoder's result for a document (`kineto.reader.decode_text` with the fast path off)."""
    tmp.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=tmp))
    path = tmp / "robust.json"
    path.write_bytes(text)
    (tmp / "robust-work").mkdir()
    with pytest.MonkeyPatch.context() as mp, open(path, "rb") as f:
        mp.setattr(kineto_decode, "decode_fast", lambda *a: None)
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            return kineto_reader.decode_text(path, mm, tmp / "robust-work", path)
        finally:
            mm.close()


def fast(text: bytes, tmp: Path, threads: int = 2, part_bytes: int | None = None, slice_bytes: int | None = None):
    """decode_fast on `text` (however small), cut into parts of about `part_bytes`, each
    decoded in slices of about `slice_bytes` (by default a few per part)."""
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / "trace.json"
    path.write_bytes(text)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kineto_decode, "MIN_SPLIT", 0)
        mp.setattr(kineto_decode, "PART_BYTES", part_bytes or max(64, len(text) // 8))
        mp.setattr(kineto_decode, "SLICE_BYTES", slice_bytes or max(32, len(text) // 32))
        return decode_fast(path, tmp / "work", threads)


def rows(decoded):
    return pa.concat_tables([pq.read_table(p) for p in decoded.parts]) if decoded.parts else RAW_SCHEMA.empty_table()


def same(x, y) -> bool:
    return x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y))


def assert_equal(decoded, text: bytes, tmp: Path) -> None:
    """The fast decoder's result equals the robust decoder's: rows column by column, and
    the facts beside them."""
    want = robust(text, tmp / "robust")
    got = rows(decoded)
    assert got.schema == RAW_SCHEMA
    expected = rows(want)
    assert got.num_rows == expected.num_rows
    for col in RAW_SCHEMA.names:
        a, b = got[col].to_pylist(), expected[col].to_pylist()
        bad = [i for i, (x, y) in enumerate(zip(a, b)) if not same(x, y)]
        assert not bad, f"{col}: row {bad[0]}: fast {a[bad[0]]!r} != robust {b[bad[0]]!r}"
    assert (decoded.n_items, decoded.not_objects, decoded.first, decoded.warnings) == \
        (want.n_items, want.not_objects, want.first, want.warnings)
    assert msgspec.structs.asdict(decoded.meta) == msgspec.structs.asdict(want.meta)


def _plain(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


# ------------------------------------------------------------------ real traces
KINETO = shared_kineto_traces() or ["kineto/hta/trace_diff/control/control.json.gz"]


@pytest.mark.parametrize("rel", KINETO)
def test_shared_traces_equal_robust_rows(rel, tmp_path):
    text = _plain(shared_trace(rel))
    decoded = fast(text, tmp_path)
    if decoded is None:
        # refused: only traces with types the fast path does not vouch for (a string grid,
        # both spellings of "External id"), and documents with an array of objects after
        # `traceEvents` (TraceLens' traces end with deviceProperties): the fast path cannot
        # tell where the event array ends there, and leaves them to the robust decoder
        after = list(json.loads(text)) if text.lstrip()[:1] == b"{" else []
        late_arrays = [k for k in after[after.index("traceEvents") + 1:] if isinstance(json.loads(text)[k], list)] \
            if "traceEvents" in after else []
        assert rel.endswith(("triton_example.json.gz", "resnet50_num_workers_0.worker0.pt.trace.json.gz")) \
            or late_arrays, rel
        return
    assert_equal(decoded, text, tmp_path)


@pytest.mark.parametrize("name", ["fast_dataloader", "slow_dataloader"])
def test_sample_traces_equal_robust_rows(name, tmp_path):
    text = _plain(SAMPLES / name / "rank0.pt.trace.json.gz")
    decoded = fast(text, tmp_path)
    assert decoded is not None
    assert_equal(decoded, text, tmp_path)
    assert decoded.meta.traceEvents is None and decoded.meta.schemaVersion is not None


def test_many_parts_keep_file_order_with_two_or_three_workers(tmp_path):
    """Parts cut every few KB, dealt to 2 or 3 processes: the parts keep file order."""
    text = _plain(SAMPLES / "slow_dataloader" / "rank0.pt.trace.json.gz")
    two = fast(text, tmp_path / "two", threads=2, part_bytes=16 << 10)
    three = fast(text, tmp_path / "three", threads=3, part_bytes=16 << 10)
    assert two is not None and three is not None and len(two.parts) > 10
    assert_equal(two, text, tmp_path)
    assert rows(two).equals(rows(three))


@pytest.mark.parametrize("slice_bytes", [1, 300, 1 << 30])
def test_slices_of_any_size_give_the_same_rows(slice_bytes, tmp_path):
    """Parts decoded in slices of one event each (every candidate boundary is a cut), of a
    few events, or whole: the same rows as the robust decoder, and the file is unchanged
    (the brackets written around each slice go to a private copy of its pages)."""
    text = _plain(SAMPLES / "fast_dataloader" / "rank0.pt.trace.json.gz")
    decoded = fast(text, tmp_path, slice_bytes=slice_bytes)
    assert decoded is not None
    assert_equal(decoded, text, tmp_path)
    assert (tmp_path / "trace.json").read_bytes() == text


def test_a_boundary_inside_a_string_is_refused_not_misread(tmp_path):
    """A name holding `}, {` gives a candidate boundary inside a string: a slice cut there
    is invalid JSON, so the fast path refuses (or, when no cut falls there, decodes it right)."""
    events = [{"ph": "X", "cat": "cpu_op", "name": f"op{i}" if i % 7 else 'a"}, {"ph": "X"', "pid": 1,
               "tid": 1, "ts": i, "dur": 1} for i in range(200)]
    text = json.dumps({"traceEvents": events}, indent=1).encode()
    assert fast(text, tmp_path / "every", part_bytes=1 << 30, slice_bytes=1) is None   # every candidate is a cut
    for slice_bytes in (64, 500, 1 << 30):
        decoded = fast(text, tmp_path / str(slice_bytes), part_bytes=1 << 30, slice_bytes=slice_bytes)
        if slice_bytes == 1 << 30:
            assert decoded is not None   # one part, one slice: no cut at all
        if decoded is not None:
            assert_equal(decoded, text, tmp_path / str(slice_bytes))
            assert rows(decoded)["name"].to_pylist() == [e["name"] for e in events]


def test_not_for_one_core_or_a_small_file(tmp_path):
    text = _plain(SAMPLES / "slow_dataloader" / "rank0.pt.trace.json.gz")
    assert fast(text, tmp_path / "one", threads=1) is None
    path = tmp_path / "small.json"
    path.write_bytes(text)
    assert len(text) < kineto_decode.MIN_SPLIT
    assert decode_fast(path, tmp_path / "work", 2) is None


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
    assert_equal(decoded, text, tmp_path)


def test_older_process_group_id_is_the_group_name(tmp_path):
    """Older PyTorch writes "Process Group ID" (a number) where newer writes "Process Group Name"
    (its text): pg_name falls back on it, as text; the name wins when both are there. Fast and
    robust decoders agree."""
    def nccl(ts, **args):
        return {**KERNEL, "name": "ncclKernel_AllReduce_RING_LL_Sum_float", "ts": ts,
                "args": {"correlation": ts, "device": 0, "stream": 7, "Collective name": "allreduce", **args}}
    events = [nccl(100, **{"Process Group ID": 0}), nccl(200, **{"Process Group ID": 3.0}),
              nccl(300, **{"Process Group ID": 1, "Process Group Name": "tp"}), nccl(400)]
    text = _doc(events, schemaVersion=1)
    decoded = fast(text, tmp_path)
    assert decoded is not None
    assert rows(decoded)["pg_name"].to_pylist() == ["0", "3", "tp", None]
    assert_equal(decoded, text, tmp_path)


@pytest.mark.shared
def test_process_group_id_of_a_real_older_trace(tmp_path):
    """ns_resolution_trace (PyTorch 2.0 era, NCCL 2.17.1): its record_param_comms ops carry
    "Process Group ID" 0, and its distributedInfo names that group (uid 0) "0". The trace has no
    NCCL kernels (world size 1), so its own args are put on one here: the group reads as "0"."""
    from conftest import shared_trace

    doc = json.loads(gzip.decompress(shared_trace("kineto/hta/ns_resolution_trace/"
                                                  "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz").read_bytes()))
    comms = [e["args"] for e in doc["traceEvents"] if e.get("name") == "record_param_comms"]
    assert len(comms) == 45 and {a["Process Group ID"] for a in comms} == {0}
    names = {str(g["uid"]): g["pg_name"] for g in doc["distributedInfo"]["pg_config"]}
    keep = ("Collective name", "Process Group ID", "Group size", "In msg nelems", "Out msg nelems", "dtype")
    events = [{**KERNEL, "name": "ncclKernel_AllReduce_RING_LL_Sum_float", "ts": 100 * (i + 1),
               "args": {"correlation": i + 1, "device": 0, "stream": 7, **{k: a[k] for k in keep if k in a}}}
              for i, a in enumerate(comms[:5])]
    text = _doc(events, schemaVersion=1)
    decoded = fast(text, tmp_path)
    assert decoded is not None
    got = rows(decoded)["pg_name"].to_pylist()
    assert got == [names[str(a["Process Group ID"])] for a in comms[:5]] == ["0"] * 5
    assert_equal(decoded, text, tmp_path)


def test_lower_case_external_id_trace(tmp_path):
    ev = {**KERNEL, "args": {"external id": 77, "correlation": 1}}
    text = _doc([ev, {**ev, "ts": 200}])
    decoded = fast(text, tmp_path)
    assert decoded is not None
    assert rows(decoded)["external_id"].to_pylist() == [77, 77]
    assert_equal(decoded, text, tmp_path)


def test_bare_array_and_metadata_after_the_events(tmp_path):
    text = json.dumps([KERNEL, KERNEL]).encode()
    decoded = fast(text, tmp_path / "a")
    assert decoded is not None and decoded.n_items == 2
    assert_equal(decoded, text, tmp_path)
    text = (b'{"schemaVersion": 1, "traceEvents": [' + json.dumps([KERNEL, KERNEL]).encode()[1:-1] +
            b'], "logs": ["a]", "b"], "traceName": "x]", "baseTimeNanoseconds": 5}')
    decoded = fast(text, tmp_path / "b")
    assert decoded is not None and decoded.meta.baseTimeNanoseconds == 5
    assert_equal(decoded, text, tmp_path)


REFUSED = {
    "truncated": _doc([KERNEL, KERNEL])[:-30],
    "ts as a bool": _doc([{**KERNEL, "ts": True}]),
    "pid as a float": _doc([{**KERNEL, "pid": 1.5}]),
    "name as a number": _doc([{**KERNEL, "name": 5}]),
    "grid as a string": _doc([{**KERNEL, "args": {**KERNEL["args"], "grid": "[1,1,1]"}}]),
    "non-object item": _doc([KERNEL, 5]),
    "args not an object": _doc([{**KERNEL, "args": [1]}]),
    "NaN literal": _doc([KERNEL]).replace(b'"dur": 5', b'"dur": NaN'),
    "trailing comma": _doc([KERNEL]).replace(b'"registers per thread": 90}', b'"registers per thread": 90,}'),
    "nested traceEvents first": b'{"meta": {"traceEvents": []}, "traceEvents": ' + json.dumps([KERNEL]).encode() + b"}",
    "empty event list": _doc([]),
    "not a trace": b'{"a": 1}',
    "1e400": _doc([KERNEL]).replace(b'"dur": 5', b'"dur": 1e400'),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_refuses_what_it_cannot_vouch_for(case, tmp_path):
    assert fast(REFUSED[case] * 1, tmp_path, part_bytes=64) is None
    assert not list((tmp_path / "work").glob("fast-*"))   # nothing left behind


def test_every_phase_of_the_format_stays_on_the_fast_path(tmp_path):
    """Events of every phase of the Trace Event Format (flows, instants, counters, async,
    metadata...) decode typed: the fast path applies, and keeps the X, B and E ones."""
    others = [{"ph": ph, "cat": "c", "name": f"p{ord(ph)}", "pid": 1, "tid": 1, "ts": 5, "id": 3, "bp": "e",
               "args": {"name": "x", "correlation": 1}} for ph in kineto_events.OTHER_PHASES]
    events = [others[0], {**KERNEL, "ph": "B"}, *others[1:], KERNEL, {"ph": "E", "pid": 0, "tid": 7, "ts": 200}]
    text = _doc(events)
    decoded = fast(text, tmp_path)
    assert decoded is not None and decoded.n_items == len(kineto_events.OTHER_PHASES) + 3
    assert rows(decoded)["ph"].to_pylist() == ["B", "X", "E"]
    assert_equal(decoded, text, tmp_path)


@pytest.mark.parametrize("odd, kept", [
    (b'{"ph": "x", "name": "lower-case x", "ts": 1, "dur": 1}', False),
    (b'{"name": "no phase", "ts": 1, "dur": 1}', False),
    (b'{"ph": null, "name": "null phase", "ts": 1, "dur": 1}', False),
    (b'{"ph": "X", "ph": "i", "name": "X then i", "ts": 1, "dur": 1}', False),
    (b'{"ph": "i", "ph": "X", "name": "i then X", "ts": 1, "dur": 1}', True),
])
def test_an_odd_phase_goes_the_coercion_path_and_the_last_phase_decides(odd, kept, tmp_path):
    """A phase the typed decode does not know (or a `ph` key repeated with another value) is
    refused by the fast path; the robust decoder keeps the event only when its phase, the
    last value of a repeated key as for any other field, is X, B or E."""
    text = _doc([KERNEL]).replace(b"}]}", b"}, " + odd + b"]}")
    assert fast(text, tmp_path / "fast", part_bytes=64) is None
    got = rows(robust(text, tmp_path)).to_pylist()
    assert [r["name"] for r in got] == (["gemm", "i then X"] if kept else ["gemm"])
    assert got[0] == rows(robust(_doc([KERNEL]), tmp_path / "kernel")).to_pylist()[0]


def test_a_cut_inside_a_string_is_refused(tmp_path):
    """The first event's name holds `}, {` past the middle of the array: the one cut (at the
    first candidate after the middle) lands inside it, the part before it is no JSON array,
    and the file is refused."""
    text = _doc([{**KERNEL, "name": "x" * 1000 + "}, {" + "y" * 10}, KERNEL])
    start, end = text.index(b"[") + 1, text.rindex(b"]")
    middle = start + (end - start) // 2
    assert text.find(b"}, {", middle) < text.find(b"yyy")   # the first candidate is inside the name
    assert fast(text, tmp_path, part_bytes=(end - start) // 2 + 1) is None
    assert robust(text, tmp_path).n_items == 2


# ------------------------------------------------------------------ the fuzz corpus
def check_fuzzed(doc: bytes, tmp: Path, split: bool, part_bytes: int) -> bool:
    """Where the fast decoder takes `doc` (cut in two, or every `part_bytes` when `split`),
    its rows equal the robust decoder's; returns whether it took it."""
    decoded = fast(doc, tmp, part_bytes=part_bytes if split else len(doc) + 1)
    if decoded is not None:
        assert_equal(decoded, doc, tmp)
    return decoded is not None


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
        "shared memory": ident, "blocks per SM": time, "warps per SM": time, "est. achieved occupancy %": time,
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


def test_parts_shrink_towards_the_end(tmp_path, monkeypatch):
    """Guided part sizes (`_cuts`): each part is what is left / (2 x processes), at most
    PART_BYTES and at least MIN_PART, ending at the next event boundary; the parts cover the
    event array exactly, one separator between two of them."""
    text = _doc([{**KERNEL, "ts": i} for i in range(4000)])
    event = len(json.dumps({**KERNEL, "ts": 4000})) + 2
    path = tmp_path / "t.json"
    path.write_bytes(text)
    monkeypatch.setattr(kineto_decode, "PART_BYTES", 40_000)
    monkeypatch.setattr(kineto_decode, "MIN_PART", 5_000)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        _, start, end = kineto_decode._locate(mm)
        cuts = kineto_decode._cuts(mm, start, end, 2)
        assert cuts[0][0] == start and cuts[-1][1] == end
        for (_, b), (a, _) in zip(cuts, cuts[1:]):
            assert mm[b - 1:b] == b"}" and mm[b:a] == b", " and mm[a:a + 1] == b"{"
        for a, b in cuts[:-1]:
            want = min(40_000, max(5_000, (end - a) // 4))
            assert want <= b - a < want + event
    sizes = [b - a for a, b in cuts]
    assert sizes[0] < 40_000 + event and len(sizes) > 20
    assert sizes[-3] < 5_000 + event and sizes[-2] < 5_000 + event   # the small ones come last
    assert all(later < earlier + event for earlier, later in zip(sizes, sizes[1:]))   # never growing


def test_a_small_document_still_gives_each_process_a_part(tmp_path):
    """Below MIN_PART x processes the parts are the document / processes, one each."""
    text = _doc([{**KERNEL, "ts": i} for i in range(100)])
    path = tmp_path / "t.json"
    path.write_bytes(text)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        _, start, end = kineto_decode._locate(mm)
        for workers in (2, 3):
            assert len(kineto_decode._cuts(mm, start, end, workers)) == workers
