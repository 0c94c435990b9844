"""The HTML report in a real browser (DESIGN §5: "It must open and render in a real browser
with no console errors").

Headless Chromium (Debian packages chromium + chromium-driver) driven by Playwright's Python
package, never a downloaded browser. Each test opens a report from file://, blocks and records
every other request, waits until plotly has drawn every figure, and checks that each expected
chart holds data points and each expected table has rows, that no request left the page and
that nothing was logged as an error. A screenshot goes to the test's tmp dir.

Skipped (with the reason) when Chromium or playwright is missing; the real-trace test also
when ../shared/traces is absent.
"""
from __future__ import annotations

import pytest

from browser_check import check_report, missing_requirements
from conftest import SAMPLES, shared_trace
from traceq.ingest import ingest
from traceq.report import build_report

pytestmark = [pytest.mark.browser, pytest.mark.slow]

_why = missing_requirements()
if _why:
    pytestmark.append(pytest.mark.skip(reason=f"browser test needs headless Chromium: {_why}"))


def assert_renders(info: dict, charts: set[str], tables: set[str]) -> None:
    assert info["blocked"] == [], f"the page tried to fetch: {info['blocked']}"
    assert all(u.startswith("file://") for u in info["requests"]) and len(info["requests"]) == 1
    assert info["console_errors"] == []
    # every plot div was drawn by plotly (it adds .main-svg layers), none left out
    assert info["rendered"] == info["plot_divs"] > 0
    assert info["main_svgs"] >= info["plot_divs"]
    drawn = {c["kind"] for c in info["charts"]}
    assert charts <= drawn, f"missing charts: {charts - drawn}"
    for c in info["charts"]:
        assert c["drawn"] and c["traces"] > 0 and c["points"] > 0 and c["svg_traces"] > 0, c
        assert c["width"] > 300 and c["height"] >= 200, c
    shown = {t["kind"] for t in info["tables"]}
    assert tables <= shown, f"missing tables: {tables - shown}"
    for t in info["tables"]:
        assert t["rows"] > 0, t


def test_sample_run_report_renders_offline_without_errors(tmp_path):
    store = tmp_path / "store"
    ingest([SAMPLES / "slow_dataloader"], store=store, jobs=1)
    res = build_report(store, None, tmp_path / "report.html")
    assert res.warnings == []
    shot = tmp_path / "report.png"
    info = check_report(res.path, shot, full_page=True)
    assert_renders(info, charts={"timeline", "regions", "stalls"}, tables={"ranks", "regions", "stall-steps"})
    assert info["runs"] == ["slow_dataloader"]
    assert shot.stat().st_size > 10_000


@pytest.mark.shared
def test_real_gpu_trace_pair_report_renders_offline_without_errors(tmp_path):
    store = tmp_path / "store"
    ingest([shared_trace("kineto/hta/trace_diff/control/control.json.gz")], store=store, jobs=1)
    ingest([shared_trace("kineto/hta/trace_diff/test/test.json.gz")], store=store, jobs=1)
    res = build_report(store, ["control", "test"], tmp_path / "report.html")
    assert res.warnings == []
    shot = tmp_path / "report.png"
    info = check_report(res.path, shot, full_page=True, interact=True)
    per_run = {"timeline", "categories", "summary", "regions", "stalls", "overlap"}
    assert_renders(info, charts=per_run | {"diff-categories"},
                   tables={"ranks", "hotspots", "regions", "stall-steps", "stall-causes", "overlap-ranks",
                           "diff-headline", "diff-categories", "diff-kernels", "diff-regions"})
    assert info["runs"] == ["control", "test", "diff", "compare"]   # the comparison section: two or more runs
    # every per-run chart appears once per run
    kinds = [c["kind"] for c in info["charts"]]
    assert all(kinds.count(k) == 2 for k in per_run)
    assert shot.stat().st_size > 10_000
    # hovering the timeline shows a label, a drag zooms it, a header click sorts — all without
    # errors (checked above: console_errors is read after the interaction) or requests
    act = info["interaction"]
    assert act["hover_labels"] >= 1 and act["zoomed"] and act["sorted"] in ("asc", "desc")
    # no button that sends the chart anywhere (plotly.js 4 has a "Share chart" one by default)
    assert not [b for b in act["modebar_buttons"] if "share" in b.lower() or "cloud" in b.lower() or "edit" in b.lower()]


def test_the_check_catches_network_requests_and_console_errors(tmp_path):
    # the harness itself: a page that fetches from the network and logs an error must fail it
    page = tmp_path / "bad.html"
    page.write_text('<!doctype html><html><body><img src="https://example.com/x.png">'
                    '<script>fetch("http://example.org/data.json").catch(function () {});'
                    'console.error("boom");'
                    'document.documentElement.setAttribute("data-plots-rendered", "0");</script></body></html>')
    info = check_report(page, timeout_s=30)
    assert sorted(info["blocked"]) == ["http://example.org/data.json", "https://example.com/x.png"]
    assert "console.error: boom" in info["console_errors"]
