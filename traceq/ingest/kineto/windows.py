"""The robust decoder's streaming path: the event list of a memory-mapped document decoded
window by window (a few MB of text each, cut at validated event boundaries), each window's
events written as raw rows and its mapped pages released once decoded, so memory stays
bounded whatever the trace size. A document that cannot be cut this way (no `traceEvents`
list, an odd document, a malformed middle) is decoded whole (`recover.decode_whole`); a list
cut at its end by a killed writer keeps every complete event, with a warning.
"""
from __future__ import annotations

import mmap
from pathlib import Path

import msgspec

from ...errors import BadInput
from ...schema import truncated_warning
from .events import EVENTS, Trace
from .recover import complete_items, decode_slices, parse_loose, recover_meta, refuse_object
from .rows import RawWriter
from .text import release


WINDOW = 2 << 20       # bytes of JSON text decoded at once (as `decode.SLICE_BYTES`)
MAX_WINDOW = 64 << 20  # a window that cannot be cut below this size: decode the document whole


_WS = frozenset(b" \t\r\n")
_RAWS = msgspec.json.Decoder(list[msgspec.Raw])
_CUT_TRIES = 4       # event boundaries tried per window before the window grows
_CLOSE_TRIES = 64    # `]` tried as the end of the event list


def _skip_ws(mm, i: int, n: int) -> int:
    while i < n and mm[i] in _WS:
        i += 1
    return i


def _events_begin(mm: mmap.mmap, s: int, head: bytes) -> int | None:
    """Offset just after the `[` that opens the event list: a bare list, or the value of a
    top-level "traceEvents" key (a key is top-level when the text before it, closed by
    `"traceEvents":[]}`, is a valid JSON object). None when there is no such list."""
    if head == b"[":
        return s + 1
    if head != b"{":
        return None
    n, at = len(mm), s
    for _ in range(8):
        idx = mm.find(b'"traceEvents"', at)
        if idx < 0:
            return None
        at = idx + 13
        j = _skip_ws(mm, at, n)
        if j < n and mm[j] == 0x3A:   # ':'
            j = _skip_ws(mm, j + 1, n)
            if j < n and mm[j] == 0x5B:   # '['
                try:
                    msgspec.json.decode(bytes(mm[s:idx]) + b'"traceEvents":[]}', type=dict[str, msgspec.Raw])
                    return j + 1
                except (msgspec.ValidationError, msgspec.DecodeError):
                    pass
    return None


def _try_list(buf) -> tuple[list | None, list | None]:
    """(typed events, None) or (None, raw slices) when `buf` is a JSON list; (None, None) when not."""
    try:
        return EVENTS.decode(buf), None
    except msgspec.ValidationError:   # odd types somewhere: is it a list at all?
        try:
            return None, _RAWS.decode(buf)
        except (msgspec.ValidationError, msgspec.DecodeError):
            return None, None
    except msgspec.DecodeError:
        return None, None


def _cuts(mm: mmap.mmap, lo: int, hi: int):
    """Candidate event boundaries in [lo, hi), last first: (end of an object, start of the next),
    i.e. `}` `,` `{` with only whitespace between them."""
    n = len(mm)
    i = mm.rfind(b"}", lo, hi)
    while i > lo:
        j = _skip_ws(mm, i + 1, n)
        if j < n and mm[j] == 0x2C:   # ','
            j = _skip_ws(mm, j + 1, n)
            if j < n and mm[j] == 0x7B:   # '{'
                yield i + 1, j
        i = mm.rfind(b"}", lo, i)


def _join(mm: mmap.mmap, lo: int, hi: int) -> bytes:
    return b"".join((b"[", memoryview(mm)[lo:hi], b"]"))


class _Progress:
    """Counts of a window decode, and where its mapped pages are released up to."""

    def __init__(self, mm: mmap.mmap, out: RawWriter):
        self.mm, self.out = mm, out
        self.n_items = self.not_objects = 0
        self.first: bytes | None = None
        self.released = 0

    def take(self, evs: list | None, raws: list | None, buf: bytes, upto: int) -> None:
        if self.first is None:
            raws = raws if raws is not None else _RAWS.decode(buf)
            self.first = bytes(raws[0])[:4096] if raws else None
        if evs is not None:
            self.n_items += len(evs)
            self.out.add(evs)
        else:
            self.n_items += len(raws)
            self.not_objects += decode_slices(raws, self.out)
        self.released = release(self.mm, 0, upto, self.released)


def decode_windows(mm: mmap.mmap, source: Path, out: RawWriter):
    """Decode the event list window by window: each window of about `WINDOW` bytes is cut
    at the last event boundary that makes it a valid JSON list (tried by msgspec, so a `},{`
    inside a string never cuts), decoded, written and released. The list's end, and the
    metadata around it, are found at the end. None when the document is not cut this way
    (then it is decoded whole: `recover.decode_whole`)."""
    n = len(mm)
    head = bytes(mm[:4096]).lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    if not head:
        raise BadInput("empty file", source)
    s0 = 3 if mm[:3] == b"\xef\xbb\xbf" else 0
    begin = _events_begin(mm, _skip_ws(mm, s0, n), head)
    if begin is None:
        return None
    prog = _Progress(mm, out)
    pos, width = _skip_ws(mm, begin, n), WINDOW
    while pos + width < n:   # the middle: cut windows at event boundaries
        nxt = _take_window(mm, pos, pos + width, prog)
        if nxt is None:
            width *= 2   # no boundary found: one event larger than the window, or a malformed middle
            if width > MAX_WINDOW:
                return None
        else:
            pos, width = nxt, WINDOW
    while (nxt := _take_window(mm, pos, n, prog)) is not None:   # the end: up to the last boundary
        pos = nxt
    close = mm.find(b"]", pos)
    for _ in range(_CLOSE_TRIES):
        if close < 0:
            break
        buf = _join(mm, pos, close)
        evs, raws = _try_list(buf)
        if evs is not None or raws is not None:
            if evs or raws:
                prog.take(evs, raws, buf, close)
            skeleton = bytes(mm[s0:begin]) + bytes(mm[close:])
            meta, warnings = _parse_skeleton(skeleton, head, source, prog.n_items, mm[:begin])
            return meta, prog.n_items, prog.not_objects, prog.first, warnings
        close = mm.find(b"]", close + 1)
    return _recover_end(mm, pos, begin, source, prog)


def _take_window(mm: mmap.mmap, pos: int, hi: int, prog: _Progress) -> int | None:
    """Decode the events from `pos` up to the last event boundary before `hi` that makes
    them a valid JSON list (`_CUT_TRIES` boundaries tried); the start of the next event, or
    None when no boundary was found."""
    for tries, (cut, nxt) in enumerate(_cuts(mm, pos, hi)):
        if tries == _CUT_TRIES:
            return None
        buf = _join(mm, pos, cut)
        evs, raws = _try_list(buf)
        if evs is not None or raws is not None:
            prog.take(evs, raws, buf, nxt)
            return nxt
    return None


def _parse_skeleton(skeleton: bytes, head: bytes, source: Path, n_items: int, before: bytes):
    """The document's metadata: the document with its event list emptied, read as the
    whole-document path reads a document (odd metadata types, a malformed end). Returns
    (meta, warnings)."""
    warnings: list[str] = []
    try:
        if head == b"[":
            msgspec.json.decode(skeleton, type=list[msgspec.Raw])
            return Trace(), warnings
        trace = msgspec.json.decode(skeleton, type=Trace)
    except msgspec.ValidationError:
        trace = parse_loose(skeleton, source, warnings)
    except msgspec.DecodeError:
        warnings.append(truncated_warning(n_items))
        return recover_meta(before), warnings
    if trace.traceEvents is None:
        raise refuse_object(skeleton, source)
    trace.traceEvents = None
    return trace, warnings


def _recover_end(mm: mmap.mmap, pos: int, begin: int, source: Path, prog: _Progress):
    """The event list does not end: a file cut by a killed writer. Keep the complete events
    of the rest (ijson, on the last window only), with a warning; a list that does end after
    all (a rest that could not be cut) is decoded whole instead (None)."""
    items, closed = complete_items(b"[" + bytes(mm[pos:]))
    if closed:
        return None
    if items:
        raws = [msgspec.Raw(msgspec.json.encode(it)) for it in items]
        prog.take(None, raws, b"", pos)
    if prog.n_items == 0:
        raise BadInput("not a Chrome trace (invalid JSON, no complete event found)", source)
    warnings = [truncated_warning(prog.n_items)]
    return recover_meta(mm[:begin]), prog.n_items, prog.not_objects, prog.first, warnings

