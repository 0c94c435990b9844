"""`summary` (DESIGN §4.1) and `overlap` (§4.5).

* HTA parity: with `window="hta"` both reproduce every row of
  ../shared/traces/hta_reference.md (HTA 0.5.0's own numbers) within 0.1 percentage points;
  HTA's failures (traces without GPU kernels) give the "no GPU activity" result instead.
* Default window: a small synthetic Chrome trace whose numbers are derived by hand below.
* Multi-rank: the two-rank trace_filter directory gives per-rank rows and a cross-rank row.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from conftest import SHARED_TRACES, shared_trace
from scoped import overlap, summary
from traceq.analyses.overlap import across_ranks
from traceq.analyses.summary import headline as summary_headline
from traceq.engine.scope import open_scope
from traceq.cli import app
from traceq.ingest import ingest

HTA = "kineto/hta/"
TOL_PP = 0.1

# Rows of hta_reference.md: (trace, rank, span µs, idle %, compute %, non-compute %, overlap %).
# span None: HTA counts a Triton cpu_op that carries a "stream" argument as a GPU op (its
# 94 µs CPU span); traceq keeps no stream on host ops, so its span is the kernel's (the
# percentages agree). overlap None: "n/a (no comm kernels)".
HTA_ROWS = [
    ("trace_diff/control/control.json.gz", 3, 383404, 16.2, 61.23, 22.57, 47.03),
    ("trace_diff/test/test.json.gz", 1, 628371, 7.47, 68.31, 24.23, 68.8),
    ("df_index_resolver/df_index_resolver.json.gz", 1, 1396669, 46.08, 35.55, 18.37, 0.0),
    ("ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", 0, 384634, 2.63, 96.75, 0.62, None),
    ("nccl_parser_config/nccl_data.json.gz", 0, 435586, 77.78, 17.26, 4.97, 14.31),
    ("trace_filter", 0, 600058, 53.56, 17.71, 28.74, 11.81),
    ("trace_filter", 1, 600674, 54.72, 22.57, 22.72, 20.05),
    ("critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz", 0, 12996011, 99.49, 0.08, 0.43, None),
    ("critical_path/cuda_event_sync/event_sync_trace.json.gz", 0, 263, 78.71, 18.63, 2.66, None),
    ("amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz", 0, 8911, 98.53, 1.08, 0.39, None),
    ("triton_example/triton_example.json.gz", 0, None, 0.0, 100.0, 0.0, None),
    ("call_stack/backward_thread.json", 0, 45, 0.0, 100.0, 0.0, None),
]
# Rows where HTA failed with IndexError (no GPU kernels).
HTA_FAILED = [
    "cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz",
    "rank_non_gpu/rank_non_gpu.json.gz",
    "cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    "distributed_info_unavailable/distributed_info_not_found.json.gz",
]


@pytest.fixture(scope="module")
def hta_store(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """Every HTA test trace ingested once: one run per file, trace_filter/ as one 2-rank run."""
    files = sorted({t for t, *_ in HTA_ROWS if t != "trace_filter"} | set(HTA_FAILED))
    paths = [shared_trace(HTA + f) for f in files]
    trace_filter = shared_trace(HTA + "trace_filter")
    store = tmp_path_factory.mktemp("hta") / "store"
    runs = {}
    for r in ingest(paths, store=store):
        runs[Path(r.path).relative_to(SHARED_TRACES / "kineto/hta").as_posix()] = r.run
    for r in ingest([trace_filter], store=store):
        runs["trace_filter"] = r.run
    return store, runs


def test_parametrised_rows_cover_the_reference_table():
    ref = shared_trace("hta_reference.md").read_text()
    table = ref.split("## HTA load time")[0]
    body = [ln for ln in table.splitlines() if ln.startswith("| `")]
    measured = [ln for ln in body if "HTA failed" not in ln]
    failed = [ln for ln in body if "HTA failed" in ln]
    assert len(measured) == len(HTA_ROWS) and len(failed) == len(HTA_FAILED)
    for ln in measured:   # the percentages listed there are the ones checked here
        cells = [c.strip() for c in ln.strip("|").split("|")]
        rank, idle, comp, non = int(cells[1]), float(cells[4]), float(cells[5]), float(cells[6])
        assert any(r[1] == rank and (r[3], r[4], r[5]) == (idle, comp, non) for r in HTA_ROWS), ln


@pytest.mark.parametrize("trace,rank,span_us,idle,comp,non,_ov", HTA_ROWS,
                         ids=[f"{r[0].split('/')[0]}-rank{r[1]}" for r in HTA_ROWS])
def test_summary_hta_window_reproduces_hta_temporal_breakdown(hta_store, trace, rank, span_us, idle, comp, non, _ov):
    store, runs = hta_store
    df = summary(store, runs[trace], rank=rank, window="hta")
    assert df.height == 1
    row = df.row(0, named=True)
    assert abs(row["idle_pct"] - idle) <= TOL_PP
    assert abs(row["compute_pct"] - comp) <= TOL_PP
    assert abs(row["non_compute_pct"] - non) <= TOL_PP
    if span_us is not None:
        assert row["span_ns"] == span_us * 1000
    assert row["idle_ns"] + row["compute_ns"] + row["non_compute_ns"] == row["span_ns"]


@pytest.mark.parametrize("trace,rank,ov", [(r[0], r[1], r[6]) for r in HTA_ROWS],
                         ids=[f"{r[0].split('/')[0]}-rank{r[1]}" for r in HTA_ROWS])
def test_overlap_hta_window_reproduces_hta_comm_comp_overlap(hta_store, trace, rank, ov):
    store, runs = hta_store
    df = overlap(store, runs[trace], rank=rank, window="hta")
    assert df.height == 1
    row = df.row(0, named=True)
    if ov is None:                       # HTA: n/a (no communication kernels)
        assert row["comm_ns"] == 0 and row["overlap_pct"] is None
    else:
        assert abs(row["overlap_pct"] - ov) <= TOL_PP
        assert row["exposed_ns"] == row["comm_ns"] - row["overlapped_ns"]


def test_default_window_keeps_the_last_step_and_exact_ns(hta_store):
    """The default window measures every kernel/copy/memset: on control it spans more than
    HTA's (which drops the last ProfilerStep), with the same kind of breakdown."""
    store, runs = hta_store
    run = runs["trace_diff/control/control.json.gz"]
    hta = summary(store, run, window="hta").row(0, named=True)
    full = summary(store, run).row(0, named=True)
    assert full["span_ns"] > hta["span_ns"]
    assert full["ops"] > hta["ops"]
    assert abs(full["idle_pct"] + full["compute_pct"] + full["non_compute_pct"] - 100) < 1e-9


@pytest.mark.parametrize("trace", HTA_FAILED, ids=[t.split("/")[0] for t in HTA_FAILED])
def test_traces_without_gpu_ops_report_no_gpu_activity(hta_store, trace):
    store, runs = hta_store
    for window in ("all", "hta"):
        df = summary(store, runs[trace], window=window)
        assert df.height == 0 and "span_ns" in df.columns
        assert overlap(store, runs[trace], window=window).height == 0
    scope = open_scope(store, runs[trace])
    assert "no GPU activity" in summary_headline(df, scope)
    res = CliRunner().invoke(app, ["summary", "--store", str(store), "--run", runs[trace]])
    assert res.exit_code == 0, res.output
    assert "no GPU activity" in res.output
    res = CliRunner().invoke(app, ["overlap", "--store", str(store), "--run", runs[trace], "-f", "json"])
    doc = json.loads(res.stdout)
    assert res.exit_code == 0 and doc["rows"] == [] and "no GPU activity" in doc["headline"]


# ---------------------------------------------------------------- multi-rank
def test_overlap_two_ranks_gives_rank_rows_and_cross_rank_summary(hta_store):
    store, runs = hta_store
    by_rank = overlap(store, runs["trace_filter"], window="hta")
    assert by_rank["rank"].to_list() == [0, 1]
    assert (by_rank["comm_ns"] > 0).all()
    across = overlap(store, runs["trace_filter"], window="hta", by="across")
    a = across.row(0, named=True)
    pcts = sorted(by_rank["overlap_pct"].to_list())
    assert a["ranks"] == 2 and a["comm_ranks"] == 2
    assert a["min_overlap_pct"] == pytest.approx(pcts[0])
    assert a["max_overlap_pct"] == pytest.approx(pcts[1])
    assert a["median_overlap_pct"] == pytest.approx(sum(pcts) / 2)
    exposed = dict(zip(by_rank["rank"], by_rank["exposed_ns"]))
    assert a["most_exposed_rank"] == max(exposed, key=exposed.get)
    assert a["least_exposed_rank"] == min(exposed, key=exposed.get)
    assert a["exposed_ns"] == sum(exposed.values())
    mean_step = {r["rank"]: r["step_ns"] / r["steps"] for r in by_rank.iter_rows(named=True)}
    assert a["slowest_rank"] == max(mean_step, key=mean_step.get)
    # the same from a frame built by hand
    assert across_ranks(by_rank).row(0) == across.row(0)
    # per-step rows: one per (rank, step) with the step's CPU duration
    steps = overlap(store, runs["trace_filter"], window="hta", by="step")
    assert set(steps["rank"]) == {0, 1} and steps["step"].null_count() == 0
    res = CliRunner().invoke(app, ["overlap", "--store", str(store), "--run", runs["trace_filter"], "--window", "hta"])
    assert res.exit_code == 0, res.output
    assert "across ranks" in res.output and "2 ranks" in [ln for ln in res.output.splitlines() if not ln.startswith("Fix first:")][0]


def test_rank_option_selects_one_rank(hta_store):
    store, runs = hta_store
    df = summary(store, runs["trace_filter"], rank=1, window="hta")
    assert df["rank"].to_list() == [1]


# ---------------------------------------------------------------- synthetic trace, hand-derived
# Times in µs (×1000 = ns). CPU thread (pid 1, tid 1): ProfilerStep#1 [0, 160), #2 [160, 400);
# launches (cuda_runtime, correlation c) at: gemm c1 t=1, nccl c2 t=5, elementwise c3 t=120
# (all in step 1), memcpy c4 t=170, stream sync c5 t=175 (step 2). GPU (device 0):
#   stream 7 : gemm_kernel [0, 100)   elementwise_kernel [150, 200)   Memcpy HtoD [250, 270)
#              "Stream Sync" (cuda_sync) [270, 300)
#   stream 20: ncclKernel_AllReduce_RING_LL_Sum_float [50, 180)
BASE = 1_000_000


def _synthetic_trace() -> dict:
    def x(cat, name, ts, dur, pid, tid, **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": BASE + ts, "dur": dur, "args": args}

    gpu = dict(device=0)
    ev = [
        x("user_annotation", "ProfilerStep#1", 0, 160, 1, 1),
        x("user_annotation", "ProfilerStep#2", 160, 240, 1, 1),
        x("cuda_runtime", "cudaLaunchKernel", 1, 2, 1, 1, correlation=1),
        x("cuda_runtime", "cudaLaunchKernel", 5, 2, 1, 1, correlation=2),
        x("cuda_runtime", "cudaLaunchKernel", 120, 2, 1, 1, correlation=3),
        x("cuda_runtime", "cudaMemcpyAsync", 170, 2, 1, 1, correlation=4),
        x("cuda_runtime", "cudaStreamSynchronize", 175, 130, 1, 1, correlation=5),
        x("kernel", "gemm_kernel", 0, 100, 0, 7, stream=7, correlation=1, **gpu),
        x("kernel", "ncclKernel_AllReduce_RING_LL_Sum_float", 50, 130, 0, 20, stream=20, correlation=2, **gpu),
        x("kernel", "elementwise_kernel", 150, 50, 0, 7, stream=7, correlation=3, **gpu),
        x("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 250, 20, 0, 7, stream=7, correlation=4, bytes=1024, **gpu),
        x("cuda_sync", "Stream Sync", 270, 30, 0, 7, stream=7, correlation=5, **gpu),
    ]
    return {"schemaVersion": 1, "distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": ev}


@pytest.fixture(scope="module")
def synthetic_store(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("synthetic")
    path = d / "synthetic.json"
    path.write_text(json.dumps(_synthetic_trace()))
    store = d / "store"
    ingest([path], store=store)
    return store


def test_summary_default_window_on_synthetic_trace(synthetic_store):
    # Ops (sync rows excluded): [0,100) [150,200) [50,180) [250,270). The span is the time
    # ledger's step windows: step #1 [0,160) launched ops that run to 200 -> [0,200); step #2
    # [160,400) starts where #1's window ends -> [200,400): span 400 (the GPU idle after the
    # last op, to the end of step #2, is idle of that step). busy = |[0,200) ∪ [250,270)| = 220;
    # idle = 180; compute = |[0,100) ∪ [150,200)| = 150; non-compute = 220 - 150 = 70
    # (exposed communication [100,150) and the copy [250,270)).
    row = summary(synthetic_store).row(0, named=True)
    assert (row["ops"], row["span_ns"], row["busy_ns"], row["idle_ns"], row["compute_ns"], row["non_compute_ns"]) == \
        (4, 400_000, 220_000, 180_000, 150_000, 70_000)
    assert row["idle_pct"] == pytest.approx(100 * 180 / 400)
    assert row["compute_pct"] == pytest.approx(100 * 150 / 400)
    assert row["non_compute_pct"] == pytest.approx(100 * 70 / 400)


def test_summary_hta_window_on_synthetic_trace(synthetic_store):
    # Two ProfilerSteps -> HTA's filter: CPU rows before the last step's start (160) launch
    # c1..c3 only, so memcpy (c4) and Stream Sync (c5) drop out. Ops [0,100) [50,180) [150,200):
    # span 200, busy 200, idle 0, compute 150 (75 %), non-compute 50 (25 %).
    row = summary(synthetic_store, window="hta").row(0, named=True)
    assert (row["span_ns"], row["idle_ns"], row["compute_ns"], row["non_compute_ns"]) == (200_000, 0, 150_000, 50_000)
    assert row["compute_pct"] == pytest.approx(75.0)


def test_overlap_default_window_on_synthetic_trace(synthetic_store):
    # comm = [50,180) = 130; compute ∪ = [0,100) ∪ [150,200); overlapped = [50,100) + [150,180) = 80;
    # exposed = 50; overlap = 80/130. Steps that launched ops: #1 [0,160) whose ops run to 200
    # -> span [0,200), and #2 [160,400) -> rank step time |[0,200) ∪ [160,400)| = 400 µs;
    # exposed share of step time = 50/400.
    row = overlap(synthetic_store).row(0, named=True)
    assert (row["comm_ops"], row["comm_ns"], row["overlapped_ns"], row["exposed_ns"]) == (1, 130_000, 80_000, 50_000)
    assert row["overlap_pct"] == pytest.approx(100 * 80 / 130)
    assert (row["steps"], row["step_ns"]) == (2, 400_000)
    assert row["exposed_step_pct"] == pytest.approx(12.5)
    # per step: step 1 launched gemm, nccl, elementwise -> the same 130/80/50 over the step's
    # span [0,200) (its CPU span [0,160) plus the elementwise kernel running to 200);
    # step 2 launched only the memcpy -> no communication; its window (the time ledger's: windows
    # tile time, step 1's spill to 200 is step 1's) is [200, 400) = 200 µs.
    steps = overlap(synthetic_store, by="step")
    s1, s2 = steps.sort("step").iter_rows(named=True)
    assert (s1["step"], s1["comm_ns"], s1["overlapped_ns"], s1["step_ns"]) == (1, 130_000, 80_000, 200_000)
    assert s1["exposed_step_pct"] == pytest.approx(100 * 50 / 200)
    assert (s2["step"], s2["comm_ns"], s2["overlap_pct"], s2["step_ns"]) == (2, 0, None, 200_000)
    # the HTA window gives the same overlap here (the dropped ops are not comm/compute)
    assert overlap(synthetic_store, window="hta")["overlap_pct"][0] == pytest.approx(100 * 80 / 130)


def test_steps_option_limits_the_window(synthetic_store):
    # --steps 2 = ProfilerStep#2's span [160, 400): ops starting inside it are the memcpy only;
    # the ledger's window of the step is the step itself, [160, 400) (240 µs: step 1 is not in
    # scope, so nothing is tiled off its start); busy: the memcpy (20 µs) and the parts of
    # step 1's ops that run after 160 ([160, 200)): 60 µs, compute [160, 200) = 40 µs
    row = summary(synthetic_store, steps="2").row(0, named=True)
    assert (row["ops"], row["span_ns"], row["busy_ns"], row["compute_ns"]) == (1, 240_000, 60_000, 40_000)
    assert overlap(synthetic_store, steps="2", by="step")["step"].to_list() == [2]


def test_cli_summary_and_overlap_render_headline_and_json(synthetic_store):
    runner = CliRunner()
    res = runner.invoke(app, ["summary", "--store", str(synthetic_store)])
    assert res.exit_code == 0, res.output
    first = [ln for ln in res.output.splitlines() if not ln.startswith("Fix first:")][0]   # below "Fix first"
    # the ledger's windows (test_summary_default_window_on_synthetic_trace): 180 of 400 µs idle
    assert re.search(r"GPU idle 45\.0 % of 400\.0 µs; compute 37\.5 %, non-compute 17\.5 %", first), first
    res = runner.invoke(app, ["summary", "--store", str(synthetic_store), "--window", "hta", "-f", "json"])
    doc = json.loads(res.stdout)
    rows = doc["rows"]
    assert doc["analysis"] == "summary" and doc["run"] == "synthetic" and doc["units"]["span_ns"] == "ns"
    assert doc["headline"].splitlines()[-1].startswith("run synthetic") and rows[0]["run"] == "synthetic"
    assert rows[0]["span_ns"] == 200_000 and rows[0]["compute_pct"] == pytest.approx(75.0)
    res = runner.invoke(app, ["overlap", "--store", str(synthetic_store), "--by", "step", "-f", "csv"])
    assert res.exit_code == 0
    df = pl.read_csv(res.stdout.encode())
    assert df["step"].to_list() == [1, 2]
    res = runner.invoke(app, ["overlap", "--store", str(synthetic_store)])
    assert "61.5 % overlapped with compute" in [ln for ln in res.output.splitlines() if not ln.startswith("Fix first:")][0]
    res = runner.invoke(app, ["summary", "--store", str(synthetic_store), "--window", "bogus"])
    assert res.exit_code == 2 and "--window" in res.output


def test_exposed_share_of_step_time_never_exceeds_100_pct(tmp_path):
    """Issue 8, defect 5: a collective launched at the end of a short step runs long after it
    (and one launched outside every step): exposed comm was 305 µs "of" a 100 µs CPU step
    (305 %). The denominator now holds the GPU work the step launched."""
    def x(cat, name, ts, dur, pid, tid, **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": BASE + ts, "dur": dur, "args": args}

    ev = [
        x("user_annotation", "ProfilerStep#5", 0, 100, 1, 1),
        x("user_annotation", "ProfilerStep#6", 100, 50, 1, 1),
        x("cuda_runtime", "cudaLaunchKernel", 10, 2, 1, 1, correlation=1),
        x("cuda_runtime", "cudaLaunchKernel", 90, 2, 1, 1, correlation=2),
        x("cuda_runtime", "cudaLaunchKernel", 120, 2, 1, 1, correlation=3),
        x("cuda_runtime", "cudaLaunchKernel", 500, 2, 1, 1, correlation=4),   # after the last step
        x("kernel", "gemm_kernel", 15, 60, 0, 7, stream=7, correlation=1, device=0),
        x("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 95, 305, 0, 20, stream=20, correlation=2, device=0),
        x("kernel", "gemm_kernel", 400, 10, 0, 7, stream=7, correlation=3, device=0),
        x("kernel", "ncclDevKernel_AllGather_RING_LL", 600, 50, 0, 20, stream=20, correlation=4, device=0),
    ]
    path = tmp_path / "late_comm.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": ev}))
    ingest([path], store=tmp_path / "s")
    s5, s6 = overlap(tmp_path / "s", by="step").sort("step").iter_rows(named=True)
    # step 5: CPU [0,100), its ops [15,75) and [95,400) -> span [0,400) = 400; exposed = 305 (no compute under it)
    assert (s5["step"], s5["exposed_ns"], s5["step_ns"]) == (5, 305_000, 400_000)
    assert s5["exposed_step_pct"] == pytest.approx(100 * 305 / 400)
    # step 6: CPU [100,150), its gemm [400,410); step 5's window reaches 400, so step 6's
    # (the time ledger's windows tile time) is [400,410) = 10; no communication
    assert (s6["step"], s6["exposed_ns"], s6["step_ns"]) == (6, 0, 10_000)
    row = overlap(tmp_path / "s").row(0, named=True)
    # rank: the ledger's windows [0,400) + [400,410) = 410; exposed in them = 305 (the all-gather
    # [600,650) was launched after the last step: outside every window, as in `traceq steps`)
    assert (row["exposed_ns"], row["step_ns"]) == (305_000, 410_000)
    assert row["exposed_step_pct"] == pytest.approx(100 * 305 / 410)
    out = CliRunner().invoke(app, ["overlap", "--store", str(tmp_path / "s")]).output
    assert "exposed 305.0 µs (74.4 % of step time)" in out


def test_each_op_gets_the_step_whose_span_holds_its_launch(tmp_path):
    """overlap_ops' step of an op (HTA's iteration rule, an as-of join over disjoint steps), by
    construction: steps are cut where the next one starts, empty ones hold nothing, a launch
    at a step's end belongs to the next step or to none."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from kineto_synth import Trace

    from traceq.analyses.overlap import prepare_overlap

    t = Trace()
    for n, ts, dur in ((1, 0, 1000), (2, 1000, 1000), (3, 1500, 1200), (4, 3000, 100), (5, 3000, 500)):
        t.step(n, ts, dur)     # #3 overlaps #2 (cuts it at 1500); #4 and #5 start together: #4 is empty
    expected = {10: 1, 999: 1, 1000: 2, 1499: 2, 1500: 3, 2600: 3, 2700: None, 2800: None, 3000: 5, 3499: 5,
                3500: None, 3600: None}
    for launch_us in expected:
        t.launch("k", launch_us, 1, launch_us + 5, 1)
    ingest([t.write(tmp_path / "t.pt.trace.json.gz")], store=tmp_path / "s", jobs=1)
    scope = open_scope(tmp_path / "s")
    prepare_overlap(scope)
    got = scope.df("SELECT step FROM overlap_ops ORDER BY start_ns")["step"].to_list()
    assert got == list(expected.values())     # the kernels run in launch order
