"""Kernel occupancy: blocks per SM, warps per SM and estimated achieved occupancy, as Kineto
writes them on kernels ("blocks per SM", "warps per SM", "est. achieved occupancy %").

Kineto's definitions (libkineto DeviceProperties.cpp; the TensorBoard profiler plugin shows them
in its Kernel view and GPU summary):
- blocks per SM = grid blocks (grid x*y*z) / SM count, in 32-bit float;
- warps per SM = blocks per SM * threads per block / 32;
- est. achieved occupancy % = round(100 * min(blocks per SM, B) * threads per block / max threads
  per SM), where B = the active blocks per SM the CUDA occupancy calculator (cuda_occupancy.h,
  `cudaOccMaxActiveBlocksPerMultiprocessor`) gives for the kernel's block size, registers per
  thread and shared memory, with the function attributes Kineto passes: default shared-memory
  limit (no opt-in), no partitioned global caching, no block barriers counted, default carveout.

B is the smallest of four limits, per compute capability (CC):
- warps: (max threads per SM / warp size) // warps per block; 0 when the block exceeds the
  device's max threads per block;
- blocks: the architecture's max resident blocks per SM (16 on CC 3.x, 7.5, 8.6-8.8; 24 on 8.9,
  10.1, 11.0 and 12.x; 32 elsewhere);
- registers: registers are allocated per warp, regs per thread * warp size rounded up to 256, in
  4 sub-partitions of the SM (2 on CC 6.0): ((regs per SM / sub-partitions) // regs per warp *
  sub-partitions) // warps per block; 0 when the block needs more than the per-block register
  file (its warps rounded up to the sub-partitions, as the hardware check does) or more than 255
  (CC < 7) / 256 registers per thread;
- shared memory: per block (recorded static + dynamic) + the 1 KiB the driver reserves per block
  on CC >= 8, rounded up to 256 B (CC < 8) or 128 B; 0 when that exceeds the default per-block
  limit (shared mem per block, 48 KiB, + the reserve): Kineto does not pass the opt-in, so kernels
  that opt into more shared memory (many CUTLASS/cuDNN GEMMs) get occupancy 0, as in Kineto's
  traces. Else (SM shared memory, aligned up to the architecture's carveout sizes) // per block.

Kineto prints the two ratios with 6 decimals and the occupancy as a whole percent; so do we.
AMD GPUs (warp size 64; Kineto's HIP build reports CDNA GPUs as CC 9.x): all three stay null.
The "grid" of ROCm traces is not one unit: blocks for kernels launched by hipLaunchKernel /
hipModuleLaunchKernel, work-items (the global size) for hipExtModuleLaunchKernel (hipBLASLt,
MIOpen: on the shared MI300 traces every such grid is a multiple of its block, the others mostly
not), and gpu_ops does not say which API launched a kernel; the occupancy would need VGPR and LDS
use per kernel, which traces do not record.
Everything is null where a needed input (grid, block, registers, shared memory, a device
property) is missing, or the compute capability is one cuda_occupancy.h does not know.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..lazy import polars as pl

OUTPUT = ("blocks_per_sm", "warps_per_sm", "est_occupancy_pct")
_INT_MAX = np.int64(2**31 - 1)
_KIB = 1024
# the carveout sizes (KiB) the SM's shared memory can be configured to, per CC (align-up targets)
_CARVEOUT_VOLTA = (0, 8, 16, 32, 64, 96)
_CARVEOUT_TURING = (32, 64)
_CARVEOUT_A100 = (0, 8, 16, 32, 64, 100, 132, 164)
_CARVEOUT_GA10X = (0, 8, 16, 32, 64, 100)
_CARVEOUT_HOPPER = (0, 8, 16, 32, 64, 100, 132, 164, 196, 228)


def _arch(major: int, minor: int) -> dict[str, Any] | None:
    """The architectural constants of cuda_occupancy.h for a CC; None when it does not know it."""
    if major not in (3, 5, 6, 7, 8, 9, 10, 11, 12):
        return None
    if major == 3:
        max_blocks = 16
    elif major in (5, 6, 9):
        max_blocks = 32
    elif major == 7:
        max_blocks = 16 if minor == 5 else 32
    elif major == 8:
        max_blocks = 32 if minor == 0 else 24 if minor == 9 else 16
    elif major == 10:
        max_blocks = 24 if minor == 1 else 32
    elif major == 11:
        max_blocks = 24 if minor == 0 else 32
    else:
        max_blocks = 24
    if major < 7:
        carveout = None                       # dedicated shared memory: the SM's size as is
    elif major == 7:
        carveout = _CARVEOUT_TURING if minor == 5 else _CARVEOUT_VOLTA
    elif major == 8:
        carveout = _CARVEOUT_A100 if minor in (0, 7) else _CARVEOUT_GA10X
    elif major == 9:
        carveout = _CARVEOUT_HOPPER
    elif major in (10, 11):
        if minor not in (0, 1, 3):
            return None
        carveout = _CARVEOUT_HOPPER
    else:
        if minor not in (0, 1):
            return None
        carveout = _CARVEOUT_GA10X
    return {
        "smem_granularity": 256 if major < 8 else 128,
        "max_regs_per_thread": 255 if major < 7 else 256,
        "reg_granularity": 256,
        "sub_partitions": 2 if (major, minor) == (6, 0) else 4,
        "max_blocks": max_blocks,
        "reserved_smem": _KIB if major >= 8 else 0,
        "carveout": None if carveout is None else np.array(carveout, dtype=np.int64) * _KIB,
    }


def _round_up(x: np.ndarray, unit: int) -> np.ndarray:
    return -(-x // unit) * unit


def _align_carveout(size: np.ndarray, carveout: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(the smallest carveout size >= size, whether one exists); CC < 7 keeps the size."""
    if carveout is None:
        return size, np.ones(size.shape, dtype=bool)
    i = np.searchsorted(carveout, size, side="left")
    ok = i < len(carveout)
    return np.where(ok, carveout[np.minimum(i, len(carveout) - 1)], 0), ok


def _regs_limit(regs, warps, props, arch, sub_partitions) -> np.ndarray:
    warp = props["warp_size"]
    per_warp = _round_up(regs * warp, arch["reg_granularity"])
    per_block = per_warp * warps
    assumed = per_warp * _round_up(warps, sub_partitions)
    too_big = (props["regs_per_block"] < assumed) | (props["regs_per_block"] < per_block) | \
              (regs > arch["max_regs_per_thread"])
    warps_per_sub = (props["regs_per_sm"] // sub_partitions) // np.maximum(per_warp, 1)
    fit = (warps_per_sub * sub_partitions) // np.maximum(warps, 1)
    return np.where(too_big, 0, np.where(per_warp > 0, fit, _INT_MAX))


_NEEDED = ("sm_count", "compute_major", "compute_minor", "max_threads_per_block", "max_threads_per_sm",
           "regs_per_block", "regs_per_sm", "warp_size", "shared_mem_per_block", "shared_mem_per_sm")


def is_amd(props: dict) -> bool:
    """An AMD GPU: wavefronts of 64 (Kineto's HIP build also reports CC 9.x for CDNA GPUs)."""
    name = str(props.get("name") or "")
    return props.get("warp_size") == 64 or any(w in name for w in ("AMD", "Radeon", "Instinct"))


def active_blocks_per_sm(block_threads, registers, shared_memory, props: dict) -> np.ndarray | None:
    """cudaOccMaxActiveBlocksPerMultiprocessor with Kineto's function attributes, per kernel
    (int64; -1 where the calculator fails: a block of 0 threads, a missing input). None when the
    device is not one the calculator knows (its CC, a missing or non-positive property)."""
    if is_amd(props) or any(not isinstance(props.get(k), int) for k in _NEEDED):
        return None
    if any(props[k] <= 0 for k in _NEEDED if k not in ("compute_major", "compute_minor")):
        return None
    arch = _arch(props["compute_major"], props["compute_minor"])
    if arch is None:
        return None
    threads = np.asarray(block_threads, dtype=np.int64)
    regs = np.asarray(registers, dtype=np.int64)
    smem = np.asarray(shared_memory, dtype=np.int64)
    warp = props["warp_size"]
    warps = -(-threads // warp)
    # warps / SM
    lim_warps = np.where(threads > props["max_threads_per_block"], 0,
                         (props["max_threads_per_sm"] // warp) // np.maximum(warps, 1))
    # registers / SM (CC 6.0, GP100: a block must also fit GP10x's 4 sub-partitions)
    lim_regs = _regs_limit(regs, warps, props, arch, arch["sub_partitions"])
    if (props["compute_major"], props["compute_minor"]) == (6, 0):
        lim_regs = np.where((lim_regs > 0) & (_regs_limit(regs, warps, props, arch, 4) == 0), 0, lim_regs)
    # shared memory / SM (default per-block limit: Kineto passes no opt-in)
    per_block = _round_up(smem + arch["reserved_smem"], arch["smem_granularity"])
    limit = props["shared_mem_per_block"] + arch["reserved_smem"]
    preference, pref_ok = _align_carveout(np.array([props["shared_mem_per_sm"]], dtype=np.int64), arch["carveout"])
    if not pref_ok[0]:
        return None
    aligned, aligned_ok = _align_carveout(per_block, arch["carveout"])
    sm_smem = np.where(preference[0] >= per_block, preference[0],
                       aligned if arch["carveout"] is not None else props["shared_mem_per_sm"])
    fits = per_block <= limit
    lim_smem = np.where(~fits, 0, np.where(per_block > 0, sm_smem // np.maximum(per_block, 1), _INT_MAX))
    failed = (threads <= 0) | (regs < 0) | (fits & (preference[0] < per_block) & ~aligned_ok)
    active = np.minimum(np.minimum(lim_regs, lim_smem), np.minimum(lim_warps, arch["max_blocks"]))
    return np.where(failed, -1, active)


def occupancy(grid_blocks, block_threads, registers, shared_memory, props: dict) -> dict[str, np.ndarray]:
    """Kineto's three kernel args for kernels of one device (`props`: a runs.devices entry, keys of
    traceq.schema's devices contract). Inputs are arrays (NaN = unknown); outputs float64 arrays,
    NaN where not computable (see the module docstring)."""
    grid = np.asarray(grid_blocks, dtype=np.float64)
    threads = np.asarray(block_threads, dtype=np.float64)
    n = grid.shape[0]
    nan = np.full(n, np.nan)
    sms = props.get("sm_count")
    if not isinstance(sms, int) or sms <= 0 or is_amd(props):
        return {k: nan.copy() for k in OUTPUT}
    warp = 32                          # Kineto divides by 32, whatever the device
    known = ~np.isnan(grid) & ~np.isnan(threads)
    g32 = np.where(known, grid, 0).astype(np.float32)
    t32 = np.where(known, threads, 0).astype(np.float32)
    bps32 = g32 / np.float32(sms)                                    # float32, as Kineto
    wps32 = (bps32 * t32) / np.float32(warp)
    out = {"blocks_per_sm": np.where(known, np.round(bps32.astype(np.float64), 6), np.nan),
           "warps_per_sm": np.where(known, np.round(wps32.astype(np.float64), 6), np.nan),
           "est_occupancy_pct": nan.copy()}
    regs = np.asarray(registers, dtype=np.float64)
    smem = np.asarray(shared_memory, dtype=np.float64)
    full = known & ~np.isnan(regs) & ~np.isnan(smem)
    if not full.any():
        return out
    active = active_blocks_per_sm(np.where(full, threads, 1).astype(np.int64), np.where(full, regs, 0).astype(np.int64),
                                  np.where(full, smem, 0).astype(np.int64), props)
    if active is None:
        return out
    eff32 = np.minimum(active.astype(np.float32), bps32)
    occ32 = (eff32 * t32) / np.float32(props["max_threads_per_sm"])
    pct = np.floor(0.5 + occ32.astype(np.float64) * 100.0)
    out["est_occupancy_pct"] = np.where(full & (active >= 0), pct, np.nan)
    return out


def _device_props(devices: list[dict] | dict) -> dict[int, dict]:
    if isinstance(devices, dict):
        return {int(k): v for k, v in devices.items()}
    return {int(d["id"]): d for d in devices or [] if isinstance(d, dict) and d.get("id") is not None}


def with_occupancy(df: pl.DataFrame, devices: list[dict] | dict, overwrite: bool = False) -> pl.DataFrame:
    """`df` (gpu_ops rows: device, kind, grid_x..z, block_x..z, registers, shared_memory) with
    blocks_per_sm, warps_per_sm and est_occupancy_pct computed for the kernels of the devices in
    `devices` (runs.devices entries, or {device id: properties}). Values the source recorded are
    kept unless `overwrite`; columns missing from `df` are added."""
    props = _device_props(devices)
    for c in OUTPUT:
        if c not in df.columns:
            df = df.with_columns(pl.lit(None, dtype=pl.Float64).alias(c))
    need = ("device", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers", "shared_memory")
    if df.height == 0 or not props or any(c not in df.columns for c in need):
        return df
    kernel = (pl.col("kind") == "kernel") if "kind" in df.columns else pl.lit(True)
    frame = df.select(
        pl.col("device").cast(pl.Int64),
        (pl.col("grid_x").cast(pl.Int64) * pl.col("grid_y") * pl.col("grid_z")).cast(pl.Float64).alias("g"),
        (pl.col("block_x").cast(pl.Int64) * pl.col("block_y") * pl.col("block_z")).cast(pl.Float64).alias("t"),
        pl.col("registers").cast(pl.Float64).alias("r"),
        pl.col("shared_memory").cast(pl.Float64).alias("s"),
        kernel.fill_null(False).alias("k"))
    dev = frame["device"].to_numpy()
    k = frame["k"].to_numpy()
    cols = {c: frame[c].to_numpy().astype(np.float64) for c in ("g", "t", "r", "s")}   # nulls -> NaN
    res = {c: np.full(df.height, np.nan) for c in OUTPUT}
    for d, p in props.items():
        rows = np.nonzero(k & (dev == d))[0]
        if rows.size == 0:
            continue
        got = occupancy(cols["g"][rows], cols["t"][rows], cols["r"][rows], cols["s"][rows], p)
        for c in OUTPUT:
            res[c][rows] = got[c]
    computed = {c: pl.Series(c, res[c], dtype=pl.Float64, nan_to_null=True) for c in OUTPUT}
    return df.with_columns(*[(computed[c] if overwrite else pl.coalesce(pl.col(c), computed[c])).alias(c)
                             for c in OUTPUT])
