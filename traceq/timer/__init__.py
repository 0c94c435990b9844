"""In-app region timer, Deep500-compatible, that also writes traceq's JSONL timer log.

Code written for Deep500 (`from deep500.utils import timer_torch as timer`) ports by changing
the import to `from traceq import timer`; `TimeType`, `TimeStats`, `Timer` and `CPUGPUTimer`
keep Deep500's names, signatures, errors and output:

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

The JSONL log (its format: traceq.timer.log; read by `traceq.ingest.timers.read_log`)
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

Modules: `timers` (Timer, CPUGPUTimer), `keys` (TimeType, key names), `clock` (start/end
bookkeeping), `cuda` (CUDA events), `stats` (TimeStats, the stats text), `log` (the JSONL
log), `warn` (warnings given once).
"""
from __future__ import annotations

from .keys import TimeType
from .log import LOG_ENV, LOG_FORMAT_VERSION
from .stats import TimeStats
from .timers import CPUGPUTimer, Timer

__all__ = ["TimeType", "TimeStats", "Timer", "CPUGPUTimer", "LOG_FORMAT_VERSION", "LOG_ENV"]
