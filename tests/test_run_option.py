"""`--run` wherever a run is named (issue 48): `export`, `report` and the two-run analyses
(`diff`) take it as every analysis does, beside their positional RUN forms, with the same
result; a wrong count or two different runs is one line and exit 2."""
from __future__ import annotations

import json

import pytest
from conftest import SAMPLES
from typer.testing import CliRunner

from traceq.cli import app


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from traceq.ingest import ingest

    d = tmp_path_factory.mktemp("runopt") / "s"
    ingest([SAMPLES / "slow_dataloader"], d, run="slow")
    ingest([SAMPLES / "fast_dataloader"], d, run="fast")
    return str(d)


def invoke(*args):
    return CliRunner().invoke(app, list(args))


def test_diff_takes_run_options(store):
    pos = invoke("diff", "slow", "fast", "--store", store, "-f", "json")
    opt = invoke("diff", "--run", "slow", "--run", "fast", "--store", store, "-f", "json")
    assert pos.exit_code == 0 and opt.exit_code == 0, opt.output
    assert json.loads(pos.output) == json.loads(opt.output)
    one = invoke("diff", "--run", "slow", "--store", store)
    assert one.exit_code == 2 and "name two runs" in one.output and "Traceback" not in one.output


def test_export_takes_run_option(store, tmp_path):
    a = invoke("export", "slow", "--store", store, "-o", str(tmp_path / "a.json"), "--no-findings")
    b = invoke("export", "--run", "slow", "--store", store, "-o", str(tmp_path / "b.json"), "--no-findings")
    assert a.exit_code == 0 and b.exit_code == 0, b.output
    assert "run slow" in b.output
    assert len(json.loads((tmp_path / "a.json").read_text())["traceEvents"]) == \
        len(json.loads((tmp_path / "b.json").read_text())["traceEvents"])
    both = invoke("export", "slow", "--run", "fast", "--store", store, "-o", str(tmp_path / "c.json"))
    assert both.exit_code == 2 and "export takes one" in both.output


def test_report_takes_run_option(store, tmp_path):
    r = invoke("report", "--run", "fast", "--store", store, "-o", str(tmp_path / "r.html"))
    assert r.exit_code == 0, r.output
    assert "report of fast" in r.output
