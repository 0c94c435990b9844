"""Bad input never produces a traceback; the store is never half-written; re-ingest is a
no-op. These run the real `traceq` CLI in a subprocess, as a user would."""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, shared_trace


def traceq(*args, cwd=None, prefix=(), timeout=120) -> subprocess.CompletedProcess:
    env = dict(os.environ, TRACEQ_DEBUG="0")
    return subprocess.run([*prefix, sys.executable, "-m", "traceq", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd or REPO, env=env, timeout=timeout)


# root ignores file permissions; without these capabilities it obeys them like any user
AS_PLAIN_USER = ("setpriv", "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search")


def small_trace(tmp_path: Path) -> Path:
    doc = {"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5,
         "args": {"device": 0, "stream": 7, "correlation": 1}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9, "ts": 8, "dur": 1,
         "args": {"correlation": 1}},
    ]}
    p = tmp_path / "good.json"
    p.write_text(json.dumps(doc))
    return p


def store_digest(store: Path) -> dict[str, str]:
    """Every file of the store (but the lock) with its sha256: 'unchanged' means equal digests."""
    out = {}
    for f in sorted(store.rglob("*")):
        if f.is_file() and f.name != ".lock":
            out[str(f.relative_to(store))] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


@pytest.fixture
def seeded_store(tmp_path) -> Path:
    store = tmp_path / "store"
    r = traceq("ingest", small_trace(tmp_path), "--store", store, "-q")
    assert r.returncode == 0, r.stderr
    return store


def bad_inputs(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """case -> (path, expected problem text)."""
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    rnd = tmp_path / "random.bin"
    rnd.write_bytes(bytes((i * 7919 + 13) % 251 for i in range(4096)))
    notrace = tmp_path / "config.json"
    notrace.write_text('{"lr": 0.1, "epochs": 3}')
    records = tmp_path / "records.json"   # issue 8, defect 9: was "added" as an empty run
    records.write_text('[{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]')
    no_events = tmp_path / "no_events.json"
    no_events.write_text('{"traceEvents": [], "schemaVersion": 1}')
    bad_times = tmp_path / "bad_times.json"
    bad_times.write_text('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1e300, "dur": 1, "pid": 1, "tid": 1},'
                         ' {"ph": "X", "name": "b", "ts": "soon", "dur": 1, "pid": 1, "tid": 1}]}')
    trunc = tmp_path / "cut.json.gz"
    events = [{"ph": "X", "cat": "cpu_op", "name": hashlib.sha256(str(i).encode()).hexdigest(), "pid": 1, "tid": 1,
               "ts": i, "dur": 1} for i in range(2000)]
    whole = gzip.compress(json.dumps({"traceEvents": events}).encode())
    trunc.write_bytes(whole[: len(whole) // 2])
    db = tmp_path / "other.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    con.commit()
    con.close()
    return {
        "empty file": (empty, "empty file"),
        "random bytes": (rnd, "not a trace"),
        "json that is not a trace": (notrace, "not a trace: a JSON object with keys 'lr', 'epochs'"),
        "json list of records": (records, "no trace events: a list of 2 JSON records (the first has keys 'id', "),
        "empty event list": (no_events, "no trace events (the event list is empty)"),
        "events without usable times": (bad_times, "no trace events left: dropped 2 events"),
        "truncated gz": (trunc, "truncated .gz"),
        "sqlite without nsys tables": (db, "not an Nsight Systems export"),
        "missing path": (tmp_path / "nope.json", "no such file or directory"),
    }


@pytest.mark.parametrize("case", ["empty file", "random bytes", "json that is not a trace", "json list of records",
                                  "empty event list", "events without usable times", "truncated gz",
                                  "sqlite without nsys tables", "missing path"])
def test_bad_input_is_one_line_exit_2_and_store_unchanged(case, tmp_path, seeded_store):
    path, problem = bad_inputs(tmp_path)[case]
    before = store_digest(seeded_store)
    r = traceq("ingest", path, "--store", seeded_store)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"traceq: {path}: ")
    assert problem in lines[0]
    assert "Traceback" not in r.stderr + r.stdout
    assert store_digest(seeded_store) == before


def test_unreadable_directory_is_one_line_exit_2(tmp_path, seeded_store):
    d = tmp_path / "locked"
    d.mkdir()
    (d / "rank0.json").write_text("{}")
    d.chmod(0o000)
    before = store_digest(seeded_store)
    prefix = ()
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: cannot make a directory unreadable")
        prefix = AS_PLAIN_USER
    try:
        r = traceq("ingest", d, "--store", seeded_store, prefix=prefix)
    finally:
        d.chmod(0o755)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == f"traceq: {d}: directory is not readable"
    assert store_digest(seeded_store) == before


def test_a_bad_file_in_a_directory_fails_the_whole_run_and_changes_nothing(tmp_path, seeded_store):
    d = tmp_path / "run"
    d.mkdir()
    good = small_trace(tmp_path)
    (d / "rank0.json").write_bytes(good.read_bytes())
    # a trace whose events are all unusable (a file that is no trace at all is skipped instead:
    # test_ingest_dir_skips.py)
    (d / "rank1.json").write_text('{"traceEvents": [{"ph": "X", "name": "a", "ts": "x", "dur": 1, "pid": 1, "tid": 1}]}')
    before = store_digest(seeded_store)
    r = traceq("ingest", d, "--store", seeded_store)
    assert r.returncode == 2
    assert r.stderr.strip().startswith(f"traceq: {d / 'rank1.json'}:")
    assert store_digest(seeded_store) == before


def test_reingest_is_a_noop_and_force_replaces(tmp_path):
    store = tmp_path / "store"
    trace = small_trace(tmp_path)
    assert traceq("ingest", trace, "--store", store, "-q").returncode == 0
    first = store_digest(store)
    r = traceq("ingest", trace, "--store", store, "-f", "json")
    assert r.returncode == 0
    assert json.loads(r.stdout)[0]["status"] == "unchanged"
    assert store_digest(store) == first
    r = traceq("ingest", trace, "--store", store, "--force", "-f", "json")
    assert json.loads(r.stdout)[0]["status"] == "replaced"
    after = store_digest(store)
    assert set(after) != set(first)           # new table files, old ones deleted
    assert len(after) == len(first)
    r = traceq("sql", "SELECT count(*) AS n FROM gpu_ops", "--store", store, "-f", "json")
    assert json.loads(r.stdout) == [{"n": 1}]


def test_debug_shows_the_traceback(tmp_path):
    r = traceq("--debug", "ingest", tmp_path / "missing.json", "--store", tmp_path / "s")
    assert r.returncode != 0
    assert "Traceback" in r.stderr


@pytest.mark.slow
def test_killed_ingest_leaves_the_store_readable_and_as_it_was(tmp_path):
    """SIGKILL an ingest at several moments (parsing, writing); the store must read back
    exactly as before, and a later ingest must work."""
    src = shared_trace("kineto/hta/trace_diff/control/control.json.gz")
    sys.path.insert(0, str(REPO / "benchmarks"))
    from replicate_trace import replicate

    big = tmp_path / "big.json"
    replicate(src, 2, big)
    store = tmp_path / "store"
    assert traceq("ingest", small_trace(tmp_path), "--store", store, "-q").returncode == 0
    before = store_digest(store)
    env = dict(os.environ)
    killed = 0
    for delay in (0.3, 0.8, 1.3, 1.8, 2.5):
        proc = subprocess.Popen([sys.executable, "-m", "traceq", "ingest", str(big), "--store", str(store), "-q"],
                                cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed += 1
        proc.wait()
        if proc.returncode == 0:   # the machine was fast enough to finish: undo and go on
            assert traceq("sql", "SELECT 1", "--store", store).returncode == 0
            break
        r = traceq("runs", "--store", store, "-f", "json")
        assert r.returncode == 0
        runs = [x["run"] for x in json.loads(r.stdout)]
        if runs == ["good", "big"]:   # killed after its commit, while exiting: the run is complete
            n = traceq("sql", "SELECT count(*) AS n FROM gpu_ops WHERE run = 'big'", "--store", store, "-f", "json")
            assert json.loads(n.stdout)[0]["n"] == 2 * 9450
            break
        assert runs == ["good"]
        digest = {k: v for k, v in store_digest(store).items() if not k.startswith(".staging")}
        assert digest == before
    assert killed >= 1
    r = traceq("ingest", big, "--store", store, "-q")   # a no-op if the last kill came after the commit
    assert r.returncode == 0, r.stderr
    r = traceq("sql", "SELECT count(*) AS n FROM gpu_ops WHERE run = 'big'", "--store", store, "-f", "json")
    assert json.loads(r.stdout)[0]["n"] == 2 * 9450


@pytest.mark.parametrize("case", ["empty event list", "events without usable times", "truncated gz", "empty file"])
def test_a_failed_ingest_into_a_fresh_path_leaves_nothing_behind(case, tmp_path):
    """A first ingest that fails (here after the store folder was created: the readers stage,
    or refuse before any work) leaves neither the store folder nor the parents it created;
    a folder that was already there stays (empty)."""
    from traceq.errors import TraceqError
    from traceq.ingest import ingest

    path, problem = bad_inputs(tmp_path)[case]
    (tmp_path / "there").mkdir()
    store = tmp_path / "there" / "new" / "deeper" / "store"
    with pytest.raises(TraceqError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        ingest([path], store=store, jobs=1)
    assert not (tmp_path / "there" / "new").exists() and list((tmp_path / "there").iterdir()) == []


def test_a_failed_cli_ingest_into_a_fresh_path_leaves_nothing_and_keeps_an_existing_folder(tmp_path):
    path, _ = bad_inputs(tmp_path)["empty event list"]
    r = traceq("ingest", path, "--store", tmp_path / "fresh" / "store")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "fresh").exists()
    (tmp_path / "mine").mkdir()                       # a folder the user made: it stays
    r = traceq("ingest", path, "--store", tmp_path / "mine")
    assert r.returncode == 2 and (tmp_path / "mine").is_dir()


def test_a_failed_first_ingest_leaves_another_ingests_staging_alone(tmp_path):
    """Another ingest staging into the same fresh store (its folder in .staging): the failed
    one removes nothing."""
    from traceq.errors import TraceqError
    from traceq.ingest import ingest
    from traceq.store import Store

    path, _ = bad_inputs(tmp_path)["empty event list"]
    store = tmp_path / "s"
    st = Store(store)
    root = st.missing_root()
    assert root == store
    (store / ".staging" / "other").mkdir(parents=True)
    with pytest.raises(TraceqError):
        ingest([path], store=store, jobs=1)
    st.remove_if_unused(root)
    assert (store / ".staging" / "other").is_dir()
