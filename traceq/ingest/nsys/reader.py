"""Nsight Systems SQLite export -> canonical tables.

Owns the translation of one `nsys export --type sqlite` file of schema 2.x (`EXPORT_META_DATA`),
3.x (`META_DATA_EXPORT`) or a legacy export without a meta table:

- gpu_ops  <- CUPTI_ACTIVITY_KIND_KERNEL, _MEMCPY, _MEMSET, _SYNCHRONIZATION
- host_ops <- CUPTI_ACTIVITY_KIND_RUNTIME rows of eventClass 0 (runtime) and 1 (driver) only
- regions  <- NVTX_EVENTS push/pop and start/end ranges (eventType 59, 60, 70, 71)
- run facts: schema version, rank (MPI_RANKS, else the rank variables of the capture
  environment), hostname, GPUs, UTC anchor. The environment block itself is never kept.

nsys creates tables lazily and renames columns between versions, so every table and column
is probed; a missing table means no rows, a missing column means nulls. The activity tables
are read as integers only, in rowid-range chunks on all cores, by the ADBC SQLite driver
straight into Arrow (`sqlite_arrow`; Python's sqlite3 would build a tuple per row), and
translated chunk by chunk with vectorised Arrow kernels (`activity`):
names, categories and enum labels are computed once per distinct StringIds id or enum value,
`globalTid`/`globalPid` are decoded per chunk (PID = bits 24..47, TID = bits 0..23). NVTX
nesting depth is a numpy sweep.

In the store, the translated chunks stream straight into the staged gpu_ops/host_ops files
(`Parsed.fill`, `read(stream=True)`): memory is bounded by the chunk size, not the export's.
Time validation (`validate.check_times`) needs the quartiles of all start times only when
something could be dropped: when every record's times are valid and the whole capture spans
less than the smallest margin the rule allows (1000 s), nothing can be, and the quantiles are
not computed. Otherwise they come from a second read of the times alone, and if the rule drops
records already written, both tables are written again with the rule applied.
"""
from __future__ import annotations

import contextlib
import re
import sqlite3
from functools import partial
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from ... import schema
from ...errors import BadInput
from ...threads import ordered_map
from ..common import Parsed, nesting_depth
from .activity import Activity, Waits
from .sqlite_arrow import IntQuery, as_int, chunks, read_chunk
from .emit_nvtx import emit_nvtx_sizes
from .lookups import Repeats, first_frame, first_rows
from .start_histogram import StartHistogram
from ..validate import ABSURD_FACTOR, LIMIT_NS, MIN_WIDTH_NS, bounds_of, check_times, dropped_message, fmt_value, keep_expr, sane

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
NVTX_RANGES = (59, 60, 70, 71)   # NvtxPushPopRange, NvtxStartEndRange, NVTXT push/pop and start/end
NVTX_DOMAIN_CREATE = 75
# in this order of trust; LOCAL_RANK (the rank within a node) only when nothing else says
RANK_VARS = ("SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK", "LOCAL_RANK")
NO_KERNELS = "no CUDA kernel activity in this export"
_KEYWORDS = {"IN", "AND", "OR", "NOT", "IS", "NULL"}
# runs.devices key -> its TARGET_INFO_GPU column (nsys 2021.x-2025.x exports all have them;
# TARGET_INFO_CUDA_DEVICE only maps CUDA device ids to these GPUs)
DEVICE_PROPERTIES = {
    "compute_major": "computeMajor", "compute_minor": "computeMinor", "max_threads_per_block": "maxThreadsPerBlock",
    "max_threads_per_sm": "maxWarpsPerSm * threadsPerWarp", "regs_per_block": "maxRegistersPerBlock",
    "regs_per_sm": "maxRegistersPerSm", "warp_size": "threadsPerWarp", "shared_mem_per_block": "maxShmemPerBlock",
    "shared_mem_per_sm": "maxShmemPerSm", "shared_mem_per_block_optin": "maxShmemPerBlockOptin",
    "max_blocks_per_sm": "maxBlocksPerSm",
}


def _pid(col: str) -> str:
    return f"(({col} >> 24) & 16777215)"


def _tid(col: str) -> str:
    return f"({col} & 16777215)"


def _text(expr: str) -> str:
    return f"CAST({expr} AS TEXT)"


# The integer columns read from each activity table: key -> (table, alias -> SQL, WHERE). A tuple
# lists alternatives: the first whose columns all exist is used (else NULL; for WHERE: no rows).
# global_pid / global_tid are decoded into pid and tid by `_decode_global_ids`.
_GPU = {"start_ns": "start", "end_ns": "end", "device": "deviceId", "stream": "streamId",
        "correlation": "correlationId", "global_pid": "globalPid"}
ACTIVITY = {
    "runtime": ("CUPTI_ACTIVITY_KIND_RUNTIME", {
        "start_ns": "start", "end_ns": "end", "event_class": ("eventClass", "0"), "global_tid": "globalTid",
        "correlation": "correlationId", "name_id": "nameId",
    }, ("eventClass IN (0, 1)", "1")),
    "kernel": ("CUPTI_ACTIVITY_KIND_KERNEL", {
        **_GPU, "name_id": ("demangledName", "shortName"), "grid_x": "gridX", "grid_y": "gridY", "grid_z": "gridZ",
        "block_x": "blockX", "block_y": "blockY", "block_z": "blockZ", "registers": "registersPerThread",
        # shared memory per block: the static (the kernel's own) plus the dynamic (the launch's)
        "shared_memory": ("staticSharedMemory + dynamicSharedMemory",),
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


def read(path: Path, stream: bool = False) -> Parsed:
    """The export's run facts and tables. `stream`: the tables are left to `Parsed.fill`,
    which writes them chunk by chunk when the store stages them (memory bounded by the chunk
    size); else they are collected in memory into `Parsed.tables`."""
    path = Path(path)
    with open_export(path) as export:
        parsed = export.facts()
    parsed.fill = partial(_fill, path, parsed)
    if not stream:
        parsed.tables, parsed.fill = _collected(parsed.fill), None
    return parsed


@contextlib.contextmanager
def open_export(path: Path):
    """The export at `path` open for reading (`Export`), closed on leaving."""
    try:
        con = _connect(path)
        try:
            yield Export(con, path)
        finally:
            con.close()
    except sqlite3.Error as exc:
        raise BadInput(f"unreadable SQLite database ({exc})", path) from None


def _fill(path: Path, parsed: Parsed, open_table) -> None:
    """Parsed.fill: write gpu_ops, host_ops and regions through `open_table(name).write(t)`;
    the warnings about them go before the reader's others (the rank's)."""
    with open_export(path) as export:
        parsed.warnings[0:0] = export.fill(open_table)


class _Collector:
    """An in-memory `open_table` target (`read` without `stream`)."""

    def __init__(self):
        self.parts: list[pa.Table] = []

    def write(self, t: pa.Table) -> None:
        self.parts.append(t)

    def restart(self) -> None:
        self.parts = []


def _collected(fill) -> dict[str, pa.Table]:
    sinks: dict[str, _Collector] = {}
    fill(lambda name: sinks.setdefault(name, _Collector()))
    return {name: pa.concat_tables(c.parts) if c.parts else schema.empty(name) for name, c in sinks.items()}


class Export:
    """One open export: probes its tables and columns, reads them into canonical frames."""

    def __init__(self, con: sqlite3.Connection, path: Path):
        self.con, self.path = con, path
        self.tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        self._columns: dict[str, set[str]] = {}
        self._strings: pl.DataFrame | None = None
        self.repeats = Repeats()   # rows of lookup tables that repeated an id (lookups.py)

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

    def strings(self) -> pl.DataFrame:
        if self._strings is None:
            dtypes = {"id": pl.Int64, "value": pl.String}
            self._strings = (first_frame(self.con, "StringIds", f"{as_int('id')}, {_text('value')}", dtypes, self.repeats)
                             if {"id", "value"} <= self.columns("StringIds") else pl.DataFrame(schema=dtypes))
        return self._strings

    def with_string(self, df: pl.DataFrame, id_col: str, out: str) -> pl.DataFrame:
        """Replace the StringIds reference `id_col` by its text, named `out`."""
        strings = self.strings().rename({"id": id_col, "value": out})
        return df.join(strings, on=id_col, how="left", maintain_order="left").drop(id_col)

    def enum(self, table: str, fallback: dict[int, str]) -> dict[int, str]:
        if {"id", "label"} <= self.columns(table):
            rows = first_rows(self.con, table, f'{as_int("id")}, {_text("label")}', self.repeats)
            return {i: label for i, label in rows if i is not None and label is not None}
        return fallback

    # ------------------------------------------------------------------ tables
    def batches(self):
        """(table, record batch) of gpu_ops and host_ops rows, read and translated chunk by chunk
        on all cores (the runtime table's first: sync records are named after the calls)."""
        act = Activity(self.strings(), self.enum("ENUM_CUDA_MEMCPY_OPER", MEMCPY_LABELS),
                       self.enum("ENUM_CUDA_MEM_KIND", MEM_KIND_LABELS), self.enum("ENUM_CUPTI_SYNC_TYPE", SYNC_LABELS))
        translate = {"runtime": act.host, "kernel": act.kernels, "memcpy": act.memcpy, "memset": act.memset}

        def work(item):
            key, query, rows = item
            chunk = _decode_global_ids(read_chunk(self.path, query, rows))
            if not chunk.num_rows:   # a rowid range whose rows the WHERE clause all leaves out
                return key, None
            return key, translate[key](chunk) if key in translate else chunk

        waits, waits_ready = Waits(), False
        for key, out in ordered_map(work, self._plan(ACTIVITY)):
            if out is None:
                continue
            if key == "runtime":
                waits.add(out[1])
                yield "host_ops", out[0]
                continue
            if key == "sync":
                if not waits_ready:
                    waits.finish()
                    waits_ready = True
                out = act.sync(out, waits)
            yield "gpu_ops", out

    def _plan(self, specs: dict) -> list[tuple[str, IntQuery, tuple | None]]:
        """(key, query, rowid range) of every chunk of the `specs` tables (as ACTIVITY)."""
        plan = []
        for key, (table, select, where) in specs.items():
            cond = self.usable(table, where)
            if table in self.tables and cond:
                query = IntQuery(table, tuple((a, self.usable(table, e) or "NULL") for a, e in select.items()), cond)
                plan += [(key, query, rows) for rows in chunks(self.con, table, self.columns(table))]
        return plan

    def activity(self, sinks: dict, bounds: tuple[int, int, int] | None = None) -> _Tally:
        """Write the gpu_ops and host_ops rows whose times `check_times` keeps (given the
        trace's `bounds`, or None: valid times only) to `sinks`; what was kept and dropped."""
        tally = _Tally()
        for table, batch in self.batches():
            keep = _kept(batch, bounds)
            if keep is not None:
                tally.drop(table, batch.filter(pc.invert(keep)))
                batch = batch.filter(keep)
            tally.add(table, batch)
            if batch.num_rows:
                sinks[table].write(pa.Table.from_batches([batch]))
        return tally

    def activity_times(self, bounds: tuple[int, int, int] | None = None) -> pl.DataFrame:
        """start_ns, end_ns of the activity records `check_times` keeps (as `activity`), read
        again from the export: what the quartiles of the absurd-time rule need."""
        specs = {k: (t, {"start_ns": "start", "end_ns": "end"}, where) for k, (t, _, where) in ACTIVITY.items()}
        parts = []
        for batch in ordered_map(lambda item: read_chunk(self.path, item[1], item[2]), self._plan(specs)):
            keep = _kept(batch, bounds)
            parts.append(batch if keep is None else batch.filter(keep))
        times = pa.Table.from_batches(parts, pa.schema([("start_ns", pa.int64()), ("end_ns", pa.int64())]))
        return pl.from_arrow(times)

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
            exprs = ", ".join((_text if a == "text" else as_int)(self.usable("NVTX_EVENTS", e) or "NULL")
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
        ranges = ranges.with_columns(depth=pl.Series(depth, dtype=pl.Int32), input_dims=emit_nvtx_sizes(ranges["name"]))
        return ranges.drop("event_type", "domain_id", "thread", "end_thread"), cross_thread

    # ------------------------------------------------------------------ run facts
    def memory_events(self) -> pl.DataFrame:
        """memory_events from CUDA_GPU_MEMORY_USAGE_EVENTS (CUDA memory usage tracking,
        `nsys --cuda-memory-usage=true`), when the export has it: one row per allocation or
        free of device memory, `bytes` negative for a free (memoryOperationType 1), pid from
        globalPid; no thread, and no running totals (null: the analysis rebuilds them)."""
        table = "CUDA_GPU_MEMORY_USAGE_EVENTS"
        need = {"start", "globalPid", "deviceId", "address", "bytes", "memoryOperationType"}
        out = {"pid": pl.Int64, "device": pl.Int32, "start_ns": pl.Int64, "addr": pl.Int64, "bytes": pl.Int64}
        if not need <= self.columns(table):
            return pl.DataFrame(schema=out)
        rows = self.con.execute(
            f"SELECT {_pid(as_int('globalPid'))}, {as_int('deviceId')}, {as_int('start')}, {as_int('address')}, "
            f"CASE {as_int('memoryOperationType')} WHEN 1 THEN -{as_int('bytes')} ELSE {as_int('bytes')} END "
            f'FROM "{table}" WHERE {as_int("start")} IS NOT NULL ORDER BY start').fetchall()
        df = pl.DataFrame(rows, schema=out, orient="row")
        return df.with_columns(device_type=pl.lit("cuda"))

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
            ranks = sorted(r for (r,) in self.con.execute(f"SELECT DISTINCT {as_int('rank')} FROM MPI_RANKS")
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
        """{id, name, sm_count, memory_bytes} of each GPU of TARGET_INFO_GPU, and the
        `DEVICE_PROPERTIES` whose columns the export has (keys of a NULL value left out)."""
        cols = self.columns("TARGET_INFO_GPU")
        if "id" not in cols:
            return []
        pick = ", ".join((_text if c == "name" else as_int)(c) if c in cols else "NULL"
                         for c in ("id", "name", "smCount", "totalMemory"))
        props = {k: self.usable("TARGET_INFO_GPU", e) for k, e in DEVICE_PROPERTIES.items()}
        props = {k: e for k, e in props.items() if e is not None}
        extra = "".join(f", {as_int(e)}" for e in props.values())
        rows = sorted(dict.fromkeys(first_rows(self.con, "TARGET_INFO_GPU", f"{pick}{extra}", self.repeats)),
                      key=lambda r: (r[0] is not None, r[0]))
        return [{"id": i, "name": n, "sm_count": sm, "memory_bytes": mem,
                 **{k: v for k, v in zip(props, rest) if v is not None}} for i, n, sm, mem, *rest in rows]

    def clock_offset_ns(self) -> int:
        if "utcEpochNs" in self.columns("TARGET_INFO_SESSION_START_TIME"):
            row = self.con.execute(f"SELECT {as_int('utcEpochNs')} FROM TARGET_INFO_SESSION_START_TIME").fetchone()
            if row and row[0] is not None and abs(row[0]) <= LIMIT_NS:
                return int(row[0])
        return 0

    # ------------------------------------------------------------------ all together
    def facts(self) -> Parsed:
        """The run facts (no tables yet: `fill` writes them)."""
        if not self.is_nsys():
            raise BadInput("SQLite file is not an Nsight Systems export (no nsys tables)", self.path)
        rank, rank_warnings = self.rank()
        devices = self.devices()
        return Parsed(
            tables={},
            format="nsys",
            format_version=self.meta("EXPORT_SCHEMA_VERSION"),
            rank=rank,
            host=self.host(),
            devices=devices,
            clock_offset_ns=self.clock_offset_ns(),
            warnings=rank_warnings + [w for w in (self.repeats.warning(),) if w],
        )

    def fill(self, open_table) -> list[str]:
        """Write the three tables (Parsed.fill); the warnings about them.

        The activity records stream through once. The quartiles of the absurd-time rule
        (`validate`) are computed only when needed: for the warning when records were dropped,
        or when the records kept span more than the rule's smallest margin and the start-time
        histogram of the first pass cannot show that the rule keeps them all
        (`start_histogram`). They then come from a second read of the times alone; if the rule
        drops records already written, the tables are written again with the rule applied.
        """
        sinks = {t: open_table(t) for t in ("gpu_ops", "host_ops")}
        tally = self.activity(sinks)
        bounds = None
        if tally.dropped or not (tally.within(None) or tally.provably_kept()):
            bounds = bounds_of(self.activity_times()["start_ns"].to_numpy().copy())
            if not tally.within(bounds):
                for sink in sinks.values():
                    sink.restart()
                tally = self.activity(sinks, bounds)
        dropped = dropped_message(tally.dropped, bounds, tally.example(), "CUDA activity records")
        regions, cross_thread = self.regions(max(tally.last_end("gpu_ops") or 0, tally.last_end("host_ops") or 0))
        dropped_nvtx = None
        if regions.height and not (tally.within(None, regions) or (bounds is None and tally.provably_kept(regions))):
            checked, dropped_nvtx = check_times({"regions": regions}, _describe, "NVTX ranges",
                                                reference=[self.activity_times(bounds)])
            regions = checked["regions"]
        if not (tally.rows or regions.height):
            raise BadInput("no trace events (no CUDA kernels, copies, runtime calls or NVTX ranges"
                           + (f"; {dropped or dropped_nvtx}" if dropped or dropped_nvtx else "") + ")", self.path)
        open_table("regions").write(schema.conform("regions", regions.to_arrow()))
        memory_events = self.memory_events()
        if memory_events.height:
            open_table("memory_events").write(schema.conform("memory_events", memory_events.to_arrow()))
        warnings = [] if tally.kernels else [NO_KERNELS]
        warnings += [w for w in (dropped, dropped_nvtx, self.repeats.warning()) if w]
        if cross_thread:
            warnings.append(f"{cross_thread} NVTX ranges end on another thread than they start on "
                            "(kept with the starting thread's pid/tid)")
        return warnings


class _Tally:
    """What `Export.activity` kept and dropped: rows, kernels, the span of the times kept,
    the last end per table, the drops with the first of each table."""

    def __init__(self):
        self.rows = self.kernels = self.dropped = 0
        self.lo: int | None = None
        self.hi: int | None = None
        self.ends: dict[str, int] = {}
        self.first_dropped: dict[str, dict] = {}
        self.starts = StartHistogram()

    def add(self, table: str, batch: pa.RecordBatch) -> None:
        if not batch.num_rows:
            return
        self.rows += batch.num_rows
        self.starts.add(batch["start_ns"].to_numpy(zero_copy_only=False))
        if table == "gpu_ops":
            self.kernels += pc.sum(pc.equal(batch["kind"], "kernel")).as_py() or 0
        lo, hi = pc.min(batch["start_ns"]).as_py(), pc.max(batch["end_ns"]).as_py()
        self.lo = lo if self.lo is None else min(self.lo, lo)
        self.hi = hi if self.hi is None else max(self.hi, hi)
        self.ends[table] = hi if table not in self.ends else max(self.ends[table], hi)

    def drop(self, table: str, dropped: pa.RecordBatch) -> None:
        if dropped.num_rows:
            self.dropped += dropped.num_rows
            self.first_dropped.setdefault(table, dropped.slice(0, 1).to_pylist()[0])

    def last_end(self, table: str) -> int | None:
        return self.ends.get(table)

    def example(self) -> str | None:
        """The first dropped record, gpu_ops before host_ops (as check_times lists them)."""
        row = self.first_dropped.get("gpu_ops") or self.first_dropped.get("host_ops")
        return None if row is None else _describe(row)

    def _span(self, regions: pl.DataFrame | None) -> tuple[int | None, int | None] | None:
        """The lowest start and highest end of the rows kept so far and of `regions`; None
        when a region's times are invalid (the rule drops it)."""
        lo, hi = self.lo, self.hi
        if regions is not None and regions.height:
            valid = regions.select(_VALID.alias("ok"), pl.col("start_ns").min().alias("lo"),
                                   pl.col("end_ns").max().alias("hi"))
            if not valid["ok"].all():
                return None
            r_lo, r_hi = valid["lo"][0], valid["hi"][0]
            lo, hi = (r_lo, r_hi) if lo is None else (min(lo, r_lo), max(hi, r_hi))
        return lo, hi

    def within(self, bounds: tuple[int, int, int] | None, regions: pl.DataFrame | None = None) -> bool:
        """True when the rule keeps every row kept so far (all have valid times): within
        `bounds`, or, with None, whatever the bounds, because the rows (and valid `regions`)
        span less than the rule's smallest margin."""
        span = self._span(regions)
        if span is None:
            return False
        lo, hi = span
        if lo is None:
            return True
        if bounds is not None:
            return bounds[0] <= lo and hi <= bounds[1]
        return hi - lo <= ABSURD_FACTOR * MIN_WIDTH_NS

    def provably_kept(self, regions: pl.DataFrame | None = None) -> bool:
        """True when the rule keeps every row kept so far (and every row of `regions`, whose
        starts then count for the quartiles too) whatever the exact quartiles: shown from the
        first pass's start-time histogram, without reading the times again."""
        span = self._span(regions)
        if span is None or span[0] is None:
            return False
        starts = self.starts
        if regions is not None and regions.height:
            starts = starts.copy()
            starts.add(regions["start_ns"].to_numpy())
        return starts.keeps_all(*span)


_VALID = sane()


def _kept(batch: pa.RecordBatch, bounds: tuple[int, int, int] | None) -> pa.Array | None:
    """The rows of `batch` whose times check_times keeps (`validate.keep_expr`, the rule
    Kineto's translation applies too), None for all."""
    times = pl.from_arrow(batch.select(["start_ns", "end_ns"]))
    keep = times.select(keep_expr(bounds).fill_null(False).alias("k"))["k"]
    return None if keep.all() else keep.to_arrow()


def _describe(row: dict) -> str:
    what = row.get("kind") or row.get("source") or "event"
    return (f"{what} {str(row.get('name'))[:60]!r} with start {fmt_value(row.get('start_ns'))} ns, "
            f"end {fmt_value(row.get('end_ns'))} ns")


def _decode_global_ids(chunk: pa.RecordBatch) -> pa.RecordBatch:
    """pid (bits 24..47) and tid (bits 0..23) from globalPid / globalTid, as `_pid`/`_tid` in SQL
    (cheaper here: SQLite evaluates an expression per row)."""
    for col, parts in (("global_pid", ("pid",)), ("global_tid", ("pid", "tid"))):
        if col in chunk.schema.names:
            ids = chunk.column(col)
            decoded = {"pid": pc.bit_wise_and(pc.shift_right(ids, 24), 16777215), "tid": pc.bit_wise_and(ids, 16777215)}
            chunk = chunk.drop_columns([col])
            for part in parts:
                chunk = chunk.append_column(part, decoded[part])
    return chunk
