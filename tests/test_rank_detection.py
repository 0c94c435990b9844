"""Rank from nsys 2024+ capture metadata and from Extra-Deep / `nsys -o name.mpi%q{SLURM_PROCID}`
file names (issue 8, defect 11). Nothing else of the environment is stored."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from traceq.ingest import default_run_name, ingest
from traceq.ingest.nsys import reader as nsys
from traceq.store import Store

from conftest import SAMPLES, shared_trace
from test_nsys_ingest import edited_copy

SAMPLE = SAMPLES / "nsys_sample.sqlite"
CAPTURE = "CREATE TABLE META_DATA_CAPTURE (name TEXT, value TEXT)"


def _capture(*env: str, process: int = 0) -> list[str]:
    rows = [("DEVICE_ID", "Local (CLI)"), (f"PROCESS_{process}:WORKING_DIR", "/home/secret/project"),
            (f"PROCESS_{process}:COMMAND_LINE", "python train.py --token=SECRET123")]
    rows += [(f"PROCESS_{process}:ENVIRONMENT_VARIABLE", e) for e in env]
    return [f"INSERT INTO META_DATA_CAPTURE VALUES ('{n}', '{v}')" for n, v in rows]


def _no_env(tmp_path):   # the sample's own DeviceEnvironment row says nothing about ranks
    return "DELETE FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'DeviceEnvironment'"


@pytest.mark.parametrize("env, rank", [
    (['SLURM_PROCID="6"', 'HOME="/home/x"', 'API_KEY="abc"'], 6),
    (['OMPI_COMM_WORLD_RANK="5"', 'RANK="7"'], 5),                 # trust order as for DeviceEnvironment
    (['PMI_RANK="2"', 'PMI_LOCAL_RANK="0"'], 2),
    (['RANK="11"', 'LOCAL_RANK="3"'], 11),
    (['LOCAL_RANK="3"'], 3),                                       # only when nothing else says
    (['MY_RANK="4"', 'RANKS="9"', 'XRANK="1"'], None),              # look-alikes are not rank variables
])
def test_rank_from_meta_data_capture(tmp_path, env, rank):
    path = edited_copy(SAMPLE, tmp_path, _no_env(tmp_path), CAPTURE, *_capture(*env), name="cap.sqlite")
    assert nsys.read(path).rank == rank


def test_capture_environment_is_never_stored(tmp_path):
    path = edited_copy(SAMPLE, tmp_path, _no_env(tmp_path), CAPTURE,
                       *_capture('SLURM_PROCID="6"', 'API_KEY="abc"', 'HOME="/home/secret"'), name="cap.sqlite")
    store = tmp_path / "s"
    assert ingest([path], store)[0].rank == 6
    blob = b"".join(p.read_bytes() for p in store.rglob("*.parquet"))
    for secret in (b"API_KEY", b"abc\"", b"/home/secret", b"SECRET123", b"SLURM_PROCID"):
        assert secret not in blob
    row = Store(store).manifest_rows()[0]
    assert "secret" not in json.dumps(row, default=str).lower()


def test_several_processes_with_different_ranks_are_ambiguous(tmp_path):
    path = edited_copy(SAMPLE, tmp_path, _no_env(tmp_path), CAPTURE, *_capture('RANK="0"', process=0),
                       *_capture('RANK="1"', process=1), name="two.sqlite")
    parsed = nsys.read(path)
    assert parsed.rank is None and "RANK = [0, 1]" in parsed.warnings[-1]


def test_real_2024_export_rank_from_capture():
    """perlmutter-cloverleaf: an nsys 2024 export whose only rank facts are PMI_RANK="0" and
    SLURM_PROCID="0" in META_DATA_CAPTURE (no MPI_RANKS, no DeviceEnvironment)."""
    path = shared_trace("nsys/pipit/perlmutter-cloverleaf-cuda.sqlite")
    assert nsys.read(path).rank == 0   # None (then the default 0) before META_DATA_CAPTURE was read


@pytest.mark.parametrize("name, run", [("prof.mpi3.sqlite", "prof"), ("resnet_rank12.pt.trace.json.gz", "resnet"),
                                       ("job-worker-2.json", "job"), ("mpi3.sqlite", "mpi3"), ("plain.sqlite", "plain")])
def test_default_run_name_drops_the_rank(tmp_path, name, run):
    assert default_run_name(tmp_path / name) == run


def test_extra_deep_file_names_set_the_rank_and_share_the_run(tmp_path):
    files = []
    for r in (0, 3):   # no rank in the file itself: the name says it
        f = tmp_path / f"lulesh.mpi{r}.sqlite"
        shutil.copyfile(edited_copy(SAMPLE, tmp_path, _no_env(tmp_path),
                                    f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = end + {r}", name=f"e{r}.sqlite"), f)
        files.append(f)
    res = ingest(files, tmp_path / "s")
    assert sorted((r.run, r.rank) for r in res) == [("lulesh", 0), ("lulesh", 3)]


def test_repetition_suffix_is_never_the_rank(tmp_path):
    """Issue 37 item 1: Extra-Deep's `r<N>` is the repetition (README, Experiments), `mpi<N>` /
    `rank<N>` the rank. A single file `x.p2.b32.r1.json.gz` is rank 0 (not 1) of run `x.p2.b32.r1`."""
    src = SAMPLES / "slow_dataloader" / "rank0.pt.trace.json.gz"   # Kineto, no distributedInfo rank
    f = tmp_path / "x.p2.b32.r1.json.gz"
    shutil.copyfile(src, f)
    assert default_run_name(f) == "x.p2.b32.r1"
    assert default_run_name(tmp_path / "r1.json") == "r1"          # a repetition, not a rank-only name
    res = ingest([f], tmp_path / "s")
    assert [(r.run, r.rank) for r in res] == [("x.p2.b32.r1", 0)]
    g = tmp_path / "x.p2.b32.r2.mpi3.json.gz"
    shutil.copyfile(src, g)
    assert [(r.run, r.rank) for r in ingest([g], tmp_path / "s2")] == [("x.p2.b32.r2", 3)]


def test_recursive_repetitions_are_runs_not_ranks(tmp_path):
    """`ingest DIR --recursive` over r1/r2/r3 of one configuration: three runs (rep 1, 2, 3) of
    rank 0 each, in both layouts (repetition in the file name, or files r<N> in a config folder)."""
    from traceq.experiments.metrics import run_labels

    src = SAMPLES / "slow_dataloader" / "rank0.pt.trace.json.gz"
    flat, nested = tmp_path / "flat", tmp_path / "nested" / "x.p2.b32"
    flat.mkdir()
    nested.mkdir(parents=True)
    for r in (1, 2, 3):
        shutil.copyfile(src, flat / f"x.p2.b32.r{r}.json.gz")
        shutil.copyfile(src, nested / f"r{r}.json.gz")
    for root, store in ((flat, tmp_path / "s1"), (nested.parent, tmp_path / "s2")):
        r = subprocess.run([sys.executable, "-m", "traceq", "ingest", str(root), "--recursive", "-q",
                            "--store", str(store)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        rows = Store(store).manifest_rows()
        assert sorted((m["run"], m["rank"]) for m in rows) == [(f"x.p2.b32.r{k}", 0) for k in (1, 2, 3)]
        labels = run_labels(store)
        assert {run: lab["rep"] for run, lab in labels.items()} == {f"x.p2.b32.r{k}": str(k) for k in (1, 2, 3)}
        assert all(lab["p"] == "2" and lab["b"] == "32" for lab in labels.values())
