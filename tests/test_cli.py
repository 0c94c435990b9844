"""CLI behaviour not covered elsewhere: `sql` aggregates, `runs`, help and errors for bad options."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO, SAMPLES


def traceq(*args, cwd):
    env = dict(os.environ, NO_COLOR="1", TRACEQ_WIDTH="200")
    env.pop("TRACEQ_STORE", None)
    return subprocess.run([sys.executable, "-m", "traceq", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    r = traceq("ingest", SAMPLES / "nsys_sample.sqlite", "-q", cwd=d)
    assert r.returncode == 0, r.stderr
    return d


def test_sql_sums_are_whole_numbers_in_json_and_render_as_a_table(work):
    # make_nsys_sample.py: 6 H2D copies of 150..410 µs, 1,680 µs in all
    q = ("SELECT sum(end_ns - start_ns) AS total_ns, count(*) AS n FROM gpu_ops "
         "WHERE name = '[CUDA memcpy Host-to-Device]'")
    r = traceq("sql", q, "-f", "json", cwd=work)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [{"total_ns": 1_680_000, "n": 6}]
    r = traceq("sql", q, cwd=work)
    assert r.returncode == 0, r.stderr
    assert "1.680" in r.stdout and "total (ms)" in r.stdout   # 1,680,000 ns shown in ms


def test_sql_errors_are_one_line(work):
    r = traceq("sql", "SELECT nope FROM gpu_ops", cwd=work)
    assert r.returncode == 2
    assert r.stderr.startswith("traceq: sql: ") and r.stderr.count("\n") == 1


def test_runs_lists_formats_devices_and_counts(work):
    r = traceq("runs", "-f", "json", cwd=work)
    rows = json.loads(r.stdout)
    assert [(x["run"], x["ranks"], x["formats"], x["gpu_ops"]) for x in rows] == [("nsys_sample", 1, "nsys", 39)]
    assert "A100" in rows[0]["devices"]


def test_unknown_run_rank_and_bad_steps_are_actionable(work):
    r = traceq("hotspots", "--run", "nope", cwd=work)
    assert r.returncode == 2 and "no run named 'nope'" in r.stderr and "nsys_sample" in r.stderr
    r = traceq("hotspots", "--rank", "7", cwd=work)
    assert r.returncode == 2 and "has no rank 7" in r.stderr
    r = traceq("hotspots", "--steps", "x:y", cwd=work)
    assert r.returncode == 2 and "--steps" in r.stderr
    r = traceq("hotspots", "--category", "bogus", cwd=work)
    assert r.returncode == 2 and "unknown bogus" in r.stderr


def test_empty_store_says_what_to_do(tmp_path):
    r = traceq("hotspots", cwd=tmp_path)
    assert r.returncode == 2
    assert "ingest a trace first" in r.stderr


def test_help_shows_examples_and_version():
    r = traceq("--help", cwd=REPO)
    assert r.returncode == 0 and "Examples:" in r.stdout
    for cmd in ("ingest", "runs", "sql", "hotspots", "summary", "overlap", "breakdown", "stalls", "diff", "report"):
        h = traceq(cmd, "--help", cwd=REPO)
        assert h.returncode == 0 and "Example" in h.stdout, cmd
    from traceq import __version__

    assert traceq("--version", cwd=REPO).stdout.strip() == f"traceq {__version__}"


def test_hotspots_json_keeps_full_names_and_adds_identity_and_library(work):
    r = traceq("hotspots", "-f", "json", cwd=work)
    assert r.returncode == 0, r.stderr
    rows = {x["identity"]: x for x in json.loads(r.stdout)["rows"]}
    sgemm = rows["ampere_sgemm_128x64_nn"]
    assert (sgemm["name"], sgemm["library"], sgemm["category"]) == ("ampere_sgemm_128x64_nn", "cuBLAS", "gemm")
    t = rows["cudnn::ops::nchwToNhwcKernel"]
    assert t["name"].startswith("void cudnn::ops::nchwToNhwcKernel<") and t["library"] == "cuDNN"
    r = traceq("hotspots", "-f", "csv", cwd=work)
    assert r.stdout.splitlines()[0].startswith("run,name,identity,library,category,")


def test_old_store_without_identity_columns_still_reads(tmp_path):
    """A store written before gpu_ops had identity/library: the views add them as NULL."""
    from conftest import make_store
    from traceq.store import Store

    make_store(tmp_path / "s", gpu_ops=[{"device": 0, "stream": 7, "kind": "kernel", "name": "k", "category": "gemm",
                                          "start_ns": 0, "end_ns": 10}])
    import pyarrow.parquet as pq
    dropped = 0
    for f in (tmp_path / "s").rglob("*.parquet"):
        t = pq.read_table(f)
        if "identity" in t.column_names:
            pq.write_table(t.drop(["identity", "library"]), f)
            dropped += 1
    assert dropped >= 1
    con = Store(tmp_path / "s").connect()
    assert con.execute("SELECT name, identity, library FROM gpu_ops").fetchall() == [("k", None, None)]
