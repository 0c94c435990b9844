"""The robust decoder's whole-document path, for what the other decoders cannot take: a
document split into raw event slices and decoded chunk by chunk (chunks with odd types coerced
event by event), the metadata of a document with odd types taken field by field, and the
complete events of a truncated or malformed document recovered by ijson, with a warning.
"""
from __future__ import annotations

import mmap
from pathlib import Path

import msgspec

from ...errors import BadInput
from ...schema import truncated_warning
from ..common import NotATrace
from .events import ANY_LIST, EVENTS, NO_RAW, Args, Event, MemoryArgs, Trace
from . import rows
from .rows import RawWriter, num, to_int
from .text import address, release, trim_heap


def decode_whole(mm: mmap.mmap, source: Path, out: RawWriter):
    """The document in one piece (documents the window decoder does not cut): split into
    raw event slices, then decoded chunk by chunk, releasing slices and pages as it goes."""
    trace, raws, warnings = _parse_outer(mm, source)
    trace.traceEvents = None
    n_items = len(raws)
    first = bytes(raws[0])[:4096] if n_items else None
    recovered = bool(warnings)   # recovered slices are copies, not views of `mm`
    not_objects = decode_slices(raws, out, None if recovered else mm)
    del raws
    trim_heap()
    return trace, n_items, not_objects, first, warnings


def _decode_chunk(chunk: list[msgspec.Raw]) -> tuple[list, int]:
    """Typed structs of a chunk of raw slices (odd types: coerced one by one), and how many
    of its items are not JSON objects (None in the list)."""
    try:
        return EVENTS.decode(b"[" + b",".join(chunk) + b"]"), 0
    except msgspec.ValidationError:
        evs = _coerce_chunk(chunk)
        return evs, sum(e is None for e in evs)


def decode_slices(raws: list[msgspec.Raw], out: RawWriter, mm: mmap.mmap | None = None) -> int:
    """Decode raw event slices chunk by chunk into `out`; returns the count of items that are
    not JSON objects. Each chunk's slices and (when the slices are views of `mm`) its mapped
    pages are released once decoded."""
    not_objects = 0
    base = address(mm) if mm is not None else 0
    done = 0
    for i in range(0, len(raws), rows.CHUNK):
        chunk = raws[i:i + rows.CHUNK]
        evs, bad = _decode_chunk(chunk)
        not_objects += bad
        out.add(evs)
        if mm is not None:
            end = address(chunk[-1]) + len(chunk[-1]) - base
            if 0 <= end <= len(mm):
                done = release(mm, base, end, done)
        del chunk, evs
        raws[i:i + rows.CHUNK] = [None] * min(rows.CHUNK, len(raws) - i)   # free the slices as we go
    return not_objects


def _parse_outer(raw: mmap.mmap, path: Path) -> tuple[Trace, list[msgspec.Raw], list[str]]:
    """Split the document into metadata and raw event slices; recover truncated files."""
    warnings: list[str] = []
    head = bytes(raw[:4096]).lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    if not head:
        raise BadInput("empty file", path)
    text = memoryview(raw)[3:] if raw[:3] == b"\xef\xbb\xbf" else raw   # a UTF-8 BOM is not JSON
    try:
        if head == b"[":
            return Trace(), msgspec.json.decode(text, type=list[msgspec.Raw]), warnings
        trace = msgspec.json.decode(text, type=Trace)
    except msgspec.ValidationError as exc:
        if head != b"{":
            raise BadInput(f"not a Chrome trace ({exc})", path) from None
        trace = parse_loose(text, path, warnings)
    except msgspec.DecodeError:
        if head not in (b"{", b"["):
            raise BadInput("not a Chrome trace (not JSON)", path) from None
        trace, events = _recover_truncated(raw, head, path)
        warnings.append(truncated_warning(len(events)))
        return trace, events, warnings
    if trace.traceEvents is None:
        raise refuse_object(text, path)
    return trace, trace.traceEvents, warnings


def refuse_object(text, path: Path) -> BadInput:
    """The error for a JSON object without a "traceEvents" list: what it is (its first keys)."""
    try:
        keys = list(msgspec.json.decode(text, type=dict[str, msgspec.Raw]))
    except (msgspec.ValidationError, msgspec.DecodeError):
        keys = []
    if "traceEvents" in keys:
        return BadInput('not a Chrome trace ("traceEvents" is not a list of events)', path)
    shown = ", ".join(repr(k[:40]) for k in keys[:8]) + (", ..." if len(keys) > 8 else "")
    return NotATrace((f"not a trace: a JSON object with keys {shown}" if keys else "not a trace: an empty JSON object")
                     + '; a Chrome/Kineto trace is an object with a "traceEvents" list (or a list of events)', path)


def parse_loose(text, path: Path, warnings: list[str]) -> Trace:
    """The document is a JSON object but some metadata has an unexpected type: take the
    event list, and each metadata field that is valid; name the fields ignored."""
    try:
        fields = msgspec.json.decode(text, type=dict[str, msgspec.Raw])
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise BadInput(f"not a Chrome trace ({exc})", path) from None
    trace, bad = Trace(), []
    import typing

    for key, typ in typing.get_type_hints(Trace).items():
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


def _recover_truncated(raw: mmap.mmap, head: bytes, path: Path) -> tuple[Trace, list[msgspec.Raw]]:
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
    return recover_meta(raw), events


def recover_meta(text) -> Trace:
    """The metadata written before traceEvents (deviceProperties, distributedInfo) of a broken
    document: still usable. `text`: a file-like object or the bytes up to the event list."""
    import io
    import typing

    import ijson

    meta = Trace()
    try:
        source = text if hasattr(text, "read") else io.BytesIO(bytes(text))
        for key, value in ijson.kvitems(source, "", use_float=True):
            if key == "traceEvents":
                break
            if key in ("deviceProperties", "distributedInfo", "baseTimeNanoseconds", "host_name", "hostname"):
                setattr(meta, key, msgspec.convert(value, type=typing.get_type_hints(Trace)[key]))
    except Exception:  # noqa: BLE001 - metadata is optional; events are what matter
        pass
    return meta



def complete_items(text: bytes) -> tuple[list, bool]:
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



def _int_list(v):
    return [x for x in v if type(x) is int] if isinstance(v, list) else None


def _decode_any(chunk: list[msgspec.Raw]) -> list:
    """Generic decode of a chunk; events msgspec refuses (numbers beyond float range) are
    decoded one by one by the standard library (1e400 -> inf, big ints stay ints)."""
    try:
        return ANY_LIST.decode(b"[" + b",".join(chunk) + b"]")
    except (msgspec.ValidationError, msgspec.DecodeError):
        import json

        out = []
        for raw in chunk:
            try:
                out.append(msgspec.json.decode(raw))
            except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
                try:
                    out.append(json.loads(bytes(raw)))
                except (ValueError, RecursionError):
                    out.append(None)
        return out



def _int_arg(v):
    """An integer arg of a `[memory]` event as the typed decode keeps it (an address or a size
    beyond float precision stays an int)."""
    return v if type(v) in (int, float, str) else None


def _name_arg(v):
    return v if type(v) in (str, int, float) else None


def _json_arg(v) -> msgspec.Raw:
    """A shape arg (a list) as the JSON text the typed decode keeps of it; NO_RAW otherwise."""
    if type(v) is not list:
        return NO_RAW
    try:
        return msgspec.Raw(msgspec.json.encode(v))
    except (TypeError, ValueError, OverflowError):   # a value JSON cannot write back
        return NO_RAW


def _coerce_chunk(chunk: list[msgspec.Raw]) -> list[Event]:
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
            args = Args(
                external_id=num(a.get("External id")), external_id_lc=num(a.get("external id")),
                correlation=num(a.get("correlation")), stream=a.get("stream") if type(a.get("stream")) in (int, float, str) else None, device=num(a.get("device")),
                bytes=num(a.get("bytes")), grid=_int_list(a.get("grid")), block=_int_list(a.get("block")),
                registers=num(a.get("registers per thread")), shared_memory=num(a.get("shared memory")),
                blocks_per_sm=num(a.get("blocks per SM")), warps_per_sm=num(a.get("warps per SM")),
                occupancy=num(a.get("est. achieved occupancy %")), finished=str(a.get("finished")) if "finished" in a else None,
                kind=a.get("kind") if type(a.get("kind")) in (str, int) else None,
                in_nelems=num(a.get("In msg nelems")), out_nelems=num(a.get("Out msg nelems")),
                dtype=a.get("dtype") if type(a.get("dtype")) is str else None,
                collective=_name_arg(a.get("Collective name")), pg_name=_name_arg(a.get("Process Group Name")),
                pg_id=_name_arg(a.get("Process Group ID")),
                pg_desc=_name_arg(a.get("Process Group Description")), group_size=num(a.get("Group size")),
                seq=num(a.get("Seq")),
                input_dims=_json_arg(a.get("Input Dims")), input_dims_lc=_json_arg(a.get("Input dims")),
                input_types=_json_arg(a.get("Input type")), input_strides=_json_arg(a.get("Input Strides")),
                concrete_inputs=_json_arg(a.get("Concrete Inputs")), kernel=_name_arg(a.get("kernel"))) \
                if item.get("ph") != "i" else MemoryArgs(
                    device_type=_int_arg(a.get("Device Type")), device_id=_int_arg(a.get("Device Id")),
                    addr=_int_arg(a.get("Addr")), bytes=_int_arg(a.get("Bytes")),
                    total_allocated=_int_arg(a.get("Total Allocated")), total_reserved=_int_arg(a.get("Total Reserved")))
        text = lambda v: v if v is None or type(v) is str else str(v)  # noqa: E731
        ident = lambda v: v if v is None or type(v) in (int, str) else to_int(v)  # noqa: E731
        out.append(Event(ph=text(item.get("ph")), cat=text(item.get("cat")), name=text(item.get("name")),
                          pid=ident(item.get("pid")), tid=ident(item.get("tid")), ts=num(item.get("ts")),
                          dur=num(item.get("dur")), args=args))
    return out

