"""Timer keys: Deep500's `TimeType`, and the normalisation of any key to its name.

Internally a key is its name (a str): names identify keys in the stats text and the log,
and str hashes are cached (Enum.__hash__ is Python code, ~10 calls per start/end pair).
`TimeType.BATCH` and the string "BATCH" are therefore the same key; members of other enums
count by their name too. Names must be non-blank and on one line; "ALL" (`ALL_KEY`) is
rejected by start/end like `TimeType.ALL`.
"""
from __future__ import annotations

import enum
import sys
from typing import Any


class TimeType(enum.Enum):
    """Different quantity types for semantic timing (Deep500's keys)."""

    EPOCH = enum.auto()      # one complete pass over the data
    BATCH = enum.auto()      # one mini-batch
    FORWARD = enum.auto()    # forward propagation of one mini-batch
    BACKWARD = enum.auto()   # backward propagation of one mini-batch
    COMM = enum.auto()       # communication during one mini-batch
    IO = enum.auto()         # visible I/O wait for one mini-batch
    OTHER = enum.auto()      # catch-all
    ALL = enum.auto()        # special: rejected by start/end


_KEY_CACHE: dict[Any, str] = {}
_KEY_CACHE_MAX = 100_000
ALL_KEY = "ALL"


def norm(key) -> str:
    """The key's name: `TimeType.BATCH` -> "BATCH", "data/augment" -> itself (validated once)."""
    if key.__class__ is TimeType:
        return key._name_
    try:
        return _KEY_CACHE[key]
    except (KeyError, TypeError):
        return _norm_slow(key)


def _norm_slow(key) -> str:
    if isinstance(key, enum.Enum):
        name = key.name
    elif isinstance(key, str):
        name = key
    else:
        raise TypeError(f"timer keys are TimeType members or strings, not {type(key).__name__}")
    if not isinstance(name, str) or not name.strip() or "\n" in name or "\r" in name:
        raise ValueError(f"timer key {name!r}: names must be non-blank and on one line")
    name = sys.intern(str(name))
    if len(_KEY_CACHE) < _KEY_CACHE_MAX:
        _KEY_CACHE[key] = name
    return name


def not_all() -> ValueError:
    """The error of `start`/`end` given `TimeType.ALL`."""
    return ValueError("Cannot use TimeType.ALL here")
