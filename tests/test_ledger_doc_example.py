"""The worked example of docs/ledger.md: the trace the page writes out, ingested and run
through `traceq steps --format json`, gives exactly the ledger rows the page's table shows
(the table is read from the page, so page and code cannot drift apart)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import REPO
from kineto_synth import Trace
from typer.testing import CliRunner

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
DATALOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
PAGE = REPO / "docs" / "ledger.md"


def example() -> Trace:
    """docs/ledger.md, "A worked example": the events in µs, as the page lists them."""
    t = Trace()
    t.step(1, 0, 1000)
    t.annotation(DATALOADER, 0, 150)
    t.launch("gemm_kernel", 150, 10, 170, 200)
    t.runtime("cudaMalloc", 250, 20)
    t.launch(NCCL, 380, 5, 400, 200, stream=13)
    t.launch("add_kernel", 390, 5, 500, 50)
    t.runtime("cudaStreamSynchronize", 600, 100)
    t.launch("Memcpy HtoD (Pinned -> Device)", 700, 10, 720, 80, api="cudaMemcpyAsync", cat="gpu_memcpy")
    t.cpu_op("aten::post", 800, 100)
    t.step(2, 1000, 500)
    t.runtime("cudaMalloc", 1000, 50)
    t.runtime("cuModuleLoadData", 1050, 100)
    t.launch("gemm_kernel", 1200, 10, 1220, 380)
    t.step(3, 1500, 500)
    t.cpu_op("aten::post", 1600, 100)
    return t


def page_table() -> dict[str, list[int]]:
    """{column: [step 1, step 2, step 3]} from the page's table between the ledger-example markers."""
    text = PAGE.read_text()
    body = re.search(r"<!-- ledger-example -->(.*?)<!-- /ledger-example -->", text, re.S).group(1)
    out = {}
    for line in body.strip().splitlines()[2:]:
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        out[cells[0]] = [int(c.replace(",", "")) for c in cells[1:]]
    return out


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> list[dict]:
    from traceq.cli import app
    from traceq.ingest import ingest

    d = tmp_path_factory.mktemp("ledger-doc")
    ingest([example().write(d / "example.json.gz")], d / "store", run="example")
    r = CliRunner().invoke(app, ["steps", "--store", str(d / "store"), "--format", "json"])
    assert r.exit_code == 0, r.output
    return sorted(json.loads(r.output)["rows"], key=lambda x: x["start_ns"])


def test_the_pages_table_is_the_ledger_of_its_example(rows):
    want = page_table()
    assert len(rows) == 3 and [r["step"] for r in rows] == [1, 2, 3]
    t0 = rows[0]["start_ns"]   # the page counts from the first step's start
    got = {c: [r[c] - t0 if c in ("start_ns", "end_ns") else r[c] for r in rows] for c in want}
    assert got == want
    # the columns the page leaves out of its table are zero
    from traceq.engine.ledger import LABEL_COLUMNS

    for c in LABEL_COLUMNS:
        if c not in want:
            assert all(r[c] == 0 for r in rows), c


def test_the_pages_rows_add_up(rows):
    from traceq.engine.ledger import LABEL_COLUMNS

    for r in rows:
        assert sum(r[c] for c in LABEL_COLUMNS) == r["window_ns"] == r["end_ns"] - r["start_ns"]
        assert r["busy_ns"] + r["idle_ns"] == r["window_ns"]
        assert r["overlapped_comm_ns"] == r["comm_ns"] - r["communication_ns"]
