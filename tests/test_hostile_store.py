"""The store against tampering and killed processes (issue 36 items 2, 4, 8, 10, 15, 20):
a manifest path never leads out of the store, store paths are never globbed, stale staging is
removed and reported, `traceq rm` and doctor's UTF-8 check, polars panics and the Dask
dashboard."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import SAMPLES, run_traceq
from traceq.errors import TraceqError
from traceq.ingest import ingest
from traceq.store import RankData, Store, staging

NSYS = SAMPLES / "nsys_sample.sqlite"
TIMER = SAMPLES / "timer_sample.jsonl"


@pytest.fixture(scope="module")
def base_store(tmp_path_factory):
    d = tmp_path_factory.mktemp("hstore") / "store"
    ingest([NSYS], d, run="s")
    ingest([TIMER], d, run="t")
    return d


@pytest.fixture
def store(base_store, tmp_path):
    s = tmp_path / "store"
    shutil.copytree(base_store, s)
    return s


def _tamper(store, run: str, files: dict) -> None:
    t = pq.read_table(store / "runs.parquet")
    rows = t.to_pylist()
    for r in rows:
        if r["run"] == run:
            r["files"] = json.dumps(files)
    pq.write_table(pa.Table.from_pylist(rows, schema=t.schema), store / "runs.parquet")


# ------------------------------------------------------------------ item 4: tampered manifest
@pytest.mark.parametrize("bad", ["../precious.parquet", "gpu_ops/../../precious.parquet", "{abs}",
                                 "gpu_ops/x.txt", ".staging/a.parquet"])
def test_tampered_manifest_never_leads_out_of_the_store(store, bad):
    precious = store.parent / "precious.parquet"
    pq.write_table(pa.table({"a": [1]}), precious)
    _tamper(store, "s", {"gpu_ops": bad.format(abs=precious)})
    manifest = (store / "runs.parquet").read_bytes()
    for call in (lambda: ingest([NSYS], store, run="s", force=True),
                 lambda: Store(store).connect(),
                 lambda: __import__("traceq.doctor").doctor.check_store(store),
                 lambda: Store(store).remove(["s"])):
        with pytest.raises(TraceqError, match=r"store manifest is damaged: it lists .*not a table file inside the store"):
            call()
    assert precious.exists() and (store / "runs.parquet").read_bytes() == manifest
    r = run_traceq("ingest", NSYS, "--run", "s", "--force", "--store", store, cwd=store.parent)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "manifest is damaged" in r.stderr
    assert precious.exists()


def test_manifest_files_that_are_not_json_are_damage(store):
    _tamper(store, "s", {})
    t = pq.read_table(store / "runs.parquet").to_pylist()
    t[0]["files"] = "[1, 2"
    pq.write_table(pa.Table.from_pylist(t, schema=pq.read_schema(store / "runs.parquet")), store / "runs.parquet")
    with pytest.raises(TraceqError, match="store manifest is damaged"):
        Store(store).connect()


# ------------------------------------------------------------------ item 8: [ ] in the store path
def test_store_path_with_brackets(tmp_path):
    """A store path is a path, never a pattern: `st[1]` next to a store `st1`."""
    decoy = tmp_path / "st1"
    ingest([TIMER], decoy, run="decoy")
    r = run_traceq("ingest", NSYS, "--store", "st[1]", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for cmd in (["summary"], ["hotspots"], ["diagnose"], ["sql", "SELECT count(*) AS n FROM gpu_ops"], ["doctor"],
                ["rm", "nsys_sample"]):
        r = run_traceq(*cmd, "--store", "st[1]", cwd=tmp_path)
        assert r.returncode == 0, (cmd, r.stderr)
        if cmd[0] == "sql":   # the sample's 39 device ops, not the decoy's none
            assert r.stdout.split()[-1] == "39", r.stdout
    assert Store(decoy).manifest_rows()[0]["run"] == "decoy"


def test_kineto_ingest_into_a_store_path_with_brackets(tmp_path):
    r = run_traceq("ingest", SAMPLES / "fast_dataloader" / "rank0.pt.trace.json.gz", "--store", "st[1]", "-q",
                   cwd=tmp_path)
    assert r.returncode == 0, r.stderr


# ------------------------------------------------------------------ item 15: stale staging
def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _staging_dir(store, name: str, owner: dict | None, mb: int = 1, age_s: float = 0):
    d = store / ".staging" / name
    d.mkdir(parents=True)
    (d / "gpu_ops.parquet").write_bytes(b"\0" * (mb << 20))
    if owner is not None:
        (d / staging.OWNER_FILE).write_text(json.dumps(owner))
    if age_s:
        t = time.time() - age_s
        for f in [*d.iterdir(), d]:
            os.utime(f, (t, t))
    return d


def test_stale_staging_is_reported_and_removed(store):
    host = socket.gethostname()
    dead = _staging_dir(store, "dead", {"host": host, "pid": _dead_pid(), "start": None}, mb=2)
    live = _staging_dir(store, "live", staging.owner_id())
    other = _staging_dir(store, "other", {"host": "elsewhere", "pid": 1, "start": None})
    other_old = _staging_dir(store, "other_old", {"host": "elsewhere", "pid": 1, "start": None},
                             age_s=staging.STALE_STAGING_S + 60)
    orphan_new = _staging_dir(store, "no_owner", None)   # just made: its owner file may follow
    r = run_traceq("doctor", "--store", store, cwd=store.parent)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 2, r.stderr
    assert any("dead: stale staging folder (2.1 MB; its ingest (pid" in x for x in lines)
    assert any("other_old: stale staging folder (1.0 MB; unchanged for 1.0 h, owned by elsewhere)" in x for x in lines)
    ingest([TIMER], store, run="t2")   # the next ingest of the store cleans up
    assert not dead.exists() and not other_old.exists()
    assert live.exists() and other.exists() and orphan_new.exists()


def test_a_reused_pid_is_not_its_owner(store):
    """Same pid, another start time: the owner is gone (pid reuse)."""
    me = staging.owner_id()
    if me["start"] is None:
        pytest.skip("no /proc start times here")
    d = _staging_dir(store, "reused", {**me, "start": me["start"] - 1})
    assert d in [p for p, _ in staging.stale(store)]


def test_staging_folders_name_the_ingest_not_the_worker(tmp_path):
    """Workers stage for the ingest that commits: their folders name that process."""
    seen = []
    real = staging.stage

    def spy(root, data, fill=None):
        st = real(root, data, fill)
        seen.append(json.loads((st.staging_dir / staging.OWNER_FILE).read_text()))
        return st

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(staging, "stage", spy)
        ingest([TIMER], tmp_path / "s", run="t")
    assert seen and seen[0]["pid"] == os.getpid() and seen[0]["host"] == socket.gethostname()


# ------------------------------------------------------------------ item 2: rm, and doctor's UTF-8 check
def test_rm_removes_a_run_and_its_files(store):
    files = [store / p for p in json.loads(next(r for r in Store(store).manifest_rows() if r["run"] == "s")["files"]).values()]
    r = run_traceq("rm", "s", "--store", store, cwd=store.parent)
    assert r.returncode == 0 and "removed run 's' (1 rank(s))" in r.stdout, r.stderr
    assert [x["run"] for x in Store(store).manifest_rows()] == ["t"]
    assert not any(f.exists() for f in files)
    r = run_traceq("sql", "SELECT count(*) AS n FROM timer_stats", "--store", store, "--format", "csv", cwd=store.parent)
    assert r.returncode == 0 and r.stdout.split() == ["n", str(Store(store).manifest_rows()[0]["n_timer_stats"])]


def test_rm_of_an_unknown_run_changes_nothing(store):
    before = (store / "runs.parquet").read_bytes()
    r = run_traceq("rm", "t", "nope", "--store", store, cwd=store.parent)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "run 'nope' is not in the store (runs: 's', 't'); nothing was removed" in r.stderr
    assert (store / "runs.parquet").read_bytes() == before


def test_doctor_finds_invalid_utf8_and_names_the_run_to_remove(store):
    bad = pa.array([b"caf\xe9", b"ok"], pa.binary()).view(pa.string())   # what a lax decoder would store
    regions = pa.table({"name": bad, "start_ns": pa.array([1, 5], pa.int64()), "end_ns": pa.array([2, 6], pa.int64())})
    st = Store(store)
    st.commit([st.stage(RankData(run="bad", rank=0, tables={"regions": regions}, source_path="t.jsonl",
                                 source_sha256="x", source_format="timer"))])
    r = run_traceq("doctor", "--store", store, cwd=store.parent)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and "invalid UTF-8 in column 'name' (run 'bad' rank 0, regions)" in r.stderr
    assert "repair: traceq rm 'bad', then traceq ingest t.jsonl --run 'bad'" in r.stderr
    assert run_traceq("rm", "bad", "--store", store, cwd=store.parent).returncode == 0
    r = run_traceq("doctor", "--store", store, cwd=store.parent)
    assert r.returncode == 0 and "store OK" in r.stdout


# ------------------------------------------------------------------ item 10: polars panics
def test_a_polars_panic_is_one_line(store, monkeypatch, capsys):
    from polars.exceptions import PanicException

    import traceq.engine.catalog as catalog
    from traceq import cli

    def panic(*a, **k):
        raise PanicException("index out of bounds: the len is 0 but the index is 0")

    monkeypatch.setattr(catalog, "runs", panic)
    monkeypatch.setattr(sys, "argv", ["traceq", "runs", "--store", str(store)])
    monkeypatch.delenv("TRACEQ_DEBUG", raising=False)
    with pytest.raises(SystemExit) as ex:
        cli._main()
    err = capsys.readouterr().err
    assert ex.value.code == 1 and err.count("\n") == 1
    assert err.startswith("traceq: internal error: polars panicked (index out of bounds")


# ------------------------------------------------------------------ item 20: no dashboard port
def test_local_cluster_listens_on_loopback_only_and_not_on_8787():
    pytest.importorskip("distributed")
    from traceq.executor import local_cluster

    def open_8787() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", 8787)) == 0

    if open_8787():
        pytest.skip("something else listens on 8787")
    cluster = local_cluster(1)
    try:
        assert not open_8787()
        bound = [s.getsockname() for s in cluster.scheduler.http_server._sockets.values()]
        assert bound and all(host == "127.0.0.1" and port != 8787 for host, port, *_ in bound)
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
    finally:
        cluster.close()


def test_many_stale_staging_folders_are_one_line(store):
    host = socket.gethostname()
    for i in range(5):
        _staging_dir(store, f"dead{i}", {"host": host, "pid": _dead_pid(), "start": None})
    r = run_traceq("doctor", "--store", store, cwd=store.parent)
    assert r.returncode == 0 and r.stderr.count("\n") == 1, r.stderr
    assert "5 stale staging folders (5.2 MB) of ingests that are gone; the next ingest removes them" in r.stderr
