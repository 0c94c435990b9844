"""Tables with a row per step or gap grow with the trace: the terminal shows the first
TABLE_ROWS and says how many there are; JSON and CSV keep every row. The synthetic trace has
N_STEPS ProfilerSteps of 100 µs, one 10 µs kernel in each (so N_STEPS - 1 gaps of 90 µs
between kernels, above the 50 µs floor)."""
from __future__ import annotations

import csv
import io
import json

import pytest
from kineto_synth import Trace
from typer.testing import CliRunner

from traceq.cli import app
from traceq.ingest import ingest
from traceq.analyses.spec import TABLE_ROWS

N_STEPS = TABLE_ROWS + 37


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    t = Trace()
    for i in range(N_STEPS):
        t.step(i + 1, i * 100, 100)
        t.launch("k", i * 100 + 1, 2, i * 100 + 5, 10)
    d = tmp_path_factory.mktemp("long")
    ingest([t.write(d / "t.pt.trace.json.gz")], store=d / "s", jobs=1)
    return d / "s"


def _run(store, *argv):
    res = CliRunner().invoke(app, [*argv, "--store", str(store)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    return res.output


def _body_rows(text: str) -> list[str]:
    """Table rows whose first cell is a rank number (0)."""
    return [line for line in text.splitlines() if line.strip().startswith("0 ")]


@pytest.mark.parametrize("argv, rows, hint", [
    (["stalls", "--table", "steps"], N_STEPS, "--steps A:B picks steps"),
    (["stalls", "--table", "gaps"], N_STEPS - 1, "--min-gap-us N keeps the longer gaps"),
    (["overlap", "--by", "step"], N_STEPS, "--steps A:B picks steps"),
])
def test_the_terminal_shows_the_first_rows_and_says_how_many(store, argv, rows, hint):
    out = _run(store, *argv)
    assert len(_body_rows(out)) == TABLE_ROWS
    assert (f"(the first {TABLE_ROWS:,} of {rows:,} rows; --format csv or --format json gives all of them, "
            f"{hint})") in out
    doc = json.loads(_run(store, *argv, "-f", "json"))
    assert len(doc["rows"]) == rows
    got = list(csv.reader(io.StringIO(_run(store, *argv, "-f", "csv"))))
    assert got[0][:2] == ["run", "rank"] and len([r for r in got[1:] if r[:2] == ["t", "0"]]) == rows


def test_a_short_table_has_no_such_line(store):
    out = _run(store, "stalls", "--table", "steps", "--steps", "1:10")
    assert len(_body_rows(out)) == 10 and "the first" not in out


def test_ranks_instances_are_capped_on_the_terminal_only(tmp_path):
    """Two ranks with TABLE_ROWS + 5 AllReduce instances each: `ranks --instances` shows the
    first TABLE_ROWS matched instances and says how many there are; JSON has them all."""
    from test_ranks import MS, _allreduce, make_store

    n = TABLE_ROWS + 5
    for r in range(2):
        make_store(tmp_path / "s", "two", r, gpu_ops=[_allreduce(r, i * 30 * MS, i * 30 * MS + 20 * MS) for i in range(n)])
    out = _run(tmp_path / "s", "ranks", "--instances")
    assert f"(the first {TABLE_ROWS:,} of {n:,} rows; --format csv or --format json gives all of them)" in out
    assert len(json.loads(_run(tmp_path / "s", "ranks", "--instances", "-f", "json"))) == n
