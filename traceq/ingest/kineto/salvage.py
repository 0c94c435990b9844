"""Event-by-event recovery of a damaged stretch of a Kineto event list.

The window decoder (`windows`) decodes a few MB of events at once; when a window does not
decode (a `NaN` or `Infinity` token, a bare `inf`, a raw TAB inside a string, a trailing
comma, invalid UTF-8, an event nested thousands of levels deep), this module walks the text
from the window's start item by item with a linear scan that knows strings and counts
brackets (it never recurses and keeps no stack, so nesting costs nothing), and decodes each
item on its own:

- an item that decodes is kept as it is;
- an item whose damage has one clear meaning is repaired and kept: `NaN`/`nan` -> null (no
  value), `Infinity`/`inf` -> 1e999 and `-Infinity`/`-inf` -> -1e999 (a number beyond float
  range, which the decoder already reads as +-inf and validation drops as not representable,
  as it does a 1e999 in the file), a raw control character inside a string -> its \\u00XX
  escape, a comma before `}` or `]` -> removed, invalid UTF-8 -> U+FFFD;
- any other item (or one nested deeper than `MAX_DEPTH`) is skipped;
- an item that never closes (a bracket or a quote lost to damage, 30k `[` left open) would
  swallow the rest of the file: when it is still open after `LONG_ITEM` bytes or at the end
  of the file, the walk looks for where the events go on (`_resync`: a `},{` after which two
  whole events follow) and skips the item up to there;
- the list's end (`]`) or the end of the file (a file cut by a killed writer: the incomplete
  last item is dropped, the caller reports the truncation) ends the walk.

Every repair and skip is counted (`Damage`) and named in one warning.
"""
from __future__ import annotations

import mmap
import re
from dataclasses import dataclass

import msgspec

MAX_DEPTH = 256   # nesting levels an event may have (Kineto writes ~6); deeper ones are skipped
BAD_JSON = (msgspec.DecodeError, UnicodeDecodeError, RecursionError)   # what decoding damaged text raises

# a JSON string (unterminated: a lone quote), or a structural character
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|"|[\[\]{},]', re.S)
# what a repair rewrites: strings (their control characters), non-finite literals, trailing commas
_REPAIR = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|(?<![\w.+-])(-?)(NaN|nan|Infinity|inf|Inf)(?![\w.])|,(?=[ \t\r\n]*[}\]])',
                     re.S)
_CONTROL = re.compile(rb"[\x00-\x1f]")
_BOUNDARY = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{")   # a candidate boundary between two events
_WS = b" \t\r\n"
LONG_ITEM = 4 << 20   # an item still open after this many bytes: try to find where the events go on
_RESYNC_TRIES = 8     # candidate boundaries tried


@dataclass
class Damage:
    """What the walks over damaged stretches repaired and skipped."""
    skipped: int = 0
    first_skip: str | None = None   # "at byte N: why" of the first skipped item
    non_finite: int = 0
    controls: int = 0
    commas: int = 0
    utf8: int = 0

    def warning(self) -> str | None:
        """One line naming what was skipped and repaired; None when nothing was."""
        parts = []
        if self.skipped:
            s = "s" if self.skipped > 1 else ""
            first = "first " if self.skipped > 1 else ""
            parts.append(f"skipped {self.skipped:,} malformed event{s} ({first}{self.first_skip})")
        fixed = [(self.non_finite, "non-finite number", ""), (self.controls, "control character", " in a string"),
                 (self.commas, "trailing comma", "")]
        fixed = [f"{n:,} {what}{'s' if n > 1 else ''}{where}" for n, what, where in fixed if n]
        if fixed:
            parts.append("repaired " + ", ".join(fixed))
        if self.utf8:
            parts.append(f"replaced invalid UTF-8 by U+FFFD in {self.utf8:,} event{'s' if self.utf8 > 1 else ''}")
        return "; ".join(parts) or None


def depth_exceeds(text, limit: int = MAX_DEPTH) -> bool:
    """Whether the JSON text nests deeper than `limit` (brackets inside strings do not count)."""
    depth = 0
    for m in _TOKEN.finditer(text):
        c = m.group()[:1]
        if c in b"[{":
            depth += 1
            if depth > limit:
                return True
        elif c in b"]}":
            depth -= 1
    return False


def _skip_ws(mm, i: int, n: int) -> int:
    while i < n and mm[i] in _WS:
        i += 1
    return i


def walk(mm: mmap.mmap, pos: int, stop: int, damage: Damage) -> tuple[list[msgspec.Raw], int, str]:
    """Items of the event list from `pos` (the start of an item) on, until the first item
    boundary at or after `stop`, the list's end or the file's end. Returns (the items kept,
    as raw JSON; where the walk ended; how: "more" (at the next item's start), "close" (at
    the list's `]`) or "eof" (at the start of an incomplete last item))."""
    n = len(mm)
    kept: list[msgspec.Raw] = []
    depth, deepest, start, tried = 0, 0, pos, False
    for m in _TOKEN.finditer(mm, pos):
        tok = m.group()
        c = tok[:1]
        if not tried and m.start() - start > LONG_ITEM:   # an item this long: is it one that never closes?
            tried = True
            if (on := _resync(mm, start, n)) is not None:
                _skip(damage, _skip_ws(mm, start, n), "brackets or quotes left open")
                return kept, on, "more"
        if c == b'"':
            if len(tok) == 1:   # a string that never ends: the file ends inside it (or damage)
                break
            continue
        if c in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in b"]}":
            if depth == 0:
                if c == b"]":   # the list's end
                    if (on := _item(mm, start, m.start(), deepest, kept, damage)) is not None:
                        return kept, on, "more"
                    return kept, m.start(), "close"
                continue   # a stray `}` at item level: part of a malformed item
            depth -= 1
        elif depth == 0:   # a comma between items
            if (on := _item(mm, start, m.start(), deepest, kept, damage)) is not None:
                return kept, on, "more"
            start, deepest, tried = m.end(), 0, False
            if m.end() >= stop:
                return kept, _skip_ws(mm, m.end(), n), "more"
    if _skip_ws(mm, start, n) < n and (on := _resync(mm, start, n)) is not None:   # damage, not the file's end
        _skip(damage, _skip_ws(mm, start, n), "brackets or quotes left open")
        return kept, on, "more"
    return kept, start, "eof"


def _resync(mm: mmap.mmap, s: int, end: int) -> int | None:
    """Where the events go on after the item at `s` that does not close (or closes too late,
    at `end`, on a bracket of a later event): the `{` of the first of `_RESYNC_TRIES`
    candidate boundaries in (s, end) that two whole events follow (JSON objects with a "ph";
    or one, then the list's end), None when there is none (a file cut inside its last event
    has no complete event after the cut item's start)."""
    for tries, m in enumerate(_BOUNDARY.finditer(mm, s + 1, end)):
        if tries == _RESYNC_TRIES:
            break
        if _events_follow(mm, m.end() - 1):
            return m.end() - 1
    return None


def _events_follow(mm: mmap.mmap, c: int) -> bool:
    """Whether two whole events (or one and the list's end) start at `c` (`_resync`)."""
    depth, start, events = 0, c, 0
    for m in _TOKEN.finditer(mm, c):
        tok = m.group()
        ch = tok[:1]
        if ch == b'"':
            if len(tok) == 1:
                return False
        elif ch in b"[{":
            depth += 1
            if depth > MAX_DEPTH or m.start() - start > LONG_ITEM:
                return False
        elif depth > 0:   # inside an item: its end, or a comma in it
            depth -= ch in b"]}"
        elif ch == b"}" or not _is_event(mm[start:m.start()]):
            return False
        else:   # `,` or `]` at item level
            events += 1
            if events == 2 or ch == b"]":
                return True
            start = m.end()
    return False


def _is_event(text) -> bool:
    try:
        ev = msgspec.json.decode(text)
    except (*BAD_JSON, msgspec.ValidationError):
        return False
    return isinstance(ev, dict) and "ph" in ev


def _item(mm: mmap.mmap, a: int, b: int, deepest: int, kept: list, damage: Damage) -> int | None:
    """Decode the item mm[a:b] alone (repaired if need be) into `kept`, or count it skipped.
    An item that does not decode may hold events after its damage (a bracket opened by the
    damage, closed by a later event's): where they start (`_resync`), the walk goes on there."""
    raw = bytes(mm[a:b])
    text = raw.strip(_WS)
    a += len(raw) - len(raw.lstrip(_WS))   # where the item's text starts in the file
    if not text:   # `,,` or `,]`: a stray comma (or an empty list)
        before = a - 1
        while before > 0 and mm[before] in _WS:
            before -= 1
        damage.commas += mm[before] == 0x2C
        return
    if deepest > MAX_DEPTH:
        _skip(damage, a, f"nested deeper than {MAX_DEPTH} levels")
        return _resync(mm, a, b)
    try:
        msgspec.json.decode(text)
        kept.append(msgspec.Raw(text))
        return
    except msgspec.ValidationError:   # valid JSON (a number beyond float range): the decoder handles it
        kept.append(msgspec.Raw(text))
        return
    except BAD_JSON:
        pass
    fixed, counts, edits = repair(text)
    try:
        msgspec.json.decode(fixed)
    except msgspec.ValidationError:
        pass
    except BAD_JSON as exc:   # named by what the repairs left (a byte of the file)
        on = _resync(mm, a, b)
        if on is not None:
            exc = "brackets or quotes left open"
        _skip(damage, a, exc, fixed, lambda i: _in_text(i, edits))
        return on
    damage.utf8 += counts[0]
    damage.non_finite += counts[1]
    damage.controls += counts[2]
    damage.commas += counts[3]
    kept.append(msgspec.Raw(fixed))


def repair(text: bytes) -> tuple[bytes, tuple[int, int, int, int], list[tuple[int, int]]]:
    """`text` with the damage of one clear meaning repaired (module doc), the counts (events
    with invalid UTF-8 (0/1), non-finite literals, control characters, trailing commas), and
    the edits as (where the text after an edit starts in `fixed`, its shift from `text`)."""
    counts = [0, 0, 0, 0]
    edits: list[tuple[int, int]] = []
    shift = 0

    def fix(m: re.Match) -> bytes:
        nonlocal shift
        tok = m.group()
        if tok[:1] == b'"':
            got, k = _CONTROL.subn(lambda c: b"\\u%04x" % c.group()[0], tok)
            counts[2] += k
            try:
                got.decode("utf-8")
            except UnicodeDecodeError:
                got, counts[0] = got.decode("utf-8", "replace").encode("utf-8"), 1
        elif tok == b",":
            counts[3] += 1
            got = b""
        else:
            counts[1] += 1
            got = b"null" if m.group(2) in (b"NaN", b"nan") else b"-1e999" if m.group(1) else b"1e999"
        if len(got) != len(tok):
            shift += len(got) - len(tok)
            edits.append((m.end() + shift, shift))
        return got

    fixed = _REPAIR.sub(fix, text)
    return fixed, tuple(counts), edits


def _in_text(i: int, edits: list[tuple[int, int]]) -> int:
    """The byte of the original text at byte `i` of the repaired one (`repair`'s edits)."""
    shift = 0
    for start, s in edits:
        if start > i:
            break
        shift = s
    return i - shift


def _skip(damage: Damage, at: int, why, text: bytes = b"", where=lambda i: i) -> None:
    """Count a skipped item (at byte `at` of the file); the first one is named: `why` (a
    reason, or the decoder's exception on `text`: its message, the token it names and its
    byte in the file: `at` + `where(byte in text)`)."""
    damage.skipped += 1
    if damage.first_skip is not None:
        return
    if isinstance(why, RecursionError):
        why = "nested too deep"
    elif isinstance(why, Exception):
        msg = str(why).replace("JSON is malformed: ", "")
        m = re.search(r"\(byte (\d+)\)", msg)
        if m:
            i = int(m.group(1))
            token = re.match(rb"[^\s,:\]}]{1,12}", text[i:i + 12])
            shown = (token.group() if token else text[i:i + 1]).decode("utf-8", "replace")
            msg, at = msg[:m.start()].strip() + f", found {shown!r}", at + where(i)
        why = msg
    damage.first_skip = f"at byte {at:,}: {why}"
