"""Content hashes of source files (the idempotency key of the store), computed in background
threads: hashlib releases the GIL, so hashing overlaps start-up imports and parsing.

An ingest that fails stops its hashes still running (`stop`): a Python program that called it
would otherwise go on reading the file in the background, and wait at exit for it (1.7 s for a
1.5 GB file; the CLI leaves with os._exit and does not wait)."""
from __future__ import annotations

import hashlib
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="sha256")
_CHUNK = 1 << 22
_LIVE: dict[Future, threading.Event] = {}   # hashes not finished yet -> their stop signal
_LOCK = threading.Lock()


class Stopped(Exception):
    """The hash was stopped (`stop`) before it finished."""


def sha256_file(path: Path, stop: threading.Event | None = None) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            if stop is not None and stop.is_set():
                raise Stopped(str(path))
            h.update(chunk)
    return h.hexdigest()


def _submit(path: Path) -> Future:
    stop = threading.Event()
    fut = _POOL.submit(sha256_file, path, stop)
    with _LOCK:
        _LIVE[fut] = stop
    fut.add_done_callback(_forget)
    return fut


def _forget(fut: Future) -> None:
    with _LOCK:
        _LIVE.pop(fut, None)


def start_hashing(paths) -> dict[str, Future]:
    """Begin hashing every readable regular file among `paths` (files or directories, one level)."""
    futures: dict[str, Future] = {}
    for p in map(Path, paths):
        try:
            files = [e for e in p.iterdir() if e.is_file()] if p.is_dir() else [p] if p.is_file() else []
        except OSError:
            continue
        for f in files:
            futures[str(f)] = _submit(f)
    return futures


def hash_later(path: Path) -> Future:
    """Begin hashing one file in the background."""
    return _submit(Path(path))


def stop(futures) -> None:
    """Stop those of `futures` still queued or running (each ends at its next chunk, within ms)."""
    for fut in futures:
        with _LOCK:
            signal = _LIVE.get(fut)
        if signal is not None:
            signal.set()
            fut.cancel()
