"""Kernels replayed from CUDA/HIP graphs, attributed to the ops that captured them
(`traceq ingest EXEC --graph-capture CAPTURE`, traceq/ingest/graph_capture.py); without a
capture trace, graph replays are never launches nor launch overhead.

The synthetic traces reproduce what vLLM writes on ROCm: a capture trace whose launch calls
name their kernel (args.kernel) and run nothing, and an execution trace whose kernels carry
the correlation id of a hipGraphLaunch call. The real trace is TraceLens' vLLM decode test
(a FULL HIP graph on an MI300X); its perf_csvs are TraceLens' own attribution of the
replayed kernels to the captured ops, the reference here."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import polars as pl
import pytest

import traceq
from traceq.errors import TraceqError
from conftest import REPO, shared_trace
from kineto_synth import Trace
from scoped import stalls

VLLM = "kineto/tracelens/inference/vllm_decode_full"


def sql(store, query: str) -> pl.DataFrame:
    return traceq.sql(query, store)


def cli(*args, cwd):
    env = dict(os.environ, NO_COLOR="1", TRACEQ_WIDTH="200", PYTHONPATH=str(REPO))
    env.pop("TRACEQ_STORE", None)
    return subprocess.run([sys.executable, "-m", "traceq", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


# ---------------------------------------------------------------- synthetic traces
def capture_trace(path, kernels=("gemm_k", "add_k")):
    """One captured graph (µs): hipStreamBeginCapture at 100; vllm::layer [105, 195] holding
    aten::mm [110, 150] (launches kernels[0] at 120) and aten::add [160, 190] (launches
    kernels[1] at 170); hipStreamEndCapture at 200."""
    t = Trace()
    t.runtime("hipStreamBeginCapture", 100, 1)
    t.cpu_op("vllm::layer", 105, 90, **{"Input Dims": [[32, 64]]})
    t.cpu_op("aten::mm", 110, 40, **{"Input Dims": [[32, 64], [64, 128]], "Input type": ["c10::BFloat16"] * 2})
    t.captured_launch(kernels[0], 120, 5)
    t.cpu_op("aten::add", 160, 30, **{"Input Dims": [[32, 128], [32, 128]]})
    t.captured_launch(kernels[1], 170, 5)
    t.runtime("hipStreamEndCapture", 200, 1)
    return t.write(path)


def execution_trace(path, replayed=(("gemm_k", "add_k"), ("gemm_k", "add_k"))):
    """Replays of the graph (µs): hipGraphLaunch at 1000 (lasting 300) whose first kernel
    runs [1100, 1130] and second [1250, 1260] (a 120 µs GPU gap while the graph launch call
    still runs), the next replay 1000 µs later; and one kernel launched on its own
    (cudaLaunchKernel at 3000, kernel [3010, 3020])."""
    t = Trace()
    for i, names in enumerate(replayed):
        at = 1000 + 1000 * i
        t.graph_launch(at, 300, [(names[0], at + 100, 30), (names[1], at + 250, 10)])
    t.launch("solo_k", 3000, 5, 3010, 10)
    return t.write(path)


@pytest.fixture
def synth(tmp_path):
    return capture_trace(tmp_path / "capture.json.gz"), execution_trace(tmp_path / "exec.json.gz"), tmp_path / "store"


def test_replayed_kernels_get_the_ops_that_captured_them_nested_as_captured(synth):
    capture, execution, store = synth
    (res,) = traceq.ingest([execution], store, graph_capture=capture)
    assert res.status == "added" and not [w for w in res.warnings if "graph" in w]
    ops = sql(store, "SELECT * FROM host_ops WHERE kind = 'graph_op' ORDER BY start_ns, end_ns DESC")
    # per replay: vllm::layer spans both kernels, aten::mm the first, aten::add the second (GPU times)
    want = []
    for at in (1000, 2000):
        want += [("vllm::layer", (at + 100) * 1000, (at + 260) * 1000), ("aten::mm", (at + 100) * 1000, (at + 130) * 1000),
                 ("aten::add", (at + 250) * 1000, (at + 260) * 1000)]
    assert list(zip(ops["name"], ops["start_ns"], ops["end_ns"])) == want
    assert ops["pid"].unique().to_list() == [100] and ops["tid"].unique().to_list() == [100]
    assert ops["correlation"].null_count() == ops.height
    ids = ops["external_id"].to_list()
    assert len(set(ids)) == 6 and all(i < 0 for i in ids)
    others = sql(store, "SELECT external_id FROM host_ops WHERE kind <> 'graph_op' AND external_id IS NOT NULL "
                        "UNION ALL SELECT external_id FROM gpu_ops WHERE name = 'solo_k' AND external_id IS NOT NULL")
    assert not set(others["external_id"]) & set(ids)
    if "input_dims" in ops.columns:
        assert json.loads(ops.filter(pl.col("name") == "aten::mm")["input_dims"][0]) == [[32, 64], [64, 128]]
    # each kernel: the external_id of its innermost graph_op (of its own replay)
    k = sql(store, "SELECT g.name AS kernel, h.name AS op, h.start_ns AS op_start, g.start_ns FROM gpu_ops g "
                   "LEFT JOIN host_ops h ON h.kind = 'graph_op' AND h.external_id = g.external_id ORDER BY g.start_ns")
    assert list(zip(k["kernel"], k["op"])) == [("gemm_k", "aten::mm"), ("add_k", "aten::add")] * 2 + [("solo_k", None)]
    assert (k.filter(pl.col("op").is_not_null())["op_start"] == k.filter(pl.col("op").is_not_null())["start_ns"]).all()


def test_graph_replays_are_no_launches_and_no_launch_overhead(synth):
    """Before: the 4 replayed kernels counted as 4 launches of 300 µs CPU each, and the GPU
    gap inside the running hipGraphLaunch call as launch overhead."""
    _, execution, store = synth
    traceq.ingest([execution], store)
    st = stalls(store, min_gap_us=50)
    launch = st.launch.row(0, named=True)
    assert (launch["kernels"], launch["launches"], launch["graph_launches"], launch["graph_kernels"]) == (5, 1, 2, 4)
    assert launch["mean_launch_ns"] == 5000   # the one cudaLaunchKernel
    causes = dict(zip(st.causes["cause"], st.causes["idle_ns"]))
    # only the cudaLaunchKernel call [3000, 3005] inside the gap before solo_k; not the 2 x 120
    # µs of GPU gaps inside the graph launch calls (before: 245 µs of launch overhead)
    assert causes["launch_overhead"] == 5_000
    assert causes["unattributed"] >= 2 * 120_000   # the two gaps inside the graph replays
    hot = traceq.open_store(store).hotspots()
    assert any("4 kernels were replayed from 2 CUDA/HIP graph launch(es)" in n for n in hot.result.notes)


def test_replay_whose_kernels_differ_from_the_capture_is_not_attributed(tmp_path):
    capture = capture_trace(tmp_path / "capture.json.gz")
    execution = execution_trace(tmp_path / "exec.json.gz", replayed=(("gemm_k", "mul_k"), ("gemm_k", "add_k")))
    (res,) = traceq.ingest([execution], tmp_path / "store", graph_capture=capture)
    assert any("1 replay(s) of 2 kernels match no captured graph" in w for w in res.warnings), res.warnings
    ops = sql(tmp_path / "store", "SELECT start_ns FROM host_ops WHERE kind = 'graph_op'")
    assert ops["start_ns"].min() >= 2_000_000   # only the second replay, which matches
    k = sql(tmp_path / "store", "SELECT name, external_id FROM gpu_ops WHERE start_ns < 2000000")
    assert k["external_id"].null_count() == k.height


def test_a_capture_directory_uses_execution_details_and_the_rank_of_the_file(tmp_path):
    d = tmp_path / "capture_traces"
    capture_trace(d / "graph_capture_rank_0.1.pt.trace.json.gz")
    capture_trace(d / "graph_capture_rank_1.2.pt.trace.json.gz", kernels=("x_k", "y_k"))
    capture_trace(d / "unlisted.pt.trace.json.gz", kernels=("gemm_k", "zzz_k"))
    (d / "execution_details.json").write_text(json.dumps([
        {"file": "graph_capture_rank_0.1.pt.trace.json.gz", "batch_size": 32, "mode": "FULL"},
        {"file": "graph_capture_rank_1.2.pt.trace.json.gz", "batch_size": 32, "mode": "FULL"}]))
    execution = execution_trace(tmp_path / "exec.json.gz")
    (res,) = traceq.ingest([execution], tmp_path / "store", graph_capture=d, rank=0)
    assert not [w for w in res.warnings if "graph" in w]
    assert sql(tmp_path / "store", "SELECT count(*) AS n FROM host_ops WHERE kind = 'graph_op'")["n"][0] == 6


def test_graphs_captured_alike_attribute_but_graphs_with_other_shapes_are_ambiguous(tmp_path):
    """Two capture files whose graphs launch the same kernels: captured alike (same ops and
    shapes, e.g. PIECEWISE pieces) -> attributed; other shapes (another batch size) -> which
    one ran is unknown: a warning, nothing attributed."""
    alike, other = tmp_path / "alike", tmp_path / "other"
    capture_trace(alike / "a.json.gz")
    capture_trace(alike / "b.json.gz")
    capture_trace(other / "a.json.gz")
    t = Trace()
    t.runtime("hipStreamBeginCapture", 100, 1)
    t.cpu_op("aten::mm", 110, 40, **{"Input Dims": [[64, 64], [64, 128]]})
    t.captured_launch("gemm_k", 120, 5)
    t.cpu_op("aten::add", 160, 30, **{"Input Dims": [[64, 128], [64, 128]]})
    t.captured_launch("add_k", 170, 5)
    t.runtime("hipStreamEndCapture", 200, 1)
    t.write(other / "b.json.gz")
    execution = execution_trace(tmp_path / "exec.json.gz")
    (res,) = traceq.ingest([execution], tmp_path / "s1", graph_capture=alike)
    assert not [w for w in res.warnings if "graph" in w]
    assert sql(tmp_path / "s1", "SELECT count(*) AS n FROM host_ops WHERE kind = 'graph_op'")["n"][0] == 6
    (res,) = traceq.ingest([execution], tmp_path / "s2", graph_capture=other)
    assert any("2 replay(s) of 2 kernels match 2 captured graphs with different ops" in w for w in res.warnings)
    assert sql(tmp_path / "s2", "SELECT count(*) AS n FROM host_ops WHERE kind = 'graph_op'")["n"][0] == 0


def test_cuda_capture_without_kernel_names_is_matched_by_count_with_a_warning(tmp_path):
    t = Trace()   # CUDA: cudaStreamBeginCapture, launch calls without a kernel arg, cudaGraphLaunch
    t.runtime("cudaStreamBeginCapture", 100, 1)
    t.cpu_op("aten::mm", 110, 40)
    t.captured_launch(None, 120, 5, api="cudaLaunchKernel")
    t.cpu_op("aten::add", 160, 30)
    t.captured_launch(None, 170, 5, api="cudaLaunchKernel")
    t.runtime("cudaStreamEndCapture", 200, 1)
    capture = t.write(tmp_path / "capture.json.gz")
    e = Trace()
    e.graph_launch(1000, 20, [("gemm_k", 1100, 30), ("add_k", 1250, 10)], api="cudaGraphLaunch")
    execution = e.write(tmp_path / "exec.json.gz")
    (res,) = traceq.ingest([execution], tmp_path / "store", graph_capture=capture)
    assert any("by kernel count alone" in w for w in res.warnings), res.warnings
    k = sql(tmp_path / "store", "SELECT g.name, h.name AS op FROM gpu_ops g JOIN host_ops h ON h.kind = 'graph_op' "
                                "AND h.external_id = g.external_id ORDER BY g.start_ns")
    assert list(zip(k["name"], k["op"])) == [("gemm_k", "aten::mm"), ("add_k", "aten::add")]


def test_capture_trace_is_part_of_the_identity(synth):
    """Re-ingesting the execution trace with (or without) capture traces is no "unchanged"
    file: it is refused without --force (the run holds it ingested the other way), replaced with it."""
    capture, execution, store = synth
    assert traceq.ingest([execution], store)[0].status == "added"
    with pytest.raises(TraceqError, match="this file as it was before, or ingested with other --graph-capture"):
        traceq.ingest([execution], store, graph_capture=capture)
    assert traceq.ingest([execution], store, graph_capture=capture, force=True)[0].status == "replaced"
    assert traceq.ingest([execution], store, graph_capture=capture)[0].status == "unchanged"
    assert sql(store, "SELECT count(*) AS n FROM host_ops WHERE kind = 'graph_op'")["n"][0] == 6
    assert traceq.ingest([execution], store, force=True)[0].status == "replaced"
    assert sql(store, "SELECT count(*) AS n FROM host_ops WHERE kind = 'graph_op'")["n"][0] == 0


@pytest.mark.parametrize("content, problem", [
    ("just some words\n", "not a graph capture trace"),
    (None, "no cudaStreamBeginCapture/hipStreamBeginCapture"),
])
def test_bad_capture_file_is_a_one_line_error_and_the_store_is_untouched(tmp_path, content, problem):
    execution = execution_trace(tmp_path / "exec.json.gz")
    bad = tmp_path / "capture.json"
    if content is None:   # a Kineto trace without any capture in it
        execution_trace(bad)
    else:
        bad.write_text(content)
    r = cli("ingest", execution, "--store", tmp_path / "store", "--graph-capture", bad, cwd=tmp_path)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("traceq: ") and str(bad) in lines[0] and problem in lines[0], r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "store").exists()


# ---------------------------------------------------------------- the real vLLM trace vs TraceLens
PERF_CSVS = ("GEMM", "InferenceAttention_fwd", "RMSNorm_fwd", "UnaryElementwise", "MoE_unfused_fwd")


@pytest.fixture(scope="module")
def vllm(tmp_path_factory):
    base = shared_trace(VLLM)
    store = tmp_path_factory.mktemp("vllm") / "store"
    (res,) = traceq.ingest([base / "graph_execution.json.gz"], store, graph_capture=base / "capture_traces")
    return base, store, res


def _op_kernels(store) -> pl.DataFrame:
    """Every GPU op with each op above it: graph_op rows (the replayed kernel's innermost op
    and the graph_ops enclosing it, same thread, GPU times) and, for the ops the execution
    trace ran itself, the cpu_op with the op's external id and those enclosing it."""
    return sql(store, """
        WITH inner_op AS (
            SELECT g.name AS kernel, g.start_ns AS k_start, g.end_ns - g.start_ns AS dur_ns, h.kind, h.tid,
                   h.start_ns, h.end_ns
            FROM gpu_ops g JOIN host_ops h ON h.rank = g.rank AND h.external_id = g.external_id
                                           AND h.kind IN ('cpu_op', 'graph_op'))
        SELECT i.kernel, i.k_start, i.dur_ns, i.kind, o.* EXCLUDE (kind, start_ns), o.start_ns AS op_start
        FROM inner_op i JOIN host_ops o ON o.kind = i.kind AND o.tid = i.tid
             AND o.start_ns <= i.start_ns AND o.end_ns >= i.end_ns""")


def _dims(text) -> str:
    return json.dumps(ast.literal_eval(text) if isinstance(text, str) else text, separators=(",", ":"))


def test_vllm_every_replayed_kernel_is_attributed(vllm):
    _, store, res = vllm
    assert not [w for w in res.warnings if w.startswith("graph")], res.warnings
    k = sql(store, """SELECT count(*) AS n, count(h.external_id) AS attributed, sum(g.end_ns - g.start_ns) AS ns,
                             sum(g.end_ns - g.start_ns) FILTER (WHERE h.external_id IS NOT NULL) AS attributed_ns
                      FROM gpu_ops g LEFT JOIN host_ops h ON h.kind = 'graph_op' AND h.external_id = g.external_id
                      WHERE g.correlation = 505113""").row(0, named=True)
    # 421 kernels replayed by the one hipGraphLaunch (correlation 505113), all of them matched
    assert (k["n"], k["attributed"]) == (421, 421)
    print(f"\nvLLM decode: {100 * k['attributed_ns'] / k['ns']:.1f} % of replayed kernel time attributed")


@pytest.mark.parametrize("csv", PERF_CSVS)
def test_vllm_kernel_time_per_op_and_shape_matches_tracelens(vllm, csv):
    base, store, _ = vllm
    ref = pl.read_csv(base / "perf_csvs" / f"{csv}.csv", infer_schema_length=0)
    pairs = _op_kernels(store)
    if "input_dims" not in pairs.columns or pairs["input_dims"].null_count() == pairs.height:
        pytest.skip("the store has no input shapes (host_ops.input_dims)")
    pairs = pairs.with_columns(dims=pl.col("input_dims").map_elements(_dims, return_dtype=pl.String))
    # TraceLens splits its rows further (by other params): the rows of one op name and shape add up
    ref = ref.with_columns(dims=pl.col("Input Dims_first").map_elements(_dims, return_dtype=pl.String),
                           us=pl.col("Kernel Time (µs)_sum").cast(pl.Float64), n=pl.col("name_count").cast(pl.Int64))
    for r in ref.iter_rows(named=True):
        if r["name"].startswith("pseudo_op::"):
            # TraceLens' pseudo ops split an op's kernels by name (MoE up/down): the op is the
            # captured one with those shapes, its kernels the ones the row lists
            names = {d["name"] for d in ast.literal_eval(r["kernel_details__summarize_kernel_stats"].replace("np.float64", ""))}
            got = pairs.filter((pl.col("dims") == r["dims"]) & pl.col("kernel").is_in(names))
            got_us = got["dur_ns"].sum() / 1e3
            got_n = got.filter(pl.col("kernel") == sorted(names)[0])["external_id"].n_unique()
            print(f"{csv}: {r['name']} {r['dims']}: traceq {got_us:.1f} µs / {got_n} ops, TraceLens {r['us']:.1f} µs / {r['n']}")
            assert got_us == pytest.approx(r["us"], rel=0.01) and got_n == r["n"]
    for (name, dims), rows in ref.filter(~pl.col("name").str.starts_with("pseudo_op::")).group_by("name", "dims"):
        want_us, want_n = rows["us"].sum(), rows["n"].sum()
        got = pairs.filter((pl.col("name") == name) & (pl.col("dims") == dims))
        got_us, got_n = got["dur_ns"].sum() / 1e3, got["external_id"].n_unique()
        print(f"{csv}: {name} {dims}: traceq {got_us:.1f} µs / {got_n} ops, TraceLens {want_us:.1f} µs / {want_n}")
        assert got_us == pytest.approx(want_us, rel=0.01) and got_n == want_n
