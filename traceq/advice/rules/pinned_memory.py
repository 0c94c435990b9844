"""Pinned memory: host<->device copies from pageable memory.

Fires when: memcpy ops whose source or destination is pageable host memory (Kineto
`Memcpy HtoD (Pageable -> Device)`, nsys copy kinds: gpu_ops src_kind/dst_kind 'Pageable').
Ruled out by: only pinned/device copies, or copies with unknown memory kinds (never
guessed); copies of a known size under MIN_COPY_BYTES on average (a scalar read by .item()/.cpu(): latency,
not bandwidth, which pinning does not change; remove_syncs cites the wait); below the floor.
Estimated gain: the pageable copies' GPU time per step (an upper bound: pinned copies run
at full bandwidth and asynchronously, so they can overlap compute).
"""
from __future__ import annotations

from ...lazy import polars as pl

from ..base import Evidence, Finding, kernel_finding


MIN_COPY_BYTES = 64 * 1024


def pinned_memory(scope, ev: Evidence) -> Finding | None:
    pageable = ev.ops.filter((pl.col("kind") == "memcpy")
                             & ((pl.col("src_kind") == "Pageable") | (pl.col("dst_kind") == "Pageable"))
                             # sizes unknown (0 bytes recorded) are kept: never guessed small
                             & ((pl.col("bytes") == 0) | (pl.col("bytes") >= MIN_COPY_BYTES * pl.col("n"))))
    if pageable["n"].sum() == 0:
        return None
    nbytes = pageable["bytes"].sum()
    return kernel_finding(
        "pinned_memory", "memcpy", pageable, ev,
        f"{pageable['n'].sum():,} copies from/to pageable host memory ({nbytes / 1e6:,.1f} MB)",
        ev.said("pin host memory: DataLoader(pin_memory=True) or tensor.pin_memory(), then "
                "tensor.to(device, non_blocking=True) so the copy is asynchronous",
                "allocate the host buffers page-locked (cudaMallocHost/cudaHostAlloc, or cudaHostRegister on memory "
                "you already have; hipHostMalloc/hipHostRegister on ROCm) and copy with cudaMemcpyAsync on a stream, "
                "so copies run at full bandwidth and can overlap compute"))
