"""The input shapes of torch.autograd.profiler.emit_nvtx(record_shapes=True) ranges in an
nsys export: regions.input_dims from the range's name."""
from __future__ import annotations

import polars as pl

# torch.autograd.profiler.emit_nvtx(record_shapes=True) names an op's range
# `aten::addmm, seq = 12, op_id = 5, sizes = [[3], [3, 4], [4, 3]], input_op_ids = [(0, 0), (1, 0)]`
# (torch/csrc/profiler/util.cpp getNvtxStr; older PyTorch: no op_id/input_op_ids): `sizes` is a
# list of int lists, one per input ([] = no tensor), flattened
_INT = r"-?\d+"
_SHAPE = rf"\[(?:{_INT}(?:, {_INT})*)?\]"
_SIZES = rf"^\[(?:{_SHAPE}(?:, {_SHAPE})*)?\]$"
_SIZES_AT, _OP_IDS_AT = ", sizes = ", ", input_op_ids = "


def emit_nvtx_sizes(names: pl.Series) -> pl.Series:
    """regions.input_dims of emit_nvtx ranges: the `sizes = [...]` of each name as compact JSON
    (`[[3],[3,4],[4,3]]`); null for any other name, or sizes that are no list of int lists.
    The names are cut by literal search (a capturing regex over every name cost 1.3 µs a
    name); the check and the compaction run once per distinct sizes text."""
    name = pl.col("name")
    tail = names.to_frame("name").select(tail=name.str.slice(name.str.find(_SIZES_AT, literal=True) + len(_SIZES_AT)))
    if tail["tail"].null_count() == tail.height:   # no emit_nvtx shapes (most exports)
        return tail["tail"].alias("input_dims")
    end = pl.col("tail").str.find(_OP_IDS_AT, literal=True)
    cut = tail.select(sizes=pl.when(end.is_null()).then("tail").otherwise(pl.col("tail").str.head(end)))
    sizes = pl.col("sizes")
    distinct = cut["sizes"].unique().drop_nulls().to_frame().with_columns(
        input_dims=pl.when(sizes.str.contains(_SIZES)).then(sizes.str.replace_all(" ", "", literal=True)))
    return cut.join(distinct, on="sizes", how="left", maintain_order="left")["input_dims"]
