"""Hypothesis strategies for statements that try to write into the store through `traceq sql
--allow-writes`, and the contract they must keep (`check_sql_contract`).

Shared by tests/test_hostile_sql.py (a small budget) and benchmarks/fuzz_sql_long.py. A
statement is a write verb (COPY ... TO, ATTACH + CREATE, EXPORT DATABASE, SET of a path,
INSTALL/LOAD) applied to a path into the store spelt in one of the ways DuckDB accepts
('...', $$...$$, "...", E'...', file://, ~ with HOME above the store, .., //, ./, a symlink,
the path of an existing table file), alone or after other statements. The contract: the
store's files are byte-identical afterwards, and the outcome is a result or a one-line
TraceqError.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from hypothesis import strategies as st

# (how a path into the store is spelt) given the store's folder name and absolute path;
# the test's working directory is the store's parent, HOME is set to it, and `link` is a
# symlink to the store folder. (Not a link to a folder *below* the store: DuckDB resolves `..`
# in the text of a path, the system after following links, so `'lin' || 'k/../x'` with `link`
# -> store/gpu_ops writes store/x while DuckDB checks ./x; README "traceq sql" says so.)
SPELLINGS = [
    lambda name, abs_, f: f"{name}/{f}",
    lambda name, abs_, f: f"{abs_}/{f}",
    lambda name, abs_, f: f"file://{abs_}/{f}",
    lambda name, abs_, f: f"~/{name}/{f}",
    lambda name, abs_, f: f"./{name}//{f}",
    lambda name, abs_, f: f"other/../{name}/{f}",
    lambda name, abs_, f: f"link/{f}",
    lambda name, abs_, f: f"link/gpu_ops/../{f}",
    lambda name, abs_, f: f"link/./{f}",
]
QUOTES = [
    lambda p: "'" + p.replace("'", "''") + "'",
    lambda p: f"$${p}$$",
    lambda p: f'"{p}"',
    lambda p: "E'" + p.replace("'", "''") + "'",
    lambda p: f"('{p[:3]}' || '{p[3:]}')",
]
FILES = ["runs.parquet", "x.csv", "new.parquet", "w.db", "exp", "gpu_ops", "{table_file}"]
VERBS = [
    "COPY (SELECT * FROM runs WHERE false) TO {p} (FORMAT parquet)",
    "COPY (SELECT * FROM runs WHERE false) TO {p} (FORMAT parquet, USE_TMP_FILE false)",
    "COPY gpu_ops TO {p} (FORMAT csv)",
    "COPY (SELECT 1 AS a) TO {p} (FORMAT parquet, PARTITION_BY (a), OVERWRITE_OR_IGNORE)",
    "ATTACH {p} AS w; CREATE TABLE w.t AS SELECT 1 AS a",
    "EXPORT DATABASE {p}",
    "SET temp_directory = {p}; CREATE TABLE big AS SELECT range AS i FROM range(10)",
    "SET home_directory = {p}",
    "SET enable_external_access = true; COPY (SELECT 1) TO {p}",
    "SET allowed_directories = [{p}]",
    "SET lock_configuration = false",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SELECT * FROM read_csv({p})",
    "CREATE TABLE t AS SELECT 1 AS a; COPY t TO {p}",
]


@st.composite
def hostile_statement(draw, store: Path, table_file: str) -> str:
    """One statement (or a few) that aims at a path inside `store` (whose parent is the cwd)."""
    f = draw(st.sampled_from(FILES)).format(table_file=table_file)
    spell = draw(st.sampled_from(SPELLINGS))
    quote = draw(st.sampled_from(QUOTES))
    path = quote(spell(store.name, str(store.resolve()), f))
    stmt = draw(st.sampled_from(VERBS)).format(p=path)
    prefix = draw(st.sampled_from(["", "SELECT 1; ", "CREATE TABLE x AS SELECT 2 AS b; ", "PIVOT gpu_ops ON kind USING count(*); "]))
    return prefix + stmt


def tree(path: Path) -> dict[str, str]:
    """{relative path: sha256} of every file under `path` (the lock file and staging aside)."""
    out = {}
    for p in sorted(path.rglob("*")):
        rel = p.relative_to(path).as_posix()
        if p.is_file() and rel != ".lock" and not rel.startswith(".staging"):
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
        elif p.is_dir():
            out[rel + "/"] = "dir"
    return out


def check_sql_contract(statement: str, store: Path) -> str:
    """Run `statement` with allow_writes on `store`; assert the store is unchanged and any
    error is one TraceqError line. Returns "ran" or the refusal."""
    from traceq.engine.catalog import sql
    from traceq.errors import TraceqError

    before = tree(store)
    try:
        sql(statement, store, allow_writes=True)
        outcome = "ran"
    except TraceqError as exc:
        assert "\n" not in str(exc), str(exc)
        outcome = str(exc)
    after = tree(store)
    assert after == before, f"{statement!r} changed the store: {set(after.items()) ^ set(before.items())}"
    return outcome
