"""`traceq sql` cannot hurt the store, install extensions or reach the network, whatever the
quoting (issue 36 items 3, 16, 19); every traceq DuckDB connection has the settings of
traceq.store.duck (item 14: memory limit and spill folder)."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import SAMPLES
from fuzz_store import check_sql_contract, hostile_statement, tree
from traceq.engine.catalog import sql
from traceq.errors import TraceqError
from traceq.ingest import ingest
from traceq.store import Store, duck


@pytest.fixture(scope="module")
def base_store(tmp_path_factory):
    d = tmp_path_factory.mktemp("hsql")
    ingest([SAMPLES / "nsys_sample.sqlite"], d / ".traceq", run="s")
    return d / ".traceq"


@pytest.fixture
def store(base_store, tmp_path, monkeypatch):
    """A copy of the sample store as ./.traceq of the working directory, HOME = the working
    directory, `link` a symlink to the store folder."""
    s = tmp_path / ".traceq"
    shutil.copytree(base_store, s)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "other").mkdir()
    os.symlink(s, tmp_path / "link")
    return s


def _table_file(store) -> str:
    row = Store(store).manifest_rows()[0]
    return json.loads(row["files"])["gpu_ops"]


# the reproducers of issue 36 item 3, and the spellings around them
BYPASSES = [
    "COPY (SELECT * FROM runs WHERE false) TO $$.traceq/runs.parquet$$ (FORMAT parquet)",
    'COPY (SELECT * FROM runs WHERE false) TO ".traceq/runs.parquet" (FORMAT parquet)',
    "COPY (SELECT * FROM runs WHERE false) TO 'file://{abs}/runs.parquet' (FORMAT parquet)",
    "SET home_directory = '{abs}'; COPY (SELECT * FROM runs WHERE false) TO '~/runs.parquet' (FORMAT parquet)",
    "SET home_directory = $${abs}$$; COPY (SELECT * FROM runs WHERE false) TO '~/runs.parquet' (FORMAT parquet)",
    "ATTACH $$.traceq/w.db$$ AS w; CREATE TABLE w.t AS SELECT 1 AS a",
    'ATTACH ".traceq/w.db" AS w; CREATE TABLE w.t AS SELECT 1 AS a',
    "COPY (SELECT * FROM runs WHERE false) TO ('.tr' || 'aceq/runs.parquet') (FORMAT parquet)",
    "COPY (SELECT 1 AS a) TO $$.traceq/{table_file}$$ (FORMAT parquet, USE_TMP_FILE false)",
    "COPY (SELECT 1 AS a) TO 'link/gpu_ops/../{table_file}' (FORMAT parquet, USE_TMP_FILE false)",
    "COPY (SELECT 1 AS a) TO ('lin' || 'k/{table_file}') (FORMAT parquet, USE_TMP_FILE false)",
    "SET enable_external_access = true; COPY (SELECT 1) TO $$.traceq/x.csv$$",
    "SET lock_configuration = false",
    "SET temp_directory = $$.traceq/tmp$$",
]


@pytest.mark.parametrize("stmt", BYPASSES)
def test_allow_writes_never_writes_into_the_store(store, stmt):
    tf = _table_file(store)
    stmt = stmt.format(abs=store.resolve(), table_file=tf, table_file_in_gpu_ops=tf.split("/", 1)[1])
    before = tree(store)
    with pytest.raises(TraceqError) as err:
        sql(stmt, store, allow_writes=True)
    assert "\n" not in str(err.value)
    assert tree(store) == before
    assert sql("SELECT count(*) AS n FROM gpu_ops", store)["n"].to_list() == [39]   # the sample's 39 device ops
    assert not (store.parent / "w.db").exists()


def test_the_lock_is_duckdbs_not_the_text_check(store):
    """Past the statement check, the connection itself refuses a path inside the store, and
    the settings that make it so cannot be changed."""
    from traceq.sql_guard import connect

    con = connect(Store(store), "SELECT 1", allow_writes=True)
    before = tree(store)
    for stmt in (f"COPY (SELECT * FROM runs WHERE false) TO '{store}/runs.parquet' (FORMAT parquet, USE_TMP_FILE false)",
                 f"COPY (SELECT 1 AS a) TO '{store / _table_file(store)}' (FORMAT parquet, USE_TMP_FILE false)",
                 f"ATTACH '{store}/w.db' AS w"):
        with pytest.raises(duckdb.PermissionException):
            con.execute(stmt)
    for setting in ("enable_external_access = true", "lock_configuration = false", f"allowed_directories = ['{store}']",
                    "autoinstall_known_extensions = true"):
        with pytest.raises(duckdb.Error, match="locked"):
            con.execute(f"SET {setting}")
    assert con.execute("SELECT count(*) FROM gpu_ops").fetchone() == (39,)
    assert tree(store) == before


def test_allow_writes_writes_where_the_statement_says(store):
    cwd = store.parent
    sql("COPY (SELECT name FROM gpu_ops ORDER BY start_ns LIMIT 2) TO 'out.csv' (HEADER)", store, allow_writes=True)
    assert (cwd / "out.csv").read_text().splitlines()[0] == "name"
    sql("COPY (SELECT 1 AS a) TO $$other/o.parquet$$ (FORMAT parquet)", store, allow_writes=True)
    assert sql("SELECT a FROM read_parquet('other/o.parquet')", store)["a"].to_list() == [1]
    sql("ATTACH 'other/w.db' AS w; CREATE TABLE w.t AS SELECT 7 AS a", store, allow_writes=True)
    assert duckdb.connect(str(cwd / "other" / "w.db")).execute("SELECT a FROM t").fetchall() == [(7,)]


def test_paths_not_named_plainly_are_refused(store):
    """Only string literals widen the file access: a path DuckDB reads from elsewhere fails."""
    (store.parent / "other" / "a.csv").write_text("x\n1\n")
    with pytest.raises(TraceqError, match="Permission Error"):
        sql("SELECT * FROM read_csv(\"other/a.csv\")", store)
    assert sql("SELECT x FROM read_csv('other/a.csv')", store)["x"].to_list() == [1]


@settings(max_examples=int(os.environ.get("TRACEQ_FUZZ_EXAMPLES", "0")) or 40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_fuzz_no_statement_writes_into_the_store(store, data):
    stmt = data.draw(hostile_statement(store, _table_file(store)))
    check_sql_contract(stmt, store)


# ------------------------------------------------------------------ item 19: PIVOT is a query
def test_pivot_and_unpivot_are_queries(store):
    df = sql("PIVOT gpu_ops ON kind USING count(*) GROUP BY run", store)
    assert (df["kernel"].to_list(), df["memcpy"].to_list()) == ([24], [9])   # the sample: 24 kernels, 9 copies
    df = sql("UNPIVOT (SELECT 1 AS a, 2 AS b) ON a, b INTO NAME k VALUE v", store)
    assert sorted(df["v"].to_list()) == [1, 2]
    df = sql("SELECT * FROM (PIVOT gpu_ops ON kind IN ('kernel') USING count(*) GROUP BY run)", store)
    assert df["kernel"].to_list() == [24]
    with pytest.raises(TraceqError, match="COPY refused"):
        sql("PIVOT gpu_ops ON kind USING count(*); COPY (SELECT 1) TO 'o.csv'", store)


# ------------------------------------------------------------------ item 16: no extension installs
def run_traceq(*args, cwd, home):
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("TRACEQ_STORE", "FORCE_COLOR")}
    env.update(NO_COLOR="1", HOME=str(home))
    return subprocess.run([sys.executable, "-m", "traceq", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_every_connection_has_autoinstall_off(store):
    for con in (duck.connect(), Store(store).connect()):
        assert con.execute("SELECT current_setting('autoinstall_known_extensions')").fetchone() == (False,)


def test_https_read_fails_in_one_line_and_installs_nothing(store, tmp_path):
    env_home = tmp_path / "home"
    env_home.mkdir()
    for extra in ([], ["--allow-writes"]):
        r = run_traceq("sql", "SELECT * FROM read_csv('https://example.invalid/x.csv')", "--store", store, *extra,
                       cwd=store.parent, home=env_home)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert r.stderr.startswith("traceq: sql: Permission Error"), r.stderr
    r = run_traceq("sql", "INSTALL httpfs", "--store", store, "--allow-writes", cwd=store.parent, home=env_home)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert not (env_home / ".duckdb").exists()


def test_analysis_connections_install_nothing(tmp_path):
    """Not `sql`: a traceq connection that met an https URL would not install httpfs either."""
    import subprocess
    import sys

    code = ("from traceq.store import duck\ncon = duck.connect()\ntry:\n"
            "    con.execute(\"SELECT * FROM read_csv('https://example.invalid/x.csv')\")\n"
            "except Exception as e:\n    print(type(e).__name__)\n")
    env = dict(os.environ, HOME=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() and not (tmp_path / ".duckdb").exists(), r.stdout + r.stderr


# ------------------------------------------------------------------ item 14: memory limit, spill folder
def test_memory_limit_and_temp_directory(store, monkeypatch, tmp_path):
    monkeypatch.setenv("TRACEQ_MEMORY_LIMIT", "1GB")
    con = Store(store).connect()
    limit, temp = con.execute("SELECT current_setting('memory_limit'), current_setting('temp_directory')").fetchone()
    assert limit in ("953.6 MiB", "1.0 GB", "1000.0 MB")
    assert store.resolve() not in Path(temp).resolve().parents
    monkeypatch.setenv("TRACEQ_MEMORY_LIMIT", "lots")
    with pytest.raises(TraceqError, match="TRACEQ_MEMORY_LIMIT"):
        duck.connect()
    monkeypatch.setenv("TRACEQ_MEMORY_LIMIT", "")
    monkeypatch.setenv("TRACEQ_TEMP_DIRECTORY", str(tmp_path / "spill"))
    con = duck.connect()
    assert con.execute("SELECT current_setting('temp_directory')").fetchone() == (str(tmp_path / "spill"),)


def test_memory_limit_follows_ulimit(monkeypatch):
    import resource

    monkeypatch.delenv("TRACEQ_MEMORY_LIMIT", raising=False)
    monkeypatch.setattr(resource, "getrlimit", lambda what: (4 << 30, resource.RLIM_INFINITY))
    assert duck.memory_limit() == "2048MiB"


def test_a_glob_beside_the_store_reads_its_matches_only(store):
    """`read_csv('*.csv')` in the folder that holds ./.traceq: the matches are readable, the
    folder is not (it holds the store)."""
    cwd = store.parent
    for i in (1, 2):
        (cwd / f"m{i}.csv").write_text(f"x\n{i}\n")
    assert sorted(sql("SELECT x FROM read_csv('*.csv')", store)["x"].to_list()) == [1, 2]
    before = tree(store)
    with pytest.raises(TraceqError, match="Permission Error"):
        sql("COPY (SELECT 1) TO ('m3' || '.csv')", store, allow_writes=True)
    with pytest.raises(TraceqError, match="Permission Error"):   # a match in the store: refused whole
        sql("SELECT count(*) FROM read_parquet('*/*.parquet')", store)
    assert tree(store) == before and not (cwd / "m3.csv").exists()
