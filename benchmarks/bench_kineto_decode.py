"""Decode stage of Kineto ingest (JSON text -> raw Parquet parts): the fast parallel decoder
(`traceq.ingest.kineto.decode`, forked workers) against the robust single-process decoder, and msgspec's
typed decode of the same bytes alone (no column built: the single-core limit).

    python benchmarks/bench_kineto_decode.py TRACE.json [REPEATS]

Prints, per variant, the best wall time, the CPU time of this process (not its forked
workers), and µs per event.
The machine may be shared: repeat, take the best, compare ratios measured back to back.
"""
from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

import msgspec

from traceq.ingest.kineto import events as kineto_events
from traceq.ingest.kineto import reader as kineto_reader
from traceq.ingest.kineto.decode import decode_fast


def _typed(path: Path) -> int:
    trace = msgspec.json.decode(path.read_bytes(), type=kineto_events.Trace)
    return len(kineto_events.EVENTS.decode(b"[" + b",".join(trace.traceEvents) + b"]"))


def _fast(path: Path, threads: int) -> int:
    work = Path(tempfile.mkdtemp(prefix="tq-bench-decode-"))
    try:
        decoded = decode_fast(path, work, threads)
        if decoded is None:
            raise SystemExit(f"{path}: the fast decoder refused this trace")
        return decoded.n_items
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _robust(path: Path) -> int:
    import mmap

    from traceq.ingest.kineto import decode as kineto_decode

    work = Path(tempfile.mkdtemp(prefix="tq-bench-decode-"))
    fast, kineto_decode.decode_fast = kineto_decode.decode_fast, lambda *a: None
    try:
        with open(path, "rb") as f:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            try:
                return kineto_reader.decode_text(path, mm, work, path).n_items
            finally:
                mm.close()
    finally:
        kineto_decode.decode_fast = fast
        shutil.rmtree(work, ignore_errors=True)


def main(path: Path, repeats: int) -> None:
    variants = {"msgspec typed decode only": lambda: _typed(path),
                "robust decode (1 process)": lambda: _robust(path),
                "fast decode, 2 processes": lambda: _fast(path, 2)}
    for name, fn in variants.items():
        best = None
        for _ in range(repeats):
            w, c = time.perf_counter(), time.process_time()
            n = fn()
            w, c = time.perf_counter() - w, time.process_time() - c
            if best is None or w < best[0]:
                best = (w, c, n)
        w, c, n = best
        print(f"{name:32s} wall {w:6.3f} s  cpu {c:6.3f} s  {w / n * 1e6:6.3f} µs/event  ({n} items)")


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 3)
