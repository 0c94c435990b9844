"""Hostile kernel names (issue 36 items 7 and 12): absurd length prefixes in mangled names,
deep and unbalanced brackets, names of megabytes. The parser reads at most PARSE_CHARS
characters of a name, in one linear scan, and never raises; speed is measured by
benchmarks/bench_hostile_names.py, not here."""
from __future__ import annotations

import json
import re
import shutil
import sqlite3

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import shared_trace
from fuzz_names import HOSTILE_NAME, check_name
from traceq.ingest import ingest
from traceq.kernels.identity import PARSE_CHARS, kernel_identity
from traceq.store import Store, fetch_pl

DIGITS = "_Z" + "1" * 5000


def q(store, sql: str) -> pl.DataFrame:
    return fetch_pl(Store(store).connect(), sql)


def kineto_with(name: str, path):
    events = [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 100, "ts": 10,
               "dur": 5, "args": {"correlation": 1}},
              {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": 20, "dur": 30,
               "args": {"correlation": 1, "device": 0, "stream": 7}}]
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def nsys_with(name: str, path):
    """A copy of the saxpy export whose first kernel is called `name` (its StringIds text)."""
    shutil.copyfile(shared_trace("nsys/pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"), path)
    con = sqlite3.connect(path)
    with con:
        (sid,) = con.execute("SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start LIMIT 1").fetchone()
        con.execute("UPDATE StringIds SET value = ? WHERE id = ?", (name, sid))
    con.close()
    return path


# ---------------------------------------------------------------------------------------------
# Item 7: a length prefix of 5000 digits


def test_a_length_prefix_past_the_int_digit_limit_keeps_the_raw_name():
    """int() of 5000 digits raises (Python's 4300-digit limit); no length can be longer than
    the name it is in, so the name is not a mangled name and is its own identity."""
    assert kernel_identity(DIGITS) == DIGITS
    assert kernel_identity("_ZN4vllm" + "9" * 5000 + "moe_sum") == "_ZN4vllm" + "9" * 5000 + "moe_sum"


def test_a_length_longer_than_the_rest_of_the_name_keeps_the_raw_name():
    assert kernel_identity("_ZN4vllm7moe_sumILi2EEEvPT_") == "vllm::moe_sum"      # lengths 4 and 7: read
    assert kernel_identity("_ZN4vllm99moe_sum") == "_ZN4vllm99moe_sum"            # 99 > the 7 left
    assert kernel_identity("_Z5saxpyPfS_") == "saxpy"
    # a wrapper's argument with an absurd length is left out, the wrapper itself is read
    assert kernel_identity("_ZN7cutlass6KernelINS_" + "7" * 5000 + "x") == "cutlass::Kernel"


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_a_5000_digit_mangled_kernel_name_ingests(fmt, tmp_path):
    """Used to fail the whole ingest with 'Exceeds the limit (4300 digits) for integer string
    conversion' (Kineto and nsys): now the kernel is kept with its raw name as identity."""
    path = (kineto_with if fmt == "kineto" else nsys_with)(DIGITS, tmp_path / ("t.json" if fmt == "kineto" else "e.sqlite"))
    assert ingest([path], tmp_path / "s")[0].status == "added"
    got = q(tmp_path / "s", f"SELECT name, identity FROM gpu_ops WHERE name = '{DIGITS}'")
    assert got.height == (1 if fmt == "kineto" else 5)       # saxpy's 5 kernels share one name
    assert set(got["identity"]) == {DIGITS}


# ---------------------------------------------------------------------------------------------
# Item 12: nested brackets, megabyte names


def test_nested_brackets_are_read_as_a_name_cut_at_the_parse_cap():
    """'void f{' + '('*300000 + '>'*300000 + '}(int)' took 90 s per name (a regex quadratic in
    the run of '('). Its first PARSE_CHARS characters end inside the '{' scope, so it reads as
    a name cut there: identity `f`, as for any name cut inside a bracket."""
    name = "void f{" + "(" * 300_000 + ">" * 300_000 + "}(int)"
    assert kernel_identity(name) == "f" == kernel_identity("void f{((")
    # below the cap the lambda scope is kept, compacted, its parentheses removed as before
    assert kernel_identity("void f{" + "(" * 50 + ">" * 50 + "}(int)") == "f{" + "(" * 50 + ">" * 50 + "}"
    assert kernel_identity("void ns::k<{lambda(float)#1}>::{lambda(int, int)#2}(int)") == "ns::k::{lambda#2}"


def test_a_name_longer_than_the_cap_is_classified_by_its_first_characters(tmp_path):
    """A 1 MB name: identity, library and category are those of its first PARSE_CHARS
    characters; the stored name is the whole name (nothing is cut from the data)."""
    name = "void at::native::vectorized_elementwise_kernel<" + "a" * 1_000_000 + ">(int)"
    assert kernel_identity(name) == kernel_identity(name[:PARSE_CHARS]) == "at::native::vectorized_elementwise_kernel"
    assert kernel_identity("x" * 1_000_000) == "x" * PARSE_CHARS
    path = kineto_with(name, tmp_path / "t.json")
    assert ingest([path], tmp_path / "s")[0].status == "added"
    got = q(tmp_path / "s", "SELECT length(name) AS n, identity, library, category FROM gpu_ops")
    assert got.row(0) == (len(name), "at::native::vectorized_elementwise_kernel", "ATen", "elementwise")


def test_wrappers_nested_thousands_deep_do_not_recurse_without_bound():
    """`cutlass::Kernel<cutlass::Kernel<...X...>>` 5000 deep: unwrapped MAX_WRAPPERS deep."""
    name = "cutlass::Kernel<" * 5000 + "X" + ">" * 5000 + "(Params)"
    ident = kernel_identity(name)
    assert ident.startswith("cutlass::Kernel<cutlass::Kernel<") and len(ident) < 200


@settings(max_examples=200, deadline=None, derandomize=True)
@given(text=st.text(st.sampled_from("ab() \n"), max_size=40))
def test_the_linear_paren_removal_equals_the_regex_it_replaces(text):
    from traceq.kernels.identity import _without_parens  # noqa: PLC2701 - the helper under test

    assert _without_parens(text) == re.sub(r"\(.*\)", "", text)


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(name=HOSTILE_NAME)
def test_hostile_names_keep_the_parser_contract(name):
    """Generated hostile names (tests/fuzz_names.py): the parser never raises, its output is
    bounded, and only the first PARSE_CHARS characters count."""
    check_name(name)
