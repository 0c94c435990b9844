"""Functions mapped over items on a thread pool, results in order (work that releases the GIL:
SQLite reads through ADBC, DuckDB queries)."""
from __future__ import annotations

import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def workers() -> int:
    return max(1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


def ordered_map(fn: Callable[[T], R], items: Iterable[T], n_workers: int | None = None,
                in_flight: int | None = None) -> Iterator[R]:
    """fn(item) for each item, computed on a thread pool, yielded in order; at most
    `in_flight` (default 2 x workers) results are in flight (bounded memory)."""
    n = n_workers or workers()
    limit = in_flight or 2 * n
    items = iter(items)
    if n == 1:
        yield from map(fn, items)
        return
    with ThreadPoolExecutor(max_workers=n) as pool:
        pending: deque = deque()
        try:
            for item in items:
                pending.append(pool.submit(fn, item))
                if len(pending) >= limit:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for f in pending:
                f.cancel()
