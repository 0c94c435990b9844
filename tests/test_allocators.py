"""`traceq ingest` under the command line runs with the allocator settings of
traceq.allocators (polars' jemalloc in one arena, pyarrow on the system allocator); other
commands, the Python API and a user's own settings are left alone. Checked in fresh
processes: the settings only take effect before polars and pyarrow load."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import SAMPLES
from traceq import allocators, cli

# Runs traceq's entry point and, when the process ends, writes to argv[1] the allocator
# environment and the backend of pyarrow's default memory pool (when pyarrow was loaded).
SPY = """
import json, os, sys
out = sys.argv.pop(1)
sys.argv[0] = "traceq"
def dump():
    pa = sys.modules.get("pyarrow")
    with open(out, "w") as fh:
        json.dump({"jemalloc": os.environ.get("_RJEM_MALLOC_CONF"),
                   "arrow_env": os.environ.get("ARROW_DEFAULT_MEMORY_POOL"),
                   "arrow_pool": pa.default_memory_pool().backend_name if pa else None}, fh)
real_exit = os._exit
def spy_exit(code):
    dump()
    real_exit(code)
os._exit = spy_exit
from traceq.cli import main
main()
"""


def run_spy(tmp_path, *args, env_extra=None) -> dict:
    out = tmp_path / "alloc.json"
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRACEQ_STORE", "_RJEM_MALLOC_CONF", "ARROW_DEFAULT_MEMORY_POOL")}
    env.update(env_extra or {})
    r = subprocess.run([sys.executable, "-c", SPY, str(out), *map(str, args)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(out.read_text())


def test_ingest_runs_with_one_jemalloc_arena_and_the_system_allocator_for_arrow(tmp_path):
    got = run_spy(tmp_path, "ingest", SAMPLES / "fast_dataloader" / "rank0.pt.trace.json.gz",
                  "--store", tmp_path / "st", "-q")
    # polars prepends its own decay settings to the user's conf and jemalloc takes the last word
    assert got["jemalloc"].split(",")[-1] == "narenas:1"
    assert got["arrow_env"] == "system"
    assert got["arrow_pool"] == "system"


def test_an_analysis_command_keeps_the_default_allocators(tmp_path):
    st = tmp_path / "st"
    subprocess.run([sys.executable, "-m", "traceq", "ingest", str(SAMPLES / "nsys_sample.sqlite"),
                    "--store", str(st), "-q"], check=True, capture_output=True, timeout=300)
    got = run_spy(tmp_path, "hotspots", "--store", st)
    assert got["arrow_env"] is None
    assert "narenas" not in (got["jemalloc"] or "")


def test_the_users_own_settings_win(tmp_path):
    got = run_spy(tmp_path, "ingest", SAMPLES / "nsys_sample.sqlite", "--store", tmp_path / "st", "-q",
                  env_extra={"_RJEM_MALLOC_CONF": "narenas:3", "ARROW_DEFAULT_MEMORY_POOL": "jemalloc"})
    assert got["jemalloc"].split(",")[-1] == "narenas:3"
    assert got["arrow_env"] == "jemalloc" and got["arrow_pool"] == "jemalloc"


def test_nothing_is_set_once_polars_or_pyarrow_is_loaded(monkeypatch):
    import polars  # noqa: F401 - loaded, as in any process that has used traceq's API

    monkeypatch.delenv("_RJEM_MALLOC_CONF", raising=False)
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    assert allocators.apply() == {}
    assert "ARROW_DEFAULT_MEMORY_POOL" not in os.environ


@pytest.mark.parametrize("argv, want", [
    (["ingest", "x.json"], "ingest"),
    (["--debug", "ingest", "x.json"], "ingest"),
    (["hotspots", "--run", "ingest"], "hotspots"),
    ([], None),
    (["--debug"], None),
])
def test_the_command_is_the_first_word_apart_from_debug(argv, want):
    assert cli._command(argv) == want
