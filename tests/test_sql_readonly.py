"""`traceq sql` is read-only by default; --allow-writes never writes into the store (issue 8, defect 12)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from traceq.engine.catalog import sql
from traceq.errors import TraceqError
from traceq.ingest import ingest

from conftest import SAMPLES


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    d = tmp_path_factory.mktemp("sqlro")
    ingest([SAMPLES / "nsys_sample.sqlite"], d / "store", run="s")
    return d / "store"


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _tree(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.name != ".lock")


@pytest.mark.parametrize("stmt, word", [
    ("COPY (SELECT * FROM gpu_ops) TO 'out.csv'", "COPY"),
    ("COPY gpu_ops TO 'out.parquet' (FORMAT parquet)", "COPY"),
    ("CREATE TABLE t AS SELECT 1 AS a", "CREATE"),
    ("INSERT INTO x VALUES (1)", "INSERT"),
    ("INSTALL json", "INSTALL"),
    ("LOAD json", "LOAD"),
    ("ATTACH 'out.db' AS o", "ATTACH"),
    ("EXPORT DATABASE 'outdir'", "EXPORT"),
    ("SET threads = 1", "SET"),
    ("PRAGMA enable_profiling", "PRAGMA"),
    ("EXPLAIN ANALYZE COPY (SELECT 1) TO 'out.csv'", "EXPLAIN"),
    ("SELECT 1; COPY (SELECT 1) TO 'out.csv'", "COPY"),
])
def test_statements_that_write_are_refused_by_default(store, cwd, stmt, word):
    before = _tree(store)
    with pytest.raises(TraceqError, match=rf"^sql: {word} refused: `traceq sql` runs queries only"):
        sql(stmt, store)
    assert list(cwd.iterdir()) == [] and _tree(store) == before


@pytest.mark.parametrize("stmt", ["SELECT count(*) AS n FROM gpu_ops", "FROM gpu_ops SELECT count(*) AS n",
                                  "WITH c AS (SELECT count(*) AS n FROM gpu_ops) SELECT * FROM c"])
def test_queries_run(store, cwd, stmt):
    assert sql(stmt, store)["n"].to_list() == [39]   # the sample's 39 device ops


def test_explain_and_describe_are_queries(store, cwd):
    assert sql("DESCRIBE gpu_ops", store).height > 5
    assert sql("EXPLAIN SELECT * FROM gpu_ops", store).height == 1


def test_allow_writes_writes_outside_the_store(store, cwd):
    sql("COPY (SELECT name FROM gpu_ops ORDER BY start_ns LIMIT 2) TO 'out.csv' (HEADER)", store, allow_writes=True)
    assert (cwd / "out.csv").read_text().splitlines()[0] == "name"
    assert sql("CREATE TABLE t AS SELECT 1 AS a; SELECT a FROM t", store, allow_writes=True)["a"].to_list() == [1]


def test_allow_writes_never_writes_into_the_store(store, cwd):
    os.symlink(store / "gpu_ops", cwd / "link")
    before = _tree(store)
    targets = [str(store / "x.csv"), str(store / "gpu_ops" / "evil.parquet"), str(store),
               str(cwd / "elsewhere" / ".." / os.path.relpath(store, cwd) / "y.csv"), "link/z.parquet"]
    for t in targets:
        with pytest.raises(TraceqError, match="is inside the store"):
            sql(f"COPY (SELECT 1) TO '{t}'", store, allow_writes=True)
    for stmt in (f"EXPORT DATABASE '{store / 'exp'}'", f"ATTACH '{store / 'w.db'}' AS w",
                 f"SET temp_directory = '{store}'"):
        with pytest.raises(TraceqError, match="is inside the store"):
            sql(stmt, store, allow_writes=True)
    assert _tree(store) == before


def test_cli_refusal_is_one_line_exit_2(store, cwd):
    env = dict(os.environ, NO_COLOR="1")
    r = subprocess.run([sys.executable, "-m", "traceq", "sql", "COPY (SELECT 1) TO 'o.csv'", "--store", str(store)],
                       cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("traceq: sql: COPY refused")
    assert not (cwd / "o.csv").exists()
    r = subprocess.run([sys.executable, "-m", "traceq", "sql", "COPY (SELECT 1 AS a) TO 'o.csv'", "--store", str(store),
                        "--allow-writes"], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and (cwd / "o.csv").read_text() == "a\n1\n"
