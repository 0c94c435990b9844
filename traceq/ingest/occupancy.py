"""Kernel occupancy at ingest: gpu_ops.blocks_per_sm, warps_per_sm and est_occupancy_pct for the
kernels whose source did not record them (nsys exports; Kineto traces older than those args),
from the kernel's grid, block, registers and shared memory and its device's properties
(runs.devices), by Kineto's definitions (traceq.kernels.occupancy). Values the source recorded
are kept as they are.

`filling(parsed)` sets this up on a reader's result: a streaming reader's `fill` is wrapped so
that each gpu_ops piece it writes gets the columns; a reader that returns its tables has its
gpu_ops table completed in place.
"""
from __future__ import annotations

from .common import Parsed

_NEEDED = ("device", "kind", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")


def _usable(devices: list[dict]) -> list[dict]:
    """The devices whose SM count is known (nothing can be computed without it)."""
    return [d for d in devices or [] if isinstance(d, dict) and d.get("id") is not None
            and isinstance(d.get("sm_count"), int) and d["sm_count"] > 0]


def completed(t, devices: list[dict]):
    """A gpu_ops piece (pyarrow Table) with the three columns filled where null and computable."""
    from ..kernels.occupancy import OUTPUT, with_occupancy
    from ..lazy import polars as pl

    import pyarrow as pa

    if isinstance(t, pa.RecordBatch):
        t = pa.Table.from_batches([t])
    names = set(t.column_names)
    if t.num_rows == 0 or not set(_NEEDED) <= names:
        return t
    cols = [c for c in (*_NEEDED, "registers", "shared_memory", *OUTPUT) if c in names]
    df = pl.from_arrow(t.select(cols)).with_columns(pl.col("kind").cast(pl.String))
    for c in ("registers", "shared_memory", *OUTPUT):
        if c not in df.columns:
            df = df.with_columns(pl.lit(None, dtype=pl.Float64 if c in OUTPUT else pl.Int64).alias(c))
    kernels = df.filter(pl.col("kind") == "kernel")
    if kernels.height == 0 or not kernels.select(pl.any_horizontal(pl.col(*OUTPUT).is_null()).any()).item():
        return t   # no kernels, or the source recorded all three on every kernel
    got = with_occupancy(df, devices).select(OUTPUT).to_arrow()
    for c in OUTPUT:
        col = got[c].cast("float64")
        if c in names:
            t = t.set_column(t.schema.get_field_index(c), c, col)
        else:
            t = t.append_column(c, col)
    return t


def filling(parsed: Parsed) -> None:
    """Arrange for the kernels of `parsed` to get their occupancy columns (see the module doc)."""
    devices = _usable(parsed.devices)
    if not devices:
        return
    if parsed.fill is None:
        if parsed.tables.get("gpu_ops") is not None:
            parsed.tables["gpu_ops"] = completed(parsed.tables["gpu_ops"], devices)
        return
    fill = parsed.fill

    class _Completing:
        def __init__(self, writer):
            self.writer = writer

        def write(self, t) -> None:
            self.writer.write(completed(t, devices))

        def __getattr__(self, name):      # restart, rows, ...: the writer's own
            return getattr(self.writer, name)

    def wrapped(open_table) -> None:
        fill(lambda table: _Completing(open_table(table)) if table == "gpu_ops" else open_table(table))

    parsed.fill = wrapped
