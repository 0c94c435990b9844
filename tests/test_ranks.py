"""Cross-rank analyses (`traceq ranks`, DESIGN §8) and the Dask executor.

* Synthetic: a 4-rank store with two AllReduce instances whose skew, lateness, clock
  refinement, exposed communication and bus bandwidth are derived by hand below.
* Generated: benchmarks/make_many_ranks.py replicates rank 0 of the real 128-rank
  trace_filter trace into 4 ranks with arrival jitter, raw clock errors and one straggler.
  The skew of every instance is recomputed here in plain Python from the generated JSON
  and the known clock errors; the straggler and its delay must be found; `--executor dask`
  (a LocalCluster of 2 worker processes) must give the same store and the same analyses as
  the local process pool; a worker that fails leaves the store as it was.
"""
from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from conftest import REPO, make_store, shared_trace
from traceq.analyses.ranks import ranks
from traceq.cli import app
from traceq.errors import TraceqError
from traceq.executor import ExecutorSpec
from traceq.ingest import ingest
from traceq.store import Store

sys.path.insert(0, str(REPO / "benchmarks"))
import make_many_ranks  # noqa: E402

MS = 1_000_000


# ------------------------------------------------------------------ synthetic, by hand
def _allreduce(r: int, t0: int, end: int, clock_error: int = 0) -> dict:
    """Rank r arrives at t0 + r·0.1 ms; every rank finishes at `end` (true clock)."""
    return {"pid": 1, "device": r, "stream": 7, "kind": "kernel", "category": "communication",
            "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
            "start_ns": t0 + r * 100_000 + clock_error, "end_ns": end + clock_error, "bytes": 1_870_000_000}


@pytest.fixture
def synthetic(tmp_path):
    path = tmp_path / "store"
    for r in range(4):
        err = 5 * MS if r == 2 else 0          # rank 2's raw clock runs 5 ms ahead
        make_store(path, "syn", r, gpu_ops=[_allreduce(r, 1 * MS, 20 * MS, err), _allreduce(r, 101 * MS, 120 * MS, err)])
    return path


def test_synthetic_skew_clock_busbw_and_lateness(synthetic):
    res = ranks(synthetic, "syn")
    inst = res.instances
    assert inst.height == 2
    assert inst["skew_ns"].to_list() == [300_000, 300_000]          # rank 3 starts 0.3 ms after rank 0
    assert inst["last_rank"].to_list() == [3, 3]
    # the collective runs from the last arrival (1.3 ms) to the common end (20 ms): 18.7 ms;
    # algbw = 1.87e9 B / 18.7e6 ns = 100 GB/s; AllReduce busbw = algbw · 2(n−1)/n = 150 GB/s
    assert inst["dur_ns"].to_list() == [18_700_000, 18_700_000]
    assert inst["busbw_gbps"].to_list() == pytest.approx([150.0, 150.0])
    r = res.ranks
    assert r["refine_ns"].to_list() == [0, 0, -5 * MS, 0]             # rank 2's clock error removed
    assert r["clock_offset_ns"].to_list() == [0, 0, -5 * MS, 0]
    assert r["late_arrival_ms"].to_list() == pytest.approx([0.0, 0.1, 0.2, 0.3])
    assert r["last_count"].to_list() == [0, 0, 0, 2]
    assert r["wait_ms"].to_list() == pytest.approx([0.6, 0.4, 0.2, 0.0])
    # no compute kernels: the whole communication is exposed, 2 × (19 − 0.1·r) ms
    assert r["exposed_comm_ms"].to_list() == pytest.approx([38.0, 37.8, 37.6, 37.4])
    c = res.collectives.row(0, named=True)
    assert (c["name"], c["instances"], c["last_rank_mode"]) == ("all_reduce", 2, 3)
    assert c["mean_skew_ms"] == pytest.approx(0.3) and c["max_skew_ms"] == pytest.approx(0.3)
    assert c["busbw_gbps"] == pytest.approx(150.0)
    # last at every instance, 0.3 ms after the first vs a median of 0.1 ms for the others
    assert res.straggler["rank"] == 3
    assert "arrives last at 2 of 2" in res.straggler["evidence"]


def test_json_shape_is_the_documented_interface(synthetic):
    out = CliRunner().invoke(app, ["ranks", "--store", str(synthetic), "--format", "json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert list(doc) == ["ranks", "collectives", "straggler"]
    assert list(doc["ranks"][0]) == ["rank", "steps", "step_ms", "exposed_comm_ms", "late_arrival_ms", "clock_offset_ns"]
    assert list(doc["collectives"][0]) == ["name", "instances", "mean_skew_ms", "max_skew_ms", "last_rank_mode",
                                           "busbw_gbps"]
    assert list(doc["straggler"]) == ["rank", "evidence"] and doc["straggler"]["rank"] == 3
    table = CliRunner().invoke(app, ["ranks", "--store", str(synthetic)])
    assert table.exit_code == 0 and "straggler: rank 3 arrives last" in table.output


def test_no_collectives_names_no_straggler(tmp_path):
    path = tmp_path / "store"
    for r in range(2):
        make_store(path, "cpu", r, gpu_ops=[{"pid": 1, "device": 0, "stream": 7, "kind": "kernel", "name": "gemm",
                                             "category": "gemm", "start_ns": 0, "end_ns": 10}])
    res = ranks(path, "cpu")
    assert res.straggler["rank"] is None and "no collective instance" in res.straggler["evidence"]
    assert res.collectives.height == 0 and res.ranks["rank"].to_list() == [0, 1]


# ------------------------------------------------------------------ generated from a real trace
STRAGGLER, DELAY_MS, JITTER_US = 2, 2.5, 200


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    template = shared_trace("kineto/hta/trace_filter/sampled_rank-0.json.gz")
    out = tmp_path_factory.mktemp("gen") / "job"
    truth = make_many_ranks.make(4, out, STRAGGLER, DELAY_MS, JITTER_US, clock_skew_us=2000, seed=7, template=template)
    store = out.parent / "store-local"
    ingest([out], store, jobs=2)
    return out, truth, store


def _json_skews(out: Path, truth: dict) -> dict[tuple[int, int], int]:
    """Per instance (stream, k): last − first start in ns, on the true clock, from the JSON."""
    starts: dict[tuple[int, int], list[int]] = {}
    for r in range(truth["world_size"]):
        with gzip.open(out / f"rank-{r}.json.gz", "rt") as f:
            evs = json.load(f)["traceEvents"]
        nccl = sorted((e for e in evs if e.get("cat") == "kernel" and e["name"].startswith("nccl")),
                      key=lambda e: (e["args"]["stream"], e["ts"]))
        k: dict[int, int] = {}
        for e in nccl:
            s = e["args"]["stream"]
            starts.setdefault((s, k.get(s, 0)), []).append(int(e["ts"] - truth["clock_error_us"][r]) * 1000)
            k[s] = k.get(s, 0) + 1
    return {key: max(v) - min(v) for key, v in starts.items()}


def test_instance_skew_equals_the_json(generated):
    out, truth, store = generated
    res = ranks(store)
    expected = _json_skews(out, truth)
    streams = sorted({s for s, _ in expected})
    got = {(streams[int(g.removeprefix("stream "))], k): skew
           for g, k, skew in res.instances.select("grp", "k", "skew_ns").iter_rows()}
    assert got == expected and len(got) == 10


def test_clock_offsets_undo_the_injected_clock_errors(generated):
    _out, truth, store = generated
    off = ranks(store).ranks["clock_offset_ns"].to_list()
    err = [e * 1000 for e in truth["clock_error_us"]]
    # one common base: offset + error is the same constant on every rank
    assert len({o + e for o, e in zip(off, err)}) == 1


def test_straggler_and_its_delay_are_found(generated):
    _out, _truth, store = generated
    res = ranks(store)
    assert res.straggler["rank"] == STRAGGLER
    r = res.ranks
    late = dict(zip(r["rank"].to_list(), r["late_arrival_ms"].to_list()))
    others = sorted(v for k, v in late.items() if k != STRAGGLER)
    delay = late[STRAGGLER] - (others[0] + others[1]) / 2 if len(others) == 2 else late[STRAGGLER] - others[1]
    assert abs(delay - DELAY_MS) < JITTER_US / 1000
    assert res.collectives.row(0, named=True)["last_rank_mode"] == STRAGGLER


def _tables(store: Path) -> dict[str, pl.DataFrame]:
    st = Store(store)
    con = st.connect()
    out = {}
    for t in ("gpu_ops", "host_ops", "regions"):
        df = pl.from_arrow(con.sql(f"SELECT * FROM {t}").to_arrow_table())
        out[t] = df.sort(df.columns)
    m = pl.from_arrow(pq.read_table(st.manifest_path)).drop("ingested_at", "files")
    out["runs"] = m.sort("rank")
    return out


def test_dask_executor_gives_the_same_store_and_analyses(generated, tmp_path):
    pytest.importorskip("distributed")
    out, _truth, store = generated
    dstore = tmp_path / "store-dask"
    dask2 = ExecutorSpec("dask", jobs=2)      # a LocalCluster of 2 worker processes
    ingest([out], dstore, executor=dask2)
    a, b = _tables(store), _tables(dstore)
    for t in a:
        assert a[t].equals(b[t]), t
    local = ranks(store).to_json()
    assert ranks(dstore, executor=dask2).to_json() == local
    assert local["straggler"]["rank"] == STRAGGLER


def test_a_failing_dask_task_leaves_the_store_as_it_was(generated, tmp_path):
    pytest.importorskip("distributed")
    out, _truth, _store = generated
    job = tmp_path / "job"
    job.mkdir()
    for r in range(2):
        (job / f"rank-{r}.json.gz").write_bytes((out / f"rank-{r}.json.gz").read_bytes())
    (job / "rank-2.json.gz").write_bytes(gzip.compress(b'{"traceEvents": [') [:30])   # cut gzip stream
    dstore = tmp_path / "store"
    make_store(dstore, "before", 0, gpu_ops=[{"pid": 1, "device": 0, "stream": 1, "kind": "kernel", "name": "k",
                                              "start_ns": 0, "end_ns": 5}])
    before = pq.read_table(Store(dstore).manifest_path).to_pylist()
    files_before = sorted(p for p in dstore.rglob("*.parquet") if ".staging" not in p.parts)
    with pytest.raises(TraceqError):
        ingest([job], dstore, executor=ExecutorSpec("dask", jobs=2))
    assert pq.read_table(Store(dstore).manifest_path).to_pylist() == before
    assert sorted(p for p in dstore.rglob("*.parquet") if ".staging" not in p.parts) == files_before
    assert not any((dstore / ".staging").iterdir())


def test_report_shows_every_rank_on_the_common_clock(generated, tmp_path):
    from traceq.report import build_report

    _out, _truth, store = generated
    rep = build_report(store, out_path=tmp_path / "r.html")
    assert "job/ranks" in rep.sections
    html = (tmp_path / "r.html").read_text()
    assert "Collectives per rank on the common clock" in html and f"straggler: rank {STRAGGLER}" in html
    assert all(f'"rank {r}"' in html for r in range(4))


def test_executor_options_and_environment(monkeypatch):
    from traceq.executor import resolve, run_map

    monkeypatch.setenv("TRACEQ_EXECUTOR", "dask")
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://10.0.0.1:8786")
    spec = resolve()
    assert (spec.kind, spec.scheduler) == ("dask", "tcp://10.0.0.1:8786")
    assert resolve("local").kind == "local"          # the option wins over the environment
    with pytest.raises(TraceqError, match="need --executor dask"):
        resolve("local", scheduler="tcp://x:1")
    with pytest.raises(TraceqError, match="choose local"):
        resolve("spark")
    done = []
    assert sorted(run_map(abs, [-2, 1, -3], ExecutorSpec(jobs=1), lambda i, r: done.append((i, r)))) == [1, 2, 3]
    assert done == [(-2, 2), (1, 1), (-3, 3)]
