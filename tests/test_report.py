"""`traceq report` (DESIGN §5): one self-contained HTML file.

No browser here (tests/test_browser.py opens the pages in Chromium). These tests read the
HTML and check: plotly.js inlined exactly once and nothing referenced from the network;
the sections each analysis contributes; the figures' JSON; the timeline's down-sampling
rule on synthetic ops whose bars are derived by hand; run selection (default = most recent,
two runs = diff); that analyses missing or failing leave the rest of the report; that names
are escaped; and that nothing but what the store holds (file names, not paths; no
environment) reaches the page.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from conftest import SAMPLES, shared_trace
from traceq.cli import app
from traceq.ingest import ingest
from traceq.report import build_report
from traceq.report import timeline
from traceq.store import RankData, Store

SLOW = SAMPLES / "slow_dataloader"
FAST = SAMPLES / "fast_dataloader"


# ---------------------------------------------------------------- helpers
def make_store(path: Path, run: str = "syn", rank: int = 0, **tables: list[dict]) -> Store:
    st = Store(path)

    def table(rows):
        keys = list(dict.fromkeys(k for r in rows for k in r))
        return pa.Table.from_pylist([{k: r.get(k) for k in keys} for r in rows])

    data = RankData(run=run, rank=rank, tables={k: table(v) for k, v in tables.items() if v},
                    source_path=f"/home/someone/secret-project/{run}.json", source_sha256=f"{run}-{rank}",
                    source_format="kineto")
    st.commit([st.stage(data)])
    return st


def figures_of(html: str) -> dict[str, dict]:
    """chart kind -> figure JSON (the first of that kind)."""
    out = {}
    for m in re.finditer(r'<div class="plot" id="([^"]+)" data-fig="([^"]+)" data-chart="([^"]*)"></div>\s*'
                         r'<script type="application/json" id="\2">(.*?)</script>', html, re.S):
        out.setdefault(m.group(3), json.loads(m.group(4)))
    return out


def tables_of(html: str) -> dict[str, int]:
    """table kind -> number of body rows (the first table of that kind)."""
    out = {}
    for m in re.finditer(r'<table class="data" id="[^"]+" data-table="([^"]*)">(.*?)</table>', html, re.S):
        out.setdefault(m.group(1), m.group(2).split("<tbody>", 1)[1].count("<tr"))
    return out


def sections_of(html: str) -> list[str]:
    return re.findall(r'data-section="([^"]+)"', html)


@pytest.fixture(scope="module")
def sample_store(tmp_path_factory) -> Path:
    """The two CPU-only sample runs: slow_dataloader, then fast_dataloader (the most recent)."""
    store = tmp_path_factory.mktemp("samples") / "store"
    ingest([SLOW], store=store, jobs=1)
    ingest([FAST], store=store, jobs=1)
    return store


@pytest.fixture(scope="module")
def slow_html(sample_store, tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("report") / "slow.html"
    res = build_report(sample_store, ["slow_dataloader"], out)
    assert res.warnings == []
    return out.read_text(encoding="utf-8")


# ---------------------------------------------------------------- self-contained
def test_report_inlines_plotly_once_and_references_nothing_external(slow_html):
    from plotly.offline import get_plotlyjs

    js = get_plotlyjs()
    assert slow_html.count(js) == 1                                       # the whole bundle, once
    page = slow_html.replace(js, "")   # plotly.js itself holds URL strings (e.g. its logo link), never fetched
    assert not re.search(r"<script[^>]+src=", page)                       # no external scripts
    assert not re.search(r"<link\b", page)                                # no stylesheets/fonts/icons
    assert not re.search(r"https?://", page)                              # no URL anywhere else
    assert "@import" not in page
    # the Content-Security-Policy makes the browser refuse any fetch the page might still try
    assert "default-src 'none'" in slow_html and "connect-src" not in slow_html


def test_sample_report_has_the_cpu_only_sections(slow_html):
    secs = sections_of(slow_html)
    assert secs == ["fix", "timeline", "overview", "gpu", "steps", "hotspots", "roofline", "operators", "regions", "critical_path",
                    "stalls", "overlap"]
    # "Fix first" heads the run: the CPU-only sample has no GPU work, and the DataLoader finding
    fix = slow_html[slow_html.index('data-section="fix"'):slow_html.index('data-section="timeline"')]
    assert "no GPU work" in fix and "dataloader — up to" in fix and "num_workers=0" in fix
    figs = figures_of(slow_html)
    # CPU-only: no GPU category/summary/overlap charts; the overview's steps are CPU Exec and Other
    assert set(figs) == {"timeline", "overview", "regions", "critical-path", "critical-path-timeline", "stalls"}
    assert tables_of(slow_html) == {"ranks": 1, "operators": 30, "regions": 7, "critical-path-ops": 15, "stall-steps": 6}
    # headline cards: the sample's DataLoader waits ~100 ms of each ~125 ms step
    cards = dict(re.findall(r'<div class="label">([^<]+)</div><div class="value">([^<]+)</div>', slow_html))
    assert float(cards["data wait"].split()[0]) > 50
    assert cards["step time (mean)"].endswith(" ms")
    assert "num_workers" in slow_html                         # the stalls advice
    # timeline: host lanes (steps, DataLoader calls) of the CPU-only trace
    tl = figs["timeline"]
    assert tl["layout"]["yaxis"]["ticktext"] == ["rank 0 · step", "rank 0 · dataloader"]
    assert {t["name"] for t in tl["data"]} == {"step", "dataloader"}


def test_figures_are_valid_plotly_json_and_the_page_escapes_names(tmp_path):
    # a kernel name that would end the <script> element and one that looks like markup
    # (a layout conversion beside an NCHW convolution, so the channels_last rule fires on it)
    evil = "void nchwToNhwcKernel<float>(</script><script>alert(1)</script>)"
    store = make_store(tmp_path / "store", gpu_ops=[
        {"device": 0, "stream": 7, "kind": "kernel", "name": "cudnn::cnn::conv2d_grouped_direct_kernel", "category": "conv",
         "start_ns": 9_000_000, "end_ns": 9_500_000},
        {"device": 0, "stream": 7, "kind": "kernel", "name": evil, "category": "transpose",
         "start_ns": 0, "end_ns": 5_000_000},
        {"device": 0, "stream": 7, "kind": "kernel", "name": "<b>gemm</b>", "category": "gemm",
         "start_ns": 6_000_000, "end_ns": 9_000_000},
    ])
    out = tmp_path / "r.html"
    build_report(store, None, out)
    html = out.read_text()
    assert "<script>alert(1)" not in html and "<b>gemm</b>" not in html
    assert "&lt;b&gt;gemm&lt;/b&gt;" in html                  # in the hotspot table, as text
    figs = figures_of(html)                                   # every figure's JSON still parses
    assert {"timeline", "categories", "summary"} <= set(figs)
    tl_text = [t for tr in figs["timeline"]["data"] for t in tr["text"] if t]
    assert any("nchwToNhwcKernel&lt;float&gt;" in t for t in tl_text)       # plotly hover text is HTML-escaped too
    # the transpose is avoidable: highlighted row, advice listed
    assert 'class="avoidable"' in html and "channels_last" in html


# ---------------------------------------------------------------- timeline down-sampling
def test_timeline_keeps_long_ops_and_merges_short_ones_per_pixel_bucket(tmp_path):
    # span 0 .. 1_500_000 ns with 1500 buckets -> bucket w = 1000 ns.
    #  - one long kernel [0, 300_000): >= w, drawn exactly with its name
    #  - 1000 tiny kernels of 100 ns every 200 ns in [500_000, 700_000): < w; bucket-bars
    #    less than a bucket apart join -> ONE merged bar [500_000, 699_900) with n = 1000,
    #    busy = 100_000 ns
    #  - one tiny kernel at 1_499_900: alone -> its own merged bar (n = 1), drawn one bucket wide
    ops = [{"device": 0, "stream": 7, "kind": "kernel", "name": "long_gemm", "category": "gemm",
            "start_ns": 0, "end_ns": 300_000}]
    ops += [{"device": 0, "stream": 7, "kind": "kernel", "name": f"tiny{i % 3}", "category": "elementwise",
             "start_ns": 500_000 + 200 * i, "end_ns": 500_000 + 200 * i + 100} for i in range(1000)]
    ops += [{"device": 0, "stream": 7, "kind": "kernel", "name": "last", "category": "elementwise",
             "start_ns": 1_499_900, "end_ns": 1_500_000}]
    store = make_store(tmp_path / "store", gpu_ops=ops)
    from traceq.engine.scope import open_scope

    tl = timeline.segments(open_scope(store))
    seg = tl.segments.sort("start_ns")
    assert tl.buckets == timeline.TIMELINE_BUCKETS == 1500
    assert seg.select("exact", "name", "start_ns", "end_ns", "n", "busy_ns").rows() == [
        (True, "long_gemm", 0, 300_000, 1, 300_000),
        (False, None, 500_000, 699_900, 1000, 100_000),
        (False, None, 1_499_900, 1_500_000, 1, 100),
    ]
    assert seg["n"].sum() == tl.n_ops == len(ops)          # every op is in exactly one bar
    assert tl.lanes == ["rank 0 · gpu 0 · stream 7"]
    last = seg.row(2, named=True)
    assert last["x1_ms"] - last["x0_ms"] == pytest.approx(1000 / 1e6)   # drawn one bucket wide


def test_timeline_stays_within_the_segment_budget(tmp_path):
    # 4 streams x 3000 ops alternating 3 categories, gaps of 2 buckets: without a budget
    # ~12000 bars; with max_segments=2000 the buckets coarsen until it fits.
    ops = [{"device": 0, "stream": s, "kind": "kernel", "name": f"k{i % 3}", "category": ("gemm", "reduce", "other")[i % 3],
            "start_ns": i * 3000, "end_ns": i * 3000 + 500} for s in range(4) for i in range(3000)]
    store = make_store(tmp_path / "store", gpu_ops=ops)
    from traceq.engine.scope import open_scope

    scope = open_scope(store)
    full = timeline.segments(scope, buckets=3000, max_segments=100_000)
    capped = timeline.segments(scope, buckets=3000, max_segments=2000)
    assert full.segments.height > 2000
    assert capped.segments.height <= 2000 and capped.buckets < 3000
    assert capped.segments["n"].sum() == len(ops)


def test_per_step_charts_average_long_step_series_in_windows():
    from traceq.report import figures

    # 4 ranks x 1000 steps = 4000 bars > MAX_STEP_BARS (1200): windows of ceil(4000/1200) = 4
    # steps per rank -> 250 windows x 4 ranks = 1000 bars; window 0-3 of rank 0 has the mean
    # of its steps' data wait: (0 + 1 + 2 + 3) ms / 4 = 1.5 ms
    df = pl.DataFrame({"rank": [r for r in range(4) for _ in range(1000)],
                       "step": [s for _ in range(4) for s in range(1000)],
                       "step_ns": [10_000_000] * 4000,
                       "data_wait_ns": [(s % 4) * 1_000_000 for _ in range(4) for s in range(1000)]})
    fig = figures.stall_chart(df)
    wait = fig.data[0]
    assert len(wait.x[0]) == 1000 and list(wait.x[0][:4]) == ["0–3"] * 4 and list(wait.x[1][:4]) == ["r0", "r1", "r2", "r3"]
    assert wait.y[0] == pytest.approx(1.5)
    assert fig.layout.xaxis.title.text == "steps (mean of each window of 4), rank"
    # one rank, 1000 steps: under the limit, one bar per step
    one = figures.stall_chart(df.filter(pl.col("rank") == 0))
    assert len(one.data[0].x) == 1000 and one.layout.xaxis.type == "category"


# ---------------------------------------------------------------- runs, diff, CLI
def test_default_is_the_most_recent_run_and_two_runs_add_a_diff(sample_store, tmp_path):
    one = build_report(sample_store, None, tmp_path / "one.html")
    assert one.runs == ["fast_dataloader"]
    two = build_report(sample_store, ["slow_dataloader", "fast_dataloader"], tmp_path / "two.html", title="DataLoader fix")
    html = (tmp_path / "two.html").read_text()
    assert two.runs == ["slow_dataloader", "fast_dataloader"] and "diff" in two.sections
    assert "<title>DataLoader fix</title>" in html
    assert re.findall(r'<section class="run" id="[^"]+" data-run="([^"]+)"', html) == ["slow_dataloader", "fast_dataloader", "diff", "compare"]
    assert "What changed: slow_dataloader → fast_dataloader" in html
    assert tables_of(html)["diff-headline"] >= 1


def test_cli_writes_the_report_and_names_unknown_runs(sample_store, tmp_path):
    runner = CliRunner()
    out = tmp_path / "cli.html"
    r = runner.invoke(app, ["report", "slow_dataloader", "-o", str(out), "--store", str(sample_store), "--title", "t"])
    assert r.exit_code == 0, r.output
    assert out.exists() and f"{out}: report of slow_dataloader" in r.output
    r = runner.invoke(app, ["report", "nope", "-o", str(tmp_path / "x.html"), "--store", str(sample_store)])
    assert r.exit_code != 0 and not (tmp_path / "x.html").exists()
    assert "no run named 'nope'" in str(r.exception or r.output)


def test_report_help_lists_the_options():
    r = CliRunner().invoke(app, ["report", "--help"])
    assert r.exit_code == 0
    for opt in ("--output", "-o", "--title", "--store", "[RUN]..."):
        assert opt in r.output


# ---------------------------------------------------------------- robustness and privacy
def test_missing_analysis_module_omits_its_section(sample_store, tmp_path, monkeypatch):
    # an analysis is the module of traceq/analyses that declares it: without the module, the
    # registry has no such analysis
    from traceq.analyses import registry

    monkeypatch.setattr(registry, "REGISTRY", {k: v for k, v in registry.REGISTRY.items()
                                               if k not in ("stalls", "overlap")})
    res = build_report(sample_store, ["slow_dataloader"], tmp_path / "r.html")
    secs = sections_of((tmp_path / "r.html").read_text())
    assert "stalls" not in secs and "overlap" not in secs and "timeline" in secs and res.warnings == []


def test_a_failing_analysis_keeps_the_rest_of_the_report(sample_store, tmp_path, monkeypatch):
    from traceq.analyses import breakdown

    def boom(*a, **k):
        raise RuntimeError("synthetic failure")

    monkeypatch.setattr(breakdown, "breakdown_scoped", boom)
    res = build_report(sample_store, ["slow_dataloader"], tmp_path / "r.html")
    html = (tmp_path / "r.html").read_text()
    assert res.warnings == ["run slow_dataloader: breakdown failed: RuntimeError: synthetic failure"]
    assert '<div class="error">run slow_dataloader: breakdown failed' in html
    assert "stalls" in sections_of(html)


def test_report_shows_file_names_not_paths_and_no_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEQ_TEST_SECRET", "hunter2-do-not-leak")
    store = make_store(tmp_path / "store", run="private", gpu_ops=[
        {"device": 0, "stream": 7, "kind": "kernel", "name": "gemm", "category": "gemm", "start_ns": 0, "end_ns": 1000}])
    out = tmp_path / "r.html"
    build_report(store, None, out)
    html = out.read_text()
    assert "private.json" in html                       # the file name is shown ...
    assert "secret-project" not in html and "/home/someone" not in html   # ... its folder is not
    assert "hunter2" not in html and str(tmp_path) not in html


def test_unwritable_output_is_a_one_line_error(sample_store, tmp_path):
    from traceq.errors import TraceqError

    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(TraceqError, match="cannot write report"):
        build_report(sample_store, None, blocker / "r.html")


# ---------------------------------------------------------------- a real GPU trace pair
@pytest.mark.shared
def test_real_trace_pair_gives_every_section_and_the_diff(tmp_path):
    control = shared_trace("kineto/hta/trace_diff/control/control.json.gz")
    test = shared_trace("kineto/hta/trace_diff/test/test.json.gz")
    store = tmp_path / "store"
    ingest([control], store=store, jobs=1)
    ingest([test], store=store, jobs=1)
    out = tmp_path / "r.html"
    res = build_report(store, ["control", "test"], out)
    assert res.warnings == []
    html = out.read_text()
    assert res.bytes < 20e6
    figs = figures_of(html)
    assert {"timeline", "categories", "summary", "regions", "stalls", "overlap", "diff-categories"} <= set(figs)
    tabs = tables_of(html)
    assert tabs["hotspots"] == 40 and tabs["overlap-ranks"] == 1 and tabs["diff-kernels"] > 0
    # its "transposes" are fbgemm embedding permutes beside no convolution: no channels_last advice
    assert "channels_last" not in html and 'data-section="fix"' in html
    # the timeline: rank 3's three GPU streams + the host lanes; all 9,450 ops accounted for
    tl = figs["timeline"]
    assert tl["layout"]["yaxis"]["ticktext"][:2] == ["rank 3 · step", "rank 3 · dataloader"]
    assert len(tl["layout"]["yaxis"]["ticktext"]) == 6
    m = re.search(r"([\d,]+) ops and spans drawn as ([\d,]+) bars", html)
    assert int(m.group(1).replace(",", "")) == 9450 + 12            # GPU ops + 6 steps + 6 DataLoader calls
    assert int(m.group(2).replace(",", "")) <= timeline.MAX_SEGMENTS


def test_timeline_puts_ranks_on_the_common_clock(tmp_path):
    # Two ranks run the same 3 all-reduces (they end together), but rank 1's clock reads 2 ms
    # ahead while both raw offsets (baseTimeNanoseconds) say the same: ingest's clock fit
    # (runs.clock_refine_ns) moves rank 1 back by 2 ms, and the timeline draws both together.
    from traceq.engine.scope import open_scope
    from traceq.clocks import align_rows

    st = Store(tmp_path / "store")
    staged = []
    for rank, skew in ((0, 0), (1, 2_000_000)):
        ops = [{"device": 0, "stream": 7, "kind": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float",
                "category": "communication", "start_ns": 10_000_000 * i + skew + 100_000 * rank,
                "end_ns": 10_000_000 * i + skew + 1_000_000} for i in range(3)]
        cols = list(ops[0])
        staged.append(st.stage(RankData(run="two", rank=rank, tables={"gpu_ops": pa.Table.from_pylist(
            [{k: o[k] for k in cols} for o in ops])}, source_path=f"r{rank}.json", source_sha256=f"two-{rank}",
            source_format="kineto", clock_offset_ns=1_700_000_000_000_000_000)))
    st.commit(staged, align=align_rows)
    refine = dict(st.connect().execute("SELECT rank, clock_refine_ns FROM runs ORDER BY rank").fetchall())
    assert refine == {0: 0, 1: -2_000_000}
    seg = timeline.segments(open_scope(st, "two")).segments.sort("rank", "start_ns")
    ends = {r: seg.filter(pl.col("rank") == r)["x1_ms"].to_list() for r in (0, 1)}
    assert ends[0] == pytest.approx(ends[1])          # on the common clock the collectives end together
    assert ends[0][:2] == pytest.approx([1.0, 11.0])  # ms since the run's first event (rank 0's first start)
