"""The timer page's hand-written timer-log example (docs/timer.md, moved there from the README)
ingests, and gives the numbers the page states."""
from __future__ import annotations

from conftest import REPO

import traceq


def readme_example() -> str:
    text = (REPO / "docs" / "timer.md").read_text()
    block = text.split("<!-- timer-log-example -->", 1)[1]
    return block.split("```json\n", 1)[1].split("```", 1)[0]


def test_readme_timer_log_example_ingests_as_documented(tmp_path):
    log = tmp_path / "run.jsonl"
    log.write_text(readme_example())
    [res] = traceq.ingest([str(log)], tmp_path / "store")
    assert (res.run, res.format, res.counts["regions"]) == ("run", "timer_log", 5)
    s = traceq.open_store(tmp_path / "store")
    regions = s.sql("SELECT name, start_ns, end_ns, gpu_dur_ns FROM regions ORDER BY start_ns, end_ns DESC")
    # anchor: t - perf_ns + epoch_ns = t - 5,000,000 + 1.7e18
    first = regions.row(0, named=True)
    assert first == {"name": "BATCH", "start_ns": 1_700_000_000_001_000_000, "end_ns": 1_700_000_000_011_000_000,
                     "gpu_dur_ns": 7_000_000}
    timer = s.breakdown(by="timer")
    batch = timer.filter(timer["key"] == "BATCH").row(0, named=True)
    assert (batch["count"], batch["cpu_total_ns"], batch["gpu_count"], batch["gpu_total_ns"]) == (2, 18_000_000, 1, 7_000_000)
    st = s.stalls()
    assert st["data_wait_pct"].to_list() == [25.0, 12.5]
    assert st["step_ns"].to_list() == [10_000_000, 8_000_000]
