"""The timer's JSONL log: its format, the file writer and its flush policy, the header, and
where the log goes.

Format (version 1, `LOG_FORMAT_VERSION`; read by `traceq.ingest.timers.read_log`)
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

Writing: the file is opened `O_APPEND` and every write is whole lines in one unbuffered
`os.write`, so lines stay intact when forked children or several timers share the file (the
timers of one process that name the same path share one `LogWriter`). With log_flush="region"
each completed region is written at `end`; with log_flush="complete_all" (`buffered`) lines
are kept in memory and written at `complete_all()`, when stats are read, at `close()`, at
interpreter exit and every `LogWriter.BUFFER_LINES` lines. No fsync. A write error (disk full)
warns once and stops logging; it never stops the timing.

The path comes from `Timer(log=...)`, else the environment variable `LOG_ENV`
(TRACEQ_TIMER_LOG; `{rank}` and `{pid}` in it are replaced); `log=False` disables the log.
An existing file is refused (FileExistsError) unless `overwrite=True`.
"""
from __future__ import annotations

import errno
import json
import os
import socket
import sys
import threading
import time
from typing import Any

from .warn import warn_once

LOG_FORMAT_VERSION = 1
LOG_ENV = "TRACEQ_TIMER_LOG"

_perf_ns = time.perf_counter_ns
_tls = threading.local()      # caches the OS thread id (a syscall) per thread


def native_tid() -> int:
    """The OS thread id of the calling thread (cached per thread)."""
    try:
        return _tls.tid
    except AttributeError:
        _tls.tid = threading.get_native_id()
        return _tls.tid


class LogWriter:
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
        warn_once(f"log-{self.path}", f"traceq.timer: writing {self.path} failed ({exc.strerror or exc});"
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


_WRITERS: dict[str, LogWriter] = {}
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


def open_writer(path: str, overwrite: bool, header: dict[str, Any], buffered: bool) -> LogWriter:
    """The process's writer of the log at `path`, opened (writing `header`) if no timer has it
    open; a timer sharing it with log_flush="region" makes it unbuffered."""
    key = os.path.realpath(path)
    with _WRITERS_LOCK:
        w = _WRITERS.get(key)
        if w is None or w.fd < 0:
            w = _WRITERS[key] = LogWriter(path, overwrite, header, buffered)
        elif not buffered and w.buffered:    # sharing timers: the safer policy wins
            w.flush()
            w.buffered = False
        w.users += 1
        return w


def release_writer(w: LogWriter) -> None:
    """One timer is done with `w`: the last one closes the file."""
    with _WRITERS_LOCK:
        w.users -= 1
        if w.users <= 0:
            w.close()
            for k, v in list(_WRITERS.items()):
                if v is w:
                    del _WRITERS[k]


# ------------------------------------------------------------------------ the header
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


def header(timer_class: str, flags: dict[str, bool]) -> dict[str, Any]:
    """The log's first line for a timer of class `timer_class` with these option `flags`."""
    from ..version import __version__

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


def resolve_log_path(log) -> str | None:
    """The log path of a timer given `log=` (a path, None/True: the LOG_ENV variable, False:
    no log), with `{rank}` and `{pid}` replaced; None: no log."""
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
