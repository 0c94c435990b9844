"""`breakdown`: per-region CPU vs GPU time with nsys' nvtx_gpu_proj rule.

Real traces are checked against independent implementations written here: plain SQL over
the raw nsys SQLite export (python sqlite3, following the shipped nvtx_gpu_proj_trace
script), and a plain-Python sweep over the raw Kineto JSON. Synthetic stores pin the edge
cases (nesting, closed bounds, other threads, timers, unfinished ranges, GPU-side spans).
"""
from __future__ import annotations

import bisect
import gzip
import json
import math
import re
import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import shared_trace, make_store
from scoped import breakdown, breakdown_instances, timer_breakdown
from typer.testing import CliRunner

from traceq.store import Store

NSYS_FILES = [
    "nsys/DLProf/nsys_profile.sqlite",
    "nsys/DLProf/w_Relu/nsys_profile.sqlite",
    "nsys/llama3-inference/demo.sqlite",
    "nsys/pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite",
    "nsys/pipit/perlmutter-cloverleaf-cuda.sqlite",
    "nsys/nvFuser/report1_matmul_h100.sqlite",
]
KINETO_FILES = [
    "kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz",
    "kineto/param/resnet_kineto.json.gz",
    "kineto/hta/trace_diff/control/control.json.gz",
    "kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
]


# ---------------------------------------------------------------- helpers
def ingest(path: Path, store_dir: Path) -> Store:
    from traceq.ingest import ingest as do_ingest

    do_ingest([path], store_dir, run="t")
    return Store(store_dir)


def by_name(df, key="name"):
    return {r[key]: r for r in df.iter_rows(named=True)}


# ---------------------------------------------------------------- nsys: independent SQL
def nsys_proj_sum(path: Path) -> dict[str, tuple[int, int, int]]:
    """nvtx_gpu_proj_sum per range name -> (instances with GPU ops, total proj ns, total GPU ops).

    Plain SQL over the raw export, following nsys' shipped nvtx_gpu_proj_trace: ranges are
    NVTX_EVENTS of types 59/60/70/71 ending on their own thread (endGlobalTid IS NULL),
    named '<domain>:<text>'; GPU ops = KERNEL ∪ MEMCPY ∪ MEMSET joined to their launch call
    (RUNTIME, eventClass 0/1) on correlationId within the process; a range gets an op when it
    contains the launch call's [start, end] on the same globalTid.
    """
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    con.text_factory = lambda b: b.decode("utf-8", "replace")
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "NVTX_EVENTS" not in tables or "CUPTI_ACTIVITY_KIND_RUNTIME" not in tables:
        return {}
    op_tables = [t for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
                 if t in tables]
    ops = " UNION ALL ".join(f"SELECT start, end, correlationId, globalPid FROM {t}" for t in op_tables)
    sql = f"""
    WITH maxts AS (
        SELECT max(max(start), coalesce(max(end), 0)) AS t FROM NVTX_EVENTS WHERE eventType IN (59, 60, 70, 71)
    ), domains AS (
        SELECT e.domainId AS id, e.globalTid & 0x0000FFFFFF000000 AS proc,
               coalesce(s.value, e.text) AS name, min(e.start)
        FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
        WHERE e.eventType = 75
        GROUP BY 1, 2
    ), ranges AS (
        SELECT e.rowid AS rid, e.start AS start, coalesce(e.end, (SELECT t FROM maxts)) AS end,
               e.globalTid AS gtid,
               coalesce(d.name, '') || ':' || coalesce(s.value, e.text, '') AS name
        FROM NVTX_EVENTS e
        LEFT JOIN StringIds s ON s.id = e.textId
        LEFT JOIN domains d ON d.id = e.domainId AND d.proc = (e.globalTid & 0x0000FFFFFF000000)
        WHERE e.eventType IN (59, 60, 70, 71) AND e.endGlobalTid IS NULL
    ), ops AS ({ops}
    ), launches AS (
        SELECT r.start, r.end, r.globalTid, r.correlationId, o.start AS ostart, o.end AS oend
        FROM CUPTI_ACTIVITY_KIND_RUNTIME r
        JOIN ops o ON o.correlationId = r.correlationId AND o.globalPid = (r.globalTid & 0xFFFFFFFFFF000000)
        WHERE r.eventClass IN (0, 1)
    ), proj AS (
        SELECT g.rid, g.name, max(l.oend) - min(l.ostart) AS proj, count(DISTINCT l.correlationId) AS n
        FROM ranges g
        JOIN launches l ON l.globalTid = g.gtid AND g.start <= l.start AND l.end <= g.end
        GROUP BY g.rid, g.name
    )
    SELECT name, count(*), sum(proj), sum(n) FROM proj GROUP BY name
    """
    out = {name: (n, proj, ops_n) for name, n, proj, ops_n in con.execute(sql)}
    con.close()
    return out


@pytest.mark.parametrize("rel", NSYS_FILES)
def test_nsys_breakdown_matches_independent_nvtx_gpu_proj_sum(rel, tmp_path):
    path = shared_trace(rel)
    expected = nsys_proj_sum(path)
    st = ingest(path, tmp_path / "store")
    df = breakdown(st, by="nvtx")
    got = {}
    for r in df.iter_rows(named=True):
        if r["gpu_instances"]:
            got[f"{r['domain'] or ''}:{r['name']}"] = (r["gpu_instances"], r["gpu_proj_ns"], r["gpu_ops"])
    assert got == expected
    if "perlmutter-cloverleaf" not in rel:   # the only export here without NVTX
        assert expected, "fixture should have NVTX ranges with GPU work"


def test_nsys_nvtx_instances_and_cpu_time_equal_raw_ranges(tmp_path):
    """Every NVTX range is an instance, with its CPU duration (nsys nvtx_sum)."""
    path = shared_trace("nsys/llama3-inference/demo.sqlite")
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    raw = {name: (n, tot) for name, n, tot in con.execute(
        "SELECT coalesce(s.value, e.text), count(*), sum(e.end - e.start) FROM NVTX_EVENTS e "
        "LEFT JOIN StringIds s ON s.id = e.textId WHERE e.eventType IN (59, 60) GROUP BY 1")}
    con.close()
    df = breakdown(ingest(path, tmp_path / "store"), by="nvtx")
    assert {r["name"]: (r["instances"], r["cpu_total_ns"]) for r in df.iter_rows(named=True)} == raw


# ---------------------------------------------------------------- Kineto: independent Python sweep
def _ns(v) -> int:
    """µs (number or numeric string) -> int ns, as the format defines it (exact for the
    integer and ns-decimal µs that Kineto writes)."""
    x = float(v)
    whole = math.floor(x)
    return int(whole) * 1000 + round((x - whole) * 1000)


def _int(v):
    if isinstance(v, int):
        return v
    m = re.search(r"-?\d+", str(v))
    return int(m.group()) if m else None


def kineto_proj(path: Path):
    """Per region name -> (instances, instances with GPU ops, Σ proj ns, Σ GPU ops, Σ busy ns);
    and per GPU-side annotation name -> (instances, Σ span ns)."""
    doc = json.loads(gzip.open(path).read() if str(path).endswith(".gz") else Path(path).read_bytes())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    regions, gpu_spans, launches, ops = [], [], defaultdict(list), defaultdict(list)
    for e in events:
        if e.get("ph") != "X" or "ts" not in e:
            continue
        cat, name = (e.get("cat") or "").lower(), e.get("name") or ""
        start = _ns(e["ts"])
        end = start + (round(float(e.get("dur", 0)) * 1000) if float(e.get("dur", 0)) > 0 else 0)
        args = e.get("args") or {}
        special = re.match(r"ProfilerStep#\d+$", name) or name.startswith(("enumerate(DataLoader)#", "enumerate(DataPipe)#"))
        if cat == "user_annotation" or (cat in ("cpu_op", "operator") and special):
            label = "ProfilerStep" if re.match(r"ProfilerStep#\d+$", name) else name
            regions.append((label, _int(e["pid"]), _int(e["tid"]), start, end))
        elif cat == "gpu_user_annotation":   # GPU-side copies of ProfilerStep#N: one row too
            gpu_spans.append(("ProfilerStep" if re.match(r"ProfilerStep#\d+$", name) else name, end - start))
        elif cat in ("cuda_runtime", "runtime", "cuda_driver") and args.get("correlation") is not None:
            launches[(_int(e["pid"]), _int(e["tid"]))].append((start, end, int(args["correlation"])))
        elif cat in ("kernel", "gpu_memcpy", "memcpy", "gpu_memset", "memset") and args.get("correlation") is not None:
            ops[int(args["correlation"])].append((start, end))
    for lst in launches.values():
        lst.sort()
    starts = {k: [x[0] for x in v] for k, v in launches.items()}
    out = defaultdict(lambda: [0, 0, 0, 0, 0])
    for label, pid, tid, rs, re_ in regions:
        acc = out[label]
        acc[0] += 1
        lst, st = launches.get((pid, tid), []), starts.get((pid, tid), [])
        inside = []
        for i in range(bisect.bisect_left(st, rs), bisect.bisect_right(st, re_)):
            s, e, corr = lst[i]
            if e <= re_ and corr in ops:
                inside.append(corr)
        if not inside:
            continue
        ivs = sorted(iv for c in set(inside) for iv in ops[c])
        busy, cur_s, cur_e = 0, None, None
        for s, e in ivs:
            if cur_e is None or s > cur_e:
                busy += 0 if cur_e is None else cur_e - cur_s
                cur_s, cur_e = s, e
            else:
                cur_e = max(cur_e, e)
        busy += cur_e - cur_s
        acc[1] += 1
        acc[2] += max(e for _, e in ivs) - min(s for s, _ in ivs)
        acc[3] += len(set(inside))
        acc[4] += busy
    spans = defaultdict(lambda: [0, 0])
    for name, dur in gpu_spans:
        spans[name][0] += 1
        spans[name][1] += dur
    return {k: tuple(v) for k, v in out.items()}, {k: tuple(v) for k, v in spans.items()}


@pytest.mark.parametrize("rel", KINETO_FILES)
def test_kineto_breakdown_matches_independent_projection_from_raw_json(rel, tmp_path):
    path = shared_trace(rel)
    expected, expected_spans = kineto_proj(path)
    df = breakdown(ingest(path, tmp_path / "store"))
    cpu = df.filter(df["source"] != "gpu_annotation")
    got = {r["name"]: (r["instances"], r["gpu_instances"], r["gpu_proj_ns"], r["gpu_ops"], r["gpu_busy_ns"])
           for r in cpu.iter_rows(named=True)}
    assert got == expected
    gpu = df.filter(df["source"] == "gpu_annotation")
    assert {r["name"]: (r["instances"], r["gpu_proj_ns"]) for r in gpu.iter_rows(named=True)} == expected_spans
    assert any(v[3] for v in expected.values()), "fixture should have regions with GPU work"


def test_kineto_gpu_annotation_is_its_own_source_with_ops_inside_span(tmp_path):
    path = shared_trace(KINETO_FILES[3])
    df = breakdown(ingest(path, tmp_path / "store"), by="annotation")
    assert set(df["source"]) == {"annotation", "gpu_annotation"}
    g = df.filter(df["source"] == "gpu_annotation")
    assert g["cpu_total_ns"].null_count() == g.height            # GPU-side: no CPU time
    assert (g["gpu_busy_ns"] <= g["gpu_proj_ns"]).all() and (g["gpu_ops"] > 0).all()


# ---------------------------------------------------------------- synthetic edge cases
def _launch(tid, s, e, corr, pid=1, kind="runtime"):
    return {"pid": pid, "tid": tid, "kind": kind, "name": "cudaLaunchKernel", "start_ns": s, "end_ns": e, "correlation": corr}


def _op(s, e, corr, pid=1, kind="kernel", stream=7):
    return {"pid": pid, "device": 0, "stream": stream, "kind": kind, "name": "k", "start_ns": s, "end_ns": e, "correlation": corr}


def _region(name, s, e, tid=10, pid=1, source="nvtx", **kw):
    return {"pid": pid, "tid": tid, "source": source, "name": name, "start_ns": s, "end_ns": e, **kw}


@pytest.fixture
def nested_store(tmp_path):
    """outer [0,100] ⊃ inner [10,50] on thread 10; launches:
    c1 [10,20] (exactly at inner's start: closed bound, both get it), c2 [45,55] (crosses
    inner's end: outer only), c3 [60,100] (ends at outer's end: outer only), c4 on thread 11
    (other thread: nobody), c5 [30,31] launches a memset; c6 is a sync record (not GPU work)."""
    host = [_launch(10, 10, 20, 1), _launch(10, 45, 55, 2), _launch(10, 60, 100, 3), _launch(11, 30, 40, 4),
            _launch(10, 30, 31, 5), _launch(10, 32, 33, 6, kind="sync_api")]
    gpu = [_op(100, 200, 1), _op(150, 160, 2), _op(300, 310, 3), _op(400, 500, 4), _op(205, 215, 5, kind="memset"),
           _op(216, 400, 6, kind="sync")]
    regions = [_region("outer", 0, 100, depth=0), _region("inner", 10, 50, depth=1)]
    return make_store(tmp_path / "s", gpu_ops=gpu, host_ops=host, regions=regions)


def test_projection_counts_every_enclosing_range_with_closed_bounds_same_thread_only(nested_store):
    r = by_name(breakdown(nested_store))
    # inner: c1 [100,200] and c5 [205,215] -> proj 115, busy 110
    assert (r["inner"]["gpu_ops"], r["inner"]["gpu_proj_ns"], r["inner"]["gpu_busy_ns"]) == (2, 115, 110)
    # outer: c1, c2, c3, c5 -> [100,310], busy = 100 (c1 ⊃ c2) + 10 + 10
    assert (r["outer"]["gpu_ops"], r["outer"]["gpu_proj_ns"], r["outer"]["gpu_busy_ns"]) == (4, 210, 120)
    assert r["outer"]["cpu_total_ns"] == 100 and r["inner"]["cpu_mean_ns"] == 40
    assert r["outer"]["gpu_busy_per_cpu"] == pytest.approx(1.2)


def test_correlation_ids_only_link_within_the_launching_process(tmp_path):
    host = [_launch(10, 5, 6, 1, pid=1), _launch(20, 5, 6, 1, pid=2)]
    gpu = [_op(100, 110, 1, pid=2)]            # launched by process 2
    regions = [_region("r1", 0, 10, tid=10, pid=1), _region("r2", 0, 10, tid=20, pid=2)]
    r = by_name(breakdown(make_store(tmp_path / "s", gpu_ops=gpu, host_ops=host, regions=regions)))
    assert r["r1"]["gpu_ops"] == 0 and r["r2"]["gpu_ops"] == 1


def test_unfinished_ranges_are_counted_and_flagged(tmp_path):
    regions = [_region("open", 0, 1000, unfinished=True), _region("open", 2000, 2100, unfinished=False)]
    r = by_name(breakdown(make_store(tmp_path / "s", regions=regions)))
    assert (r["open"]["instances"], r["open"]["unfinished"], r["open"]["cpu_total_ns"]) == (2, 1, 1100)


def test_timer_regions_use_measured_gpu_time_and_report_distribution(tmp_path):
    t = dict(source="timer", pid=1, tid=1)
    regions = [_region("BATCH", 0, 100, gpu_dur_ns=80, **t), _region("BATCH", 100, 300, gpu_dur_ns=60, **t),
               _region("BATCH", 300, 600, **t),                           # not GPU-timed
               _region("IO", 0, 30, **t), _region("IO", 100, 110, **t)]
    st = make_store(tmp_path / "s", regions=regions)
    r = by_name(breakdown(st, by="timer"))
    assert (r["BATCH"]["instances"], r["BATCH"]["cpu_total_ns"], r["BATCH"]["gpu_proj_ns"], r["BATCH"]["gpu_busy_ns"]) == (3, 600, 140, 140)
    assert r["BATCH"]["gpu_instances"] == 2 and r["BATCH"]["gpu_ops"] is None
    tb = by_name(timer_breakdown(st), "key")
    b = tb["BATCH"]
    assert (b["count"], b["cpu_min_ns"], b["cpu_median_ns"], b["cpu_max_ns"]) == (3, 100, 200, 300)
    assert b["cpu_mean_ns"] == pytest.approx(200) and b["cpu_stdev_ns"] == pytest.approx(100)
    assert (b["gpu_count"], b["gpu_total_ns"], b["gpu_median_ns"]) == (2, 140, 70)   # median of 2 = mean of the two
    assert b["gpu_per_cpu"] == pytest.approx(70 / 200)
    assert tb["IO"]["gpu_count"] == 0 and tb["IO"]["gpu_mean_ns"] is None and tb["IO"]["cpu_stdev_ns"] == pytest.approx(math.sqrt(200))


def test_timer_breakdown_shows_summary_only_stats(tmp_path):
    stats = [{"key": "BATCH", "clock": "cpu", "min_s": 0.1, "mean_s": 0.2, "median_s": 0.2, "max_s": 0.3, "stdev_s": 0.05},
             {"key": "BATCH", "clock": "gpu", "min_s": 0.05, "mean_s": 0.1, "median_s": 0.1, "max_s": 0.2, "stdev_s": 0.01}]
    tb = by_name(timer_breakdown(make_store(tmp_path / "s", timer_stats=stats)), "key")
    b = tb["BATCH"]
    assert b["source"] == "timer_stats" and b["count"] is None
    assert b["cpu_mean_ns"] == pytest.approx(2e8) and b["gpu_max_ns"] == pytest.approx(2e8)
    assert b["gpu_per_cpu"] == pytest.approx(0.5)


def test_steps_window_keeps_regions_starting_inside(tmp_path):
    regions = [_region("ProfilerStep#1", 0, 100, source="step", step=1), _region("ProfilerStep#2", 100, 200, source="step", step=2),
               _region("a", 10, 20), _region("a", 110, 120), _region("a", 120, 130)]
    st = make_store(tmp_path / "s", regions=regions)
    assert by_name(breakdown(st, steps="2"))["a"]["instances"] == 2   # ProfilerStep#2 (step numbers)
    assert by_name(breakdown(st))["ProfilerStep"]["instances"] == 2


def test_by_filters_sources_and_rejects_unknown(nested_store):
    from traceq.errors import TraceqError

    assert breakdown(nested_store, by="step").height == 0
    with pytest.raises(TraceqError, match="--by"):
        breakdown(nested_store, by="nope")


def test_instances_table_lists_each_range_with_its_projection(nested_store):
    inst = breakdown_instances(nested_store)
    assert inst.height == 2 and set(inst["name"]) == {"outer", "inner"}
    outer = inst.filter(inst["name"] == "outer").row(0, named=True)
    assert (outer["gpu_proj_start_ns"], outer["gpu_proj_ns"], outer["depth"]) == (100, 210, 0)


def test_containment_is_not_quadratic_many_ranges_many_launches(tmp_path):
    """10k sibling ranges x 1 launch each on one thread + one enclosing range: every
    launch in exactly 2 ranges; runs in well under a second."""
    import time

    n = 10_000
    host = [_launch(10, 10 * i + 2, 10 * i + 4, i) for i in range(n)]
    gpu = [_op(10 * i + 5, 10 * i + 8, i) for i in range(n)]
    regions = [_region("leaf", 10 * i, 10 * i + 9) for i in range(n)] + [_region("root", 0, 10 * n)]
    st = make_store(tmp_path / "s", gpu_ops=gpu, host_ops=host, regions=regions)
    t0 = time.perf_counter()
    r = by_name(breakdown(st))
    assert time.perf_counter() - t0 < 2.0
    assert r["leaf"]["gpu_ops"] == n and r["leaf"]["gpu_instances"] == n and r["root"]["gpu_ops"] == n
    assert r["root"]["gpu_busy_ns"] == 3 * n and r["root"]["gpu_proj_ns"] == 10 * n - 7


# ---------------------------------------------------------------- CLI
def test_cli_breakdown_table_json_and_headline(nested_store):
    from traceq.cli import app

    runner = CliRunner()
    res = runner.invoke(app, ["breakdown", "--store", str(nested_store.path)])
    assert res.exit_code == 0, res.output
    first = res.output.splitlines()[0]
    assert first.startswith("run syn:") and "outer" in first
    res = runner.invoke(app, ["breakdown", "--store", str(nested_store.path), "--format", "json", "--by", "nvtx"])
    rows = json.loads(res.output)["rows"]
    assert {r["name"] for r in rows} == {"outer", "inner"} and "gpu_proj_ns" in rows[0]


def test_cli_breakdown_by_timer(tmp_path):
    from traceq.cli import app

    st = make_store(tmp_path / "s", regions=[_region("BATCH", 0, 100, source="timer", gpu_dur_ns=50),
                                            _region("IO", 0, 10, source="timer")])
    res = CliRunner().invoke(app, ["breakdown", "--store", str(st.path), "--by", "timer"])
    assert res.exit_code == 0, res.output
    assert "BATCH mean" in res.output.splitlines()[0] and "IO 10.0 % of BATCH" in res.output


def test_ranks_aggregate_by_name_and_rank_option_selects_one(tmp_path):
    for rank, dur in ((0, 100), (1, 300)):
        st = make_store(tmp_path / "s", rank=rank, regions=[_region("fwd", 0, dur)],
                        host_ops=[_launch(10, 10, 20, 1)], gpu_ops=[_op(50, 60 + rank, 1)])
    r = by_name(breakdown(st))["fwd"]
    assert (r["ranks"], r["instances"], r["cpu_total_ns"], r["gpu_ops"], r["gpu_busy_ns"]) == (2, 2, 400, 2, 21)
    r1 = by_name(breakdown(st, rank=1))["fwd"]
    assert (r1["ranks"], r1["cpu_total_ns"], r1["gpu_busy_ns"]) == (1, 300, 11)
