"""Device peaks: what each GPU can do at most, from `traceq/rules/gpus.toml` (data, one table per device).

`device_spec(name)` finds the spec of a device name as a trace records it (Kineto
`deviceProperties[].name`, nsys `TARGET_INFO_GPU.name`: the store's `runs.devices[].name`), None for
a device traceq does not know (it never guesses a peak). `DeviceSpec.peak_tflops(dtype, unit)` is
the dense peak of tensor/matrix cores (`unit="matrix"`) or of the plain SIMT/vector units
(`unit="vector"`), TFLOP/s; `hbm_tbps` the memory bandwidth, TB/s. The table is read on first use.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8")
UNITS = ("matrix", "vector")
REQUIRED = ("name", "vendor", "arch", "match", "hbm_tbps", "memory_gib", "source", "matrix", "vector")


@dataclass(frozen=True)
class DeviceSpec:
    key: str                       # the table's key in gpus.toml (h100_sxm, mi300x, ...)
    name: str                      # the vendor's product name
    vendor: str                    # NVIDIA | AMD
    arch: str                      # volta ... blackwell, cdna2 ... cdna4
    hbm_tbps: float                # memory bandwidth, TB/s (1e12 B/s)
    matrix: dict[str, float]       # dense tensor/matrix-core peaks, TFLOP/s (int8: TOPS)
    vector: dict[str, float]       # non-tensor (SIMT/vector) peaks, TFLOP/s
    memory_gib: float = 0.0        # device memory, as the datasheet states it
    source: str = ""               # the datasheet/whitepaper of the numbers
    match: tuple[str, ...] = field(default=(), repr=False)   # regexes on recorded device names

    def peak_tflops(self, dtype: str | None, unit: str) -> float | None:
        """Dense peak, TFLOP/s, of `dtype` (fp64 fp32 tf32 bf16 fp16 fp8 int8; fp4 where the
        device has it) on `unit`: 'matrix' (tensor/matrix cores) or 'vector' (plain SIMT/vector
        units). None when unknown.

        matrix + fp32 is plain FP32 (tensor cores do not take FP32 without TF32): the vector fp32
        peak. matrix + a dtype the device's tensor cores lack (fp16 on T4 has them, bf16 on V100
        does not): the vector peak of that dtype. tf32 without TF32 units runs as FP32 (vector
        fp32). dtype None: unknown."""
        if unit not in UNITS:
            raise ValueError(f"unit must be 'matrix' or 'vector', not {unit!r}")
        if dtype is None:
            return None
        if unit == "matrix" and dtype != "fp32" and dtype in self.matrix:
            return self.matrix[dtype]
        if dtype in self.vector:
            return self.vector[dtype]
        return self.vector.get("fp32") if dtype == "tf32" else None


@lru_cache(maxsize=1)
def _table() -> tuple[tuple[DeviceSpec, tuple[re.Pattern, ...]], ...]:
    import tomllib
    from importlib import resources

    doc = tomllib.loads(resources.files("traceq").joinpath("rules/gpus.toml").read_text())
    out = []
    for key, d in doc["device"].items():
        spec = DeviceSpec(key=key, name=d["name"], vendor=d["vendor"], arch=d["arch"], hbm_tbps=float(d["hbm_tbps"]),
                          matrix={k: float(v) for k, v in d["matrix"].items()},
                          vector={k: float(v) for k, v in d["vector"].items()},
                          memory_gib=float(d["memory_gib"]), source=d["source"], match=tuple(d["match"]))
        out.append((spec, tuple(re.compile(p, re.I) for p in spec.match)))
    return tuple(out)


def all_specs() -> list[DeviceSpec]:
    """Every device of gpus.toml, in the file's order."""
    return [spec for spec, _ in _table()]


@lru_cache(maxsize=256)
def device_spec(name: str | None) -> DeviceSpec | None:
    """The spec of a recorded device name ("NVIDIA H100 80GB HBM3", "AMD Instinct MI300X VF",
    "gfx942"); the first device of gpus.toml one of whose `match` patterns it contains. None for
    no name or an unknown device."""
    text = (name or "").strip()
    if not text:
        return None
    for spec, patterns in _table():
        if any(p.search(text) for p in patterns):
            return spec
    return None
