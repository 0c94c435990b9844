"""`traceq diagnose` on every shared trace (kineto and nsys) and the samples, and the advice
rules (traceq/advice) on real traces: for each rule one trace where it fires and one where
it must not. Every file is ingested once per module (one run per file)."""
from __future__ import annotations

import json
import re

import pytest
from conftest import SAMPLES, SHARED_TRACES
from kineto_synth import Trace
from scoped import diagnose
from typer.testing import CliRunner

from traceq.advice import evidence_for, findings
from traceq.advice.bound import BOUNDS, FINDINGS_OF_BOUND
from traceq.engine.scope import open_scope
from traceq.ingest import ingest


def _files():
    out = []
    if SHARED_TRACES.is_dir():
        out += sorted(p for p in SHARED_TRACES.rglob("*")
                      if p.is_file() and (p.name.endswith((".json.gz", ".sqlite")) or
                                          (p.suffix == ".json" and p.name != "kernel_labels.json")))
    out += [SAMPLES / "nsys_sample.sqlite", SAMPLES / "slow_dataloader", SAMPLES / "fast_dataloader"]
    return out


def _run_name(p) -> str:
    rel = p.relative_to(SHARED_TRACES) if SHARED_TRACES in p.parents else p.relative_to(SAMPLES.parent)
    return re.sub(r"[^A-Za-z0-9]+", "_", str(rel)).strip("_")


FILES = _files()


REJECTED: dict[str, str] = {}   # files the ingest refuses as bad input (e.g. a capture with no events)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from traceq.errors import TraceqError

    path = tmp_path_factory.mktemp("diag") / "store"
    for p in FILES:
        try:
            ingest([p], store=path, run=_run_name(p), jobs=1)
        except TraceqError as exc:
            REJECTED[_run_name(p)] = str(exc)
    return path


def _run(rel: str) -> str:
    p = SHARED_TRACES / rel
    if not p.exists():
        pytest.skip(f"../shared/traces/{rel} not available")
    return _run_name(p)


def _ids(store, rel):
    return {f["id"]: f for f in diagnose(store, run=_run(rel)).row(0, named=True)["findings"]}


def _also(store, rel):
    return {f["id"]: f for f in diagnose(store, run=_run(rel)).row(0, named=True)["also_seen"]}


# ---------------------------------------------------------------- every trace
@pytest.mark.parametrize("path", FILES, ids=[_run_name(p) for p in FILES])
def test_diagnose_every_trace_gives_a_verdict_and_the_json(store, path):
    if _run_name(path) in REJECTED:
        pytest.skip(f"rejected at ingest (one-line bad-input error): {REJECTED[_run_name(path)]}")
    res = CliRunner().invoke(__import__("traceq.cli", fromlist=["app"]).app,
                             ["diagnose", "--store", str(store), "--run", _run_name(path), "-f", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert list(doc) == ["runs"] and doc["runs"]
    for r in doc["runs"]:
        assert list(r) == ["run", "rank", "bound", "bound_share_pct", "evidence", "gpu_idle_pct", "findings",
                           "also_seen", "critical_path"]
        # the critical path the verdict weighs (issue 34): null without one, else its shares add up
        cp = r["critical_path"]
        assert cp is None or (list(cp) == ["bound", "steps", "weighed", "shares"]
                              and sum(cp["shares"].values()) == pytest.approx(100.0, abs=0.1))
        assert r["bound"] in BOUNDS and 0 <= r["bound_share_pct"] <= 100 and r["evidence"]
        # the findings of the bound's cost first (Fix first names what the verdict names), then
        # the rest by estimated gain
        first = FINDINGS_OF_BOUND.get(r["bound"], ())
        lead = [f for f in r["findings"] if f["id"] in first]
        assert r["findings"][:len(lead)] == lead
        gains = [f["est_gain_ms_per_step"] for f in r["findings"][len(lead):]]
        assert gains == sorted(gains, reverse=True)
        for f in r["findings"] + r["also_seen"]:
            assert list(f) == ["id", "category", "evidence", "gpu_ms", "est_gain_ms_per_step", "advice"]
            assert f["evidence"] and f["advice"]
            assert re.search(r"\d", f["evidence"])          # the evidence cites numbers
    table = CliRunner().invoke(__import__("traceq.cli", fromlist=["app"]).app,
                               ["diagnose", "--store", str(store), "--run", _run_name(path)])
    assert table.exit_code == 0 and ("-bound (" in table.output or "GPU idle, cause unattributed (" in table.output
                                     or "no GPU work" in table.output)
    # the "Fix first" line heading the other analyses names diagnose's first finding (issue 13:
    # the same findings head every analysis), or is absent when diagnose has none
    from traceq.analyses.registry import REGISTRY, compute

    (r,) = doc["runs"]
    line = (compute(REGISTRY["hotspots"], store, run=_run_name(path)).headline or "").splitlines()[0]
    if r["findings"]:
        assert line.startswith(f"Fix first: {r['findings'][0]['id']} (") and \
            (f"+{len(r['findings']) - 1} more" in line) is (len(r["findings"]) > 1), line
    else:
        assert not line.startswith("Fix first"), line


# ---------------------------------------------------------------- channels_last
def _gpu_kernels(store, rel, select):
    """`select` (SQL aggregates) over the run's kernels read straight from the store's gpu_ops
    parquet with DuckDB: expected numbers by a second method, outside traceq's queries."""
    import duckdb

    part = store / "gpu_ops" / f"run={_run(rel)}"
    return duckdb.sql(f"select {select} from read_parquet('{part}/**/*.parquet') where kind = 'kernel'").fetchall()[0]


@pytest.mark.shared
def test_channels_last_fires_on_a_cnn_with_nchw_to_nhwc_conversions(store):
    # 0.5 % of GPU time: seen, under the 1 % floor (also_seen, never Fix first)
    rel = "kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
    assert "channels_last" not in _ids(store, rel)
    f = _also(store, rel)["channels_last"]
    assert "35 NCHW<->NHWC conversion kernels" in f["evidence"] and "nchwToNhwcKernel" in f["evidence"]
    conv_n, conv_ns = _gpu_kernels(store, "kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
                                   "count(*) filter (where category = 'conv'), sum(end_ns - start_ns) filter (where category = 'conv')")
    assert conv_n == 1470          # winograd/scudnn/cask offset kernels: none NHWC
    assert f"beside {conv_n:,} NCHW convolution kernels ({conv_ns / 1e6:,.2f} ms)" in f["evidence"]


@pytest.mark.shared
@pytest.mark.parametrize("rel", ["kineto/hta/trace_diff/test/test.json.gz",          # DLRM: fbgemm permutes
                                 "kineto/hta/trace_diff/control/control.json.gz",
                                 "nsys/llama3-inference/demo.sqlite"])               # LLM: no convolutions
def test_channels_last_never_without_convolutions(store, rel):
    assert "channels_last" not in _ids(store, rel)


@pytest.mark.shared
def test_channels_last_fires_beside_nhwc_convolutions_fed_by_conversions(store):
    """nccl_data (ResNet-style DDP, A100): cuDNN runs NHWC xmma/cutlass convolutions for an NCHW
    model and converts the tensors around them; the conversions are what channels_last removes.
    Expected numbers from the store's gpu_ops parquet with DuckDB (a second method)."""
    rel = "kineto/hta/nccl_parser_config/nccl_data.json.gz"
    f = _ids(store, rel)["channels_last"]
    conversion = "name ilike '%nchwtonhwc%' or name ilike '%nhwctonchw%'"
    n, ns, conv_n = _gpu_kernels(store, rel, f"count(*) filter (where {conversion}), "
                                 f"sum(end_ns - start_ns) filter (where {conversion}), count(*) filter (where category = 'conv')")
    assert (n, round(ns / 1e6, 2), conv_n) == (633, 15.12, 366)       # 474 nchwToNhwc + 159 nhwcToNchw
    assert f"{n:,} NCHW<->NHWC conversion kernels, {ns / 1e6:,.2f} ms" in f["evidence"]
    assert "nchwToNhwcKernel" in f["evidence"] and "×474 (12.62 ms)" in f["evidence"]
    assert f"they feed {conv_n:,} convolution kernels" in f["evidence"] and "NHWC kernels" in f["evidence"]
    assert f["gpu_ms"] == pytest.approx(ns / 1e6, abs=1e-3)


def _conv_trace(conv, conversions_us):
    """Synthetic: 10 convolutions of 500 µs, each followed by a cuDNN layout conversion of
    `conversions_us` µs (none when 0), in a 10 ms step."""
    t = Trace()
    t.step(1, 0, 10_000)
    for i in range(10):
        t.launch(conv, i * 1000, 10, i * 1000 + 20, 500)
        if conversions_us:
            t.launch("void cudnn::ops::nchwToNhwcKernel<float>", i * 1000 + 30, 10, i * 1000 + 600, conversions_us)
    return t


@pytest.mark.parametrize("conv, conversions_us, fires", [
    # NHWC convolutions (MIOpen-style *_nhwc_*) with conversions of 20 % of the conv time: an NCHW
    # model whose tensors are converted for NHWC kernels -> channels_last removes 1 ms
    ("naive_conv_fwd_nhwc_float_double_float", 100, True),
    ("naive_conv_fwd_nchw_float", 100, True),                  # NCHW convolutions and conversions
    ("naive_conv_fwd_nhwc_float_double_float", 0, False),      # already channels_last, no conversions
    # already channels_last, conversions of 4 % of the conv time (2 % of GPU time, above the floor):
    # negligible beside NHWC convolutions
    ("naive_conv_fwd_nhwc_float_double_float", 20, False),
    ("naive_conv_fwd_nchw_float", 20, True),                   # the same beside NCHW convolutions fires
])
def test_channels_last_nhwc_convolutions_rule_out_only_without_conversions(tmp_path, conv, conversions_us, fires):
    ingest([_conv_trace(conv, conversions_us).write(tmp_path / "t.json.gz")], store=tmp_path / "s", jobs=1)
    fs = {f.id: f for f in findings(open_scope(tmp_path / "s"))}
    assert ("channels_last" in fs) is fires
    if fires:
        f = fs["channels_last"]
        assert f.gpu_ms == pytest.approx(10 * conversions_us / 1000)
        assert f"10 NCHW<->NHWC conversion kernels, {10 * conversions_us / 1000:.2f} ms" in f.evidence
        nhwc = "nhwc" in conv
        assert ("they feed 10 convolution kernels (5.00 ms, 100 % of it in NHWC kernels)" in f.evidence) is nhwc
        assert ("beside 10 NCHW convolution kernels (5.00 ms)" in f.evidence) is not nhwc


def test_nothing_below_the_floor(tmp_path):
    """Synthetic: conversions of 0.5 % of GPU time and 0.005 ms/step are not advised; 5 % are."""
    for conv_us, fires in ((5, False), (50, True)):
        t = Trace()
        t.step(1, 0, 2000)
        t.launch("implicit_convolve_sgemm", 0, 10, 20, 1000)
        t.launch("void cudnn::ops::nchwToNhwcKernel<float>", 30, 10, 1100, conv_us)
        d = tmp_path / str(conv_us)
        ingest([t.write(d / "t.json.gz")], store=d / "s", jobs=1)
        assert ("channels_last" in {f.id for f in findings(open_scope(d / "s"))}) is fires


def test_findings_under_one_percent_are_also_seen(tmp_path):
    """Synthetic: conversions of 150 µs beside a 20 ms convolution are 0.74 % of GPU time
    (below 1 %), 0.15 ms per step. With steps or without, they are seen ("also seen"),
    never advised: a per-step figure in ms is no floor (a long step passes any)."""
    for stepped in (True, False):
        t = Trace()
        if stepped:
            t.step(1, 0, 30_000)
        t.launch("implicit_convolve_sgemm", 0, 10, 20, 20_000)
        t.launch("void cudnn::ops::nchwToNhwcKernel<float>", 30, 10, 20_100, 150)
        d = tmp_path / str(stepped)
        ingest([t.write(d / "t.json.gz")], store=d / "s", jobs=1)
        scope = open_scope(d / "s")
        ev = evidence_for(scope)
        assert ev.stepped is stepped and ev.steps == 1
        fs = findings(scope)
        assert "channels_last" not in {f.id for f in fs}
        (also,) = fs.also
        assert also.id == "channels_last" and also.gpu_ms == pytest.approx(0.15)


def test_texts_give_per_step_figures_only_when_the_trace_has_steps(tmp_path):
    """Synthetic: conversions of 1,500 µs beside a 20 ms convolution (7.0 % of GPU time) fire
    either way. With two ProfilerSteps the texts give 0.75 ms/step; without steps the "step"
    would be the whole trace, so they give the ms in all alone."""
    from traceq.advice import fix_first

    for stepped in (True, False):
        t = Trace()
        if stepped:
            t.step(1, 0, 15_000)
            t.step(2, 15_000, 15_000)
        t.launch("implicit_convolve_sgemm", 0, 10, 20, 20_000)
        t.launch("void cudnn::ops::nchwToNhwcKernel<float>", 30, 10, 20_100, 1_500)
        d = tmp_path / str(stepped)
        ingest([t.write(d / "t.json.gz")], store=d / "s", jobs=1)
        f = {f.id: f for f in findings(open_scope(d / "s"))}["channels_last"]
        assert f.gpu_ms == pytest.approx(1.5)
        if stepped:
            assert "1.50 ms (7.0 % of GPU time, 0.75 ms/step)" in f.evidence
            assert fix_first([f]).startswith("Fix first: channels_last (up to 0.75 ms/step, 1.50 ms in all)")
        else:
            assert "1.50 ms (7.0 % of GPU time):" in f.evidence and "ms/step" not in f.evidence
            assert fix_first([f]).startswith("Fix first: channels_last (up to 1.50 ms in all; the trace has no steps)")
        # the table's gain column says what its figure is: per step, or the whole trace's
        env = {"TRACEQ_WIDTH": "200", "COLUMNS": "200"}
        table = CliRunner().invoke(__import__("traceq.cli", fromlist=["app"]).app,
                                   ["diagnose", "--store", str(d / "s")], env=env).output
        assert ("gain (ms/step)" in table) is stepped
        assert ("gain (ms in all, no steps)" in table) is not stepped


def test_the_empty_findings_line_names_the_floor_that_applied(tmp_path):
    """Synthetic: one 20 ms kernel and nothing to advise. The line that says so names the
    floor, a share of GPU time (or of the span), with steps or without."""
    for stepped in (True, False):
        t = Trace()
        if stepped:
            t.step(1, 0, 30_000)
        t.launch("implicit_convolve_sgemm", 0, 10, 20, 20_000)
        d = tmp_path / str(stepped)
        ingest([t.write(d / "t.json.gz")], store=d / "s", jobs=1)
        out = CliRunner().invoke(__import__("traceq.cli", fromlist=["app"]).app,
                                 ["diagnose", "--store", str(d / "s")], env={"TRACEQ_WIDTH": "200"}).output
        assert ("no findings above the floor (1 % of GPU time, or of the step windows for idle and exposed "
                "communication time, and 10 µs)") in out
        assert "ms per step" not in out


# ---------------------------------------------------------------- the verdict
def _queued_gaps(store, rel, min_gap_ns=50_000):
    """Second method, straight from the store's parquet with DuckDB: GPU idle gaps >= 50 µs
    between the busy intervals (running max of op ends) of each device, and those whose ending
    op's launch call had returned by the gap's start. (count, total ns, GPU span ns)."""
    import duckdb

    part = lambda t: f"read_parquet('{store}/{t}/run={_run(rel)}/**/*.parquet', hive_partitioning = false)"
    return duckdb.sql(f"""
        WITH ops AS (
            SELECT device, pid, correlation, start_ns, end_ns,
                   max(end_ns) OVER (PARTITION BY device ORDER BY start_ns, end_ns
                                     ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS busy_until
            FROM {part('gpu_ops')} WHERE kind IN ('kernel', 'memcpy', 'memset')
        ), gaps AS (
            SELECT DISTINCT device, busy_until AS g0, start_ns AS g1 FROM ops WHERE start_ns - busy_until >= {min_gap_ns}
        ), queued AS (
            SELECT DISTINCT g.device, g.g0, g.g1 FROM gaps g
            JOIN ops o ON o.device = g.device AND o.start_ns = g.g1
            JOIN {part('host_ops')} h ON h.pid = o.pid AND h.correlation = o.correlation AND h.kind IN ('runtime', 'driver')
            WHERE h.end_ns <= g.g0
        )
        SELECT (SELECT count(*) FROM queued), (SELECT sum(g1 - g0) FROM queued),
               (SELECT sum(hi - lo) FROM (SELECT max(end_ns) AS hi, min(start_ns) AS lo FROM ops GROUP BY device))
    """).fetchall()[0]


@pytest.mark.shared
def test_verdict_trace_filter_queued_idle_is_not_the_hosts(store):
    """trace_filter rank 0: in 318 gaps (25.2 % of the GPU span) the next kernel was already
    queued (mean launch delay 16.6 ms: the host runs far ahead). Idle time after the next op's
    launch call returned is not the host's (HTA's host_wait needs the next op unlaunched): the
    time ledger labels it unattributed, host compute included; before that the host was late,
    computing (5.7 % of the step windows) or running what the trace does not record: host
    23.0 %, behind the exposed communication (27.4 % of the windows, plus 0.3 % of waits inside
    collectives): the bound is communication, as an expert reads this trace. The ledger's idle
    (55.5 %) is the sum of the idle bounds: host, unattributed (queued), waits in collectives
    (0.3) and launches (0.1)."""
    rel = "kineto/hta/trace_filter/sampled_rank-0.json.gz"
    n, ns, span = _queued_gaps(store, rel)
    assert (n, round(100 * ns / span, 1)) == (318, 25.2)
    row = diagnose(store, run=_run(rel)).row(0, named=True)
    assert (row["bound"], row["bound_share_pct"]) == ("communication", pytest.approx(27.7, abs=0.05))
    assert "exposed communication 27.4 %" in row["evidence"]
    assert "idle 55.5 % (unattributed 49.4 %, host_compute 5.7 %, communication_wait 0.3 %" in row["evidence"]
    assert "avoidable: communication 27.7 %, host 23.0 %" in row["evidence"]
    assert "mean launch delay 16615.7 µs" in row["evidence"]
    assert f"in {n} of the gaps (" in row["evidence"] and "of the step windows) the next GPU op was already launched" \
        in row["evidence"]
    unattributed = float(re.search(r"not on the host \(unattributed ([\d.]+) %\)", row["evidence"]).group(1))
    # at least the queued gaps' time (25.0 % of the step windows for the 318 gaps >= 50 µs), less
    # their comm/sync parts; more from the rest of the gaps after their next op's launch returned
    assert unattributed >= 24.5
    # the idle bounds add up to the ledger's idle: host + unattributed + waits in collectives + launch
    assert 23.0 + unattributed + 0.3 + 0.1 == pytest.approx(55.5, abs=0.15)
    # host compute only in gaps the host was late for: 7.3 % of the GPU span in the stall gaps
    host = {f["id"]: f for f in row["findings"]}["host_bound"]
    assert "GPU idle 89.09 ms (7.3 % of the GPU span" in host["evidence"]
    from traceq.analyses.diagnose import headline
    assert headline(row).startswith("run kineto_hta_trace_filter_sampled_rank_0_json_gz rank 0: "
                                    "communication-bound (27.7 %)")


@pytest.mark.shared
def test_verdict_host_bound_when_the_host_is_late(store):
    """nccl_data: no gap began with its next kernel queued (mean launch delay 32.8 µs): the host
    was late in the gaps, until each next kernel's launch call returned: the ledger's host
    compute (59.4 % of the step windows) and its unattributed time before those returns are
    host-bound, 70.6 % (the stall gaps >= 50 µs alone gave 57.9 + 10.4 % of the GPU span)."""
    rel = "kineto/hta/nccl_parser_config/nccl_data.json.gz"
    assert _queued_gaps(store, rel)[0] == 0
    row = diagnose(store, run=_run(rel)).row(0, named=True)
    assert (row["bound"], row["bound_share_pct"]) == ("host", pytest.approx(70.6, abs=0.05))
    assert "(host_compute 59.4 %, unattributed 12.1 %" in row["evidence"]
    assert "already" not in row["evidence"]


def _cut(events: list[dict], keep: int, path):
    """A Kineto JSON file of `events` cut in the middle of event `keep` (a killed writer):
    `keep` complete events survive."""
    text = json.dumps({"schemaVersion": 1, "traceEvents": events})
    ends = [m.end() for m in re.finditer(r"\}(?=, \{|\]\})", text)]
    path.write_text(text[:ends[keep] - 5])
    return path


def test_verdict_names_a_truncation_that_left_only_cpu_events(tmp_path):
    """Synthetic: 20 CPU ops, then GPU kernels; the file is cut inside event 11, so only 10 CPU
    ops survive. The CPU-only verdict says the file was truncated and the GPU events may be
    missing; the same events uncut are not called truncated."""
    t = Trace()
    for i in range(20):
        t.cpu_op("aten::linear", i * 100, 90)
    for i in range(20):
        t.launch("ampere_sgemm_128x64_nn", i * 100 + 90, 5, i * 100 + 100, 50)
    got = ingest([_cut(t.events, 10, tmp_path / "cut.json")], store=tmp_path / "s", run="cut", jobs=1)
    assert "no GPU activity in the events before the cut (its GPU events may be missing): GPU analyses will be " \
           "empty" in got[0].warnings   # not "CPU-only", which only the uncut trace could show
    row = diagnose(tmp_path / "s", run="cut").row(0, named=True)
    assert row["evidence"].startswith("no GPU ops in scope, but the trace file was truncated (file is truncated or "
                                      "malformed after 10 complete events): its GPU events may be missing")
    assert "CPU-only trace" not in row["evidence"]
    assert row["bound"] == "unknown"   # not host-bound: the GPU side of the run was cut away
    from traceq.analyses.diagnose import headline
    assert "bound unknown (the trace was cut before its GPU events)" in headline(row)
    # the other analyses' headlines say the same, not "CPU-only trace?"
    from traceq.analyses.registry import REGISTRY, compute

    cut = "the trace file was truncated (file is truncated or malformed after 10 complete events): its GPU events " \
          "may be missing"
    for name in ("summary", "hotspots"):
        line = compute(REGISTRY[name], tmp_path / "s", run="cut").headline.splitlines()[-1]
        assert cut in line and "CPU-only" not in line, (name, line)
    ingest([t.write(tmp_path / "whole.json.gz")], store=tmp_path / "s", run="whole", jobs=1)
    whole = diagnose(tmp_path / "s", run="whole").row(0, named=True)
    assert "truncated" not in whole["evidence"]
    assert whole["bound"] != "unknown"


@pytest.mark.shared
def test_verdict_names_the_truncation_of_a_real_trace(tmp_path):
    """nccl_data cut before its first GPU event (Kineto writes CPU ops first): the ingest keeps
    the complete CPU events and the verdict names the truncation instead of "CPU-only"."""
    import gzip

    src = SHARED_TRACES / "kineto/hta/nccl_parser_config/nccl_data.json.gz"
    if not src.exists():
        pytest.skip("nccl_data not available")
    events = json.loads(gzip.decompress(src.read_bytes()))["traceEvents"]
    first_gpu = next(i for i, e in enumerate(events) if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    keep = first_gpu - 100
    ingest([_cut(events, keep, tmp_path / "cut.json")], store=tmp_path / "s", run="cut", jobs=1)
    row = diagnose(tmp_path / "s", run="cut").row(0, named=True)
    assert f"the trace file was truncated (file is truncated or malformed after {keep} complete events)" in row["evidence"]
    assert "its GPU events may be missing" in row["evidence"]
    assert row["bound"] == "unknown"
    from traceq.analyses.diagnose import headline
    assert "CPU-only trace" not in headline(row)


# ---------------------------------------------------------------- zero_grad / fused optimizer / inference
@pytest.mark.shared
def test_zero_grad_fires_where_fills_come_from_zero_grad(store):
    f = _ids(store, "kineto/hta/df_index_resolver/df_index_resolver.json.gz")["zero_grad_set_to_none"]
    assert "2,020 memset/fill kernels launched inside zero_grad" in f["evidence"] and "FillFunctor" in f["evidence"]


@pytest.mark.shared
def test_zero_grad_not_where_zero_grad_launches_nothing(store):
    run = _run("kineto/hta/trace_diff/control/control.json.gz")
    ev = evidence_for(open_scope(store, run))
    assert ev.optimizer_host > 0 and ev.ops["in_zero_grad"].sum() == 0    # zero_grad regions, no GPU work
    assert "zero_grad_set_to_none" not in _ids(store, "kineto/hta/trace_diff/control/control.json.gz")


def test_launch_context_flags_by_construction(tmp_path):
    """advice_ops' in_zero_grad / in_optimizer on a synthetic trace (the interval index of
    intervals.sql): closed bounds, nesting, other threads and launches outside any context."""
    t = Trace()
    t.step(1, 0, 10_000)
    t.cpu_op("Optimizer.zero_grad#SGD.zero_grad", 0, 100)
    t.launch("fill_a", 0, 5, 200, 1)                      # starts at the context's start: inside
    t.launch("fill_b", 95, 5, 210, 1)                     # ends at the context's end: inside
    t.launch("fill_c", 96, 5, 220, 1)                     # ends after it: outside
    t.cpu_op("Optimizer.step#SGD.step", 1000, 1000)
    t.annotation("optimizer_zero_grad_inside_step", 1100, 100)
    t.launch("opt_nested", 1150, 5, 1300, 1)              # in both (nested zero_grad region)
    t.launch("opt_a", 1500, 5, 1400, 1)
    t.launch("opt_other_thread", 1500, 5, 1410, 1, tid=777)
    t.launch("outside", 3000, 5, 3100, 1)
    ingest([t.write(tmp_path / "t.json.gz")], store=tmp_path / "s", jobs=1)
    ops = evidence_for(open_scope(tmp_path / "s")).ops
    flags = {r["name"]: (r["in_zero_grad"], r["in_optimizer"]) for r in ops.iter_rows(named=True)}
    assert flags == {"fill_a": (True, False), "fill_b": (True, False), "fill_c": (False, False),
                     "opt_nested": (True, True), "opt_a": (False, True), "opt_other_thread": (False, False),
                     "outside": (False, False)}


@pytest.mark.shared
def test_fused_optimizer_fires_with_hundreds_of_optimizer_kernels_per_step(store):
    f = _ids(store, "kineto/hta/df_index_resolver/df_index_resolver.json.gz")["fused_optimizer"]
    assert "2,020 optimizer kernels (404 per step >= 100)" in f["evidence"]


@pytest.mark.shared
def test_fused_optimizer_not_with_a_foreach_optimizer(store):
    # ResNet with multi_tensor_apply (foreach) kernels: 148 kernels over 30 DataLoader iterations
    run = _run("kineto/param/resnet_kineto.json.gz")
    ev = evidence_for(open_scope(store, run))
    assert ev.steps == 30 and ev.optimizer_gpu == 148
    assert "fused_optimizer" not in _ids(store, "kineto/param/resnet_kineto.json.gz")


@pytest.mark.shared
def test_no_training_advice_on_inference(store):
    run = _run("nsys/llama3-inference/demo.sqlite")
    ev = evidence_for(open_scope(store, run))
    assert not ev.training and ev.training_words() == "no backward or optimizer (inference)"
    ids = _ids(store, "nsys/llama3-inference/demo.sqlite")
    assert not {"zero_grad_set_to_none", "fused_optimizer"} & set(ids)
    assert evidence_for(open_scope(store, _run("kineto/hta/df_index_resolver/df_index_resolver.json.gz"))).training


# ---------------------------------------------------------------- pinned memory
@pytest.mark.shared
def test_pinned_memory_fires_on_pageable_copies(store):
    f = _ids(store, "nsys/pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite")["pinned_memory"]
    assert "15 copies from/to pageable host memory" in f["evidence"]


@pytest.mark.shared
@pytest.mark.parametrize("rel", ["kineto/hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",   # Host -> Device
                                 "nsys/nvFuser/report1_matmul_h100.sqlite"])                            # Device -> Pinned
def test_pinned_memory_not_for_pinned_or_unknown_copies(store, rel):
    assert "pinned_memory" not in _ids(store, rel)


# ---------------------------------------------------------------- stall rules on real traces
@pytest.mark.shared
def test_stall_rules_on_real_traces(store):
    resnet = _ids(store, "kineto/param/resnet_kineto.json.gz")
    # 1.2 s of cudaFree with the GPU idle, in three calls of 157-788 ms inside the first
    # convolution: initialisation (cuDNN), not churn; all allocator calls sit in the first
    # 2.6 s of the 14 s capture. Start-up, 15.8 % of the span: seen, not advised first
    assert "allocator_churn" not in resnet
    warm = {f["id"]: f for f in diagnose(store, run=_run("kineto/param/resnet_kineto.json.gz")).row(0, named=True)
            ["also_seen"]}["warmup"]
    assert "cudaFree (slow: initialisation) ×3" in warm["evidence"]
    # MI250 toy: 0.04 ms of sync idle is 0.5 % of the 8.9 ms GPU span and 0.02 ms/step: below the
    # floor (it is 22 % of the 0.18 ms of GPU op time, the wrong base for idle time)
    assert "remove_syncs" not in _ids(store, "kineto/hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    # llama3 demo: 9 cudaMalloc and a single cudaFree at start-up are warm-up growth, not churn
    assert "allocator_churn" not in _ids(store, "nsys/llama3-inference/demo.sqlite")
    assert list(resnet)[0] == "dataloader"
    assert diagnose(store, run=_run("kineto/param/resnet_kineto.json.gz"))["bound"][0] == "data"
    cloverleaf = _ids(store, "nsys/pipit/perlmutter-cloverleaf-cuda.sqlite")
    assert "cudaDeviceSynchronize ×1,312" in cloverleaf["remove_syncs"]["evidence"]
    # an LLM-style host-bound trace is no longer "other": the host computes between launches
    nccl = diagnose(store, run=_run("kineto/hta/nccl_parser_config/nccl_data.json.gz")).row(0, named=True)
    assert nccl["bound"] == "host" and nccl["findings"][0]["id"] == "host_bound"


def test_the_gain_column_follows_the_steps_when_ranks_run_on_an_executor(tmp_path):
    """Synthetic, two ranks with two ProfilerSteps each and conversions of 1,500 µs (7 % of GPU
    time): with `--jobs 2` the ranks are diagnosed one per task and the CLI's connection holds
    no table data, so whether a rank has steps must come from the task's evidence: "gain
    (ms/step)" on both ranks, as without an executor."""
    t = Trace()
    t.step(1, 0, 15_000)
    t.step(2, 15_000, 15_000)
    t.launch("implicit_convolve_sgemm", 0, 10, 20, 20_000)
    t.launch("void cudnn::ops::nchwToNhwcKernel<float>", 30, 10, 20_100, 1_500)
    run = tmp_path / "run"
    for r in (0, 1):
        t.write(run / f"rank{r}.pt.trace.json.gz")
    ingest([run], store=tmp_path / "s", jobs=1)
    app = __import__("traceq.cli", fromlist=["app"]).app
    for extra in ([], ["--jobs", "2"]):
        out = CliRunner().invoke(app, ["diagnose", "--store", str(tmp_path / "s"), *extra],
                                 env={"TRACEQ_WIDTH": "200"}).output
        assert out.count("gain (ms/step)") == 2 and "no steps" not in out, extra
