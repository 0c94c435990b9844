"""The run's findings kept beside the store (traceq/engine/findings_cache.py): the "Fix first" line of
every analysis after the first reads them instead of computing the stall attribution again.
They must never be stale: a re-ingested run, another scope or other code is a new key; a
store that cannot be written and a damaged file cost only the time."""
from __future__ import annotations

import json
import os

import pytest
from scoped import diagnose
from test_fix_first import LATE_US, _churn_rank, _first_line, _host_bound_cnn

import traceq.analyses.stalls as stalls_mod
import traceq.engine.rank_facts as rank_facts_mod   # diagnose's stall attribution, every rank at once
import traceq.engine.stall_attribution as attribution_mod
from traceq.analyses.registry import REGISTRY, compute
from traceq.engine import findings_cache as cache
from traceq.engine.findings import run_findings
from traceq.engine.scope import open_scope
from traceq.ingest import ingest

# Where the stall attribution is looked up outside diagnose: in its own module (the run's
# findings import it when they run, the rank tasks of a mapped run call rank_stalls there) and
# in the stalls analysis.
STALLS_USERS = (attribution_mod, stalls_mod)


def _computed(store, run=None, steps=None, monkeypatch=None) -> list[dict]:
    """The findings computed without the cache (the second method)."""
    monkeypatch.setenv("TRACEQ_FINDINGS_CACHE", "0")
    try:
        return [f.__dict__ for f in run_findings(open_scope(store, run, steps=steps))]
    finally:
        monkeypatch.delenv("TRACEQ_FINDINGS_CACHE")


def _count_stalls(monkeypatch, *modules) -> list[int]:
    """Count the calls of `stalls_scoped` looked up in `modules` (default: every user of the
    stall attribution but diagnose, which holds its own reference)."""
    calls = [0]
    real = attribution_mod.stalls_scoped

    def counted(*a, **k):
        calls[0] += 1
        return real(*a, **k)

    for module in modules or STALLS_USERS:
        monkeypatch.setattr(module, "stalls_scoped", counted)
    return calls


@pytest.fixture
def store(tmp_path):
    s = tmp_path / "s"
    ingest([_host_bound_cnn().write(tmp_path / "t.pt.trace.json.gz")], store=s, run="r", jobs=1)
    return s


def test_analyses_after_the_first_read_the_kept_findings(store, monkeypatch):
    calls = _count_stalls(monkeypatch)
    first = _first_line(compute(REGISTRY["summary"], store))
    assert first.startswith("Fix first: host_bound") and calls[0] == 1
    files = list((store / ".cache" / "findings").glob("*.json"))
    assert len(files) == 1
    for name in ("hotspots", "overlap", "breakdown"):
        assert _first_line(compute(REGISTRY[name], store)) == first
    assert calls[0] == 1                      # no stall attribution after the first analysis
    kept = [f.__dict__ for f in run_findings(open_scope(store))]
    assert kept == _computed(store, monkeypatch=monkeypatch)   # every field, as computed


def test_a_reingested_run_is_a_new_key(store, tmp_path, monkeypatch):
    assert _first_line(compute(REGISTRY["summary"], store)).startswith("Fix first: host_bound")
    # the same run replaced by an allocator-churn trace
    ingest([_churn_rank(6).write(tmp_path / "u.pt.trace.json.gz")], store=store, run="r", jobs=1, force=True)
    line = _first_line(compute(REGISTRY["summary"], store))
    want = _computed(store, monkeypatch=monkeypatch)[0]
    assert want["id"] == "allocator_churn" and line.startswith("Fix first: allocator_churn")


def test_each_scope_keeps_its_own(store, monkeypatch):
    whole = [f.__dict__ for f in run_findings(open_scope(store))]
    step2 = [f.__dict__ for f in run_findings(open_scope(store, steps="2:3"))]
    assert len(list((store / ".cache" / "findings").glob("*.json"))) == 2
    assert whole == _computed(store, monkeypatch=monkeypatch)
    assert step2 == _computed(store, steps="2:3", monkeypatch=monkeypatch)
    # the scope of one step: channels_last's 0.10 ms of the 2 ms of GPU work is above the floor,
    # and the host's 8 ms of CPU work inside the step is GPU idle of that step in the time ledger
    # (the next step's convolution is outside the scope, but the idle is the step's): host_bound
    assert [f["id"] for f in whole] == ["host_bound", "channels_last"] == [f["id"] for f in step2]


def test_other_code_is_a_new_key(store, monkeypatch):
    calls = _count_stalls(monkeypatch)
    run_findings(open_scope(store))
    run_findings(open_scope(store))
    assert calls[0] == 1
    monkeypatch.setattr(cache, "_code", "another version of traceq")
    run_findings(open_scope(store))
    assert calls[0] == 2


def test_a_store_that_cannot_be_written_computes_them(store, monkeypatch):
    calls = _count_stalls(monkeypatch)

    def refuse(*a, **k):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(os, "replace", refuse)
    for _ in range(2):
        assert _first_line(compute(REGISTRY["summary"], store)).startswith("Fix first: host_bound")
    assert calls[0] == 2
    assert not [p for p in (store / ".cache" / "findings").iterdir()]   # nor a temporary file left


@pytest.mark.parametrize("damage", ["", "{not json", '{"key": 1}', '{"key": "K", "findings": [{"id": 3}]}', "[]"])
def test_a_damaged_file_is_recomputed_and_replaced(store, monkeypatch, damage):
    line = _first_line(compute(REGISTRY["summary"], store))
    (path,) = (store / ".cache" / "findings").glob("*.json")
    key = json.loads(path.read_text())["key"]
    path.write_text(damage.replace('"K"', json.dumps(key)))
    calls = _count_stalls(monkeypatch)
    assert _first_line(compute(REGISTRY["summary"], store)) == line
    assert calls[0] == 1 and json.loads(path.read_text())["key"] == key


def test_off_with_the_environment_variable(store, monkeypatch):
    monkeypatch.setenv("TRACEQ_FINDINGS_CACHE", "0")
    calls = _count_stalls(monkeypatch)
    compute(REGISTRY["summary"], store)
    compute(REGISTRY["summary"], store)
    assert calls[0] == 2 and not (store / ".cache").exists()


def test_a_run_mapped_over_its_ranks_reads_them_and_its_tasks_skip_the_stalls(tmp_path, monkeypatch):
    """Two ranks analysed as a map (--jobs 1: the tasks in this process; a batch per rank). The
    first analysis computes each batch's stalls (2 calls) and keeps the findings; the next
    one's tasks skip them and its line is the same."""
    from traceq.engine import per_rank

    monkeypatch.setattr(per_rank, "BATCH_EVENTS", 1)   # batches of one rank each
    store = tmp_path / "s"
    for rank in (0, 1):
        ingest([_churn_rank(3).write(tmp_path / f"r{rank}.pt.trace.json.gz")], store=store, run="ddp", rank=rank,
               jobs=1)
    calls = _count_stalls(monkeypatch)
    first = _first_line(compute(REGISTRY["summary"], store, run="ddp", jobs=1))
    assert first.startswith("Fix first: allocator_churn") and calls[0] == 2
    for name in ("overlap", "breakdown"):
        assert _first_line(compute(REGISTRY[name], store, run="ddp", jobs=1)) == first
    assert calls[0] == 2


def test_diagnose_keeps_its_verdict_and_findings(store, monkeypatch):
    """diagnose at its defaults keeps its verdict with the findings: a second diagnose and the
    other analyses' "Fix first" line compute no stalls, and every value equals diagnose's
    computed without the cache (the second method)."""
    calls, fix_calls = _count_stalls(monkeypatch, rank_facts_mod), _count_stalls(monkeypatch)
    first = diagnose(store).to_dicts()
    assert calls[0] == 1
    doc = json.loads(next((store / ".cache" / "findings").glob("*.json")).read_text())
    assert doc["verdict"]["bound"] == "host" and doc["verdict"]["stepped"] is True
    again = diagnose(store).to_dicts()
    assert calls[0] == 1 and again == first
    line = _first_line(compute(REGISTRY["summary"], store))
    assert fix_calls[0] == 0 and line.startswith(f"Fix first: host_bound (up to {LATE_US / 1000:.2f} ms/step")
    monkeypatch.setenv("TRACEQ_FINDINGS_CACHE", "0")
    assert diagnose(store).to_dicts() == first
    assert calls[0] == 2


def test_diagnose_after_the_findings_alone_computes_and_keeps_its_verdict(store, monkeypatch):
    """The findings kept by another analysis carry no verdict: diagnose computes it (once) and
    keeps it; another minimum gap is computed each time and keeps nothing."""
    compute(REGISTRY["hotspots"], store)
    path = next((store / ".cache" / "findings").glob("*.json"))
    assert "verdict" not in json.loads(path.read_text())
    calls = _count_stalls(monkeypatch, rank_facts_mod)
    row = diagnose(store).row(0, named=True)
    assert calls[0] == 1 and json.loads(path.read_text())["verdict"]["bound"] == row["bound"] == "host"
    diagnose(store)
    assert calls[0] == 1
    # another minimum gap: the 8 ms gaps are below it, but the verdict reads the time ledger,
    # where every idle instant counts (--min-gap-us picks the gaps the stall tables list)
    other = diagnose(store, min_gap_us=10_000.0).row(0, named=True)
    diagnose(store, min_gap_us=10_000.0)
    assert calls[0] == 3 and other["bound"] == "host"
    assert json.loads(path.read_text())["verdict"]["bound"] == "host"
