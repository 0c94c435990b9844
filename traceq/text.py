"""Names shortened for narrow places: in the middle, with an ellipsis, and without making two
different names look the same."""
from __future__ import annotations

NAME_WIDTH = 60


def shorten(text: str, width: int = NAME_WIDTH) -> str:
    """Shorten in the middle: 'void at::native::vectorized_el…<float>(int, float)'."""
    if text is None or len(text) <= width:
        return text
    keep = width - 1
    head = (keep + 1) // 2
    return text[:head] + "…" + text[len(text) - (keep - head):]


def shorten_distinct(values: list, width: int) -> list:
    """`shorten` every value, except where two different values would then look the same:
    those are cut around the first character where they differ instead (their start, an
    ellipsis, then the differing part), so distinct names stay distinct on a narrow terminal."""
    out = [shorten(v, width) for v in values]
    seen: dict[str, set] = {}
    for v, s in zip(values, out):
        if v is not None:
            seen.setdefault(s, set()).add(v)
    fixed = {}
    for group in seen.values():
        if len(group) > 1:
            at = len(_common_prefix(group))
            fixed.update((v, _cut_around(v, at, width)) for v in group)
    return [fixed.get(v, s) for v, s in zip(values, out)] if fixed else out


def _common_prefix(group) -> str:
    lo, hi = min(group), max(group)
    n = 0
    while n < min(len(lo), len(hi)) and lo[n] == hi[n]:
        n += 1
    return lo[:n]


def _cut_around(text: str, at: int, width: int) -> str:
    """`text` in `width` characters keeping its first third and the part from position `at`
    (where it differs from a look-alike), with an ellipsis at each cut."""
    if len(text) <= width or width < 8:
        return shorten(text, width)
    head = width // 3
    start = max(head + 1, min(at - 2, len(text) - (width - head - 1)))   # 2 characters of context
    rest = width - head - 1
    if start + rest < len(text):
        return text[:head] + "…" + text[start:start + rest - 1] + "…"
    return text[:head] + "…" + text[start:]
