"""traceq roofline on small synthetic Kineto traces whose expected numbers are derived here
from the events they write (µs), and on TraceLens' own reference outputs for real H100/MI300X
traces (../shared/traces/kineto/tracelens: TFLOP/s within 3 %)."""
from __future__ import annotations

import json

import pytest
from kineto_synth import Trace
from typer.testing import CliRunner

from traceq.analyses.registry import REGISTRY, compute
from traceq.analyses.roofline import roofline_scoped
from traceq.engine.scope import open_scope
from traceq.cli import app
from traceq.ingest import ingest

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
BF16 = "c10::BFloat16"
ADDMM = {"Input Dims": [[512], [128, 256], [256, 512], [], []],
         "Input type": [BF16, BF16, BF16, "Scalar", "Scalar"],
         "Input Strides": [[1], [256, 1], [512, 1], [], []],
         "Concrete Inputs": ["", "", "", "1", "1"]}
# per call: flop = 2·M·N·K + M·N (the bias add, TraceLens' convention: docs/perf_model.md)
# = 2·128·512·256 + 128·512 = 33,619,968; minimal bytes (bf16, 2 B) =
# (M·K + K·N + M·N + bias N)·2 = (32,768 + 131,072 + 65,536 + 512)·2 = 459,776
FLOP, BYTES = 33_619_968, 459_776


def _gemm_trace(device="NVIDIA H100 80GB HBM3") -> Trace:
    """Two aten::linear -> aten::addmm calls of one shape: the first launches a memset (1 µs)
    and the GEMM (10 µs), the second the GEMM alone (20 µs); an unmodelled op launches an
    elementwise kernel (5 µs). GPU span: 100 .. 205 µs."""
    t = Trace(device)
    t.cpu_op("aten::linear", 0, 60)
    t.cpu_op("aten::addmm", 5, 50, **ADDMM)
    t.launch("Memset (Device)", 10, 3, 100, 1, cat="gpu_memset")
    t.launch(GEMM, 20, 5, 110, 10)
    t.cpu_op("aten::linear", 70, 60)
    t.cpu_op("aten::addmm", 75, 50, **ADDMM)
    t.launch(GEMM, 80, 5, 150, 20)
    t.cpu_op("aten::relu", 140, 20, **{"Input Dims": [[64]], "Input type": ["mystery dtype"]})
    t.cpu_op("aten::my_custom_op", 170, 20)
    t.launch("void my_kernel(float*)", 175, 5, 200, 5)
    return t


def _store(tmp_path, t: Trace):
    d = tmp_path / "t"
    ingest([t.write(d / "t.pt.trace.json.gz")], store=d / "s", jobs=1)
    return d / "s"


def test_gemm_row_flop_bytes_achieved_and_roofline(tmp_path):
    res = compute(REGISTRY["roofline"], _store(tmp_path, _gemm_trace()))
    rows = {r["op"]: r for r in res.df.to_dicts()}
    mm = rows["aten::addmm"]
    assert json.loads(mm["input_dims"]) == ADDMM["Input Dims"]
    assert (mm["calls"], mm["kernel_ns"], mm["flop"], mm["bytes"]) == (2, 31_000, FLOP, BYTES)
    # mean over calls of flop / the call's GPU time (11 µs with its memset, 20 µs)
    tflops = (FLOP / 11e-6 + FLOP / 20e-6) / 2 / 1e12
    assert mm["tflops"] == pytest.approx(tflops, rel=1e-9)
    assert mm["tbps"] == pytest.approx((BYTES / 11e-6 + BYTES / 20e-6) / 2 / 1e12, rel=1e-9)
    # H100 SXM: bf16 dense 989.4 TFLOP/s, 3.35 TB/s; intensity 73.12 flop/B · 3.35 = 245.0 < 989.4
    assert mm["intensity"] == pytest.approx(FLOP / BYTES)
    assert (mm["peak_tflops"], mm["peak_tbps"], mm["bound"]) == (pytest.approx(989.4), pytest.approx(3.35), "memory")
    assert mm["roofline_pct"] == pytest.approx(100 * tflops / (FLOP / BYTES * 3.35), rel=1e-9)
    assert mm["category"] == "gemm"
    # aten::linear launched nothing outside its addmm: no row of its own
    assert "aten::linear" not in rows
    # the unmodelled op's kernel is in the "not covered" table
    rest = res.tables["unmodelled"].to_dicts()
    assert [(r["name"], r["count"], r["total_ns"]) for r in rest] == [("void my_kernel(float*)", 1, 5_000)]
    eff = res.value
    # MFU: 2 calls · FLOP in the 105 µs span against bf16 989.4 TFLOP/s
    assert eff.mfu_pct == pytest.approx(round(100 * 2 * FLOP / 105e-6 / 989.4e12, 3))
    # the model covers the addmm calls' 31 µs of the 36 µs of GPU op time
    assert eff.modelled_pct == pytest.approx(round(100 * 31 / 36, 2))
    assert "MFU" in res.headline and "aten::addmm" in res.headline


def test_json_rows_have_exactly_the_issue_fields_and_dims_as_lists(tmp_path):
    store = _store(tmp_path, _gemm_trace())
    out = CliRunner().invoke(app, ["roofline", "--store", str(store), "-f", "json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    row = doc["rows"][0]
    assert list(row) == ["run", "op", "category", "input_dims", "input_types", "calls", "kernel_ns", "flop", "bytes",
                         "tflops", "tbps", "intensity", "peak_tflops", "peak_tbps", "roofline_pct", "bound"]
    assert row["input_dims"] == [[512], [128, 256], [256, 512], [], []]
    assert isinstance(row["flop"], int) and isinstance(row["bytes"], int)
    assert doc["efficiency"]["device"] == "NVIDIA H100 80GB HBM3"


def test_peak_overrides_and_unknown_device(tmp_path):
    store = _store(tmp_path, _gemm_trace(device="Imaginary GPU 9000"))
    res = compute(REGISTRY["roofline"], store)
    mm = res.df.filter(res.df["op"] == "aten::addmm").row(0, named=True)
    assert mm["peak_tflops"] is None and mm["roofline_pct"] is None and mm["tflops"] > 0
    assert "Imaginary GPU 9000" in res.headline and "--peak-tflops" in res.headline
    res = compute(REGISTRY["roofline"], store, peak_tflops=100.0, peak_tbps=2.0)
    mm = res.df.filter(res.df["op"] == "aten::addmm").row(0, named=True)
    # intensity 73.12 · 2 = 146 > 100: compute-bound against the given peak
    assert (mm["peak_tflops"], mm["peak_tbps"], mm["bound"]) == (100.0, 2.0, "compute")
    assert mm["roofline_pct"] == pytest.approx(mm["tflops"])


def test_trace_without_shapes_says_so_and_still_shows_gpu_time(tmp_path):
    t = Trace("NVIDIA H100 80GB HBM3")
    t.cpu_op("aten::addmm", 5, 50)
    t.launch(GEMM, 20, 5, 110, 10)
    res = compute(REGISTRY["roofline"], _store(tmp_path, t))
    assert "record_shapes=True" in res.headline
    mm = res.df.row(0, named=True)
    assert (mm["op"], mm["calls"], mm["kernel_ns"], mm["flop"], mm["tflops"]) == ("aten::addmm", 1, 10_000, None, None)


# ---------------------------------------------------------------- TraceLens' own outputs
TRACELENS = __import__("pathlib").Path(__file__).resolve().parents[1].parent / "shared" / "traces" / "kineto" / "tracelens"
CASES = [("h100", "gaunernst_bert-small-uncased__1016001"), ("h100", "Falconsai_nsfw_image_detection__1016002"),
         ("mi300", "gaunernst_bert-small-uncased__1016001"), ("mi300", "Falconsai_nsfw_image_detection__1016002")]


def _tracelens_rows(csv_dir, files=("GEMM.csv", "SDPA_fwd.csv", "CONV_fwd.csv")):
    """TraceLens' rows merged per (op, input dims, input types, concrete inputs) — what the
    FLOP count depends on and what traceq groups by (TraceLens also splits by strides):
    calls and kernel time summed, TFLOP/s the calls-weighted mean of its per-row means."""
    import ast
    import csv

    out: dict[tuple, dict] = {}
    for f in files:
        p = csv_dir / f
        if not p.exists():
            continue
        for r in csv.DictReader(p.open()):
            key = (r["name"], json.dumps(ast.literal_eval(r["Input Dims_first"])),
                   json.dumps(ast.literal_eval(r["Input type_first"])),
                   json.dumps(ast.literal_eval(r["Concrete Inputs_first"])))
            n = int(r["name_count"])
            acc = out.setdefault(key, {"calls": 0, "kernel_us": 0.0, "tflops_x_n": 0.0,
                                       "gflop": float(r["GFLOPS_first"]), "file": f})
            acc["calls"] += n
            acc["kernel_us"] += float(r["Kernel Time (µs)_sum"])
            acc["tflops_x_n"] += float(r["TFLOPS/s_mean"]) * n
    return out


@pytest.mark.parametrize("gpu,name", CASES)
def test_gemm_attention_conv_rows_match_tracelens(tmp_path, gpu, name):
    """GEMM, SDPA and convolution rows: calls and FLOPs exact, kernel time within 1 %,
    achieved TFLOP/s within 3 % of TraceLens 1.0's own CSVs for the same trace."""
    trace = TRACELENS / gpu / f"{name}.json.gz"
    if not trace.exists():
        pytest.skip("../shared/traces is absent")
    ingest([trace], store=tmp_path / "s", jobs=1)
    df, _, _ = roofline_scoped(open_scope(tmp_path / "s"))
    ours = {(r["op"], json.dumps(json.loads(r["input_dims"])), json.dumps(json.loads(r["input_types"])),
             json.dumps(json.loads(r["concrete_inputs"]))): r for r in df.to_dicts()}
    theirs = _tracelens_rows(TRACELENS / gpu / f"{name}_perf_report_csvs")
    assert theirs
    for key, t in theirs.items():
        assert key in ours, f"{gpu} {name}: no roofline row for {key}"
        r = ours[key]
        assert r["calls"] == t["calls"], key
        assert r["flop"] == round(t["gflop"] * 1e9), key
        assert r["kernel_ns"] == pytest.approx(t["kernel_us"] * 1e3, rel=0.01), key
        assert r["tflops"] == pytest.approx(t["tflops_x_n"] / t["calls"], rel=0.03), key


def test_nsys_emit_nvtx_ranges_are_op_calls(tmp_path):
    """nsys: the sample's three "forward" NVTX ranges renamed as emit_nvtx(record_shapes=True)
    names them. Each range owns the GPU ops launched inside it on its thread (checked here by
    a loop over the store's rows); nsys records no dtypes, so FLOPs but no bytes or peak:
    addmm [[3],[3,4],[4,3]]: 2·3·3·4 + 3·3 (bias) = 81 flop."""
    from test_nsys_ingest import SAMPLE, edited_copy, ingested, q

    name = "aten::addmm, seq = 12, op_id = 5, sizes = [[3], [3, 4], [4, 3]], input_op_ids = [(0, 0), (1, 0)]"
    store = ingested(edited_copy(SAMPLE, tmp_path, f"UPDATE NVTX_EVENTS SET text = '{name}' WHERE text = 'forward'"),
                     tmp_path)
    ranges = q(store, f"SELECT pid, tid, start_ns, end_ns FROM regions WHERE name = '{name}'").to_dicts()
    calls = q(store, "SELECT pid, tid, start_ns, correlation FROM host_ops WHERE kind IN ('runtime', 'driver') "
                     "AND correlation IS NOT NULL").to_dicts()
    ops = q(store, "SELECT pid, correlation, end_ns - start_ns AS dur FROM gpu_ops "
                   "WHERE kind IN ('kernel', 'memcpy', 'memset')").to_dicts()
    launch = {(c["pid"], c["correlation"]): c for c in calls}
    per_range = [0] * len(ranges)
    for o in ops:
        c = launch.get((o["pid"], o["correlation"]))
        for i, r in enumerate(ranges):
            if c and (c["pid"], c["tid"]) == (r["pid"], r["tid"]) and r["start_ns"] <= c["start_ns"] <= r["end_ns"]:
                per_range[i] += o["dur"]
    busy = [ns for ns in per_range if ns]
    assert busy, "the sample's forward ranges launch GPU work"
    res = compute(REGISTRY["roofline"], store, top=0)
    mm = res.df.filter(res.df["op"] == "aten::addmm").row(0, named=True)
    assert json.loads(mm["input_dims"]) == [[3], [3, 4], [4, 3]]
    assert (mm["calls"], mm["kernel_ns"], mm["flop"], mm["bytes"]) == (len(busy), sum(busy), 81, None)
    assert mm["tflops"] == pytest.approx(sum(81 / ns for ns in busy) / len(busy) / 1e3)
    assert mm["input_types"] is None and mm["roofline_pct"] is None


def test_gpu_bound_diagnose_gains_the_efficiency_view(tmp_path):
    """Back-to-back GEMMs (no idle): diagnose says gpu-bound and its evidence carries the
    efficiency view: MFU and the op furthest below its roofline (diagnose's JSON keeps its
    shape, an interface; the numbers as JSON are roofline's "efficiency")."""
    t = Trace("NVIDIA H100 80GB HBM3")
    for i in range(20):
        t.cpu_op("aten::addmm", 10 * i, 8, **ADDMM)
        t.launch(GEMM, 10 * i + 1, 5, 1000 + 100 * i, 100)
    store = _store(tmp_path, t)
    out = CliRunner().invoke(app, ["diagnose", "--store", str(store), "-f", "json"])
    assert out.exit_code == 0, out.output
    run = json.loads(out.output)["runs"][0]
    assert run["bound"] == "gpu" and "efficiency" not in run
    # 20 calls · FLOP in the 2000 µs span against bf16 989.4 TFLOP/s: MFU 3.4 %
    mfu = 100 * 20 * FLOP / 2000e-6 / 989.4e12
    assert f"MFU {mfu:.1f} % of 989 TFLOP/s bf16" in run["evidence"]
    # the op: 2,000 µs of GEMMs, memory-bound, at 100 · (FLOP / 100 µs) / (intensity · 3.35 TB/s) %
    pct = 100 * (FLOP / 100e-6 / 1e12) / (FLOP / BYTES * 3.35)
    assert f"aten::addmm [[512],[128,256],[256,512]] at {pct:.0f} % (memory-bound, 2.00 ms)" in run["evidence"]


def test_graph_replayed_gemms_are_attributed_to_captured_ops(tmp_path):
    """vLLM decode run as a full HIP graph, ingested with its capture trace: the replayed
    GEMMs belong to the captured aten::addmm/mm (inside vllm::rocm_unquantized_gemm, a wrapper
    of the same family) with TraceLens' calls, FLOPs, kernel time (1 %) and TFLOP/s (3 %)."""
    v = TRACELENS / "inference" / "vllm_decode_full"
    if not v.exists():
        pytest.skip("../shared/traces is absent")
    ingest([v / "graph_execution.json.gz"], store=tmp_path / "s", jobs=1, graph_capture=v / "capture_traces")
    df, rest, _ = roofline_scoped(open_scope(tmp_path / "s"))
    ours = {(r["op"], json.dumps(json.loads(r["input_dims"]))): r for r in df.to_dicts()}
    theirs = {(op, dims): t for (op, dims, _, _), t in _tracelens_rows(v / "perf_csvs", ("GEMM.csv",)).items()
              if op.startswith("aten::")}
    assert len(theirs) == 4
    for key, t in theirs.items():
        r = ours[key]
        assert (r["calls"], r["flop"]) == (t["calls"], round(t["gflop"] * 1e9)), key
        assert r["kernel_ns"] == pytest.approx(t["kernel_us"] * 1e3, rel=0.01), key
        assert r["tflops"] == pytest.approx(t["tflops_x_n"] / t["calls"], rel=0.03), key
    # every replayed kernel has a captured op: none is reported as an unknown graph replay
    assert not rest["graph_replay"].any()
