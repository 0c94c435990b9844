"""Which op call owns each GPU op (traceq/engine/op_owner.py), on hand-made call trees of one
thread: calls as (op, family, start, end), points as launch times; the expected owner of each
point is read off the tree by the rule (the outermost enclosing call that is no wrapper of a
same-family call; if all are wrappers, the innermost)."""
from __future__ import annotations

import polars as pl

from traceq.engine.op_owner import owners


def _owners(calls: list[tuple], points: list[int], clock: str = "host") -> list[str | None]:
    c = pl.DataFrame([{"rank": 0, "pid": 1, "tid": 1, "clock": clock, "op": op, "family": fam,
                       "start_ns": s, "end_ns": e} for op, fam, s, e in calls])
    p = pl.DataFrame({"rank": [0] * len(points), "pid": [1] * len(points), "tid": [1] * len(points),
                      "clock": [clock] * len(points), "t_ns": points})
    got = owners(c, p).to_list()
    return [None if i is None else calls[i][0] for i in got]


def test_convolution_keeps_its_bias_add_and_transposes():
    # aten::convolution [0, 100] > (unmodelled _convolution) > add_ [60, 70]: the transpose
    # launched at 10 and the add at 65 both belong to the convolution (another family inside it)
    calls = [("aten::convolution", "conv", 0, 100), ("aten::add_", "elementwise", 60, 70)]
    assert _owners(calls, [10, 65]) == ["aten::convolution", "aten::convolution"]


def test_a_wrapper_yields_to_the_op_of_its_family_inside_it():
    # linear [0, 100] > addmm [10, 90]: the GEMM at 50 is the addmm's; a bias add the linear
    # launches itself at 95 (no inner op around it) stays the linear's (every enclosing call a
    # wrapper: the innermost)
    calls = [("aten::linear", "gemm", 0, 100), ("aten::addmm", "gemm", 10, 90)]
    assert _owners(calls, [50, 95]) == ["aten::addmm", "aten::linear"]


def test_a_copy_a_wrapper_makes_outside_its_inner_op_is_the_copys():
    # matmul [0, 100] > copy_ [5, 20] (contiguous operand), bmm [30, 90]: the copy kernel is
    # copy_'s (matmul is a wrapper: it yields), the GEMM kernel bmm's
    calls = [("aten::matmul", "gemm", 0, 100), ("aten::copy_", "elementwise", 5, 20), ("aten::bmm", "gemm", 30, 90)]
    assert _owners(calls, [10, 50]) == ["aten::copy_", "aten::bmm"]


def test_points_outside_every_call_and_on_call_boundaries():
    # calls [10, 20] and [20, 30] touch: a point at 20 is in the second (the first has ended:
    # ends come first at an instant); 5 and 35 are in none
    calls = [("aten::mm", "gemm", 10, 20), ("aten::bmm", "gemm", 20, 30)]
    assert _owners(calls, [5, 20, 35, 15]) == [None, "aten::bmm", None, "aten::mm"]


def test_deep_nesting_of_three_wrappers():
    # layer_norm [0, 100] > native_layer_norm [1, 99]; a second tree: sdpa [200, 300] >
    # _scaled_dot_product_flash_attention [210, 290] > (unmodelled flash fwd) and a softmax
    # [220, 230] of another family inside it
    calls = [("aten::layer_norm", "norm", 0, 100), ("aten::native_layer_norm", "norm", 1, 99),
             ("aten::scaled_dot_product_attention", "attention", 200, 300),
             ("aten::_scaled_dot_product_flash_attention", "attention", 210, 290),
             ("aten::_softmax", "softmax", 220, 230)]
    assert _owners(calls, [50, 215, 225]) == ["aten::native_layer_norm", "aten::_scaled_dot_product_flash_attention",
                                              "aten::_scaled_dot_product_flash_attention"]
