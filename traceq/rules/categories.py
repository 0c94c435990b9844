"""Kernel categories: one ordered rule table, data in `rules/categories.toml`.

A rule names a category and conditions on the op kind, the kernel's library and identity
(traceq.kernels.identity) and, only where those cannot tell, the full name; first matching rule
wins. Users extend the table by putting rules in front (`TRACEQ_CATEGORIES` = a TOML file of
`[[rule]]` entries in the same format; `pattern` is accepted as another spelling of `name`;
see docs/kernel-identity.md). Categories, identities and libraries are assigned at ingest, once per distinct
(name, kind).
"""
from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import polars as pl

from ..kernels.identity import PARSE_CHARS, kernel_identity, kernel_library


@dataclass(frozen=True)
class Rule:
    category: str
    pattern: str | None = None      # regex on the full name (case-insensitive); TOML `name` or `pattern`
    kinds: tuple[str, ...] = ()     # op kinds this rule applies to (empty = any)
    library: str | None = None      # regex on the library
    identity: str | None = None     # regex on the identity


DEFAULT_CATEGORY = "other"
CATEGORIES = ["communication", "memcpy", "memset", "gemm", "conv", "attention", "normalization",
              "elementwise", "reduce", "optimizer", "embedding", "transpose", "sort", "moe_routing", "rng", "sync",
              "other"]
# Categories that are not computation (summary/overlap count everything else as compute).
NON_COMPUTE = ("communication", "memcpy", "memset", "sync")

_KEYS = {"category", "pattern", "name", "kinds", "library", "identity", "note"}


def parse_rules(doc: dict, source: str) -> list[Rule]:
    """[[rule]] tables -> Rules; raises TraceqError naming `source` on a malformed rule."""
    from ..errors import TraceqError

    rules = []
    for r in doc.get("rule", []):
        unknown = set(r) - _KEYS
        conditions = [k for k in ("pattern", "name", "kinds", "library", "identity") if k in r]
        if "category" not in r or not conditions or unknown:
            raise TraceqError("each [[rule]] needs `category` and at least one of `identity`, `library`, "
                              "`kinds`, `name` (or `pattern`)" + (f"; unknown key {sorted(unknown)[0]}" if unknown else ""),
                              source)
        kinds = r.get("kinds", ())
        rules.append(Rule(r["category"], r.get("name", r.get("pattern")),
                          tuple([kinds] if isinstance(kinds, str) else kinds), r.get("library"), r.get("identity")))
        for pat in (rules[-1].pattern, rules[-1].library, rules[-1].identity):
            try:
                re.compile(pat or "", re.I)   # the flags `_compile` uses: one compile, then re's cache
            except re.error as exc:
                raise TraceqError(f"bad regex {pat!r} in a [[rule]] ({exc})", source) from None
    return rules


@lru_cache(maxsize=1)
def builtin_rules() -> tuple[Rule, ...]:
    """The package's rule table (traceq/rules/categories.toml)."""
    text = resources.files("traceq").joinpath("rules/categories.toml").read_text()
    return tuple(parse_rules(tomllib.loads(text), "traceq/rules/categories.toml"))


def user_rules() -> list[Rule]:
    """Rules from the TOML file named by TRACEQ_CATEGORIES (tried before the built-in ones)."""
    path = os.environ.get("TRACEQ_CATEGORIES")
    if not path:
        return []
    from ..errors import TraceqError

    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise TraceqError(f"cannot read category rules ({exc})", path) from None
    return parse_rules(doc, path)


def _compile(pattern: str | None):
    return re.compile(pattern, re.I) if pattern else None


def first_match(name: str | None, kind: str | None, identity: str, library: str, compiled: list) -> int | None:
    """Index of the first compiled rule that matches, None when none does."""
    for i, (_, name_re, kinds_, lib_re, id_re) in enumerate(compiled):
        if kinds_ and kind not in kinds_:
            continue
        if lib_re is not None and not lib_re.search(library):
            continue
        if id_re is not None and not id_re.search(identity):
            continue
        if name_re is not None and not name_re.search(name or ""):
            continue
        return i
    return None


def compile_rules(rules: list[Rule]) -> list:
    return [(r.category, _compile(r.pattern), r.kinds, _compile(r.library), _compile(r.identity)) for r in rules]


def classify(names: pl.Series, kinds: pl.Series, rules: list[Rule] | None = None) -> pl.DataFrame:
    """identity, library and category per (name, kind) row. Everything is computed once per
    distinct pair (a few hundred in a real trace), then joined back to the rows."""
    rules = user_rules() + list(builtin_rules()) if rules is None else rules
    compiled = compile_rules(rules)
    rows = pl.DataFrame({"name": names, "kind": kinds}).cast(pl.String)
    pairs = rows.unique()
    idents, libs, cats = [], [], []
    for name, kind in pairs.iter_rows():
        ident = kernel_identity(name)
        lib = kernel_library(ident)
        idents.append(ident)
        libs.append(lib)
        # a rule's regex reads what the identity reads: the name's first PARSE_CHARS characters
        hit = first_match(None if name is None else name[:PARSE_CHARS], kind, ident, lib, compiled)
        cats.append(DEFAULT_CATEGORY if hit is None else compiled[hit][0])
    pairs = pairs.with_columns(identity=pl.Series(idents, dtype=pl.String), library=pl.Series(libs, dtype=pl.String),
                               category=pl.Series(cats, dtype=pl.String))
    return (rows.join(pairs, on=["name", "kind"], how="left", nulls_equal=True, maintain_order="left")
            .select("identity", "library", "category"))


def categorize(names: pl.Series, kinds: pl.Series, rules: list[Rule] | None = None) -> pl.Series:
    """Category per (name, kind) row (see `classify`)."""
    return classify(names, kinds, rules)["category"]
