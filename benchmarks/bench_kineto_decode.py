"""Decode stage of Kineto ingest: the fast parallel decoder against msgspec's typed decode
of the same bytes (the single-core limit of the robust path, before any column is built).

    python benchmarks/bench_kineto_decode.py TRACE.json [REPEATS]

Prints, per variant, the best wall time and its CPU time (all threads), and µs per event.
The machine may be shared: repeat, take the best, compare ratios measured back to back.
"""
from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

import msgspec

from traceq.ingest import kineto
from traceq.ingest.kineto_decode import decode_fast


def _typed(path: Path) -> int:
    trace = msgspec.json.decode(path.read_bytes(), type=kineto._Trace)
    return len(kineto._EVENTS.decode(b"[" + b",".join(trace.traceEvents) + b"]"))


def _fast(path: Path, threads: int) -> int:
    work = Path(tempfile.mkdtemp(prefix="tq-bench-decode-"))
    try:
        decoded = decode_fast(path, work, threads)
        if decoded is None:
            raise SystemExit(f"{path}: the fast decoder refused this trace")
        return decoded.n_items
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(path: Path, repeats: int) -> None:
    variants = {"msgspec typed decode (1 core)": lambda: _typed(path),
                "fast decode, 1 thread": lambda: _fast(path, 1),
                "fast decode, 2 threads": lambda: _fast(path, 2)}
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
