"""Run names are user data (issue 8, defect 1): stored and reported exactly, whatever they hold;
the folder a run's files live in is a reversible, collision-free encoding of the name."""
from __future__ import annotations

import json
from urllib.parse import unquote

import pytest
from typer.testing import CliRunner

from traceq.cli import app
from traceq.ingest import ingest
from traceq.store import Store, run_dir

from conftest import SAMPLES

NAMES = ["resnet 50 (amp)", "a b", "a_b", "x/y", "..", "../../etc", "it's \"quoted\"", "résumé ✓ 日本",
         "<script>alert(1)</script>", "run=2/rank=3", "%41", "A"]


def test_run_dir_is_reversible_and_collision_free():
    dirs = [run_dir(n) for n in NAMES]
    assert len(set(dirs)) == len(NAMES)
    for name, d in zip(NAMES, dirs):
        assert d.startswith("run=") and "/" not in d and d not in ("run=.", "run=..")
        assert unquote(d[len("run="):]) == name
    long = "x" * 400
    assert len(run_dir(long)) < 200 and run_dir(long) != run_dir(long + "y")


def test_every_name_round_trips_through_ingest_and_analysis(tmp_path):
    st = Store(tmp_path / "store")
    for name in NAMES:
        ingest([SAMPLES / "nsys_sample.sqlite"], st, run=name)
    con = st.connect()
    assert sorted(r[0] for r in con.execute("SELECT DISTINCT run FROM gpu_ops").fetchall()) == sorted(NAMES)
    # each run sees exactly its own 39 device ops (the sample holds 39), none of another's
    per_run = dict(con.execute("SELECT run, count(*) FROM gpu_ops GROUP BY run").fetchall())
    assert per_run == {n: 39 for n in NAMES}
    # no file escaped the store folder
    for f in (tmp_path / "store").rglob("*.parquet"):
        assert (tmp_path / "store") in f.resolve().parents
    assert not (tmp_path / "etc").exists()


def test_hotspots_of_a_run_with_spaces_and_parentheses(tmp_path):
    """The issue's case: `--run "resnet 50 (amp)"`, then hotspots shows its kernels."""
    store = str(tmp_path / "store")
    runner = CliRunner()
    r = runner.invoke(app, ["ingest", str(SAMPLES / "nsys_sample.sqlite"), "--store", store,
                            "--run", "resnet 50 (amp)", "-q"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["hotspots", "--store", store, "--run", "resnet 50 (amp)", "-f", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    rows = doc["rows"]
    assert doc["run"] == "resnet 50 (amp)" and rows[0]["run"] == "resnet 50 (amp)"
    assert rows and rows[0]["name"] == "[CUDA memcpy Host-to-Device]" and rows[0]["count"] == 6
    r = runner.invoke(app, ["runs", "--store", store, "-f", "json"])
    assert [x["run"] for x in json.loads(r.output)] == ["resnet 50 (amp)"]


@pytest.mark.parametrize("parent", ["k=v", "run=old"])
def test_store_under_a_key_value_folder_adds_no_columns(tmp_path, parent):
    """A store inside a folder named like a hive partition is read as it is."""
    st = Store(tmp_path / parent / "store")
    ingest([SAMPLES / "nsys_sample.sqlite"], st, run="r1")
    con = st.connect()
    cols = [c[0] for c in con.execute("DESCRIBE gpu_ops").fetchall()]
    assert "k" not in cols and con.execute("SELECT DISTINCT run FROM gpu_ops").fetchall() == [("r1",)]


def test_report_sections_of_runs_with_the_same_slug_have_distinct_anchors(tmp_path):
    import re as _re

    from traceq.report import build_report

    st = Store(tmp_path / "store")
    for name in ("a b", "a_b", "a-b"):
        ingest([SAMPLES / "nsys_sample.sqlite"], st, run=name)
    out = tmp_path / "r.html"
    build_report(st, ["a b", "a_b", "a-b"], out)
    html = out.read_text()
    ids = _re.findall(r'<section class="run" id="(run-[^"]+)"', html)   # one per run (not diff/compare)
    assert len(ids) == 3 and len(set(ids)) == 3
    for i in ids:
        assert f'href="#{i}"' in html
