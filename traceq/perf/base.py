"""OpCost (what a model answers) and Args (one op call's recorded arguments, read safely).

Kineto records, per argument position: `Input Dims` (a list of sizes; [] for a 0-d tensor, a
scalar or an absent optional), `Input type` ('c10::BFloat16', 'Scalar', '' for None, ...),
`Concrete Inputs` (the value of a scalar argument as text: '1', 'False', '[16, 16]') and
`Input Strides`. nsys (emit_nvtx record_shapes) gives the dims only: `types` is None, so
flop can be computed but not bytes or the dtype. Every accessor answers None on odd input;
models turn a None they need into "not modelled" (None), never an exception.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from math import prod

from .dtypes import NOT_TENSOR, compute_key, element_bytes


@dataclass(frozen=True)
class OpCost:
    """Cost of one call. `bytes` is the minimal traffic (each input read once, each output
    written once), None when an element size is unknown; `unit` is "matrix" for ops that
    tensor/matrix cores run (gemm, attention, conv), "vector" otherwise."""

    family: str        # gemm | attention | conv | norm | softmax | elementwise | reduce | embedding
    flop: int
    bytes: int | None
    dtype: str | None  # fp64 fp32 bf16 fp16 fp8 int8, None if unknown
    unit: str


def is_shape(value) -> bool:
    return isinstance(value, (list, tuple)) and all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)


class Args:
    """The positional arguments of one call."""

    def __init__(self, dims, types=None, concrete=None, strides=None):
        self.dims = list(dims) if isinstance(dims, (list, tuple)) else []
        self.types = list(types) if isinstance(types, (list, tuple)) else None
        self.concrete = list(concrete) if isinstance(concrete, (list, tuple)) else []
        self.strides = list(strides) if isinstance(strides, (list, tuple)) else []

    def type(self, i: int) -> str | None:
        if self.types is None or not 0 <= i < len(self.types):
            return None
        t = self.types[i]
        return t if isinstance(t, str) else None

    def shape(self, i: int) -> list[int] | None:
        """The sizes of tensor argument i; None when it is absent or not a tensor. Without
        types (nsys), an empty dims list is taken for "absent" (a 0-d tensor looks the same)."""
        if not 0 <= i < len(self.dims) or not is_shape(self.dims[i]):
            return None
        if self.types is None:
            return list(self.dims[i]) or None
        t = self.type(i)
        if t is None or t in NOT_TENSOR:
            return None
        return list(self.dims[i])

    def has(self, i: int) -> bool:
        return self.shape(i) is not None

    def size(self, i: int) -> int | None:
        """Bytes per element of tensor argument i (None without types or for an unknown type)."""
        return element_bytes(self.type(i))

    def dtype(self, i: int) -> str | None:
        return compute_key(self.type(i))

    def unique(self, i: int) -> int:
        """Distinct elements of tensor argument i: a size-0 stride (an expanded view) repeats
        the same memory, so that dimension is not counted. Without strides: every element."""
        shape = self.shape(i) or []
        st = self.strides[i] if 0 <= i < len(self.strides) else None
        if is_shape(st) and len(st) == len(shape) and shape:
            return prod(n for n, s in zip(shape, st) if s != 0)
        return prod(shape)

    def read(self, i: int) -> int | None:
        """Bytes to read tensor argument i once (0 when absent); None if its size is unknown."""
        if not self.has(i):
            return 0
        size = self.size(i)
        return None if size is None else self.unique(i) * size

    def value(self, i: int):
        """The Python value of concrete argument i ('[16, 16]' -> [16, 16]); None if absent."""
        if not 0 <= i < len(self.concrete):
            return None
        text = self.concrete[i]
        if not isinstance(text, str):
            return text
        text = text.strip()
        if not text:
            return None
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return {"true": True, "false": False}.get(text.lower())

    def flag(self, i: int, default: bool = False) -> bool:
        v = self.value(i)
        return v if isinstance(v, bool) else (bool(v) if isinstance(v, int) else default)

    def ints(self, i: int, n: int | None = None) -> list[int] | None:
        """Concrete argument i as a list of ints, a single value repeated to n entries."""
        v = self.value(i)
        if isinstance(v, int) and not isinstance(v, bool):
            v = [v]
        if not isinstance(v, (list, tuple)) or not all(
                isinstance(x, int) and not isinstance(x, bool) for x in v):
            return None
        v = list(v)
        if n is not None and len(v) == 1:
            v = v * n
        return v if n is None or len(v) == n else None


def total(*parts: int | None) -> int | None:
    """Sum of byte counts, None when any is unknown."""
    return None if any(p is None for p in parts) else sum(parts)


def times(count: int, size: int | None) -> int | None:
    return None if size is None else count * size


def broadcast(shapes: list[list[int]]) -> list[int] | None:
    """NumPy broadcasting of several shapes; None when they do not broadcast."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(rank):
        sizes = {s[len(s) - rank + d] for s in shapes if len(s) - rank + d >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return out
