"""Output that goes to no terminal (a pipe, a file) is as wide as COLUMNS says (issue 48:
`COLUMNS=100 traceq runs | cat` printed 178 columns); TRACEQ_WIDTH, when set, wins; neither:
200 columns."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import SAMPLES
from traceq.render import PIPE_WIDTH, pipe_width


@pytest.mark.parametrize("env, want", [
    ({"COLUMNS": "100"}, 100),
    ({"COLUMNS": "100", "TRACEQ_WIDTH": "120"}, 120),
    ({}, PIPE_WIDTH),
    ({"COLUMNS": "abc"}, PIPE_WIDTH),
    ({"COLUMNS": "0"}, PIPE_WIDTH),
    ({"COLUMNS": " 90 "}, 90),
])
def test_pipe_width_reads_traceq_width_then_columns(monkeypatch, env, want):
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("TRACEQ_WIDTH", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert pipe_width() == want


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    d = tmp_path_factory.mktemp("pipe")
    import traceq

    traceq.open_store(d / "s").ingest([SAMPLES / "slow_dataloader", SAMPLES / "nsys_sample.sqlite"])
    return d / "s"


def _runs(store, **env) -> list[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "TRACEQ_WIDTH", "TRACEQ_STORE", "FORCE_COLOR")}
    r = subprocess.run([sys.executable, "-m", "traceq", "runs", "--store", str(store)], capture_output=True,
                       text=True, env={**base, "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8", **env}, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_runs_into_a_pipe_fits_columns(store):
    wide = max(map(len, _runs(store)))
    assert 100 < wide <= PIPE_WIDTH          # the table needs more than 100 columns
    narrow = _runs(store, COLUMNS="100")
    assert max(map(len, narrow)) <= 100
    assert any("slow_dataloader" in ln for ln in narrow)
    assert max(map(len, _runs(store, COLUMNS="100", TRACEQ_WIDTH="80"))) <= 80
