"""Collective identity, matching and the common clock across ranks (issue 10; traceq/clocks.py,
queries/ranks_rank.sql, clock_refine.sql, collectives.sql).

* Synthetic: 4 ranks whose NCCL kernels carry a process group and a sequence number, with
  known raw clock errors, arrival delays, a straggler, a rank that missed one collective and
  a rank with one collective more. Every expected value (skew per instance, clock
  refinement, lateness, straggler delay, bus bandwidth) is recomputed in plain Python from
  the injected true times.
* Generated from the real trace_filter trace (benchmarks/make_many_ranks.py --seq --drop).
* Real traces: HTA's nccl_parser_config (kernel args with process group names) and the two
  ranks of trace_filter (no identity args: matched by order per stream).
"""
from __future__ import annotations

import gzip
import json
import statistics
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import REPO, shared_trace
from traceq.analyses.ranks import matched_by, ranks
from traceq.clocks import align_rows
from traceq.ingest import ingest
from traceq.store import RankData, Store

sys.path.insert(0, str(REPO / "benchmarks"))
import make_many_ranks  # noqa: E402

MS = 1_000_000
BASE = [1_700_000_000 * 10**9 + d for d in (0, 40 * MS, -7 * MS, 3 * MS)]   # raw offsets (baseTimeNanoseconds)
ERR = [0, 1_250_000, -2_000_000, 600_000]      # each raw clock's error, ns
STRAGGLER, DELAY = 3, 1_500_000                 # rank 3 arrives 1.5 ms late at every collective
JITTER = [[0, 40_000, 10_000, 70_000, 20_000, 0], [30_000, 0, 50_000, 10_000, 60_000, 0],
          [60_000, 20_000, 0, 30_000, 0, 0], [10_000, 70_000, 20_000, 0, 40_000, 0]]
NBYTES = 900_000_000


def _instances() -> list[dict]:
    """True times: (pg, seq, ranks, arrival base, common end). PG '0' (all ranks) runs 6
    AllReduces; rank 1's trace missed seq 2, only rank 0's trace still holds seq 6. PG '1'
    (ranks 2 and 3) runs 2 Broadcasts whose seq numbers overlap PG '0''s."""
    out = [{"pg": "0", "seq": j, "coll": "AllReduce", "ranks": [r for r in range(4) if not (r == 1 and j == 2)],
            "t0": j * 20 * MS, "end": j * 20 * MS + 9 * MS} for j in range(1, 6)]
    out.append({"pg": "0", "seq": 6, "coll": "AllReduce", "ranks": [0], "t0": 120 * MS, "end": 129 * MS})
    out += [{"pg": "1", "seq": j, "coll": "Broadcast", "ranks": [2, 3], "t0": j * 20 * MS + 11 * MS,
             "end": j * 20 * MS + 15 * MS} for j in (1, 2)]
    return out


def _arrival(inst: dict, r: int) -> int:
    """True start of rank r's kernel of this instance."""
    return inst["t0"] + JITTER[r][inst["seq"] - 1] + (DELAY if r == STRAGGLER else 0)


def _kernels(r: int, seq: bool = True) -> list[dict]:
    """Rank r's NCCL kernels on its own clock: t_rank = t_true − BASE[r] − ERR[r]."""
    rows = []
    for inst in _instances():
        if r not in inst["ranks"]:
            continue
        shift = BASE[r] + ERR[r]
        rows.append({"pid": 1, "device": r, "stream": 20 + int(inst["pg"]), "kind": "kernel",
                     "category": "communication", "name": f"ncclDevKernel_{inst['coll']}_Sum_f32_RING_LL(ncclDevComm*)",
                     "start_ns": _arrival(inst, r) - shift, "end_ns": inst["end"] - shift, "bytes": NBYTES,
                     "collective": inst["coll"].lower(), "pg_name": inst["pg"], "pg_desc": "default_pg",
                     "group_size": len(inst["ranks"]), "seq": inst["seq"] if seq else None})
    return rows


def _store(path: Path, seq: bool = True, align=align_rows) -> Path:
    st = Store(path)
    staged = []
    for r in range(4):
        rows = _kernels(r, seq)
        keys = list(rows[0])
        data = RankData(run="syn", rank=r, tables={"gpu_ops": pa.Table.from_pylist([{k: x[k] for k in keys} for x in rows])},
                        source_path=f"syn{r}", source_sha256=f"syn-{r}", source_format="kineto", clock_offset_ns=BASE[r])
        staged.append(st.stage(data))
    st.commit(staged, align=align)
    return path


def _expected() -> dict:
    """Per instance seen on ≥ 2 ranks: skew, last rank, busbw; per rank: mean lateness."""
    inst = [i for i in _instances() if len(i["ranks"]) > 1]
    exp = {"skew": {}, "last": {}, "busbw": {}, "late": {r: [] for r in range(4)}}
    for i in inst:
        starts = {r: _arrival(i, r) for r in i["ranks"]}
        key = (f"pg {i['pg']}", i["seq"])
        exp["skew"][key] = max(starts.values()) - min(starts.values())
        exp["last"][key] = max(starts, key=lambda r: (starts[r], -r))
        n = len(i["ranks"])
        factor = 2 * (n - 1) / n if i["coll"] == "AllReduce" else 1.0
        exp["busbw"][key] = NBYTES / (i["end"] - max(starts.values())) * factor
        for r, s in starts.items():
            exp["late"][r].append((s - min(starts.values())) / MS)
    exp["late"] = {r: statistics.mean(v) for r, v in exp["late"].items()}
    # the reference end of an instance is the lower middle of its ends on the raw clock
    # (true end − ERR[r]); a rank's refinement is the median over its instances of
    # (reference − its end) = median of (ERR[r] − ERR[lower-middle rank])
    refine = {r: [] for r in range(4)}
    for i in inst:
        errs = sorted((ERR[r] for r in i["ranks"]), reverse=True)   # ends ascending = errors descending
        ref_err = errs[(len(errs) - 1) // 2]
        for r in i["ranks"]:
            refine[r].append(ERR[r] - ref_err)
    exp["refine"] = {r: round(statistics.median(v)) for r, v in refine.items()}
    return exp


def test_matching_by_process_group_and_seq(tmp_path):
    res = ranks(_store(tmp_path / "s"), "syn")
    exp = _expected()
    inst = res.instances
    got = {(g, k): s for g, k, s in inst.select("grp", "k", "skew_ns").iter_rows()}
    assert got == exp["skew"] and len(got) == 7        # PG 0 seq 1-5, PG 1 seq 1-2; seq 6 is on one rank only
    assert {(g, k): r for g, k, r in inst.select("grp", "k", "last_rank").iter_rows()} == exp["last"]
    assert dict(zip(zip(inst["grp"], inst["k"]), inst["busbw_gbps"])) == pytest.approx(exp["busbw"])
    assert inst.filter((inst["grp"] == "pg 0") & (inst["k"] == 2))["ranks"].item() == 3   # rank 1 missed it
    assert inst["end_spread_ns"].max() == 0            # on the common clock every instance ends together
    assert matched_by(inst) == "process group and sequence number"
    r = res.ranks
    assert dict(zip(r["rank"], r["late_arrival_ms"])) == pytest.approx(exp["late"])
    assert r["last_count"].to_list() == [0, 0, 0, 7]
    # the straggler and its delay: its mean lateness minus the others' median
    assert res.straggler["rank"] == STRAGGLER
    delay = exp["late"][3] - statistics.median([exp["late"][q] for q in range(3)])
    assert f"about {delay:.3f} ms late" in res.straggler["evidence"]
    assert abs(delay - DELAY / MS) < 0.08


def test_clock_refinement_is_stored_at_ingest_and_undoes_the_clock_errors(tmp_path):
    path = _store(tmp_path / "s")
    exp = _expected()["refine"]
    manifest = {r["rank"]: r for r in pq.read_table(Store(path).manifest_path).to_pylist()}
    assert {r: m["clock_refine_ns"] for r, m in manifest.items()} == exp
    # one common clock: refinement − clock error is the same constant on every rank
    assert len({exp[r] - ERR[r] for r in range(4)}) == 1
    res = ranks(path, "syn")
    assert res.ranks["refine_ns"].to_list() == [exp[r] for r in range(4)]
    assert res.ranks["clock_offset_ns"].to_list() == [BASE[r] + exp[r] for r in range(4)]
    assert res.to_json()["ranks"][1]["clock_offset_ns"] == BASE[1] + exp[1]
    # a store from before (nothing stored): `traceq ranks` computes the same refinement
    old = _store(tmp_path / "old", align=None)
    assert all(r["clock_refine_ns"] is None for r in pq.read_table(Store(old).manifest_path).to_pylist())
    assert ranks(old, "syn").to_json() == res.to_json()


def test_order_matching_goes_wrong_where_seq_does_not(tmp_path):
    """Without sequence numbers the instances are matched by order per (process group,
    type): rank 1's missing seq 2 shifts its later AllReduces by one, so 3 of its 4 pair
    with the next collective. Aligning the ends then moves rank 1's clock by one collective
    period (20 ms) onto the wrong pairing, and only its first, right, pair looks apart."""
    res = ranks(_store(tmp_path / "s", seq=False), "syn")
    inst = res.instances
    by_order = inst.filter(inst["grp"] == "pg 0 by order").sort("k")
    # AllReduces per rank: 6, 4, 5, 5 -> by order, k = 0..3 on 4 ranks, k = 4 on 3 (k = 5: rank 0 alone)
    assert by_order["ranks"].to_list() == [4, 4, 4, 4, 3]
    assert by_order["matched"].to_list() == [False, True, True, True, True]
    assert by_order["end_spread_ns"].to_list()[0] == 20 * MS
    refine = res.ranks["refine_ns"].to_list()
    assert [refine[r] - ERR[r] for r in range(4)] == [0, -20 * MS, 0, 0]
    assert "1 more kernel pair matched by order per process group and type does not end together" \
        in res.straggler["evidence"]
    # by (process group, seq) the same kernels pair right and rank 1's clock is right
    seq = ranks(_store(tmp_path / "t"), "syn")
    assert seq.instances["matched"].all() and seq.instances["end_spread_ns"].max() == 0
    assert len({r - e for r, e in zip(seq.ranks["refine_ns"].to_list(), ERR)}) == 1


# ------------------------------------------------------------------ generated from a real trace
def _json_instances(out: Path, truth: dict) -> dict[tuple[str, int], list[int]]:
    """(pg, Seq) -> true starts (ns) of its kernels on every rank, read from the JSON files."""
    starts: dict[tuple[str, int], list[int]] = {}
    for r in range(truth["world_size"]):
        with gzip.open(out / f"rank-{r}.json.gz", "rt") as f:
            evs = json.load(f)["traceEvents"]
        for e in evs:
            if e.get("cat") == "kernel" and e["name"].startswith("nccl"):
                key = (f"pg {e['args']['Process Group Name']}", e["args"]["Seq"])
                starts.setdefault(key, []).append(int(e["ts"] - truth["clock_error_us"][r]) * 1000)
    return starts


def test_generated_seq_run_with_a_missing_collective(tmp_path):
    template = shared_trace("kineto/hta/trace_filter/sampled_rank-0.json.gz")
    out = tmp_path / "job"
    truth = make_many_ranks.make(4, out, 2, 2.5, 200, clock_skew_us=2000, seed=7, template=template, seq=True,
                                 drop={1: [(84, 3)]})
    store = tmp_path / "store"
    ingest([out], store, jobs=1)
    res = ranks(store)
    starts = _json_instances(out, truth)
    expected = {k: max(v) - min(v) for k, v in starts.items()}
    got = {(g, k): s for g, k, s in res.instances.select("grp", "k", "skew_ns").iter_rows()}
    assert got == expected and len(got) == 10
    assert sorted(res.instances["ranks"].to_list()) == [3] + [4] * 9        # the dropped one: 3 ranks
    assert res.straggler["rank"] == 2 and "arrives last at 10 of 10" in res.straggler["evidence"]
    # the stored refinement undoes the injected clock errors (one constant apart)
    manifest = pq.read_table(Store(store).manifest_path).to_pylist()
    assert len({m["clock_refine_ns"] - (-e * 1000) for m, e in zip(manifest, truth["clock_error_us"])}) == 1
    # the same traces without Seq: matched by order per stream and collective type, rank 1's
    # kernels after the missing one (an all_reduce, k = 3 of stream 84) pair with the others'
    # previous ones. Where the types differ (its all_to_all at k = 3 and 5) they are no pair:
    # the other 3 ranks' k = 3 and 5 stay matched (ends together); where they agree by chance
    # (k = 4, 6) the ends lie apart and are left out; the last, k = 7, is on 3 ranks only
    plain = tmp_path / "plain"
    make_many_ranks.make(4, plain, 2, 2.5, 200, clock_skew_us=2000, seed=7, template=template, drop={1: [(84, 3)]})
    ingest([plain], tmp_path / "store2", jobs=1)
    wrong = ranks(tmp_path / "store2")
    assert matched_by(wrong.instances) == "order per stream"
    apart = wrong.instances.filter(~wrong.instances["matched"])
    assert sorted(apart["k"].to_list()) == [4, 6] and apart["end_spread_ns"].min() > 10 * MS
    assert wrong.straggler["rank"] == 2 and "arrives last at 8 of 8" in wrong.straggler["evidence"]


# ------------------------------------------------------------------ real traces
def test_real_nccl_kernels_carry_their_process_group(tmp_path):
    trace = shared_trace("kineto/hta/nccl_parser_config/nccl_data.json.gz")
    with gzip.open(trace, "rt") as f:
        evs = json.load(f)["traceEvents"]
    second = {}
    for e in evs:
        if e.get("cat") == "kernel" and e["name"].startswith("nccl"):
            a = e["args"]
            key = (a["Collective name"], a["Process Group Name"], a["Process Group Description"], a["Group size"])
            second[key] = second.get(key, 0) + 1
    assert second == {("allreduce", "0", "default_pg", 2): 15, ("broadcast", "0", "default_pg", 2): 6}
    ingest([trace], tmp_path / "s")
    con = Store(tmp_path / "s").connect()
    got = con.sql("SELECT collective, pg_name, pg_desc, group_size, count(*) FROM gpu_ops "
                  "WHERE category = 'communication' GROUP BY ALL").fetchall()
    assert {tuple(r[:4]): r[4] for r in got} == second
    assert con.execute("SELECT count(*) FROM gpu_ops WHERE seq IS NOT NULL").fetchone()[0] == 0   # PyTorch 2.3: no Seq
    # one rank of the run (rank 0 of 2): nothing to align, nothing matched
    assert pq.read_table(Store(tmp_path / "s").manifest_path).column("clock_refine_ns").to_pylist() == [None]
    res = ranks(tmp_path / "s")
    assert res.instances.height == 0 and res.straggler["rank"] is None


def test_real_trace_filter_ranks(tmp_path):
    """trace_filter's two ranks carry no identity args: matched by order per stream. Second
    method: the same pairing and refinement in plain Python from the JSON."""
    ends: dict[int, dict[tuple[int, int], int]] = {}
    for r in (0, 1):
        path = shared_trace(f"kineto/hta/trace_filter/sampled_rank-{r}.json.gz")
        with gzip.open(path, "rt") as f:
            evs = json.load(f)["traceEvents"]
        nccl = sorted((e for e in evs if e.get("cat") == "kernel" and e["name"].startswith("nccl")),
                      key=lambda e: (e["args"]["stream"], e["ts"]))
        seen: dict[int, int] = {}
        ends[r] = {}
        for e in nccl:
            s = e["args"]["stream"]
            ends[r][(s, seen.get(s, 0))] = round(e["ts"]) * 1000 + round(e["dur"] * 1000)   # whole µs here
            seen[s] = seen.get(s, 0) + 1
    keys = sorted(ends[0].keys() & ends[1].keys())

    def refine(pairs):   # two ranks: the reference end is the earlier one; median of (earlier − own)
        return [round(statistics.median([min(ends[0][k], ends[1][k]) - ends[r][k] for k in pairs])) for r in (0, 1)]

    first = refine(keys)
    together = [k for k in keys if abs(ends[0][k] + first[0] - ends[1][k] - first[1]) <= 500_000]
    second = refine(together)
    ingest([Path(shared_trace("kineto/hta/trace_filter/sampled_rank-0.json.gz")).parent], tmp_path / "s")
    manifest = pq.read_table(Store(tmp_path / "s").manifest_path).to_pylist()
    assert [m["clock_refine_ns"] for m in manifest] == second == [-27_500, -4_000]
    assert first == [0, -170_000]      # the first pass, over all 10 pairs, was pulled off by the wrong ones
    res = ranks(tmp_path / "s")
    # of the 10 pairs by order, k = 5 and 6 of stream 84 pair an all_to_all (launched under
    # nccl:all_to_all) with an all_reduce of the other rank: different collective types, no instance
    assert len(keys) == 10 and res.instances.height == 8
    kept = res.instances.filter(res.instances["matched"])
    streams = sorted({s for s, _ in keys})
    assert sorted((streams[int(g.removeprefix("stream "))], k) for g, k in kept.select("grp", "k").iter_rows()) \
        == together == [(84, 2), (84, 7), (203, 0), (203, 1)]
    # only 4 of the 10 pairs end together; rank 1 starts last at all 4
    assert res.straggler["rank"] == 1 and "arrives last at 4 of 4" in res.straggler["evidence"]
    assert "4 more kernel pairs matched by order per stream do not end together" in res.straggler["evidence"]
