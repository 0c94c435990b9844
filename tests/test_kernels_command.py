"""`traceq kernels` (issue 48): the TensorBoard profiler plugin's Kernel view under the name its
users look for, the same as `traceq hotspots --window tb`; on a hand-made trace whose numbers are
derived in the comment, and on a bundled sample against a direct query of the store."""
from __future__ import annotations

import json

import pytest

import traceq
from conftest import SAMPLES, run_traceq
from kineto_synth import Trace


def _kernel_args(bps, occ):
    return {"blocks per SM": bps, "est. achieved occupancy %": occ, "warps per SM": bps, "grid": [1, 1, 1],
            "block": [32, 1, 1], "registers per thread": 16, "shared memory": 0}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Two steps; `k` runs 10 µs (2 blocks/SM, 40 %) in step 1, 30 µs (4 blocks/SM, 80 %) and
    20 µs (no args) in step 2; `h884gemm` 5 µs; a 4 µs memcpy. The Kernel view: every kernel of
    the trace, no copies: k 3 calls, 60 µs, blocks (10*2 + 30*4 + 20*0) / 60 = 2.333, occupancy
    (10*40 + 30*80) / 60 = 46.667 (the plugin counts a missing value as 0); h884gemm 1 call, 5 µs,
    on tensor cores by its name."""
    d = tmp_path_factory.mktemp("kernels")
    t = Trace()
    t.step(1, 0, 100)
    t.step(2, 100, 100)
    t.launch("k", 1, 2, 10, 10)
    t.launch("k", 101, 2, 110, 30)
    t.launch("k", 103, 2, 150, 20)
    t.launch("h884gemm", 104, 2, 175, 5)
    t.launch("Memcpy HtoD (Pageable -> Device)", 105, 2, 181, 4, api="cudaMemcpyAsync", cat="gpu_memcpy")
    kernels = [e for e in t.events if e["cat"] == "kernel"]
    kernels[0]["args"].update(_kernel_args(2.0, 40))
    kernels[1]["args"].update(_kernel_args(4.0, 80))
    traceq.open_store(d / "s").ingest([t.write(d / "t.pt.trace.json.gz")])
    return d


def _json(*args, cwd) -> dict:
    r = run_traceq(*args, "-f", "json", cwd=cwd)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_kernels_is_the_plugins_kernel_view_of_the_whole_trace(tiny):
    doc = _json("kernels", "--store", tiny / "s", "--top", "0", cwd=tiny)
    rows = {r["name"]: r for r in doc["rows"]}
    assert set(rows) == {"k", "h884gemm"}            # no memcpy
    assert rows["k"]["count"] == 3 and rows["k"]["total_ns"] == 60_000
    assert rows["k"]["blocks_per_sm"] == pytest.approx(140 / 60)
    assert rows["k"]["est_occupancy_pct"] == pytest.approx(2800 / 60)
    assert rows["h884gemm"]["count"] == 1 and rows["h884gemm"]["total_ns"] == 5_000
    assert rows["h884gemm"]["tensor_cores"] is True and rows["k"]["tensor_cores"] is False
    assert rows["k"]["pct"] == pytest.approx(100 * 60 / 65, abs=0.01)   # of kernel time
    # the same document as the option it stands for
    assert doc == _json("hotspots", "--window", "tb", "--store", tiny / "s", "--top", "0", cwd=tiny)


def test_kernels_terminal_shows_the_kernel_view_columns(tiny):
    r = run_traceq("kernels", "--store", tiny / "s", cwd=tiny)
    assert r.returncode == 0, r.stderr
    header = next(ln for ln in r.stdout.splitlines() if ln.strip().startswith("name"))
    for col in ("tensor_cores", "blocks_per_sm", "est_occupancy"):
        assert col in header, header
    lines = r.stdout.split(header)[1].splitlines()[2:]          # after the header and its rule
    rows = [ln.split()[0] for ln in lines[:next(i for i, ln in enumerate(lines) if not ln.strip())]]
    assert rows == ["k", "h884gemm"]                  # the copy is no row (the advice may name it)


def test_kernels_takes_no_step_options(tiny):
    """The plugin's Kernel view has no step window: the options are not offered (not offered
    and then refused)."""
    help_text = run_traceq("kernels", "--help", cwd=tiny).stdout
    options = {ln.split()[0].rstrip(",") for ln in help_text.split("Options")[1].splitlines() if ln.startswith("  -")}
    assert {"--run", "--rank", "-n", "-c", "-f", "-o", "--wide"} <= options
    assert not options & {"--window", "--steps", "--step-pattern", "--skip-first"}
    r = run_traceq("kernels", "--store", tiny / "s", "--steps", "2", cwd=tiny)
    assert r.returncode == 2 and "No such option" in r.stderr


def test_kernels_on_a_sample_equals_a_direct_query(tmp_path):
    """train_gpu_bound: per kernel name, calls and total ns as SQL over gpu_ops gives them."""
    s = traceq.open_store(tmp_path / "s")
    s.ingest([SAMPLES / "gpu" / "train_gpu_bound"])
    want = {r["name"]: (r["n"], r["ns"]) for r in s.sql(
        "SELECT name, count(*) AS n, sum(end_ns - start_ns) AS ns FROM gpu_ops WHERE kind = 'kernel' GROUP BY name"
    ).to_dicts()}
    doc = _json("kernels", "--store", tmp_path / "s", "--top", "0", cwd=tmp_path)
    got = {r["name"]: (r["count"], r["total_ns"]) for r in doc["rows"]}
    assert got == want and len(got) >= 3
    assert [r["total_ns"] for r in doc["rows"]] == sorted((ns for _, ns in want.values()), reverse=True)


def test_help_lists_kernels_after_hotspots(tmp_path):
    out = run_traceq("--help", cwd=tmp_path).stdout
    listed = [ln.split()[0] for ln in out.split("Commands")[1].splitlines()[1:] if ln.startswith("  ")]
    assert listed.index("kernels") == listed.index("hotspots") + 1
