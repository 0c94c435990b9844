"""`--top N` / `-n N` (issue 37 item 3): a negative N used to slice silently (`hotspots --top -1`
listed all but one row, `diff --top -3` 67 kernels and no region). Every analysis that takes it
refuses N < 0 in one line (exit 2), from the CLI and from the Python API; 0 still means all."""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import SAMPLES
from traceq.analyses.registry import REGISTRY, compute
from traceq.errors import TraceqError

TOP = sorted(a.name for a in REGISTRY.values() if any(p.name == "top" for p in a.params))


def traceq(*args):
    return subprocess.run([sys.executable, "-m", "traceq", *map(str, args)], capture_output=True, text=True)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    s = tmp_path_factory.mktemp("top") / "s"
    r = traceq("ingest", SAMPLES / "slow_dataloader", SAMPLES / "fast_dataloader", "--store", s, "-q")
    assert r.returncode == 0, r.stderr
    return s


def test_every_top_option_is_the_shared_one():
    assert {"hotspots", "diff", "breakdown", "operators", "memory", "roofline", "critical_path"} <= set(TOP)
    for name in TOP:
        p = next(p for p in REGISTRY[name].params if p.name == "top")
        assert (p.flags, p.min, p.type) == (("-n",), 0, int), name


@pytest.mark.parametrize("name", TOP)
@pytest.mark.parametrize("flag, n", [("--top", -1), ("-n", -3)])
def test_negative_top_is_refused_in_one_line(store, name, flag, n):
    runs = ["slow_dataloader", "fast_dataloader"] if REGISTRY[name].runs == 2 else ["--run", "slow_dataloader"]
    r = traceq(name.replace("_", "-"), *runs, flag, n, "--store", store)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr == f"traceq: --top {n}: must be 0 or more (0 = all)\n" and r.stdout == ""


def test_python_api_refuses_negative_top_and_zero_is_all(store):
    with pytest.raises(TraceqError, match=r"--top -1: must be 0 or more"):
        compute(REGISTRY["hotspots"], store=store, run="slow_dataloader", top=-1)
    every = compute(REGISTRY["hotspots"], store=store, run="slow_dataloader", top=0).df.height
    assert compute(REGISTRY["hotspots"], store=store, run="slow_dataloader", top=2).df.height == min(2, every)
