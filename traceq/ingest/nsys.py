"""Nsight Systems SQLite export -> canonical tables (DESIGN §3, REFERENCE A2.5 and D2).

Owns the translation of one `nsys export --type sqlite` file of schema 2.x (`EXPORT_META_DATA`),
3.x (`META_DATA_EXPORT`) or a legacy export without a meta table:

- gpu_ops  <- CUPTI_ACTIVITY_KIND_KERNEL, _MEMCPY, _MEMSET, _SYNCHRONIZATION
- host_ops <- CUPTI_ACTIVITY_KIND_RUNTIME rows of eventClass 0 (runtime) and 1 (driver) only
- regions  <- NVTX_EVENTS push/pop and start/end ranges (eventType 59, 60, 70, 71)
- run facts: schema version, rank (MPI_RANKS, else the rank variables of the capture
  environment), hostname, GPUs, UTC anchor. The environment block itself is never kept.

nsys creates tables lazily and renames columns between versions, so every table and column
is probed; a missing table means no rows, a missing column means nulls. The activity tables
are read as integers only, by the ADBC SQLite driver straight into Arrow (Python's sqlite3
builds a tuple per row and was the bottleneck). Everything after the fetch is vectorised: StringIds are joined per distinct
id, `globalTid`/`globalPid` are decoded in SQL (PID = bits 24..47, TID = bits 0..23), NVTX
nesting depth is a numpy sweep.

Names: kernels by `demangledName` (nsys `cuda_gpu_kern_sum`), copies `[CUDA memcpy <label>]`
and `[CUDA memset]` (nsys `cuda_gpu_mem_time_sum`), sync records after the waiting API in
Kineto's words (`Context Sync`, `Stream Sync`, `Event Sync`, `Stream Wait Event`).
"""
from __future__ import annotations

import re
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import polars as pl

from .. import schema
from ..categories import classify
from ..errors import BadInput
from .common import Parsed, nesting_depth, strip_api_suffix_expr
from .validate import LIMIT_NS, check_times, fmt_value

# Enum labels for schema 2.x exports, which have no ENUM_* tables (same as the 3.x tables).
MEMCPY_LABELS = {
    0: "Unknown", 1: "Host-to-Device", 2: "Device-to-Host", 3: "Host-to-Array", 4: "Array-to-Host",
    5: "Array-to-Array", 6: "Array-to-Device", 7: "Device-to-Array", 8: "Device-to-Device",
    9: "Host-to-Host", 10: "Peer-to-Peer", 11: "Unified Host-to-Device", 12: "Unified Device-to-Host",
    13: "Unified Device-to-Device",
}
MEM_KIND_LABELS = {
    0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed", 5: "Device Static",
    6: "Managed Static", 7: "Unknown",
}
SYNC_LABELS = {0: "Unknown", 1: "Event sync", 2: "Stream wait sync", 3: "Stream sync", 4: "Context sync"}
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
NVTX_RANGES = (59, 60, 70, 71)   # NvtxPushPopRange, NvtxStartEndRange, NVTXT push/pop and start/end
NVTX_DOMAIN_CREATE = 75
# in this order of trust; LOCAL_RANK (the rank within a node) only when nothing else says
RANK_VARS = ("SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK", "LOCAL_RANK")
NO_KERNELS = "no CUDA kernel activity in this export"
NO_STREAM = 0xFFFFFFFF   # streamId of sync records that wait on no particular stream
_KEYWORDS = {"IN", "AND", "OR", "NOT", "IS", "NULL"}


def _pid(col: str) -> str:
    return f"(({col} >> 24) & 16777215)"


def _tid(col: str) -> str:
    return f"({col} & 16777215)"


def _int(expr: str) -> str:
    """An SQL expression as an integer whatever its storage class: integers as they are,
    reals that fit int64 truncated, anything else (text, blobs, 1e300) NULL."""
    return (f"(CASE typeof({expr}) WHEN 'integer' THEN {expr} WHEN 'real' THEN CASE WHEN abs({expr}) < 4.6e18 "
            f"THEN CAST({expr} AS INTEGER) END END)")


def _text(expr: str) -> str:
    return f"CAST({expr} AS TEXT)"


# The integer columns read from each activity table: key -> (table, alias -> SQL, WHERE). A tuple
# lists alternatives: the first whose columns all exist is used (else NULL; for WHERE: no rows).
_GPU = {"start_ns": "start", "end_ns": "end", "device": "deviceId", "stream": "streamId",
        "correlation": "correlationId", "pid": _pid("globalPid")}
ACTIVITY = {
    "runtime": ("CUPTI_ACTIVITY_KIND_RUNTIME", {
        "start_ns": "start", "end_ns": "end", "event_class": ("eventClass", "0"), "pid": _pid("globalTid"),
        "tid": _tid("globalTid"), "correlation": "correlationId", "name_id": "nameId",
    }, ("eventClass IN (0, 1)", "1")),
    "kernel": ("CUPTI_ACTIVITY_KIND_KERNEL", {
        **_GPU, "name_id": ("demangledName", "shortName"), "grid_x": "gridX", "grid_y": "gridY", "grid_z": "gridZ",
        "block_x": "blockX", "block_y": "blockY", "block_z": "blockZ", "registers": "registersPerThread",
    }, "1"),
    "memcpy": ("CUPTI_ACTIVITY_KIND_MEMCPY", {
        **_GPU, "bytes": "bytes", "copy": "copyKind", "src": "srcKind", "dst": "dstKind"}, "1"),
    "memset": ("CUPTI_ACTIVITY_KIND_MEMSET", {**_GPU, "bytes": "bytes"}, "1"),
    "sync": ("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", {**_GPU, "sync": "syncType"}, "1"),
}


def _connect(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    con.text_factory = lambda raw: raw.decode("utf-8", "replace")
    return con


def read(path: Path) -> Parsed:
    path = Path(path)
    try:
        con = _connect(path)
        try:
            return _Export(con, path).parse()
        finally:
            con.close()
    except sqlite3.Error as exc:
        raise BadInput(f"unreadable SQLite database ({exc})", path) from None


class _Export:
    """One open export: probes its tables and columns, reads them into canonical frames."""

    def __init__(self, con: sqlite3.Connection, path: Path):
        self.con, self.path = con, path
        self.tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        self._columns: dict[str, set[str]] = {}
        self._strings: pl.DataFrame | None = None

    # ------------------------------------------------------------------ probing and fetching
    def columns(self, table: str) -> set[str]:
        if table not in self._columns:
            self._columns[table] = ({r[1] for r in self.con.execute(f'PRAGMA table_info("{table}")')}
                                    if table in self.tables else set())
        return self._columns[table]

    def is_nsys(self) -> bool:
        return "StringIds" in self.tables or any(
            t.startswith(("CUPTI_ACTIVITY_KIND_", "TARGET_INFO_")) or t == "NVTX_EVENTS" for t in self.tables)

    def usable(self, table: str, expr: str | tuple[str, ...]) -> str | None:
        """The first alternative of `expr` whose columns all exist in `table`."""
        cols = self.columns(table)
        for e in (expr,) if isinstance(expr, str) else expr:
            if set(re.findall(r"[A-Za-z_]\w*", e)) - _KEYWORDS <= cols:
                return e
        return None

    def fetch_ints(self, specs: dict[str, tuple]) -> dict[str, pl.DataFrame]:
        """Run integer-only queries (key -> (table, select, where), as in ACTIVITY); a frame per key.

        The activity tables are read by the ADBC SQLite driver straight into Arrow (C, no
        Python object per value); text tables stay on sqlite3, which decodes bad UTF-8.
        """
        out, queries, coerced = {}, {}, {}
        for key, (table, select, where) in specs.items():
            cond = self.usable(table, where)
            if table not in self.tables or not cond:
                out[key] = pl.DataFrame(schema=dict.fromkeys(select, pl.Int64))
                continue
            exprs = [(alias, self.usable(table, e) or "NULL") for alias, e in select.items()]
            queries[key] = f'SELECT {", ".join(f"{e} AS {a}" for a, e in exprs)} FROM "{table}" WHERE {cond}'
            coerced[key] = f'SELECT {", ".join(f"{_int(e)} AS {a}" for a, e in exprs)} FROM "{table}" WHERE {cond}'
        # ADBC fetches run in C without the GIL: read the tables side by side
        with ThreadPoolExecutor(max_workers=min(4, max(1, len(queries)))) as pool:
            frames = dict(zip(queries, pool.map(lambda sql: _arrow_query(self.path, sql), queries.values())))
        for key, frame in frames.items():
            cols = [pl.col(a).cast(pl.Int64) for a in specs[key][1]]
            try:
                if frame is None:
                    raise ValueError("ADBC could not read it")
                out[key] = frame.select(cols)
            except (ValueError, pl.exceptions.PolarsError):
                # mixed or wrong storage classes (text, reals beyond int64): sqlite3 reads every
                # value, and values that are no integer become NULL (dropped or null later)
                out[key] = _sqlite_query(self.con, coerced[key]).select(cols)
        return out

    def strings(self) -> pl.DataFrame:
        if self._strings is None:
            rows = (self.con.execute(f"SELECT {_int('id')}, {_text('value')} FROM StringIds").fetchall()
                    if {"id", "value"} <= self.columns("StringIds") else [])
            self._strings = pl.DataFrame(rows, schema={"id": pl.Int64, "value": pl.String}, orient="row")
        return self._strings

    def with_string(self, df: pl.DataFrame, id_col: str, out: str) -> pl.DataFrame:
        """Replace the StringIds reference `id_col` by its text, named `out`."""
        strings = self.strings().rename({"id": id_col, "value": out})
        return df.join(strings, on=id_col, how="left", maintain_order="left").drop(id_col)

    def enum(self, table: str, fallback: dict[int, str]) -> dict[int, str]:
        if {"id", "label"} <= self.columns(table):
            rows = self.con.execute(f'SELECT {_int("id")}, {_text("label")} FROM "{table}"').fetchall()
            return {i: label for i, label in rows if i is not None and label is not None}
        return fallback

    # ------------------------------------------------------------------ tables
    def host_ops(self, api: pl.DataFrame) -> pl.DataFrame:
        """Runtime/driver calls; `sync_record` (dropped by the schema) names the sync record a call causes."""
        names = self.strings().filter(pl.col("id").is_in(api["name_id"].unique().implode())).select(
            name_id="id", name=strip_api_suffix_expr(pl.col("value")))
        base = _api_base(pl.col("name"))
        names = names.with_columns(is_sync=base.is_in(BLOCKING_SYNC_APIS),
                                   sync_record=base.replace_strict(SYNC_APIS, default=None))
        api = api.join(names, on="name_id", how="left", maintain_order="left")
        return api.with_columns(
            kind=pl.when("is_sync").then(pl.lit("sync_api"))
            .when(pl.col("event_class") == 1).then(pl.lit("driver")).otherwise(pl.lit("runtime")),
            unfinished=pl.lit(False),
        ).drop("name_id", "event_class", "is_sync")

    def gpu_ops(self, raw: dict[str, pl.DataFrame], host: pl.DataFrame) -> pl.DataFrame:
        kernels = raw["kernel"]
        # Kernel names are classified once per distinct StringIds id, then joined on the id.
        names = self.strings().filter(pl.col("id").is_in(kernels["name_id"].unique().implode()))
        names = pl.concat([names.select(name_id="id", name="value"),
                           classify(names["value"], pl.repeat("kernel", names.height, eager=True))], how="horizontal")
        kernels = kernels.join(names, on="name_id", how="left", maintain_order="left").drop("name_id")
        kernels = kernels.with_columns(kind=pl.lit("kernel"))

        copy_labels = self.enum("ENUM_CUDA_MEMCPY_OPER", MEMCPY_LABELS)
        mem_kinds = self.enum("ENUM_CUDA_MEM_KIND", MEM_KIND_LABELS)
        memcpy = raw["memcpy"].with_columns(
            kind=pl.lit("memcpy"),
            name=pl.format("[CUDA memcpy {}]", _label("copy", copy_labels)),
            copy_kind=_label("copy", COPY_KINDS),
            src_kind=_label("src", mem_kinds),
            dst_kind=_label("dst", mem_kinds),
        ).drop("copy", "src", "dst")

        memset = raw["memset"].with_columns(
            kind=pl.lit("memset"), name=pl.lit("[CUDA memset]"))

        # A sync record is named after the API that waited (see SYNC_APIS), else after its syncType.
        sync_api = (host.filter(pl.col("sync_record").is_not_null())
                    .select("pid", "correlation", api="sync_record")
                    .unique(["pid", "correlation"], keep="first", maintain_order=True))
        sync = raw["sync"]
        sync = sync.join(sync_api, on=["pid", "correlation"], how="left", maintain_order="left").with_columns(
            kind=pl.lit("sync"),
            name=pl.coalesce("api", _label("sync", self.enum("ENUM_CUPTI_SYNC_TYPE", SYNC_LABELS))),
            # Context-wide and event syncs carry CUPTI's "no stream" (uint32 -1): -1 as in Kineto.
            stream=pl.when(pl.col("stream") == NO_STREAM).then(-1).otherwise("stream"),
        ).drop("sync", "api")

        other = pl.concat([memcpy, memset, sync], how="diagonal_relaxed")
        other = pl.concat([other, classify(other["name"], other["kind"])], how="horizontal")
        return pl.concat([kernels, other], how="diagonal_relaxed")

    def regions(self, last_activity: int | None) -> tuple[pl.DataFrame, int]:
        """NVTX ranges, and how many of them end on another thread than they start on.

        A range still open at the end of the capture ends at the capture's last timestamp
        (`last_activity` of the other tables, or a later NVTX timestamp) and is `unfinished`.
        """
        cols = {"event_type": "eventType", "start_ns": "start", "end_ns": "end", "text": "text",
                "text_id": "textId", "domain_id": "domainId", "pid": _pid("globalTid"), "tid": _tid("globalTid"),
                "thread": "globalTid", "end_thread": "endGlobalTid"}
        dtypes = {a: pl.String if a == "text" else pl.Int64 for a in cols}
        rows = []
        if self.usable("NVTX_EVENTS", "eventType"):
            exprs = ", ".join((_text if a == "text" else _int)(self.usable("NVTX_EVENTS", e) or "NULL")
                              for a, e in cols.items())
            types = ", ".join(map(str, NVTX_RANGES + (NVTX_DOMAIN_CREATE,)))
            rows = self.con.execute(f"SELECT {exprs} FROM NVTX_EVENTS WHERE eventType IN ({types})").fetchall()
        ev = pl.DataFrame(rows, schema=dtypes, orient="row")
        ev = self.with_string(ev, "text_id", "registered").with_columns(
            name=pl.coalesce("registered", "text")).drop("registered", "text")
        domains = (ev.filter(pl.col("event_type") == NVTX_DOMAIN_CREATE)
                   .unique(["pid", "domain_id"], keep="first", maintain_order=True)
                   .select("pid", "domain_id", domain="name"))
        ranges = ev.filter(pl.col("event_type") != NVTX_DOMAIN_CREATE)
        ranges = ranges.join(domains, on=["pid", "domain_id"], how="left", maintain_order="left")
        cross_thread = ranges.filter(pl.col("end_thread") != pl.col("thread")).height
        sane = [ev[c].filter(ev[c].abs() <= LIMIT_NS).max() for c in ("start_ns", "end_ns")]
        capture_end = max((t for t in (last_activity, *sane) if t is not None), default=0)
        ranges = ranges.with_columns(
            source=pl.lit("nvtx"),
            unfinished=pl.col("end_ns").is_null(),
            end_ns=pl.col("end_ns").fill_null(capture_end),
        )
        depth = nesting_depth(np.zeros(ranges.height, np.int64), ranges["thread"].fill_null(0).to_numpy(),
                              ranges["start_ns"].fill_null(0).to_numpy(), ranges["end_ns"].fill_null(0).to_numpy())
        ranges = ranges.with_columns(depth=pl.Series(depth, dtype=pl.Int32))
        return ranges.drop("event_type", "domain_id", "thread", "end_thread"), cross_thread

    # ------------------------------------------------------------------ run facts
    def meta(self, key: str) -> str | None:
        for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
            if {"name", "value"} <= self.columns(table):
                row = self.con.execute(f"SELECT {_text('value')} FROM {table} WHERE name = ?", (key,)).fetchone()
                if row:
                    return row[0]
        return None

    def rank(self) -> tuple[int | None, list[str]]:
        """MPI_RANKS, else the first of RANK_VARS set in the capture environment
        (TARGET_INFO_SYSTEM_ENV or, nsys 2024+, META_DATA_CAPTURE)."""
        if "rank" in self.columns("MPI_RANKS"):
            ranks = sorted(r for (r,) in self.con.execute(f"SELECT DISTINCT {_int('rank')} FROM MPI_RANKS")
                           if r is not None)
            if len(ranks) == 1:
                return int(ranks[0]), []
            if ranks:
                return None, [f"export holds MPI ranks {ranks}; the rank comes from --rank or the file name"]
        found: dict[str, set[int]] = {}
        for var, number in self._rank_variables():
            found.setdefault(var, set()).add(number)
        for var in RANK_VARS:
            if var in found:
                if len(found[var]) > 1:
                    return None, [f"capture environment holds {var} = {sorted(found[var])} (several processes); "
                                  "the rank comes from --rank or the file name"]
                return next(iter(found[var])), []
        return None, []

    def _rank_variables(self) -> list[tuple[str, int]]:
        """(variable, value) of the rank variables in the capture environment; the rest of the
        environment is filtered out inside SQLite or dropped right here, never kept.

        - TARGET_INFO_SYSTEM_ENV: one `NAME=value;NAME=value...` row named DeviceEnvironment
          (nsys 2021-2023), or one row per variable;
        - META_DATA_CAPTURE (nsys 2024+): one row per variable of each profiled process,
          name `PROCESS_<n>:ENVIRONMENT_VARIABLE`, value `NAME="value"`.
        """
        out: list[tuple[str, int]] = []
        if {"name", "value"} <= self.columns("TARGET_INFO_SYSTEM_ENV"):
            wanted = ("DeviceEnvironment",) + RANK_VARS
            rows = self.con.execute(f"SELECT name, {_text('value')} FROM TARGET_INFO_SYSTEM_ENV WHERE name IN "
                                    f"({', '.join('?' * len(wanted))})", wanted).fetchall()
            for name, value in rows:
                if name == "DeviceEnvironment":
                    pairs = re.findall(rf"(?:^|;)({'|'.join(RANK_VARS)})=(\d+)(?=;|$)", value or "")
                else:
                    pairs = [(name, value.strip())] if (value or "").strip().isdigit() else []
                out.extend((var, int(number)) for var, number in pairs)
        if {"name", "value"} <= self.columns("META_DATA_CAPTURE"):
            like = " OR ".join("value LIKE ?" for _ in RANK_VARS)
            rows = self.con.execute(
                "SELECT value FROM META_DATA_CAPTURE WHERE name LIKE 'PROCESS\\_%:ENVIRONMENT\\_VARIABLE' ESCAPE '\\' "
                f"AND ({like})", [f"{v}=%" for v in RANK_VARS]).fetchall()
            for (value,) in rows:
                m = re.fullmatch(rf"({'|'.join(RANK_VARS)})=\"?\s*(\d+)\s*\"?", value or "")
                if m:
                    out.append((m.group(1), int(m.group(2))))
        return out

    def host(self) -> str | None:
        if {"name", "value"} <= self.columns("TARGET_INFO_SYSTEM_ENV"):
            row = self.con.execute(f"SELECT {_text('value')} FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname'").fetchone()
            return row[0] if row else None
        return None

    def devices(self) -> list[dict]:
        cols = self.columns("TARGET_INFO_GPU")
        if "id" not in cols:
            return []
        pick = ", ".join((_text if c == "name" else _int)(c) if c in cols else "NULL"
                         for c in ("id", "name", "smCount", "totalMemory"))
        rows = self.con.execute(f"SELECT DISTINCT {pick} FROM TARGET_INFO_GPU ORDER BY 1").fetchall()
        return [{"id": i, "name": n, "sm_count": sm, "memory_bytes": mem} for i, n, sm, mem in rows]

    def clock_offset_ns(self) -> int:
        if "utcEpochNs" in self.columns("TARGET_INFO_SESSION_START_TIME"):
            row = self.con.execute(f"SELECT {_int('utcEpochNs')} FROM TARGET_INFO_SESSION_START_TIME").fetchone()
            if row and row[0] is not None and abs(row[0]) <= LIMIT_NS:
                return int(row[0])
        return 0

    # ------------------------------------------------------------------ all together
    def parse(self) -> Parsed:
        if not self.is_nsys():
            raise BadInput("SQLite file is not an Nsight Systems export (no nsys tables)", self.path)
        raw = self.fetch_ints(ACTIVITY)
        host = self.host_ops(raw["runtime"])
        gpu = self.gpu_ops(raw, host)
        checked, dropped = check_times({"gpu": gpu, "host": host}, _describe, "CUDA activity records")
        gpu, host = checked["gpu"], checked["host"]
        regions, cross_thread = self.regions(max(gpu["end_ns"].max() or 0, host["end_ns"].max() or 0))
        checked, dropped_nvtx = check_times({"regions": regions}, _describe, "NVTX ranges", reference=[gpu, host])
        regions = checked["regions"]
        if not (gpu.height or host.height or regions.height):
            raise BadInput("no trace events (no CUDA kernels, copies, runtime calls or NVTX ranges"
                           + (f"; {dropped or dropped_nvtx}" if dropped or dropped_nvtx else "") + ")", self.path)
        warnings = [] if (gpu["kind"] == "kernel").any() else [NO_KERNELS]
        warnings += [w for w in (dropped, dropped_nvtx) if w]
        if cross_thread:
            warnings.append(f"{cross_thread} NVTX ranges end on another thread than they start on "
                            "(kept with the starting thread's pid/tid)")
        rank, rank_warnings = self.rank()
        return Parsed(
            tables={"gpu_ops": schema.conform("gpu_ops", gpu.to_arrow()),
                    "host_ops": schema.conform("host_ops", host.to_arrow()),
                    "regions": schema.conform("regions", regions.to_arrow())},
            format="nsys",
            format_version=self.meta("EXPORT_SCHEMA_VERSION"),
            rank=rank,
            host=self.host(),
            devices=self.devices(),
            clock_offset_ns=self.clock_offset_ns(),
            warnings=warnings + rank_warnings,
        )


def _arrow_query(path: Path, sql: str) -> pl.DataFrame | None:
    """An integer-only query as a polars frame via ADBC, on a connection of its own (thread-safe);
    None when ADBC is missing or rejects the values."""
    try:
        import adbc_driver_sqlite.dbapi as adbc

        with adbc.connect(f"{path.resolve().as_uri()}?mode=ro") as acon, acon.cursor() as cur:
            cur.execute(sql)
            return pl.from_arrow(cur.fetch_arrow_table())
    except Exception:  # noqa: BLE001 - ImportError, or values ADBC cannot type: the caller falls back
        return None


def _sqlite_query(con: sqlite3.Connection, sql: str) -> pl.DataFrame:
    cur = con.execute(sql)
    names = [d[0] for d in cur.description]
    return pl.DataFrame(cur.fetchall(), schema=dict.fromkeys(names, pl.Int64), orient="row")


def _describe(row: dict) -> str:
    what = row.get("kind") or row.get("source") or "event"
    return (f"{what} {str(row.get('name'))[:60]!r} with start {fmt_value(row.get('start_ns'))} ns, "
            f"end {fmt_value(row.get('end_ns'))} ns")


def _api_base(name: pl.Expr) -> pl.Expr:
    """API name without its per-thread-default-stream suffix (cudaStreamSynchronize_ptsz)."""
    return name.str.replace(r"_pt(sz|ds)$", "")


def _label(col: str, labels: dict[int, str]) -> pl.Expr:
    """Enum number -> label; numbers missing from `labels` keep their digits."""
    return pl.col(col).replace_strict(labels, default=pl.col(col).cast(pl.String), return_dtype=pl.String)

