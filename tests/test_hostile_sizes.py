"""Runs too large for one of the report's parts (issue 36 item 14): the report of a 12 M-op run
was killed at 23 GB in its critical-path section, whose graph holds every op in memory. The
report now leaves the path out above `REPORT_MAX_EVENTS` host and GPU ops and says so; the
measurements are in benchmarks/bench_memory.py. Here the cap is lowered to the sample's size."""
from __future__ import annotations

import html
import re

from conftest import SAMPLES
from traceq.analyses import critical_path
from traceq.ingest import ingest
from traceq.report import build_report


def test_the_report_leaves_the_critical_path_out_of_a_run_over_the_cap(tmp_path, monkeypatch):
    store = tmp_path / "s"
    ingest([SAMPLES / "gpu" / "train_small_sync"], store=store, jobs=1)
    from traceq.store import Store, fetch_pl

    con = Store(store).connect()
    ops = fetch_pl(con, "SELECT (SELECT count(*) FROM host_ops) + (SELECT count(*) FROM gpu_ops) AS n")["n"][0]
    monkeypatch.setattr(critical_path, "REPORT_MAX_EVENTS", ops - 1)
    out = tmp_path / "r.html"
    res = build_report(store, None, out)
    page = html.unescape(out.read_text(encoding="utf-8"))
    assert f"The critical path is not drawn for {ops:,} host and GPU ops: the report draws it up to {ops - 1:,}" in page
    assert 'id="critical-path-ops"' not in page and not re.search(r'data-table="critical-path-ops"', page)
    assert not [w for w in res.warnings if "critical" in w]
    monkeypatch.setattr(critical_path, "REPORT_MAX_EVENTS", ops)     # at the cap: drawn as before
    build_report(store, None, out)
    page = html.unescape(out.read_text(encoding="utf-8"))
    assert "The critical path is not drawn" not in page and "critical-path-ops" in page
