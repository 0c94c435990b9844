"""Names shortened for narrow places: in the middle, with an ellipsis, and without making two
different names look the same. A cut name always shows the cut (…); where two names would still
read alike, `name_tag` tells them apart by the name itself, so a kernel reads the same in every
command, table and the HTML report."""
from __future__ import annotations

NAME_WIDTH = 60
TAG_CHARS = 4       # hex characters of a name's tag; more only where two tags of one table collide


def name_tag(name: str, chars: int = TAG_CHARS) -> str:
    """A short tag derived from the full name alone (hex of its BLAKE2 hash): '#3f9a'.
    The same name gets the same tag everywhere, whatever else a table holds."""
    import hashlib

    return "#" + hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()[:chars]


def tag_distinct(names) -> dict[str, str]:
    """`name_tag` of each distinct name, lengthened (for all of them) until no two collide."""
    names = sorted(set(names))
    chars = TAG_CHARS
    while True:
        tags = {n: name_tag(n, chars) for n in names}
        if len(set(tags.values())) == len(names) or chars >= 32:
            return tags
        chars += 2


def shorten_path(path: str, width: int = NAME_WIDTH) -> str:
    """A path as the user gave it, cut in the middle when too long, keeping its file name
    whole when it fits: 'runs/…/rank0/eager_trace.json.gz'."""
    if path is None or len(path) <= width:
        return path
    head, sep, base = path.rpartition("/")
    if sep and len(base) + 4 <= width:
        keep = width - len(base) - 2       # '…/' before the file name
        return (head[:keep] + "…/" + base) if keep > 0 else "…/" + base
    return shorten(path, width)


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
