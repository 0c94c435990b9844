"""`traceq sql` streams its results (issue 51 items 4-5): files in Arrow batches, written
atomically; terminal tables capped with the cut said; nested and blob columns to CSV as JSON
text and hex; `--strict` reads the store's tables only (issue 50). Memory boundedness of a
100 M-row export is measured by benchmarks/bench_sql_stream.py, not here."""
from __future__ import annotations

import json

import pytest

from traceq import sql_stream
from traceq.errors import TraceqError
from traceq.ingest import ingest
from traceq.sql_guard import connect
from traceq.store import Store

from conftest import SAMPLES, run_traceq

NESTED = "SELECT [1, 2] AS l, {'k': 'v', 'n': [3]} AS s, 'ab'::BLOB AS b, MAP {'x': 1} AS m, NULL::INT[] AS e"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    d = tmp_path_factory.mktemp("sqlstream")
    ingest([SAMPLES / "nsys_sample.sqlite"], d / "store", run="s")
    return d / "store"


def _out(store, query, fmt, **kw):
    import io

    buf = io.StringIO()
    sql_stream.write(connect(Store(store), query), query, fmt, out=buf, **kw)
    return buf.getvalue()


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_streamed_batches_write_the_same_bytes_as_one_frame(store, monkeypatch, fmt):
    query = "SELECT i, i * 0.5 AS half, 'k' || i AS name, [i, i + 1] AS pair FROM range(50) t(i)"
    whole = _out(store, query, fmt)
    monkeypatch.setattr(sql_stream, "SMALL_ROWS", 10)   # 50 rows > 10: the Arrow batch path
    monkeypatch.setattr(sql_stream, "BATCH_ROWS", 7)    # in 8 batches, the last of 1 row
    assert _out(store, query, fmt) == whole
    if fmt == "json":
        rows = json.loads(whole)
        assert len(rows) == 50 and rows[49] == {"i": 49, "half": 24.5, "name": "k49", "pair": [49, 50]}
    else:
        assert whole.splitlines()[0] == "i,half,name,pair" and whole.splitlines()[50] == '49,24.5,k49,"[49,50]"'


def test_empty_results_keep_their_shape(store):
    assert _out(store, "SELECT 1 AS a WHERE false", "csv") == "a\n"
    assert _out(store, "SELECT 1 AS a WHERE false", "json") == "[]\n"


def test_nested_and_blob_columns_to_csv_are_json_text_and_hex(store, tmp_path):
    """On main: `internal error: ComputeError` (polars cannot write nested data to CSV)."""
    r = run_traceq("sql", NESTED, "-f", "csv", "-o", tmp_path / "n.csv", "--store", store, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    header, row = (tmp_path / "n.csv").read_text().splitlines()
    assert header == "l,s,b,m,e"
    assert row == '"[1,2]","{""k"":""v"",""n"":[3]}",6162,"{""x"":1}",'


def test_nested_values_stay_nested_in_json(store):
    (row,) = json.loads(_out(store, NESTED, "json"))
    assert row["l"] == [1, 2] and row["s"] == {"k": "v", "n": [3]} and row["b"] == "6162" and row["e"] is None


def test_terminal_table_shows_the_first_rows_and_says_it_cut(store, tmp_path):
    """On main: every row of the result is rendered (a 100 M-row SELECT never returns)."""
    r = run_traceq("sql", "SELECT * FROM range(5000)", "--store", store, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "(the first 200 rows; the result has more" in r.stdout
    cells = [line.strip() for line in r.stdout.splitlines()]
    assert "199" in cells and "200" not in cells
    r = run_traceq("sql", "SELECT * FROM range(200)", "--store", store, cwd=tmp_path)
    assert "the first" not in r.stdout and "199" in [line.strip() for line in r.stdout.splitlines()]


def test_large_csv_export_is_complete(store, tmp_path):
    """Above SMALL_ROWS rows the result streams in record batches (the benchmark measures memory)."""
    n = sql_stream.SMALL_ROWS * 2 + 123
    r = run_traceq("sql", f"SELECT * FROM range({n})", "-f", "csv", "-o", tmp_path / "big.csv", "--store", store,
                   cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == "" and r.stderr == "", r.stderr
    lines = (tmp_path / "big.csv").read_text().splitlines()
    assert len(lines) == n + 1 and lines[0] == "range" and lines[-1] == str(n - 1)


def test_failed_export_leaves_the_old_file_and_no_part_file(store, tmp_path, monkeypatch):
    out = tmp_path / "o.csv"
    out.write_text("old\n")
    monkeypatch.setattr(sql_stream, "SMALL_ROWS", 10)
    monkeypatch.setattr(sql_stream, "BATCH_ROWS", 8)
    query = "SELECT CASE WHEN i < 40 THEN i ELSE error('boom at ' || i) END AS v FROM range(100) t(i)"
    with pytest.raises(TraceqError, match="boom at"):
        sql_stream.write(connect(Store(store), query), query, "csv", str(out))
    assert out.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.csv"]


def test_export_keeps_the_umask_mode(store, tmp_path):
    import os
    import stat

    out = tmp_path / "m.csv"
    sql_stream.write(connect(Store(store), "SELECT 1 AS a"), "SELECT 1 AS a", "csv", str(out))
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~mask and out.read_text() == "a\n1\n"


# ---------------------------------------------------------------- --strict
@pytest.mark.parametrize("query", [
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_text('/proc/self/environ')",
    "SELECT * FROM read_blob('/etc/hostname')",
    "SELECT * FROM glob('/*')",
    "SELECT * FROM glob('/**')",
    "SELECT * FROM parquet_metadata('/etc/passwd')",
    "SELECT * FROM read_json_auto('file:///etc/hostname')",
])
def test_strict_reads_no_file_outside_the_store(store, tmp_path, query):
    """Without --strict `traceq sql` reads what a statement names outside the store (the README allows it)."""
    r = run_traceq("sql", query, "--strict", "--store", store, cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1, (r.stdout, r.stderr)
    assert r.stderr.startswith("traceq: sql: refused (strict")
    assert "root:" not in r.stderr and "PATH=" not in r.stderr


@pytest.mark.parametrize("query, word", [
    ("ATTACH '/tmp/traceq-strict.db' AS x", "ATTACH"),
    ("COPY (SELECT 1) TO '/tmp/traceq-strict.csv'", "COPY"),
    ("INSTALL httpfs", "INSTALL"),
    ("LOAD httpfs", "LOAD"),
    ("SET enable_external_access = true", "SET"),
])
def test_strict_refuses_statements_that_are_not_queries(store, query, word):
    with pytest.raises(TraceqError, match=f"{word} refused"):
        sql_stream.write(connect(Store(store), query, strict=True), query, "csv", strict=True)


def test_strict_cannot_be_combined_with_allow_writes(store, tmp_path):
    r = run_traceq("sql", "SELECT 1", "--strict", "--allow-writes", "--store", store, cwd=tmp_path)
    assert r.returncode == 2 and "cannot be combined" in r.stderr


def test_strict_reads_the_store(store, tmp_path):
    r = run_traceq("sql", "SELECT count(*) AS n FROM gpu_ops", "--strict", "-f", "json", "--store", store, cwd=tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout) == [{"n": 39}], r.stderr


# ---------------------------------------------------------------- capped reads (the MCP tool)
def test_capped_cuts_at_the_row_cap_and_says_so(store):
    got = sql_stream.capped(connect(Store(store), "SELECT 1", strict=True), "SELECT * FROM range(100000000)",
                            max_rows=1000, max_bytes=1 << 20, seconds=30)
    assert got["row_count"] == 1000 and got["rows"][-1] == {"range": 999}
    assert got["cut"].startswith("row cap: the first 1,000 rows")


def test_capped_cuts_at_the_byte_cap_and_says_so(store):
    got = sql_stream.capped(connect(Store(store), "SELECT 1", strict=True), "SELECT repeat('x', 1000) AS s FROM range(100)",
                            max_rows=1000, max_bytes=10_000, seconds=30)
    assert 0 < got["row_count"] < 10 and got["cut"].startswith("byte cap")
    assert len(json.dumps(got["rows"])) <= 10_000 + 100


def test_capped_stops_an_endless_query_at_the_time_limit(store):
    query = "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t) SELECT count(*) FROM t"
    with pytest.raises(TraceqError, match="time limit"):
        sql_stream.capped(connect(Store(store), query, strict=True), query, max_rows=10, max_bytes=1000, seconds=1)


# ---------------------------------------------------------------- strict: a generated class (issue 51: fuzz classes)
READERS = ["SELECT * FROM read_csv({p})", "SELECT * FROM read_text({p})", "SELECT * FROM read_blob({p})",
           "SELECT * FROM read_json_auto({p})", "SELECT * FROM read_parquet({p})", "SELECT * FROM glob({p})",
           "SELECT * FROM {p}", "FROM {p}", "SELECT * FROM sniff_csv({p})", "DESCRIBE SELECT * FROM read_csv({p})",
           "SUMMARIZE SELECT * FROM read_text({p})", "SELECT count(*) FROM read_csv({p}, header = false)",
           "WITH t AS (SELECT * FROM read_text({p})) SELECT content FROM t"]


def _spellings(secret):
    d, name = str(secret.parent), secret.name
    return [str(secret), "file://" + str(secret), d + "/*", d + "/**/" + name, d + "/./" + name,
            d + "/../" + secret.parent.name + "/" + name, d + "/" + name[:-1] + "?", "/proc/self/environ", "/etc/passwd"]


def test_strict_never_returns_a_file_outside_the_store(store, tmp_path):
    hypothesis = pytest.importorskip("hypothesis")
    from hypothesis import strategies as st

    secret = tmp_path / "secret.csv"
    secret.write_text("token\nSECRET-TOKEN-7f3a\n")
    quotes = [lambda p: "'" + p.replace("'", "''") + "'", lambda p: "$$" + p + "$$",
              lambda p: "'" + p[:3] + "' || '" + p[3:] + "'"]

    @hypothesis.settings(max_examples=60, deadline=None, database=None)
    @hypothesis.given(st.sampled_from(READERS), st.sampled_from(_spellings(secret)), st.sampled_from(quotes))
    def prop(reader, path, quote):
        query = reader.format(p=quote(path))
        try:
            got = sql_stream.capped(connect(Store(store), query, strict=True), query, max_rows=50, max_bytes=1 << 16,
                                    seconds=10)
        except TraceqError as exc:
            assert "\n" not in str(exc) and "SECRET" not in str(exc)
            return
        text = json.dumps(got)
        assert "SECRET" not in text and "root:" not in text and "PATH=" not in text, query

    prop()
