"""In-app region timer, Deep500-compatible, that also writes traceq's JSONL timer log (DESIGN §6).

Code written for Deep500 (`from deep500.utils import timer_torch as timer`) ports by changing
the import to `from traceq import timer`; `TimeType`, `TimeStats`, `Timer` and `CPUGPUTimer`
keep Deep500's names, signatures, errors and output (see ../shared/DEEP500_API.md):

    tmr = timer.CPUGPUTimer(log="run.jsonl")          # or env TRACEQ_TIMER_LOG=run.jsonl
    tmr.start(timer.TimeType.BATCH, gpu=True)
    ...
    tmr.end(timer.TimeType.BATCH, gpu=True)
    tmr.complete_all()                                # every ~10-20 batches
    tmr.print_all_time_stats()

Semantics kept from Deep500
- Regions of different keys may nest or overlap; the same key may not nest: a second `start`
  of an open key raises RuntimeError, an `end` without a matching `start` raises RuntimeError.
  `TimeType.ALL` is rejected by `start`/`end` with ValueError.
- `get_time(key)` completes outstanding timings (RuntimeError if that key is still open) and
  returns the durations in seconds; `get_time_stats` gives `TimeStats(min, mean, median, max,
  stdev)` (stdev 0.0 below two samples); `complete_all()` tolerates open regions (they stay
  open); `print_all_time_stats` / `save_all_time_stats` (RuntimeError on open regions; the file
  must not exist) print Deep500's text format, with `CPU`/`GPU` sections for `CPUGPUTimer`;
  `log_wb_all` / `log_mlflow_all` log the means and raise RuntimeError without the library.
- `CPUGPUTimer.start/end(key, gpu=True)` time on the CPU always and on the GPU too (CUDA
  events on the current stream). `end` only records an event: nothing synchronises until times
  are read (`get_time(key, gpu=True)`, stats, printing) or `complete_all()` resolves them.

Differences (all deliberate, none changes working Deep500 code)
- Keys: besides `TimeType` members, free-form strings (`tmr.start("data/augment")`) and members
  of other enums (Deep500's own `TimeType`) are accepted. A key is identified by its *name*:
  the string "BATCH" and `TimeType.BATCH` are the same key, because the stats text and the
  log name keys only by name (so "ALL" is rejected like `TimeType.ALL`). Names must be
  non-blank and free of line breaks.
- No CUDA (or no torch): GPU timing is *not available* and is never a crash. The first
  `gpu=True` call warns once (RuntimeWarning) and such regions are timed on the CPU only; the
  GPU start/end bookkeeping still runs, so misuse raises exactly the errors it would raise on a
  GPU machine. `get_time(key, gpu=True)` then returns `[]` (no GPU samples exist — not zeros,
  not NaNs, which would read as measurements), `get_time_stats(key, gpu=True)` raises
  ValueError as for any key without samples, and the `GPU` section of the printed stats is
  empty. torch is imported only when `gpu=True`, `nvtx=True` or `record_function=True` is used.
- Deep500 caps live CUDA events at 200 and raises when they run out; here the event pool grows
  (calling `complete_all()` regularly still bounds it). `get_time` returns a copy of the list.
  `print_all_time_stats` checks every key before printing anything, skips keys without times
  (Deep500 raises ValueError on a key only ever read by `get_time`), and `save_all_time_stats`
  leaves no partial file when the check fails. `log_wb_all` does not echo the means to stdout.
  Otherwise errors, completion and print order match Deep500's `Timer` operation for operation
  (checked against its code on random start/end/get_time/complete_all/print sequences).

The JSONL log (format version 1; read by `traceq.ingest.timers.read_log`)
- Line 1, the header: `{"traceq_timer": 1, "epoch_ns", "perf_ns", ...}` — `epoch_ns`
  (`time.time_ns`) and `perf_ns` (`time.perf_counter_ns`) taken at the same moment, the anchor
  that maps region times to the epoch clock of Kineto/nsys traces; plus host, pid, rank and
  world size (only from RANK/SLURM_PROCID/OMPI_COMM_WORLD_RANK/PMI_RANK and
  WORLD_SIZE/SLURM_NTASKS/OMPI_COMM_WORLD_SIZE/PMI_SIZE), device, torch version (only when
  torch is already imported), python version. Never the environment, argv or anything else
  that may hold secrets.
- One line per completed region: `{"key", "start_ns", "end_ns", "pid", "tid"}` with
  perf_counter_ns times (durations are `end_ns - start_ns`) and the OS thread id of `start`;
  a region also timed on the GPU carries `"gpu": <id>`.
- `{"gpu_id", "gpu_dur_ns", "pid"}` when that region's CUDA events are resolved.
- `{"gpu_timing": "cuda_events"|"unavailable", "pid", ...}` once, when GPU timing starts
  (device index/name/SM count/memory, or the reason it is unavailable).

Flush policy (`log_flush`): by default ("region") every completed region is written at `end`
with one unbuffered `os.write` to a file opened `O_APPEND`, so it is in the kernel's page cache
before `end` returns: a process crash (exception, kill -9, OOM kill) loses nothing that
completed, only regions still open (whose end is unknown anyway). That is the point of a log
next to Deep500's in-memory stats — the runs worth diagnosing are often the ones that die —
and it costs one syscall, about 1-2 µs per region (`benchmarks/bench_timer.py`: ~2.5 µs per
start/end pair in all), inside the 5 µs budget; whole-line writes also keep lines intact when
forked children or several timers share the file. `log_flush="complete_all"` instead keeps
lines in memory and writes them at `complete_all()`, when stats are read, at `close()` and at
interpreter exit (and every 8192 lines): no syscall per region, for very fine-grained regions,
at the price of losing the lines since the last `complete_all()` on a crash. GPU durations
cannot be written at `end` without synchronising, so they follow as `gpu_dur_ns` records when
resolved (`complete_all()`, or reading GPU times); a crash loses at most the GPU durations since
the last `complete_all()` while their CPU records stay. No fsync: surviving a machine crash is
not worth milliseconds per region. A write error (disk full) warns once and stops logging; it
never stops training.

The log path comes from `Timer(log=...)`, else the environment variable TRACEQ_TIMER_LOG
(`{rank}` and `{pid}` in it are replaced, for one file per rank); `log=False` disables it. An
existing file is refused (FileExistsError) unless `overwrite=True`. Timers of one process that
name the same path share one file. `nvtx=True` also emits each region as an NVTX start/end
range (`torch.cuda.nvtx`) and `record_function=True` as a `torch.profiler.record_function`, so
the same regions show up in nsys and Kineto traces; when unavailable they are skipped with a
warning. Like Deep500's, a timer is not thread-safe: use one per thread.
"""
from __future__ import annotations

import enum
import errno
import itertools
import json
import os
import socket
import statistics
import sys
import threading
import time
import warnings
import weakref
from collections import defaultdict
from typing import Any, Callable, NamedTuple

__all__ = ["TimeType", "TimeStats", "Timer", "CPUGPUTimer", "LOG_FORMAT_VERSION", "LOG_ENV"]

LOG_FORMAT_VERSION = 1
LOG_ENV = "TRACEQ_TIMER_LOG"

_perf_ns = time.perf_counter_ns
_tls = threading.local()      # caches the OS thread id (a syscall) per thread


def _native_tid() -> int:
    try:
        return _tls.tid
    except AttributeError:
        _tls.tid = threading.get_native_id()
        return _tls.tid


class TimeType(enum.Enum):
    """Different quantity types for semantic timing (Deep500's keys)."""

    EPOCH = enum.auto()      # one complete pass over the data
    BATCH = enum.auto()      # one mini-batch
    FORWARD = enum.auto()    # forward propagation of one mini-batch
    BACKWARD = enum.auto()   # backward propagation of one mini-batch
    COMM = enum.auto()       # communication during one mini-batch
    IO = enum.auto()         # visible I/O wait for one mini-batch
    OTHER = enum.auto()      # catch-all
    ALL = enum.auto()        # special: rejected by start/end


class TimeStats(NamedTuple):
    """Statistics of the times of one key, in seconds."""

    min: float
    mean: float
    median: float
    max: float
    stdev: float

    def __str__(self) -> str:
        return (f"min: {self.min:.5f} mean: {self.mean:.5f} median: {self.median:.5f}"
                f" max: {self.max:.5f} stdev: {self.stdev:.5f}")


def _construct_stats(times: list[float], what: str) -> TimeStats:
    if not times:
        raise ValueError(f"no times recorded for {what}")
    return TimeStats(
        min=min(times),
        mean=statistics.mean(times),
        median=statistics.median(times),
        max=max(times),
        stdev=statistics.stdev(times) if len(times) > 1 else 0.0,
    )


# ------------------------------------------------------------------------------- keys
# Internally a key is its name (a str): names identify keys in the stats text and the log,
# and str hashes are cached (Enum.__hash__ is Python code, ~10 calls per start/end pair).
_KEY_CACHE: dict[Any, str] = {}
_KEY_CACHE_MAX = 100_000
_ALL = "ALL"


def _norm(key) -> str:
    """The key's name: `TimeType.BATCH` -> "BATCH", "data/augment" -> itself (validated once)."""
    if key.__class__ is TimeType:
        return key._name_
    try:
        return _KEY_CACHE[key]
    except (KeyError, TypeError):
        return _norm_slow(key)


def _norm_slow(key) -> str:
    if isinstance(key, enum.Enum):
        name = key.name
    elif isinstance(key, str):
        name = key
    else:
        raise TypeError(f"timer keys are TimeType members or strings, not {type(key).__name__}")
    if not isinstance(name, str) or not name.strip() or "\n" in name or "\r" in name:
        raise ValueError(f"timer key {name!r}: names must be non-blank and on one line")
    name = sys.intern(str(name))
    if len(_KEY_CACHE) < _KEY_CACHE_MAX:
        _KEY_CACHE[key] = name
    return name


def _not_all() -> ValueError:
    return ValueError("Cannot use TimeType.ALL here")


# ------------------------------------------------------------------------------ clocks
class _Clock:
    """Deep500's per-clock bookkeeping: starts/ends per key, paired by position, and times."""

    __slots__ = ("starts", "ends", "times", "resolve")

    def __init__(self, resolve: Callable[[Any, Any], float | None]):
        self.starts: defaultdict[Any, list] = defaultdict(list)
        self.ends: defaultdict[Any, list] = defaultdict(list)
        self.times: dict[Any, list[float]] = {}   # insertion order = Deep500's print order
        self.resolve = resolve

    def is_open(self, key) -> bool:
        return len(self.starts.get(key, ())) != len(self.ends.get(key, ()))

    def check_balanced(self) -> None:
        for key in self.starts:
            if self.is_open(key):
                raise RuntimeError(f"Unbalanced start/end for region type {key}")

    def complete(self, key, ignore_imbalanced: bool = False) -> None:
        starts = self.starts.get(key) or []
        ends = self.ends.get(key) or []
        if not starts and not ends:
            return
        if not ignore_imbalanced and len(starts) != len(ends):
            raise RuntimeError(f"Unbalanced start/end for region type {key}")
        n = len(ends)
        if not n:
            return
        resolve = self.resolve
        for s, e in zip(starts, ends):
            t = resolve(s, e)
            if t is not None:
                self.times.setdefault(key, []).append(t)
        del starts[:n]
        ends.clear()

    def complete_all(self, ignore_imbalanced: bool = False) -> None:
        for key in list(self.starts):
            self.complete(key, ignore_imbalanced)

    def get_time(self, key) -> list[float]:
        self.complete(key)
        return list(self.times.setdefault(key, []))   # Deep500 creates the entry here (print order)


def _cpu_seconds(start_ns: int, end_ns: int) -> float:
    return (end_ns - start_ns) / 1e9


_GPU_IDS = itertools.count()   # ids linking a region record to its later gpu_dur_ns record
_WARNED: set[str] = set()


def _warn_once(tag: str, message: str, stacklevel: int = 4) -> None:
    if tag not in _WARNED:
        _WARNED.add(tag)
        warnings.warn(message, RuntimeWarning, stacklevel=stacklevel)


class _GPUBackend:
    """CUDA events through torch, or 'not available' (record() -> None, no times)."""

    def __init__(self) -> None:
        self.available = False
        self.reason = ""
        self.info: dict[str, Any] = {}
        self._free: list = []
        self._event = None
        try:
            import torch
        except ImportError:
            self.reason = "torch is not installed"
            return
        except Exception as exc:  # a broken install must not crash the training
            self.reason = f"torch cannot be imported ({type(exc).__name__}: {exc})"
            return
        try:
            if not torch.cuda.is_available() or torch.cuda.device_count() < 1:
                self.reason = "CUDA is not available"
                return
            torch.cuda.init()
            dev = torch.cuda.current_device()
            props = torch.cuda.get_device_properties(dev)
            self.info = {"device_index": int(dev), "device_name": str(props.name),
                         "sm_count": int(props.multi_processor_count),
                         "memory_bytes": int(props.total_memory)}
        except Exception as exc:
            self.reason = f"CUDA initialisation failed ({type(exc).__name__}: {exc})"
            return
        self._event = torch.cuda.Event
        self.available = True

    def record(self):
        if not self.available:
            return None
        ev = self._free.pop() if self._free else self._event(enable_timing=True)
        ev.record()
        return ev

    def elapsed_ns(self, start, end) -> int | None:
        if start is None or end is None:
            return None
        end.synchronize()
        ns = round(start.elapsed_time(end) * 1e6)   # ms -> ns
        self._free.append(start)
        self._free.append(end)
        return ns


# --------------------------------------------------------------------------------- log
class _LogWriter:
    """One open JSONL log: the header at open, then whole lines via single os.write calls.

    `buffered` (log_flush="complete_all") keeps completed lines in memory until `flush()`.
    """

    BUFFER_LINES = 8192   # buffered mode writes at least this often

    def __init__(self, path: str, overwrite: bool, header: dict[str, Any], buffered: bool = False):
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | (os.O_TRUNC if overwrite else os.O_EXCL)
        try:
            self.fd = os.open(path, flags, 0o644)
        except FileExistsError:
            raise FileExistsError(errno.EEXIST, "timer log exists (pass overwrite=True to replace it)",
                                  path) from None
        self.path = path
        self.pid = os.getpid()
        self.users = 0
        self.broken = False
        self._key_json: dict[Any, str] = {}
        self.gpu_info_written = False
        self.buffered = buffered
        self.buf: list[str] = []
        self.write_bytes((json.dumps(header, separators=(",", ":")) + "\n").encode())

    def lines(self, text: str) -> None:
        """Write (or, buffered, queue) whole lines of text."""
        if self.buffered:
            self.buf.append(text)
        else:
            self.write_bytes(text.encode())

    def flush(self) -> None:
        if self.buf:
            buf, self.buf = self.buf, []
            self.write_bytes("".join(buf).encode())

    def key_json(self, key) -> str:
        kj = self._key_json.get(key)
        if kj is None:
            kj = self._key_json[key] = json.dumps(key, ensure_ascii=False)
        return kj

    def write_bytes(self, data: bytes) -> None:
        """Write whole lines (a partial write, e.g. disk full, is finished or logging stops)."""
        if self.broken:
            return
        try:
            n = os.write(self.fd, data)
            while n < len(data):   # regular files write everything unless the disk is full
                data = data[n:]
                n = os.write(self.fd, data)
        except OSError as exc:
            self._failed(exc)

    def _failed(self, exc: OSError) -> None:
        self.broken = True
        _warn_once(f"log-{self.path}", f"traceq.timer: writing {self.path} failed ({exc.strerror or exc});"
                   " timer logging stopped, timing continues", stacklevel=6)

    def region(self, key: str, start_ns: int, end_ns: int, tid: int, gpu_id: int | None) -> None:
        """Write one completed region (hot path: one f-string, one os.write)."""
        kj = self._key_json.get(key) or self.key_json(key)
        if gpu_id is None:
            line = f'{{"key":{kj},"start_ns":{start_ns},"end_ns":{end_ns},"pid":{self.pid},"tid":{tid}}}\n'
        else:
            line = (f'{{"key":{kj},"start_ns":{start_ns},"end_ns":{end_ns},"pid":{self.pid},"tid":{tid},'
                    f'"gpu":{gpu_id}}}\n')
        if self.buffered:
            self.buf.append(line)
            if len(self.buf) >= self.BUFFER_LINES:
                self.flush()
            return
        if self.broken:
            return
        data = line.encode()
        try:
            n = os.write(self.fd, data)
        except OSError as exc:
            self._failed(exc)
            return
        if n != len(data):
            self.write_bytes(data[n:])

    def close(self) -> None:
        self.flush()
        if self.fd >= 0:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = -1
            self.broken = True


_WRITERS: dict[str, _LogWriter] = {}
_WRITERS_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    global _tls
    _tls = threading.local()   # the child's thread has a new OS thread id
    pid = os.getpid()
    for w in list(_WRITERS.values()):
        w.pid = pid
        w.buf = []             # the parent writes its own buffered lines


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


_RANK_VARS = ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
_SIZE_VARS = ("WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
_LOCAL_RANK_VARS = ("LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID")


def _env_int(names: tuple[str, ...]) -> tuple[int | None, str | None]:
    """The first of `names` set to an integer; reads only these variables."""
    for name in names:
        value = os.environ.get(name)
        if value is not None and value.strip().lstrip("-").isdigit():
            return int(value), name
    return None, None


def _clock_anchor() -> tuple[int, int]:
    """(epoch_ns, perf_ns) read at the same moment: the tightest of a few bracketed reads."""
    best = None
    for _ in range(5):
        p0 = _perf_ns()
        e = time.time_ns()
        p1 = _perf_ns()
        if best is None or p1 - p0 < best[0]:
            best = (p1 - p0, e, (p0 + p1) // 2)
    return best[1], best[2]


def _device_now() -> str:
    """What the process computes on, as far as is known without initialising CUDA."""
    torch = sys.modules.get("torch")
    if torch is None:
        return "cpu"
    try:
        if torch.cuda.is_initialized():
            return f"cuda:{torch.cuda.current_device()}"
        if torch.cuda.is_available():
            return "cuda"
    except Exception:
        pass
    return "cpu"


def _header(timer_class: str, flags: dict[str, bool]) -> dict[str, Any]:
    from .version import __version__

    epoch_ns, perf_ns = _clock_anchor()
    rank, rank_var = _env_int(_RANK_VARS)
    world_size, _ = _env_int(_SIZE_VARS)
    local_rank, _ = _env_int(_LOCAL_RANK_VARS)
    torch = sys.modules.get("torch")
    try:
        clock_impl = time.get_clock_info("perf_counter").implementation
    except Exception:
        clock_impl = None
    return {
        "traceq_timer": LOG_FORMAT_VERSION,
        "writer": f"traceq {__version__}",
        "timer": timer_class,
        "epoch_ns": epoch_ns,
        "perf_ns": perf_ns,
        "clock": "perf_counter_ns",
        "clock_impl": clock_impl,
        "cpu_synchronized": False,   # CPU times are not synchronised with the GPU
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "rank": rank,
        "rank_from": rank_var,
        "world_size": world_size,
        "local_rank": local_rank,
        "device": _device_now(),
        "torch": getattr(torch, "__version__", None) if torch is not None else None,
        "python": ".".join(map(str, sys.version_info[:3])),
        **flags,
    }


def _resolve_log_path(log) -> str | None:
    if log is False:
        return None
    if log is None or log is True:
        env = os.environ.get(LOG_ENV)
        if not env:
            if log is True:
                raise ValueError(f"log=True needs the {LOG_ENV} environment variable")
            return None
        log = env
    path = os.fspath(log)
    if "{rank}" in path:
        rank, _ = _env_int(_RANK_VARS)
        path = path.replace("{rank}", str(rank if rank is not None else 0))
    return path.replace("{pid}", str(os.getpid()))


def _open_writer(path: str, overwrite: bool, header: dict[str, Any], buffered: bool) -> _LogWriter:
    key = os.path.realpath(path)
    with _WRITERS_LOCK:
        w = _WRITERS.get(key)
        if w is None or w.fd < 0:
            w = _WRITERS[key] = _LogWriter(path, overwrite, header, buffered)
        elif not buffered and w.buffered:    # sharing timers: the safer policy wins
            w.flush()
            w.buffered = False
        w.users += 1
        return w


def _release_writer(w: _LogWriter) -> None:
    with _WRITERS_LOCK:
        w.users -= 1
        if w.users <= 0:
            w.close()
            for k, v in list(_WRITERS.items()):
                if v is w:
                    del _WRITERS[k]


# ------------------------------------------------------------------------ the timers
class _TimerBase:
    """Log file, NVTX/record_function markers and the Deep500 printing/logging helpers."""

    def __init__(self, log=None, *, overwrite: bool = False, log_flush: str = "region", nvtx: bool = False,
                 record_function: bool = False) -> None:
        if log_flush not in ("region", "complete_all"):
            raise ValueError(f"log_flush must be 'region' or 'complete_all', not {log_flush!r}")
        self._cpu = _Clock(_cpu_seconds)
        self._log: _LogWriter | None = None
        self._start_tid: dict[Any, int] = {}
        self._marks: dict[Any, tuple] = {}
        self._nvtx = self._rf = None
        if nvtx or record_function:
            self._init_markers(nvtx, record_function)
        self._markers_on = self._nvtx is not None or self._rf is not None
        path = _resolve_log_path(log)
        if path is not None:
            header = _header(type(self).__name__, {"log_flush": log_flush, "nvtx": self._nvtx is not None,
                                                   "record_function": self._rf is not None})
            self._log = _open_writer(path, overwrite, header, log_flush == "complete_all")
            self._release = weakref.finalize(self, _release_writer, self._log)

    # -------------------------------------------------------------- markers
    def _init_markers(self, nvtx: bool, record_function: bool) -> None:
        try:
            import torch
        except Exception:
            _warn_once("markers-torch", "traceq.timer: nvtx/record_function need torch, which cannot be"
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
                _warn_once("nvtx", f"traceq.timer: NVTX ranges are not available ({type(exc).__name__}:"
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
    def _sections(self) -> list[tuple[str | None, _Clock]]:
        return [(None, self._cpu)]

    def _stats_text(self) -> str:
        sections = self._sections()
        for _, clock in sections:
            clock.check_balanced()
        for _, clock in sections:
            clock.complete_all()
        self._after_complete()
        lines: list[str] = []
        for title, clock in sections:
            if title is not None:
                lines.append(title)
            for key, times in clock.times.items():
                if times:
                    lines.append(key)
                    lines.append(str(_construct_stats(times, key)))
            lines.append("---")
        return "\n".join(lines) + "\n"

    def print_all_time_stats(self, file: Any = None) -> None:
        """Print statistics for all keys with times (Deep500's format)."""
        print(self._stats_text(), end="", file=file)

    def save_all_time_stats(self, filename: str) -> None:
        """Save the statistics to `filename`, which must not exist."""
        if os.path.lexists(filename):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), filename)
        text = self._stats_text()
        with open(filename, "x", encoding="utf-8") as f:
            f.write(text)

    def _means(self, prefix: str) -> dict[str, float]:
        sections = self._sections()
        for _, clock in sections:
            clock.check_balanced()
        for _, clock in sections:
            clock.complete_all()
        self._after_complete()
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        means = {}
        for title, clock in sections:
            sub = prefix + (f"{title}/" if title else "")
            for key, times in clock.times.items():
                if times:
                    means[sub + key] = statistics.mean(times)
        return means

    def log_wb_all(self, prefix: str = "") -> None:
        """Log each key's mean time to Weights & Biases (RuntimeError without wandb)."""
        try:
            import wandb
        except ImportError:
            raise RuntimeError("No Weights & Biases support") from None
        means = self._means(prefix)
        if means:
            wandb.log(means)

    def log_mlflow_all(self, prefix: str = "") -> None:
        """Log each key's mean time to MLflow (RuntimeError without mlflow)."""
        try:
            import mlflow
        except ImportError:
            raise RuntimeError("No MLFlow support") from None
        means = self._means(prefix)
        if means:
            mlflow.log_metrics(means)

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
            self._release()   # runs _release_writer once (also at garbage collection / exit)

    def complete_all(self) -> None:  # overridden
        raise NotImplementedError


class Timer(_TimerBase):
    """Time regions of code on the CPU (`time.perf_counter_ns`); Deep500's `Timer`.

    `Timer(log=None, *, overwrite=False, log_flush="region", nvtx=False, record_function=False)`:
    see the module docstring for the log file, its flush policy and the markers.
    """

    # start/end are the hot path (budget: < 5 µs a pair with the log): kept flat on purpose.
    def start(self, key) -> None:
        """Start timing a region of type `key`."""
        key = key._name_ if key.__class__ is TimeType else _norm(key)
        if key == _ALL:
            raise _not_all()
        starts = self._cpu.starts[key]
        if len(starts) != len(self._cpu.ends[key]):
            raise RuntimeError(f"Detected nesting for timing region type {key}")
        if self._markers_on:
            self._mark_start(key)
        if self._log is not None:
            self._start_tid[key] = _native_tid()
        starts.append(_perf_ns())

    def end(self, key) -> None:
        """End timing a region of type `key`."""
        key = key._name_ if key.__class__ is TimeType else _norm(key)
        if key == _ALL:
            raise _not_all()
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
        return self._cpu.get_time(_norm(key))

    def get_time_stats(self, key) -> TimeStats:
        """Statistics of the times of `key`; ValueError when it has none."""
        key = _norm(key)
        return _construct_stats(self._cpu.get_time(key), key)

    def complete_all(self) -> None:
        """Complete all outstanding timings; open regions stay open."""
        self._cpu.complete_all(ignore_imbalanced=True)
        self._after_complete()


class CPUGPUTimer(_TimerBase):
    """Time regions on the CPU and, with `gpu=True`, on the GPU (CUDA events); Deep500's.

    `CPUGPUTimer(log=None, *, overwrite=False, log_flush="region", nvtx=False, record_function=False)`.
    Without torch or CUDA, GPU timing is not available: see the module docstring.
    """

    def __init__(self, log=None, *, overwrite: bool = False, log_flush: str = "region", nvtx: bool = False,
                 record_function: bool = False) -> None:
        super().__init__(log, overwrite=overwrite, log_flush=log_flush, nvtx=nvtx,
                         record_function=record_function)
        self._backend: _GPUBackend | None = None
        self._gpu = _Clock(self._resolve_gpu)
        self._gpu_done: list[tuple[int, int]] = []   # (gpu id, ns) resolved, not yet logged

    # -------------------------------------------------------------- GPU
    def _gpu_backend(self) -> _GPUBackend:
        b = self._backend
        if b is None:
            b = self._backend = _GPUBackend()
            if not b.available:
                _warn_once("gpu", f"traceq.timer: GPU timing not available ({b.reason}); gpu=True regions"
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
        key = key._name_ if key.__class__ is TimeType else _norm(key)
        if key == _ALL:
            raise _not_all()
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
            self._start_tid[key] = _native_tid()
        starts.append(_perf_ns())
        if gpu:
            g.starts[key].append(backend.record())    # inside the CPU region

    def end(self, key, gpu: bool = False) -> None:
        """End timing `key` on the CPU, and on the GPU too when `gpu` (no synchronisation)."""
        key = key._name_ if key.__class__ is TimeType else _norm(key)
        if key == _ALL:
            raise _not_all()
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

    def _clock(self, gpu: bool) -> _Clock:
        return self._gpu if gpu else self._cpu

    def get_time(self, key, gpu: bool = False) -> list[float]:
        """Times (seconds) of `key` on the CPU, or on the GPU with `gpu` ([] without CUDA)."""
        times = self._clock(gpu).get_time(_norm(key))
        if gpu:
            self._after_complete()
        return times

    def get_time_stats(self, key, gpu: bool = False) -> TimeStats:
        """Statistics of `key` on the chosen clock; ValueError when it has no times."""
        key = _norm(key)
        times = self.get_time(key, gpu)
        what = f"{key} on the GPU" if gpu else key
        if gpu and not times and self._backend is not None and not self._backend.available:
            what += f" (GPU timing not available: {self._backend.reason})"
        return _construct_stats(times, what)

    def complete_all(self) -> None:
        """Complete all outstanding CPU and GPU timings (resolves CUDA events)."""
        self._cpu.complete_all(ignore_imbalanced=True)
        self._gpu.complete_all(ignore_imbalanced=True)
        self._after_complete()

    def _sections(self) -> list[tuple[str | None, _Clock]]:
        return [("CPU", self._cpu), ("GPU", self._gpu)]
