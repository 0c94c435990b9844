"""The DuckDB query of the fast Kineto decoder: JSON array parts -> the raw relation (Parquet).

DuckDB reads each field with a fixed type, converting leniently; the fast decoder runs
this query only on items whose types `kineto_decode._EventCheck` has vouched for, and for
those the conversions below equal `kineto._columns` (kineto_raw docstring, column by column):
- ids (pid, tid and the id-like args) are read as text, integers included (their decimal
  digits), and converted as `kineto._to_int` does: integer text, `0x` hex, else the first
  run of up to 19 digits (`"stream 7"` -> 7); null beyond int64;
- `ts`/`dur` and the collective element counts are read as float64 (numbers and plain
  numeric strings);
- `unfinished`: `finished` is "false" in any case (JSON false reads as "false");
- `bytes`: args.bytes, else max(In, Out msg nelems) x the dtype's element size;
- grid/block: their first three integers.
"""
from __future__ import annotations

from pathlib import Path

# (SQL name, args key, DuckDB type)
_ARGS = (
    ("ext", "External id", "VARCHAR"), ("correlation", "correlation", "VARCHAR"),
    ("stream", "stream", "VARCHAR"), ("device", "device", "VARCHAR"), ("bytes", "bytes", "VARCHAR"),
    ("registers", "registers per thread", "VARCHAR"), ("in_n", "In msg nelems", "DOUBLE"),
    ("out_n", "Out msg nelems", "DOUBLE"), ("group_size", "Group size", "VARCHAR"), ("seq", "Seq", "VARCHAR"),
    ("finished", "finished", "VARCHAR"), ("kind", "kind", "VARCHAR"), ("dtype", "dtype", "VARCHAR"),
    ("grid", "grid", "BIGINT[]"), ("block", "block", "BIGINT[]"), ("collective", "Collective name", "VARCHAR"),
    ("pg_name", "Process Group Name", "VARCHAR"), ("pg_desc", "Process Group Description", "VARCHAR"),
)

# element sizes: kineto._DTYPE_BYTES
_MACROS = r"""
CREATE OR REPLACE TEMP MACRO tq_idtext(s) AS CASE
    WHEN regexp_full_match(s, '-?[0-9]+') THEN TRY_CAST(s AS BIGINT)
    WHEN regexp_full_match(s, '0[xX][0-9a-fA-F]{1,15}') THEN TRY_CAST('0x' || s[3:] AS BIGINT)
    WHEN regexp_full_match(s, '-0[xX][0-9a-fA-F]{1,15}') THEN -TRY_CAST('0x' || s[4:] AS BIGINT)
    ELSE TRY_CAST(nullif(regexp_extract(s, '-?[0-9]{1,19}'), '') AS BIGINT) END;
-- canonical integer text (the common case) without a regular expression
CREATE OR REPLACE TEMP MACRO tq_id(s) AS CASE
    WHEN CAST(TRY_CAST(s AS BIGINT) AS VARCHAR) = s THEN TRY_CAST(s AS BIGINT) ELSE tq_idtext(s) END;
CREATE OR REPLACE TEMP MACRO tq_dtype_size(s) AS CASE lower(s)
    WHEN 'float' THEN 4 WHEN 'float32' THEN 4 WHEN 'double' THEN 8 WHEN 'float64' THEN 8 WHEN 'half' THEN 2
    WHEN 'float16' THEN 2 WHEN 'bfloat16' THEN 2 WHEN 'int' THEN 4 WHEN 'int32' THEN 4 WHEN 'long' THEN 8
    WHEN 'int64' THEN 8 WHEN 'short' THEN 2 WHEN 'int16' THEN 2 WHEN 'char' THEN 1 WHEN 'int8' THEN 1
    WHEN 'byte' THEN 1 WHEN 'uint8' THEN 1 WHEN 'bool' THEN 1 WHEN 'float8_e4m3fn' THEN 1
    WHEN 'float8_e5m2' THEN 1 END;
-- kineto._msg_bytes: int(max(float(in or 0), float(out or 0))) * size, null beyond int64
CREATE OR REPLACE TEMP MACRO tq_msg_v(in_n, out_n, size) AS
    trunc(greatest(coalesce(in_n, 0), coalesce(out_n, 0))) * size;
CREATE OR REPLACE TEMP MACRO tq_msg_bytes(in_n, out_n, dtype) AS CASE
    WHEN dtype IS NOT NULL AND (in_n IS NOT NULL OR out_n IS NOT NULL)
         AND tq_msg_v(in_n, out_n, tq_dtype_size(dtype)) >= -9223372036854775808.0
         AND tq_msg_v(in_n, out_n, tq_dtype_size(dtype)) < 9223372036854775808.0
    THEN CAST(tq_msg_v(in_n, out_n, tq_dtype_size(dtype)) AS BIGINT) END;
"""

_SELECT = """
SELECT
    ph, cat, name, tq_id(pid) AS pid, tq_id(tid) AS tid, ts, dur,
    tq_id(args.ext) AS external_id, tq_id(args.correlation) AS correlation,
    coalesce(lower(args.finished) = 'false', false) AS unfinished,
    tq_id(args.stream) AS stream, tq_id(args.device) AS device,
    CASE WHEN args.bytes IS NOT NULL THEN tq_id(args.bytes)
         ELSE tq_msg_bytes(args.in_n, args.out_n, args.dtype) END AS bytes,
    tq_id(args.registers) AS registers,
    args.grid[1] AS grid_x, args.grid[2] AS grid_y, args.grid[3] AS grid_z,
    args.block[1] AS block_x, args.block[2] AS block_y, args.block[3] AS block_z,
    args.kind AS arg_kind, args.collective AS collective, args.pg_name AS pg_name, args.pg_desc AS pg_desc,
    tq_id(args.group_size) AS group_size, tq_id(args.seq) AS seq
FROM (SELECT ph, cat, name, pid, tid, ts, dur, {args} AS args FROM {source})
WHERE ph IN ('X', 'B', 'E') AND (cat IS NULL OR cat NOT IN ('Trace', 'trace'))
"""


def _quote(p: Path) -> str:
    return "'" + str(p).replace("'", "''") + "'"


def select_sql(files: list[Path], lower_ext: bool = False) -> str:
    """The raw relation of the JSON array files, in file order. `lower_ext`: the trace spells
    the key "external id" (a STRUCT cannot hold both spellings: DuckDB folds case)."""
    keys = [(name, "external id" if lower_ext and name == "ext" else key, typ) for name, key, typ in _ARGS]
    struct = ", ".join(f'"{key}" {typ}' for _, key, typ in keys)
    columns = {"ph": "VARCHAR", "cat": "VARCHAR", "name": "VARCHAR", "pid": "VARCHAR", "tid": "VARCHAR",
               "ts": "DOUBLE", "dur": "DOUBLE", "args": f"STRUCT({struct})"}
    cols = "{" + ", ".join(f"{k}: '{v}'" for k, v in columns.items()) + "}"
    source = (f"read_json([{', '.join(map(_quote, files))}], format = 'array', columns = {cols}, "
              f"maximum_object_size = 16777216)")
    args = "struct_pack(" + ", ".join(f'{name} := args."{key}"' for name, key, _ in keys) + ")"
    return _SELECT.format(args=args, source=source)


def copy_raw(files: list[Path], out: Path, workdir: Path, threads: int, lower_ext: bool = False,
             connected=None) -> int:
    """Write the raw relation of `files` to the Parquet file `out` (row groups of 64 Ki rows);
    returns its row count. DuckDB works in bounded memory (256 MB, spilling to `workdir`).
    `connected(con)` is told the connection (to interrupt it from another thread)."""
    import duckdb

    con = duckdb.connect(config={"threads": max(1, threads), "memory_limit": "256MB",
                                 "temp_directory": str(workdir / "duckdb-tmp"), "preserve_insertion_order": True})
    if connected is not None:
        connected(con)
    try:
        con.execute(_MACROS)
        done = con.execute(f"COPY ({select_sql(files, lower_ext)}) TO {_quote(out)} "
                           f"(FORMAT parquet, COMPRESSION uncompressed, ROW_GROUP_SIZE {1 << 16})").fetchall()
        return int(done[0][0])
    finally:
        con.close()

