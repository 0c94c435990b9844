"""Strings from a trace or a user are data: rich markup is printed literally, control
characters (ANSI escapes) never reach the terminal raw, in tables, headlines, notes and errors."""
from __future__ import annotations

import json

import pytest
from conftest import run_traceq

TRT = "{ForeignNode[/ConstantOfShape_3_output_0...Transpose_5]}"   # a TensorRT region name
EVIL = "evil\x1b[31mred\x1b[0m[bold]k[/bold]\x07"


traceq = run_traceq


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("esc")
    events = [
        {"ph": "X", "cat": "user_annotation", "name": TRT, "pid": 1, "tid": 1, "ts": 100, "dur": 50},
        {"ph": "X", "cat": "user_annotation", "name": "[red]region[/red]", "pid": 1, "tid": 1, "ts": 200, "dur": 10},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 110, "dur": 5,
         "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": EVIL, "pid": 0, "tid": 7, "ts": 120, "dur": 20,
         "args": {"correlation": 1, "device": 0, "stream": 7}},
    ]
    (d / "trt.json").write_text(json.dumps({"traceEvents": events}))
    r = traceq("ingest", "trt.json", "-q", cwd=d)
    assert r.returncode == 0, r.stderr
    return d


def test_tensorrt_region_name_prints_in_breakdown(work):
    r = traceq("breakdown", cwd=work)
    assert r.returncode == 0, r.stderr          # was: MarkupError (closing tag '[/ConstantOfShape...')
    assert TRT in r.stdout                      # headline and table, literally
    assert "[red]region[/red]" in r.stdout


def test_sql_prints_markup_literally():
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        r = traceq("ingest", __import__("conftest").SAMPLES / "nsys_sample.sqlite", "-q", cwd=d)
        assert r.returncode == 0, r.stderr
        r = traceq("sql", "SELECT '[red]hi[/red]' AS s, ':smile:' AS e", cwd=d)
        assert r.returncode == 0, r.stderr
        assert "[red]hi[/red]" in r.stdout and ":smile:" in r.stdout


def test_control_characters_are_shown_as_escapes(work):
    r = traceq("hotspots", cwd=work)
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout
    # the table shows the kernel's short label (its identity, cut at the first `[`), and the
    # headline names it the same way: both visibly escaped
    head, *rows = [ln for ln in r.stdout.splitlines() if not ln.startswith("Fix first:")]   # the findings' line first
    assert "top hotspot: evil\\x1b (100.0 %)" in head
    assert any(line.split()[:2] == ["evil\\x1b", "other"] for line in rows)
    # JSON keeps the real string (escaped by JSON itself)
    doc = json.loads(traceq("hotspots", "-f", "json", cwd=work).stdout)
    assert doc["rows"][0]["name"] == EVIL


def test_errors_and_warnings_neutralise_user_input(work):
    r = traceq("hotspots", "--run", "x\x1b[2Jy[red]", cwd=work)
    assert r.returncode == 2
    assert "\x1b" not in r.stderr and "x\\x1b[2Jy[red]" in r.stderr
    r = traceq("ingest", "trt.json", "--label", "a=\x1b]0;title\x07", "--run", "other", "-q", cwd=work)
    assert r.returncode == 0 and "\x1b" not in r.stderr


def test_render_clean_unit():
    from traceq.render import clean

    assert clean("a\x1b[1mb\tc\nd") == "a\\x1b[1mb\\x09c\\x0ad"
    assert clean("a\nb", newlines=True) == "a\nb"
    assert clean("[bold]x[/bold] {ForeignNode[/a]}") == "[bold]x[/bold] {ForeignNode[/a]}"
    assert clean("\x9b31m") == "\\x9b31m"      # C1 CSI
