"""The second pass of the timer-log reader: the regions read by `log.read_log` (Parquet parts in
a scratch folder) -> the `regions` table, ordered and completed, written batch by batch.

Up to IN_MEMORY_ROWS records the parts are read back and translated with numpy (fast);
beyond, DuckDB does the work out of core (a memory limit and a spill folder in the scratch
folder), so a log of any size is translated in bounded memory. Both give the same rows:

- depth = how many regions of the same thread are open when the region starts: a running sum
  over the thread's open (+1) and close (-1) events ordered by time; at equal times regions
  that end close first (adjacent regions do not nest), then regions open longest first (parent
  before child), then zero-length regions close; the same order as `common.nesting_depth`;
- gpu_dur_ns = the duration record (pid, gpu_id) of a GPU-timed region (pid, gpu), the last
  one in the file; negative durations count as missing;
- device = the device_index of the last `cuda_events` record of the region's process, for
  GPU-timed regions;
- rows ordered by start, pid, tid, depth, then file order.
"""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa

# DuckDB's own memory (it spills the sort and the window to the scratch folder beyond it)
MEMORY_LIMIT = "192MB"
# records (regions + GPU durations + devices) translated in memory: ~150 B each at the peak
IN_MEMORY_ROWS = 1 << 20
INT32_MAX = (1 << 31) - 1
BATCH_ROWS = 1 << 16

REGION_PARTS = pa.schema([("idx", pa.int64()), ("key", pa.string()), ("start_ns", pa.int64()),
                          ("end_ns", pa.int64()), ("pid", pa.int64()), ("tid", pa.int64()),
                          ("gpu", pa.int64())])
GPU_PARTS = pa.schema([("idx", pa.int64()), ("pid", pa.int64()), ("gpu_id", pa.int64()),
                       ("gpu_dur_ns", pa.int64())])
DEVICE_PARTS = pa.schema([("idx", pa.int64()), ("pid", pa.int64()), ("device_index", pa.int64())])
PARTS = {"regions": REGION_PARTS, "gpu": GPU_PARTS, "device": DEVICE_PARTS}

_VIEWS = """
CREATE VIEW r AS SELECT * FROM read_parquet({regions});
CREATE VIEW g AS SELECT pid, gpu_id, arg_max(gpu_dur_ns, idx) AS dur
                 FROM read_parquet({gpu}) GROUP BY pid, gpu_id;
CREATE VIEW d AS SELECT pid, arg_max(coalesce(device_index, -1), idx) AS dev
                 FROM read_parquet({device}) GROUP BY pid;
"""

_UNRESOLVED = """
SELECT count(*) FROM r LEFT JOIN g ON g.pid = r.pid AND g.gpu_id = r.gpu
WHERE r.gpu IS NOT NULL AND NOT coalesce(g.dur >= 0, false)
"""

_REGIONS = """
WITH ev AS (
    SELECT pid, tid, start_ns AS t, 1::TINYINT AS phase, -end_ns AS longest_first, idx,
           1::TINYINT AS delta FROM r
    UNION ALL
    SELECT pid, tid, end_ns, (CASE WHEN end_ns = start_ns THEN 2 ELSE 0 END)::TINYINT, 0, idx,
           -1::TINYINT FROM r),
nested AS (
    SELECT idx, depth FROM (
        SELECT idx, delta, (sum(delta) OVER (PARTITION BY pid, tid ORDER BY t, phase, longest_first, idx
                                             ROWS UNBOUNDED PRECEDING) - 1)::INTEGER AS depth
        FROM ev)
    WHERE delta = 1)
SELECT o.pid, o.tid, 'timer' AS source, o.key AS name, o.start_ns, o.end_ns, n.depth,
       (CASE WHEN o.gpu IS NOT NULL AND d.dev BETWEEN 0 AND 2147483647 THEN d.dev END)::INTEGER
           AS device,
       CASE WHEN o.gpu IS NOT NULL AND g.dur >= 0 THEN g.dur END AS gpu_dur_ns,
       false AS unfinished
FROM r o
JOIN nested n ON n.idx = o.idx
LEFT JOIN g ON o.gpu IS NOT NULL AND g.pid = o.pid AND g.gpu_id = o.gpu
LEFT JOIN d ON o.gpu IS NOT NULL AND d.pid = o.pid
ORDER BY o.start_ns, o.pid, o.tid, n.depth, o.idx
"""

OUT_SCHEMA = pa.schema([("pid", pa.int64()), ("tid", pa.int64()), ("source", pa.string()),
                        ("name", pa.string()), ("start_ns", pa.int64()), ("end_ns", pa.int64()),
                        ("depth", pa.int32()), ("device", pa.int32()), ("gpu_dur_ns", pa.int64()),
                        ("unfinished", pa.bool_())])


def write_regions(parts: dict[str, Path], workdir: Path, out, warnings: list[str]) -> int:
    """Translate the parts into `regions` rows, written to `out.write(table)` batch by batch;
    returns the number of rows. Adds the warnings of the second pass."""
    import pyarrow.parquet as pq

    n = sum(pq.ParquetFile(p).metadata.num_rows for p in parts.values())
    rows = _in_memory(parts, out, warnings) if n <= IN_MEMORY_ROWS else _out_of_core(parts, workdir, out, warnings)
    if not rows:
        warnings.append("the log holds no completed regions")
    return rows


def _in_memory(parts: dict[str, Path], out, warnings: list[str]) -> int:
    import numpy as np
    import pyarrow.parquet as pq

    from ..common import nesting_depth

    r, g, d = (pq.read_table(parts[name]) for name in ("regions", "gpu", "device"))
    pid, tid, start, end = (_np(r, c) for c in ("pid", "tid", "start_ns", "end_ns"))
    has_gpu = r.column("gpu").is_valid().to_numpy(zero_copy_only=False)
    gpu_dur = _lookup(pid, r.column("gpu").fill_null(-1).to_numpy(), has_gpu, _np(g, "pid"), _np(g, "gpu_id"),
                      _np(g, "gpu_dur_ns"))
    _unresolved(int((has_gpu & (gpu_dur < 0)).sum()), warnings)
    zeros = np.zeros(len(pid), np.int64)
    device = _lookup(pid, zeros, has_gpu, _np(d, "pid"), np.zeros(d.num_rows, np.int64),
                     d.column("device_index").fill_null(-1).to_numpy())
    depth = nesting_depth(pid, tid, start, end)
    order = np.lexsort((depth, tid, pid, start))
    n = len(order)
    device, gpu_dur = device[order], gpu_dur[order]
    no_device = (device < 0) | (device > INT32_MAX)
    out.write(pa.table({
        "pid": pa.array(pid[order]),
        "tid": pa.array(tid[order]),
        "source": pa.repeat(pa.scalar("timer", pa.string()), n),
        "name": r.column("key").take(pa.array(order)),
        "start_ns": pa.array(start[order]),
        "end_ns": pa.array(end[order]),
        "depth": pa.array(depth[order], pa.int32()),
        "device": pa.array(np.where(no_device, 0, device), pa.int32(), mask=no_device),
        "gpu_dur_ns": pa.array(gpu_dur, pa.int64(), mask=gpu_dur < 0),
        "unfinished": pa.array(np.zeros(n, bool)),
    }, schema=OUT_SCHEMA))
    return n


def _np(table: pa.Table, name: str):
    import numpy as np

    return table.column(name).to_numpy().astype(np.int64, copy=False)


def _lookup(a, b, want, ref_a, ref_b, ref_value):
    """For rows where `want`, the ref_value of the last ref row with (ref_a, ref_b) == (a, b); else -1."""
    import numpy as np

    out = np.full(len(a), -1, np.int64)
    if not len(ref_a) or not want.any():
        return out
    ref = np.stack([ref_a, ref_b], axis=1)
    last = np.lexsort((np.arange(len(ref_a)), ref_b, ref_a))            # by key, then file order
    ref_s = ref[last]
    keep = np.r_[(ref_s[1:] != ref_s[:-1]).any(axis=1), True]          # last row of each key
    keys, values = ref_s[keep], ref_value[last][keep]
    # binary search on the composite key: rank a row's key among the ref keys
    keys_v = np.ascontiguousarray(keys).view([("a", np.int64), ("b", np.int64)]).ravel()
    q = np.ascontiguousarray(np.stack([a, b], axis=1)).view([("a", np.int64), ("b", np.int64)]).ravel()
    pos = np.searchsorted(keys_v, q)
    found = want & (pos < len(keys_v))
    found[found] &= keys_v[pos[found]] == q[found]
    out[found] = values[pos[found]]
    return out


def _unresolved(n: int, warnings: list[str]) -> None:
    if n:
        warnings.append(f"{n} GPU-timed regions have no GPU duration (the process "
                        "ended before complete_all() resolved their CUDA events)")


def _out_of_core(parts: dict[str, Path], workdir: Path, out, warnings: list[str]) -> int:
    import duckdb

    spill = workdir / "duckdb.tmp"
    con = duckdb.connect(config={"memory_limit": MEMORY_LIMIT, "threads": 2,
                                 "temp_directory": str(spill), "preserve_insertion_order": True,
                                 "autoinstall_known_extensions": False,
                                 "autoload_known_extensions": False})
    try:
        for view in _VIEWS.format(**{k: _quote(str(p)) for k, p in parts.items()}).split(";"):
            if view.strip():
                con.sql(view)
        _unresolved(con.sql(_UNRESOLVED).fetchall()[0][0], warnings)
        rows = 0
        reader = con.sql(_REGIONS).to_arrow_reader(BATCH_ROWS)
        for batch in reader:
            t = pa.Table.from_batches([batch]).cast(OUT_SCHEMA)
            rows += t.num_rows
            out.write(t)
        return rows
    finally:
        con.close()


def _quote(s: str) -> str:
    """Path `s` as a DuckDB literal naming that file only (no glob: a store `st[1]`)."""
    from ...store.read import file_literal

    return file_literal(s)
