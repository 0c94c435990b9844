"""The timers users script against: `Timer` (CPU) and `CPUGPUTimer` (CPU and CUDA events),
Deep500's API on the bookkeeping of traceq.timer.clock, with the JSONL log of
traceq.timer.log and optional NVTX / record_function markers. See the package docstring
(traceq.timer) for the semantics."""
from __future__ import annotations

import errno
import itertools
import json
import os
import time
import weakref
from typing import Any

from .clock import Clock, cpu_seconds
from .cuda import GPUBackend
from .keys import ALL_KEY, TimeType, norm, not_all
from .log import LogWriter, header, native_tid, open_writer, release_writer, resolve_log_path
from .stats import TimeStats, construct_stats, means, stats_text
from .warn import warn_once

_perf_ns = time.perf_counter_ns
_GPU_IDS = itertools.count()   # ids linking a region record to its later gpu_dur_ns record


class _TimerBase:
    """Log file, NVTX/record_function markers and the Deep500 printing/logging helpers that
    `Timer` and `CPUGPUTimer` share; not used on its own."""

    def __init__(self, log=None, *, overwrite: bool = False, log_flush: str = "region", nvtx: bool = False,
                 record_function: bool = False) -> None:
        if log_flush not in ("region", "complete_all"):
            raise ValueError(f"log_flush must be 'region' or 'complete_all', not {log_flush!r}")
        self._cpu = Clock(cpu_seconds)
        self._log: LogWriter | None = None
        self._start_tid: dict[Any, int] = {}
        self._marks: dict[Any, tuple] = {}
        self._nvtx = self._rf = None
        if nvtx or record_function:
            self._init_markers(nvtx, record_function)
        self._markers_on = self._nvtx is not None or self._rf is not None
        path = resolve_log_path(log)
        if path is not None:
            head = header(type(self).__name__, {"log_flush": log_flush, "nvtx": self._nvtx is not None,
                                                "record_function": self._rf is not None})
            self._log = open_writer(path, overwrite, head, log_flush == "complete_all")
            self._release = weakref.finalize(self, release_writer, self._log)

    # -------------------------------------------------------------- markers
    def _init_markers(self, nvtx: bool, record_function: bool) -> None:
        try:
            import torch
        except Exception:
            warn_once("markers-torch", "traceq.timer: nvtx/record_function need torch, which cannot be"
                      " imported; regions are not emitted as markers")
            return
        if nvtx:
            self._nvtx = torch.cuda.nvtx
        if record_function:
            self._rf = torch.profiler.record_function

    def _mark_start(self, name: str) -> None:
        nid = rf = None
        if self._nvtx is not None:
            try:
                nid = self._nvtx.range_start(name)
            except Exception as exc:
                self._nvtx = None
                self._markers_on = self._rf is not None
                warn_once("nvtx", f"traceq.timer: NVTX ranges are not available ({type(exc).__name__}:"
                          f" {exc}); nvtx=True is ignored", stacklevel=5)
        if self._rf is not None:
            rf = self._rf(name)
            rf.__enter__()
        self._marks[name] = (nid, rf)

    def _mark_end(self, name: str) -> None:
        nid, rf = self._marks.pop(name, (None, None))
        if nid is not None and self._nvtx is not None:
            self._nvtx.range_end(nid)
        if rf is not None:
            rf.__exit__(None, None, None)

    # -------------------------------------------------------------- output
    def _sections(self) -> list[tuple[str | None, Clock]]:
        return [(None, self._cpu)]

    def _completed_sections(self) -> list[tuple[str | None, Clock]]:
        """The sections, every clock completed (RuntimeError on an open region, before any
        clock is touched)."""
        sections = self._sections()
        for _, clock in sections:
            clock.check_balanced()
        for _, clock in sections:
            clock.complete_all()
        self._after_complete()
        return sections

    def print_all_time_stats(self, file: Any = None) -> None:
        """Print statistics for all keys with times (Deep500's format)."""
        print(stats_text(self._completed_sections()), end="", file=file)

    def save_all_time_stats(self, filename: str) -> None:
        """Save the statistics to `filename`, which must not exist."""
        if os.path.lexists(filename):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), filename)
        text = stats_text(self._completed_sections())
        with open(filename, "x", encoding="utf-8") as f:
            f.write(text)

    def log_wb_all(self, prefix: str = "") -> None:
        """Log each key's mean time to Weights & Biases (RuntimeError without wandb)."""
        try:
            import wandb
        except ImportError:
            raise RuntimeError("No Weights & Biases support") from None
        values = means(self._completed_sections(), prefix)
        if values:
            wandb.log(values)

    def log_mlflow_all(self, prefix: str = "") -> None:
        """Log each key's mean time to MLflow (RuntimeError without mlflow)."""
        try:
            import mlflow
        except ImportError:
            raise RuntimeError("No MLFlow support") from None
        values = means(self._completed_sections(), prefix)
        if values:
            mlflow.log_metrics(values)

    def _after_complete(self) -> None:
        if self._log is not None:
            self._log.flush()

    @property
    def log_path(self) -> str | None:
        """The JSONL log this timer writes, or None."""
        return None if self._log is None else self._log.path

    def close(self) -> None:
        """Resolve outstanding GPU timings, write them, and release the log file."""
        self.complete_all()
        if self._log is not None:
            self._log = None
            self._release()   # runs release_writer once (also at garbage collection / exit)

    def complete_all(self) -> None:  # overridden
        raise NotImplementedError


class Timer(_TimerBase):
    """Time regions of code on the CPU (`time.perf_counter_ns`); Deep500's `Timer`.

    `Timer(log=None, *, overwrite=False, log_flush="region", nvtx=False, record_function=False)`:
    see the traceq.timer docstring for the log file, its flush policy and the markers.
    """

    # start/end are the hot path (budget: < 5 µs a pair with the log): kept flat on purpose.
    def start(self, key) -> None:
        """Start timing a region of type `key`."""
        key = key._name_ if key.__class__ is TimeType else norm(key)
        if key == ALL_KEY:
            raise not_all()
        starts = self._cpu.starts[key]
        if len(starts) != len(self._cpu.ends[key]):
            raise RuntimeError(f"Detected nesting for timing region type {key}")
        if self._markers_on:
            self._mark_start(key)
        if self._log is not None:
            self._start_tid[key] = native_tid()
        starts.append(_perf_ns())

    def end(self, key) -> None:
        """End timing a region of type `key`."""
        key = key._name_ if key.__class__ is TimeType else norm(key)
        if key == ALL_KEY:
            raise not_all()
        starts = self._cpu.starts[key]
        ends = self._cpu.ends[key]
        if len(starts) != len(ends) + 1:
            raise RuntimeError(f"Unbalanced end for timing region type {key}")
        t = _perf_ns()
        ends.append(t)
        if self._log is not None:
            self._log.region(key, starts[-1], t, self._start_tid.pop(key, 0), None)
        if self._markers_on:
            self._mark_end(key)

    def get_time(self, key) -> list[float]:
        """All times (seconds) recorded for `key`; RuntimeError while `key` is open."""
        return self._cpu.get_time(norm(key))

    def get_time_stats(self, key) -> TimeStats:
        """Statistics of the times of `key`; ValueError when it has none."""
        key = norm(key)
        return construct_stats(self._cpu.get_time(key), key)

    def complete_all(self) -> None:
        """Complete all outstanding timings; open regions stay open."""
        self._cpu.complete_all(ignore_imbalanced=True)
        self._after_complete()


class CPUGPUTimer(_TimerBase):
    """Time regions on the CPU and, with `gpu=True`, on the GPU (CUDA events); Deep500's.

    `CPUGPUTimer(log=None, *, overwrite=False, log_flush="region", nvtx=False, record_function=False)`.
    Without torch or CUDA, GPU timing is not available: see the traceq.timer docstring.
    """

    def __init__(self, log=None, *, overwrite: bool = False, log_flush: str = "region", nvtx: bool = False,
                 record_function: bool = False) -> None:
        super().__init__(log, overwrite=overwrite, log_flush=log_flush, nvtx=nvtx,
                         record_function=record_function)
        self._backend: GPUBackend | None = None
        self._gpu = Clock(self._resolve_gpu)
        self._gpu_done: list[tuple[int, int]] = []   # (gpu id, ns) resolved, not yet logged

    # -------------------------------------------------------------- GPU
    def _gpu_backend(self) -> GPUBackend:
        b = self._backend
        if b is None:
            b = self._backend = GPUBackend()
            if not b.available:
                warn_once("gpu", f"traceq.timer: GPU timing not available ({b.reason}); gpu=True regions"
                          " are timed on the CPU only and get_time(key, gpu=True) returns []")
            if self._log is not None and not self._log.gpu_info_written:
                self._log.gpu_info_written = True
                info = {"gpu_timing": "cuda_events" if b.available else "unavailable",
                        "pid": self._log.pid, **b.info}
                if not b.available:
                    info["reason"] = b.reason
                self._log.lines(json.dumps(info, separators=(",", ":")) + "\n")
        return b

    def _resolve_gpu(self, start, end) -> float | None:
        event, gpu_id = end
        ns = self._backend.elapsed_ns(start, event) if self._backend is not None else None
        if ns is None:
            return None
        if gpu_id is not None:
            self._gpu_done.append((gpu_id, ns))
        return ns / 1e9

    def _after_complete(self) -> None:
        if self._gpu_done:
            done, self._gpu_done = self._gpu_done, []
            if self._log is not None:
                pid = self._log.pid
                self._log.lines("".join(f'{{"gpu_id":{i},"gpu_dur_ns":{ns},"pid":{pid}}}\n' for i, ns in done))
        super()._after_complete()

    # -------------------------------------------------------------- API
    def start(self, key, gpu: bool = False) -> None:
        """Start timing `key` on the CPU, and on the GPU too when `gpu`."""
        key = key._name_ if key.__class__ is TimeType else norm(key)
        if key == ALL_KEY:
            raise not_all()
        starts = self._cpu.starts[key]
        if len(starts) != len(self._cpu.ends[key]):
            raise RuntimeError(f"Detected nesting for timing region type {key}")
        if gpu:
            g = self._gpu
            if len(g.starts[key]) != len(g.ends[key]):
                raise RuntimeError(f"Detected nesting for timing region type {key}")
            backend = self._backend or self._gpu_backend()
        if self._markers_on:
            self._mark_start(key)
        if self._log is not None:
            self._start_tid[key] = native_tid()
        starts.append(_perf_ns())
        if gpu:
            g.starts[key].append(backend.record())    # inside the CPU region

    def end(self, key, gpu: bool = False) -> None:
        """End timing `key` on the CPU, and on the GPU too when `gpu` (no synchronisation)."""
        key = key._name_ if key.__class__ is TimeType else norm(key)
        if key == ALL_KEY:
            raise not_all()
        starts = self._cpu.starts[key]
        ends = self._cpu.ends[key]
        if len(starts) != len(ends) + 1:
            raise RuntimeError(f"Unbalanced end for timing region type {key}")
        gpu_id = None
        if gpu:
            g = self._gpu
            if len(g.starts[key]) != len(g.ends[key]) + 1:
                raise RuntimeError(f"Unbalanced end for timing region type {key}")
            event = (self._backend or self._gpu_backend()).record()
            if event is not None and self._log is not None:
                gpu_id = next(_GPU_IDS)
            g.ends[key].append((event, gpu_id))
        t = _perf_ns()
        ends.append(t)
        if self._log is not None:
            self._log.region(key, starts[-1], t, self._start_tid.pop(key, 0), gpu_id)
        if self._markers_on:
            self._mark_end(key)

    def _clock(self, gpu: bool) -> Clock:
        return self._gpu if gpu else self._cpu

    def get_time(self, key, gpu: bool = False) -> list[float]:
        """Times (seconds) of `key` on the CPU, or on the GPU with `gpu` ([] without CUDA)."""
        times = self._clock(gpu).get_time(norm(key))
        if gpu:
            self._after_complete()
        return times

    def get_time_stats(self, key, gpu: bool = False) -> TimeStats:
        """Statistics of `key` on the chosen clock; ValueError when it has no times."""
        key = norm(key)
        times = self.get_time(key, gpu)
        what = f"{key} on the GPU" if gpu else key
        if gpu and not times and self._backend is not None and not self._backend.available:
            what += f" (GPU timing not available: {self._backend.reason})"
        return construct_stats(times, what)

    def complete_all(self) -> None:
        """Complete all outstanding CPU and GPU timings (resolves CUDA events)."""
        self._cpu.complete_all(ignore_imbalanced=True)
        self._gpu.complete_all(ignore_imbalanced=True)
        self._after_complete()

    def _sections(self) -> list[tuple[str | None, Clock]]:
        return [("CPU", self._cpu), ("GPU", self._gpu)]
