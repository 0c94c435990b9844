"""Fast parallel decoding of a Kineto/Chrome trace into raw parts (issue 11, the fast path).

The event array of a plain JSON trace is split into parts of at most `PART_BYTES` at
candidate event boundaries (`}` `,` `{` with whitespace between) and copied into the
scratch folder as small JSON arrays; one DuckDB query parses all parts with `threads`
threads and writes the raw relation (`kineto_raw.RAW_SCHEMA`, in file order) as Parquet.
While DuckDB runs, msgspec validates every part strictly (its list of raw items), which
also counts the items.

Correctness by refusal: `decode_fast` returns None, and the robust decoder runs, unless
the result provably equals the robust decoder's rows:
- every part is a strict JSON array: by induction from the first part (which starts at
  the real array start), every cut was a real event boundary (a cut inside a string or at
  a deeper level makes the text before it invalid);
- every item is a JSON object whose fields msgspec's typed decode (`kineto._Event`)
  accepts, so the robust decoder would take its typed path with the same values; and
  every value the SQL converts is of a shape whose conversion is exact (plain numbers,
  plain numeric and id strings). Anything else (odd types, hex or unicode digit strings
  with signs or underscores, NaN literals, trailing commas, duplicate keys, escaped keys,
  truncated files, nested `traceEvents`) is refused.
"""
from __future__ import annotations

import mmap
import os
import re
import secrets
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Union

import msgspec

from .kineto import _Trace

PART_BYTES = 32 << 20     # JSON text per part: bounds the validation buffer and DuckDB's per-file state
MIN_SPLIT = 4 << 20       # below this the array is one part
ROW_GROUP = 1 << 16       # rows per row group of the raw Parquet part
_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])
_WS = b" \t\r\n"
_BOUNDARY = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{")


@dataclass
class Decoded:   # stand-in until kineto_raw.Decoded lands (issue 11, kpost)
    parts: list[Path]
    meta: _Trace
    n_items: int
    not_objects: int = 0
    first: bytes | None = None
    warnings: list[str] = field(default_factory=list)


class _Refused(Exception):
    """The fast path cannot prove its rows equal the robust decoder's."""


def threads_here() -> int:
    """Threads one ingest may use: every core of this process when it runs alone, 1 in a
    worker of the ingest pool (the pool already keeps all cores busy)."""
    import multiprocessing

    if multiprocessing.parent_process() is not None:
        return 1
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def decode_fast(text_path: Path, workdir: Path, threads: int) -> Decoded | None:
    """Raw parts of the plain JSON trace `text_path` (written under `workdir`), or None when
    the fast path cannot vouch for the result (the robust decoder then runs)."""
    text_path, workdir = Path(text_path), Path(workdir)
    made: list[Path] = []
    try:
        with open(text_path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < 2:
                return None
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            try:
                meta, start, end = _locate(mm)
                cuts = _cuts(mm, start, end)
                if cuts is None:
                    return None
                first = _first_item(mm, cuts[0][0], cuts[0][1])
            finally:
                mm.close()
            inputs = _write_parts(f.fileno(), cuts, workdir, made)
        return _run(inputs, workdir, threads, made, meta, first)
    except (_Refused, OSError, msgspec.DecodeError, msgspec.ValidationError):
        for p in made:
            _unlink(p)
        return None


def _unlink(p: Path) -> None:
    try:
        p.unlink()
    except OSError:
        pass


# ------------------------------------------------------------------ the event array
def _skip_ws(mm, i: int, n: int) -> int:
    while i < n and mm[i] in _WS:
        i += 1
    return i


def _locate(mm: mmap.mmap) -> tuple[_Trace, int, int]:
    """(metadata, start, end): the event array's content is mm[start:end] (between its
    brackets). The metadata is the document with `[]` for the array, decoded strictly; a
    random token in place of the array proves that `traceEvents` at top level is that array."""
    n = len(mm)
    i = 3 if mm[:3] == b"\xef\xbb\xbf" else 0
    i = _skip_ws(mm, i, n)
    j = n
    while j > i and mm[j - 1] in _WS:
        j -= 1
    if i >= j:
        raise _Refused
    if mm[i] == ord("["):
        if mm[j - 1] != ord("]"):
            raise _Refused
        return _Trace(), i + 1, j - 1
    if mm[i] != ord("{"):
        raise _Refused
    key = mm.find(b'"traceEvents"', i)
    if key < 0:
        raise _Refused
    k = _skip_ws(mm, key + len(b'"traceEvents"'), n)
    if k >= n or mm[k] != ord(":"):
        raise _Refused
    lb = _skip_ws(mm, k + 1, n)
    if lb >= n or mm[lb] != ord("["):
        raise _Refused
    prefix = mm[:lb]
    token = b'["tq-' + secrets.token_hex(8).encode() + b'"]'
    rb = j
    for _ in range(64):   # the array's `]`: the last one after an object whose suffix makes a valid document
        rb = mm.rfind(b"]", lb, rb)
        if rb < 0:
            break
        before = rb - 1
        while before > lb and mm[before] in _WS:
            before -= 1
        if mm[before] not in b"}[":   # the array of events ends with an object (a later list of strings does not)
            continue
        suffix = mm[rb + 1:]
        if b'"traceEvents"' in suffix or prefix.find(b'"traceEvents"', key + 1) >= 0 \
                or b"\\u" in prefix or b"\\u" in suffix:
            raise _Refused   # another spelling or a second `traceEvents`: the robust path decides
        doc = prefix + token + suffix
        try:
            fields = msgspec.json.decode(doc, type=dict[str, msgspec.Raw])
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        if bytes(fields.get("traceEvents", b"")) != token or doc.count(token) != 1:
            raise _Refused
        meta = msgspec.json.decode(prefix + b"[]" + suffix, type=_Trace)   # odd metadata: robust path
        meta.traceEvents = None
        return meta, lb + 1, rb
    raise _Refused


def _cuts(mm: mmap.mmap, start: int, end: int) -> list[tuple[int, int]] | None:
    """[(a, b)]: the parts of the array content, cut after a `}` and before a `{` at
    candidate boundaries about PART_BYTES apart; None when the array holds no item."""
    a = _skip_ws(mm, start, end)
    if a >= end:
        return None   # an empty event list: the robust path says so
    total = end - a
    n = 1 if total < MIN_SPLIT else -(-total // PART_BYTES)
    out = []
    for i in range(1, n):
        m = _BOUNDARY.search(mm, max(a + 1, start + total * i // n), end)
        if m is None:
            break
        out.append((a, m.start() + 1))
        a = m.end() - 1
    out.append((a, end))
    return out


def _first_item(mm: mmap.mmap, a: int, b: int) -> bytes:
    """The first item's text (up to 4096 bytes), as the robust decoder reports it."""
    if mm[a] != ord("{"):
        raise _Refused   # not an object: the robust path counts and reports it
    pos = a
    for _ in range(64):
        m = _BOUNDARY.search(mm, pos, b)
        stop = m.start() + 1 if m else b
        while stop > a and mm[stop - 1] in _WS:
            stop -= 1
        try:
            msgspec.json.decode(mm[a:stop], type=msgspec.Raw)
            return bytes(mm[a:min(stop, a + 4096)])
        except msgspec.DecodeError:
            if m is None:
                break
            pos = m.end() - 1
    raise _Refused


def _write_parts(fd: int, cuts: list[tuple[int, int]], workdir: Path, made: list[Path]) -> list[Path]:
    """Copy each part of the array into workdir as `[...]` (the kernel copies the bytes)."""
    workdir.mkdir(parents=True, exist_ok=True)
    out = []
    for i, (a, b) in enumerate(cuts):
        p = workdir / f"fast-{i:04d}.json"
        made.append(p)
        with open(p, "wb") as o:
            o.write(b"[")
            o.flush()
            off = a
            while off < b:
                k = os.copy_file_range(fd, o.fileno(), b - off, off) if hasattr(os, "copy_file_range") else 0
                if k <= 0:
                    k = os.sendfile(o.fileno(), fd, off, b - off)
                if k <= 0:
                    raise _Refused
                off += k
            os.lseek(o.fileno(), 0, os.SEEK_END)
            o.write(b"]")
        out.append(p)
    return out


# ------------------------------------------------------------------ strict validation
# What the SQL converts exactly as the robust decoder does (a subset of `kineto._Event`'s
# types, so the robust decoder would take its typed path with the same values): plain
# numeric text for times, and id strings that Python's int() and the SQL read alike (no
# signs, underscores, surrounding spaces, non-ASCII digits or long hex; at most the 64
# characters `kineto._to_int` looks at). Ids written as floats, non-string `kind`s and
# collective names are refused (rare; the robust path converts them).
_NumText = Annotated[str, msgspec.Meta(pattern=r"^-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?\Z", max_length=64)]
_IdText = Annotated[str, msgspec.Meta(
    pattern=r"^(-?[0-9]+|-?0[xX][0-9a-fA-F]{1,15}|(?!-?0[xX])(?![+-]?[0-9]+(_[0-9]+)*\Z)(?! )(?!.* \Z)[ -~]{0,64})\Z")]
_Time = Union[int, float, _NumText, None]
_Id = Union[int, _IdText, None]
_Str = Union[str, None]


def _args_check(lower_ext: bool) -> type:
    """The args struct of the check; one spelling of "External id" only (the other must be absent)."""
    upper, lower = (None, _Id) if lower_ext else (_Id, None)
    return msgspec.defstruct("_ArgsCheck", [
        ("ext", upper, msgspec.field(default=None, name="External id")),
        ("ext_lc", lower, msgspec.field(default=None, name="external id")),
        *[(k, _Id, msgspec.field(default=None, name=n)) for k, n in (
            ("correlation", "correlation"), ("stream", "stream"), ("device", "device"), ("bytes", "bytes"),
            ("registers", "registers per thread"), ("group_size", "Group size"), ("seq", "Seq"))],
        ("grid", Union[list[int], None], None), ("block", Union[list[int], None], None),
        ("finished", Union[str, bool, int, None], None), ("kind", _Str, None), ("dtype", _Str, None),
        ("in_n", _Time, msgspec.field(default=None, name="In msg nelems")),
        ("out_n", _Time, msgspec.field(default=None, name="Out msg nelems")),
        *[(k, _Str, msgspec.field(default=None, name=n)) for k, n in (
            ("collective", "Collective name"), ("pg_name", "Process Group Name"),
            ("pg_desc", "Process Group Description"))],
    ], gc=False)


def _event_check(lower_ext: bool) -> msgspec.json.Decoder:
    event = msgspec.defstruct("_EventCheck", [
        ("ph", _Str, None), ("cat", _Str, None), ("name", _Str, None), ("pid", _Id, None), ("tid", _Id, None),
        ("ts", _Time, None), ("dur", _Time, None), ("args", Union[_args_check(lower_ext), None], None)], gc=False)
    return msgspec.json.Decoder(list[event])


_CHECKS = {False: _event_check(False), True: _event_check(True)}


def _validate(parts: list[Path], lower_ext: bool) -> int:
    """Strict JSON and vouched-for types of every item of every part; the item count.
    Raises msgspec.DecodeError (not strict JSON), msgspec.ValidationError or _Refused."""
    n = 0
    dec = _CHECKS[lower_ext]
    for p in parts:
        buf = p.read_bytes()
        if b"\\u0000" in buf:
            raise _Refused("NUL in a string")
        n += len(dec.decode(buf))
        del buf
    return n


def _check(parts: list[Path], lower_ext: bool) -> int | str:
    """`_validate` as a result: the item count, "json" (not strict JSON) or "types"."""
    try:
        return _validate(parts, lower_ext)
    except (msgspec.ValidationError, _Refused):   # (a ValidationError is a DecodeError too)
        return "types"
    except msgspec.DecodeError:
        return "json"


def _fork_checks(parts: list[Path], lower_ext: bool, workers: int) -> tuple[list, list[Path]]:
    """Spread `_check` over `workers` cores: msgspec holds the GIL, so forked children (forked
    before DuckDB starts) take a share of the parts each and send back their result.
    Returns the children and the share left to this process."""
    if workers <= 1 or len(parts) < 2 or not hasattr(os, "fork"):
        return [], parts
    shares = [parts[i::workers] for i in range(min(workers, len(parts)))]
    children = []
    for share in shares[1:]:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:   # the child: check its share, write the result, leave without cleanup
            code = 1
            try:
                os.close(r)
                os.write(w, str(_check(share, lower_ext)).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        children.append((pid, r))
    return children, shares[0]


def _join_children(children, results: list) -> None:
    for pid, r in children:
        with os.fdopen(r, "rb") as f:
            got = f.read().decode()
        os.waitpid(pid, 0)
        results.append(int(got) if got.isdigit() else (got or "types"))


def _combine(results: list) -> int | str:
    if "json" in results:
        return "json"
    if any(not isinstance(x, int) for x in results):
        return "types"
    return sum(results)


def _run(inputs: list[Path], workdir: Path, threads: int, made: list[Path], meta: _Trace, first: bytes) -> Decoded:
    """DuckDB writes the raw part while msgspec checks the items (this thread, and forked
    children when there are more cores); a trace that spells "external id" in lower case is
    checked and written again in that spelling."""
    from .kineto_decode_sql import copy_raw

    out = workdir / "fast-raw.parquet"
    made.append(out)
    for lower_ext in (False, True):
        box: dict = {}
        children, mine = _fork_checks(inputs, lower_ext, threads)

        def duck(lower: bool = lower_ext) -> None:
            try:
                box["rows"] = copy_raw(inputs, out, workdir, threads, lower_ext=lower,
                                       connected=lambda con: box.setdefault("con", con))
            except Exception as exc:  # noqa: BLE001 - any DuckDB error refuses (the robust path decides)
                box["error"] = exc

        t = threading.Thread(target=duck)
        t.start()
        results: list = []
        try:
            results.append(_check(mine, lower_ext))
            if not isinstance(results[0], int) and "con" in box:
                box["con"].interrupt()   # refused already: do not wait for DuckDB to finish
        finally:
            _join_children(children, results)
            t.join()
        got = _combine(results)
        if got == "json":
            raise _Refused   # not strict JSON (or a cut inside an item)
        if isinstance(got, int) and "error" not in box:
            for p in inputs:
                _unlink(p)
            return Decoded(parts=[out], meta=meta, n_items=got, first=first)
        if lower_ext or not _mentions_lower_ext(inputs):
            break
    raise _Refused


def _mentions_lower_ext(inputs: list[Path]) -> bool:
    return any(b'"external id"' in p.read_bytes() for p in inputs)
