"""`traceq diagnose` of a run of several ranks in one set-based pass (traceq.engine.rank_facts:
each query once over every rank, its rows split by rank) gives each rank exactly what the
per-rank computation gives on that rank alone. The reference here is the per-rank path as
diagnose ran it before: the scope narrowed to the rank (`open_scope(store, rank=r)`), the
pooled stall attribution, run facts, critical path, evidence and findings of that scope.

Runs: the 2-rank DDP sample (rank 0 waits in gloo collectives for the straggler, rank 1
computes), a generated 4-rank NCCL run (benchmarks/make_many_ranks.py from trace_filter
rank 0), and a mixed run of trace_filter ranks 0-1, nccl_parser_config as rank 2 and the
CPU-only capture as rank 3 (no GPU work).
"""
from __future__ import annotations

import shutil

import polars as pl
import pytest

from conftest import SAMPLES, generated_ranks_store, mixed_ranks_store
from traceq.advice import evidence_for, findings
from traceq.advice.run_facts import run_facts
from traceq.analyses.diagnose import diagnose_scoped, efficiency, path_row, verdict
from traceq.analyses.summary import summary_scoped
from traceq.engine import findings_cache
from traceq.engine.ledger import with_ledger
from traceq.engine.path_facts import with_path
from traceq.engine.scope import open_scope
from traceq.engine.stall_attribution import stalls_scoped
from traceq.engine.truncation import truncation
from traceq.ingest import ingest



@pytest.fixture(autouse=True)
def _no_findings_cache(monkeypatch):
    monkeypatch.setenv("TRACEQ_FINDINGS_CACHE", "0")


@pytest.fixture(scope="module")
def ddp(tmp_path_factory):
    store = tmp_path_factory.mktemp("ddp") / "store"
    ingest([SAMPLES / "gpu" / "ddp_gloo_straggler"], store, jobs=1)
    return store


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return generated_ranks_store(tmp_path_factory)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    return mixed_ranks_store(tmp_path_factory)


def _alone(store, rank: int, **scope) -> dict:
    """The rank's row as the per-rank loop computed it: the scope narrowed to the rank, the
    pooled queries of that scope."""
    one = open_scope(store, rank=rank, **scope)
    st = stalls_scoped(one)
    st.facts = with_path(one, with_ledger(one, run_facts(one, st)))
    bound, share, ev = verdict(st, st.facts, truncation(one))
    facts = evidence_for(one)
    fs = findings(one, st, facts)
    eff = efficiency(one) if bound == "gpu" else None
    if eff is not None:
        from traceq.analyses.diagnose import efficiency_words

        ev += "; " + efficiency_words(eff)
    idle = summary_scoped(one)
    return {"run": one.run, "rank": rank, "bound": bound, "bound_share_pct": round(share, 2), "evidence": ev,
            "gpu_idle_pct": None if not idle.height or idle["idle_pct"][0] is None
            else round(float(idle["idle_pct"][0]), 4),
            "findings": [f.as_dict() for f in fs], "also_seen": [f.as_dict() for f in fs.also],
            "stepped": facts.stepped, "critical_path": path_row(st.facts)}


def _check(store, **scope) -> pl.DataFrame:
    whole = diagnose_scoped(open_scope(store, **scope))
    assert whole.height >= 2
    for row in whole.iter_rows(named=True):
        assert row == _alone(store, row["rank"], **scope), f"rank {row['rank']}"
    return whole


def test_ddp_sample_set_based_equals_each_rank_alone(ddp):
    whole = _check(ddp)
    # rank 0 waits ~20 ms a step in gloo collectives for rank 1, the straggler, which computes
    assert dict(zip(whole["rank"], whole["bound"])) == {0: "communication", 1: "host"}
    assert whole["findings"][0][0]["id"] == "exposed_communication"
    assert all(cp is not None for cp in whole["critical_path"])


def test_generated_run_set_based_equals_each_rank_alone(generated):
    whole = _check(generated)
    assert whole["rank"].to_list() == [0, 1, 2, 3]
    # four copies of one rank of a 128-rank NCCL job: the same bound on every rank (the exposed
    # communication, as test_diagnose's trace_filter verdict)
    assert whole["bound"].unique().to_list() == ["communication"]


def test_generated_run_with_steps_set_based_equals_each_rank_alone(generated):
    _check(generated, skip_first=1)


def test_mixed_run_set_based_equals_each_rank_alone(mixed):
    whole = _check(mixed)
    assert whole["rank"].to_list() == [0, 1, 2, 3]
    assert whole.filter(pl.col("rank") == 3)["bound"].to_list() == ["no_gpu"]
    assert whole.filter(pl.col("rank") == 3)["critical_path"].to_list() == [None]


def test_findings_cache_keeps_each_rank_as_its_own_scope(ddp, tmp_path, monkeypatch):
    """A run's diagnose keeps one verdict per rank, under the key of the scope narrowed to
    the rank: `diagnose --rank R` and a second diagnose read them."""
    store = tmp_path / "store"
    shutil.copytree(ddp, store)
    monkeypatch.setenv("TRACEQ_FINDINGS_CACHE", "1")
    # each rank under the id of its own scope, never the whole run's (its findings are pooled)
    assert findings_cache.rank_ids(open_scope(store), [0, 1]) == {0: 0, 1: 1}
    assert findings_cache.rank_ids(open_scope(store, rank=1), [1]) == {1: "scope"}
    first = diagnose_scoped(open_scope(store))
    for r in (0, 1):
        key, kept = findings_cache.load_verdict(open_scope(store, rank=r), 50.0)
        assert key is not None and kept is not None
        assert kept[0]["bound"] == first.filter(pl.col("rank") == r)["bound"][0]
    assert diagnose_scoped(open_scope(store)).equals(first)
    assert diagnose_scoped(open_scope(store, rank=1)).row(0, named=True) == first.row(1, named=True)
