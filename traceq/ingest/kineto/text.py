"""The JSON text of a trace file as a memory map: the file itself, or for a .gz a plain file
inflated into the scratch folder piece by piece (`Inflating`: the fastest inflater installed,
limits against decompression bombs; the fast decoder decodes the pieces while they come, see
`decode`); and the release of the mapped pages and of the heap once decoded.
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
    gz = open_gz(path, workdir)
    return (path, map_text(path, path)) if gz is None else (gz.finish(), map_text(gz.path, path))


def map_text(text_path: Path, source: Path) -> mmap.mmap:
    """A read-only map of the plain text `text_path` (`source` names the file in errors)."""
    try:
        with open(text_path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                raise BadInput("empty file", source)
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise BadInput(exc.strerror or str(exc), source) from None


def open_gz(path: Path, workdir: Path) -> Inflating | None:
    """An `Inflating` of `path` into `workdir` when it is gzip-compressed, else None."""
    try:
        with open(path, "rb") as f:
            if f.read(2) != b"\x1f\x8b":
                return None
        return Inflating(path, workdir / "inflated.json")
    except OSError as exc:
        raise BadInput(exc.strerror or str(exc), path) from None


def inflater():
    """(new decompressor, its error class): ISA-L's (python-isal) when installed, else
    zlib-ng's, else zlib's. The same stream and the same text, inflated 2-3x faster than
    zlib. TRACEQ_INFLATE=zlib (or isal, zlib-ng) picks one."""
    asked = os.environ.get("TRACEQ_INFLATE", "").strip().lower()
    for name in (asked,) if asked else ("isal", "zlib-ng"):
        try:
            if name == "isal":
                from isal import isal_zlib as mod
            elif name == "zlib-ng":
                from zlib_ng import zlib_ng as mod
            else:
                break
        except ImportError:
            continue
        return (lambda: mod.decompressobj(wbits=47)), mod.error
    return (lambda: zlib.decompressobj(wbits=47)), zlib.error


class Inflating:
    """A .gz being inflated into the plain file `path`: `pieces()` yields each piece of text
    once it is written (and flushed) there, `written` counts the bytes on disk, `finish()`
    writes the rest. Never the whole text in memory: pieces of at most `PIECE` bytes."""

    PIECE = 1 << 22

    def __init__(self, source: Path, path: Path):
        self.source, self.path, self.written = source, path, 0
        self._f = open(source, "rb")
        self._out = open(path, "wb")
        self._it = _inflate(self._f, source, self.PIECE)

    def pieces(self):
        for piece in self._it:
            self._out.write(piece)
            self._out.flush()
            self.written += len(piece)
            yield piece

    def finish(self) -> Path:
        """Inflate the rest; the plain file (BadInput when the .gz holds no text)."""
        for _ in self.pieces():
            pass
        self.close()
        if self.written == 0:
            raise BadInput("empty file", self.source)
        return self.path

    def close(self) -> None:
        self._f.close()
        self._out.close()


# Decompression limits (bombs): expanded text with no trace event in its first NO_EVENT_LIMIT
# bytes is refused, and so is an expansion beyond max(RATIO_FLOOR, MAX_RATIO x compressed
# size) -- JSON traces compress 5-30x; 200x is whitespace or repetition, not events.
NO_EVENT_LIMIT = 64 << 20
MAX_RATIO = 200
RATIO_FLOOR = 256 << 20


def _inflate(f, path: Path, piece: int):
    """The text of the .gz `f`, piece by piece of at most `piece` bytes: concatenated members
    in turn, the limits above; BadInput when corrupt or truncated."""
    compressed = os.fstat(f.fileno()).st_size
    limit = max(RATIO_FLOOR, MAX_RATIO * compressed)
    new, error = inflater()
    d = new()
    pos, seen_event, tail = 0, False, b""
    try:
        while chunk := f.read(1 << 22):
            while chunk:
                if d.eof:   # concatenated gzip members: the next one
                    d = new()
                out = d.decompress(chunk, piece)
                if not seen_event:   # an event has a "ph" key; look across chunk borders too
                    seen_event = b'"ph"' in tail + out[:8] or b'"ph"' in out
                    tail = out[-8:]
                    if not seen_event and pos + len(out) > NO_EVENT_LIMIT:
                        raise BadInput(f"no trace events in the first {NO_EVENT_LIMIT >> 20} MB of decompressed "
                                       f"data ({compressed / 1e6:.1f} MB compressed): not a trace, refused", path)
                if pos + len(out) > limit:
                    raise BadInput(f"expands beyond {limit >> 20} MB ({MAX_RATIO}x its compressed size "
                                   f"{compressed / 1e6:.1f} MB): not a plausible trace, refused", path)
                # the input left: after a member's end all of it is in unused_data (zlib
                # repeats it in unconsumed_tail when the output limit was hit before)
                chunk = d.unused_data if d.eof else d.unconsumed_tail
                if out:
                    pos += len(out)
                    yield out
    except error as exc:
        raise BadInput(f"corrupt .gz file ({exc})", path) from None
    if not d.eof:
        raise BadInput("truncated .gz file (compressed stream ends early)", path)


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

