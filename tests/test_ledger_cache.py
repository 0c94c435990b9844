"""The time ledger kept beside the store (traceq.engine.ledger_cache): a second scope reads
the kept rows (equal to the computed ones, without sweeping again); a re-ingest, another
scope or data pattern, or TRACEQ_FINDINGS_CACHE=0 computes it; a damaged file is recomputed."""
from __future__ import annotations

from pathlib import Path

import pytest
from kineto_synth import Trace

from traceq.engine import ledger as ledger_mod
from traceq.engine.ledger import ledger
from traceq.engine.scope import open_scope


def small() -> Trace:
    t = Trace()
    for k in range(3):
        s = 1000 * k
        t.step(k + 1, s, 1000)
        t.launch("gemm_kernel", s + 100, 10, s + 120, 500)
        t.annotation("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", s, 90)
    return t


@pytest.fixture()
def store(tmp_path) -> Path:
    from traceq.ingest import ingest

    ingest([small().write(tmp_path / "t.json.gz")], tmp_path / "s", run="t")
    return tmp_path / "s"


def files(store: Path) -> list[Path]:
    return sorted((store / ".cache" / "ledger").glob("*.parquet"))


def no_sweep(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("the ledger was computed again")
    monkeypatch.setattr(ledger_mod, "ledger_part", boom)


def test_second_scope_reads_the_kept_rows(store, monkeypatch):
    first = ledger(open_scope(store, "t")).steps
    assert first.height == 3 and len(files(store)) == 1
    no_sweep(monkeypatch)
    again = ledger(open_scope(store, "t")).steps
    assert again.equals(first) and again.schema == first.schema


def test_other_scope_or_pattern_is_its_own_file(store, monkeypatch):
    ledger(open_scope(store, "t"))
    ledger(open_scope(store, "t", skip_first=1))
    ledger(open_scope(store, "t"), "DataLoader")
    assert len(files(store)) == 3
    assert ledger(open_scope(store, "t", skip_first=1)).steps.height == 2


def test_reingest_and_cache_off_compute_again(store, tmp_path, monkeypatch):
    from traceq.ingest import ingest

    ledger(open_scope(store, "t"))
    ingest([small().write(tmp_path / "u" / "t.json.gz")], store, run="t", force=True)   # replaced: new ingest ids
    calls = []
    real = ledger_mod.ledger_part
    monkeypatch.setattr(ledger_mod, "ledger_part", lambda *a, **k: calls.append(1) or real(*a, **k))
    ledger(open_scope(store, "t"))
    assert calls == [1]
    monkeypatch.setenv("TRACEQ_FINDINGS_CACHE", "0")
    ledger(open_scope(store, "t"))
    assert calls == [1, 1]


def test_a_damaged_file_is_recomputed(store):
    want = ledger(open_scope(store, "t")).steps
    (f,) = files(store)
    f.write_bytes(b"not parquet")
    assert ledger(open_scope(store, "t")).steps.equals(want)
    assert f.read_bytes()[:4] == b"PAR1"
