"""Short kernel labels for tables: the identity, made unique.

Tables show a kernel by its identity (`at::native::vectorized_elementwise_kernel`) instead of a
middle-cut signature. Different kernels can share an identity (ATen's elementwise launcher runs
every functor), so labels are disambiguated deterministically:
1. identity, shortened in the middle to the width;
2. where two or more distinct names share that label, each gets the first identifier (3+
   characters, in order of appearance) of its name that the others in the group lack and that
   is not part of the identity: `at::native::vectorized_elementwise_kernel[MulFunctor]`;
3. any label still shared by distinct names gets a tag derived from the full name alone
   (`#3f9a`, traceq.text.name_tag), so the same kernel carries the same tag in every command,
   table and the HTML report, whatever else the table holds.
The same name always gets the same label within one table; two different names never do.
"""
from __future__ import annotations

import re
from collections import defaultdict

from ..text import tag_distinct

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_NOISE = {"void", "const", "float", "int", "long", "unsigned", "char", "bool", "double", "half", "Array",
          "detail", "native", "true", "false", "anonymous", "namespace", "lambda", "operator", "instance"}


def _words(name: str) -> list[str]:
    seen, out = set(), []
    for w in _WORD.findall(name):
        if w not in seen and w not in _NOISE:
            seen.add(w)
            out.append(w)
    return out


def _shorten(text: str, width: int) -> str:
    from ..text import shorten

    return shorten(text, width)


def short_labels(names: list[str | None], identities: list[str | None], width: int = 60) -> list[str | None]:
    """One label per row (see the module docstring)."""
    base = {}
    for n, i in zip(names, identities):
        if n is not None and n not in base:
            base[n] = _shorten(i or n, width)
    label = dict(base)
    groups: dict[str, list[str]] = defaultdict(list)
    for n, b in base.items():
        groups[b].append(n)
    for b, members in groups.items():
        if len(members) < 2:
            continue
        ident_words = set(_WORD.findall(b))
        words = {n: _words(n) for n in members}
        for n in members:
            others = set().union(*(set(words[m]) for m in members if m != n))
            frag = next((w for w in words[n] if w not in others and w not in ident_words), None)
            if frag:
                frag = frag[:24]
                label[n] = _shorten(b, max(width - len(frag) - 2, 12)) + f"[{frag}]"
    final: dict[str, list[str]] = defaultdict(list)
    for n, lab in label.items():
        final[lab].append(n)
    for lab, members in final.items():
        if len(members) > 1:
            for n, tag in tag_distinct(members).items():
                label[n] = f"{_shorten(lab, max(width - len(tag) - 1, 12))} {tag}"
    return [None if n is None else label[n] for n in names]
