"""The report of a run of many ranks (traceq/report/many_ranks.py): above MANY_RANKS ranks the
per-rank tables become quantiles and the worst ranks, the figures distributions and the chosen
ranks' own traces; at two ranks the page keeps a row and a trace per rank.

The quantiles are checked against the per-rank rows the analyses print themselves (`traceq
summary -f csv`, `traceq overlap -f csv`, `traceq ranks -f csv`), computed here with numpy's
percentile (linear interpolation); the straggler is the one make_many_ranks injected.
"""
from __future__ import annotations

import html
import io
import re
import sys

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from conftest import REPO, SAMPLES, shared_trace
from traceq.cli import app
from traceq.ingest import ingest
from traceq.report import build_report
from traceq.report.many_ranks import MANY_RANKS, WORST_RANKS, quantiles

sys.path.insert(0, str(REPO / "benchmarks"))
import make_many_ranks  # noqa: E402

N, STRAGGLER = 20, 7
STATS = ("min", "p10", "p25", "median", "p75", "p90", "max")


def rows_of(page: str, kind: str) -> list[list[tuple[str, str | None]]]:
    """The body rows of the first table of `kind`: per cell (shown text, data-v or None)."""
    m = re.search(r'<table class="data" id="[^"]+" data-table="' + re.escape(kind) + r'">(.*?)</table>', page, re.S)
    assert m, f"no table {kind}"
    head = [html.unescape(h) for h in re.findall(r"<th[^>]*>(.*?)</th>", m.group(1))]
    out = [head]
    for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", m.group(1).split("<tbody>", 1)[1], re.S):
        cells = re.findall(r'<td([^>]*)>(.*?)</td>', tr)
        out.append([(html.unescape(text), (re.search(r'data-v="([^"]*)"', attrs) or [None, None])[1])
                    for attrs, text in cells])
    return out


def kinds(page: str, what: str) -> list[str]:
    return re.findall(r'data-' + what + r'="([^"]*)"', page)


def csv_of(store, *args) -> pl.DataFrame:
    r = CliRunner().invoke(app, [*args, "--store", str(store), "-f", "csv"], env={"NO_COLOR": "1"})
    assert r.exit_code == 0, r.output
    return pl.read_csv(io.StringIO(r.stdout.split("\n\n")[0]))     # the first table (overlap: then across)


def check_quantiles(page: str, kind: str, ref: pl.DataFrame, columns: dict[str, str]) -> None:
    """Each quantile of `columns` (reference column -> header in the page) equals numpy's over
    the reference rows; the min and max rows name the rank where they are."""
    rows = rows_of(page, kind)
    head, body = rows[0], rows[1:]
    assert [r[0][0] for r in body] == list(STATS)
    for col, header in columns.items():
        j = head.index(header)
        v = ref[col].to_numpy().astype(float)
        want = [np.percentile(v, q) for q in (0, 10, 25, 50, 75, 90, 100)]
        got = [float(r[j][1]) for r in body]
        assert got == pytest.approx(want, rel=1e-9, abs=1e-9), col
        lo, hi = int(ref["rank"][int(np.argmin(v))]), int(ref["rank"][int(np.argmax(v))])
        assert body[0][j][0].endswith(f"(rank {lo})") and body[-1][j][0].endswith(f"(rank {hi})"), col


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    """A 20-rank NCCL run with rank 7 arriving 2 ms late at every collective, and its report."""
    shared_trace("kineto/hta/trace_filter/sampled_rank-0.json.gz")      # skips without the shared traces
    tmp = tmp_path_factory.mktemp("many")
    make_many_ranks.make(N, tmp / "trace", straggler=STRAGGLER, seq=True)
    store = tmp / "store"
    ingest([tmp / "trace"], store=store, run="many", jobs=1)
    res = build_report(store, ["many"], tmp / "report.html")
    return store, res, (tmp / "report.html").read_text(encoding="utf-8")


def test_quantiles_by_hand():
    df = pl.DataFrame({"rank": [3, 1, 4, 0, 2], "x_ns": [30, 10, 50, 20, 40]})
    q, at = quantiles(df)
    # sorted 10, 20, 30, 40, 50: p10 = 10 + 0.4 · 10 = 14; p25 = 20; median 30; p75 40; p90 46
    assert q["x_ns"].to_list() == pytest.approx([10, 14, 20, 30, 40, 46, 50])
    assert at["x_ns"] == ("rank 1", "rank 4")


def test_many_ranks_report_has_no_row_or_lane_per_rank(many):
    _, res, page = many
    assert N > MANY_RANKS and res.warnings == []
    tables = kinds(page, "table")
    for per_rank in ("ranks", "overlap-ranks", "ranks-table", "overview-gpu", "stall-steps"):
        assert per_rank not in tables
    for kind in ("ranks-quantiles", "ranks-worst", "summary-quantiles", "overlap-ranks-quantiles",
                 "ranks-table-quantiles", "ranks-table-worst", "stall-steps-quantiles", "overview-gpu-quantiles"):
        assert kind in tables
        if kind.endswith("-worst"):
            assert len(rows_of(page, kind)) - 1 == WORST_RANKS
    # every summarised table says how to get every rank
    assert page.count("Summarised: 20 ranks") >= 6
    assert "`traceq overlap -f csv`" in page and "`traceq ranks -f csv`" in page
    # the timeline draws rank 0, the straggler and the median rank, and says so
    lanes = re.search(r'data-chart="timeline"></div>\s*<script[^>]*>(.*?)</script>', page, re.S).group(1)
    drawn = {int(r) for r in re.findall(r'"rank (\d+) \\u00b7', lanes)}
    assert 0 in drawn and STRAGGLER in drawn and len(drawn) == 3
    assert f"rank {STRAGGLER} (the straggler)" in page
    assert res.bytes < 8_000_000


def test_many_ranks_quantiles_match_the_analyses_own_rows(many):
    store, _, page = many
    summary = csv_of(store, "summary", "--run", "many")
    assert summary.height == N
    check_quantiles(page, "summary-quantiles", summary, {"idle_pct": "idle (%)", "compute_pct": "compute (%)",
                                                          "span_ns": "span (ms)"})
    overlap = csv_of(store, "overlap", "--run", "many")
    check_quantiles(page, "overlap-ranks-quantiles", overlap, {"exposed_ns": "exposed (ms)",
                                                               "overlap_pct": "overlap (%)"})
    ranks = csv_of(store, "ranks", "--run", "many")
    check_quantiles(page, "ranks-table-quantiles", ranks, {"late_arrival_ms": "late_arrival_ms",
                                                           "wait_ms": "wait_ms"})


def test_many_ranks_worst_rank_is_the_straggler(many):
    store, _, page = many
    late = rows_of(page, "ranks-table-worst")
    assert late[1][0][0] == str(STRAGGLER)              # latest at the collectives
    ranks = csv_of(store, "ranks", "--run", "many").sort(["late_arrival_ms", "rank"], descending=[True, False])
    assert [int(r[0][0]) for r in late[1:]] == ranks["rank"].head(WORST_RANKS).to_list()
    # the others wait for it: the most exposed communication is never the straggler's
    exposed = rows_of(page, "overlap-ranks-worst")
    assert STRAGGLER not in [int(r[0][0]) for r in exposed[1:]]


def test_two_ranks_keep_a_row_and_a_trace_per_rank(tmp_path):
    store = tmp_path / "store"
    ingest([SAMPLES / "gpu" / "ddp_gloo_straggler"], store=store, run="ddp", jobs=1)
    res = build_report(store, ["ddp"], tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    tables = kinds(page, "table")
    assert not [t for t in tables if t.endswith(("-quantiles", "-worst"))]
    assert "Summarised:" not in page
    assert len(rows_of(page, "ranks")) - 1 == 2 and len(rows_of(page, "overlap-ranks")) - 1 == 2
    assert "ranks-table" in tables and "summary" in kinds(page, "chart")
    assert res.warnings == []
