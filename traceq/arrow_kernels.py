"""Arrow compute kernels called by name, for the start-up of an ingest.

`pyarrow.compute` writes a Python wrapper, docstring included, for each of Arrow's ~300
kernels when it is imported: ~20 ms before the first event is decoded, in a command whose
whole run on a 33 MB trace is ~0.45 s. The wrappers call `call_function` of its Cython core,
`pyarrow._compute`, which loads in ~5 ms; the ingest path calls that directly (and falls back
to the public module on a pyarrow without it). Arrow methods that import `pyarrow.compute`
behind the scenes (`Array.is_null`, `Array.fill_null`, ...) are avoided on that path too.
"""
from __future__ import annotations

import pyarrow as pa

try:
    from pyarrow._compute import (CastOptions, MatchSubstringOptions, ReplaceSubstringOptions, SetLookupOptions,
                                  call_function)
except ImportError:   # pragma: no cover - every pyarrow since 1.0 has it
    from pyarrow.compute import (CastOptions, MatchSubstringOptions, ReplaceSubstringOptions, SetLookupOptions,
                                 call_function)

__all__ = ["call", "cast", "fill_null", "is_in", "is_null", "replace_regex", "starts_with", "take"]


def call(kernel: str, *args):
    """The Arrow kernel `kernel` on `args` (arrays, scalars, Python values)."""
    return call_function(kernel, list(args))


def is_in(values: pa.Array, value_set: pa.Array) -> pa.BooleanArray:
    """Whether each value is in `value_set`, as `pyarrow.compute.is_in` says it: a null is in it
    only when the set holds a null (false otherwise, not null)."""
    return call_function("is_in", [values], SetLookupOptions(value_set))


def is_null(values: pa.Array) -> pa.BooleanArray:
    return call_function("is_null", [values])


def fill_null(values: pa.Array, fill) -> pa.Array:
    """`values` with nulls replaced by `fill` (a value of their type)."""
    return call_function("coalesce", [values, pa.scalar(fill, values.type)])


def starts_with(values: pa.Array, prefix: str) -> pa.BooleanArray:
    return call_function("starts_with", [values], MatchSubstringOptions(prefix))


def replace_regex(values: pa.Array, pattern: str, replacement: str) -> pa.Array:
    """Every match of the RE2 `pattern` replaced (`\\1` in `replacement`: the first group)."""
    return call_function("replace_substring_regex", [values], ReplaceSubstringOptions(pattern, replacement))


def take(values: pa.Array, indices: pa.Array) -> pa.Array:
    """values[indices] (bounds checked, as `Array.take`)."""
    return call_function("take", [values, indices])


def cast(values, to: pa.DataType):
    """`values` as type `to`, checked (as `Array.cast`: a value that does not fit raises
    ArrowInvalid)."""
    return call_function("cast", [values], CastOptions.safe(to))
