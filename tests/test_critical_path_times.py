"""traceq critical-path's step times: `since_first_ns` counts from the run's first event as the
report's timeline does (issue 48: the terminal printed epoch ms, `1,694,128,201,426.674`),
worked out by hand on two synthetic ranks with and without clock offsets, and checked against
the timeline's own bars and a direct query of the store on a real two-rank sample.

Times in the synthetic traces are µs."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

from traceq import api
from traceq.engine.scope import open_scope
from traceq.report import timeline

from conftest import run_traceq
from kineto_synth import Trace

REPO = Path(__file__).resolve().parents[1]
US = 1000
B0 = 5_000_000_000               # rank 0's baseTimeNanoseconds
B1 = B0 - 495 * US               # rank 1's: its 500 µs is rank 0's 5 µs


def _rank(rank: int, t0: int) -> Trace:
    # a host op before the first step (the timeline draws no host ops, so it is not the
    # origin), steps 1 [t0, t0+50] and 2 [t0+50, t0+100], one kernel in step 1
    t = Trace()
    t.cpu_op("setup", t0 - 10, 5)
    t.step(1, t0, 50)
    t.step(2, t0 + 50, 50)
    t.launch("k", t0 + 2, 5, t0 + 10, 20)
    return t


def _store(tmp_path, bases: tuple | None) -> api.TraceStore:
    d = tmp_path / "ddp"
    for rank, t0 in ((0, 10), (1, 500)):
        p = _rank(rank, t0).write(d / f"rank{rank}.json.gz")
        doc = json.loads(gzip.decompress(p.read_bytes()))
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
        if bases:
            doc["baseTimeNanoseconds"] = bases[rank]
        p.write_bytes(gzip.compress(json.dumps(doc).encode()))
    s = api.open_store(tmp_path / "store")
    s.ingest([d])
    return s


def _since(res) -> dict:
    return {(r["rank"], r["step"]): r["since_first_ns"] for r in res.df.iter_rows(named=True)}


def test_times_count_from_the_first_drawn_event_on_the_common_clock(tmp_path):
    # common clock: rank 0's steps at B0 + 10 and B0 + 60, rank 1's at 500 + B1 = B0 + 5 and B0 + 55;
    # the first drawn event is rank 1's step 1 (B0 + 5; rank 0's setup at B0 + 0 is a host op)
    s = _store(tmp_path, (B0, B1))
    res = s.result("critical_path", run="ddp")
    assert _since(res) == {(0, 1): 5 * US, (0, 2): 55 * US, (1, 1): 0, (1, 2): 50 * US}
    assert res.df.filter(pl.col("rank") == 1)["start_ns"].to_list() == [500 * US, 550 * US]   # the rank's clock
    # joined: a step starts with its first rank; start_ns is on the clock of the least offset
    # (rank 1's), since_first_ns on the run's
    joined = s.result("critical_path", run="ddp", ranks="all")
    assert _since(joined) == {(None, 1): 0, (None, 2): 50 * US}
    # the report's timeline draws each step's bar at the same time
    tl = timeline.segments(open_scope(tmp_path / "store", "ddp"))
    assert tl.aligned
    bars = tl.segments.filter(pl.col("cat") == "step").sort("rank", "start_ns")
    assert [round(x * 1e6) for x in bars["x0_ms"]] == [5 * US, 55 * US, 0, 50 * US]


def test_without_clock_offsets_each_rank_counts_from_its_own_first_event(tmp_path):
    s = _store(tmp_path, None)
    res = s.result("critical_path", run="ddp")
    assert _since(res) == {(0, 1): 0, (0, 2): 50 * US, (1, 1): 0, (1, 2): 50 * US}


def test_the_terminal_shows_times_since_the_first_event_not_the_ranks_clock(tmp_path):
    _store(tmp_path, (B0, B1))
    r = run_traceq("critical-path", "--store", tmp_path / "store", "--run", "ddp", "--rank", "0", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    # the table picks µs for times this short: 5 and 55 µs since rank 1's first step
    assert "since_first (µs)" in r.stdout and "start (" not in r.stdout
    steps = r.stdout.split("the path covers")[0]
    rows = [ln.split() for ln in steps.splitlines() if ln.strip().startswith("0 ")]
    assert [row[2] for row in rows] == ["5.0", "55.0"]
    doc = json.loads(run_traceq("critical-path", "--store", tmp_path / "store", "--run", "ddp", "-f", "json",
                                cwd=tmp_path).stdout)
    assert doc["units"]["since_first_ns"] == "ns" and doc["rows"][0]["start_ns"] == 10 * US


def test_real_two_ranks_against_a_direct_query(tmp_path):
    """ddp_gloo_straggler (two ranks, both with baseTimeNanoseconds): since_first_ns = start_ns +
    the rank's offset - the least (first GPU op or step/DataLoader span + offset) over the ranks,
    queried here from the store."""
    s = api.open_store(tmp_path / "store")
    s.ingest([REPO / "sample_traces" / "gpu" / "ddp_gloo_straggler"])
    first = s.sql("""
        SELECT min(t + coalesce(r.clock_offset_ns, 0) + coalesce(r.clock_refine_ns, 0)) AS origin FROM (
            SELECT rank, start_ns AS t FROM gpu_ops WHERE kind IN ('kernel', 'memcpy', 'memset')
            UNION ALL SELECT rank, start_ns FROM regions
            WHERE source IN ('step', 'dataloader') AND coalesce(domain, '') <> 'gpu') e
        JOIN runs r USING (rank)""")["origin"][0]
    off = dict(s.sql("SELECT rank, clock_offset_ns + coalesce(clock_refine_ns, 0) AS off FROM runs").iter_rows())
    assert all(off.values())
    res = s.result("critical_path", run="ddp_gloo_straggler")
    assert res.df.height == 8
    for row in res.df.iter_rows(named=True):
        assert row["since_first_ns"] == row["start_ns"] + off[row["rank"]] - first, row
        assert 0 <= row["since_first_ns"] < 1_000_000_000
    # joined: each step from the first of its ranks
    joined = s.result("critical_path", run="ddp_gloo_straggler", ranks="all")
    each = res.df.group_by("step").agg(pl.col("since_first_ns").min()).sort("step")
    assert joined.df.sort("step")["since_first_ns"].to_list() == each["since_first_ns"].to_list()
