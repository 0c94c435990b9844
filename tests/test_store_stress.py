"""The store under stress: concurrent ingests, ingest beside analyses and report, a full disk,
a read-only store, damaged Parquet files and manifests, and (slow) kill -9 at random points.
Every case must end in a readable store equal to before or to the complete result."""
from __future__ import annotations

import errno
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO
from fuzzing import store_digest

ENV = dict(os.environ, TRACEQ_DEBUG="0")


def traceq(*args, prefix=(), timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, sys.executable, "-m", "traceq", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, env=ENV, timeout=timeout)


def popen(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "traceq", *map(str, args)], cwd=REPO, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def trace(path: Path, n: int, name: str = "k") -> Path:
    """A Kineto trace with n launches + kernels and ProfilerSteps every 100 kernels."""
    ev = []
    for i in range(n):
        t = 1000 + 10 * i
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t, "dur": 2,
                   "args": {"correlation": i}})
        ev.append({"ph": "X", "cat": "kernel", "name": f"{name}{i % 7}", "pid": 0, "tid": 7, "ts": t + 3, "dur": 6,
                   "args": {"correlation": i, "device": 0, "stream": 7}})
    for s in range(0, n, 100):
        ev.append({"ph": "X", "cat": "cpu_op", "name": f"ProfilerStep#{s // 100}", "pid": 1, "tid": 1,
                   "ts": 1000 + 10 * s, "dur": 1000})
    path.write_text(json.dumps({"traceEvents": ev}))
    return path


def runs_of(store: Path) -> dict[str, int]:
    r = traceq("sql", "SELECT run, count(*) AS n FROM gpu_ops GROUP BY run ORDER BY run", "--store", store, "-f", "json")
    assert r.returncode == 0, r.stderr
    return {x["run"]: x["n"] for x in json.loads(r.stdout)}


def doctor_ok(store: Path) -> None:
    r = traceq("doctor", "--store", store)
    assert r.returncode == 0 and "store OK" in r.stdout, r.stdout + r.stderr


def test_concurrent_ingests_of_the_same_and_different_files(tmp_path):
    store = tmp_path / "store"
    a, b, c = (trace(tmp_path / f"{n}.json", 300 + 50 * i, n) for i, n in enumerate("abc"))
    procs = [popen("ingest", f, "--store", store, "-q") for f in (a, a, a, b, c, b)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, outs
    assert runs_of(store) == {"a": 300, "b": 350, "c": 400}
    manifest = json.loads(traceq("runs", "--store", store, "-f", "json").stdout)
    assert sorted(r["run"] for r in manifest) == ["a", "b", "c"]   # one rank each: same file = unchanged
    doctor_ok(store)


def test_ingest_beside_analyses_and_report(tmp_path):
    store = tmp_path / "store"
    assert traceq("ingest", trace(tmp_path / "base.json", 200), "--store", store, "-q").returncode == 0
    big = trace(tmp_path / "big.json", 20000, "big")
    ing = popen("ingest", big, "--store", store, "-q")
    readers = 0
    while ing.poll() is None or readers < 3:
        for args in (("hotspots", "--run", "base"), ("summary", "--run", "base"), ("runs",)):
            r = traceq(*args, "--store", store)
            assert r.returncode == 0, (args, r.stderr)
        r = traceq("report", "base", "-o", tmp_path / "r.html", "--store", store)
        assert r.returncode == 0, r.stderr
        readers += 1
    assert ing.wait() == 0, ing.stderr.read()
    assert runs_of(store) == {"base": 200, "big": 20000}
    doctor_ok(store)


def test_full_disk_leaves_the_store_as_it_was(tmp_path, monkeypatch):
    """ENOSPC injected into the Parquet writer, first while staging, then at the manifest."""
    import pyarrow.parquet as pq

    from traceq.errors import TraceqError
    from traceq.ingest import ingest

    store = tmp_path / "store"
    ingest([trace(tmp_path / "base.json", 50)], store, jobs=1)
    before = store_digest(store)
    real, real_writer = pq.write_table, pq.ParquetWriter
    for fail_on in ("gpu_ops", "runs"):
        def full(table, where, *a, **k):
            if fail_on in str(where):
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(table, where, *a, **k)

        class FullWriter(real_writer):   # streamed tables (Kineto) are written piece by piece
            def __init__(self, where, *a, **k):
                if fail_on in str(where):
                    raise OSError(errno.ENOSPC, "No space left on device")
                super().__init__(where, *a, **k)

        monkeypatch.setattr(pq, "write_table", full)
        monkeypatch.setattr(pq, "ParquetWriter", FullWriter)
        with pytest.raises(TraceqError, match=r"cannot write to the store \(No space left on device\); nothing was changed"):
            ingest([trace(tmp_path / f"new_{fail_on}.json", 60)], store, jobs=1)
        monkeypatch.setattr(pq, "write_table", real)
        monkeypatch.setattr(pq, "ParquetWriter", real_writer)
        assert store_digest(store) == before
        assert not any((store / ".staging").iterdir())
    assert ingest([trace(tmp_path / "later.json", 70)], store, jobs=1)[0].status == "added"
    doctor_ok(store)


def test_read_only_store_refuses_ingest_in_one_line_and_still_answers(tmp_path):
    store = tmp_path / "store"
    assert traceq("ingest", trace(tmp_path / "base.json", 50), "--store", store, "-q").returncode == 0
    before = store_digest(store)
    prefix = ()
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root without setpriv: permissions are not enforced")
        prefix = ("setpriv", "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search")
    for p in [store, *store.rglob("*")]:
        p.chmod(p.stat().st_mode & ~0o222)
    try:
        r = traceq("ingest", trace(tmp_path / "new.json", 60), "--store", store, prefix=prefix)
        assert r.returncode == 2, r.stderr
        assert r.stderr.startswith(f"traceq: {store}: cannot write to the store (Permission denied)")
        assert len(r.stderr.strip().splitlines()) == 1
        r = traceq("hotspots", "--store", store, prefix=prefix)
        assert r.returncode == 0 and "k0" in r.stdout, r.stderr
    finally:
        for p in [store, *store.rglob("*")]:
            p.chmod(p.stat().st_mode | 0o200)
    assert store_digest(store) == before


def test_damaged_parquet_file_is_named_and_doctor_says_what_to_reingest(tmp_path):
    store = tmp_path / "store"
    src = trace(tmp_path / "base.json", 50)
    assert traceq("ingest", src, "--store", store, "-q").returncode == 0
    doctor_ok(store)
    victim = next((store / "gpu_ops").rglob("*.parquet"))
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])   # torn write
    r = traceq("hotspots", "--store", store)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip() == (f"traceq: {victim}: store file is damaged (IOException); "
                                "run `traceq doctor` to see what to re-ingest") or str(victim) in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = traceq("doctor", "--store", store)
    assert r.returncode == 1
    assert r.stderr.startswith(f"traceq: {victim}: unreadable Parquet")
    assert f"repair: traceq ingest {src} --run 'base' --rank 0 --force" in r.stderr
    assert traceq("ingest", src, "--run", "base", "--rank", "0", "--force", "--store", store, "-q").returncode == 0
    doctor_ok(store)
    assert runs_of(store) == {"base": 50}


def test_missing_file_and_wrong_row_count_are_reported(tmp_path):
    from traceq.doctor import check_store

    store = tmp_path / "store"
    assert traceq("ingest", trace(tmp_path / "base.json", 50), "--store", store, "-q").returncode == 0
    host = next((store / "host_ops").rglob("*.parquet"))
    gpu = next((store / "gpu_ops").rglob("*.parquet"))
    import pyarrow.parquet as pq

    pq.write_table(pq.read_table(gpu).slice(0, 10), gpu)   # a valid file with fewer rows
    host.unlink()
    problems, checked = check_store(store)
    assert checked == 3
    assert sorted(zip(problems["table"], problems["problem"])) == [
        ("gpu_ops", "holds 10 rows, the manifest says 50"), ("host_ops", "missing")]


def test_corrupt_manifest_is_one_line(tmp_path):
    store = tmp_path / "store"
    assert traceq("ingest", trace(tmp_path / "base.json", 50), "--store", store, "-q").returncode == 0
    (store / "runs.parquet").write_bytes(b"PAR1 garbage")
    for args in (("runs",), ("hotspots",), ("doctor",), ("ingest", trace(tmp_path / "n.json", 5))):
        r = traceq(*args, "--store", store)
        assert r.returncode == 2, (args, r.stderr)
        assert r.stderr.startswith(f"traceq: {store / 'runs.parquet'}: store manifest is unreadable"), r.stderr
        assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_kill_9_at_random_points_of_a_large_ingest(tmp_path):
    """SIGKILL a large ingest 20 times at random moments: the store is always either as before
    or holds the complete run, and doctor finds it sound."""
    store = tmp_path / "store"
    assert traceq("ingest", trace(tmp_path / "base.json", 50), "--store", store, "-q").returncode == 0
    before = store_digest(store)
    big = trace(tmp_path / "big.json", 150_000, "big")
    t0 = time.time()
    assert traceq("ingest", big, "--store", tmp_path / "probe", "-q").returncode == 0
    full = time.time() - t0
    rng = random.Random(12)
    outcomes = {"before": 0, "complete": 0}
    for _ in range(20):
        proc = subprocess.Popen([sys.executable, "-m", "traceq", "ingest", str(big), "--store", str(store), "-q",
                                 "--force"], cwd=REPO, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.05, full * 1.1))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        got = runs_of(store)
        if "big" in got:
            assert got == {"base": 50, "big": 150_000}
            outcomes["complete"] += 1
            doctor_ok(store)
            shutil.rmtree(store)   # start again from the small store
            assert traceq("ingest", tmp_path / "base.json", "--store", store, "-q").returncode == 0
            before = store_digest(store)
        else:
            assert got == {"base": 50}
            assert store_digest(store) == before
            outcomes["before"] += 1
        doctor_ok(store)
    assert outcomes["before"] >= 1, outcomes
