"""The JSON text of a trace file as a memory map: the file itself, or for a .gz a plain file
inflated into the scratch folder (streaming, with limits against decompression bombs); and the
release of the mapped pages and of the heap once decoded.
"""
from __future__ import annotations

import mmap
import os
import zlib
from pathlib import Path

import numpy as np

from ...errors import BadInput


# ------------------------------------------------------------------ file -> text map
def open_text(path: Path, workdir: Path) -> tuple[Path, mmap.mmap]:
    """The JSON text as a memory map, and the file it maps: the file itself, or for a .gz a
    plain file inflated into `workdir` (streaming, with the bomb limits below). The mapped
    pages are released window by window as they are decoded (see `release`)."""
    try:
        with open(path, "rb") as f:
            if f.read(2) == b"\x1f\x8b":
                f.seek(0)
                text_path = _gunzip_to_file(f, path, workdir / "inflated.json")
            else:
                text_path = path
        with open(text_path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                raise BadInput("empty file", path)
            return text_path, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise BadInput(exc.strerror or str(exc), path) from None


# Decompression limits (bombs): expanded text with no trace event in its first NO_EVENT_LIMIT
# bytes is refused, and so is an expansion beyond max(RATIO_FLOOR, MAX_RATIO x compressed
# size) -- JSON traces compress 5-30x; 200x is whitespace or repetition, not events.
NO_EVENT_LIMIT = 64 << 20
MAX_RATIO = 200
RATIO_FLOOR = 256 << 20


def _gunzip_to_file(f, path: Path, out_path: Path) -> Path:
    """Inflate the .gz `f` into `out_path` piece by piece (never the whole text in memory)."""
    compressed = os.fstat(f.fileno()).st_size
    limit = max(RATIO_FLOOR, MAX_RATIO * compressed)
    d = zlib.decompressobj(wbits=47)
    pos, seen_event, tail = 0, False, b""
    try:
        with open(out_path, "wb") as out_f:
            while chunk := f.read(1 << 22):
                while chunk:
                    out = d.decompress(chunk, 1 << 24)
                    if not seen_event:   # an event has a "ph" key; look across chunk borders too
                        seen_event = b'"ph"' in tail + out[:8] or b'"ph"' in out
                        tail = out[-8:]
                        if not seen_event and pos + len(out) > NO_EVENT_LIMIT:
                            raise BadInput(f"no trace events in the first {NO_EVENT_LIMIT >> 20} MB of decompressed "
                                           f"data ({compressed / 1e6:.1f} MB compressed): not a trace, refused", path)
                    if pos + len(out) > limit:
                        raise BadInput(f"expands beyond {limit >> 20} MB ({MAX_RATIO}x its compressed size "
                                       f"{compressed / 1e6:.1f} MB): not a plausible trace, refused", path)
                    chunk = d.unconsumed_tail
                    if d.eof and d.unused_data:            # concatenated gzip members
                        chunk = d.unused_data + chunk
                        d = zlib.decompressobj(wbits=47)
                    out_f.write(out)
                    pos += len(out)
    except zlib.error as exc:
        raise BadInput(f"corrupt .gz file ({exc})", path) from None
    if not d.eof:
        raise BadInput("truncated .gz file (compressed stream ends early)", path)
    if pos == 0:
        raise BadInput("empty file", path)
    return out_path


def trim_heap() -> None:
    """Hand the freed per-event Python objects back to the OS (glibc keeps them otherwise)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def address(buf) -> int:
    return np.frombuffer(buf, dtype=np.uint8).ctypes.data


def release(mm: mmap.mmap, base: int, upto: int, done: int) -> int:
    """Drop the mapped pages of [done, upto) from memory (they are decoded already)."""
    page = mmap.PAGESIZE
    lo, hi = (done // page) * page, (upto // page) * page
    if hi > lo:
        mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
        return hi
    return done

