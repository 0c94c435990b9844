"""The Python API page's examples (docs/python-api.md, moved there from the README), run in the
order a reader meets them, in a fresh folder after the README Quickstart's ingest (issue 37 item 7: `s.diff("slow_dataloader",
"fast_dataloader")` failed with "no run named 'fast_dataloader'" because the Quickstart never
ingests it)."""
from __future__ import annotations

import re
import shlex
import subprocess
import sys

from conftest import REPO, SAMPLES


def _quickstart_ingest() -> list[str]:
    """The `traceq ingest ...` of the Quickstart's first command, as its arguments."""
    text = (REPO / "README.md").read_text()
    quick = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    cmd = re.search(r"&& (traceq ingest [^&\n]+?) &&", quick).group(1)
    return shlex.split(cmd)[1:]


def _api_examples() -> list[str]:
    text = (REPO / "docs" / "python-api.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    mine = [b for b in blocks if "traceq.open_store" in b or "traceq.ingest(" in b]
    assert len(mine) == 2, "the Python API page's two examples"
    return mine


def test_readme_python_api_examples_run_after_the_quickstart(tmp_path):
    (tmp_path / "sample_traces").symlink_to(SAMPLES, target_is_directory=True)
    args = _quickstart_ingest()
    assert args[:3] == ["ingest", "sample_traces/nsys_sample.sqlite", "sample_traces/slow_dataloader"]
    r = subprocess.run([sys.executable, "-m", "traceq", *args], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    script = "\n".join(["import traceq"] + _api_examples() + [
        # what the examples leave behind, checked
        'assert d.headline and "regions" in d.tables and d.tables["regions"].height > 0, (d.headline, d.tables)',
        'assert sorted(s.runs()["run"].unique().to_list()) == '
        '["baseline", "fast_dataloader", "nsys_sample", "slow_dataloader"]',
        'print("ok", df.height)'])
    r = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.rstrip().endswith("ok 3")
    out = r.stdout   # what the first example prints, in order (formerly test_registry's check)
    assert out.startswith("Fix first: pinned_memory"), out[:300]
    assert "\nrun nsys_sample: GPU op time 2.10 ms" in out and "\nns\n" in out and "['causes']" in out
    assert (tmp_path / "report.html").stat().st_size > 0
