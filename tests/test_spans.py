"""`ingest --input-format spans`: span logs (CSV, JSON array, JSONL) read through a column
mapping into timer regions. Expected regions are derived by hand in each test's comment."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from traceq.cli import app
from traceq.errors import TraceqError
from traceq.ingest import ingest
from traceq.ingest.timers.spans import read_spans
from traceq.store import Store

CSV = """phase,t0,t1
request,0.0,1.0
prefill,0.1,0.4
decode,0.4,0.9
request,1.0,1.5
prefill,1.0,1.2
decode,1.2,1.5
"""
# by hand: two requests of 1 s and 0.5 s, each holding a prefill and a decode (depth 1);
# totals: request 1500 ms, decode 0.5 + 0.3 = 800 ms, prefill 0.3 + 0.2 = 500 ms


def cli(*args) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent), "COLUMNS": "100"}
    return subprocess.run([sys.executable, "-m", "traceq", *args], capture_output=True, text=True, env=env)


def regions(path, spec):
    t = read_spans(path, spec).tables["regions"]
    return [(r["name"], r["start_ns"], r["end_ns"], r["depth"]) for r in t.to_pylist()]


def test_csv_with_start_and_end_in_seconds_nests_like_the_timer_log(tmp_path):
    p = tmp_path / "run.csv"
    p.write_text(CSV)
    assert regions(p, "name=phase,start=t0,end=t1,unit=s") == [
        ("request", 0, 1_000_000_000, 0), ("prefill", 100_000_000, 400_000_000, 1),
        ("decode", 400_000_000, 900_000_000, 1), ("request", 1_000_000_000, 1_500_000_000, 0),
        ("prefill", 1_000_000_000, 1_200_000_000, 1), ("decode", 1_200_000_000, 1_500_000_000, 1)]


def test_json_array_with_durations_lays_spans_end_to_end(tmp_path):
    # step,phase,seconds: load 0.5 s then compute 1.5 s -> [0, 0.5 s), [0.5 s, 2 s)
    p = tmp_path / "steps.json"
    p.write_text(json.dumps([{"step": 1, "phase": "load", "seconds": 0.5},
                             {"step": 1, "phase": "compute", "seconds": 1.5}]))
    assert regions(p, "name=phase,dur=seconds") == [("load", 0, 500_000_000, 0),
                                                     ("compute", 500_000_000, 2_000_000_000, 0)]


def test_jsonl_in_ms_with_a_thread_column(tmp_path):
    # two threads: a [0, 10 ms) on tid 1 and b [2, 4 ms) on tid 2 do not nest (depth 0 both)
    p = tmp_path / "spans.jsonl"
    p.write_text('{"n": "a", "s": 0, "d": 10, "t": 1}\n{"n": "b", "s": 2, "d": 2, "t": 2}\n')
    t = read_spans(p, "name=n,start=s,dur=d,unit=ms,tid=t").tables["regions"].to_pylist()
    assert [(r["name"], r["tid"], r["start_ns"], r["end_ns"], r["depth"]) for r in t] == [
        ("a", 1, 0, 10_000_000, 0), ("b", 2, 2_000_000, 4_000_000, 0)]


def test_invalid_utf8_is_replaced_with_a_warning(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_bytes(b"name,start,end\nok\xff,0,1\n")
    parsed = read_spans(p, "name=name,start=start,end=end")
    assert parsed.tables["regions"].column("name").to_pylist() == ["ok\ufffd"]
    assert parsed.warnings == ["replaced 1 invalid UTF-8 sequence(s) by U+FFFD"]


@pytest.mark.parametrize("spec, message", [
    ("name=phase,start=t0,end=tX", "run.csv: row 1: no column 'tX' (--map end=tX; columns: phase, t0, t1)"),
    ("name=label,start=t0,end=t1", "run.csv: no column 'label' (--map name=label; columns: phase, t0, t1)"),
    ("name=phase,start=t0", "--map: give exactly one of end=COLUMN or dur=COLUMN"),
    ("name=phase,start=t0,end=t1,unit=h", "--map: unit 'h': choose s, ms, us or ns"),
    ("name=phase,begin=t0,end=t1", "--map: unknown key 'begin'"),
    (None, "--input-format spans needs --map"),
])
def test_bad_mapping_is_one_line_naming_the_file_and_column(tmp_path, spec, message):
    p = tmp_path / "run.csv"
    p.write_text(CSV)
    args = ["ingest", str(p), "--input-format", "spans", "--store", str(tmp_path / "st")]
    res = cli(*args, *(["--map", spec] if spec else []))
    assert res.returncode != 0
    out = res.stderr.strip()
    assert message in out and "\n" not in out and "Traceback" not in out


def test_not_a_number_names_the_row_and_column(tmp_path):
    p = tmp_path / "run.csv"
    p.write_text("phase,t0,t1\nx,0,1\ny,0.5,soon\n")
    res = cli("ingest", str(p), "-i", "spans", "--map", "name=phase,start=t0,end=t1", "--store", str(tmp_path / "st"))
    assert res.returncode != 0 and "row 2: column 't1' (end) is not a number: 'soon'" in res.stderr


def test_breakdown_by_timer_on_an_ingested_span_log(tmp_path):
    p = tmp_path / "run.csv"
    p.write_text(CSV)
    st = tmp_path / "st"
    (r,) = ingest([p], store=st, fmt="spans", spans_map="name=phase,start=t0,end=t1,unit=s")
    assert (r.format, r.counts["regions"]) == ("spans", 6)
    res = CliRunner().invoke(app, ["breakdown", "--by", "timer", "--run", "run", "--store", str(st),
                                   "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = {row["key"]: row for row in json.loads(res.output)["rows"]}
    # totals by hand (see CSV): request 1.5 s, decode 0.8 s, prefill 0.5 s; two of each
    assert {k: (v["count"], round(v["cpu_total_ns"])) for k, v in rows.items()} == {
        "request": (2, 1_500_000_000), "decode": (2, 800_000_000), "prefill": (2, 500_000_000)}
    assert Store(st).exists()


def test_the_same_log_through_another_mapping_is_not_called_unchanged(tmp_path):
    # the mapping is part of the file's identity: the same mapping again is unchanged, another
    # one is refused without --force (as a changed file would be) and replaces with it
    p = tmp_path / "run.csv"
    p.write_text("phase,t0,secs\na,5,1\nb,5,2\n")
    st = tmp_path / "st"
    (r1,) = ingest([p], store=st, fmt="spans", spans_map="name=phase,dur=secs")
    (r2,) = ingest([p], store=st, fmt="spans", spans_map="name=phase,dur=secs")
    assert (r1.status, r2.status) == ("added", "unchanged")
    with pytest.raises(TraceqError, match="--graph-capture traces or --map"):
        ingest([p], store=st, fmt="spans", spans_map="name=phase,start=t0,dur=secs")
    (r3,) = ingest([p], store=st, fmt="spans", spans_map="name=phase,start=t0,dur=secs", force=True)
    assert r3.status == "replaced"
    # a and b both start at 5 s now: [5, 6) and [5, 7) -> b opens first (longest first), a nests
    con = Store(st).connect()
    assert con.execute("SELECT name, start_ns, end_ns, depth FROM regions ORDER BY depth").fetchall() == [
        ("b", 5_000_000_000, 7_000_000_000, 0), ("a", 5_000_000_000, 6_000_000_000, 1)]
