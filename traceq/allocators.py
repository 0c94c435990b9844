"""Memory allocator settings for the ingest processes of traceq's command line.

Ingest's peak RSS is mostly freed memory that the allocators keep for reuse, not live data.
Two allocators hold it: polars' jemalloc (one arena per thread up to 4 x cores arenas, each
with its own dirty pages) and pyarrow's default memory pool (another jemalloc). `apply()`
sets, unless the user set them:

  _RJEM_MALLOC_CONF=narenas:1         polars' jemalloc: one arena for all threads (polars
                                      puts its own decay settings before it when it loads)
  ARROW_DEFAULT_MEMORY_POOL=system    pyarrow allocates with the C library's malloc

Measured on the benchmark's Kineto replicas, interleaved runs of the same code, medians
(2 cores): peak RSS 240 -> 210 MB (1x), 311 -> 243 MB (8x), 332 -> 263 MB (32x), and
334 -> 260 MB on the 2.6 M-row nsys export, at the same wall time (1x 0.46 s, 8x 1.18 s,
32x 3.8 s, nsys 1.1 s). Each variable is read once, when its library first allocates, so
`apply()` must run before polars and pyarrow are loaded; the ingest workers a command
spawns inherit the environment. Rejected: dirty_decay_ms:0 (-70 MB at 32x but +30 % wall),
POLARS_MAX_THREADS=1 (-26 MB, takes polars' threads away), narenas:2 (-35 MB).

Only `traceq ingest` under the command line does this (`cli.main`): a Python program that
calls traceq keeps its allocators as they are. traceq.ingest.memory returns the free pages of
Arrow's pool and of glibc's malloc between ingest's phases.
"""
from __future__ import annotations

import os
import sys

SETTINGS = {"_RJEM_MALLOC_CONF": "narenas:1", "ARROW_DEFAULT_MEMORY_POOL": "system"}


def apply() -> dict[str, str]:
    """Set each variable of SETTINGS the user did not set; nothing once polars or pyarrow is
    loaded (its allocator has read the environment by then). Returns what it set."""
    if "polars" in sys.modules or "pyarrow" in sys.modules:
        return {}
    done = {}
    for name, value in SETTINGS.items():
        if name not in os.environ:
            os.environ[name] = done[name] = value
    return done
