"""The robust decoder's streaming path: the event list of a memory-mapped document decoded
window by window (a few MB of text each, cut at validated event boundaries), each window's
events written as raw rows and its mapped pages released once decoded, so memory stays
bounded whatever the trace size. A stretch that does not decode (an event larger than a
window, a malformed event) is walked item by item (`salvage`: damage of one clear meaning
repaired, other malformed events skipped, both counted in a warning). A document that cannot
be cut this way (no `traceEvents` list, an odd document) is decoded whole
(`recover.decode_whole`); a list cut at its end by a killed writer keeps every complete event,
with a warning.
"""
from __future__ import annotations

import mmap
from pathlib import Path

import msgspec

from ...errors import BadInput
from ...schema import truncated_warning
from .events import EVENTS, Trace
from .recover import decode_slices, parse_loose, recover_meta, refuse_object
from .rows import RawWriter
from .salvage import BAD_JSON, MAX_DEPTH, Damage, depth_exceeds, walk
from .text import release


WINDOW = 2 << 20       # bytes of JSON text decoded at once (as `decode.SLICE_BYTES`)


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
                except BAD_JSON:
                    pass
    return None


def _try_list(buf) -> tuple[list | None, list | None]:
    """(typed events, None) or (None, raw slices) when `buf` is a JSON list; (None, None) when not."""
    try:
        return EVENTS.decode(buf), None
    except msgspec.ValidationError:   # odd types somewhere: is it valid JSON at all?
        try:
            msgspec.json.decode(buf)   # (unknown keys are skipped unchecked by the typed decode)
        except msgspec.ValidationError:   # valid JSON: numbers beyond float range
            pass
        except BAD_JSON:
            return None, None
        try:
            return None, _RAWS.decode(buf)
        except BAD_JSON:
            return None, None
    except BAD_JSON:   # not JSON, invalid UTF-8, nested too deep: `salvage` walks it
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

    def walk(self, pos: int, stop: int, damage: Damage) -> tuple[int, str]:
        """Walk the items from `pos` one by one (`salvage.walk`), keep what it kept."""
        kept, at, how = walk(self.mm, pos, stop, damage)
        self.take(None, kept, b"", at)
        return at, how


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
    prog, damage = _Progress(mm, out), Damage()
    pos = _skip_ws(mm, begin, n)
    while True:
        while pos + WINDOW < n:   # the middle: cut windows at event boundaries
            nxt = _take_window(mm, pos, pos + WINDOW, prog)
            if nxt is None:   # no boundary found: one event larger than the window, or a malformed one
                nxt, how = prog.walk(pos, pos + WINDOW, damage)
                if how != "more":
                    return _ended(mm, how, nxt, s0, begin, head, source, prog, damage)
            pos = nxt
        while (nxt := _take_window(mm, pos, n, prog)) is not None:   # the end: up to the last boundary
            pos = nxt
        close = _close(mm, pos, prog)
        if close is not None:
            return _ended(mm, "close", close, s0, begin, head, source, prog, damage)
        pos, how = prog.walk(pos, n, damage)   # the rest does not decode as a list: item by item
        if how != "more":   # (more: an item left open was skipped, the events go on)
            return _ended(mm, how, pos, s0, begin, head, source, prog, damage)


def _close(mm: mmap.mmap, pos: int, prog: _Progress) -> int | None:
    """The `]` that ends the event list, when the events from `pos` up to it decode as a list
    (taken); None when no `]` of the first `_CLOSE_TRIES` does."""
    close = mm.find(b"]", pos)
    for _ in range(_CLOSE_TRIES):
        if close < 0:
            break
        buf = _join(mm, pos, close)
        evs, raws = _try_list(buf)
        if evs is not None or raws is not None:
            if evs or raws:
                prog.take(evs, raws, buf, close)
            return close
        close = mm.find(b"]", close + 1)
    return None


def _ended(mm: mmap.mmap, how: str, at: int, s0: int, begin: int, head: bytes, source: Path, prog: _Progress,
           damage: Damage):
    """The result of `decode_windows` once the event list ended: at its `]` (`at`; the
    metadata around the list decoded), or at the file's end (a file cut by a killed writer:
    the complete events kept, with a warning)."""
    before = damage.warning()
    warnings = [before] if before else []
    if prog.n_items == 0 and damage.skipped:
        raise BadInput(f"no usable trace events: {before}", source)
    if how == "close":
        skeleton = bytes(mm[s0:begin]) + bytes(mm[at:])
        meta, more = _parse_skeleton(skeleton, head, source, prog.n_items, mm[:begin])
        return meta, prog.n_items, prog.not_objects, prog.first, warnings + more
    if prog.n_items == 0:
        raise BadInput("not a Chrome trace (invalid JSON, no complete event found)"
                       + (f"; {before}" if before else ""), source)
    warnings.append(truncated_warning(prog.n_items))
    return recover_meta(mm[:begin]), prog.n_items, prog.not_objects, prog.first, warnings


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
    if depth_exceeds(skeleton):
        raise BadInput(f"not a Chrome trace (its metadata is nested deeper than {MAX_DEPTH} levels)", source)
    try:
        skeleton.decode("utf-8")
    except UnicodeDecodeError:
        skeleton = skeleton.decode("utf-8", "replace").encode("utf-8")
        warnings.append("replaced invalid UTF-8 by U+FFFD in the trace's metadata")
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
