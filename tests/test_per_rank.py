"""Per-rank analyses on the executor (traceq/engine/per_rank.py, DESIGN §8).

summary, overlap, stalls, breakdown and diagnose of a run with several ranks run as a map
over ranks (each task reads one rank's files) and a reduce. Their output must equal, to
the last bit, what the same analysis gives in one process over the whole run (the path a
run of one rank still takes). Checked on:

* a real multi-rank run: the two ranks of HTA's trace_filter, plus the single-rank
  nccl_parser_config trace as rank 2 and HTA's CPU-only trace as rank 3 (ranks that differ:
  another model, no GPU ops, no ProfilerSteps);
* a generated 4-rank run (benchmarks/make_many_ranks.py from trace_filter rank 0);
with the executor in this process, a local process pool of 2, and Dask (a LocalCluster of
2 worker processes; skipped without dask).
"""
from __future__ import annotations


import polars as pl
import pytest

from conftest import generated_ranks_store, mixed_ranks_store, shared_trace
from traceq.analyses.diagnose import diagnose_scoped
from traceq.analyses.registry import REGISTRY, compute
from traceq.engine import per_rank
from traceq.engine import scope as scope_mod
from traceq.engine.scope import open_scope
from traceq.errors import TraceqError
from traceq.executor import ExecutorSpec
from traceq.ingest import ingest
from traceq.store import Store


@pytest.fixture(autouse=True)
def _no_findings_cache(monkeypatch):
    """Both paths compute the run's findings (the "Fix first" line): kept beside the store,
    the second would read the first's, and the reduce of the map would go untested."""
    monkeypatch.setenv("TRACEQ_FINDINGS_CACHE", "0")


CASES = [("summary", {}), ("summary", {"window": "hta"}),
         ("overlap", {}), ("overlap", {"by": "step"}), ("overlap", {"by": "across", "window": "hta"}),
         ("breakdown", {}), ("breakdown", {"by": "annotation"}), ("breakdown", {"by": "timer"}),
         ("stalls", {}), ("stalls", {"min_gap_us": 5.0, "data_pattern": "optimizer"}), ("overview", {})]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """Run "mix": trace_filter ranks 0-1, nccl_parser_config as rank 2, cpu_only as rank 3."""
    return mixed_ranks_store(tmp_path_factory)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return generated_ranks_store(tmp_path_factory)


def _whole(store, name: str, **params):
    """Today's single-process result: the analysis over the whole run's views."""
    p = {x.name: params.get(x.name, x.default) for x in REGISTRY[name].params if x.name not in
         ("executor", "scheduler", "scheduler_file", "jobs")}
    return REGISTRY[name].compute(open_scope(store), **p)


def _assert_same(whole, mapped, name: str) -> None:
    assert mapped.headline == whole.headline
    assert mapped.notes == whole.notes and mapped.highlight == whole.highlight
    assert mapped.df.schema == whole.df.schema
    assert mapped.df.equals(whole.df), name
    assert mapped.tables.keys() == whole.tables.keys()
    for k, t in whole.tables.items():
        assert mapped.tables[k].equals(t), (name, k)
    if name == "stalls":
        for k in ("causes", "steps", "gaps", "launch"):
            assert getattr(mapped.value, k).equals(getattr(whole.value, k)), (name, k)
        assert mapped.value.single_process_loader == whole.value.single_process_loader


# one case per analysis, for the executors that start processes (keeps the suite fast)
CORE = [("summary", {"window": "hta"}), ("overlap", {"by": "step"}), ("breakdown", {}), ("stalls", {}),
        ("overview", {})]


def _check_all(store, cases=CASES, **ex) -> None:
    for name, params in cases:
        _assert_same(_whole(store, name, **params), compute(REGISTRY[name], store, **params, **ex), name)
    spec = ExecutorSpec(ex.get("executor") or "local", ex.get("scheduler"), jobs=ex.get("jobs"))
    scope = open_scope(store, executor=spec)
    assert per_rank.mapped(scope)
    whole = diagnose_scoped(open_scope(store))
    assert diagnose_scoped(scope).equals(whole)
    assert whole.height >= 2


def _batch_of(store, ranks: int) -> int:
    """BATCH_EVENTS that cuts the run into batches of about `ranks` ranks."""
    con = Store(store).connect(runs=[])
    try:
        ev = scope_mod.run_events(con, con.execute("SELECT min(run) FROM runs").fetchone()[0])
    finally:
        con.close()
    return max(1, sum(ev.values()) * ranks // len(ev))


def test_real_mixed_run_per_rank_map_equals_whole_run(mixed, monkeypatch):
    # the run is what the test says it is: 4 ranks, one without GPU ops, one with HTA's steps
    s = compute(REGISTRY["summary"], mixed)
    assert s.df["rank"].to_list() == [0, 1, 2]
    assert s.headline.endswith("no GPU activity on rank 3")
    assert compute(REGISTRY["stalls"], mixed, table="launch").df["rank"].to_list() == [0, 1, 2]
    _check_all(mixed, jobs=1)   # --jobs 1: the map, in this process, one batch of every rank
    monkeypatch.setattr(per_rank, "BATCH_EVENTS", 1)   # a batch per rank: the reduce adds 4 parts
    _check_all(mixed, jobs=1)


def test_generated_run_per_rank_map_equals_whole_run(generated, monkeypatch):
    monkeypatch.setattr(per_rank, "BATCH_EVENTS", _batch_of(generated, 2))   # 2 batches of 2 ranks
    assert per_rank.batches(scope_mod.run_events(Store(generated).connect(runs=[]), "job"), 1,
                            per_rank.BATCH_EVENTS) == [(0, 1), (2, 3)]
    _check_all(generated, jobs=1)
    o = compute(REGISTRY["overlap"], generated)
    assert o.df["rank"].to_list() == [0, 1, 2, 3] and o.tables["across"]["comm_ranks"][0] == 4


def test_local_process_pool(generated):
    _check_all(generated, CORE, executor="local", jobs=2)


@pytest.fixture(scope="module")
def dask_cluster():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                       silence_logs=40)
    yield cluster.scheduler_address
    cluster.close()


def test_dask_local_cluster(mixed, generated, dask_cluster):
    _check_all(mixed, CORE, executor="dask", scheduler=dask_cluster)
    _check_all(generated, CORE, executor="dask", scheduler=dask_cluster)


def test_breakdown_mean_is_sum_over_count_of_the_ranks(generated):
    """The reduce adds per-rank partials: a region's instances and CPU time are the sums of
    its per-rank rows (`--rank R`), its mean their quotient."""
    whole = compute(REGISTRY["breakdown"], generated, top=0).df
    per = pl.concat([compute(REGISTRY["breakdown"], generated, rank=r, top=0).df for r in range(4)])
    agg = per.group_by("source", "domain", "name").agg(pl.col("instances").sum(), pl.col("cpu_total_ns").sum(),
                                                       pl.len().alias("ranks"))
    got = whole.join(agg, on=["source", "domain", "name"], nulls_equal=True, suffix="_r")
    assert got.height == whole.height
    assert (got["instances"] == got["instances_r"]).all() and (got["ranks"] == got["ranks_r"]).all()
    assert (got["cpu_total_ns"] == got["cpu_total_ns_r"]).all()
    timed = got.filter(pl.col("cpu_total_ns").is_not_null())
    assert (timed["cpu_mean_ns"] - timed["cpu_total_ns"] / timed["instances"]).abs().max() < 1e-6


def test_tasks_read_their_batch_of_ranks(mixed, monkeypatch):
    """Nothing connects to every rank's files: the client only to the manifest, each task to
    its own batch of ranks (the HTA window's step-name count is the one documented extra pass)."""
    calls = []
    real = Store.connect

    def spy(self, runs=None, only=None):
        calls.append((runs, only))
        return real(self, runs, only)

    monkeypatch.setattr(Store, "connect", spy)
    for batch, want in ((1, [("mix", (r,)) for r in range(4)]), (None, [("mix", (0, 1, 2, 3))])):
        if batch:   # a batch of one rank's events at most: a task per rank
            monkeypatch.setattr(per_rank, "BATCH_EVENTS", batch)
        else:
            monkeypatch.undo()
            monkeypatch.setattr(Store, "connect", spy)
        for name in ("summary", "overlap", "breakdown", "stalls"):
            calls.clear()
            compute(REGISTRY[name], mixed, jobs=1)
            assert calls[0] == ([], None)
            assert sorted(c[1] for c in calls[1:]) == want, name


def test_batches_are_contiguous_balanced_and_one_per_worker_at_least():
    # 10 ranks of 1000 events: 2 workers and batches of ~1M events -> 2 halves
    assert per_rank.batches({r: 1000 for r in range(10)}, 2, 1_000_000) == [(0, 1, 2, 3, 4), (5, 6, 7, 8, 9)]
    # batches of ~2500 events: ceil(10000 / 2500) = 4 batches, cut where the running sum passes k/4
    assert per_rank.batches({r: 1000 for r in range(10)}, 2, 2500) == [(0, 1, 2), (3, 4), (5, 6, 7), (8, 9)]
    # more workers than ranks: one rank each
    assert per_rank.batches({r: 1000 for r in range(3)}, 8, 1_000_000) == [(0,), (1,), (2,)]
    # a heavy first rank gets a batch of its own
    assert per_rank.batches({0: 5000, 1: 10, 2: 10, 3: 10}, 2, 100_000) == [(0,), (1, 2, 3)]


def test_a_run_too_large_for_one_process_is_mapped(mixed, monkeypatch):
    # no --executor/--jobs/TRACEQ_EXECUTOR: one process while the run's events fit
    monkeypatch.delenv("TRACEQ_EXECUTOR", raising=False)
    assert not per_rank.mapped(open_scope(mixed, executor=ExecutorSpec()))
    assert per_rank.mapped(open_scope(mixed, executor=ExecutorSpec(jobs=1)))
    assert per_rank.mapped(open_scope(mixed, executor=ExecutorSpec("dask")))
    monkeypatch.setattr(scope_mod, "IN_PROCESS_EVENTS", 1000)
    assert per_rank.mapped(open_scope(mixed, executor=ExecutorSpec()))


def test_one_rank_keeps_the_single_process_path(tmp_path):
    store = tmp_path / "one"
    ingest([shared_trace("kineto/hta/nccl_parser_config/nccl_data.json.gz")], store, jobs=1)
    assert not per_rank.mapped(open_scope(store, executor=ExecutorSpec()))
    assert not per_rank.mapped(open_scope(store, rank=0, executor=ExecutorSpec()))


def test_errors_are_the_single_process_ones(mixed):
    with pytest.raises(TraceqError) as whole:
        open_scope(mixed, steps="1:2")
    with pytest.raises(TraceqError) as mapped:
        compute(REGISTRY["summary"], mixed, steps="1:2")
    assert str(mapped.value) == str(whole.value) and "selects no step of run 'mix' rank" in str(whole.value)
    with pytest.raises(TraceqError, match="--data-pattern"):
        compute(REGISTRY["stalls"], mixed, data_pattern="(")
