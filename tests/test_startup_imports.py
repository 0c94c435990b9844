"""Start-up stays lean (issue 11): what `traceq` imports, checked in fresh processes.

Not a timing test (benchmarks/bench_startup.py times them): these pin the lazy imports that
the start-up budget rests on. `import traceq.cli` and `traceq --help` load no data library;
an analysis command loads DuckDB and polars but not pyarrow, numpy, pydantic (typer's option
coercion), plotly or jinja2, nor ingest's rule table or a process pool, and its JSON output
not rich; and the outputs of the
pyarrow-free path equal those of the pyarrow path (the Python API's).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import SAMPLES

HEAVY = ("duckdb", "polars", "pyarrow", "numpy", "pydantic", "plotly", "jinja2", "rich", "msgspec")

# Runs traceq's real entry point and writes the top-level modules loaded to the file named by
# argv[1] when the process ends (by os._exit, as the CLI does after an analysis, or by SystemExit).
SPY = """
import json, os, sys
out = sys.argv.pop(1)
sys.argv[0] = "traceq"
def dump():
    with open(out, "w") as fh:
        json.dump(sorted({m.split(".")[0] for m in sys.modules}), fh)
real_exit = os._exit
def spy_exit(code):
    dump()
    real_exit(code)
os._exit = spy_exit
try:
    from traceq.cli import main
    main()
except SystemExit as exc:
    dump()
    raise
dump()
"""


def loaded(tmp_path, *args, cwd=None) -> tuple[set[str], subprocess.CompletedProcess]:
    out = tmp_path / "modules.json"
    env = {k: v for k, v in os.environ.items() if k not in ("TRACEQ_STORE", "FORCE_COLOR")}
    env.update(NO_COLOR="1", TRACEQ_WIDTH="200")
    r = subprocess.run([sys.executable, "-c", SPY, str(out), *map(str, args)], cwd=cwd or tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    return set(json.loads(out.read_text())), r


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    work = tmp_path_factory.mktemp("startup")
    r = subprocess.run([sys.executable, "-m", "traceq", "ingest", str(SAMPLES / "nsys_sample.sqlite"),
                        str(SAMPLES / "slow_dataloader"), "--store", str(work / "s"), "-q"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return work / "s"


def test_import_cli_loads_no_data_library():
    code = ("import sys, traceq.cli; print(','.join(sorted({m.split('.')[0] for m in sys.modules})))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    mods = set(r.stdout.strip().split(","))
    assert "typer" in mods
    assert not mods & set(HEAVY), sorted(mods & set(HEAVY))


@pytest.mark.parametrize("args", [("--help",), ("hotspots", "--help"), ("--version",)])
def test_help_loads_no_data_library(tmp_path, args):
    mods, r = loaded(tmp_path, *args)
    assert r.returncode == 0, r.stderr
    assert not mods & set(HEAVY), sorted(mods & set(HEAVY))


@pytest.mark.parametrize("command", [
    ("hotspots", "--run", "nsys_sample"),
    ("summary", "--run", "nsys_sample"),
    ("stalls", "--run", "slow_dataloader"),
    ("diff", "nsys_sample", "slow_dataloader"),
    ("sql", "SELECT count(*) AS n FROM gpu_ops"),
    ("runs",),
])
def test_analysis_json_loads_duckdb_and_polars_only(tmp_path, store, command):
    mods, r = loaded(tmp_path, *command, "--store", store, "-f", "json")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""          # no leak report from DuckDB at exit, no warning
    json.loads(r.stdout)
    assert {"duckdb", "polars"} <= mods
    unwanted = {"pyarrow", "numpy", "pydantic", "plotly", "jinja2", "rich"}
    assert not mods & unwanted, sorted(mods & unwanted)


def test_table_output_adds_rich_only(tmp_path, store):
    mods, r = loaded(tmp_path, "hotspots", "--run", "nsys_sample", "--store", store)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert "rich" in mods
    assert not mods & {"pyarrow", "numpy", "pydantic", "plotly", "jinja2"}


@pytest.mark.parametrize("command", [
    ("hotspots", "--run", "nsys_sample"),
    ("summary", "--run", "nsys_sample"),
    ("stalls", "--run", "slow_dataloader"),
    ("diagnose", "--run", "nsys_sample"),
    ("diff", "nsys_sample", "slow_dataloader"),
])
def test_analysis_loads_no_ingest_or_process_pool_modules(tmp_path, store, command):
    """The kernel rule table (traceq.categories: tomllib, the identity parser) is ingest's, and
    the process pool (multiprocessing) is only for runs mapped over ranks: an analysis of a
    small run in this process loads neither."""
    mods, r = loaded(tmp_path, *command, "--store", store)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert not mods & {"tomllib", "multiprocessing"}, sorted(mods & {"tomllib", "multiprocessing"})


def test_hotspots_category_is_still_checked(tmp_path, store):
    _, r = loaded(tmp_path, "hotspots", "--store", store, "--category", "gemm,nonsense")
    assert r.returncode == 2 and "--category: unknown nonsense (choose from communication," in r.stderr


def test_bad_int_option_still_reads_as_typer_says(tmp_path, store):
    """Plain options skip pydantic; a malformed one goes to typer's own coercion and message."""
    mods, r = loaded(tmp_path, "hotspots", "--store", store, "--top", "many")
    assert r.returncode == 2
    assert "Invalid value for '--top' / '-n'" in r.stderr and "valid integer" in r.stderr
    _, r = loaded(tmp_path, "hotspots", "--store", store, "--run", "nsys_sample", "--top", " 1", "-f", "csv")
    assert r.returncode == 0 and len(r.stdout.strip().splitlines()) == 2   # header + 1 row


@pytest.mark.parametrize("command", [
    ("hotspots", "--run", "nsys_sample"),
    ("summary", "--run", "nsys_sample"),
    ("breakdown", "--run", "nsys_sample"),
    ("stalls", "--run", "slow_dataloader"),
    ("diff", "nsys_sample", "slow_dataloader"),
    ("overlap", "--run", "nsys_sample", "--by", "step"),
])
def test_arrow_streams_give_the_same_output_as_pyarrow(tmp_path, store, command):
    """The CLI's pyarrow-free exchange (store.ARROW_STREAMS, a real process) against the
    pyarrow one the Python API uses (in this process)."""
    from typer.testing import CliRunner

    from traceq.cli import app

    args = [*command, "--store", str(store), "-f", "json"]
    _, r = loaded(tmp_path, *args)
    assert r.returncode == 0, r.stderr
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert r.stdout == res.stdout
