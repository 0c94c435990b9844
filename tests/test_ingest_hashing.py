"""The sha256 of a source file is the store's idempotency key. A file whose size no manifest row
has cannot be in the store already, so ingest decodes it while its hash is still being
computed, and fills the hash in before the commit; a file that could be in the store (same
size, or rows of an older store that do not know their size) is hashed first, as before.

Each test hands `ingest` its own not-yet-finished hash (a Future) and watches, from inside the
parse, whether ingest waited for it."""
from __future__ import annotations

import hashlib
import json
import threading
from concurrent.futures import Future

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from kineto_synth import Trace

import traceq.ingest as ingest_mod
from traceq.errors import BadInput
from traceq.ingest import ingest


def _trace(path, kernel: str):
    """A small trace; plain JSON (its size depends on the kernel name's length only)."""
    t = Trace()
    t.step(1, 0, 2000)
    t.launch(kernel, 0, 10, 20, 500)
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": t.events}))
    return path


def _watch(monkeypatch, fut: Future, sha: str | None):
    """Parse as usual, but first record whether `fut` was done; then finish `fut` with
    `sha` (an OSError when None), as the hashing thread would."""
    seen = []
    parse = ingest_mod._parse_and_stage

    def wrapped(store_path, job):
        seen.append((fut.done(), job.sha256))
        out = parse(store_path, job)
        if not fut.done():
            if sha is None:
                fut.set_exception(FileNotFoundError(2, "No such file or directory"))
            else:
                fut.set_result(sha)
        return out

    monkeypatch.setattr(ingest_mod, "_parse_and_stage", wrapped)
    # a hash nobody finishes would hang an ingest that waits for it: finish it after 5 s
    # (the parse then sees it done, and the test fails instead of hanging)
    timer = threading.Timer(5, lambda: fut.done() or fut.set_result(sha or "0" * 64))
    timer.daemon = True
    timer.start()
    return seen


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _manifest(store) -> list[dict]:
    return pq.read_table(store / "runs.parquet").to_pylist()


def test_a_new_file_is_decoded_while_it_is_hashed(tmp_path, monkeypatch):
    f = _trace(tmp_path / "a.json", "kernel_a")
    fut = Future()
    seen = _watch(monkeypatch, fut, _sha(f))
    res = ingest([f], store=tmp_path / "s", jobs=1, hashes={str(f): fut})
    assert seen == [(False, None)]            # parsed before the hash was known
    assert res[0].status == "added"
    row = _manifest(tmp_path / "s")[0]
    assert row["source_sha256"] == _sha(f) and row["source_bytes"] == f.stat().st_size


def test_a_file_of_a_size_in_the_store_is_hashed_first(tmp_path, monkeypatch):
    a = _trace(tmp_path / "a.json", "kernel_a")
    b = _trace(tmp_path / "b.json", "kernel_b")      # same length, other content
    assert a.stat().st_size == b.stat().st_size and _sha(a) != _sha(b)
    ingest([a], store=tmp_path / "s", jobs=1)
    # the same file again: hashed first, found unchanged, never parsed
    fut = Future()
    fut.set_result(_sha(a))
    seen = _watch(monkeypatch, fut, _sha(a))
    assert ingest([a], store=tmp_path / "s", jobs=1, hashes={str(a): fut})[0].status == "unchanged"
    assert seen == []
    # another file of that size: its hash comes first (it could have been the same file)
    fut = Future()
    fut.set_result(_sha(b))
    seen = _watch(monkeypatch, fut, _sha(b))
    assert ingest([b], store=tmp_path / "s", jobs=1, hashes={str(b): fut})[0].status == "added"
    assert seen == [(True, _sha(b))]


def test_rows_of_an_older_store_make_every_file_wait_for_its_hash(tmp_path, monkeypatch):
    a = _trace(tmp_path / "a.json", "kernel_a")
    c = _trace(tmp_path / "c.json", "kernel_c_with_a_longer_name")
    ingest([a], store=tmp_path / "s", jobs=1)
    manifest = pq.read_table(tmp_path / "s" / "runs.parquet")
    pq.write_table(manifest.drop_columns(["source_bytes"]), tmp_path / "s" / "runs.parquet")   # as written before
    fut = Future()
    fut.set_result(_sha(c))
    seen = _watch(monkeypatch, fut, _sha(c))
    assert ingest([c], store=tmp_path / "s", jobs=1, hashes={str(c): fut})[0].status == "added"
    assert seen == [(True, _sha(c))]
    rows = {r["run"]: r for r in _manifest(tmp_path / "s")}
    assert rows["a"]["source_bytes"] is None and rows["c"]["source_bytes"] == c.stat().st_size
    assert pa.types.is_int64(pq.read_schema(tmp_path / "s" / "runs.parquet").field("source_bytes").type)


def test_a_hash_that_fails_after_decoding_leaves_the_store_as_it_was(tmp_path, monkeypatch):
    a = _trace(tmp_path / "a.json", "kernel_a")
    c = _trace(tmp_path / "c.json", "kernel_c_with_a_longer_name")
    ingest([a], store=tmp_path / "s", jobs=1)
    before = (tmp_path / "s" / "runs.parquet").read_bytes()
    fut = Future()
    seen = _watch(monkeypatch, fut, None)     # the file vanished while it was being hashed
    with pytest.raises(BadInput, match="c.json: No such file or directory"):
        ingest([c], store=tmp_path / "s", jobs=1, hashes={str(c): fut})
    assert seen == [(False, None)]
    assert (tmp_path / "s" / "runs.parquet").read_bytes() == before
    assert not list((tmp_path / "s").glob("*/run=c"))
    staging = tmp_path / "s" / ".staging"
    assert not staging.exists() or not any(staging.iterdir())


def test_a_failed_ingest_stops_the_hashes_still_running(tmp_path, monkeypatch):
    """A file that is no trace fails at once; its hash (begun before the heavy imports, by
    `start_hashing`) would otherwise go on reading the whole file in the background, and a
    Python program waits for it at exit (1.7 s measured for a 1.5 GB file). Here the hash is
    made slow (1 KB chunks, 20 ms each: 6 s for the 300 KB file); after the error it must stop
    within a chunk."""
    import time

    from traceq.ingest import hashing

    bad = tmp_path / "bad.json"
    bad.write_bytes(b"garbage" + b"x" * 300_000)
    slow = hashlib.sha256

    class Slow:
        def __init__(self):
            self.h = slow()

        def update(self, chunk):
            time.sleep(0.02)
            self.h.update(chunk)

        def hexdigest(self):
            return self.h.hexdigest()

    monkeypatch.setattr(hashing, "_CHUNK", 1024)
    monkeypatch.setattr(hashing.hashlib, "sha256", Slow)
    futs = hashing.start_hashing([bad])
    with pytest.raises(BadInput, match="not a trace"):
        ingest([bad], tmp_path / "store", hashes=futs)
    fut = futs[str(bad)]
    t0 = time.perf_counter()
    from concurrent.futures import CancelledError

    with pytest.raises((hashing.Stopped, CancelledError)):   # stopped mid-file, or never begun
        fut.result(timeout=2)
    assert time.perf_counter() - t0 < 1.0
    assert fut not in hashing._LIVE   # nothing left running
