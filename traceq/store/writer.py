"""Writing one table file of a rank: the Parquet layout of the store's files (zstd, dictionaries
on text, statistics on every column but the free-form names), the `run`/`rank` columns every
stored table starts with, and the two ways to write a file: `write_table_file` (a whole table
at once) and `TableWriter` (piece by piece, for a streaming reader)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .. import schema

if TYPE_CHECKING:   # pyarrow is imported by the functions that write
    import pyarrow as pa

ROW_GROUP = 1 << 18
STREAM_ROW_GROUP = 1 << 16
# ... or fewer, once the pending rows hold this many bytes: 65 k GPU ops with kernel signatures
# are ~30 MB in Arrow (one row group filling while the one before is encoded: 2x that)
STREAM_GROUP_BYTES = 8 << 20
# zstd level 1 + dictionaries on text only: 2x faster to write than the defaults, smaller files
_WRITE_OPTIONS = {"compression": "zstd", "compression_level": 1}
# Columns written without min/max statistics: free-form names (kernel signatures of hundreds of
# characters). Their statistics cost about a third of the time of writing gpu_ops and prune
# nothing: every row group holds many names, and the analyses match names by pattern. Every
# other column keeps its statistics.
_NO_STATISTICS = frozenset({"name", "identity"})


def _layout(s: pa.Schema) -> dict:
    """The writer options of a table with schema `s`: compression, dictionaries on text,
    statistics on every column but the free-form names."""
    import pyarrow as pa

    text = [f.name for f in s if pa.types.is_string(f.type) or pa.types.is_dictionary(f.type)]
    return {**_WRITE_OPTIONS, "use_dictionary": text,
            "write_statistics": [f.name for f in s if f.name not in _NO_STATISTICS]}


def _with_run_rank_columns(t: pa.Table, run: str, rank: int) -> pa.Table:
    """The table as stored: `run` (dictionary), `rank` (int32), then the schema's columns.
    (`pa.repeat`, not a NumPy array: pyarrow's conversion of one imports numpy.ma, 7 ms.)"""
    import pyarrow as pa

    n = t.num_rows
    t = t.add_column(0, "rank", pa.repeat(pa.scalar(rank, pa.int32()), n))
    return t.add_column(0, "run", pa.DictionaryArray.from_arrays(pa.repeat(pa.scalar(0, pa.int32()), n),
                                                                 pa.array([run], pa.string())))


def write_table_file(path: Path, t: pa.Table, run: str, rank: int) -> None:
    """Write table `t` (already conformed to its schema) with the run/rank columns to `path`,
    in row groups of ROW_GROUP rows."""
    import pyarrow.parquet as pq

    t = _with_run_rank_columns(t, run, rank)
    pq.write_table(t, path, **_layout(t.schema), row_group_size=ROW_GROUP)


class TableWriter:
    """One staged table file written piece by piece (a streaming reader): each piece is
    conformed to the table's schema and gets the run/rank columns; the file has the layout
    of `write_table_file`'s but smaller row groups (STREAM_ROW_GROUP rows or
    STREAM_GROUP_BYTES bytes, whichever comes first: less held in memory).
    No file until the first row.

    Row groups are encoded and written on a thread of their own (pyarrow releases the GIL),
    so the reader goes on translating meanwhile; at most one row group is being written
    while the next one fills (memory stays bounded). A write error is raised by the next
    `write`, `restart` or `close`."""

    def __init__(self, path: Path, table: str, run: str, rank: int):
        self.path, self.table, self.run, self.rank = path, table, run, rank
        self.rows = 0
        self._writer = None   # a pyarrow.parquet.ParquetWriter once the first rows arrive
        self._pending: list[pa.Table] = []
        self._pending_rows = self._pending_bytes = 0
        self._pool = None      # the writing thread, once there is a row group to write
        self._busy = None      # the row group being written (a Future)

    def write(self, t: pa.Table) -> None:
        t = schema.conform(self.table, t)
        if t.num_rows == 0:
            return
        self._pending.append(_with_run_rank_columns(t, self.run, self.rank))
        self._pending_rows += t.num_rows
        self._pending_bytes += self._pending[-1].nbytes
        self.rows += t.num_rows
        if self._pending_rows >= STREAM_ROW_GROUP or self._pending_bytes >= STREAM_GROUP_BYTES:
            self._flush(wait=False)

    def _flush(self, wait: bool = True) -> None:
        if self._pending:
            import pyarrow as pa

            t = pa.concat_tables(self._pending)
            self._pending, self._pending_rows, self._pending_bytes = [], 0, 0
            self._wait()   # one row group in flight at a time, in order
            if self._pool is None:
                from concurrent.futures import ThreadPoolExecutor

                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"write-{self.table}")
            self._busy = self._pool.submit(self._write_group, t)
        if wait:
            self._wait()

    def _write_group(self, t: pa.Table) -> None:
        import pyarrow.parquet as pq

        if self._writer is None:
            self._writer = pq.ParquetWriter(self.path, t.schema, **_layout(t.schema))
        self._writer.write_table(t, row_group_size=1 << 30)

    def _wait(self) -> None:
        busy, self._busy = self._busy, None
        if busy is not None:
            busy.result()

    def restart(self) -> None:
        """Forget what was written (a reader that must write its table again): the next
        write starts the file anew."""
        self._pending, self._pending_rows, self._pending_bytes, self.rows = [], 0, 0, 0
        try:
            self._wait()
        finally:
            self._close_file()
        self.path.unlink(missing_ok=True)

    def close(self) -> None:
        try:
            self._flush()
        finally:
            try:
                self._wait()   # after a failed flush: let the thread finish before the file closes
            finally:
                self._close_file()
                if self._pool is not None:
                    self._pool.shutdown()
                    self._pool = None

    def _close_file(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
