"""traceq.timer: Deep500's API, semantics and errors; the JSONL log it writes; CPU-only use.

Every test passes with or without torch installed: the model is torch on the CPU when torch
is importable, else a tiny numpy model with the same interface, and
`test_runs_without_torch` re-runs the torch-free tests with `import torch` blocked.
"""
from __future__ import annotations

import enum
import importlib.util
import io
import json
import os
import socket
import statistics
import subprocess
import sys
import textwrap
import time
import types
import warnings
from pathlib import Path

import numpy as np
import pytest

from traceq import timer
from traceq.timer import TimeType
from traceq.timer.warn import WARNED

HAS_TORCH = importlib.util.find_spec("torch") is not None
REPO = Path(__file__).resolve().parents[1]
KEYS = [TimeType.EPOCH, TimeType.BATCH, TimeType.IO, TimeType.FORWARD, TimeType.BACKWARD]


def cuda_available() -> bool:
    if not HAS_TORCH:
        return False
    import torch

    return torch.cuda.is_available()


def read_log(path) -> tuple[dict, list[dict]]:
    lines = Path(path).read_text().splitlines()
    return json.loads(lines[0]), [json.loads(line) for line in lines[1:]]


def log_durations(records: list[dict]) -> dict[str, list[float]]:
    """Each key's region durations (s) from the log, in the order the regions ended."""
    out: dict[str, list[float]] = {}
    for r in records:
        if "key" in r:
            out.setdefault(r["key"], []).append((r["end_ns"] - r["start_ns"]) / 1e9)
    return out


def stats_of(times: list[float]) -> tuple:
    return (min(times), statistics.mean(times), statistics.median(times), max(times),
            statistics.stdev(times) if len(times) > 1 else 0.0)


@pytest.fixture
def quiet_gpu():
    """Silence the one-time 'GPU timing not available' warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


# ------------------------------------------------------------------ the README pattern
class SlowLoader:
    """A DataLoader stand-in: len() and iteration, with a slow fetch per batch."""

    def __init__(self, n_batches: int, fetch_s: float = 0.001):
        rng = np.random.default_rng(0)
        self.batches = [(rng.standard_normal((8, 16)).astype("float32"), rng.integers(0, 4, 8))
                        for _ in range(n_batches)]
        self.fetch_s = fetch_s

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self):
        for x, y in self.batches:
            time.sleep(self.fetch_s)
            yield x, y


class NumpyNet:
    """net(inputs), criterion(output, targets), loss.backward(), optimizer.zero_grad/step()."""

    def __init__(self):
        self.w = np.random.default_rng(1).standard_normal((16, 4)).astype("float32") * 0.1
        self.grad = np.zeros_like(self.w)

    def __call__(self, x):
        self.x = x
        return x @ self.w

    def criterion(self, out, y):
        net = self

        class Loss:
            def backward(self):
                d = out.copy()
                d[np.arange(len(y)), y] -= 1
                net.grad += net.x.T @ d / len(y)

        return Loss()

    def zero_grad(self):
        self.grad[:] = 0

    def step(self):
        self.w -= 0.1 * self.grad


def make_model():
    if HAS_TORCH:
        import torch

        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
        crit = torch.nn.CrossEntropyLoss()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)

        def wrap(batch):
            x, y = batch
            return torch.from_numpy(x), torch.from_numpy(y)
        return net, crit, opt, wrap
    net = NumpyNet()
    return net, net.criterion, net, lambda batch: batch


def train_epoch(loader, net, criterion, optimizer, wrap, tmr):
    """The Deep500 README training loop, unchanged apart from `wrap` (numpy -> tensors)."""
    tmr.start(timer.TimeType.BATCH, gpu=True)
    tmr.start(timer.TimeType.IO)
    for idx, batch in enumerate(loader):
        inputs, targets = wrap(batch)
        tmr.end(timer.TimeType.IO)
        tmr.start(timer.TimeType.FORWARD, gpu=True)
        output = net(inputs)
        loss = criterion(output, targets)
        tmr.end(timer.TimeType.FORWARD, gpu=True)
        tmr.start(timer.TimeType.BACKWARD, gpu=True)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        tmr.end(timer.TimeType.BACKWARD, gpu=True)
        tmr.end(timer.TimeType.BATCH, gpu=True)
        if idx % 10 == 0:
            tmr.complete_all()
        if idx != len(loader) - 1:
            tmr.start(timer.TimeType.BATCH, gpu=True)
            tmr.start(timer.TimeType.IO)


def train_model(tmr, epochs: int, loader):
    net, criterion, optimizer, wrap = make_model()
    threads = None
    if HAS_TORCH:
        import torch
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
    try:
        for _ in range(epochs):
            tmr.start(timer.TimeType.EPOCH)
            train_epoch(loader, net, criterion, optimizer, wrap, tmr)
            tmr.end(timer.TimeType.EPOCH)
    finally:
        if threads:
            torch.set_num_threads(threads)


def test_deep500_readme_pattern_stats_match_log(tmp_path, quiet_gpu):
    log = tmp_path / "run.jsonl"
    tmr = timer.CPUGPUTimer(log=log)
    epochs, n_batches = 2, 12
    train_model(tmr, epochs, SlowLoader(n_batches))
    out = io.StringIO()
    tmr.print_all_time_stats(file=out)

    header, records = read_log(log)
    assert header["traceq_timer"] == timer.LOG_FORMAT_VERSION
    from_log = log_durations(records)
    expected_counts = {"EPOCH": epochs, "BATCH": epochs * n_batches, "IO": epochs * n_batches,
                       "FORWARD": epochs * n_batches, "BACKWARD": epochs * n_batches}
    assert {k: len(v) for k, v in from_log.items()} == expected_counts
    for key in KEYS:
        assert tmr.get_time(key) == from_log[key.name]          # same durations, same order
        assert tuple(tmr.get_time_stats(key)) == pytest.approx(stats_of(from_log[key.name]), rel=1e-12)

    # The printed text is Deep500's: CPU, then key / stats line pairs, ---, GPU, ..., ---
    lines = out.getvalue().splitlines()
    assert lines[0] == "CPU"
    cpu = lines[1:lines.index("---")]
    printed = dict(zip(cpu[0::2], cpu[1::2]))
    assert set(printed) == set(expected_counts)
    for name, line in printed.items():
        assert line == str(timer.TimeStats(*stats_of(from_log[name])))
    assert lines[len(cpu) + 2] == "GPU" and lines[-1] == "---"

    # Each IO/FORWARD/BACKWARD lies inside a BATCH, each BATCH inside an EPOCH
    regions = [r for r in records if "key" in r]
    spans = {k: sorted((r["start_ns"], r["end_ns"]) for r in regions if r["key"] == k) for k in expected_counts}
    for inner, outer in [("IO", "BATCH"), ("FORWARD", "BATCH"), ("BACKWARD", "BATCH"), ("BATCH", "EPOCH")]:
        for s, e in spans[inner]:
            assert any(os_ <= s and e <= oe for os_, oe in spans[outer]), (inner, outer)
    assert len({(r["pid"], r["tid"]) for r in regions}) == 1

    if cuda_available():
        assert len(tmr.get_time(TimeType.BATCH, gpu=True)) == epochs * n_batches
    else:
        for key in KEYS:
            assert tmr.get_time(key, gpu=True) == []
        assert lines[-2:] == ["GPU", "---"]
        assert not any("gpu" in r for r in regions)
    if not HAS_TORCH:   # GPU timing must not have imported torch behind our back
        assert sys.modules.get("torch") is None


def test_runs_without_torch(tmp_path):
    """The torch-free tests pass with `import torch` made to fail (as on a torch-less install)."""
    code = textwrap.dedent(f"""
        import sys
        sys.modules["torch"] = None          # `import torch` now raises ImportError
        import pytest
        sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "--basetemp", {str(tmp_path / 'inner')!r},
                              "-k", "readme_pattern or without_cuda or without_torch_markers or errors",
                              {str(Path(__file__))!r}]))
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout


def test_gpu_timing_without_cuda_degrades_to_not_available(tmp_path):
    if cuda_available():
        pytest.skip("CUDA is available here; covered by test_gpu_events_measure_async_work")
    WARNED.discard("gpu")
    log = tmp_path / "nogpu.jsonl"
    tmr = timer.CPUGPUTimer(log=log)
    with pytest.warns(RuntimeWarning, match="GPU timing not available"):
        tmr.start(TimeType.FORWARD, gpu=True)
    tmr.end(TimeType.FORWARD, gpu=True)
    assert len(tmr.get_time(TimeType.FORWARD)) == 1
    assert tmr.get_time(TimeType.FORWARD, gpu=True) == []
    with pytest.raises(ValueError, match="not available"):
        tmr.get_time_stats(TimeType.FORWARD, gpu=True)
    out = io.StringIO()
    tmr.print_all_time_stats(file=out)
    assert out.getvalue().endswith("GPU\n---\n")
    # misuse still raises the errors it raises on a GPU machine
    tmr.start(TimeType.BATCH, gpu=True)
    with pytest.raises(RuntimeError, match="nesting"):
        tmr.start(TimeType.BATCH, gpu=True)
    tmr.end(TimeType.BATCH)                 # CPU side closed, GPU side still open
    with pytest.raises(RuntimeError, match="Unbalanced"):
        tmr.get_time(TimeType.BATCH, gpu=True)
    tmr.close()
    header, records = read_log(log)
    info = [r for r in records if "gpu_timing" in r]
    assert info and info[0]["gpu_timing"] == "unavailable" and info[0]["reason"]
    assert not any("gpu" in r or "gpu_id" in r for r in records)


# ------------------------------------------------------------------------- errors
@pytest.fixture(params=["Timer", "CPUGPUTimer"])
def any_timer(request, quiet_gpu):
    return getattr(timer, request.param)()


def test_errors_nesting_the_same_key(any_timer):
    any_timer.start(TimeType.BATCH)
    with pytest.raises(RuntimeError, match="Detected nesting for timing region type BATCH"):
        any_timer.start(TimeType.BATCH)
    any_timer.end(TimeType.BATCH)           # the first region is untouched
    assert len(any_timer.get_time(TimeType.BATCH)) == 1


def test_errors_end_without_start(any_timer):
    with pytest.raises(RuntimeError, match="Unbalanced end for timing region type IO"):
        any_timer.end(TimeType.IO)
    any_timer.start(TimeType.IO)
    any_timer.end(TimeType.IO)
    with pytest.raises(RuntimeError, match="Unbalanced end"):
        any_timer.end(TimeType.IO)


def test_errors_unbalanced_when_reading_stats(any_timer, tmp_path):
    any_timer.start(TimeType.EPOCH)
    any_timer.start(TimeType.BATCH)
    any_timer.end(TimeType.BATCH)
    assert len(any_timer.get_time(TimeType.BATCH)) == 1
    with pytest.raises(RuntimeError, match="Unbalanced start/end for region type EPOCH"):
        any_timer.get_time(TimeType.EPOCH)
    with pytest.raises(RuntimeError, match="Unbalanced"):
        any_timer.get_time_stats(TimeType.EPOCH)
    with pytest.raises(RuntimeError, match="Unbalanced"):
        any_timer.print_all_time_stats(file=io.StringIO())
    with pytest.raises(RuntimeError, match="Unbalanced"):
        any_timer.save_all_time_stats(str(tmp_path / "stats.txt"))
    assert not (tmp_path / "stats.txt").exists()     # no partial file
    any_timer.complete_all()                          # tolerates the open region ...
    any_timer.end(TimeType.EPOCH)                     # ... which stays open
    assert len(any_timer.get_time(TimeType.EPOCH)) == 1


def test_errors_time_type_all_is_rejected(any_timer):
    for call in (any_timer.start, any_timer.end):
        with pytest.raises(ValueError, match="Cannot use TimeType.ALL here"):
            call(TimeType.ALL)
        with pytest.raises(ValueError, match="Cannot use TimeType.ALL here"):
            call("ALL")       # names identify keys: the string is the same key
    assert any_timer.get_time(TimeType.ALL) == []     # Deep500 does not reject reads


def test_errors_save_all_time_stats_refuses_an_existing_file(any_timer, tmp_path):
    any_timer.start(TimeType.OTHER)
    any_timer.end(TimeType.OTHER)
    path = tmp_path / "stats.txt"
    path.write_text("keep me\n")
    with pytest.raises(FileExistsError):
        any_timer.save_all_time_stats(str(path))
    assert path.read_text() == "keep me\n"
    fresh = tmp_path / "fresh.txt"
    any_timer.save_all_time_stats(str(fresh))
    out = io.StringIO()
    any_timer.print_all_time_stats(file=out)
    assert fresh.read_text() == out.getvalue()


@pytest.mark.parametrize("lib,method,message", [("wandb", "log_wb_all", "No Weights & Biases support"),
                                                ("mlflow", "log_mlflow_all", "No MLFlow support")])
def test_errors_logging_libraries_missing(any_timer, monkeypatch, lib, method, message):
    monkeypatch.setitem(sys.modules, lib, None)      # import fails as if not installed
    with pytest.raises(RuntimeError, match=message):
        getattr(any_timer, method)()


def test_log_wb_and_mlflow_prefixes(monkeypatch, quiet_gpu):
    logged: list[dict] = []
    monkeypatch.setitem(sys.modules, "wandb", types.SimpleNamespace(log=logged.append))
    monkeypatch.setitem(sys.modules, "mlflow", types.SimpleNamespace(log_metrics=logged.append))
    t = timer.Timer()
    t.start(TimeType.BATCH)
    t.end(TimeType.BATCH)
    t.log_wb_all("train")
    assert list(logged[-1]) == ["train/BATCH"] and logged[-1]["train/BATCH"] == t.get_time_stats("BATCH").mean
    g = timer.CPUGPUTimer()
    g.start(TimeType.IO)
    g.end(TimeType.IO)
    g.log_mlflow_all("train/")
    assert list(logged[-1]) == ["train/CPU/IO"]


# -------------------------------------------------------------------- API details
def test_time_stats_format_and_single_sample():
    s = timer.TimeStats(0.0123456, 1.0, 2.0, 3.0, 0.5)
    assert str(s) == "min: 0.01235 mean: 1.00000 median: 2.00000 max: 3.00000 stdev: 0.50000"
    t = timer.Timer()
    t.start(TimeType.EPOCH)
    t.end(TimeType.EPOCH)
    st = t.get_time_stats(TimeType.EPOCH)
    assert st.stdev == 0.0 and st.min == st.max == st.mean == st.median > 0


def test_unknown_key_has_no_times():
    t = timer.Timer()
    assert t.get_time(TimeType.COMM) == []
    with pytest.raises(ValueError, match="no times recorded for COMM"):
        t.get_time_stats(TimeType.COMM)
    out = io.StringIO()
    t.print_all_time_stats(file=out)
    assert out.getvalue() == "---\n"


def test_different_keys_nest_and_overlap():
    t = timer.Timer()
    t.start(TimeType.BATCH)
    t.start(TimeType.COMM)
    t.end(TimeType.BATCH)        # overlapping, not nested: allowed for different keys
    t.end(TimeType.COMM)
    assert len(t.get_time(TimeType.BATCH)) == len(t.get_time(TimeType.COMM)) == 1


def test_free_form_and_foreign_enum_keys():
    class Deep500TimeType(enum.Enum):   # stands for deep500.utils.timer.TimeType
        BATCH = 2

    t = timer.Timer()
    t.start("data/augment")
    t.end("data/augment")
    t.start("BATCH")                    # the name BATCH is TimeType.BATCH
    t.end(TimeType.BATCH)
    t.start(Deep500TimeType.BATCH)
    t.end("BATCH")
    assert len(t.get_time(TimeType.BATCH)) == 2
    assert len(t.get_time("data/augment")) == 1
    out = io.StringIO()
    t.print_all_time_stats(file=out)
    # get_time(BATCH) above completed BATCH first, so it is listed first (Deep500 order)
    assert out.getvalue().splitlines()[0::2] == ["BATCH", "data/augment", "---"]
    with pytest.raises(TypeError):
        t.start(3)
    with pytest.raises(ValueError, match="one line"):
        t.start("two\nlines")
    with pytest.raises(ValueError):
        t.start("   ")


def test_print_order_follows_deep500(quiet_gpu):
    """Deep500 lists keys in the order their first timings were completed, by first start."""
    t = timer.Timer()
    t.start(TimeType.EPOCH)
    t.start(TimeType.BATCH)
    t.start(TimeType.IO)
    t.end(TimeType.IO)
    t.end(TimeType.BATCH)
    t.complete_all()              # completes BATCH and IO (EPOCH is still open)
    t.end(TimeType.EPOCH)
    out = io.StringIO()
    t.print_all_time_stats(file=out)
    assert out.getvalue().splitlines()[0::2] == ["BATCH", "IO", "EPOCH", "---"]


# ------------------------------------------------------------------------ the log
HEADER_KEYS = {"traceq_timer", "writer", "timer", "epoch_ns", "perf_ns", "clock", "clock_impl",
               "cpu_synchronized", "host", "pid", "rank", "rank_from", "world_size", "local_rank",
               "device", "torch", "python", "log_flush", "nvtx", "record_function"}


def test_log_header_has_anchor_and_run_facts_only(tmp_path, monkeypatch):
    for v in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("SLURM_PROCID", "5")
    monkeypatch.setenv("SLURM_NTASKS", "8")
    secret = "sk-test-DO-NOT-STORE-4f1c9a"
    monkeypatch.setenv("TRACEQ_TEST_API_TOKEN", secret)
    before = time.time_ns()
    t = timer.Timer(log=tmp_path / "h.jsonl")
    t.start(TimeType.IO)
    t.end(TimeType.IO)
    raw = (tmp_path / "h.jsonl").read_text()
    assert secret not in raw and "TRACEQ_TEST_API_TOKEN" not in raw
    header, records = read_log(tmp_path / "h.jsonl")
    assert set(header) <= HEADER_KEYS
    assert header["traceq_timer"] == 1 and header["timer"] == "Timer"
    assert before <= header["epoch_ns"] <= time.time_ns()
    assert header["perf_ns"] <= records[0]["start_ns"] <= time.perf_counter_ns()
    assert header["rank"] == 5 and header["rank_from"] == "SLURM_PROCID" and header["world_size"] == 8
    assert header["host"] == socket.gethostname() and header["pid"] == os.getpid()
    torch = sys.modules.get("torch")
    assert header["torch"] == (torch.__version__ if torch is not None else None)
    assert records == [{"key": "IO", "start_ns": records[0]["start_ns"], "end_ns": records[0]["end_ns"],
                        "pid": os.getpid(), "tid": __import__("threading").get_native_id()}]


def test_log_from_env_variable_with_rank_placeholder(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv(timer.LOG_ENV, str(tmp_path / "run.rank{rank}.jsonl"))
    t = timer.Timer()
    assert t.log_path == str(tmp_path / "run.rank2.jsonl")
    t.start(TimeType.BATCH)
    t.end(TimeType.BATCH)
    t.close()
    assert read_log(tmp_path / "run.rank2.jsonl")[0]["rank"] == 2
    assert timer.Timer(log=False).log_path is None     # explicit opt-out beats the env


def test_log_refuses_to_overwrite_unless_asked(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text("old\n")
    with pytest.raises(FileExistsError):
        timer.Timer(log=path)
    assert path.read_text() == "old\n"
    t = timer.Timer(log=path, overwrite=True)
    t.close()
    assert read_log(path)[0]["traceq_timer"] == 1


def test_log_records_are_on_disk_when_end_returns(tmp_path):
    path = tmp_path / "live.jsonl"
    t = timer.Timer(log=path)
    t.start("step")
    t.end("step")
    assert [r["key"] for r in read_log(path)[1]] == ["step"]   # no close(), no flush call


def test_log_survives_a_crash(tmp_path):
    """kill -9 style exit: every completed region is in the log, the open one is not."""
    path = tmp_path / "crash.jsonl"
    code = textwrap.dedent(f"""
        import os
        from traceq import timer
        t = timer.Timer(log={str(path)!r})
        t.start(timer.TimeType.EPOCH)
        for i in range(3):
            t.start(timer.TimeType.BATCH)
            t.end(timer.TimeType.BATCH)
        os._exit(9)     # no atexit, no finalizers, no flushing
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 9, proc.stderr
    header, records = read_log(path)
    assert [r["key"] for r in records] == ["BATCH"] * 3
    assert path.read_bytes().endswith(b"\n")


def test_buffered_log_writes_at_complete_all_and_exit(tmp_path):
    """log_flush="complete_all": no syscall per region; a crash loses what came after the last
    complete_all(), a normal exit loses nothing."""
    path = tmp_path / "buffered.jsonl"
    code = textwrap.dedent(f"""
        import os, sys
        from traceq import timer
        t = timer.Timer(log={str(path)!r}, log_flush="complete_all")
        for i in range(3):
            t.start("step")
            t.end("step")
        n = sum(1 for _ in open({str(path)!r}))
        assert n == 1, n                # only the header so far
        t.complete_all()
        t.start("late")
        t.end("late")
        if sys.argv[1] == "crash":
            os._exit(9)
        # a normal exit: the timer is never closed, the exit handler flushes
    """)
    for how, keys in [("crash", ["step"] * 3), ("exit", ["step"] * 3 + ["late"])]:
        if path.exists():
            path.unlink()
        proc = subprocess.run([sys.executable, "-c", code, how], cwd=REPO, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == (9 if how == "crash" else 0), proc.stderr
        header, records = read_log(path)
        assert header["log_flush"] == "complete_all"
        assert [r["key"] for r in records] == keys, how
    with pytest.raises(ValueError, match="log_flush"):
        timer.Timer(log=False, log_flush="never")


def test_timers_sharing_a_log_path_share_one_file(tmp_path):
    path = tmp_path / "shared.jsonl"
    a, b = timer.Timer(log=path), timer.CPUGPUTimer(log=path)
    a.start("a")
    a.end("a")
    b.start("b")
    b.end("b")
    lines = path.read_text().splitlines()
    assert sum('"traceq_timer"' in line for line in lines) == 1
    assert [json.loads(line).get("key") for line in lines[1:]] == ["a", "b"]


def test_without_torch_markers_warn_and_continue():
    if HAS_TORCH:
        pytest.skip("torch is installed: see test_record_function_regions_reach_the_profiler")
    WARNED.discard("markers-torch")
    with pytest.warns(RuntimeWarning, match="need torch"):
        t = timer.Timer(nvtx=True, record_function=True)
    t.start("r")
    t.end("r")
    assert len(t.get_time("r")) == 1


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_record_function_regions_reach_the_profiler():
    import torch

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        t = timer.Timer(record_function=True)
        t.start("timer_region")
        torch.ones(4).sum()
        t.end("timer_region")
    assert "timer_region" in {e.name for e in prof.events()}


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_nvtx_without_cuda_build_does_not_crash():
    WARNED.discard("nvtx")
    t = timer.Timer(nvtx=True)
    if cuda_available():
        t.start("n")
    else:
        with pytest.warns(RuntimeWarning, match="NVTX"):
            t.start("n")
    t.end("n")
    assert len(t.get_time("n")) == 1


# -------------------------------------------------------------------------- GPU
class FakeEvent:
    """Stands in for torch.cuda.Event: each record() advances a fake GPU clock by 1.5 ms."""

    clock_ms = 0.0
    created = 0
    syncs = 0

    def __init__(self, enable_timing=False):
        assert enable_timing
        FakeEvent.created += 1
        self.t = None
        self.done = False

    def record(self):
        FakeEvent.clock_ms += 1.5
        self.t, self.done = FakeEvent.clock_ms, False

    def synchronize(self):
        FakeEvent.syncs += 1
        self.done = True

    def elapsed_time(self, end):
        assert end.done, "elapsed_time before the end event completed"
        return end.t - self.t


@pytest.fixture
def fake_cuda_torch(monkeypatch):
    fake = types.ModuleType("torch")
    fake.__version__ = "0.0+fake"
    fake.cuda = types.SimpleNamespace(
        is_available=lambda: True, device_count=lambda: 1, init=lambda: None, is_initialized=lambda: True,
        current_device=lambda: 0, Event=FakeEvent,
        get_device_properties=lambda d: types.SimpleNamespace(name="FakeGPU", multi_processor_count=7,
                                                              total_memory=1 << 30))
    monkeypatch.setitem(sys.modules, "torch", fake)
    FakeEvent.clock_ms, FakeEvent.created, FakeEvent.syncs = 0.0, 0, 0
    return fake


def test_cuda_event_path_with_a_fake_torch(tmp_path, fake_cuda_torch):
    """The CUDA-event code path, exercised without a GPU: no sync at end, events resolved at
    complete_all, pooled, and their durations logged and ingested."""
    log = tmp_path / "fakegpu.jsonl"
    tmr = timer.CPUGPUTimer(log=log)
    synced = 0
    for i in range(25):
        tmr.start(TimeType.BATCH, gpu=True)
        tmr.start(TimeType.IO)
        tmr.end(TimeType.IO)
        tmr.start(TimeType.FORWARD, gpu=True)
        tmr.end(TimeType.FORWARD, gpu=True)
        tmr.end(TimeType.BATCH, gpu=True)
        assert FakeEvent.syncs == synced          # start/end never synchronise
        if i % 10 == 0 and i:
            tmr.complete_all()                    # resolves (synchronises) the pending events
            assert FakeEvent.syncs > synced
            synced = FakeEvent.syncs
    assert FakeEvent.created <= 2 * 2 * 11        # pooled: bounded by the regions between completions
    fwd = tmr.get_time(TimeType.FORWARD, gpu=True)
    batch = tmr.get_time(TimeType.BATCH, gpu=True)
    assert fwd == pytest.approx([0.0015] * 25) and batch == pytest.approx([0.0045] * 25)
    assert tmr.get_time(TimeType.IO, gpu=True) == []
    out = io.StringIO()
    tmr.print_all_time_stats(file=out)
    gpu_section = out.getvalue().split("GPU\n", 1)[1]
    assert gpu_section.splitlines()[0::2] == ["BATCH", "FORWARD", "---"]
    tmr.close()

    header, records = read_log(log)
    assert header["device"] == "cuda:0" and header["torch"] == "0.0+fake"
    assert [r for r in records if "gpu_timing" in r] == [
        {"gpu_timing": "cuda_events", "pid": os.getpid(), "device_index": 0, "device_name": "FakeGPU",
         "sm_count": 7, "memory_bytes": 1 << 30}]
    durs = {r["gpu_id"]: r["gpu_dur_ns"] for r in records if "gpu_id" in r}
    gpu_regions = [r for r in records if "gpu" in r]
    assert len(gpu_regions) == 50 and {r["gpu"] for r in gpu_regions} == set(durs)
    assert sorted(durs.values()) == [1_500_000] * 25 + [4_500_000] * 25

    from traceq.ingest.timers.log import read_log as ingest_log
    parsed = ingest_log(log)
    assert parsed.warnings == []
    assert parsed.devices == [{"id": 0, "name": "FakeGPU", "sm_count": 7, "memory_bytes": 1 << 30}]
    rows = parsed.tables["regions"].to_pylist()
    by_name = {n: [(r["gpu_dur_ns"], r["device"]) for r in rows if r["name"] == n] for n in ("BATCH", "FORWARD", "IO")}
    assert by_name["BATCH"] == [(4_500_000, 0)] * 25 and by_name["FORWARD"] == [(1_500_000, 0)] * 25
    assert by_name["IO"] == [(None, None)] * 25


@pytest.mark.gpu
def test_gpu_events_measure_async_work(tmp_path):
    """CUDA events see the kernels' time; the CPU only sees the (asynchronous) launches."""
    if not HAS_TORCH:
        pytest.skip("torch is not installed")
    if not cuda_available():
        pytest.skip("CUDA is not available")
    import torch

    x = torch.randn(4096, 4096, device="cuda")
    torch.cuda.synchronize()
    log = tmp_path / "gpu.jsonl"
    tmr = timer.CPUGPUTimer(log=log)
    for _ in range(3):
        tmr.start(TimeType.FORWARD, gpu=True)
        for _ in range(20):
            x = (x @ x) / 4096
        tmr.end(TimeType.FORWARD, gpu=True)
    assert len(tmr._gpu.ends[TimeType.FORWARD]) == 3      # nothing resolved (synchronised) yet
    tmr.complete_all()
    cpu = tmr.get_time(TimeType.FORWARD)
    gpu = tmr.get_time(TimeType.FORWARD, gpu=True)
    assert len(gpu) == 3
    assert all(g > 0 for g in gpu)
    assert sum(gpu) > 2 * sum(cpu), (cpu, gpu)
    tmr.close()

    from traceq.ingest.timers.log import read_log as ingest_log
    header, records = read_log(log)
    assert any(r.get("gpu_timing") == "cuda_events" for r in records)
    regions = ingest_log(log).tables["regions"].to_pylist()
    durs = sorted(r["gpu_dur_ns"] for r in regions)
    assert durs == pytest.approx(sorted(g * 1e9 for g in gpu), abs=1)
    assert {r["device"] for r in regions} == {torch.cuda.current_device()}
