"""The Kineto reader: a trace file -> raw parts (decoded in a scratch folder) -> the canonical
tables (translated chunk by chunk while the store stages them).
"""
from __future__ import annotations

import mmap
import shutil
import tempfile
from pathlib import Path

import pyarrow as pa

from .. import memory
from ...errors import BadInput
from ..common import Collected, Parsed
from . import decode
from .events import Trace
from .raw import Decoded
from .recover import decode_whole
from .rows import RawWriter, to_int
from .text import map_text, open_gz
from .windows import decode_windows


def decode_text(text_path: Path, mm: mmap.mmap, workdir: Path, source: Path, fast: bool = True) -> Decoded:
    """Decode the JSON text `mm` (of the file `text_path`; `source` names the file in errors)
    into raw parts in `workdir`. The fast parallel decoder first (`decode`: plain, well-typed
    traces; not when `fast` is False: it has been tried); else window by window when the
    document lets itself be cut (a `traceEvents` list, or a bare list, of events: `windows`),
    else whole (`recover`)."""
    got = decode.decode_fast(text_path, workdir, decode.threads_here()) if fast else None
    if got is not None:
        return got
    out = RawWriter(workdir)
    try:
        got = decode_windows(mm, source, out)
        if got is None:
            out.discard()
            got = decode_whole(mm, source, out)
        meta, n_items, not_objects, first, warnings = got
        return Decoded(out.close(), meta, n_items, not_objects, first, warnings)
    except RecursionError:   # the events' own nesting is capped (`salvage`); this is a backstop
        out.discard()
        raise BadInput("not a Chrome trace (nested too deep to decode)", source) from None
    except UnicodeDecodeError:   # the events' strings are decoded with replacement (`salvage`)
        out.discard()
        raise BadInput("not a Chrome trace (invalid UTF-8 outside its events)", source) from None
    except BaseException:
        out.discard()
        raise


def decode_file(path: Path, workdir: Path) -> Decoded:
    """Decode the trace file `path` into raw parts in `workdir` (`decode_text`). A .gz is
    inflated into `workdir`, the fast decoder decoding it while it is inflated
    (`decode.decode_fast` with the `Inflating`); the inflated text is removed once decoded."""
    gz = open_gz(path, workdir)
    text_path = path if gz is None else gz.path
    try:
        if gz is not None:
            try:
                fast = decode.decode_fast(gz.path, workdir, decode.threads_here(), gz)
                gz.finish()
            except OSError as exc:
                raise BadInput(exc.strerror or str(exc), path) from None
            finally:
                gz.close()
            if fast is not None:
                return fast
        mm = map_text(text_path, path)
        try:
            return decode_text(text_path, mm, workdir, path, fast=gz is None)
        finally:
            try:
                mm.close()
            except BufferError:   # a slice still refers to it: the collector frees it
                pass
    finally:
        if gz is not None:
            text_path.unlink(missing_ok=True)   # the inflated .gz: decoded, no longer needed


# runs.devices key -> the deviceProperties names Kineto writes it under (CUDA's cudaDeviceProp
# names; ROCm traces name the shared memory per SM maxSharedMemoryPerMultiProcessor)
DEVICE_PROPERTIES = {
    "compute_major": ("computeMajor",), "compute_minor": ("computeMinor",),
    "max_threads_per_block": ("maxThreadsPerBlock",), "max_threads_per_sm": ("maxThreadsPerMultiprocessor",),
    "regs_per_block": ("regsPerBlock",), "regs_per_sm": ("regsPerMultiprocessor",), "warp_size": ("warpSize",),
    "shared_mem_per_block": ("sharedMemPerBlock",),
    "shared_mem_per_sm": ("sharedMemPerMultiprocessor", "maxSharedMemoryPerMultiProcessor"),
    "shared_mem_per_block_optin": ("sharedMemPerBlockOptin",),
}


def _property(v) -> int | None:
    """A device property as an int: integers, and floats without a fraction; None otherwise."""
    if type(v) is float and v.is_integer():
        v = int(v)
    return v if type(v) is int and -2**63 <= v < 2**63 else None


def _devices(trace: Trace) -> list[dict]:
    """{id, name, sm_count, memory_bytes} of each device, and the `DEVICE_PROPERTIES` it has
    as integers (a key is left out when the trace does not give it)."""
    out = []
    for d in (trace.deviceProperties or trace.computeProperties or []):
        dev = {"id": to_int(d.id), "name": d.name if isinstance(d.name, str) else None,
               "sm_count": to_int(d.numSms if d.numSms is not None else d.multiProcessorCount),
               "memory_bytes": to_int(d.totalGlobalMem)}
        for key, names in DEVICE_PROPERTIES.items():
            value = next((v for v in (_property(getattr(d, n)) for n in names) if v is not None), None)
            if value is not None:
                dev[key] = value
        out.append(dev)
    return out


def _clock_offset(base, warnings: list[str]) -> int:
    from ..validate import LIMIT_NS, fmt_value   # imports polars: decoding runs without it

    if base is None or abs(base) <= LIMIT_NS:
        return int(base or 0)
    warnings.append(f"ignored baseTimeNanoseconds {fmt_value(base)}: not representable as int64 ns")
    return 0


def read(path: Path, workdir: Path | None = None) -> Parsed:
    """Decode the trace into raw parts in `workdir` (a scratch folder its caller removes) and
    return its facts; the tables are written by `Parsed.fill(open_table)` (see `Store.stage`),
    which translates the raw parts chunk by chunk (`translate`). Without `workdir` (tests,
    tools) a temporary folder is used and the tables come back in memory in `Parsed.tables`."""
    if workdir is None:
        return _read_in_memory(Path(path))
    path, workdir = Path(path), Path(workdir)
    decoded = decode_file(path, workdir)
    meta = decoded.meta
    info = meta.distributedInfo if isinstance(meta.distributedInfo, dict) else {}
    late: list[str] = []   # the clock warning, reported after translation's warnings
    offset = _clock_offset(meta.baseTimeNanoseconds, late)
    host_name = meta.host_name if isinstance(meta.host_name, str) else meta.hostname if isinstance(meta.hostname, str) else None
    parsed = Parsed(
        tables={}, format="kineto",
        format_version=None if meta.schemaVersion is None else str(meta.schemaVersion),
        rank=to_int(info.get("rank")), world_size=to_int(info.get("world_size")),
        host=host_name, devices=_devices(meta), clock_offset_ns=offset, warnings=decoded.warnings,
    )

    def fill(open_table) -> None:
        from .translate import translate   # imports polars (the parallel decoder loads it while its workers decode)

        memory.release()   # what decoding freed (module doc of `memory`)
        translate(decoded, path, open_table, parsed.warnings)
        parsed.warnings.extend(late)

    parsed.fill = fill
    return parsed


def _read_in_memory(path: Path) -> Parsed:
    tmp = Path(tempfile.mkdtemp(prefix="traceq-kineto-"))
    try:
        parsed = read(path, tmp)
        out: dict[str, Collected] = {}
        parsed.fill(lambda table: out.setdefault(table, Collected()))
        parsed.tables = {t: pa.concat_tables(c.pieces) for t, c in out.items() if c.pieces}
        parsed.fill = None
        return parsed
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
