"""CUDA activity records of an nsys export -> gpu_ops / host_ops rows, one Arrow chunk at a time.

Each translator takes a chunk (a record batch) of int64 columns (see `reader.ACTIVITY`) and returns a table of
the canonical schema (text dictionary-encoded). Everything that depends on a name or an enum value (the text of a
StringIds id, its `_vNNNN`-less form, its category, a memcpy label) is computed once per
distinct value, cached for the whole export, and gathered back to the rows by position
(`Lookup`), so a chunk costs a few vectorised Arrow kernels whatever its size.

Names: kernels by `demangledName` (nsys `cuda_gpu_kern_sum`), copies `[CUDA memcpy <label>]`
and `[CUDA memset]` (nsys `cuda_gpu_mem_time_sum`), sync records after the waiting API in
Kineto's words (`Context Sync`, `Stream Sync`, `Event Sync`, `Stream Wait Event`).
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from ... import schema
from ...kernels.tensor_cores import uses_tensor_cores
from ...rules.categories import classify
from ..common import strip_api_suffix_expr
from ..first_by_key import coded, first_by_key, joined

# gpu_ops.copy_kind: short direction per memcpy enum value.
COPY_KINDS = {
    0: "Unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
    8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "UVM_HtoD", 12: "UVM_DtoH", 13: "UVM_DtoD",
}
# Synchronisation APIs -> the name of the GPU-side sync record they cause (Kineto's `cuda_sync`
# names). Sync records are named after their API because the stored syncType numbers disagree
# with the ENUM_CUPTI_SYNC_TYPE labels (cudaDeviceSynchronize is 1 "Event sync" in 3.13, 0
# "Unknown" in 3.16; cudaStreamSynchronize is 2 "Stream wait sync" in 3.16, 3 in 2.9).
SYNC_APIS = {
    "cudaDeviceSynchronize": "Context Sync", "cudaThreadSynchronize": "Context Sync",
    "cuCtxSynchronize": "Context Sync",
    "cudaStreamSynchronize": "Stream Sync", "cuStreamSynchronize": "Stream Sync",
    "cudaEventSynchronize": "Event Sync", "cuEventSynchronize": "Event Sync", "cudaEventQuery": "Event Sync",
    "cudaStreamWaitEvent": "Stream Wait Event", "cuStreamWaitEvent": "Stream Wait Event",
}
BLOCKING_SYNC_APIS = [api for api in SYNC_APIS if api != "cudaEventQuery"]   # host_ops kind sync_api
NO_STREAM = 0xFFFFFFFF   # streamId of sync records that wait on no particular stream
HOST_KINDS = pa.array(["runtime", "driver", "sync_api"], pa.string())
SYNC_CALLS = pa.schema([("pid", pa.int64()), ("correlation", pa.int64()), ("api", pa.string())])


class Lookup:
    """Values computed once per distinct key and gathered back to every row.

    `compute(keys) -> {column: values}` gets the keys not seen before (None included) and
    returns one list per output column, aligned with the keys: strings (or None), which come
    back dictionary-encoded (each distinct text once per chunk: no copy per row, and the
    Parquet writer takes the dictionary as it is), or booleans."""

    def __init__(self, compute: Callable[[list], dict[str, list]]):
        self.compute = compute
        self.cache: dict = {}

    def __call__(self, keys: pa.Array | pa.ChunkedArray) -> dict[str, pa.Array]:
        if isinstance(keys, pa.ChunkedArray):
            keys = keys.combine_chunks()
        distinct = pc.unique(keys)
        values = distinct.to_pylist()
        new = [k for k in values if k not in self.cache]
        if new:   # threads may compute the same key twice: the results are equal
            cols = self.compute(new)
            self.cache.update(zip(new, (dict(zip(cols, row)) for row in zip(*cols.values()))))
        at = pc.index_in(keys, value_set=distinct, skip_nulls=False)
        rows = [self.cache[k] for k in values]
        out = {}
        for c in rows[0] if rows else ():
            column = [r[c] for r in rows]
            out[c] = (pc.take(pa.array(column, pa.bool_()), at) if any(isinstance(v, bool) for v in column)
                      else _dictionary(column, at))
        return out


def _dictionary(texts: list, at: pa.Array) -> pa.DictionaryArray:
    """texts[at] as a dictionary array (None: null)."""
    position: dict[str, int] = {}
    remap = [None if t is None else position.setdefault(t, len(position)) for t in texts]
    return pa.DictionaryArray.from_arrays(pc.take(pa.array(remap, pa.int32()), at), pa.array(list(position), pa.string()))


def _classified(names: list, kind: str) -> dict[str, list]:
    """identity, library and category (traceq.rules.categories) of each name of one kind; for
    kernels also tensor_core (traceq.kernels.tensor_cores)."""
    got = classify(pl.Series(names, dtype=pl.String), pl.Series([kind] * len(names), dtype=pl.String))
    out = {c: got[c].to_list() for c in ("identity", "library", "category")}
    if kind == "kernel":
        out["tensor_core"] = [uses_tensor_cores(n) for n in names]
    return out


def _labelled(labels: dict[int, str]) -> Callable[[list], list]:
    """Enum number -> label; numbers missing from `labels` keep their digits."""
    return lambda keys: [None if k is None else labels.get(k, str(k)) for k in keys]


class Activity:
    """The translators of one export (its strings and enum labels)."""

    def __init__(self, strings: pl.DataFrame, copy_labels: dict[int, str], mem_kinds: dict[int, str],
                 sync_labels: dict[int, str]):
        self.strings = strings
        self.kernel_names = Lookup(self._kernel_names)
        self.api_names = Lookup(self._api_names)
        copy_label, copy_kind = _labelled(copy_labels), _labelled(COPY_KINDS)
        self.copy_names = Lookup(lambda keys: self._named(
            [None if label is None else f"[CUDA memcpy {label}]" for label in copy_label(keys)], "memcpy",
            copy_kind=copy_kind(keys)))
        self.mem_kinds = Lookup(lambda keys: {"label": _labelled(mem_kinds)(keys)})
        self.sync_labels = Lookup(lambda keys: {"label": _labelled(sync_labels)(keys)})
        self.sync_names = Lookup(lambda names: self._named(names, "sync"))
        self.memset_names = self._named(["[CUDA memset]"], "memset")

    # ------------------------------------------------------------------ per distinct value
    def _text(self, ids: list) -> list:
        """The StringIds text of each id (None: no such id)."""
        wanted = pl.Series([i for i in ids if i is not None], dtype=pl.Int64)
        found = self.strings.filter(pl.col("id").is_in(wanted.implode())).unique("id", keep="first", maintain_order=True)
        text = dict(zip(found["id"].to_list(), found["value"].to_list()))
        return [text.get(i) for i in ids]

    def _kernel_names(self, ids: list) -> dict[str, list]:
        names = self._text(ids)
        known = [i for i, n in enumerate(names) if n is not None]
        got = _classified([names[i] for i in known], "kernel")
        # an id that StringIds does not hold has no name and no classification
        out = {c: [None] * len(ids) for c in ("name", *got)}
        for j, i in enumerate(known):
            out["name"][i] = names[i]
            for c, values in got.items():
                out[c][i] = values[j]
        return out

    def _api_names(self, ids: list) -> dict[str, list]:
        names = pl.Series(self._text(ids), dtype=pl.String)
        frame = pl.DataFrame({"value": names}).select(name=strip_api_suffix_expr(pl.col("value")))
        base = frame["name"].str.replace(r"_pt(sz|ds)$", "")   # the per-thread-default-stream suffix
        return {"name": frame["name"].to_list(),
                "sync_api": [b in BLOCKING_SYNC_APIS for b in base.to_list()],
                "sync_record": [SYNC_APIS.get(b) for b in base.to_list()]}

    @staticmethod
    def _named(names: list, kind: str, **extra: list) -> dict[str, list]:
        return {"name": names, **extra, **_classified(names, kind)}

    # ------------------------------------------------------------------ chunks
    def host(self, chunk: pa.RecordBatch) -> tuple[pa.RecordBatch, pa.RecordBatch]:
        """host_ops rows of a CUPTI_ACTIVITY_KIND_RUNTIME chunk, and its calls of a sync API
        (pid, correlation, api: the name of the sync record the call causes)."""
        names = self.api_names(chunk["name_id"])
        driver = pc.fill_null(pc.equal(chunk["event_class"], 1), False)
        kind = pc.if_else(names["sync_api"], 2, pc.if_else(driver, 1, 0)).cast(pa.int32())
        host = _table("host_ops", chunk, kind=pa.DictionaryArray.from_arrays(kind, HOST_KINDS), name=names["name"],
                      unfinished=_const(False, chunk))
        waits = pc.is_valid(names["sync_record"])
        calls = pa.RecordBatch.from_arrays([chunk["pid"], chunk["correlation"], names["sync_record"].cast(pa.string())],
                                           schema=SYNC_CALLS).filter(waits)
        return host, calls

    def kernels(self, chunk: pa.RecordBatch) -> pa.RecordBatch:
        return _table("gpu_ops", chunk, kind=_const("kernel", chunk), **self.kernel_names(chunk["name_id"]))

    def memcpy(self, chunk: pa.RecordBatch) -> pa.RecordBatch:
        return _table("gpu_ops", chunk, kind=_const("memcpy", chunk), **self.copy_names(chunk["copy"]),
                      src_kind=self.mem_kinds(chunk["src"])["label"], dst_kind=self.mem_kinds(chunk["dst"])["label"])

    def memset(self, chunk: pa.RecordBatch) -> pa.RecordBatch:
        return _table("gpu_ops", chunk, kind=_const("memset", chunk),
                      **{c: _const(v[0], chunk) for c, v in self.memset_names.items()})

    def sync(self, chunk: pa.RecordBatch, waits: Waits) -> pa.RecordBatch:
        """Sync records, named after the API call that waited (`waits`) or else after their syncType."""
        name = pc.coalesce(waits.api(chunk["pid"], chunk["correlation"]),
                           self.sync_labels(chunk["sync"])["label"].cast(pa.string()))
        # Context-wide and event syncs carry CUPTI's "no stream" (uint32 -1): -1 as in Kineto.
        stream = pc.if_else(pc.fill_null(pc.equal(chunk["stream"], NO_STREAM), False), -1, chunk["stream"])
        chunk = chunk.set_column(chunk.schema.get_field_index("stream"), "stream", stream)
        return _table("gpu_ops", chunk, kind=_const("sync", chunk), **self.sync_names(name))


class Waits:
    """The runtime calls of a sync API (pid, correlation, api: the name of the sync record the
    call causes, `Activity.host`), collected chunk by chunk (`add`) while the runtime table
    streams by; once it is read (`finish`), a sync record takes the first call of its process
    with its correlation id (`api`).

    Held as int64 keys (`_pair_key`) with a one-byte api code (`coded`; the names are
    SYNC_APIS' four): 9 bytes per call, and a chunk of sync records is matched by binary
    search. Ids that do not fit a key (hostile exports) switch the calls to pid and
    correlation arrays, matched by a join on both columns. Calls without a pid or correlation
    match nothing."""

    def __init__(self) -> None:
        self.label_code: dict[str, int] = {}
        self.parts: list[tuple[np.ndarray, ...]] = []   # (keys, codes), or (pid, correlation, codes)
        self.fits = True
        self.keys = np.empty(0, np.int64)
        self.codes = np.empty(0, np.uint8)
        self.labels = pa.array([], pa.string())    # code -> api, once `finish` has run
        self.frame: pl.DataFrame | None = None   # (pid, correlation, code) once an id does not fit

    def add(self, calls: pa.RecordBatch) -> None:
        present = pc.and_(pc.is_valid(calls["pid"]), pc.is_valid(calls["correlation"]))
        if pc.all(present).as_py() is False:
            calls = calls.filter(present)
        if not calls.num_rows:
            return
        api = calls["api"].dictionary_encode()
        codes = coded(self.label_code, api.dictionary.to_pylist(), api.indices.to_numpy(zero_copy_only=False))
        if self.fits:
            keys, fits = _pair_key(calls["pid"], calls["correlation"])
            if fits:
                self.parts.append((keys.to_numpy(zero_copy_only=False), codes))
                return
            self.fits = False   # from now on pid and correlation: the keys so far unpacked
            self.parts = [(k & ((1 << 24) - 1), k >> 24, c) for k, c in self.parts]
        self.parts.append((np.array(calls["pid"].to_numpy(zero_copy_only=False), np.int64),
                           np.array(calls["correlation"].to_numpy(zero_copy_only=False), np.int64), codes))

    def finish(self) -> None:
        """The calls as sorted distinct keys (or as a frame of distinct pairs), each with the
        code of its first call."""
        self.labels = pa.array(list(self.label_code), pa.string())
        parts, self.parts = self.parts, []
        if not parts:
            return
        columns = [[p[i] for p in parts] for i in range(len(parts[0]))]
        del parts   # the column lists hold the only references: `joined` frees each piece
        if self.fits:
            self.keys, self.codes = first_by_key(joined(columns[0]), joined(columns[1]))
            return
        self.frame = (pl.DataFrame({"pid": joined(columns[0]), "correlation": joined(columns[1]),
                                    "code": joined(columns[2])})
                      .unique(["pid", "correlation"], keep="first", maintain_order=True))

    def api(self, pid: pa.Array, correlation: pa.Array) -> pa.Array:
        """The api of each (pid, correlation)'s first sync call, null when none (after `finish`)."""
        labels = self.labels
        if self.frame is not None:
            code = (pl.DataFrame({"pid": pid, "correlation": correlation})
                    .join(self.frame, on=["pid", "correlation"], how="left", maintain_order="left")["code"])
            return pa.DictionaryArray.from_arrays(code.to_arrow().cast(pa.int32()), labels).cast(pa.string())
        if not len(self.keys):
            return pa.nulls(len(pid), pa.string())
        keys = _pair_key(pid, correlation)[0].fill_null(-1).to_numpy()   # -1: no call has it
        at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        hit = self.keys[at] == keys
        codes = pa.array(np.where(hit, self.codes[at], 0).astype(np.int32), mask=~hit)
        return pa.DictionaryArray.from_arrays(codes, labels).cast(pa.string())


def _pair_key(pid, correlation) -> tuple[pa.Array, bool]:
    """(pid, correlation) as one int64, correlation << 24 | pid, where the pair fits (a 24-bit
    pid, a correlation id in 0..2**39), else null; and whether every pair without a null fits."""
    pid, correlation = (a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in (pid, correlation))
    fits = pc.and_(pc.and_(pc.greater_equal(pid, 0), pc.less(pid, 1 << 24)),
                   pc.and_(pc.greater_equal(correlation, 0), pc.less(correlation, 1 << 39)))
    key = pc.if_else(fits, pc.add(pc.shift_left(correlation, 24), pid), None)
    return key, pc.all(fits).as_py() is not False


def _const(value, chunk: pa.RecordBatch) -> pa.Array:
    """`value` on every row (a string: dictionary-encoded)."""
    n = chunk.num_rows
    if isinstance(value, bool):
        return pa.repeat(value, n)
    return pa.DictionaryArray.from_arrays(pa.repeat(pa.scalar(None if value is None else 0, pa.int32()), n),
                                          pa.array([] if value is None else [value], pa.string()))


def encoded(table: str) -> pa.Schema:
    """Schema `table` with its text columns dictionary-encoded (what the translators return)."""
    return pa.schema([pa.field(f.name, pa.dictionary(pa.int32(), f.type) if f.type == pa.string() else f.type)
                      for f in schema.TABLES[table]])


GPU_OPS, HOST_OPS = encoded("gpu_ops"), encoded("host_ops")


def _table(table: str, chunk: pa.RecordBatch, **columns: pa.Array) -> pa.RecordBatch:
    """The chunk's columns of schema `table` plus `columns`, in its `encoded` form (missing ones null)."""
    have = {c: chunk[c] for c in chunk.column_names if c in schema.TABLES[table].names}
    have.update(columns)
    target = GPU_OPS if table == "gpu_ops" else HOST_OPS
    n = chunk.num_rows
    cols = [pa.nulls(n, f.type) if f.name not in have else
            have[f.name] if have[f.name].type == f.type else
            have[f.name].cast(f.type) if pa.types.is_dictionary(f.type) else schema.cast(have[f.name], f.type)
            for f in target]
    return pa.RecordBatch.from_arrays(cols, schema=target)
