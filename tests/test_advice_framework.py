"""Advice speaks the program's language (queries/framework.sql, Evidence.said): PyTorch APIs
only where the scope shows PyTorch, CUDA/HIP calls and framework-neutral fixes elsewhere.

The synthetic trace is a CUDA program with pageable synchronous copies and device syncs
(pinned_memory and remove_syncs fire, blocking_copy is the main stall cause); each variant
adds one kind of PyTorch evidence, or a decoy that must not count. The real traces' framework
is worked out a second way: straight from the store's Parquet files with DuckDB and the
prefixes in plain Python."""
from __future__ import annotations

import re

import pytest
from conftest import SHARED_TRACES
from kineto_synth import Trace

from scoped import diagnose, stalls

from traceq.advice import evidence_for, findings
from traceq.advice.stall_advice import advice
from traceq.engine.scope import open_scope
from traceq.queries import install_macros, load
from traceq.ingest import ingest

# PyTorch words no advice may use on a program that shows no PyTorch
TORCH_WORDS = re.compile(r"torch\.|tensor\.|\.to\(|pin_memory|non_blocking|empty_cache|PYTORCH_|\.item\(\)|"
                         r"zero_grad|num_workers=0|foreach=True|fused=True")
PREFIXES = ("aten::", "autograd::", "ProfilerStep#", "Optimizer.", "nn.Module: ", "enumerate(DataLoader)", "torch/")


def _cuda_program() -> Trace:
    t = Trace()
    for i in range(6):
        base = i * 1000
        t.launch("saxpy_kernel", base, 10, base + 20, 100)
        t.launch("Memcpy HtoD (Pageable -> Device)", base + 150, 500, base + 640, 5, api="cudaMemcpy",
                 cat="gpu_memcpy")
        t.runtime("cudaDeviceSynchronize", base + 700, 200)
    t.launch("saxpy_kernel", 6000, 10, 6020, 100)
    return t


VARIANTS = {
    # name: (what is added, PyTorch evidence kinds it gives)
    "none": (lambda t: None, 0),
    "cpu_op": (lambda t: t.cpu_op("aten::add", 6200, 50), 1),
    "aten_kernel": (lambda t: t.launch("void at::native::vectorized_elementwise_kernel<4, "
                                       "at::native::FillFunctor<float>, at::detail::Array<char*, 1> >(int, "
                                       "at::native::FillFunctor<float>, at::detail::Array<char*, 1>)",
                                       6150, 10, 6130, 2), 1),
    "profiler_step": (lambda t: t.step(1, 0, 6200), 1),
    "dataloader": (lambda t: t.annotation("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 6300, 20), 1),
    # decoys: PyTorch-like words that are not PyTorch's names
    "decoys": (lambda t: (t.cpu_op("myapp::aten::add", 6200, 50), t.annotation("aten", 6300, 20),
                          t.annotation("step_ProfilerStep#1", 6350, 20),
                          t.launch("aten_like_kernel", 6150, 10, 6130, 2)), 0),
}


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    out = {}
    for name, (add, _) in VARIANTS.items():
        t = _cuda_program()
        add(t)
        d = tmp_path_factory.mktemp(name)
        ingest([t.write(d / "t.pt.trace.json.gz")], store=d / "s", jobs=1)
        out[name] = d / "s"
    return out


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_the_evidence_counts_only_pytorch_names(stores, name):
    scope = open_scope(stores[name])
    install_macros(scope.con)
    kinds = VARIANTS[name][1]
    assert scope.df(load("framework"))["pytorch"][0] == kinds
    assert evidence_for(scope).pytorch is bool(kinds)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_advice_names_pytorch_apis_only_on_pytorch(stores, name):
    torch = bool(VARIANTS[name][1])
    fs = {f.id: f for f in findings(open_scope(stores[name]), stalls(stores[name]))}
    assert {"pinned_memory", "remove_syncs"} <= set(fs)
    pinned, syncs = fs["pinned_memory"].advice, fs["remove_syncs"].advice
    if torch:
        assert pinned.startswith("pin host memory: DataLoader(pin_memory=True) or tensor.pin_memory()")
        assert "torch.cuda.synchronize()" in syncs
    else:
        assert pinned.startswith("allocate the host buffers page-locked (cudaMallocHost/cudaHostAlloc")
        assert "cudaEventRecord + cudaStreamWaitEvent" in syncs
        for f in fs.values():
            assert not TORCH_WORDS.search(f.advice), (f.id, f.advice)
    # the evidence and the numbers do not depend on the words
    assert fs["pinned_memory"].evidence.startswith("6 copies from/to pageable host memory")
    assert fs["pinned_memory"].gpu_ms == pytest.approx(0.030)


@pytest.mark.parametrize("name", ["none", "cpu_op"])
def test_stalls_advice_lines_follow_the_framework(stores, name):
    res = stalls(stores[name])
    assert res.pytorch is bool(VARIANTS[name][1])
    lines = advice(res)
    # blocking_copy: 6 gaps of which 490 µs are in the copy call; well above 10 % of the span
    assert len(lines) == 1 and lines[0].startswith("advice [blocking copy, ")
    if res.pytorch:
        assert "non_blocking=True" in lines[0]
    else:
        assert "cudaMallocHost/cudaHostRegister" in lines[0] and not TORCH_WORDS.search(lines[0])


def test_data_wait_is_named_by_the_framework(tmp_path):
    """Timer-style data regions (--data-pattern) in a program without PyTorch: "data wait" and
    the neutral data-loading advice; with a ProfilerStep it is PyTorch's "DataLoader wait"."""
    for torch in (False, True):
        t = Trace()
        for i in range(4):
            base = i * 10_000
            if torch:
                t.step(i + 1, base, 10_000)
            t.annotation("read_batch", base, 6000)
            t.annotation("train_step", base + 6000, 4000)
        d = tmp_path / str(torch)
        ingest([t.write(d / "t.pt.trace.json.gz")], store=d / "s", jobs=1)
        res = stalls(d / "s", data_pattern="^read_batch$", step_pattern=None if torch else "^train_step$|^read_batch$")
        assert res.pytorch is torch
        # diagnose has no --data-pattern: no data wait, and the words for it
        row = diagnose(d / "s").row(0, named=True)
        words = "DataLoader wait" if torch else "data wait"
        assert row["bound"] == "no_gpu"
        assert row["evidence"].startswith(f"no GPU ops in scope (CPU-only capture); {words} 0.0 % of step time over ")
        lines = advice(res)
        assert lines and lines[0].startswith("advice [data loading, ")
        if torch:
            assert "DataLoader num_workers so batches" in lines[0]
        else:
            assert lines[0].endswith("cache or GPU-decode samples when per-sample loading is the slow part")
            assert not TORCH_WORDS.search(" ".join(lines))


# ---------------------------------------------------------------- real traces
REAL = sorted(p for p in SHARED_TRACES.rglob("*") if p.is_file() and p.name.endswith((".json.gz", ".sqlite"))) \
    if SHARED_TRACES.is_dir() else []


def _pytorch_by_hand(store, run: str) -> bool:
    """PyTorch evidence read straight from the run's Parquet files: ATen kernels, or host op /
    region names with PyTorch's prefixes (checked in Python)."""
    import duckdb

    def names(table, where):
        files = list((store / table / f"run={run}").rglob("*.parquet"))
        if not files:
            return []
        lst = ", ".join(f"'{f}'" for f in files)
        return [r[0] for r in duckdb.sql(f"select distinct name from read_parquet([{lst}], union_by_name=true) "
                                         f"where {where}").fetchall()]

    if names("gpu_ops", "library = 'ATen'"):
        return True
    host = names("host_ops", "kind in ('cpu_op', 'python')") + names("regions", "coalesce(domain, '') <> 'gpu'")
    return any(n.startswith(PREFIXES) for n in host if n)


@pytest.fixture(scope="module")
def real_store(tmp_path_factory):
    from traceq.errors import TraceqError

    store = tmp_path_factory.mktemp("real") / "s"
    runs = {}
    for p in REAL:
        run = re.sub(r"[^A-Za-z0-9]+", "_", str(p.relative_to(SHARED_TRACES))).strip("_")
        try:
            ingest([p], store=store, run=run, jobs=1)
            runs[run] = p
        except TraceqError:
            pass          # refused as bad input (an export without events)
    return store, runs


@pytest.mark.shared
def test_real_traces_framework_and_advice_words(real_store):
    store, runs = real_store
    if not runs:
        pytest.skip("../shared/traces not available")
    seen = {True: 0, False: 0}
    for run in runs:
        scope = open_scope(store, run)
        ev = evidence_for(scope)
        assert ev.pytorch is _pytorch_by_hand(store, run), run
        seen[ev.pytorch] += 1
        if not ev.pytorch:
            for f in diagnose(store, run=run).row(0, named=True)["findings"]:
                assert not TORCH_WORDS.search(f["advice"]), (run, f["id"], f["advice"])
    assert seen[True] and seen[False]


@pytest.mark.shared
@pytest.mark.parametrize("rel, pytorch", [
    ("nsys/pipit/perlmutter-cloverleaf-cuda.sqlite", False),    # a CUDA mini-app
    ("nsys/pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite", False),
    ("nsys/WeatherBench2/report1.sqlite", False),
    ("nsys/llama3-inference/demo.sqlite", True),                # no NVTX of PyTorch: its ATen kernels
    ("nsys/DLProf/nsys_profile.sqlite", True),                  # NVTX aten::* ranges
    ("kineto/param/resnet_kineto.json.gz", True),
])
def test_known_programs(real_store, rel, pytorch):
    store, runs = real_store
    run = re.sub(r"[^A-Za-z0-9]+", "_", rel).strip("_")
    if run not in runs:
        pytest.skip(f"../shared/traces/{rel} not available")
    assert evidence_for(open_scope(store, run)).pytorch is pytorch
    if rel.endswith("cloverleaf-cuda.sqlite"):
        fs = {f["id"]: f["advice"] for f in diagnose(store, run=run).row(0, named=True)["findings"]}
        assert fs["pinned_memory"].startswith("allocate the host buffers page-locked")
        assert fs["remove_syncs"].startswith("remove host syncs from the loop: synchronize only where the host")
        # no steps: the floor is the percentage alone (allocator idle 0.73 ms and launch idle
        # 0.28 ms are 0.2 % and 0.1 % of its 342 ms GPU span)
        assert "allocator_churn" not in fs and "launch_overhead" not in fs


@pytest.mark.parametrize("torch", [False, True])
def test_allocator_advice_follows_the_framework(tmp_path, torch):
    """Synthetic: 6 iterations of a 100 µs kernel, then cudaFree (300 µs) and cudaMalloc
    (100 µs) on the launching thread while the GPU waits: allocator churn either way; the
    fix is named in PyTorch's words only when an aten op shows PyTorch."""
    t = Trace()
    for i in range(6):
        base = i * 1000
        t.launch("saxpy_kernel", base, 10, base + 20, 100)
        t.runtime("cudaFree", base + 200, 300)
        t.runtime("cudaMalloc", base + 520, 100)
    t.launch("saxpy_kernel", 6000, 10, 6020, 100)
    if torch:
        t.cpu_op("aten::add", 6200, 50)
    ingest([t.write(tmp_path / "t.pt.trace.json.gz")], store=tmp_path / "s", jobs=1)
    fs = {f.id: f for f in findings(open_scope(tmp_path / "s"), stalls(tmp_path / "s"))}
    f = fs["allocator_churn"]
    assert "cudaFree ×6" in f.evidence
    if torch:
        assert f.advice.startswith("keep PyTorch's caching allocator on")
    else:
        assert f.advice.startswith("allocate device memory once, outside the loop") and not TORCH_WORDS.search(f.advice)
