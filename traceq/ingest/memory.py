"""Give freed memory back to the operating system between the phases of an ingest.

Decoding a large trace allocates and frees far more than it keeps: msgspec's structs and the
text slices (glibc malloc), Arrow's column buffers (Arrow's default pool: glibc malloc too
under `traceq ingest`, see traceq.allocators, else mimalloc or jemalloc). The allocators keep
freed pages for reuse, so after decoding a 870 MB trace the process held ~50 MB it no longer
used, and translation's working set came on top of it. Returning those pages at the phase
boundaries starts translation that much lower (32x: 173 MB, not ~215 MB); it costs
microseconds. polars' own allocator (jemalloc) cannot be asked from here: traceq.allocators
gives it one arena instead.
"""
from __future__ import annotations

import ctypes
import sys

_libc = None


def release() -> None:
    """Return the free pages of Arrow's memory pool and of glibc's malloc to the system."""
    global _libc
    if "pyarrow" in sys.modules:
        sys.modules["pyarrow"].default_memory_pool().release_unused()
    if not sys.platform.startswith("linux"):
        return
    if _libc is None:
        try:
            _libc = ctypes.CDLL(None)   # the process's own symbols: libc's among them
            _libc.malloc_trim.argtypes = [ctypes.c_size_t]
        except (OSError, AttributeError):   # not glibc (musl has no malloc_trim)
            _libc = False
    if _libc:
        _libc.malloc_trim(0)
