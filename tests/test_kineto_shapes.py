"""The shapes of CPU ops recorded with `record_shapes=True` (Kineto args "Input Dims", "Input
type", "Input Strides", "Concrete Inputs") kept in host_ops as compact JSON text, by the typed
decoders and the coercion path alike; null where a trace has none. Expected values are read
from the trace files themselves (quoted in the tests)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

from conftest import shared_trace
from traceq.ingest import ingest
from traceq.schema import HOST_OPS_COLUMNS
from traceq.store import Store, fetch_pl

SHAPES = ("input_dims", "input_types", "input_strides", "concrete_inputs")
BERT = "kineto/tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz"


def q(store: Path, sql: str) -> pl.DataFrame:
    return fetch_pl(Store(store).connect(), sql)


def ingested(path: Path, store: Path) -> Path:
    ingest([path], store, jobs=1)
    return store


def shapes_of(store: Path, where: str) -> dict:
    rows = q(store, f"SELECT {', '.join(SHAPES)} FROM host_ops WHERE {where}").to_dicts()
    assert len(rows) == 1, rows
    return rows[0]


def write(tmp: Path, events: list, name: str = "t.json", raw: str | None = None) -> Path:
    p = tmp / name
    p.write_text(raw if raw is not None else json.dumps({"traceEvents": events}))
    return p


def test_columns_are_the_last_four_of_host_ops():
    assert [c for c, _ in HOST_OPS_COLUMNS[-4:]] == list(SHAPES)
    assert all(t == "string" for _, t in HOST_OPS_COLUMNS[-4:])


def test_addmm_of_a_real_bf16_trace(tmp_path):
    # the trace's aten::addmm with External id 49 (ts 1419247333894.317) has, pretty-printed:
    # "Concrete Inputs": ["", "", "", "1", "1"], "Input type": ["c10::BFloat16" x3, "Scalar" x2],
    # "Input Strides": [[1], [512, 1], [1, 512], [], []], "Input Dims": [[512], [141, 512], [512, 512], [], []]
    store = ingested(shared_trace(BERT), tmp_path / "s")
    got = shapes_of(store, "name = 'aten::addmm' AND external_id = 49")
    assert got["input_dims"] == "[[512],[141,512],[512,512],[],[]]"
    assert json.loads(got["input_types"]) == ["c10::BFloat16"] * 3 + ["Scalar"] * 2
    assert json.loads(got["input_strides"]) == [[1], [512, 1], [1, 512], [], []]
    assert json.loads(got["concrete_inputs"]) == ["", "", "", "1", "1"]
    # every cpu_op of this trace has the four args; no other host op has any
    counts = q(store, "SELECT kind = 'cpu_op' AS op, count(*) AS n, " +
               ", ".join(f"count({c}) AS {c}" for c in SHAPES) + " FROM host_ops GROUP BY 1").to_dicts()
    for row in counts:
        assert all(row[c] == (row["n"] if row["op"] else 0) for c in SHAPES), row


def test_the_coercion_path_keeps_the_same_shapes(tmp_path):
    """A chunk with an item that is no JSON object fails the typed decode and is coerced event
    by event (`recover._coerce_chunk`): the shape columns are those of the typed decode."""
    text = gzip.decompress(shared_trace(BERT).read_bytes()).decode()
    at = text.index('"traceEvents": [') + len('"traceEvents": [')
    odd = write(tmp_path, [], "odd.json", raw=text[:at] + "1, " + text[at:])
    typed = ingested(shared_trace(BERT), tmp_path / "typed")
    coerced = ingested(odd, tmp_path / "coerced")
    sql = f"SELECT name, start_ns, {', '.join(SHAPES)} FROM host_ops ORDER BY start_ns, name, end_ns"
    a, b = q(typed, sql), q(coerced, sql)
    assert b["input_dims"].null_count() < b.height   # shapes were there to compare
    assert a.equals(b)
    warnings = q(coerced, "SELECT warnings FROM runs")["warnings"][0]
    assert "not JSON objects" in warnings   # it did go the coercion path


def test_a_trace_without_shapes_has_nulls(tmp_path):
    # recorded without record_shapes: no "Input Dims" (or "Input dims") in its 359 cpu_ops
    store = ingested(shared_trace("kineto/hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"), tmp_path / "s")
    got = q(store, "SELECT count(*) AS n, " + ", ".join(f"count({c}) AS {c}" for c in SHAPES)
            + " FROM host_ops WHERE kind = 'cpu_op'").to_dicts()[0]
    assert got["n"] > 0 and all(got[c] == 0 for c in SHAPES)


def _op(name: str, ts: float, args: dict) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 1, "args": args}


@pytest.mark.parametrize("coerce", [False, True])
def test_values_compact_and_odd_ones_null(tmp_path, coerce):
    events = [
        _op("a", 1, {"Input Dims": [[3], [3, 4]], "Input type": ["float", "c10::Half"],
                     "Concrete Inputs": ["", "[16, 16]", "a \"q\" b"], "Input Strides": [[1], [4, 1]]}),
        _op("b", 2, {"Input dims": [[2, 2]]}),                     # older PyTorch
        _op("c", 3, {"Input Dims": "[[1]]", "Input type": None, "Concrete Inputs": 5, "Input Strides": {}}),
        _op("d", 4, {}),
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 2, "dur": 1,
         "args": {"Input Dims": [[1]], "correlation": 1}},            # not a CPU op: not read
    ]
    text = json.dumps({"traceEvents": ([1] if coerce else []) + events}, indent=2)   # pretty-printed
    store = ingested(write(tmp_path, [], raw=text), tmp_path / "s")
    a = shapes_of(store, "name = 'a'")
    assert a == {"input_dims": "[[3],[3,4]]", "input_types": '["float","c10::Half"]',
                 "input_strides": "[[1],[4,1]]", "concrete_inputs": '["","[16, 16]","a \\"q\\" b"]'}
    assert shapes_of(store, "name = 'b'")["input_dims"] == "[[2,2]]"
    for name in ("c", "d"):
        assert set(shapes_of(store, f"name = '{name}'").values()) == {None}
    assert q(store, "SELECT count(*) AS n FROM gpu_ops").item() == 1


def test_an_old_store_reads_the_new_columns_as_null(tmp_path):
    """A host_ops file written before the columns existed: the views add them as NULL."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    store = ingested(write(tmp_path, [_op("a", 1, {"Input Dims": [[3]]})]), tmp_path / "s")
    files = list((store / "host_ops").rglob("*.parquet"))
    assert len(files) == 1
    t = pq.read_table(files[0])
    pq.write_table(t.drop_columns(list(SHAPES)), files[0])
    got = q(store, f"SELECT name, {', '.join(SHAPES)} FROM host_ops").to_dicts()
    assert got == [{"name": "a", **{c: None for c in SHAPES}}]
    assert isinstance(t.schema.field("input_dims").type, type(pa.string()))


def test_json_lists_of_raw_texts():
    import msgspec

    from traceq.ingest.kineto.rows import json_lists

    raws = [msgspec.Raw(b'[[1, 2],\n  [3]]'), msgspec.Raw(), msgspec.Raw(b'["\xff"]'), msgspec.Raw(b'"[1]"'),
            msgspec.Raw(b'[ "a  b" , "c\\\\" ]'), msgspec.Raw(b'null'), msgspec.Raw(b'[[1, 2],\n  [3]]')]
    assert json_lists(raws).to_pylist() == ["[[1,2],[3]]", None, None, None, '["a  b","c\\\\"]', None, "[[1,2],[3]]"]
    assert json_lists([msgspec.Raw()] * 3).to_pylist() == [None] * 3


def test_begin_end_pairs_keep_the_shapes_of_their_begin(tmp_path):
    events = [
        {"ph": "B", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10,
         "args": {"Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"]}},
        {"ph": "E", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 20},
    ]
    store = ingested(write(tmp_path, events), tmp_path / "s")
    assert shapes_of(store, "name = 'aten::mm' AND end_ns = 20000") == {
        "input_dims": "[[2,3],[3,4]]", "input_types": '["float","float"]', "input_strides": None, "concrete_inputs": None}
