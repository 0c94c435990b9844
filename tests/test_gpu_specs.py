"""Device peaks (traceq/rules/gpus.toml, traceq.perf.devices): the device names real traces record
match the right spec or none, peak lookups follow the documented fallbacks, and hand-checked
datasheet values."""
from __future__ import annotations

import gzip
import json
import sqlite3
import tomllib
from importlib import resources

import pytest
from conftest import SHARED_TRACES

from traceq.perf.devices import DTYPES, REQUIRED, all_specs, device_spec

# Names recorded by the shared traces (Kineto deviceProperties[].name, nsys TARGET_INFO_GPU.name;
# /work/shared/traces, see CATALOG.md) and what they are. None: knowingly unknown (consumer and
# workstation cards are not in the table; "AMD Radeon Graphics" is what ROCm writes when it does not
# know the product: that trace's 64 GB / 104 CUs fit an MI210 and an MI250 GCD alike).
RECORDED = {
    "NVIDIA H100 80GB HBM3": "h100_sxm",             # tracelens/h100, nsys/nvFuser
    "NVIDIA A100-PG509-200": "a100_sxm4_40gb",       # hta/*: 108 SMs, 42.3e9 bytes
    "NVIDIA A100-SXM4-80GB": "a100_sxm4_80gb",       # nsys/pipit cloverleaf
    "NVIDIA A100-SXM4-40GB": "a100_sxm4_40gb",       # nsys/pipit saxpy
    "Tesla V100-SXM2-32GB": "v100_sxm2_32gb",        # hta/df_index_resolver, ns_resolution_trace
    "Tesla V100-SXM2-16GB": "v100_sxm2_16gb",        # hta/trace_diff/test
    "AMD Instinct MI300X": "mi300x",                 # tracelens/perf_model_normalization
    "AMD Instinct MI300X VF": "mi300x",              # tracelens/mi300 (SR-IOV virtual function)
    "AMD Radeon Graphics": None,                     # hta/amd_trace (an MI250 run)
    "NVIDIA GeForce RTX 2080 Ti": None,              # param/resnet_kineto
    "NVIDIA GeForce RTX 2070 SUPER": None,           # nsys/DLProf
    "NVIDIA GeForce RTX 4060 Ti": None,              # nsys/llama3-inference
    "NVIDIA GeForce RTX 4060": None,                 # nsys/WeatherBench2
    "NVIDIA RTX A2000 12GB": None,                   # nsys/DynamicViT
    "Quadro RTX 6000": None,                         # nsys/Mordred-Deprecated
    "": None,                                        # tracelens/inference (vLLM): empty name
}
# Names other systems record (nvidia-smi / CUDA / ROCm spellings)
OTHER_NAMES = {
    "NVIDIA H100 PCIe": "h100_pcie", "NVIDIA H100 NVL": "h100_nvl", "NVIDIA H200": "h200",
    "NVIDIA H200 NVL": "h200_nvl", "NVIDIA A100-PCIE-40GB": "a100_pcie_40gb",
    "NVIDIA A100 80GB PCIe": "a100_pcie_80gb", "Tesla V100-PCIE-32GB": "v100_pcie",
    "Tesla V100-PCIE-16GB": "v100_pcie", "NVIDIA B200": "b200", "NVIDIA L4": "l4", "NVIDIA L40S": "l40s",
    "NVIDIA A10": "a10", "Tesla T4": "t4", "AMD Instinct MI250X / MI250": "mi250x",
    "AMD Instinct MI250X": "mi250x", "AMD Instinct MI250": "mi250", "AMD Instinct MI210": "mi210",
    "AMD Instinct MI325X": "mi325x", "AMD Instinct MI355X": "mi355x",
    "gfx942": "mi300x", "gfx942:sramecc+:xnack-": "mi300x",
    # not in the table, and not to be mistaken for a neighbour
    "NVIDIA GH200 480GB": None, "NVIDIA GB200": None, "NVIDIA A10G": None, "NVIDIA L40": None,
    "Tesla V100S-PCIE-32GB": None, "NVIDIA H800": None, "gfx90a": None, None: None,
}


@pytest.mark.parametrize("name,key", sorted(RECORDED.items()))
def test_device_names_recorded_by_the_shared_traces_match_their_spec(name, key):
    spec = device_spec(name)
    assert (spec.key if spec else None) == key


@pytest.mark.parametrize("name,key", sorted(OTHER_NAMES.items(), key=str))
def test_device_names_of_other_systems_match_their_spec(name, key):
    spec = device_spec(name)
    assert (spec.key if spec else None) == key


def test_every_device_name_in_the_shared_traces_is_known_or_knowingly_unknown():
    if not SHARED_TRACES.exists():
        pytest.skip("../shared/traces not available")
    seen = set()
    for path in (SHARED_TRACES / "kineto").rglob("*.json*"):
        if path.name == "execution_details.json":
            continue
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as f:
            doc = json.load(f)
        if isinstance(doc, dict):
            seen |= {p.get("name") or "" for p in doc.get("deviceProperties") or []}
    for path in (SHARED_TRACES / "nsys").rglob("*.sqlite"):
        con = sqlite3.connect(path)
        try:
            seen |= {r[0] for r in con.execute("SELECT DISTINCT name FROM TARGET_INFO_GPU")}
        except sqlite3.OperationalError:
            pass
        finally:
            con.close()
    assert seen and seen <= set(RECORDED), sorted(seen - set(RECORDED))


def test_hand_checked_datasheet_values():
    h100 = device_spec("NVIDIA H100 80GB HBM3")
    assert (h100.peak_tflops("bf16", "matrix"), h100.hbm_tbps) == (989.4, 3.35)   # 1,979* sparse / 2
    mi300x = device_spec("AMD Instinct MI300X")
    assert (mi300x.peak_tflops("bf16", "matrix"), mi300x.hbm_tbps) == (1307.4, 5.3)
    assert mi300x.peak_tflops("fp32", "vector") == 163.4
    a100 = device_spec("NVIDIA A100-SXM4-80GB")
    assert (a100.peak_tflops("bf16", "matrix"), a100.hbm_tbps) == (312.0, 2.039)
    assert device_spec("NVIDIA A100-SXM4-40GB").hbm_tbps == 1.555


def test_peak_lookups_and_their_fallbacks():
    h100 = device_spec("NVIDIA H100 80GB HBM3")
    # FP32 on "matrix" is plain FP32 (tensor cores take TF32, not FP32): the vector peak
    assert h100.peak_tflops("fp32", "matrix") == h100.peak_tflops("fp32", "vector") == 66.9
    assert h100.peak_tflops("tf32", "matrix") == 494.7
    assert h100.peak_tflops("bf16", "vector") == 133.8
    v100 = device_spec("Tesla V100-SXM2-32GB")
    # V100 tensor cores take fp16 only: bf16 on matrix falls back to the vector bf16 peak (unknown)
    assert v100.peak_tflops("fp16", "matrix") == 125.0
    assert v100.peak_tflops("bf16", "matrix") is None
    assert v100.peak_tflops("tf32", "matrix") == 15.7     # no TF32 units: runs as FP32
    assert v100.peak_tflops("fp8", "matrix") is None
    assert v100.peak_tflops(None, "matrix") is None
    mi355x = device_spec("AMD Instinct MI355X")
    assert mi355x.peak_tflops("tf32", "matrix") == 157.3  # CDNA4: no TF32 matrix type
    with pytest.raises(ValueError):
        h100.peak_tflops("bf16", "tensor")


def test_mi250x_entries_are_per_gcd():
    """ROCm shows each GCD as a device: per-device peaks are half the package datasheet's."""
    gcd = device_spec("AMD Instinct MI250X / MI250")
    assert (gcd.peak_tflops("bf16", "matrix"), gcd.hbm_tbps, gcd.memory_gib) == (383.0 / 2, 3.2768 / 2, 64)


def test_the_table_has_every_required_key_and_sane_numbers():
    doc = tomllib.loads(resources.files("traceq").joinpath("rules/gpus.toml").read_text())
    assert len(doc["device"]) >= 20
    for key, d in doc["device"].items():
        assert set(REQUIRED) <= set(d), key
        assert d["vendor"] in ("NVIDIA", "AMD"), key
        assert d["match"] and d["source"], key
        assert set(d["matrix"]) <= set(DTYPES) | {"fp4"} and "fp32" not in d["matrix"], key
        assert set(d["vector"]) <= set(DTYPES) and "fp32" in d["vector"], key
        assert 0.1 < d["hbm_tbps"] < 20 and d["memory_gib"] >= 16, key
        # dense tensor peaks above the vector FP32 peak, and the low-precision order holds
        m = d["matrix"]
        assert all(v > d["vector"]["fp32"] for k, v in m.items() if k not in ("fp64",)), key
        assert m.get("fp16", 0) >= m.get("tf32", 0) and m.get("fp8", m.get("fp16", 0)) >= m.get("fp16", 0), key
    keys = {s.key for s in all_specs()}
    for wanted in ("v100_sxm2_32gb", "v100_pcie", "a100_sxm4_40gb", "a100_sxm4_80gb", "a100_pcie_40gb",
                   "a100_pcie_80gb", "h100_sxm", "h100_pcie", "h100_nvl", "h200", "b200", "l4", "l40s", "a10",
                   "t4", "mi210", "mi250x", "mi250", "mi300x", "mi325x", "mi355x"):
        assert wanted in keys

