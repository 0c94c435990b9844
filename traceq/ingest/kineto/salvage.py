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
_WS = b" \t\r\n"


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
    depth, deepest, start = 0, 0, pos
    for m in _TOKEN.finditer(mm, pos):
        tok = m.group()
        c = tok[:1]
        if c == b'"':
            if len(tok) == 1:   # a string that never ends: the file ends inside it
                break
            continue
        if c in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in b"]}":
            if depth == 0:
                if c == b"]":   # the list's end
                    _item(mm, start, m.start(), deepest, kept, damage, last=True)
                    return kept, m.start(), "close"
                continue   # a stray `}` at item level: part of a malformed item
            depth -= 1
        elif depth == 0:   # a comma between items
            _item(mm, start, m.start(), deepest, kept, damage)
            start, deepest = m.end(), 0
            if m.end() >= stop:
                return kept, _skip_ws(mm, m.end(), n), "more"
    return kept, start, "eof"


def _item(mm: mmap.mmap, a: int, b: int, deepest: int, kept: list, damage: Damage, last: bool = False) -> None:
    """Decode the item mm[a:b] alone (repaired if need be) into `kept`, or count it skipped."""
    raw = bytes(mm[a:b])
    text = raw.strip(_WS)
    a += len(raw) - len(raw.lstrip(_WS))   # where the item's text starts in the file
    if not text:   # `,,` or `,]`: a stray comma
        damage.commas += 1
        return
    if deepest > MAX_DEPTH:
        _skip(damage, a, f"nested deeper than {MAX_DEPTH} levels")
        return
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
        _skip(damage, a, exc, fixed, lambda i: _in_text(i, edits))
        return
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
