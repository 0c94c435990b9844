"""The store page's "The store is a stable interface" examples (docs/store.md, moved there from the
README) read a real store without traceq (DuckDB, polars, Dask, pyarrow) and print what the page
shows."""
from __future__ import annotations

import contextlib
import io
import os
import re

import pytest

from conftest import REPO, shared_trace
from traceq.ingest import ingest


def _examples() -> list[tuple[str, str]]:
    text = (REPO / "docs" / "store.md").read_text()
    section = text.split("## The store is a stable interface", 1)[1].split("\n## ", 1)[0]
    pairs = re.findall(r"```python\n(.*?)```\n```\n(.*?)```", section, re.S)
    assert len(pairs) == 4
    return pairs


@pytest.fixture(scope="module")
def store_cwd(tmp_path_factory):
    where = tmp_path_factory.mktemp("readme-store")
    ingest([shared_trace("kineto/hta/trace_filter")], where / ".traceq", jobs=1)
    return where


@pytest.mark.parametrize("i", range(4))
def test_readme_store_example(store_cwd, i, monkeypatch):
    code, shown = _examples()[i]
    if "dask" in code:
        pytest.importorskip("dask.dataframe")
    monkeypatch.chdir(store_cwd)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"docs/store.md example {i + 1}", "exec"), {})
    got = [line.rstrip() for line in out.getvalue().rstrip().splitlines()]
    assert got == shown.rstrip().splitlines()
    assert os.path.isdir(store_cwd / ".traceq" / "gpu_ops" / "run=trace_filter" / "rank=1")
