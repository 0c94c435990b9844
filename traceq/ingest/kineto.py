"""Kineto / PyTorch-profiler Chrome traces (`*.json`, `*.json.gz`) -> canonical tables.

Owns every quirk of the format (REFERENCE.md D1): object with `traceEvents` or a bare
array; 2021 capitalised categories (`Kernel`, `Runtime`, `Operator`, ...); `ts`/`dur` as
int, float or numeric string µs, relative to `baseTimeNanoseconds` in newer traces; string
pids/tids (`"stream 7"`, `"1890023232"`, ROCm hex `"0x0"`); `External id`/`external id`;
`B`/`E` pairs; spans still open at capture end (`args.finished == "false"`); files cut
mid-event by a crashed writer (every complete event is kept, with a warning).

Two halves meet at the raw event relation (`kineto_raw`, issue 11): decoding (this module)
writes every event of the file as Parquet *raw parts* in a scratch folder, and translation
(`kineto_translate`) reads them back chunk by chunk and writes the canonical tables into the
store's staging folder. Memory stays bounded whatever the trace size: the file (a .gz is
inflated into a scratch file first) is memory-mapped and decoded window by window (a few MB
of text, cut at validated event boundaries, decoded by msgspec into typed structs, turned into
Arrow columns, written as a row group), and the mapped pages of each window are released
once decoded. Files the window decoder cannot cut (no `traceEvents` list, odd documents, a
malformed middle) are decoded whole, as before; a file cut at its end keeps every complete
event, with a warning.
"""
from __future__ import annotations

import mmap
import os
import re
import shutil
import tempfile
import zlib
from pathlib import Path
from typing import Any, ClassVar, Union

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .. import arrow_kernels as ak
from ..errors import BadInput
from ..schema import truncated_warning
from . import memory
from .common import Parsed
from .kineto_raw import ARG_CAT_SET, RAW_SCHEMA, Decoded, SpanFacts, remove_part

Num = Union[int, float, str, None]
Text = Union[str, int, float, None]
_CHUNK = 16384          # events per typed decode (the slice path) and per `_columns` call
_WINDOW = 2 << 20       # bytes of JSON text decoded at once by the window decoder (kineto_decode.SLICE_BYTES)
_MAX_WINDOW = 64 << 20  # a window that cannot be cut below this size: decode the document whole
_ROW_GROUP = 1 << 16    # rows per row group of a raw part


class _Args(msgspec.Struct, gc=False):
    external_id: Num = msgspec.field(default=None, name="External id")
    external_id_lc: Num = msgspec.field(default=None, name="external id")
    correlation: Num = None
    stream: Num = None
    device: Num = None
    bytes: Num = None
    grid: Union[list[int], None] = None
    block: Union[list[int], None] = None
    registers: Num = msgspec.field(default=None, name="registers per thread")
    finished: Union[str, bool, int, None] = None
    kind: Union[str, int, None] = None
    # PyTorch >= 2.2 on NCCL kernels: message size of the collective (-> gpu_ops.bytes)
    in_nelems: Num = msgspec.field(default=None, name="In msg nelems")
    out_nelems: Num = msgspec.field(default=None, name="Out msg nelems")
    dtype: Union[str, None] = None
    # collective identity (PyTorch >= 2.1, NCCL kernels and record_param_comms)
    collective: Text = msgspec.field(default=None, name="Collective name")
    pg_name: Text = msgspec.field(default=None, name="Process Group Name")
    # older PyTorch (2.0: record_param_comms of ns_resolution_trace) writes the group's id, whose
    # text is the group's name (distributedInfo pg_config: uid 0 -> pg_name "0"): pg_name's fallback
    pg_id: Text = msgspec.field(default=None, name="Process Group ID")
    pg_desc: Text = msgspec.field(default=None, name="Process Group Description")
    group_size: Num = msgspec.field(default=None, name="Group size")
    seq: Num = msgspec.field(default=None, name="Seq")


class _Fields(msgspec.Struct, gc=False):
    """The fields of a trace event that translation reads, besides its phase."""
    cat: Union[str, None] = None
    name: Union[str, None] = None
    pid: Union[int, str, None] = None
    tid: Union[int, str, None] = None
    ts: Num = None
    dur: Num = None
    args: Union[_Args, None] = None


class _Event(_Fields):
    """An event of the coercion path (`_coerce_chunk`): any phase, or none."""
    ph: Union[str, None] = None


# The typed decode: a union tagged by `ph`. The kept phases (X, B, E) are decoded in full;
# every other phase of the Trace Event Format is a struct without fields, whose values msgspec
# skips unread (a third of a Kineto trace's events are flows: 15 % less decode time). Each
# class has its phase as a class attribute `ph`, as `_Event` has it as a field. Any other
# `ph` (a missing, unknown or non-text one, or a key repeated with another value) fails the
# typed decode, and its chunk goes the coercion path, which keeps only X, B and E too.
class _Kept(_Fields, tag_field="ph"):
    pass


class _X(_Kept, tag="X"):
    ph: ClassVar[str] = "X"


class _B(_Kept, tag="B"):
    ph: ClassVar[str] = "B"


class _E(_Kept, tag="E"):
    ph: ClassVar[str] = "E"


_OTHER_PHASES = "iICbneSTpFstfPNODMVvRc()="   # chrome://tracing's Trace Event Format, all but X, B and E
_SKIPPED = tuple(msgspec.defstruct(f"_Phase{i}", [], gc=False, tag_field="ph", tag=ph, namespace={"ph": ph})
                 for i, ph in enumerate(_OTHER_PHASES))


class _Device(msgspec.Struct, gc=False):
    id: Any = None
    name: Any = None
    numSms: Any = None
    multiProcessorCount: Any = None
    totalGlobalMem: Any = None


class _Trace(msgspec.Struct, gc=False):
    traceEvents: Union[list[msgspec.Raw], None] = None
    deviceProperties: Union[list[_Device], None] = None
    computeProperties: Union[list[_Device], None] = None
    distributedInfo: Union[dict, None] = None
    baseTimeNanoseconds: Union[int, None] = None
    schemaVersion: Any = None
    host_name: Any = None
    hostname: Any = None


_EVENTS = msgspec.json.Decoder(list[Union[(_X, _B, _E, *_SKIPPED)]])
_ANY_LIST = msgspec.json.Decoder(list[Any])


# ------------------------------------------------------------------ file -> text map
def _open_text(path: Path, workdir: Path) -> tuple[Path, mmap.mmap]:
    """The JSON text as a memory map, and the file it maps: the file itself, or for a .gz a
    plain file inflated into `workdir` (streaming, with the bomb limits below). The mapped
    pages are released window by window as they are decoded (see `_release`)."""
    try:
        with open(path, "rb") as f:
            if f.read(2) == b"\x1f\x8b":
                f.seek(0)
                text_path = _gunzip_to_file(f, path, workdir / "inflated.json")
            else:
                text_path = path
        with open(text_path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                raise BadInput("empty file", path)
            return text_path, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise BadInput(exc.strerror or str(exc), path) from None


# Decompression limits (bombs): expanded text with no trace event in its first NO_EVENT_LIMIT
# bytes is refused, and so is an expansion beyond max(RATIO_FLOOR, MAX_RATIO x compressed
# size) -- JSON traces compress 5-30x; 200x is whitespace or repetition, not events.
NO_EVENT_LIMIT = 64 << 20
MAX_RATIO = 200
RATIO_FLOOR = 256 << 20


def _gunzip_to_file(f, path: Path, out_path: Path) -> Path:
    """Inflate the .gz `f` into `out_path` piece by piece (never the whole text in memory)."""
    compressed = os.fstat(f.fileno()).st_size
    limit = max(RATIO_FLOOR, MAX_RATIO * compressed)
    d = zlib.decompressobj(wbits=47)
    pos, seen_event, tail = 0, False, b""
    try:
        with open(out_path, "wb") as out_f:
            while chunk := f.read(1 << 22):
                while chunk:
                    out = d.decompress(chunk, 1 << 24)
                    if not seen_event:   # an event has a "ph" key; look across chunk borders too
                        seen_event = b'"ph"' in tail + out[:8] or b'"ph"' in out
                        tail = out[-8:]
                        if not seen_event and pos + len(out) > NO_EVENT_LIMIT:
                            raise BadInput(f"no trace events in the first {NO_EVENT_LIMIT >> 20} MB of decompressed "
                                           f"data ({compressed / 1e6:.1f} MB compressed): not a trace, refused", path)
                    if pos + len(out) > limit:
                        raise BadInput(f"expands beyond {limit >> 20} MB ({MAX_RATIO}x its compressed size "
                                       f"{compressed / 1e6:.1f} MB): not a plausible trace, refused", path)
                    chunk = d.unconsumed_tail
                    if d.eof and d.unused_data:            # concatenated gzip members
                        chunk = d.unused_data + chunk
                        d = zlib.decompressobj(wbits=47)
                    out_f.write(out)
                    pos += len(out)
    except zlib.error as exc:
        raise BadInput(f"corrupt .gz file ({exc})", path) from None
    if not d.eof:
        raise BadInput("truncated .gz file (compressed stream ends early)", path)
    if pos == 0:
        raise BadInput("empty file", path)
    return out_path


def _trim_heap() -> None:
    """Hand the freed per-event Python objects back to the OS (glibc keeps them otherwise)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _address(buf) -> int:
    return np.frombuffer(buf, dtype=np.uint8).ctypes.data


def _release(mm: mmap.mmap, base: int, upto: int, done: int) -> int:
    """Drop the mapped pages of [done, upto) from memory (they are decoded already)."""
    page = mmap.PAGESIZE
    lo, hi = (done // page) * page, (upto // page) * page
    if hi > lo:
        mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
        return hi
    return done


# ------------------------------------------------------------------ raw parts
_RAW_TEXT = [f.name for f in RAW_SCHEMA if pa.types.is_string(f.type)]


class _RawWriter:
    """The raw parts of one decode (`kineto_raw.RAW_SCHEMA`): the kept events of each decoded
    piece become Arrow columns at once, and every `_ROW_GROUP` rows a row group of the part;
    beside the part, the facts of translation's first pass (`kineto_raw.SpanFacts`)."""

    def __init__(self, workdir: Path):
        self.path = Path(workdir) / "raw-0000.parquet"
        self.writer: pq.ParquetWriter | None = None
        self.pending: list[pa.RecordBatch] = []
        self.rows = 0
        self.facts = SpanFacts()

    def add(self, evs: list) -> None:
        for i in range(0, len(evs), _CHUNK):
            kept = [e for e in evs[i:i + _CHUNK] if e is not None and e.ph in _KEPT_PH and e.cat not in _TRACE_CATS]
            if kept:
                cols = _columns(kept, True)
                self.facts.add(cols["ph"], cols["cat"], cols["ts"], cols["dur"])
                self.pending.append(pa.RecordBatch.from_pydict(cols, schema=RAW_SCHEMA))
                self.rows += len(kept)
        if self.rows >= _ROW_GROUP:
            self.flush()

    def flush(self, final: bool = False) -> None:
        """Write whole row groups of `_ROW_GROUP` rows (and the rest too when `final`)."""
        if not self.pending:
            return
        t = pa.Table.from_batches(self.pending, RAW_SCHEMA)
        n = t.num_rows if final else t.num_rows - t.num_rows % _ROW_GROUP
        if self.writer is None:
            # a scratch file read back at once, in order: no compression, dictionaries for text
            # only, no statistics (nothing is looked up in it)
            self.writer = pq.ParquetWriter(self.path, RAW_SCHEMA, compression="none", use_dictionary=_RAW_TEXT,
                                           write_statistics=False)
        if n:
            self.writer.write_table(t.slice(0, n), row_group_size=_ROW_GROUP)
        rest = t.slice(n).combine_chunks() if n < t.num_rows else None
        self.pending = rest.to_batches() if rest is not None else []
        self.rows = t.num_rows - n

    def close(self) -> list[Path]:
        self.flush(final=True)
        if self.writer is None:
            return []
        self.writer.close()
        self.facts.save(self.path)
        return [self.path]

    def discard(self) -> None:
        self.pending, self.rows, self.facts = [], 0, SpanFacts()
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        remove_part(self.path)


# ------------------------------------------------------------------ text -> raw parts
def _decode(text_path: Path, mm: mmap.mmap, workdir: Path, source: Path) -> Decoded:
    """Decode the JSON text `mm` (of the file `text_path`; `source` names the file in errors)
    into raw parts in `workdir`. The fast parallel decoder first (`kineto_decode`: plain,
    well-typed traces); else window by window when the document lets itself be cut (a
    `traceEvents` list, or a bare list, of events), else whole (`_decode_whole`)."""
    from .kineto_decode import decode_fast, threads_here

    fast = decode_fast(text_path, workdir, threads_here())
    if fast is not None:
        return fast
    out = _RawWriter(workdir)
    try:
        got = _decode_windows(mm, source, out)
        if got is None:
            out.discard()
            got = _decode_whole(mm, source, out)
        meta, n_items, not_objects, first, warnings = got
        return Decoded(out.close(), meta, n_items, not_objects, first, warnings)
    except BaseException:
        out.discard()
        raise


_WS = frozenset(b" \t\r\n")
_RAWS = msgspec.json.Decoder(list[msgspec.Raw])
_CUT_TRIES = 4       # event boundaries tried per window before the window grows
_CLOSE_TRIES = 64    # `]` tried as the end of the event list


def _skip_ws(mm, i: int, n: int) -> int:
    while i < n and mm[i] in _WS:
        i += 1
    return i


def _events_begin(mm: mmap.mmap, s: int, head: bytes) -> int | None:
    """Offset just after the `[` that opens the event list: a bare list, or the value of a
    top-level "traceEvents" key (a key is top-level when the text before it, closed by
    `"traceEvents":[]}`, is a valid JSON object). None when there is no such list."""
    if head == b"[":
        return s + 1
    if head != b"{":
        return None
    n, at = len(mm), s
    for _ in range(8):
        idx = mm.find(b'"traceEvents"', at)
        if idx < 0:
            return None
        at = idx + 13
        j = _skip_ws(mm, at, n)
        if j < n and mm[j] == 0x3A:   # ':'
            j = _skip_ws(mm, j + 1, n)
            if j < n and mm[j] == 0x5B:   # '['
                try:
                    msgspec.json.decode(bytes(mm[s:idx]) + b'"traceEvents":[]}', type=dict[str, msgspec.Raw])
                    return j + 1
                except (msgspec.ValidationError, msgspec.DecodeError):
                    pass
    return None


def _try_list(buf) -> tuple[list | None, list | None]:
    """(typed events, None) or (None, raw slices) when `buf` is a JSON list; (None, None) when not."""
    try:
        return _EVENTS.decode(buf), None
    except msgspec.ValidationError:   # odd types somewhere: is it a list at all?
        try:
            return None, _RAWS.decode(buf)
        except (msgspec.ValidationError, msgspec.DecodeError):
            return None, None
    except msgspec.DecodeError:
        return None, None


def _cuts(mm: mmap.mmap, lo: int, hi: int):
    """Candidate event boundaries in [lo, hi), last first: (end of an object, start of the next),
    i.e. `}` `,` `{` with only whitespace between them."""
    n = len(mm)
    i = mm.rfind(b"}", lo, hi)
    while i > lo:
        j = _skip_ws(mm, i + 1, n)
        if j < n and mm[j] == 0x2C:   # ','
            j = _skip_ws(mm, j + 1, n)
            if j < n and mm[j] == 0x7B:   # '{'
                yield i + 1, j
        i = mm.rfind(b"}", lo, i)


def _join(mm: mmap.mmap, lo: int, hi: int) -> bytes:
    return b"".join((b"[", memoryview(mm)[lo:hi], b"]"))


class _Progress:
    """Counts of a window decode, and where its mapped pages are released up to."""

    def __init__(self, mm: mmap.mmap, out: _RawWriter):
        self.mm, self.out = mm, out
        self.n_items = self.not_objects = 0
        self.first: bytes | None = None
        self.released = 0

    def take(self, evs: list | None, raws: list | None, buf: bytes, upto: int) -> None:
        if self.first is None:
            raws = raws if raws is not None else _RAWS.decode(buf)
            self.first = bytes(raws[0])[:4096] if raws else None
        if evs is not None:
            self.n_items += len(evs)
            self.out.add(evs)
        else:
            self.n_items += len(raws)
            self.not_objects += _decode_slices(raws, self.out)
        self.released = _release(self.mm, 0, upto, self.released)


def _decode_windows(mm: mmap.mmap, source: Path, out: _RawWriter):
    """Decode the event list window by window: each window of about `_WINDOW` bytes is cut
    at the last event boundary that makes it a valid JSON list (tried by msgspec, so a `},{`
    inside a string never cuts), decoded, written and released. The list's end, and the
    metadata around it, are found at the end. None when the document is not cut this way
    (then it is decoded whole, as before)."""
    n = len(mm)
    head = bytes(mm[:4096]).lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    if not head:
        raise BadInput("empty file", source)
    s0 = 3 if mm[:3] == b"\xef\xbb\xbf" else 0
    begin = _events_begin(mm, _skip_ws(mm, s0, n), head)
    if begin is None:
        return None
    prog = _Progress(mm, out)
    pos, width = _skip_ws(mm, begin, n), _WINDOW
    while pos + width < n:   # the middle: cut windows at event boundaries
        nxt = _take_window(mm, pos, pos + width, prog)
        if nxt is None:
            width *= 2   # no boundary found: one event larger than the window, or a malformed middle
            if width > _MAX_WINDOW:
                return None
        else:
            pos, width = nxt, _WINDOW
    while (nxt := _take_window(mm, pos, n, prog)) is not None:   # the end: up to the last boundary
        pos = nxt
    close = mm.find(b"]", pos)
    for _ in range(_CLOSE_TRIES):
        if close < 0:
            break
        buf = _join(mm, pos, close)
        evs, raws = _try_list(buf)
        if evs is not None or raws is not None:
            if evs or raws:
                prog.take(evs, raws, buf, close)
            skeleton = bytes(mm[s0:begin]) + bytes(mm[close:])
            meta, warnings = _parse_skeleton(skeleton, head, source, prog.n_items, mm[:begin])
            return meta, prog.n_items, prog.not_objects, prog.first, warnings
        close = mm.find(b"]", close + 1)
    return _recover_end(mm, pos, begin, source, prog)


def _take_window(mm: mmap.mmap, pos: int, hi: int, prog: _Progress) -> int | None:
    """Decode the events from `pos` up to the last event boundary before `hi` that makes
    them a valid JSON list (`_CUT_TRIES` boundaries tried); the start of the next event, or
    None when no boundary was found."""
    for tries, (cut, nxt) in enumerate(_cuts(mm, pos, hi)):
        if tries == _CUT_TRIES:
            return None
        buf = _join(mm, pos, cut)
        evs, raws = _try_list(buf)
        if evs is not None or raws is not None:
            prog.take(evs, raws, buf, nxt)
            return nxt
    return None


def _parse_skeleton(skeleton: bytes, head: bytes, source: Path, n_items: int, before: bytes):
    """The document's metadata: the document with its event list emptied, read as the whole
    document was before (odd metadata types, a malformed end). Returns (meta, warnings)."""
    warnings: list[str] = []
    try:
        if head == b"[":
            msgspec.json.decode(skeleton, type=list[msgspec.Raw])
            return _Trace(), warnings
        trace = msgspec.json.decode(skeleton, type=_Trace)
    except msgspec.ValidationError:
        trace = _parse_loose(skeleton, source, warnings)
    except msgspec.DecodeError:
        warnings.append(truncated_warning(n_items))
        return _recover_meta(before), warnings
    if trace.traceEvents is None:
        raise BadInput(_what_object(skeleton), source)
    trace.traceEvents = None
    return trace, warnings


def _recover_end(mm: mmap.mmap, pos: int, begin: int, source: Path, prog: _Progress):
    """The event list does not end: a file cut by a killed writer. Keep the complete events
    of the rest (ijson, on the last window only), with a warning; a list that does end after
    all (a rest that could not be cut) is decoded whole instead (None)."""
    items, closed = _complete_items(b"[" + bytes(mm[pos:]))
    if closed:
        return None
    if items:
        raws = [msgspec.Raw(msgspec.json.encode(it)) for it in items]
        prog.take(None, raws, b"", pos)
    if prog.n_items == 0:
        raise BadInput("not a Chrome trace (invalid JSON, no complete event found)", source)
    warnings = [truncated_warning(prog.n_items)]
    return _recover_meta(mm[:begin]), prog.n_items, prog.not_objects, prog.first, warnings


def _complete_items(text: bytes) -> tuple[list, bool]:
    """The complete items of the JSON list `text` up to its first error, and whether the list
    was closed."""
    import io

    import ijson

    items: list = []
    builder = None
    try:
        for prefix, event, value in ijson.parse(io.BytesIO(text), use_float=True):
            if prefix == "":
                if event == "end_array":
                    return items, True
                continue
            if builder is None:
                builder = ijson.ObjectBuilder()
            builder.event(event, value)
            if prefix == "item" and event not in ("start_map", "map_key", "start_array"):
                items.append(builder.value)
                builder = None
    except (ijson.JSONError, ijson.IncompleteJSONError, ValueError, RecursionError):
        pass
    return items, False


def _decode_whole(mm: mmap.mmap, source: Path, out: _RawWriter):
    """The document in one piece (documents the window decoder does not cut): split into
    raw event slices, then decoded chunk by chunk, releasing slices and pages as it goes."""
    trace, raws, warnings = _parse_outer(mm, source)
    trace.traceEvents = None
    n_items = len(raws)
    first = bytes(raws[0])[:4096] if n_items else None
    recovered = bool(warnings)   # recovered slices are copies, not views of `mm`
    not_objects = _decode_slices(raws, out, None if recovered else mm)
    del raws
    _trim_heap()
    return trace, n_items, not_objects, first, warnings


def _decode_chunk(chunk: list[msgspec.Raw]) -> tuple[list, int]:
    """Typed structs of a chunk of raw slices (odd types: coerced one by one), and how many
    of its items are not JSON objects (None in the list)."""
    try:
        return _EVENTS.decode(b"[" + b",".join(chunk) + b"]"), 0
    except msgspec.ValidationError:
        evs = _coerce_chunk(chunk)
        return evs, sum(e is None for e in evs)


def _decode_slices(raws: list[msgspec.Raw], out: _RawWriter, mm: mmap.mmap | None = None) -> int:
    """Decode raw event slices chunk by chunk into `out`; returns the count of items that are
    not JSON objects. Each chunk's slices and (when the slices are views of `mm`) its mapped
    pages are released once decoded."""
    not_objects = 0
    base = _address(mm) if mm is not None else 0
    done = 0
    for i in range(0, len(raws), _CHUNK):
        chunk = raws[i:i + _CHUNK]
        evs, bad = _decode_chunk(chunk)
        not_objects += bad
        out.add(evs)
        if mm is not None:
            end = _address(chunk[-1]) + len(chunk[-1]) - base
            if 0 <= end <= len(mm):
                done = _release(mm, base, end, done)
        del chunk, evs
        raws[i:i + _CHUNK] = [None] * min(_CHUNK, len(raws) - i)   # free the slices as we go
    return not_objects


def _parse_outer(raw: mmap.mmap, path: Path) -> tuple[_Trace, list[msgspec.Raw], list[str]]:
    """Split the document into metadata and raw event slices; recover truncated files."""
    warnings: list[str] = []
    head = bytes(raw[:4096]).lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    if not head:
        raise BadInput("empty file", path)
    text = memoryview(raw)[3:] if raw[:3] == b"\xef\xbb\xbf" else raw   # a UTF-8 BOM is not JSON
    try:
        if head == b"[":
            return _Trace(), msgspec.json.decode(text, type=list[msgspec.Raw]), warnings
        trace = msgspec.json.decode(text, type=_Trace)
    except msgspec.ValidationError as exc:
        if head != b"{":
            raise BadInput(f"not a Chrome trace ({exc})", path) from None
        trace = _parse_loose(text, path, warnings)
    except msgspec.DecodeError:
        if head not in (b"{", b"["):
            raise BadInput("not a Chrome trace (not JSON)", path) from None
        trace, events = _recover_truncated(raw, head, path)
        warnings.append(truncated_warning(len(events)))
        return trace, events, warnings
    if trace.traceEvents is None:
        raise BadInput(_what_object(text), path)
    return trace, trace.traceEvents, warnings


def _what_object(text) -> str:
    """Say what a JSON object without "traceEvents" is (its first keys)."""
    try:
        keys = list(msgspec.json.decode(text, type=dict[str, msgspec.Raw]))
    except (msgspec.ValidationError, msgspec.DecodeError):
        keys = []
    if "traceEvents" in keys:
        return 'not a Chrome trace ("traceEvents" is not a list of events)'
    shown = ", ".join(repr(k[:40]) for k in keys[:8]) + (", ..." if len(keys) > 8 else "")
    return (f"not a trace: a JSON object with keys {shown}" if keys else "not a trace: an empty JSON object") + \
        '; a Chrome/Kineto trace is an object with a "traceEvents" list (or a list of events)'


def _parse_loose(text, path: Path, warnings: list[str]) -> _Trace:
    """The document is a JSON object but some metadata has an unexpected type: take the
    event list, and each metadata field that is valid; name the fields ignored."""
    try:
        fields = msgspec.json.decode(text, type=dict[str, msgspec.Raw])
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise BadInput(f"not a Chrome trace ({exc})", path) from None
    trace, bad = _Trace(), []
    import typing

    for key, typ in typing.get_type_hints(_Trace).items():
        if key not in fields:
            continue
        try:
            setattr(trace, key, msgspec.json.decode(fields[key], type=typ))
        except (msgspec.ValidationError, msgspec.DecodeError):
            if key == "traceEvents":
                raise BadInput('not a Chrome trace ("traceEvents" is not a list of events)', path) from None
            bad.append(key)
    if bad:
        warnings.append(f"ignored metadata of an unexpected type: {', '.join(bad)}")
    return trace


def _recover_truncated(raw: mmap.mmap, head: bytes, path: Path) -> tuple[_Trace, list[msgspec.Raw]]:
    """Stream-parse a broken document with ijson and keep every complete event."""
    import ijson

    prefix = "item" if head == b"[" else "traceEvents.item"
    events: list[msgspec.Raw] = []
    try:
        raw.seek(0)
        for ev in ijson.items(raw, prefix, use_float=True):
            events.append(msgspec.Raw(msgspec.json.encode(ev)))
    except (ijson.JSONError, ijson.IncompleteJSONError, ValueError):
        pass
    if not events:
        raise BadInput("not a Chrome trace (invalid JSON, no complete event found)", path)
    raw.seek(0)
    return _recover_meta(raw), events


def _recover_meta(text) -> _Trace:
    """The metadata written before traceEvents (deviceProperties, distributedInfo) of a broken
    document: still usable. `text`: a file-like object or the bytes up to the event list."""
    import io
    import typing

    import ijson

    meta = _Trace()
    try:
        source = text if hasattr(text, "read") else io.BytesIO(bytes(text))
        for key, value in ijson.kvitems(source, "", use_float=True):
            if key == "traceEvents":
                break
            if key in ("deviceProperties", "distributedInfo", "baseTimeNanoseconds", "host_name", "hostname"):
                setattr(meta, key, msgspec.convert(value, type=typing.get_type_hints(_Trace)[key]))
    except Exception:  # noqa: BLE001 - metadata is optional; events are what matter
        pass
    return meta


# ------------------------------------------------------------------ events -> columns
# ------------------------------------------------------------------ events -> columns
_I64 = 2**63


def _to_int(v):
    """pid/tid/stream values: int, numeric or hex string, or `"stream 7"`; None when the
    value is no integer or does not fit int64 (ids beyond int64 point nowhere)."""
    if v is None:
        return None
    if type(v) is float:
        v = int(v) if v == v and abs(v) < _I64 else None
    elif type(v) is not int:
        s = str(v).strip()[:64]
        try:
            v = int(s, 0) if s.lower().startswith(("0x", "-0x")) else int(s)
        except ValueError:
            m = re.search(r"-?\d{1,19}", s)
            v = int(m.group()) if m else None
    return int(v) if v is not None and -_I64 <= v < _I64 else None


def _num(v):
    """A time/size value as float (µs for ts/dur): numbers and numeric strings; None otherwise.
    Integers beyond float range become inf (dropped later as not representable)."""
    if v is None or type(v) is float:
        return v
    if type(v) is int:
        try:
            return float(v)
        except OverflowError:
            return float("inf") if v > 0 else float("-inf")
    if type(v) is str:
        try:
            return float(v[:64])
        except ValueError:
            return None
    return None


def _int_list(v):
    return [x for x in v if type(x) is int] if isinstance(v, list) else None


def _decode_any(chunk: list[msgspec.Raw]) -> list:
    """Generic decode of a chunk; events msgspec refuses (numbers beyond float range) are
    decoded one by one by the standard library (1e400 -> inf, big ints stay ints)."""
    try:
        return _ANY_LIST.decode(b"[" + b",".join(chunk) + b"]")
    except (msgspec.ValidationError, msgspec.DecodeError):
        import json

        out = []
        for raw in chunk:
            try:
                out.append(msgspec.json.decode(raw))
            except (msgspec.ValidationError, msgspec.DecodeError):
                try:
                    out.append(json.loads(bytes(raw)))
                except (ValueError, RecursionError):
                    out.append(None)
        return out


def _pg_id_text(v):
    """An old "Process Group ID" as the name PyTorch gives that group: 0 -> "0" (1.0 -> "1")."""
    if type(v) is float and v.is_integer():
        return str(int(v))
    return v


def _name_arg(v):
    return v if type(v) in (str, int, float) else None


def _coerce_chunk(chunk: list[msgspec.Raw]) -> list[_Event]:
    """Slow path for a chunk with unexpected types: decode generically, coerce per event.
    Items that are not JSON objects are kept as None (counted, then skipped)."""
    out = []
    for item in _decode_any(chunk):
        if not isinstance(item, dict):
            out.append(None)
            continue
        a = item.get("args") if isinstance(item.get("args"), dict) else None
        args = None
        if a is not None:
            args = _Args(
                external_id=_num(a.get("External id")), external_id_lc=_num(a.get("external id")),
                correlation=_num(a.get("correlation")), stream=a.get("stream") if type(a.get("stream")) in (int, float, str) else None, device=_num(a.get("device")),
                bytes=_num(a.get("bytes")), grid=_int_list(a.get("grid")), block=_int_list(a.get("block")),
                registers=_num(a.get("registers per thread")), finished=str(a.get("finished")) if "finished" in a else None,
                kind=a.get("kind") if type(a.get("kind")) in (str, int) else None,
                in_nelems=_num(a.get("In msg nelems")), out_nelems=_num(a.get("Out msg nelems")),
                dtype=a.get("dtype") if type(a.get("dtype")) is str else None,
                collective=_name_arg(a.get("Collective name")), pg_name=_name_arg(a.get("Process Group Name")),
                pg_id=_name_arg(a.get("Process Group ID")),
                pg_desc=_name_arg(a.get("Process Group Description")), group_size=_num(a.get("Group size")),
                seq=_num(a.get("Seq")))
        text = lambda v: v if v is None or type(v) is str else str(v)  # noqa: E731
        ident = lambda v: v if v is None or type(v) in (int, str) else _to_int(v)  # noqa: E731
        out.append(_Event(ph=text(item.get("ph")), cat=text(item.get("cat")), name=text(item.get("name")),
                          pid=ident(item.get("pid")), tid=ident(item.get("tid")), ts=_num(item.get("ts")),
                          dur=_num(item.get("dur")), args=args))
    return out


def _int_col(values) -> pa.Array:
    """int64 column; the fast path is pyarrow's own conversion, odd values are coerced only if present."""
    try:
        return pa.array(values, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        return pa.array([_to_int(v) for v in values], pa.int64())


def _float_col(values) -> pa.Array:
    try:
        return pa.array(values, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        return pa.array([_num(v) for v in values], pa.float64())


def _str_col(values) -> pa.Array:
    try:
        return pa.array(values, pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([v if v is None or type(v) is str else str(v) for v in values], pa.string())


def _dims(values) -> tuple[pa.Array, pa.Array, pa.Array]:
    """The first three integers of each list (grid, block): x, y, z columns."""
    try:
        lists = pa.array(values, pa.list_(pa.int64()))
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        lists = pa.array([[x if type(x) is int and -_I64 <= x < _I64 else None for x in v] if type(v) is list else None
                          for v in values], pa.list_(pa.int64()))
    if len(lists.values) == 0:
        return (pa.nulls(len(values), pa.int64()),) * 3
    # Arrow kernels only (a numpy array handed to pyarrow makes it import numpy.ma: 25 ms in
    # each decoding process)
    lengths = ak.fill_null(ak.call("list_value_length", lists), 0)
    starts = lists.offsets.slice(0, len(lists))
    out = []
    for i in range(3):
        has = ak.call("greater", lengths, i)
        picked = ak.take(lists.values, ak.call("if_else", has, ak.call("add", starts, i), 0))
        out.append(ak.call("if_else", has, picked, pa.scalar(None, pa.int64())))
    return tuple(out)


_TRACE_CATS = frozenset({"Trace", "trace"})
_KEPT_PH = frozenset(("X", "B", "E"))
_NO_ARGS = _Args()


# element sizes of the `dtype` names PyTorch writes in record_param_comms / NCCL kernel args
_DTYPE_BYTES = {"float": 4, "float32": 4, "double": 8, "float64": 8, "half": 2, "float16": 2, "bfloat16": 2,
                "int": 4, "int32": 4, "long": 8, "int64": 8, "short": 2, "int16": 2, "char": 1, "int8": 1,
                "byte": 1, "uint8": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1}


def _msg_bytes(a: _Args):
    """Message size of a collective kernel: max(in, out) elements x element size (the size
    NCCL-tests' bus bandwidth formulas use: the full output of AllGather, the full input of
    ReduceScatter). None unless the trace gives elements and a known dtype."""
    if a.dtype is None or (a.in_nelems is None and a.out_nelems is None):
        return None
    size = _DTYPE_BYTES.get(a.dtype.lower())
    if size is None:
        return None
    try:
        return int(max(float(a.in_nelems or 0), float(a.out_nelems or 0))) * size
    except (TypeError, ValueError):
        return None


def _columns(evs: list[_Fields], gpu: bool) -> dict[str, pa.Array]:
    """Arrow columns of a list of events (`kineto_raw.RAW_SCHEMA`, in its order, when `gpu`;
    the arg columns of GPU ops are left out otherwise). The arg columns are read for the events
    of `ARG_CATS` only, null for the others (kineto_raw)."""
    args = [e.args or _NO_ARGS for e in evs]
    cols = {
        "ph": _str_col([e.ph for e in evs]),
        "cat": _str_col([e.cat for e in evs]),
        "name": _str_col([e.name for e in evs]),
        "pid": _int_col([e.pid for e in evs]),
        "tid": _int_col([e.tid for e in evs]),
        "ts": _float_col([e.ts for e in evs]),
        "dur": _float_col([e.dur for e in evs]),
        "external_id": _int_col([a.external_id if a.external_id is not None else a.external_id_lc for a in args]),
        "correlation": _int_col([a.correlation for a in args]),
        "unfinished": pa.array([a.finished is not None and str(a.finished).lower() == "false" for a in args], pa.bool_()),
    }
    if gpu:
        # the rows of ARG_CATS events, found by Arrow in the category column (a Python pass
        # over the events cost 60 ns per event); a null category is not in the set (false)
        is_arg = ak.is_in(cols["cat"], ARG_CAT_SET)
        at = ak.call("indices_nonzero", is_arg)
        n = len(evs)
        dev = args if len(at) == n else [args[i] for i in at.to_pylist()]
        arg_cols = {
            "stream": _int_col([a.stream for a in dev]),
            "device": _int_col([a.device for a in dev]),
            "bytes": _int_col([a.bytes if a.bytes is not None or a.dtype is None else _msg_bytes(a) for a in dev]),
            "registers": _int_col([a.registers for a in dev]),
            **dict(zip(("grid_x", "grid_y", "grid_z"), _dims([a.grid for a in dev]))),
            **dict(zip(("block_x", "block_y", "block_z"), _dims([a.block for a in dev]))),
            "arg_kind": _str_col([a.kind if type(a.kind) is str else None for a in dev]),
            "collective": _str_col([a.collective for a in dev]),
            "pg_name": _str_col([a.pg_name if a.pg_name is not None else _pg_id_text(a.pg_id) for a in dev]),
            "pg_desc": _str_col([a.pg_desc for a in dev]),
            "group_size": _int_col([a.group_size for a in dev]),
            "seq": _int_col([a.seq for a in dev]),
        }
        cols.update(arg_cols if len(at) == n else _spread(arg_cols, is_arg))
    return cols


def _spread(cols: dict[str, pa.Array], at: pa.BooleanArray) -> dict[str, pa.Array]:
    """Columns of the events where `at` is true -> columns of all events, null elsewhere (a
    column of nulls is made as one, not copied)."""
    n = len(at)
    return {k: pa.nulls(n, v.type) if v.null_count == len(v) else ak.call("replace_with_mask", pa.nulls(n, v.type), at, v)
            for k, v in cols.items()}


# ------------------------------------------------------------------ the reader
def _devices(trace: _Trace) -> list[dict]:
    out = []
    for d in (trace.deviceProperties or trace.computeProperties or []):
        out.append({"id": _to_int(d.id), "name": d.name if isinstance(d.name, str) else None,
                    "sm_count": _to_int(d.numSms if d.numSms is not None else d.multiProcessorCount),
                    "memory_bytes": _to_int(d.totalGlobalMem)})
    return out


def _clock_offset(base, warnings: list[str]) -> int:
    from .validate import LIMIT_NS, fmt_value   # polars: decoding runs without it (kineto_decode)

    if base is None or abs(base) <= LIMIT_NS:
        return int(base or 0)
    warnings.append(f"ignored baseTimeNanoseconds {fmt_value(base)}: not representable as int64 ns")
    return 0


def read(path: Path, workdir: Path | None = None) -> Parsed:
    """Decode the trace into raw parts in `workdir` (a scratch folder its caller removes) and
    return its facts; the tables are written by `Parsed.fill(open_table)` (see `Store.stage`),
    which translates the raw parts chunk by chunk (`kineto_translate`). Without `workdir` (tests,
    tools) a temporary folder is used and the tables come back in memory in `Parsed.tables`."""
    if workdir is None:
        return _read_in_memory(Path(path))
    path, workdir = Path(path), Path(workdir)
    text_path, mm = _open_text(path, workdir)
    try:
        decoded = _decode(text_path, mm, workdir, path)
    finally:
        try:
            mm.close()
        except BufferError:   # a slice still refers to it: the collector frees it
            pass
        if text_path != path:
            text_path.unlink(missing_ok=True)   # the inflated .gz: decoded, no longer needed
    meta = decoded.meta
    info = meta.distributedInfo if isinstance(meta.distributedInfo, dict) else {}
    late: list[str] = []   # the clock warning comes after translation's own, as it always did
    offset = _clock_offset(meta.baseTimeNanoseconds, late)
    host_name = meta.host_name if isinstance(meta.host_name, str) else meta.hostname if isinstance(meta.hostname, str) else None
    parsed = Parsed(
        tables={}, format="kineto",
        format_version=None if meta.schemaVersion is None else str(meta.schemaVersion),
        rank=_to_int(info.get("rank")), world_size=_to_int(info.get("world_size")),
        host=host_name, devices=_devices(meta), clock_offset_ns=offset, warnings=decoded.warnings,
    )

    def fill(open_table) -> None:
        from .kineto_translate import translate   # polars: loaded while the workers decode (kineto_decode)

        memory.release()   # what decoding freed (module doc of `memory`)
        translate(decoded, path, open_table, parsed.warnings)
        parsed.warnings.extend(late)

    parsed.fill = fill
    return parsed


class _Collected:
    """An `open_table` target that keeps the pieces in memory (`read` without a workdir)."""

    def __init__(self) -> None:
        self.pieces: list[pa.Table] = []

    def write(self, table: pa.Table) -> None:
        self.pieces.append(table)


def _read_in_memory(path: Path) -> Parsed:
    tmp = Path(tempfile.mkdtemp(prefix="traceq-kineto-"))
    try:
        parsed = read(path, tmp)
        out: dict[str, _Collected] = {}
        parsed.fill(lambda table: out.setdefault(table, _Collected()))
        parsed.tables = {t: pa.concat_tables(c.pieces) for t, c in out.items() if c.pieces}
        parsed.fill = None
        return parsed
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
