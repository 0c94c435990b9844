"""Lookup maps built chunk by chunk: key -> value of the key's first occurrence.

Both readers link records by an id of a call seen earlier in the stream: Kineto's GPU ops
take the pid of the first runtime call with their correlation id, nsys' sync records the API
of the first sync call of their process with theirs. The calls arrive chunk by chunk; each
chunk's keys and values are kept as compact NumPy arrays, joined at the end with each chunk
freed once copied, and reduced to the sorted distinct keys (no sort when the calls came in
key order, as they usually do), searched with `np.searchsorted`.
"""
from __future__ import annotations

import numpy as np


def joined(pieces: list[np.ndarray]) -> np.ndarray:
    """The pieces as one array (their common dtype), in order. The list is emptied as each
    piece is copied, so the peak is the result plus one piece, not twice the result."""
    out = np.empty(sum(len(p) for p in pieces), np.result_type(*(p.dtype for p in pieces)))
    pieces.reverse()
    at = 0
    while pieces:
        p = pieces.pop()
        out[at:at + len(p)] = p
        at += len(p)
    return out


def coded(code_of: dict, distinct: list, inverse: np.ndarray) -> np.ndarray:
    """Small integer codes of values given as their distinct values and, per value, its index
    into them (`np.unique(..., return_inverse=True)`, or an Arrow dictionary's indices). Codes
    are given in first-seen order and `code_of` (value -> code) grows with each call: uint8
    while there are at most 256 of them, then uint16, then int64."""
    table = [code_of.setdefault(v, len(code_of)) for v in distinct]
    n = len(code_of)
    return np.array(table, np.uint8 if n <= 1 << 8 else np.uint16 if n <= 1 << 16 else np.int64)[inverse]


def first_by_key(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct keys and, for each, the value of its first occurrence in `keys`.
    Keys already strictly increasing are returned as they are."""
    if len(keys) < 2 or bool((keys[1:] > keys[:-1]).all()):
        return keys, values
    order = np.argsort(keys, kind="stable")   # stable: each key's first occurrence leads
    keys = keys[order]   # one array at a time, each freed as it is replaced
    values = values[order]
    del order
    first = np.empty(len(keys), bool)
    first[0] = True
    np.not_equal(keys[1:], keys[:-1], out=first[1:])
    return keys[first], values[first]
