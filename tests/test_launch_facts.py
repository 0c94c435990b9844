"""Kernel launch facts in gpu_ops (shared_memory, blocks_per_sm, warps_per_sm,
est_occupancy_pct) and the device properties of occupancy in runs.devices, as the sources
record them: Kineto kernel args and deviceProperties, nsys CUPTI_ACTIVITY_KIND_KERNEL and
TARGET_INFO_GPU. Expected values are written here (synthetic traces) or read from the source
files with json / sqlite3 (shared traces)."""
from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from kineto_synth import Trace

from conftest import shared_trace
from traceq.ingest import ingest
from traceq.ingest.kineto import decode as kineto_decode
from traceq.ingest.kineto import reader as kineto_reader
from traceq.ingest.kineto import recover as kineto_recover
from traceq.ingest.nsys import reader as nsys_reader
from traceq.store import Store, fetch_pl

FACTS = ("shared_memory", "blocks_per_sm", "warps_per_sm", "est_occupancy_pct")
KINETO_ARGS = ("shared memory", "blocks per SM", "warps per SM", "est. achieved occupancy %")
# runs.devices key -> Kineto deviceProperties name (CUDA's cudaDeviceProp names)
KINETO_PROPS = {"compute_major": "computeMajor", "compute_minor": "computeMinor",
                "max_threads_per_block": "maxThreadsPerBlock", "max_threads_per_sm": "maxThreadsPerMultiprocessor",
                "regs_per_block": "regsPerBlock", "regs_per_sm": "regsPerMultiprocessor", "warp_size": "warpSize",
                "shared_mem_per_block": "sharedMemPerBlock", "shared_mem_per_sm": "sharedMemPerMultiprocessor",
                "shared_mem_per_block_optin": "sharedMemPerBlockOptin"}
BASE_KEYS = {"id", "name", "sm_count", "memory_bytes"}


def _gpu_ops(store: Path, where: str = "kind = 'kernel'") -> list[dict]:
    return fetch_pl(Store(store).connect(),
                    f"SELECT kind, name, correlation, pid, {', '.join(FACTS)} FROM gpu_ops WHERE {where} "
                    "ORDER BY start_ns").to_dicts()


def _devices(store: Path) -> list[dict]:
    return json.loads(fetch_pl(Store(store).connect(), "SELECT devices FROM runs").item())


# ------------------------------------------------------------------ synthetic Kineto
# An H100 run as torch.profiler writes it: kernels with the launch facts Kineto computes from
# the device's properties (ints and floats as it prints them), a memcpy (no facts) and a kernel
# of an older Kineto that wrote grid/block only.
H100 = {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85018279936, "computeMajor": 9,
        "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536,
        "warpSize": 32, "sharedMemPerBlock": 49152, "numSms": 132, "regsPerMultiprocessor": 65536,
        "sharedMemPerBlockOptin": 232448, "sharedMemPerMultiprocessor": 233472}
# ROCm's deviceProperties: no regsPerMultiprocessor / sharedMemPerBlockOptin, and the shared
# memory per SM under another name; a property of a type no device has (text) is left out
MI300 = {"id": 1, "name": "AMD Instinct MI300X", "totalGlobalMem": 205571227648, "computeMajor": 9,
         "computeMinor": 4, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536,
         "warpSize": 64, "sharedMemPerBlock": 65536, "numSms": 304, "maxSharedMemoryPerMultiProcessor": 65536,
         "regsPerMultiprocessor": "lots"}
# grid [564,1,1] x block [128,1,1] on 132 SMs: 564 / 132 = 4.272727 blocks, 4 warps each = 17.09091
GEMV = {"shared memory": 0, "blocks per SM": 4.272727, "warps per SM": 17.09091, "est. achieved occupancy %": 27}
# grid [264,1,1] x block [384,1,1], 200 KB of shared memory: 2 blocks, 24 warps per SM; written as ints
GEMM = {"shared memory": 204800, "blocks per SM": 2, "warps per SM": 24, "est. achieved occupancy %": 19}


def _synthetic(tmp_path: Path, odd: bool = False) -> Path:
    t = Trace()
    t.launch("gemv_kernel", 0, 5, 100, 10)
    t.events[-1]["args"].update(grid=[564, 1, 1], block=[128, 1, 1], **{"registers per thread": 32}, **GEMV)
    t.launch("sm90_gemm_kernel", 10, 5, 120, 30)
    t.events[-1]["args"].update(grid=[264, 1, 1], block=[384, 1, 1], **{"registers per thread": 168}, **GEMM)
    t.launch("Memcpy DtoD (Device -> Device)", 20, 5, 160, 4, cat="gpu_memcpy")
    t.events[-1]["args"].update(bytes=4096)
    t.launch("old_kineto_kernel", 30, 5, 170, 2)
    t.events[-1]["args"].update(grid=[1, 1, 1], block=[32, 1, 1])
    if odd:   # a type the typed decode refuses, in every event: each is coerced on its own (`recover`)
        for e in t.events:
            e.setdefault("args", {})["finished"] = ["not", "a", "flag"]
    events = t.events
    path = tmp_path / "synthetic.pt.trace.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"schemaVersion": 1, "deviceProperties": [H100, MI300], "traceEvents": events}, f)
    return path


EXPECTED = [
    ("gemv_kernel", 0, 4.272727, 17.09091, 27.0),
    ("sm90_gemm_kernel", 204800, 2.0, 24.0, 19.0),
    ("Memcpy DtoD (Device -> Device)", None, None, None, None),
    # grid and block only: ingest's calculator (traceq.kernels.occupancy, tests/test_occupancy.py)
    # gives 1 block / 132 SMs = 0.007576 blocks and warps (1 warp each) per SM; no registers: no occupancy
    ("old_kineto_kernel", None, 0.007576, 0.007576, None),
]


def _paths(mp: pytest.MonkeyPatch, path: str) -> dict[str, int]:
    """Force one Kineto decode path; count the calls that show which one ran."""
    seen = {"fast": 0, "coerced": 0}
    fast, coerce = kineto_decode.decode_fast, kineto_recover._coerce_chunk

    def counted_fast(*a, **k):
        out = fast(*a, **k)
        seen["fast"] += out is not None
        return out

    def counted_coerce(*a, **k):
        seen["coerced"] += 1
        return coerce(*a, **k)

    mp.setattr(kineto_recover, "_coerce_chunk", counted_coerce)
    if path == "fast":   # a tiny file split anyway, on two processes
        mp.setattr(kineto_decode, "MIN_SPLIT", 0)
        mp.setattr(kineto_decode, "PART_BYTES", 1024)
        mp.setattr(kineto_decode, "SLICE_BYTES", 256)
        mp.setattr(kineto_decode, "threads_here", lambda: 2)
        mp.setattr(kineto_decode, "decode_fast", counted_fast)
    else:
        mp.setattr(kineto_decode, "decode_fast", lambda *a: None)
    if path == "whole":
        mp.setattr(kineto_reader, "decode_windows", lambda *a: None)
    return seen


@pytest.mark.parametrize("path", ["fast", "windows", "whole", "coerced"])
def test_kineto_kernel_args_become_the_launch_fact_columns_on_every_decode_path(path, tmp_path):
    with pytest.MonkeyPatch.context() as mp:
        seen = _paths(mp, path)
        src = _synthetic(tmp_path, odd=path == "coerced")
        ingest([src], store=tmp_path / "s", jobs=1)
    assert (seen["fast"], seen["coerced"] > 0) == (path == "fast", path == "coerced")
    got = [(r["name"], *(r[c] for c in FACTS)) for r in _gpu_ops(tmp_path / "s", "true")]
    assert got == EXPECTED


def test_kineto_device_properties_in_runs_devices(tmp_path):
    ingest([_synthetic(tmp_path)], store=tmp_path / "s", jobs=1)
    h100, mi300 = _devices(tmp_path / "s")
    assert h100 == {"id": 0, "name": "NVIDIA H100 80GB HBM3", "sm_count": 132, "memory_bytes": 85018279936,
                    "compute_major": 9, "compute_minor": 0, "max_threads_per_block": 1024, "max_threads_per_sm": 2048,
                    "regs_per_block": 65536, "regs_per_sm": 65536, "warp_size": 32, "shared_mem_per_block": 49152,
                    "shared_mem_per_sm": 233472, "shared_mem_per_block_optin": 232448}
    assert mi300 == {"id": 1, "name": "AMD Instinct MI300X", "sm_count": 304, "memory_bytes": 205571227648,
                     "compute_major": 9, "compute_minor": 4, "max_threads_per_block": 1024, "max_threads_per_sm": 2048,
                     "regs_per_block": 65536, "warp_size": 64, "shared_mem_per_block": 65536,
                     "shared_mem_per_sm": 65536}


# ------------------------------------------------------------------ real Kineto traces
def _kernel_args(path: Path) -> dict[tuple[int, int], tuple]:
    """(pid, correlation) -> the four launch facts of each kernel event, read with json."""
    doc = json.load(gzip.open(path) if path.suffix == ".gz" else open(path))
    out = {}
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and e.get("ph") == "X":
            a = e["args"]
            out[(a["device"], a["correlation"])] = (a.get("shared memory"), *(
                None if a.get(k) is None else float(a[k]) for k in KINETO_ARGS[1:]))
    return out


@pytest.mark.parametrize("rel", [
    "kineto/tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz",   # robust decoder (deviceProperties last)
    "kineto/hta/df_index_resolver/df_index_resolver.json.gz",                # fast decoder, 2 GPUs, ints and floats
])
def test_real_kineto_kernels_carry_their_args(rel, tmp_path):
    src = shared_trace(rel)
    want = _kernel_args(src)
    ingest([src], store=tmp_path / "s", jobs=1)
    rows = fetch_pl(Store(tmp_path / "s").connect(),
                    f"SELECT device, correlation, {', '.join(FACTS)} FROM gpu_ops WHERE kind = 'kernel'").rows()
    got = {(d, c): tuple(v) for d, c, *v in rows}
    assert len(got) == len(want) > 50
    assert got == want
    # spot checks, read from the file by hand: bert's first kernel (indexSelectLargeIndex, correlation 8218)
    if "bert" in rel:
        assert got[(0, 8218)] == (0, 4.272727, 17.09091, 27.0)


def test_real_kineto_device_properties(tmp_path):
    src = shared_trace("kineto/tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz")
    (props,) = json.load(gzip.open(src))["deviceProperties"]
    ingest([src], store=tmp_path / "s", jobs=1)
    (dev,) = _devices(tmp_path / "s")
    assert dev == {"id": 0, "name": props["name"], "sm_count": props["numSms"], "memory_bytes": props["totalGlobalMem"],
                   **{k: props[n] for k, n in KINETO_PROPS.items()}}
    assert (dev["compute_major"], dev["shared_mem_per_sm"], dev["regs_per_sm"]) == (9, 233472, 65536)


# ------------------------------------------------------------------ nsys
NSYS = ["nsys/DLProf/nsys_profile.sqlite",                       # legacy export, dynamic shared memory on 12 kernels
        "nsys/pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite",     # schema 2.9.1
        "nsys/pipit/perlmutter-cloverleaf-cuda.sqlite"]          # schema 3.13.2, 4 GPUs


@pytest.mark.parametrize("rel", NSYS)
def test_nsys_shared_memory_is_static_plus_dynamic(rel, tmp_path):
    src = shared_trace(rel)
    with sqlite3.connect(f"file:{src}?mode=ro", uri=True) as con:
        want = sorted(con.execute("SELECT correlationId, start, staticSharedMemory + dynamicSharedMemory "
                                  "FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall())
    ingest([src], store=tmp_path / "s", jobs=1)
    got = sorted(fetch_pl(Store(tmp_path / "s").connect(),
                          "SELECT correlation, start_ns, shared_memory FROM gpu_ops WHERE kind = 'kernel'").rows())
    assert got == want and want
    # nsys records no occupancy: ingest's calculator fills it on every kernel from TARGET_INFO_GPU's
    # properties (its values: tests/test_occupancy.py)
    facts = fetch_pl(Store(tmp_path / "s").connect(),
                     "SELECT count(blocks_per_sm), count(warps_per_sm), count(est_occupancy_pct) FROM gpu_ops")
    assert facts.rows() == [(len(want),) * 3]


def test_nsys_dynamic_shared_memory_counts(tmp_path):
    """DLProf's export: 12 kernels launched with dynamic shared memory; 699,712 bytes in all
    (sqlite3: SUM(staticSharedMemory + dynamicSharedMemory) over its 46 kernels)."""
    ingest([shared_trace(NSYS[0])], store=tmp_path / "s", jobs=1)
    con = Store(tmp_path / "s").connect()
    assert fetch_pl(con, "SELECT count(*) AS n, sum(shared_memory) AS b, max(shared_memory) AS m FROM gpu_ops "
                         "WHERE kind = 'kernel'").row(0) == (46, 699712, 49152)
    assert fetch_pl(con, "SELECT count(shared_memory) AS n FROM gpu_ops WHERE kind <> 'kernel'").item() == 0


def test_nsys_without_shared_memory_columns_gives_nulls(tmp_path):
    src = tmp_path / "old.sqlite"
    shutil.copyfile(shared_trace(NSYS[0]), src)
    with sqlite3.connect(src) as con:
        con.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN dynamicSharedMemory")
        con.execute("ALTER TABLE TARGET_INFO_GPU DROP COLUMN maxBlocksPerSm")
    ingest([src], store=tmp_path / "s", jobs=1)
    rows = _gpu_ops(tmp_path / "s")
    assert len(rows) == 46 and all(r["shared_memory"] is None for r in rows)
    (dev,) = _devices(tmp_path / "s")
    assert "max_blocks_per_sm" not in dev and dev["shared_mem_per_sm"] == 65536


@pytest.mark.parametrize("rel", NSYS)
def test_nsys_device_properties_from_target_info_gpu(rel, tmp_path):
    src = shared_trace(rel)
    with sqlite3.connect(f"file:{src}?mode=ro", uri=True) as con:
        con.row_factory = sqlite3.Row
        want = [dict(r) for r in con.execute("SELECT DISTINCT * FROM TARGET_INFO_GPU ORDER BY id")]
    ingest([src], store=tmp_path / "s", jobs=1)
    got = _devices(tmp_path / "s")
    assert [d["id"] for d in got] == sorted({w["id"] for w in want})
    for d, w in zip(got, want):
        assert d == {"id": w["id"], "name": w["name"], "sm_count": w["smCount"], "memory_bytes": w["totalMemory"],
                     "compute_major": w["computeMajor"], "compute_minor": w["computeMinor"],
                     "max_threads_per_block": w["maxThreadsPerBlock"],
                     "max_threads_per_sm": w["maxWarpsPerSm"] * w["threadsPerWarp"],
                     "regs_per_block": w["maxRegistersPerBlock"], "regs_per_sm": w["maxRegistersPerSm"],
                     "warp_size": w["threadsPerWarp"], "shared_mem_per_block": w["maxShmemPerBlock"],
                     "shared_mem_per_sm": w["maxShmemPerSm"], "shared_mem_per_block_optin": w["maxShmemPerBlockOptin"],
                     "max_blocks_per_sm": w["maxBlocksPerSm"]}
    # the A100s of Perlmutter, by hand: 64 warps x 32 threads, 164 KB of shared memory per SM
    if "cloverleaf" in rel:
        assert (got[0]["max_threads_per_sm"], got[0]["shared_mem_per_sm"], got[0]["max_blocks_per_sm"]) == \
            (2048, 167936, 32)
