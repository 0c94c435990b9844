"""Memory-bound ops: elementwise (unary, binary, ternary, in-place), softmax, reductions and
embedding lookups. All "vector" unit.

Elementwise: the output shape is the broadcast of the tensor inputs; flop = 1 per output
element for every op, copies and fills included (TraceLens' Unary/BinaryElementwise
convention; transcendental functions are not weighted). Bytes: each tensor input's distinct
elements read once (a size-0 stride, an expanded view, is read once: TraceLens counts the
expanded size), the output written once; a Scalar argument reads nothing (TraceLens counts a
few bytes for it); an in-place op (`name_`) writes its self tensor, and fill_/zero_ do not
read it. A comparison writes bools; other ops write the type of the largest tensor input
(in-place: self's type).

Softmax (dim-wise, ATen _softmax/_log_softmax and their backward): flop 5 per element forward
(max, subtract, exp, sum, divide), 4 backward (the grad·output dot: 2; subtract, scale: 2);
bytes: forward x read and y written; backward grad_output and output read, grad_input written.
A half_to_float forward writes fp32.

Reductions: output elements = the product of the dims not reduced (keepdim changes the shape,
not the count); an empty or absent dim list reduces everything. flop per input element: 1
(sum, mean, max, amax, argmax, ...), 3 for var/std, 2 for norm. Bytes: input read, output
written (indices: 8 bytes each). TraceLens' sum over dim 0 of [8, 16] writes 1 element (516 B)
where the result has 16 (576 B).

Embedding: forward reads the indices and the rows they pick (indices × dim) and writes as
many; flop 0. Backward (dense): reads grad_output and the indices, writes the num_weights ×
dim gradient (zeroed, then rows added); flop = grad_output elements (the adds).
"""
from __future__ import annotations

from math import prod

from .base import Args, OpCost, broadcast, total


COMPARISONS = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "isfinite",
                         "logical_and", "logical_or", "logical_not", "logical_xor"})
WRITE_ONLY = frozenset({"fill_", "zero_", "normal_", "uniform_", "random_", "bernoulli_"})
REDUCE_FLOP = {"var": 3, "std": 3, "var_mean": 3, "std_mean": 3, "norm": 2,
               "linalg_vector_norm": 2}
INDEX_RESULTS = {"argmax": (False, True), "argmin": (False, True),
                 "max": (True, True), "min": (True, True)}


def base_name(name: str) -> str:
    return name.rsplit("::", 1)[-1].split(".")[0]


def elementwise(a: Args, name: str) -> OpCost | None:
    op = base_name(name)
    tensors = [i for i in range(len(a.dims)) if a.has(i)]
    if not tensors:
        return None
    inplace = op.endswith("_") and not op.startswith("_")
    if op == "copy_":
        if len(tensors) < 2 or tensors[0] != 0:
            return None
        out_shape = a.shape(0)
        if broadcast([out_shape, a.shape(tensors[1])]) != out_shape:
            return None
        reads = [a.read(tensors[1])]
    else:
        out_shape = a.shape(0) if inplace and a.has(0) else broadcast([a.shape(i) for i in tensors])
        if out_shape is None or (inplace and broadcast([a.shape(i) for i in tensors]) != out_shape):
            return None
        reads = [a.read(i) for i in tensors if not (op in WRITE_ONLY and i == 0)]
    n = prod(out_shape)
    if op.rstrip("_") in COMPARISONS:
        out_size = 1 if a.types is not None else None
    elif inplace or op == "copy_":
        out_size = a.size(0)
    else:
        largest = max(tensors, key=lambda i: (len(a.shape(i)), prod(a.shape(i))))
        out_size = a.size(largest)
    out = None if out_size is None else n * out_size
    key_input = 0 if inplace or op == "copy_" else max(tensors, key=lambda i: prod(a.shape(i)))
    return OpCost("elementwise", n, total(*reads, out), a.dtype(key_input), "vector")


def softmax(a: Args, backward: bool) -> OpCost | None:
    x = a.shape(0)
    if not x:
        return None
    n = prod(x)
    if backward:          # _softmax_backward_data(grad_output, output, dim, input_dtype)
        reads = [a.read(0), a.read(1)]
        size = a.size(0)
        return OpCost("softmax", 4 * n, total(*reads, None if size is None else n * size),
                      a.dtype(0), "vector")
    size = 4 if a.flag(2) and a.types is not None else a.size(0)   # half_to_float
    return OpCost("softmax", 5 * n, total(a.read(0), None if size is None else n * size),
                  a.dtype(0), "vector")


def reduce(a: Args, name: str, dim: int) -> OpCost | None:
    op = base_name(name)
    x = a.shape(0)
    if x is None:
        return None
    n = prod(x)
    d = a.value(dim)
    if isinstance(d, bool) or d is None or d == []:
        reduced = set(range(len(x)))
    elif isinstance(d, int):
        reduced = {d % len(x)} if x else set()
    elif isinstance(d, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool)
                                              for v in d):
        if x and any(not -len(x) <= v < len(x) for v in d):
            return None
        reduced = {v % len(x) for v in d} if x else set()
    else:
        return None
    out = prod(s for i, s in enumerate(x) if i not in reduced)
    values, indices = INDEX_RESULTS.get(op, (True, False))
    if op in ("max", "min") and not isinstance(d, int):
        indices = False             # max(self): the value only
    size = a.size(0)
    written = None if size is None else out * (size * values + 8 * indices)
    return OpCost("reduce", REDUCE_FLOP.get(op, 1) * n, total(a.read(0), written),
                  a.dtype(0), "vector")


def embedding(a: Args, backward: bool) -> OpCost | None:
    if not backward:       # embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse)
        w, idx = a.shape(0), a.shape(1)
        if w is None or len(w) != 2 or idx is None:
            return None
        rows = prod(idx) * w[1]
        size = a.size(0)
        moved = None if size is None else 2 * rows * size
        return OpCost("embedding", 0, total(a.read(1), moved), a.dtype(0), "vector")
    # embedding_(dense_)backward(grad_output, indices, num_weights, padding_idx, ...)
    g, idx, num = a.shape(0), a.shape(1), a.value(2)
    if not g or idx is None or not isinstance(num, int) or isinstance(num, bool) or num < 0:
        return None
    size = a.size(0)
    written = None if size is None else num * g[-1] * size
    return OpCost("embedding", prod(g), total(a.read(0), a.read(1), written), a.dtype(0), "vector")


