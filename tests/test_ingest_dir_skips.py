"""A directory is the ranks of one run: a file in it that is not a trace (notes, a config file,
a list of metrics) is skipped with a one-line warning naming it, and the run holds exactly the
rows of its traces. A file named on its own that is not a trace still fails, and so does a
directory left without any trace."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from conftest import REPO, SAMPLES
from traceq.ingest import ingest
from traceq.store import Store, fetch_pl

TRACE = SAMPLES / "slow_dataloader" / "rank0.pt.trace.json.gz"


def traceq(*args) -> subprocess.CompletedProcess:
    env = dict(os.environ, TRACEQ_DEBUG="0")
    return subprocess.run([sys.executable, "-m", "traceq", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=300)


def with_strays(d: Path) -> Path:
    """`d` with the sample trace, notes.txt, a config.json that is no Chrome trace, a README
    and a JSON list of records that are no trace events."""
    d.mkdir(parents=True)
    shutil.copy(TRACE, d / TRACE.name)
    (d / "notes.txt").write_text("ran with batch 64\n")
    (d / "config.json").write_text(json.dumps({"lr": 0.1, "epochs": 3}))
    (d / "README.txt").write_text("Traces of the slow data loader run.\n")
    (d / "metrics.json").write_text(json.dumps([{"loss": 1.0}, {"loss": 0.5}]))
    return d


def rows(store: Path) -> dict[str, list]:
    con = Store(store).connect()
    return {t: fetch_pl(con, f"SELECT * EXCLUDE (run) FROM {t}").sort(pl.all()).to_dicts()
            for t in ("gpu_ops", "host_ops", "regions")}


def test_files_of_a_directory_that_are_not_traces_are_skipped_with_a_warning(tmp_path):
    d = with_strays(tmp_path / "run")
    results = ingest([d], tmp_path / "s")
    by_name = {Path(r.path).name: r for r in results}
    assert by_name[TRACE.name].status == "added"
    skipped = {n: r for n, r in by_name.items() if r.status == "skipped"}
    assert set(skipped) == {"notes.txt", "config.json", "README.txt", "metrics.json"}
    for r in skipped.values():
        assert len(r.warnings) == 1 and r.warnings[0].startswith("skipped: not a trace"), r.warnings
        assert r.rank is None and r.counts == {}
    assert "'lr', 'epochs'" in skipped["config.json"].warnings[0]

    ingest([TRACE], tmp_path / "alone", run="run")
    assert rows(tmp_path / "s") == rows(tmp_path / "alone")
    con = Store(tmp_path / "s").connect()
    assert fetch_pl(con, "SELECT DISTINCT run FROM host_ops")["run"].to_list() == ["run"]


def test_the_command_line_warns_once_per_skipped_file_and_lists_only_the_traces(tmp_path):
    d = with_strays(tmp_path / "run")
    r = traceq("ingest", d, "--store", tmp_path / "s", "-f", "json")
    assert r.returncode == 0, r.stderr
    warnings = [line for line in r.stderr.splitlines() if ": skipped: " in line]
    assert sorted(Path(line.split(": ")[2]).name for line in warnings) == \
        ["README.txt", "config.json", "metrics.json", "notes.txt"]
    assert all(line.startswith("traceq: warning: ") and ": skipped: not a trace" in line for line in warnings)
    out = json.loads(r.stdout)
    assert [Path(row["file"]).name for row in out] == [TRACE.name]


def test_a_file_named_alone_that_is_not_a_trace_still_fails(tmp_path):
    d = with_strays(tmp_path / "run")
    for name in ("notes.txt", "config.json"):
        r = traceq("ingest", d / name, "--store", tmp_path / "s")
        assert r.returncode == 2
        assert r.stderr.count("\n") == 1 and "not a trace" in r.stderr and name in r.stderr
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("strays", [("notes.txt",), ("notes.txt", "config.json")])
def test_a_directory_without_any_trace_still_fails(tmp_path, strays):
    d = with_strays(tmp_path / "src")
    only = tmp_path / "only"
    only.mkdir()
    for name in strays:
        shutil.copy(d / name, only / name)
    r = traceq("ingest", only, "--store", tmp_path / "s")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "directory holds no trace" in r.stderr, r.stderr
    assert not (tmp_path / "s").exists()


def test_a_damaged_trace_in_a_directory_still_fails(tmp_path):
    """Only files that are not traces are skipped: a trace whose events are unusable is an error."""
    d = with_strays(tmp_path / "run")
    (d / "rank1.json").write_text(json.dumps({"traceEvents": {"not": "a list"}}))
    r = traceq("ingest", d, "--store", tmp_path / "s")
    assert r.returncode == 2
    assert "rank1.json" in r.stderr and "not a Chrome trace" in r.stderr
    assert not (tmp_path / "s").exists()
