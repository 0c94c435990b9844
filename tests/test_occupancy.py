"""Kernel occupancy (traceq.kernels.occupancy): Kineto's "blocks per SM", "warps per SM" and
"est. achieved occupancy %", by hand per compute capability, against the values Kineto itself
recorded on every kernel of the shared traces, filled at ingest where a trace has none; and the
TensorBoard plugin's Kernel view columns of `traceq hotspots` against the plugin's own numbers
(tests/data/tb_reference, benchmarks/tb_reference.py)."""
from __future__ import annotations

import gzip
import json
from collections import defaultdict
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import traceq
from conftest import REPO, shared_trace
from kineto_synth import GPU_PID, STREAM, Trace
from traceq.errors import TraceqError
from traceq.ingest import ingest
from traceq.kernels.occupancy import occupancy, with_occupancy

# cudaDeviceProp of real GPUs (as Kineto's deviceProperties writes them, runs.devices keys)
V100 = dict(sm_count=80, compute_major=7, compute_minor=0, max_threads_per_block=1024, max_threads_per_sm=2048,
            regs_per_block=65536, regs_per_sm=65536, warp_size=32, shared_mem_per_block=49152,
            shared_mem_per_sm=98304, shared_mem_per_block_optin=98304)
RTX2080TI = dict(V100, sm_count=68, compute_minor=5, max_threads_per_sm=1024, shared_mem_per_sm=65536,
                 shared_mem_per_block_optin=65536)
A100 = dict(V100, sm_count=108, compute_major=8, shared_mem_per_sm=167936, shared_mem_per_block_optin=166912)
RTX3090 = dict(A100, sm_count=82, compute_minor=6, max_threads_per_sm=1536, shared_mem_per_sm=102400,
               shared_mem_per_block_optin=101376)
H100 = dict(A100, sm_count=132, compute_major=9, shared_mem_per_sm=233472, shared_mem_per_block_optin=232448)
P100 = dict(V100, sm_count=56, compute_major=6, shared_mem_per_sm=65536, shared_mem_per_block_optin=49152)
MI300X = dict(sm_count=304, compute_major=9, compute_minor=4, max_threads_per_block=1024, max_threads_per_sm=2048,
              regs_per_block=65536, warp_size=64, shared_mem_per_block=65536, shared_mem_per_sm=65536)


def one(props, grid, threads, regs, smem):
    out = occupancy([grid], [threads], [regs], [smem], props)
    return {k: (None if np.isnan(v[0]) else float(v[0])) for k, v in out.items()}


# (device, grid blocks, threads per block, registers per thread, shared memory per block, expected
# active blocks per SM B, expected occupancy %): occupancy = round(100 * min(grid / SMs, B) * threads
# / max threads per SM). Warps are 32 threads; registers are allocated per warp in 256s
# (regs * 32 rounded up), each of the 4 sub-partitions holds 65536 / 4 = 16384 of them.
HAND = [
    # V100 (7.0; 64 warps, 32 blocks, 96 KiB shared memory per SM, 256 B shared memory units)
    ("V100 registers", V100, 8000, 256, 64, 0, 4, 50),
    #   64 regs -> 2048 per warp, 16384 // 2048 = 8 warps per sub-partition, 32 per SM, 8 per block -> 4
    ("V100 shared memory", V100, 8000, 128, 32, 20000, 4, 25),
    #   20000 B -> 20224 (256 B units); 98304 // 20224 = 4 (registers allow 16, warps 16)
    ("V100 blocks", V100, 8000, 32, 16, 0, 32, 50),
    #   1 warp, 16 regs: registers allow 128, warps 64, the SM 32 blocks -> 32 * 32 / 2048
    # RTX 2080 Ti (7.5; 32 warps and 16 blocks per SM, 64 KiB)
    ("7.5 blocks", RTX2080TI, 8000, 32, 16, 0, 16, 50),
    ("7.5 registers", RTX2080TI, 8000, 128, 96, 0, 5, 63),
    #   96 regs -> 3072 per warp, 16384 // 3072 = 5 per sub-partition, 20 per SM, 4 per block -> 5;
    #   5 * 128 / 1024 = 62.5 % -> 63 (Kineto rounds half up)
    ("7.5 shared memory", RTX2080TI, 8000, 64, 32, 30000, 2, 13),
    #   30000 -> 30208 B; 65536 // 30208 = 2 -> 2 * 64 / 1024 = 12.5 % -> 13
    # A100 (8.0; 64 warps, 32 blocks, 164 KiB; 1 KiB reserved per block, 128 B units)
    ("A100 registers", A100, 1080, 256, 128, 0, 2, 25),
    #   128 regs -> 4096 per warp, 4 per sub-partition, 16 per SM, 8 per block -> 2
    ("A100 shared memory", A100, 1080, 128, 32, 40000, 4, 25),
    #   40000 + 1024 reserved = 41024 -> 41088 B; 167936 // 41088 = 4
    ("A100 opt-in shared memory", A100, 1080, 128, 32, 65536, 0, 0),
    #   66560 B > the default per-block limit 49152 + 1024: Kineto passes no opt-in -> 0 blocks
    ("A100 blocks", A100, 10800, 32, 16, 0, 32, 50),
    ("A100 grid", A100, 54, 256, 32, 0, 8, 6),
    #   B = 8 (warps, registers) but the grid gives 54 / 108 = 0.5 block per SM: 0.5 * 256 / 2048 = 6.25 % -> 6
    # RTX 3090 (8.6; 48 warps, 16 blocks, 100 KiB)
    ("8.6 blocks", RTX3090, 8200, 64, 16, 0, 16, 67),
    #   16 * 64 / 1536 = 66.67 % -> 67
    ("8.6 shared memory", RTX3090, 8200, 128, 32, 30000, 3, 25),
    #   31024 -> 31104 B; 102400 // 31104 = 3
    # H100 (9.0; 64 warps, 32 blocks, 228 KiB)
    ("H100 shared memory", H100, 13200, 256, 32, 48000, 4, 50),
    #   49024 B (fits 50176); 233472 // 49024 = 4
    ("H100 registers", H100, 13200, 384, 168, 0, 1, 19),
    #   168 regs -> 5376 per warp, 16384 // 5376 = 3 per sub-partition, 12 per SM, 12 per block -> 1;
    #   384 / 2048 = 18.75 % -> 19
    ("H100 register file exceeded", H100, 13200, 512, 255, 0, 0, 0),
    #   255 regs -> 8192 per warp, 16 warps = 131072 > 65536 registers per block
    ("H100 blocks", H100, 13200, 64, 16, 0, 32, 100),
    # P100 (6.0: 2 sub-partitions, but a block must also fit GP10x's 4)
    ("P100 registers", P100, 5600, 1024, 64, 0, 1, 50),
    ("P100 GP10x check", P100, 5600, 704, 88, 0, 0, 0),
    #   22 warps of 2816 registers: 61952 fits 2 sub-partitions (22 warps), not 4 (24 * 2816 > 65536)
]


@pytest.mark.parametrize("case", HAND, ids=[c[0] for c in HAND])
def test_hand_computed_occupancy_per_compute_capability(case):
    from traceq.kernels.occupancy import active_blocks_per_sm

    _, props, grid, threads, regs, smem, blocks, pct = case
    assert active_blocks_per_sm(np.array([threads]), np.array([regs]), np.array([smem]), props)[0] == blocks
    got = one(props, grid, threads, regs, smem)
    assert got["est_occupancy_pct"] == pct
    bps = np.float32(grid) / np.float32(props["sm_count"])     # Kineto computes in 32-bit floats
    assert got["blocks_per_sm"] == round(float(bps), 6) == pytest.approx(grid / props["sm_count"], rel=1e-7)
    assert got["warps_per_sm"] == round(float(bps * np.float32(threads) / np.float32(32)), 6)


def test_amd_and_missing_inputs_are_null():
    # MI300X: ROCm's grid is in blocks or in work-items depending on the launch API (module doc)
    assert one(MI300X, 141, 512, 32, 0) == {"blocks_per_sm": None, "warps_per_sm": None, "est_occupancy_pct": None}
    assert one(A100, 1080, 256, None, 0)["est_occupancy_pct"] is None           # registers unknown
    assert one({**A100, "compute_major": 13}, 1080, 256, 32, 0)["est_occupancy_pct"] is None   # unknown CC
    assert one({k: v for k, v in A100.items() if k != "sm_count"}, 1080, 256, 32, 0)["blocks_per_sm"] is None
    assert one({k: v for k, v in A100.items() if k != "regs_per_sm"}, 1080, 256, 32, 0)["blocks_per_sm"] == 10.0


def test_with_occupancy_keeps_recorded_values_and_fills_the_rest():
    df = pl.DataFrame({"device": [0, 0, 1, 0], "kind": ["kernel", "kernel", "kernel", "memcpy"],
                       "grid_x": [1080, 1080, 1080, None], "grid_y": [1, 1, 1, None], "grid_z": [1, 1, 1, None],
                       "block_x": [256, 256, 256, None], "block_y": [1, 1, 1, None], "block_z": [1, 1, 1, None],
                       "registers": [128, 128, 128, None], "shared_memory": [0, 0, 0, None],
                       "blocks_per_sm": [7.0, None, None, None], "warps_per_sm": [1.0, None, None, None],
                       "est_occupancy_pct": [3.0, None, None, None]})
    out = with_occupancy(df, [{"id": 0, **A100}])      # device 1 unknown: stays null
    assert out["blocks_per_sm"].to_list() == [7.0, 10.0, None, None]
    assert out["warps_per_sm"].to_list() == [1.0, 80.0, None, None]
    assert out["est_occupancy_pct"].to_list() == [3.0, 25.0, None, None]


# ------------------------------------------------------------- Kineto's own values, every kernel
KINETO = {"numSms": "sm_count", "computeMajor": "compute_major", "computeMinor": "compute_minor",
          "maxThreadsPerBlock": "max_threads_per_block", "maxThreadsPerMultiprocessor": "max_threads_per_sm",
          "regsPerBlock": "regs_per_block", "regsPerMultiprocessor": "regs_per_sm", "warpSize": "warp_size",
          "sharedMemPerBlock": "shared_mem_per_block", "sharedMemPerMultiprocessor": "shared_mem_per_sm",
          "sharedMemPerBlockOptin": "shared_mem_per_block_optin", "name": "name"}
RECORDED = [  # traces whose kernels carry Kineto's three args, with their GPU (compute capability)
    "kineto/tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz",     # H100, 9.0
    "kineto/tracelens/h100/Falconsai_nsfw_image_detection__1016002.json.gz",   # H100, 9.0
    "kineto/hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",   # A100, 8.0
    "kineto/hta/nccl_parser_config/nccl_data.json.gz",                          # A100, 8.0
    "kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",          # V100, 7.0
    "kineto/param/resnet_kineto.json.gz",                                       # RTX 2080 Ti, 7.5
]


def _printed(x: np.float32) -> set[float]:
    """The values a Kineto float arg can read as: its 6-decimal print (std::to_string, most
    versions) or its shortest round-trip print (fmt, some versions)."""
    return {round(float(x), 6), float(str(np.float32(x)))}


@pytest.mark.parametrize("rel", RECORDED, ids=[Path(r).parts[2] for r in RECORDED])
def test_equals_what_kineto_recorded_on_every_kernel(rel):
    path = shared_trace(rel)
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    props = {p["id"]: {KINETO[k]: v for k, v in p.items() if k in KINETO} for p in doc["deviceProperties"]}
    by_device = defaultdict(list)
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and "est. achieved occupancy %" in e.get("args", {}):
            by_device[e["args"]["device"]].append(e["args"])
    n = 0
    for dev, args in by_device.items():
        grid = np.array([np.prod(a["grid"]) for a in args])
        threads = np.array([np.prod(a["block"]) for a in args])
        got = occupancy(grid, threads, [a["registers per thread"] for a in args], [a["shared memory"] for a in args],
                        props[dev])
        # the exact 32-bit floats Kineto printed
        bps = grid.astype(np.float32) / np.float32(props[dev]["sm_count"])
        wps = bps * threads.astype(np.float32) / np.float32(32)
        for i, a in enumerate(args):
            assert got["est_occupancy_pct"][i] == a["est. achieved occupancy %"], a
            assert float(a["blocks per SM"]) in _printed(bps[i]), a
            assert float(a["warps per SM"]) in _printed(wps[i]), a
            assert got["blocks_per_sm"][i] == round(float(bps[i]), 6)
            n += 1
    assert n > 0


def test_ingest_fills_kernels_of_a_trace_that_records_none(tmp_path):
    """An older Kineto trace: grid, block, registers and shared memory on kernels, deviceProperties
    at the top, no occupancy args: ingest computes them (A100: the 'A100 registers' case above)."""
    t = Trace("NVIDIA A100")
    t.launch("gemm_kernel", 0, 5, 10, 40)
    t.launch("gemm_kernel", 60, 5, 70, 20)
    for e in t.events:
        if e["cat"] == "kernel":
            e["args"].update({"grid": [1080, 1, 1], "block": [256, 1, 1], "registers per thread": 128,
                              "shared memory": 0})
    doc = {"schemaVersion": 1, "traceEvents": t.events,
           "deviceProperties": [{"id": 0, "name": "NVIDIA A100", **{k: A100[v] for k, v in KINETO.items()
                                                                      if v in A100}}]}
    path = tmp_path / "old.pt.trace.json"
    path.write_text(json.dumps(doc))
    ingest([path], store=tmp_path / "s", jobs=1)
    g = traceq.open_store(tmp_path / "s").sql("SELECT blocks_per_sm, warps_per_sm, est_occupancy_pct "
                                             "FROM gpu_ops WHERE kind = 'kernel'")
    assert g.rows() == [(10.0, 80.0, 25.0), (10.0, 80.0, 25.0)]


def test_ingest_fills_nsys_kernels_from_target_info_gpu(tmp_path):
    """CloverLeaf on an A100 (nsys 2024.5, CC 8.0, 108 SMs; blocks of 256 threads = 8 warps). The
    grids of ~115k blocks (~1067 per SM) leave the occupancy to the registers: regs * 32 rounded up
    to 256 per warp, 16384 per sub-partition -> 42 regs: 1536, 10 warps, 40 per SM, 5 blocks, 62.5 %
    -> 63; 36-40 regs: 1280, 12 -> 6 blocks, 75 %; 58: 2048, 8 -> 4 blocks, 50 %; 32: 1024 -> 8
    blocks, 100 %. par_reduce_kernel's grids of 256 blocks (2.370370 per SM) limit it: 2.37 * 256 /
    2048 = 29.6 % -> 30."""
    path = shared_trace("nsys/pipit/perlmutter-cloverleaf-cuda.sqlite")
    ingest([path], store=tmp_path / "s", jobs=1)
    g = traceq.open_store(tmp_path / "s").sql(
        "SELECT grid_x * grid_y * grid_z AS grid, block_x * block_y * block_z AS threads, registers, "
        "blocks_per_sm, warps_per_sm, est_occupancy_pct FROM gpu_ops WHERE kind = 'kernel'")
    assert g.height == 1312 and g["est_occupancy_pct"].null_count() == 0
    for r in g.iter_rows(named=True):
        bps = np.float32(r["grid"]) / np.float32(108)
        assert r["blocks_per_sm"] == round(float(bps), 6)
        assert r["warps_per_sm"] == round(float(bps * np.float32(r["threads"]) / np.float32(32)), 6)
    big = g.filter(pl.col("grid") > 100_000)
    want = {42: 63.0, 36: 75.0, 38: 75.0, 40: 75.0, 58: 50.0, 32: 100.0}
    for regs, pct in want.items():
        got = big.filter(pl.col("registers") == regs)["est_occupancy_pct"].unique().to_list()
        assert got == [pct], regs
    assert g.filter(pl.col("grid") == 256)["est_occupancy_pct"].unique().to_list() == [30.0]


# ------------------------------------------------------------- hotspots: the plugin's Kernel view
def _kernel_args(bps, occ, grid=(1, 1, 1)):
    return {"blocks per SM": bps, "est. achieved occupancy %": occ, "warps per SM": bps, "grid": list(grid),
            "block": [32, 1, 1], "registers per thread": 16, "shared memory": 0}


def test_kernel_view_weights_by_duration_counts_missing_as_zero_and_tb_takes_the_whole_trace(tmp_path):
    """Two steps; `k` runs 10 µs (2 blocks/SM, 40 %) in step 1, 30 µs (4 blocks/SM, 80 %) in step 2
    and 20 µs without the args in step 2; a memcpy too. The plugin (kernel_parser.py): means
    weighted by duration, a missing value counted as 0: blocks (10*2 + 30*4 + 20*0) / 60 = 2.333,
    occupancy (10*40 + 30*80) / 60 = 46.667; `h884gemm` records none: null. --window tb counts
    every kernel of the trace (no memcpy), --steps 2 only step 2's."""
    t = Trace()
    t.step(1, 0, 100)
    t.step(2, 100, 100)
    t.launch("k", 1, 2, 10, 10)
    t.launch("k", 101, 2, 110, 30)
    t.launch("k", 103, 2, 150, 20)
    t.launch("h884gemm", 104, 2, 175, 5)
    t.launch("Memcpy HtoD (Pageable -> Device)", 105, 2, 181, 4, api="cudaMemcpyAsync", cat="gpu_memcpy")
    kernels = [e for e in t.events if e["cat"] == "kernel"]
    kernels[0]["args"].update(_kernel_args(2.0, 40))
    kernels[1]["args"].update(_kernel_args(4.0, 80))
    path = t.write(tmp_path / "t.pt.trace.json.gz")
    ingest([path], store=tmp_path / "s", jobs=1)
    s = traceq.open_store(tmp_path / "s")
    tb = {r["name"]: r for r in s.hotspots(top=0, window="tb").to_dicts()}
    assert set(tb) == {"k", "h884gemm"}
    assert tb["k"]["count"] == 3 and tb["k"]["total_ns"] == 60_000
    assert tb["k"]["blocks_per_sm"] == pytest.approx(140 / 60)
    assert tb["k"]["est_occupancy_pct"] == pytest.approx(2800 / 60)
    assert tb["k"]["tensor_cores"] is False and tb["h884gemm"]["tensor_cores"] is True
    assert tb["h884gemm"]["blocks_per_sm"] is None and tb["h884gemm"]["est_occupancy_pct"] is None
    step2 = {r["name"]: r for r in s.hotspots(top=0, steps="2").to_dicts()}
    assert step2["k"]["count"] == 2 and step2["k"]["blocks_per_sm"] == pytest.approx(120 / 50)
    assert step2["Memcpy HtoD (Pageable -> Device)"]["tensor_cores"] is None
    with pytest.raises(TraceqError, match="--window tb"):
        s.hotspots(steps="2", window="tb")


# the plugin's own Kernel view (benchmarks/tb_reference.py): per kernel name calls, total µs,
# duration-weighted blocks per SM and occupancy
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from tb_reference import TRACES  # noqa: E402  (the shared traces of the plugin's reference files)
TB = {name: TRACES[name] for name in ("tl_h100_bert", "tl_h100_falcon", "hta_alexnet", "hta_nccl",
                                    "hta_ns_resolution", "param_resnet", "tb_resnet50", "hta_mi250")}


@pytest.fixture(scope="module")
def tb_store(tmp_path_factory):
    d = tmp_path_factory.mktemp("tb_kernels")
    have = {}
    for name, rel in TB.items():
        try:
            have[name] = shared_trace(rel)
        except pytest.skip.Exception:
            continue
    for name, path in have.items():
        ingest([path], store=d / "s", run=name)
    return traceq.open_store(d / "s"), set(have)


@pytest.mark.parametrize("name", list(TB))
def test_kernel_view_equals_the_plugin(tb_store, name):
    store, have = tb_store
    if name not in have:
        pytest.skip(f"../shared/traces/{TB[name]} not available")
    ref = json.loads((REPO / "tests" / "data" / "tb_reference" / f"{name}.json").read_text())["kernels"]
    got = {r["name"]: r for r in store.hotspots(run=name, top=0, window="tb").to_dicts()}
    assert set(got) == {k["name"] for k in ref}
    recorded = any(r["blocks_per_sm"] is not None for r in got.values())
    for k in ref:
        g = got[k["name"]]
        assert g["count"] == k["calls"], k["name"]
        assert g["total_ns"] / 1000 == pytest.approx(k["total_us"], abs=1.5), k["name"]
        if recorded:
            assert g["blocks_per_sm"] == pytest.approx(k["blocks_per_sm"], abs=0.02), k["name"]
            assert g["est_occupancy_pct"] == pytest.approx(k["occupancy"], abs=0.02), k["name"]
        else:   # the trace records no launch facts: the plugin shows no such column (its 0 is a fill)
            assert g["blocks_per_sm"] is None and g["est_occupancy_pct"] is None
            assert k["blocks_per_sm"] == 0 and k["occupancy"] == 0
