"""Open a traceq HTML report in headless Chromium and check that it renders offline.

Used by tests/test_browser.py, and as a script to make the README screenshot:

    python tests/browser_check.py report.html --screenshot docs/report.png

What it checks (`check_report` returns the findings; the caller asserts):
- every request the page makes: only the report's own file:// URL is allowed; anything else
  (http, https, ws, another file) is aborted and listed in `blocked`;
- console errors and uncaught page errors (`console_errors`);
- every plot div (`div.plot[data-chart]`) was drawn by plotly (`.main-svg` inside) and holds
  at least one trace with data points (`charts`: kind -> points drawn, per chart);
- every table (`table[data-table]`) and its body row count (`tables`: kind -> rows).

Chromium comes from the Debian packages `chromium` and `chromium-driver` (never downloaded by
Playwright); it runs with a fresh user-data dir and the flags below.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

CHROMIUM_PATHS = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/lib/chromium/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def find_chromium() -> str | None:
    for p in CHROMIUM_PATHS:
        if Path(p).exists():
            return p
    return shutil.which("chromium") or shutil.which("chromium-browser")


def missing_requirements() -> str | None:
    """Why the browser check cannot run here (None when it can)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the Python package playwright is not installed (pip install playwright; no browser download needed)"
    if find_chromium() is None:
        return "no Chromium binary (apt-get install -y chromium chromium-driver)"
    return None


_INSPECT_JS = """() => {
  const charts = [];
  for (const div of document.querySelectorAll('div.plot[data-chart]')) {
    let points = 0, traces = 0;
    for (const t of (div._fullData || [])) {
      if (t.visible === false) continue;
      traces += 1;
      points += (t._length || 0);
    }
    charts.push({id: div.id, kind: div.dataset.chart, drawn: div.querySelectorAll('.main-svg').length > 0,
                 svg_traces: div.querySelectorAll('g.trace').length, traces, points,
                 width: div.getBoundingClientRect().width, height: div.getBoundingClientRect().height});
  }
  const tables = [];
  for (const t of document.querySelectorAll('table[data-table]')) {
    tables.push({id: t.id, kind: t.dataset.table, rows: t.tBodies[0] ? t.tBodies[0].rows.length : 0});
  }
  return {charts, tables,
          main_svgs: document.querySelectorAll('.js-plotly-plot .main-svg').length,
          rendered: Number(document.documentElement.getAttribute('data-plots-rendered')),
          sections: Array.from(document.querySelectorAll('[data-section]')).map(s => s.dataset.section),
          runs: Array.from(document.querySelectorAll('section.run[data-run]')).map(s => s.dataset.run)};
}"""


def _interact(page) -> dict:
    """Use the page as a reader would: hover the timeline, drag-zoom it, reset, sort a table.
    Errors these raise land in console_errors like any other."""
    out: dict = {}
    tl = page.locator('div.plot[data-chart="timeline"]').first
    if tl.count():
        tl.scroll_into_view_if_needed()
        box = tl.locator(".nsewdrag").first.bounding_box()
        x, y = box["x"] + box["width"] * 0.3, box["y"] + box["height"] * 0.5
        before = page.evaluate("() => document.querySelector('div.plot[data-chart=timeline]')._fullLayout.xaxis.range.slice()")
        page.mouse.move(x, y)
        page.wait_for_timeout(300)
        out["hover_labels"] = page.locator(".hoverlayer .hovertext").count()
        page.mouse.down()
        page.mouse.move(x + 150, y, steps=5)
        page.mouse.up()
        page.wait_for_timeout(300)
        after = page.evaluate("() => document.querySelector('div.plot[data-chart=timeline]')._fullLayout.xaxis.range.slice()")
        out["zoomed"] = after[1] - after[0] < before[1] - before[0]
        page.mouse.dblclick(x, y)
        page.wait_for_timeout(300)
    out["modebar_buttons"] = sorted(set(page.evaluate(
        "() => Array.from(document.querySelectorAll('.modebar-btn')).map(b => b.getAttribute('data-title'))")))
    th = page.locator("table.data th.num").first
    if th.count():
        th.click()
        out["sorted"] = th.get_attribute("data-sort")
    return out


def check_report(html: str | Path, screenshot: str | Path | None = None, *, timeout_s: float = 90,
                 viewport: tuple[int, int] = (1440, 1000), full_page: bool = False,
                 clip_height: int | None = None, interact: bool = False) -> dict:
    """Open `html`, wait until every figure is drawn, inspect the page; optionally screenshot it,
    then (`interact`) hover, zoom and sort as a reader would (`interaction` in the result)."""
    from playwright.sync_api import sync_playwright

    html = Path(html).resolve()
    url = html.as_uri()
    blocked: list[str] = []
    requests: list[str] = []
    seen: list[str] = []
    errors: list[str] = []
    user_data = tempfile.mkdtemp(prefix="traceq-chromium-")
    t0 = time.perf_counter()
    try:
        with sync_playwright() as p:
            ctx = p.chromium.launch_persistent_context(
                user_data, executable_path=find_chromium(), headless=True, args=CHROMIUM_ARGS,
                viewport={"width": viewport[0], "height": viewport[1]}, offline=True)
            try:
                def route(r):
                    requests.append(r.request.url)
                    if r.request.url == url:
                        r.continue_()
                    else:
                        blocked.append(r.request.url)
                        r.abort()

                ctx.route("**/*", route)
                page = ctx.new_page()
                # every request the page issues (routed or not), and websockets, which routes miss
                page.on("request", lambda r: seen.append(r.url))
                page.on("websocket", lambda ws: blocked.append(ws.url))
                page.on("console", lambda m: errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
                page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
                page.on("requestfailed", lambda r: None if r.url in blocked else errors.append(f"request failed: {r.url}"))
                page.goto(url, wait_until="load", timeout=timeout_s * 1000)
                # a selector, not wait_for_function: the report's CSP forbids the eval() that uses
                page.wait_for_selector("html[data-plots-rendered]", state="attached", timeout=timeout_s * 1000)
                render_s = time.perf_counter() - t0
                info = page.evaluate(_INSPECT_JS)
                if screenshot:
                    Path(screenshot).parent.mkdir(parents=True, exist_ok=True)
                    opts = {"path": str(screenshot), "full_page": full_page}
                    if clip_height and not full_page:
                        page.set_viewport_size({"width": viewport[0], "height": clip_height})
                        page.wait_for_timeout(400)   # let responsive plots re-layout
                    page.screenshot(**opts)
                if interact:
                    info["interaction"] = _interact(page)
            finally:
                ctx.close()
    finally:
        shutil.rmtree(user_data, ignore_errors=True)
    # a request that reached the page without passing the route is blocked too
    blocked += [u for u in seen if u != url and u not in blocked and not u.startswith(("data:", "blob:"))]
    info.update(blocked=blocked, requests=requests, console_errors=errors, render_s=round(render_s, 2),
                plot_divs=len(info["charts"]))
    return info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("html")
    ap.add_argument("--screenshot", help="PNG to write")
    ap.add_argument("--width", type=int, default=1440)
    ap.add_argument("--height", type=int, default=1000, help="viewport height (and screenshot height)")
    ap.add_argument("--full-page", action="store_true")
    args = ap.parse_args(argv)
    why = missing_requirements()
    if why:
        print(f"browser_check: cannot run: {why}", file=sys.stderr)
        return 2
    info = check_report(args.html, args.screenshot, viewport=(args.width, args.height), full_page=args.full_page)
    print(json.dumps({k: v for k, v in info.items() if k != "requests"}, indent=1))
    bad = info["blocked"] or info["console_errors"] or any(not c["drawn"] or not c["points"] for c in info["charts"]) \
        or any(not t["rows"] for t in info["tables"])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
