"""A damaged manifest is one line and exit 2 everywhere (issue 51 item 2): a valid Parquet
`runs.parquet` with other columns (before: `hotspots` exited 0 with "run None: no GPU
kernels", `ingest`/`doctor`/`rm` failed with KeyError internal errors), and a manifest that is
a dangling or looping symlink (before: "no store"). Nothing in the store is changed."""
from __future__ import annotations

import os
import subprocess
import sys

import polars as pl
import pytest
from conftest import SAMPLES

COMMANDS = [("hotspots",), ("summary",), ("runs",), ("doctor",), ("rm", "slow"), ("sql", "SELECT 1"),
            ("ingest", str(SAMPLES / "slow_dataloader"))]


def run(store, *args):
    return subprocess.run([sys.executable, "-m", "traceq", *args, "--store", str(store)], capture_output=True,
                          text=True)


def check(r, what: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr and "internal error" not in r.stderr
    assert "store manifest is damaged" in lines[0] and what in lines[0]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: a[0])
def test_a_manifest_with_other_columns(tmp_path, args):
    store = tmp_path / "s"
    store.mkdir()
    pl.DataFrame({"x": [1], "y": ["a"]}).write_parquet(store / "runs.parquet")
    before = (store / "runs.parquet").read_bytes()
    check(run(store, *args), "no run, rank, files column")
    # (the lock and staging folder an ingest or rm takes are housekeeping, not store data)
    assert (store / "runs.parquet").read_bytes() == before
    assert sorted(p.name for p in store.iterdir() if not p.name.startswith(".")) == ["runs.parquet"]


@pytest.mark.parametrize("target", ["nothing", "runs.parquet"], ids=["dangling", "looping"])
def test_a_manifest_symlink_to_nothing(tmp_path, target):
    store = tmp_path / "s"
    store.mkdir()
    os.symlink(tmp_path / target if target == "nothing" else store / "runs.parquet", store / "runs.parquet")
    for args in (("runs",), ("hotspots",), ("ingest", str(SAMPLES / "slow_dataloader"))):
        check(run(store, *args), "symlink to nothing")
    assert (store / "runs.parquet").is_symlink() and not (tmp_path / "nothing").exists()
