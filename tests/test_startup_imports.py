"""Start-up stays lean (issue 11): what `traceq` imports, checked in fresh processes.

Not a timing test (benchmarks/bench_startup.py times them): these pin the lazy imports that
the start-up budget rests on. `import traceq.cli` and `traceq --help` load no data library;
an analysis command loads DuckDB and polars but not pyarrow, numpy (except where it computes
the stall attribution or the time ledger, whose sweeps are numpy), pydantic (typer's option coercion), plotly or jinja2, nor ingest's rule table or a process pool, and its JSON output
not rich; and the outputs of the
pyarrow-free path equal those of the pyarrow path (the Python API's).
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from conftest import SAMPLES

HEAVY = ("duckdb", "polars", "pyarrow", "numpy", "pydantic", "plotly", "jinja2", "rich", "msgspec")

# Runs traceq's real entry point and writes the modules loaded to the file named by argv[1]
# when the process ends (by os._exit, as the CLI does after an analysis, or by SystemExit).
SPY = """
import json, os, sys
out = sys.argv.pop(1)
sys.argv[0] = "traceq"
def dump():
    with open(out, "w") as fh:
        json.dump(sorted(sys.modules), fh)
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


def loaded(tmp_path, *args, cwd=None, full=False, before="", env=None) -> tuple[set[str], subprocess.CompletedProcess]:
    """The top-level packages (every module with `full`) that `traceq ARGS` loaded, and the
    process; `before`: Python run before the entry point."""
    out = tmp_path / "modules.json"
    env = {**{k: v for k, v in os.environ.items() if k not in ("TRACEQ_STORE", "FORCE_COLOR")}, **(env or {})}
    env.update(NO_COLOR="1", TRACEQ_WIDTH="200")
    r = subprocess.run([sys.executable, "-c", before + SPY, str(out), *map(str, args)], cwd=cwd or tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    modules = json.loads(out.read_text())
    return set(modules) if full else {m.split(".")[0] for m in modules}, r


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
    if command[0] in ("hotspots", "stalls", "summary"):
        # these compute the stall attribution or the time ledger (the "Fix first" line, or the
        # analysis itself): their sweeps are numpy (traceq/engine/level_sweep.py, issue 35, and
        # traceq/engine/ledger_sweep.py, issue 46; ~0.1 s to import, where the SQL window they
        # replace took seconds on a run of many ranks)
        unwanted.discard("numpy")
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
    """The kernel rule table (traceq.rules.categories: tomllib, the identity parser) is ingest's, and
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


def _gpu_trace(path):
    """A small trace with what the GPU side of an ingest handles: kernels with grid and block
    (decoding's list columns), their launches (the launch map of the gpu_ops pass), a copy,
    steps (regions and their nesting depth)."""
    from kineto_synth import Trace

    t = Trace()
    for step in range(3):
        t.step(step, step * 1000, 900)
        for i in range(20):
            at = step * 1000 + 10 + 40 * i
            t.launch("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float> >(int)",
                     at, 5, at + 10, 20)
            t.events[-1]["args"].update(grid=[128, 1, 1], block=[256, 1, 1])
        t.launch("Memcpy HtoD (Pageable -> Device)", step * 1000 + 850, 5, step * 1000 + 860, 30,
                 api="cudaMemcpyAsync", cat="gpu_memcpy")
    return t.write(path)


@pytest.mark.parametrize("processes", ["1", "2"])
def test_kineto_ingest_loads_neither_pyarrow_compute_nor_numpy_ma(tmp_path, processes):
    """An ingest's start-up is most of its time on a 30 MB trace: the Kineto path calls Arrow's
    kernels by name (traceq.arrow_kernels) and hands NumPy arrays to polars and pyarrow as
    Arrow buffers, so neither `pyarrow.compute` (its ~300 wrappers: ~20 ms) nor `numpy.ma`
    (which both libraries' NumPy conversions import: 7 ms) is loaded, by the single-process
    decoder (1) or by the parallel one (2: every file is big enough to split), for a CPU-only
    trace (the sample) and one with GPU activity."""
    before = ("import os, traceq.arrow_without_pandas as a\n"   # what the command line does first
              "os.environ[a.ENV] = '0'; a.apply()\n"
              "import traceq.ingest.kineto.decode as d; d.MIN_SPLIT = 0\n")
    gpu = _gpu_trace(tmp_path / "gpu" / "gpu.pt.trace.json.gz")
    for trace in (SAMPLES / "slow_dataloader", gpu):
        mods, r = loaded(tmp_path, "ingest", trace, "--store", tmp_path / "s", "-q",
                         full=True, before=before, env={"TRACEQ_DECODE_PROCESSES": processes})
        assert r.returncode == 0, r.stderr
        assert {"traceq.ingest.kineto.translate", "traceq.arrow_kernels", "pyarrow.parquet"} <= mods
        assert not mods & {"pyarrow.compute", "numpy.ma"}, (trace, sorted(mods & {"pyarrow.compute", "numpy.ma"}))


needs_pandas = pytest.mark.skipif(importlib.util.find_spec("pandas") is None, reason="pandas is not installed")


@needs_pandas
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ingest_does_not_import_pandas(tmp_path, jobs):
    """pyarrow imports pandas, when installed, the first time it checks an input for pandas
    objects (0.18 s); the command line's ingest hides it from that one check
    (traceq.arrow_without_pandas), in its own process and in the workers it spawns (-j 2: two
    files, two spawned workers, each writing down what it loaded)."""
    marks = tmp_path / "workers"
    marks.mkdir()
    sitecustomize = tmp_path / "site" / "sitecustomize.py"
    sitecustomize.parent.mkdir()
    # every Python process of the ingest writes the top-level modules it loaded when its task ends
    sitecustomize.write_text(
        "import atexit, json, os, sys\n"
        "import traceq.ingest as _i\n"
        "_real = _i._parse_and_stage\n"
        "def _spy(*a, **k):\n"
        "    try:\n"
        "        return _real(*a, **k)\n"
        "    finally:\n"
        f"        open(os.path.join({str(marks)!r}, str(os.getpid())), 'w').write("
        "json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
        "_i._parse_and_stage = _spy\n")
    out = tmp_path / "modules.json"
    env = {k: v for k, v in os.environ.items() if k not in ("TRACEQ_STORE", "TRACEQ_PYARROW_PANDAS")}
    env["PYTHONPATH"] = os.pathsep.join([str(sitecustomize.parent), env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", SPY, str(out), "ingest", str(SAMPLES / "nsys_sample.sqlite"),
                        str(SAMPLES / "slow_dataloader"), "--store", str(tmp_path / "s"), "-q", "-j", jobs],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    mods = set(json.loads(out.read_text()))
    assert "pyarrow" in mods and "pandas" not in mods
    tasks = [set(json.loads(p.read_text())) for p in marks.iterdir()]
    assert len(tasks) == (1 if jobs == "1" else 2)   # -j 1: the tasks run in the command's process
    for task in tasks:
        assert "pyarrow" in task and "pandas" not in task


@needs_pandas
def test_pyarrow_keeps_pandas_outside_the_command_line(tmp_path):
    """Without TRACEQ_PYARROW_PANDAS=0 (a Python program calling traceq) apply() changes
    nothing: pyarrow loads pandas itself. With it, pyarrow works without loading pandas, and
    once something imports pandas, pyarrow still converts to it."""
    code = ("import os, sys\n"
            "from traceq import arrow_without_pandas\n"
            "import pyarrow as pa, pyarrow.parquet as pq\n"
            "arrow_without_pandas.apply()\n"
            "t = pa.table({'a': [1, 2]})\n"
            "pq.write_table(t, sys.argv[1]); back = pq.read_table(sys.argv[1])\n"
            "before = 'pandas' in sys.modules\n"
            "import pandas\n"
            "try:\n"
            "    converted = int(back.to_pandas()['a'].sum())\n"
            "except Exception:\n"
            "    converted = None\n"
            "print(before, converted)\n")
    runs = {}
    for value in (None, "0"):
        env = {k: v for k, v in os.environ.items() if k != "TRACEQ_PYARROW_PANDAS"}
        if value is not None:
            env["TRACEQ_PYARROW_PANDAS"] = value
        r = subprocess.run([sys.executable, "-c", code, str(tmp_path / f"{value}.parquet")], env=env,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        runs[value] = r.stdout.split()
    assert runs[None] == ["True", "3"]    # pyarrow loaded pandas itself, and converts to it
    assert runs["0"] == ["False", "3"]    # pyarrow did not load pandas, and converts to it once imported
