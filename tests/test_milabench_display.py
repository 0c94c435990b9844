"""A milabench summary in `ingest`, `runs` and `compare` (issue 48): what it stored is shown
(its metrics rows, 2 per benchmark: throughput and walltime), and `compare` at 100 columns
says a configuration every row shares once above the table instead of giving it a column,
so the benchmark names keep their width."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from traceq.cli import app

BENCHES = ["bert-fp32", "resnet50-noio", "llama-7b", "convnext_large-fp16", "dlrm"]


@pytest.fixture(scope="module")
def summary(tmp_path_factory):
    d = tmp_path_factory.mktemp("mila")
    doc = {b: {"name": b, "n": 4, "successes": 4, "failures": 0, "walltime": 300.0,
               "train_rate": {"min": 500, "max": 520, "mean": 510.0, "std": 8.0, "sem": 4.0, "median": 510}}
           for b in BENCHES}
    (d / "nvidia_summary.json").write_text(json.dumps(doc))
    return d


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "100"})


def test_ingest_and_runs_show_the_metrics_stored(summary):
    store = summary / "s"
    r = run("ingest", summary / "nvidia_summary.json", "--store", store, "-f", "json")
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.output)
    assert (row["gpu_ops"], row["metrics"]) == (0, 2 * len(BENCHES))
    (info,) = json.loads(run("runs", "--store", store, "-f", "json").output)
    assert info["metrics"] == 2 * len(BENCHES) and info["formats"] == "milabench"
    table = run("runs", "--store", store).output
    assert "metrics" in table and f"{2 * len(BENCHES)}" in table


def test_compare_says_a_shared_configuration_once(summary):
    store = summary / "s"
    if not store.exists():
        run("ingest", summary / "nvidia_summary.json", "--store", store)
    text = run("compare", "--store", store).output
    assert "every row: config nvidia_summary, runs 4" in text
    header = next(x for x in text.splitlines() if "metric" in x and "mean" in x)
    assert "config" not in header and "runs" not in header.split()
    assert "bench.bert-fp32.throughput" in text and "bench.dlrm.walltime" in text   # whole names
    # JSON keeps every column on every row
    rows = json.loads(run("compare", "--store", store, "-f", "json").output)
    assert {r["config"] for r in rows} == {"nvidia_summary"} and {r["runs"] for r in rows} == {4}
