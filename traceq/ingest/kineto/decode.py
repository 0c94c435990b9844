"""Fast parallel decoding of a Kineto/Chrome trace into raw parts.

The event array of a plain JSON trace is cut into parts of at most `PART_BYTES` at candidate
event boundaries (`}` `,` `{` with whitespace between); forked worker processes (one per
core this ingest may use; msgspec holds the GIL, so threads would not help) decode their
parts with the robust decoder's own typed msgspec decode (slice by slice of ~2 MB, cut at
the same candidate boundaries) and `rows.RawWriter`, each part into its own raw Parquet
part. The parts, in file order, are the raw relation.

Correctness by refusal: `decode_fast` returns None, and the robust decoder runs, unless the
result provably equals the robust decoder's:
- every slice of every part decodes strictly as a JSON array: by induction from the first
  slice (which starts at the real array start), every cut was a real event boundary (a cut
  inside a string or at a deeper nesting level makes the text before it invalid);
- every item decodes typed (`events.EVENTS`), so the robust decoder takes its typed path
  too (no per-chunk coercion), and both build the rows with `rows.RawWriter`;
- the outer document with `[]` for the array decodes strictly as `events.Trace`, and a
  random token in place of the array proves that top-level `traceEvents` is that array.
Anything else (odd types, items that are no objects, NaN literals, trailing commas,
truncated files, a `traceEvents` key elsewhere first, one core only, a small file) is left
to the robust decoder.
"""
from __future__ import annotations

import mmap
import os
import re
import secrets
from pathlib import Path

import msgspec

from .events import EVENTS, Trace
from .raw import Decoded, remove_part
from .rows import RawWriter
from .salvage import BAD_JSON

PART_BYTES = 16 << 20     # JSON text per part at most (one raw part each), dealt to the workers one at a time
MIN_PART = 2 << 20        # ... and at least (the last parts: `_cuts`)
SLICE_BYTES = 2 << 20     # JSON text decoded at once within a part
MIN_SPLIT = 8 << 20       # below this one process decodes faster than forking workers
_WS = b" \t\r\n"
_BOUNDARY = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{")


class _Refused(Exception):
    """The fast path cannot prove its rows equal the robust decoder's."""


def threads_here() -> int:
    """Processes one ingest may use: every core of this process when it runs alone, 1 in a
    worker of the ingest pool (the pool already keeps all cores busy). TRACEQ_DECODE_PROCESSES
    sets it (1: the single-process robust path)."""
    import multiprocessing

    asked = os.environ.get("TRACEQ_DECODE_PROCESSES", "").strip()
    if asked.isdigit() and int(asked) > 0:
        return int(asked)

    if multiprocessing.parent_process() is not None:
        return 1
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def decode_fast(text_path: Path, workdir: Path, threads: int, inflating=None) -> Decoded | None:
    """Raw parts of the plain JSON trace `text_path` (written under `workdir`) decoded by
    `threads` processes, or None when the fast path does not apply or cannot vouch for the
    result (the robust decoder then runs). With `inflating` (a `text.Inflating` writing
    `text_path`), the parts are decoded while the text is inflated (`_decode_streamed`);
    the text is whole in `text_path` when this returns, whatever the result."""
    if threads < 2 or not hasattr(os, "fork"):
        return None
    if inflating is not None:
        got = _decode_streamed(inflating, workdir, threads)
        inflating.finish()
        if got is not _NOT_STREAMED:
            return got
    text_path, workdir = Path(text_path), Path(workdir)
    cuts: list = []
    try:
        with open(text_path, "rb") as f:
            if os.fstat(f.fileno()).st_size < MIN_SPLIT:
                return None
            # private (copy on write): `_decode_slice` writes brackets around the slice it decodes
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
            try:
                meta, start, end = _locate(mm)
                cuts = _cuts(mm, start, end, threads) or []
                if len(cuts) < 2:
                    return None
                first = _first_item(mm, *cuts[0])
                # Finding the cuts touched a little text at each one, but the kernel maps file
                # pages in folios of up to 2 MiB: ~2 MiB of RSS per cut (100 MB at 900 MB of
                # JSON), held by every process that forks from here. Drop them (they stay cached).
                _release(mm, 0, len(mm))
                workdir.mkdir(parents=True, exist_ok=True)
                results = _run_workers(mm, cuts, workdir, min(threads, len(cuts)))
            finally:
                mm.close()
        if all(r is not None for r in results):
            parts = [p for _, ps in results for p in ps]
            return Decoded(parts=parts, meta=meta, n_items=sum(n for n, _ in results), first=first)
    except (_Refused, OSError, *BAD_JSON):
        pass
    for i in range(len(cuts)):
        remove_part(_part_path(workdir, i))
    return None


# ------------------------------------------------------------------ the event array
def _skip_ws(mm, i: int, n: int) -> int:
    while i < n and mm[i] in _WS:
        i += 1
    return i


def _locate(mm: mmap.mmap) -> tuple[Trace, int, int]:
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
        return Trace(), i + 1, j - 1
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
        except BAD_JSON:
            continue
        if bytes(fields.get("traceEvents", b"")) != token or doc.count(token) != 1:
            raise _Refused
        meta = msgspec.json.decode(prefix + b"[]" + suffix, type=Trace)   # odd metadata: robust path
        meta.traceEvents = None
        return meta, lb + 1, rb
    raise _Refused


def _cuts(mm: mmap.mmap, start: int, end: int, workers: int) -> list[tuple[int, int]] | None:
    """[(a, b)]: the parts of the array content, cut after a `}` and before a `{` at candidate
    boundaries; at least one part per process. Guided sizes: each part is about what is left
    / (2 x workers), at most PART_BYTES and at least MIN_PART, so the parts shrink towards the
    end. The processes take the parts in order from a shared counter, so they finish within
    about one small part of each other, instead of one of them decoding a big last part
    alone (the 33 MB trace in 4 parts of 8.7 MB: the main process decoded the last one for
    0.08 s while the other had nothing left to do). None when the array holds no item."""
    a = _skip_ws(mm, start, end)
    if a >= end:
        return None   # an empty event list: the robust path says so
    cap = min(PART_BYTES, max(1, (end - a) // workers))   # at least one part per process
    out, low = [], min(MIN_PART, cap)
    while True:
        rest = end - a
        size = min(cap, max(low, rest // (2 * workers)))
        m = _BOUNDARY.search(mm, a + size, end) if rest - size >= low // 2 else None
        if m is None:   # the rest is one part (what would be left after this one is too small)
            out.append((a, end))
            return out
        out.append((a, m.start() + 1))
        a = m.end() - 1


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
        except BAD_JSON:
            if m is None:
                break
            pos = m.end() - 1
    raise _Refused


# ------------------------------------------------------------------ the workers
def _part_path(workdir: Path, i: int) -> Path:
    return workdir / f"fast-{i:04d}.parquet"


def _decode_part(mm: mmap.mmap, a: int, b: int, path: Path) -> tuple[int, list[Path]]:
    """One part: strict typed decode, slice by slice of about SLICE_BYTES (raises when the
    robust decoder would coerce or recover), rows written by the robust decoder's writer.
    (items, [raw part] or [])."""
    out = RawWriter(path.parent)
    out.path = path
    n = 0
    try:
        while a < b:
            m = _BOUNDARY.search(mm, a + SLICE_BYTES, b) if b - a > SLICE_BYTES else None
            stop = m.start() + 1 if m else b
            evs = _decode_slice(mm, a, stop)
            n += len(evs)
            out.add(evs)
            del evs
            a = m.end() - 1 if m else b
        return n, out.close()
    except BaseException:
        out.discard()
        raise


def _decode_slice(mm: mmap.mmap, a: int, b: int) -> list:
    """The events of mm[a:b] (items between two event boundaries, or the array's ends),
    decoded strictly as the JSON array `[` mm[a:b] `]`: the byte before `a` and the byte at
    `b` (a separator, whitespace or the array's own bracket) become the brackets, the slice is
    copied, and they get their values back. The map is private to this process (copy on
    write: two pages per slice), and a slice of ~2 MB decodes faster than a copy of the whole
    part: its text and events stay in the CPU's cache, and the allocator reuses its memory
    instead of faulting fresh pages in. The copy (~0.1 ms) is what the events' raw args
    (`msgspec.Raw`, views of the decoded text) point into: a view of the map itself could not
    be released while they live."""
    before, after = mm[a - 1], mm[b]
    mm[a - 1], mm[b] = 0x5B, 0x5D   # "[", "]"
    try:
        return EVENTS.decode(mm[a - 1:b + 1])
    finally:
        mm[a - 1], mm[b] = before, after


def _decode_share(mm: mmap.mmap, cuts, queue, workdir: Path) -> dict[int, tuple[int, list[Path]] | None]:
    """Decode the parts whose numbers this process takes from the shared counter `queue` (one
    at a time, until none is left), each into its own raw part; None for a part that cannot
    be decoded on the fast path (then this process stops)."""
    got: dict = {}
    while (i := _take(queue, len(cuts))) is not None:
        try:
            got[i] = _decode_part(mm, *cuts[i], _part_path(workdir, i))
        except BAD_JSON:   # not strict JSON (or invalid UTF-8, too deep), or not the typed path (a ValidationError)
            got[i] = None
            break
        finally:
            _release(mm, *cuts[i])
    return got


def _take(queue, n: int) -> int | None:
    """The next part number from the counter shared by the decoding processes, None when all
    `n` are taken."""
    with queue.get_lock():
        i = queue.value
        if i >= n:
            return None
        queue.value = i + 1
    return i


def _release(mm: mmap.mmap, a: int, b: int) -> None:
    """Drop this process's mapped pages of the decoded part [a, b): file pages it touched
    count in its RSS until released, and the whole file would otherwise end up resident."""
    page = mmap.PAGESIZE
    lo, hi = (a // page) * page, (b // page) * page
    if hi > lo:
        try:
            mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
        except (OSError, ValueError, AttributeError):
            pass


def _fork_workers(n: int, share) -> list[tuple[int, int]]:
    """`n` forked children, each running `share()` (-> {part: (items, [raw part]) or None})
    and sending back `i items parts` per part it decoded (`i -` when refused)."""
    children = []
    for _ in range(n):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:   # the child: decode parts from the queue, report, leave without any cleanup
            code = 1
            try:
                os.close(r)
                got = share()
                os.write(w, "".join(f"{i} -\n" if res is None else f"{i} {res[0]} {len(res[1])}\n"
                                    for i, res in got.items()).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        children.append((pid, r))
    return children


def _gather(children, results: dict, workdir: Path) -> None:
    """Wait for the children of `_fork_workers`; their results into `results`."""
    for pid, r in children:
        with os.fdopen(r, "rb") as f:
            text = f.read().decode()
        os.waitpid(pid, 0)
        for line in text.splitlines():
            i, n, *has = line.split()
            results[int(i)] = None if n == "-" else (int(n), [_part_path(workdir, int(i))] if has[0] == "1" else [])


def _run_workers(mm: mmap.mmap, cuts, workdir: Path, workers: int) -> list[tuple[int, list[Path]] | None]:
    """Decode the parts on `workers` processes: this one and forked children, each taking
    the next part from a counter in shared memory until none is left; a child sends back
    `i items parts` per part it decoded (`i -` when refused). While the children decode,
    this process first loads what translation needs next (polars: ~0.1 s of imports that
    decoding does without), then takes parts too: dealing them one at a time keeps the
    processes evenly busy whatever each one's start."""
    import multiprocessing

    queue = multiprocessing.get_context("fork").Value("q", 0)   # the number of the next part to take
    children = []
    results: dict = {}
    try:
        children = _fork_workers(workers - 1, lambda: _decode_share(mm, cuts, queue, workdir))
        from . import translate  # noqa: F401  (translation's imports, while the children decode)

        results.update(_decode_share(mm, cuts, queue, workdir))
    finally:
        _gather(children, results, workdir)
    return [results.get(i) for i in range(len(cuts))]


# ------------------------------------------------------------------ a .gz, decoded while inflated
_NOT_STREAMED = object()   # `_decode_streamed`: the text ended before a first part (decode it whole)
_ABORT = -2                # `_Deal.total` when the parts will not all be dealt
_MAX_PARTS = 1 << 16


class _Deal:
    """The parts of a text still being written, dealt to the decoding processes (shared
    memory, set before they fork): `bounds` holds each published part's (a, b), `ready`
    counts them, `total` is -1 until the last part is published (`_ABORT`: stop)."""

    def __init__(self) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("fork")
        self.lock = ctx.Lock()
        self.next = ctx.RawValue("q", 0)
        self.ready = ctx.RawValue("q", 0)
        self.total = ctx.RawValue("q", -1)
        self.bounds = ctx.RawArray("q", 2 * _MAX_PARTS)

    def publish(self, a: int, b: int) -> None:
        with self.lock:
            r = self.ready.value
            if r >= _MAX_PARTS:
                raise _Refused
            self.bounds[2 * r], self.bounds[2 * r + 1] = a, b
            self.ready.value = r + 1

    def close(self, total: int) -> None:
        with self.lock:
            self.total.value = total

    def take(self) -> int | None:
        """The number of the next part once it is published; None when there is none."""
        import time

        with self.lock:
            i = self.next.value
            self.next.value = i + 1
        while True:
            with self.lock:
                ready, total = self.ready.value, self.total.value
            if total == _ABORT or 0 <= total <= i:
                return None
            if i < ready:
                return i
            time.sleep(0.001)


def _stream_share(deal: _Deal, text_path: Path, workdir: Path) -> dict:
    """`_decode_share` for parts of a text still being written: each part from a private map
    of the file as long as it is now (remapped when a part lies beyond it)."""
    got: dict = {}
    mm = None
    with open(text_path, "rb") as f:
        try:
            while (i := deal.take()) is not None:
                a, b = deal.bounds[2 * i], deal.bounds[2 * i + 1]
                if mm is None or len(mm) <= b:
                    if mm is not None:
                        mm.close()
                    mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
                try:
                    got[i] = _decode_part(mm, a, b, _part_path(workdir, i))
                except BAD_JSON:
                    got[i] = None
                    break
                finally:
                    _release(mm, a, b)
        finally:
            if mm is not None:
                mm.close()
    return got


def _array_start(head: bytes) -> int | None:
    """Where the event array's content starts in the text's `head` (after its `[`: a bare
    list, or the first `"traceEvents"` key's list, as `_locate` finds it), None when `head`
    does not show it."""
    i = 3 if head[:3] == b"\xef\xbb\xbf" else 0
    i = _skip_ws(head, i, len(head))
    if head[i:i + 1] == b"[":
        return i + 1
    key = head.find(b'"traceEvents"', i) if head[i:i + 1] == b"{" else -1
    if key < 0:
        return None
    k = _skip_ws(head, key + len(b'"traceEvents"'), len(head))
    if head[k:k + 1] != b":":
        return None
    lb = _skip_ws(head, k + 1, len(head))
    return lb + 1 if head[lb:lb + 1] == b"[" else None


def _decode_streamed(inflating, workdir: Path, threads: int):
    """Decode the event array of a .gz while it is inflated: the pieces of text are written
    to `inflating.path`; from the array's start, a part is cut every `PART_BYTES` (at a
    candidate boundary inside one piece) and published to the `threads - 1` forked
    children, which decode parts while this process inflates. Once the text is whole, this
    process locates the array (`_locate`, as the plain path), cuts what is left as `_cuts`
    does, and decodes parts too. The same proofs as the plain path: the first part starts
    at the array's start, every slice decodes strictly; the array's end must lie after the
    last published part (else refused). `_NOT_STREAMED` when the text ends before a first
    part (or its head never shows the array): the plain path decodes the whole file."""
    workdir.mkdir(parents=True, exist_ok=True)
    deal, children, results, whole = _Deal(), [], {}, None
    a, head, off = None, b"", 0   # a: where the next part starts; off: the piece's offset in the text
    try:
        for piece in inflating.pieces():
            if a is None:
                head += piece
                start = _array_start(head)
                if start is None and len(head) > MIN_SPLIT:
                    break
                a = None if start is None else _skip_ws(head, start, len(head))
                head = b"" if a is not None else head
            while a is not None and (m := _BOUNDARY.search(piece, max(0, a + PART_BYTES - off))) is not None \
                    and deal.ready.value < _MAX_PARTS - 1:
                deal.publish(a, off + m.start() + 1)
                a = off + m.end() - 1
                if not children:
                    children = _fork_workers(threads - 1, lambda: _stream_share(deal, inflating.path, workdir))
            off += len(piece)
        if not children:
            return _NOT_STREAMED
        inflating.finish()
        whole = _stream_rest(deal, inflating.path, workdir, threads, start, a)
        results.update(whole[2] if whole is not None else {})
    except BaseException:
        deal.close(_ABORT)
        raise
    finally:
        _gather(children, results, workdir)
        parts = [results.get(i) for i in range(deal.ready.value)]
        if whole is None or not all(r is not None for r in parts):
            for i in range(deal.ready.value):
                remove_part(_part_path(workdir, i))
    if whole is None or not all(r is not None for r in parts):
        return None
    return Decoded(parts=[p for _, ps in parts for p in ps], meta=whole[0],
                   n_items=sum(n for n, _ in parts), first=whole[1])


def _stream_rest(deal: _Deal, text_path: Path, workdir: Path, threads: int, start: int, a: int):
    """The whole text's part of `_decode_streamed`: locate the array, cut and publish the
    rest from `a`, decode parts with the children: (meta, first item, {part: result}); None
    when refused (the deal aborted)."""
    with open(text_path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    try:
        meta, start_again, end = _locate(mm)
        if start_again != start or a >= end:
            raise _Refused
        first = _first_item(mm, deal.bounds[0], deal.bounds[1])
        for x, y in _cuts(mm, a, end, threads) or []:
            deal.publish(x, y)
    except (_Refused, *BAD_JSON):
        deal.close(_ABORT)
        return None
    finally:
        _release(mm, 0, len(mm))
        mm.close()
    deal.close(deal.ready.value)
    from . import translate  # noqa: F401  (translation's imports, while the children decode)

    return meta, first, _stream_share(deal, text_path, workdir)
