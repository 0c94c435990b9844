"""Content hashes of source files (the idempotency key of the store), computed in background
threads: hashlib releases the GIL, so hashing overlaps start-up imports and parsing."""
from __future__ import annotations

import hashlib
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="sha256")


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def start_hashing(paths) -> dict[str, Future]:
    """Begin hashing every readable regular file among `paths` (files or directories, one level)."""
    futures: dict[str, Future] = {}
    for p in map(Path, paths):
        try:
            files = [e for e in p.iterdir() if e.is_file()] if p.is_dir() else [p] if p.is_file() else []
        except OSError:
            continue
        for f in files:
            futures[str(f)] = _POOL.submit(sha256_file, f)
    return futures


def hash_later(path: Path) -> Future:
    """Begin hashing one file in the background."""
    return _POOL.submit(sha256_file, Path(path))
