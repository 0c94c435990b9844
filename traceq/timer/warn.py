"""The timer's warnings: each kind (a tag) is given once per process, as a RuntimeWarning.
`WARNED` holds the tags already given; discarding one lets its warning be given again."""
from __future__ import annotations

import warnings

WARNED: set[str] = set()


def warn_once(tag: str, message: str, stacklevel: int = 4) -> None:
    """Warn `message` (RuntimeWarning) unless a warning tagged `tag` was already given."""
    if tag not in WARNED:
        WARNED.add(tag)
        warnings.warn(message, RuntimeWarning, stacklevel=stacklevel)
