"""Decoded events -> the columns of the raw relation (`raw.RAW_SCHEMA`), and the writer of the
raw parts (`RawWriter`) both decoders use, so that they produce the same rows.
"""
from __future__ import annotations

import math

import re
from itertools import accumulate
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ... import arrow_kernels as ak
from .events import Args, Event, Fields, Instant, MemoryArgs
from .raw import ARG_CAT_SET, LAUNCH_CAT_SET, MEMORY_RAW_SCHEMA, OP_CAT_SET, RAW_SCHEMA, SpanFacts, memory_path, remove_part


CHUNK = 16384          # events per typed decode (`recover.decode_slices`) and per `_columns` call
ROW_GROUP = 1 << 16    # rows per row group of a raw part


_I64 = 2**63


def to_int(v):
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


def num(v):
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



def _pg_id_text(v):
    """An old "Process Group ID" as the name PyTorch gives that group: 0 -> "0" (1.0 -> "1")."""
    if type(v) is float and v.is_integer():
        return str(int(v))
    return v


def _int_col(values) -> pa.Array:
    """int64 column; the fast path is pyarrow's own conversion, odd values are coerced only if present."""
    try:
        return pa.array(values, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        return pa.array([to_int(v) for v in values], pa.int64())


def _float_col(values) -> pa.Array:
    try:
        return pa.array(values, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        return pa.array([num(v) for v in values], pa.float64())


def _finite_col(values) -> pa.Array:
    """`_float_col` with the non-finite values (inf, nan: a repaired `Infinity` token, a string
    "nan") as null: a launch fact (blocks per SM, occupancy) that is not a number is unknown."""
    import numpy as np

    arr = _float_col(values)
    if len(arr) == 0 or arr.null_count == len(arr):
        return arr
    # the values buffer as it is (a null's slot holds some number): no pyarrow.compute, no numpy.ma
    data = np.frombuffer(arr.buffers()[1], np.float64)[arr.offset:arr.offset + len(arr)]
    if np.isfinite(data).all():
        return arr
    return pa.array([v if v is None or math.isfinite(v) else None for v in arr.to_pylist()], pa.float64())


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
_NO_ARGS = Args()
_NO_MEMORY_ARGS = MemoryArgs()


# element sizes of the `dtype` names PyTorch writes in record_param_comms / NCCL kernel args
_DTYPE_BYTES = {"float": 4, "float32": 4, "double": 8, "float64": 8, "half": 2, "float16": 2, "bfloat16": 2,
                "int": 4, "int32": 4, "long": 8, "int64": 8, "short": 2, "int16": 2, "char": 1, "int8": 1,
                "byte": 1, "uint8": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1}


def _msg_bytes(a: Args):
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


def _columns(evs: list[Fields], gpu: bool) -> dict[str, pa.Array]:
    """Arrow columns of a list of events (`raw.RAW_SCHEMA`, in its order, when `gpu`;
    the arg columns of GPU ops are left out otherwise). The arg columns are read for the events
    of `raw.ARG_CATS` only, null for the others; the shape columns for those of `raw.OP_CATS`."""
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
            "shared_memory": _int_col([a.shared_memory for a in dev]),
            "blocks_per_sm": _finite_col([a.blocks_per_sm for a in dev]),
            "warps_per_sm": _finite_col([a.warps_per_sm for a in dev]),
            "est_occupancy_pct": _finite_col([a.occupancy for a in dev]),
            "arg_kind": _str_col([a.kind if type(a.kind) is str else None for a in dev]),
            "collective": _str_col([a.collective for a in dev]),
            "pg_name": _str_col([a.pg_name if a.pg_name is not None else _pg_id_text(a.pg_id) for a in dev]),
            "pg_desc": _str_col([a.pg_desc for a in dev]),
            "group_size": _int_col([a.group_size for a in dev]),
            "seq": _int_col([a.seq for a in dev]),
        }
        cols.update(arg_cols if len(at) == n else _spread(arg_cols, is_arg))
    cols.update(_shape_columns(args, cols["cat"]))
    cols["launch_kernel"] = _launch_kernels(args, cols["cat"])
    return cols


def _shape_columns(args: list[Args], cat: pa.Array) -> dict[str, pa.Array]:
    """The record_shapes args of the CPU ops (`raw.OP_CATS`) as compact JSON text (`json_lists`),
    null for the other events."""
    is_op = ak.is_in(cat, OP_CAT_SET)
    at = ak.call("indices_nonzero", is_op)
    n = len(args)
    ops = args if len(at) == n else [args[i] for i in at.to_pylist()]
    cols = {
        "input_dims": json_lists([a.input_dims or a.input_dims_lc for a in ops]),   # older PyTorch: "Input dims"
        "input_types": json_lists([a.input_types for a in ops]),
        "input_strides": json_lists([a.input_strides for a in ops]),
        "concrete_inputs": json_lists([a.concrete_inputs for a in ops]),
    }
    return cols if len(at) == n else _spread(cols, is_op)


# JSON text: a string (group 1, kept as it is) or a run of whitespace outside strings (dropped)
_JSON_SPACE = r'("(?:[^"\\]|\\.)*")|[ \t\r\n]+'


def json_lists(raws) -> pa.Array:
    """JSON texts (`msgspec.Raw`, empty when the event has no such arg) -> a string column:
    the compact text (whitespace outside strings removed) of each JSON array, null for an
    empty text, a value that is no array, or text that is not UTF-8. The texts are joined into
    one Arrow buffer as they are (no copy per value), and made compact once per distinct text
    (an op's shapes repeat across its calls): Arrow's dictionary, then RE2."""
    if not any(raws):
        return pa.nulls(len(raws), pa.string())
    offsets = pa.array([0, *accumulate(map(len, raws))], pa.int32()).buffers()[1]
    texts = pa.Array.from_buffers(pa.binary(), len(raws), [None, offsets, pa.py_buffer(b"".join(raws))])
    try:
        texts = ak.cast(texts, pa.string())
    except pa.ArrowInvalid:
        texts = pa.array([_utf8(r) for r in raws], pa.string())
    coded = ak.call("dictionary_encode", texts)
    words = coded.dictionary
    words = ak.call("if_else", ak.starts_with(words, "["), ak.replace_regex(words, _JSON_SPACE, r"\1"),
                    pa.scalar(None, pa.string()))
    return ak.take(words, coded.indices)


def _utf8(raw) -> str | None:
    try:
        return bytes(raw).decode() if raw else None
    except UnicodeDecodeError:
        return None


def _launch_kernels(args: list, cat: pa.Array) -> pa.Array:
    """args.kernel of the runtime/driver calls (`raw.LAUNCH_CATS`), null for other events."""
    is_call = ak.is_in(cat, LAUNCH_CAT_SET)
    calls = ak.call("indices_nonzero", is_call)
    if len(calls) == 0:
        return pa.nulls(len(args), pa.string())
    named = _str_col([args[i].kernel for i in calls.to_pylist()])
    return named if len(calls) == len(args) else _spread({"k": named}, is_call)["k"]


def _spread(cols: dict[str, pa.Array], at: pa.BooleanArray) -> dict[str, pa.Array]:
    """Columns of the events where `at` is true -> columns of all events, null elsewhere (a
    column of nulls is made as one, not copied)."""
    n = len(at)
    return {k: pa.nulls(n, v.type) if v.null_count == len(v) else ak.call("replace_with_mask", pa.nulls(n, v.type), at, v)
            for k, v in cols.items()}



def memory_columns(evs: list[Fields]) -> pa.RecordBatch:
    """The `[memory]` instant events as a batch of `raw.MEMORY_RAW_SCHEMA`."""
    args = [e.args or _NO_MEMORY_ARGS for e in evs]
    return pa.RecordBatch.from_pydict({
        "pid": _int_col([e.pid for e in evs]),
        "tid": _int_col([e.tid for e in evs]),
        "ts": _float_col([e.ts for e in evs]),
        "device_type": _int_col([a.device_type for a in args]),
        "device": _int_col([a.device_id for a in args]),
        "addr": _int_col([a.addr for a in args]),
        "bytes": _int_col([a.bytes for a in args]),
        "total_allocated": _int_col([a.total_allocated for a in args]),
        "total_reserved": _int_col([a.total_reserved for a in args]),
    }, schema=MEMORY_RAW_SCHEMA)


# ------------------------------------------------------------------ raw parts
_RAW_TEXT = [f.name for f in RAW_SCHEMA if pa.types.is_string(f.type)]


class RawWriter:
    """The raw parts of one decode (`raw.RAW_SCHEMA`): the kept events of each decoded
    piece become Arrow columns at once, and every `ROW_GROUP` rows a row group of the part;
    beside the part, the facts of translation's first pass (`raw.SpanFacts`) and the `[memory]`
    instant events (`raw.memory_path`)."""

    def __init__(self, workdir: Path):
        self.path = Path(workdir) / "raw-0000.parquet"
        self.writer: pq.ParquetWriter | None = None
        self.pending: list[pa.RecordBatch] = []
        self.rows = 0
        self.facts = SpanFacts()
        self.memory: list[pa.RecordBatch] = []

    def add(self, evs: list) -> None:
        for i in range(0, len(evs), CHUNK):
            piece = evs[i:i + CHUNK]
            kept = [e for e in piece if e is not None and e.ph in _KEPT_PH and e.cat not in _TRACE_CATS]
            if len(kept) < len(piece):
                # typed: Instant structs; coerced: Event structs with ph "i"
                mem = [e for e in piece if (type(e) is Instant or type(e) is Event and e.ph == "i")
                       and e.name == "[memory]"]
                if mem:
                    self.memory.append(memory_columns(mem))
            if kept:
                cols = _columns(kept, True)
                self.facts.add(cols["ph"], cols["cat"], cols["ts"], cols["dur"])
                self.pending.append(pa.RecordBatch.from_pydict(cols, schema=RAW_SCHEMA))
                self.rows += len(kept)
        if self.rows >= ROW_GROUP:
            self.flush()

    def flush(self, final: bool = False) -> None:
        """Write whole row groups of `ROW_GROUP` rows (and the rest too when `final`)."""
        if not self.pending:
            return
        t = pa.Table.from_batches(self.pending, RAW_SCHEMA)
        n = t.num_rows if final else t.num_rows - t.num_rows % ROW_GROUP
        if self.writer is None:
            # a scratch file read back at once, in order: no compression, dictionaries for text
            # only, no statistics (nothing is looked up in it)
            self.writer = pq.ParquetWriter(self.path, RAW_SCHEMA, compression="none", use_dictionary=_RAW_TEXT,
                                           write_statistics=False)
        if n:
            self.writer.write_table(t.slice(0, n), row_group_size=ROW_GROUP)
        rest = t.slice(n).combine_chunks() if n < t.num_rows else None
        self.pending = rest.to_batches() if rest is not None else []
        self.rows = t.num_rows - n

    def close(self) -> list[Path]:
        self.flush(final=True)
        if self.writer is None and self.memory:   # memory events only: an empty part carries them
            self.writer = pq.ParquetWriter(self.path, RAW_SCHEMA, compression="none")
        if self.writer is None:
            return []
        self.writer.close()
        self.facts.save(self.path)
        if self.memory:
            pq.write_table(pa.Table.from_batches(self.memory, MEMORY_RAW_SCHEMA), memory_path(self.path),
                           compression="none")
            self.memory = []
        return [self.path]

    def discard(self) -> None:
        self.pending, self.rows, self.facts, self.memory = [], 0, SpanFacts(), []
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        remove_part(self.path)

