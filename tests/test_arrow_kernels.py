"""traceq.arrow_kernels: Arrow kernels called by name for the ingest path (issue 11's start-up),
with the answers of the pyarrow methods and `pyarrow.compute` functions they replace, on
values chosen by hand (nulls, overflow, out-of-range indices)."""
from __future__ import annotations

import pyarrow as pa
import pytest

from traceq import arrow_kernels as ak


def test_is_in_counts_a_null_in_only_when_the_set_holds_one():
    values = pa.array(["X", None, "B", "i"])
    assert ak.is_in(values, pa.array(["B", "E", "X"])).to_pylist() == [True, False, True, False]
    assert ak.is_in(values, pa.array(["i", None])).to_pylist() == [False, True, False, True]


def test_is_null_and_fill_null():
    values = pa.array([3, None, -1], pa.int64())
    assert ak.is_null(values).to_pylist() == [False, True, False]
    filled = ak.fill_null(values, 0)
    assert filled.type == pa.int64() and filled.to_pylist() == [3, 0, -1]
    assert ak.fill_null(pa.array([True, None]), False).to_pylist() == [True, False]


def test_call_takes_arrays_scalars_and_python_values():
    lengths = pa.array([0, 2, 3], pa.int32())
    has = ak.call("greater", lengths, 1)
    assert has.to_pylist() == [False, True, True]
    assert ak.call("if_else", has, ak.call("add", lengths, 10), pa.scalar(None, pa.int32())).to_pylist() == [None, 12, 13]
    assert ak.call("indices_nonzero", has).to_pylist() == [1, 2]
    assert ak.call("list_value_length", pa.array([[1, 2], None, []])).to_pylist() == [2, None, 0]


def test_take_checks_its_bounds():
    values = pa.array([10, 20, 30])
    assert ak.take(values, pa.array([2, 0, 0])).to_pylist() == [30, 10, 10]
    with pytest.raises(IndexError):
        ak.take(values, pa.array([3]))


def test_cast_is_checked_like_the_array_method():
    assert ak.cast(pa.chunked_array([[1, None, 7]]), pa.int32()).to_pylist() == [1, None, 7]
    with pytest.raises(pa.ArrowInvalid):
        ak.cast(pa.array([10**12]), pa.int32())   # does not fit: raises, as Array.cast does
    with pytest.raises(pa.ArrowInvalid):
        pa.array([10**12]).cast(pa.int32())


def test_schema_cast_still_nulls_the_integers_that_do_not_fit():
    from traceq.schema import cast

    out = cast(pa.chunked_array([[1, 10**12, None, -(2**31)]]), pa.int32())
    assert out.type == pa.int32() and out.to_pylist() == [1, None, None, -(2**31)]
