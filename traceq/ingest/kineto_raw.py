"""The raw event relation: the interface between decoding a Kineto/Chrome trace and
translating it into the canonical tables (issue 11: streaming, bounded-memory ingest).

Decoding (the text of the file -> rows) writes the events as Parquet *parts* with exactly
`RAW_SCHEMA`, in file order, in a scratch folder (row groups of at most ~64 k rows:
translation reads one row group at a time); translation (routing by category, ns
times, validation, B/E pairing, launch linking, classification) reads those parts back.
Two decoders produce the same rows for the same input:

- the fast path (`kineto_decode`): the event array split at validated event boundaries
  and decoded in parallel by forked processes (msgspec, typed);
- the robust path (msgspec, chunk by chunk, coercing odd types per event): every input the
  fast path refuses (odd types, truncated files, hostile values) ends up here.

Rows: one per item of the event list that is a JSON object with `ph` in X/B/E and a
category other than `Trace`. Values as the trace wrote them, with these conversions:
`pid`/`tid`/`stream`/`device` and the ids to int64 (numeric or hex strings, `"stream 7"` ->
7, null when no integer or beyond int64); `ts`/`dur` to float64 µs (numeric strings too;
null when not a number; beyond float range -> ±inf); `external_id` = `External id`, else
`external id`; `unfinished` = args.finished is "false" (any case); `bytes` = args.bytes,
else the collective message size (max(In, Out msg nelems) x dtype size); `grid_*`/`block_*`
= the first three integers of args.grid/args.block; `arg_kind` = args.kind when a string;
`collective`/`pg_name`/`pg_desc` = args "Collective name"/"Process Group Name"/"Process Group
Description" when strings (numbers as their text; `pg_name` falls back on the older "Process
Group ID", as text); `group_size` = args "Group size";
`seq` = args "Seq" (the collective's sequence number in its process group).
The arg columns from `stream` on are read only for events of `ARG_CATS` (GPU activity and
GPU-side annotations: the only rows translation takes them from) and are null elsewhere;
building them for every host event cost as much as all the other columns together.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

RAW_SCHEMA = pa.schema([
    ("ph", pa.string()), ("cat", pa.string()), ("name", pa.string()),
    ("pid", pa.int64()), ("tid", pa.int64()),
    ("ts", pa.float64()), ("dur", pa.float64()),
    ("external_id", pa.int64()), ("correlation", pa.int64()), ("unfinished", pa.bool_()),
    ("stream", pa.int64()), ("device", pa.int64()), ("bytes", pa.int64()), ("registers", pa.int64()),
    ("grid_x", pa.int64()), ("grid_y", pa.int64()), ("grid_z", pa.int64()),
    ("block_x", pa.int64()), ("block_y", pa.int64()), ("block_z", pa.int64()),
    ("arg_kind", pa.string()),
    # collectives (PyTorch >= 2.1 writes these in the args of NCCL kernels and record_param_comms)
    ("collective", pa.string()), ("pg_name", pa.string()), ("pg_desc", pa.string()),
    ("group_size", pa.int64()), ("seq", pa.int64()),
])


# Routing categories (exact, as torch.profiler writes them; translation's `_routes`):
# category (lower-cased) of device activity -> gpu_ops kind. Device activity of other
# accelerators goes to gpu_ops too: MTIA's on-device events are `mtia_ccp_events` (Kineto
# MTIA_CCP_EVENTS, an alias of CONCURRENT_KERNEL; HTA's kernel and GPU-event patterns list it).
GPU_KIND = {"kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy",
            "gpu_memset": "memset", "memset": "memset", "cuda_sync": "sync",
            "mtia_ccp_events": "kernel"}
GPU_CATS = frozenset(GPU_KIND) | {"Kernel", "Memcpy", "Memset"}   # + the 2021 capitalised ones
ANNOTATION_CATS = ("user_annotation", "gpu_user_annotation", "User_annotation", "Gpu_user_annotation")
# events whose arg columns (stream, device, bytes, ..., seq) translation reads
ARG_CATS = GPU_CATS | {"gpu_user_annotation", "Gpu_user_annotation"}


@dataclass
class Decoded:
    """What decoding one trace file produced (either decoder): the raw parts plus the facts
    translation and its messages need.

    `parts`: Parquet files with `RAW_SCHEMA`, rows in file order across the parts (B/E pairing
    and every "first" pick depend on it). `meta`: the outer metadata (`kineto._Trace`, its
    `traceEvents` emptied). `n_items`: items of the event list (objects or not); `not_objects`:
    how many of them are no JSON object; `first`: the first 4096 bytes of the first item (for
    the "no events" message); `warnings`: decoding's own (truncated file, odd metadata)."""

    parts: list[Path]
    meta: Any
    n_items: int
    not_objects: int = 0
    first: bytes | None = None
    warnings: list[str] = field(default_factory=list)
