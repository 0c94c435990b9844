"""The input sizes of ops profiled with `torch.autograd.profiler.emit_nvtx(record_shapes=True)`:
nsys keeps them in the NVTX range's name (`aten::addmm, seq = 12, op_id = 5, sizes = [[3], [3,
4], [4, 3]], input_op_ids = [(0, 0), (1, 0)]`, torch/csrc/profiler/util.cpp getNvtxStr), which
ingest reads into regions.input_dims as compact JSON, the name left as it is."""
from __future__ import annotations

import sqlite3

import polars as pl
import pytest

from conftest import shared_trace
from test_nsys_ingest import SAMPLE, edited_copy, ingested, q

SHAPES = ("input_dims", "input_types", "input_strides", "concrete_inputs")
# text of the sample's ranges (3 each) -> the name emit_nvtx would give them
NAMES = {
    "forward": "aten::addmm, seq = 12, op_id = 5, sizes = [[3], [3, 4], [4, 3]], input_op_ids = [(0, 0), (1, 0)]",
    "backward": "aten::mul, seq = 7, sizes = [[2, 8], []]",                 # older PyTorch: no op ids
    "optimizer": "aten::empty, seq = 3, op_id = 9, sizes = []",               # an op without inputs
    "step": "aten::relu, seq = 3",                                            # record_shapes off
    "prefetch": "my range, sizes = [[1, x]]",                                 # not a list of int lists
}


def test_emit_nvtx_sizes_become_input_dims(tmp_path):
    edited = edited_copy(SAMPLE, tmp_path, *(f"UPDATE NVTX_EVENTS SET text = '{new}' WHERE text = '{old}'"
                                             for old, new in NAMES.items()))
    store = ingested(edited, tmp_path)
    got = q(store, f"SELECT name, {', '.join(SHAPES)} FROM regions WHERE source = 'nvtx'")
    by_name = {r["name"]: r for r in got.to_dicts()}
    assert set(NAMES.values()) <= set(by_name)   # the names are kept as written
    assert got.filter(pl.col("name") == NAMES["forward"]).height == 3
    assert by_name[NAMES["forward"]]["input_dims"] == "[[3],[3,4],[4,3]]"
    assert by_name[NAMES["backward"]]["input_dims"] == "[[2,8],[]]"
    assert by_name[NAMES["optimizer"]]["input_dims"] == "[]"
    for name in (NAMES["step"], NAMES["prefetch"], "epoch"):
        assert by_name[name]["input_dims"] is None
    # nsys has only the sizes: the other three are null everywhere
    assert got.select(pl.col(c).null_count() for c in SHAPES[1:]).row(0) == (got.height,) * 3


def test_registered_string_names_are_read_too(tmp_path):
    """A range named through StringIds (textId) gets its sizes as well."""
    name = "aten::add, seq = 1, sizes = [[5, 5], [5, 5], []]"
    con = sqlite3.connect(SAMPLE)
    (text_id,) = con.execute("SELECT DISTINCT textId FROM NVTX_EVENTS WHERE textId IS NOT NULL").fetchone()
    con.close()
    edited = edited_copy(SAMPLE, tmp_path, f"UPDATE StringIds SET value = '{name}' WHERE id = {text_id}")
    store = ingested(edited, tmp_path)
    got = q(store, f"SELECT DISTINCT input_dims FROM regions WHERE name = '{name}'")
    assert got["input_dims"].to_list() == ["[[5,5],[5,5],[]]"]


def test_real_emit_nvtx_export_without_shapes_has_null_sizes(tmp_path):
    # DLProf's export: emit_nvtx ranges like 'aten::conv2d, seq = 0', recorded without shapes
    store = ingested(shared_trace("nsys/DLProf/w_Relu/nsys_profile.sqlite"), tmp_path)
    got = q(store, "SELECT count(*) AS n, count(input_dims) AS dims FROM regions WHERE name LIKE 'aten::%, seq = %'")
    assert got["n"][0] > 0 and got["dims"][0] == 0


@pytest.mark.parametrize("name, want", [
    ("aten::addmm, seq = 12, op_id = 5, sizes = [[3], [3, 4], [4, 3]], input_op_ids = [(0, 0), (1, 0)]",
     "[[3],[3,4],[4,3]]"),
    ("aten::addmm, sizes = [[-1, 2]]", "[[-1,2]]"),
    ("aten::cat, seq = 1, sizes = [[2, 3], [2, 3]], input_op_ids = [(4, 0)]", "[[2,3],[2,3]]"),
    ("sizes = [[3]]", None),                           # not after a name
    ("aten::x, sizes = [[3]] and more", None),         # something after the list
    ("aten::x, sizes = [[3], [4]", None),              # unclosed
    (None, None),
])
def test_emit_nvtx_sizes_expression(name, want):
    from traceq.ingest.nsys.emit_nvtx import emit_nvtx_sizes

    names = pl.Series("name", [name, "forward", name], pl.String)
    assert emit_nvtx_sizes(names).to_list() == [want, None, want]
