"""Hypothesis strategies for hostile kernel names, and the contract the name parser keeps.

Shared by tests/test_hostile_names.py (small budget) and benchmarks/fuzz_long.py (`--only
names`). The class generated: mangled names whose length prefixes are digit runs of any size
(past Python's 4300-digit int limit) or longer than the name; deep, unbalanced and interleaved
brackets; wrappers nested thousands deep; operator names and lambdas; runs of separators;
names past the parse cap; random text and random bytes decoded with replacement.

The contract (`check_name`): `kernel_identity`, `kernel_library`, `uses_tensor_cores` and
`classify` never raise; the identity is a string no longer than twice the parse cap; the
name's first `PARSE_CHARS` characters decide everything (the rest is never read).
"""
from __future__ import annotations

from hypothesis import strategies as st

PIECES = ["<", ">", "(", ")", "[", "]", "{", "}", "::", ":", ",", " ", "*", "&", "operator()", "operator<<",
          "operator<", "operator>", "(anonymous namespace)", "<unnamed>", "{lambda(float)#1}",
          "[lambda() (instance 1)]", "cutlass::Kernel<", "cutlass::device_kernel<", "Kernel2<", "void ", "const",
          "at::native::", "\n", "\x02", "\x03", "\x01", "_Z", "_ZN", "S_", "I", "E"]


def _digits(draw) -> str:
    """A run of 1 to 6000 digits (a pattern repeated: int() of over 4300 digits raises)."""
    n = draw(st.sampled_from([1, 2, 5, 9, 19, 20, 4300, 4301, 5000, 6000]))
    pattern = draw(st.text("0123456789", min_size=1, max_size=12))
    return (pattern * (n // len(pattern) + 1))[:n]


@st.composite
def mangled_name(draw) -> str:
    """`_Z`/`_ZN` + length-prefixed source names, some lengths absurd (thousands of digits,
    longer than what follows), a wrapper's template argument after `I`."""
    out = [draw(st.sampled_from(["_Z", "_ZN", "_ZNK", "_ZNVKr"]))]
    for _ in range(draw(st.integers(0, 6))):
        if draw(st.integers(0, 4)) == 0:
            out.append(_digits(draw))
        else:
            ident = draw(st.text("abcdefgKernel_0123456789", max_size=12))
            out.append(str(len(ident) + draw(st.sampled_from([0, 0, 0, 1, 50, -1]))) + ident)
        out.append(draw(st.sampled_from(["", "", "S_", "I", "IN", "E", "EE", "Li2E"])))
    return "".join(out)


@st.composite
def bracket_name(draw) -> str:
    """Deep, unbalanced or interleaved brackets around and inside a C++-looking name."""
    n = draw(st.sampled_from([1, 10, 1000, 50_000, 300_000]))
    shape = draw(st.sampled_from(["nest", "open", "close", "mixed", "wrappers", "sep"]))
    name = draw(st.sampled_from(["f", "at::native::k", "cutlass::Kernel", "ns::A<T>::f"]))
    if shape == "nest":
        return f"void {name}{{" + "(" * n + ">" * n + "}(int)"
    if shape == "open":
        return f"void {name}<" + draw(st.sampled_from(["<", "(", "[", "{"])) * n
    if shape == "close":
        return ">)]}" * (n // 4 + 1) + f"{name}(int)"
    if shape == "wrappers":
        return "cutlass::Kernel<" * min(n, 20_000) + "X" + ">" * min(n, 20_000) + "(Params)"
    if shape == "sep":
        return draw(st.sampled_from([":()", "::(", " (", "operator()"])) * n
    return "".join(draw(st.lists(st.sampled_from(PIECES), max_size=200))) * draw(st.sampled_from([1, 100, 2000]))


@st.composite
def huge_name(draw) -> str:
    """A name past the parse cap (up to 1 MB here; benchmarks/bench_hostile_names.py does 100 MB)."""
    size = draw(st.sampled_from([65_535, 65_536, 65_537, 200_000, 1_000_000]))
    head = draw(st.sampled_from(["void k<", "_ZN4vllm", "ampere_sgemm_", "void k(", ""]))
    return (head + draw(st.sampled_from(["a", "(", "<", "1", " "])) * size)[:size] + ">(int)"


HOSTILE_NAME = st.one_of(
    mangled_name(), bracket_name(), huge_name(),
    st.lists(st.sampled_from(PIECES), max_size=40).map("".join),
    st.text(max_size=200),
    st.binary(max_size=300).map(lambda b: b.decode("utf-8", "replace")),
)


def check_name(name: str) -> str:
    """The contract (module doc) on one name; returns the identity."""
    import polars as pl

    from traceq.kernels.identity import PARSE_CHARS, kernel_identity, kernel_library
    from traceq.kernels.tensor_cores import uses_tensor_cores
    from traceq.rules.categories import classify

    ident = kernel_identity(name)
    assert isinstance(ident, str) and len(ident) <= 2 * PARSE_CHARS, len(ident)
    assert isinstance(kernel_library(ident), str)
    assert isinstance(uses_tensor_cores(name), bool)
    got = classify(pl.Series([name], dtype=pl.String), pl.Series(["kernel"], dtype=pl.String))
    assert got.row(0)[0] == ident
    if len(name) > PARSE_CHARS:
        cut = name[:PARSE_CHARS]
        assert ident == kernel_identity(cut)
        assert got.row(0) == classify(pl.Series([cut], dtype=pl.String), pl.Series(["kernel"], dtype=pl.String)).row(0)
    return ident
