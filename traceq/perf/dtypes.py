"""Element sizes and compute-dtype keys of the type strings profilers record.

Kineto's `Input type` holds c10's names ('c10::BFloat16', 'float', 'long int', ...); PyTorch's
own short names ('BFloat16', 'Float', ...) and torch.dtype names ('torch.bfloat16') are accepted
too. `Concrete Inputs` give a dtype argument (`_scaled_mm`'s out_dtype) as the integer of
c10::ScalarType, mapped by `SCALAR_TYPE`.
"""
from __future__ import annotations

# type string -> (bytes per element, compute-dtype key or None)
TYPES: dict[str, tuple[int, str | None]] = {
    "double": (8, "fp64"), "float": (4, "fp32"),
    "c10::Half": (2, "fp16"), "c10::BFloat16": (2, "bf16"),
    "c10::Float8_e4m3fn": (1, "fp8"), "c10::Float8_e5m2": (1, "fp8"),
    "c10::Float8_e4m3fnuz": (1, "fp8"), "c10::Float8_e5m2fnuz": (1, "fp8"),
    "c10::Float8_e8m0fnu": (1, "fp8"),
    "signed char": (1, "int8"), "unsigned char": (1, "int8"), "c10::qint8": (1, "int8"),
    "c10::quint8": (1, "int8"),
    "bool": (1, None), "short int": (2, None), "int": (4, None), "long int": (8, None),
    "unsigned short": (2, None), "unsigned int": (4, None), "unsigned long": (8, None),
    "c10::complex<c10::Half>": (4, None), "c10::complex<float>": (8, None),
    "c10::complex<double>": (16, None),
}
ALIASES = {
    "Double": "double", "Float": "float", "Half": "c10::Half", "BFloat16": "c10::BFloat16",
    "Float8_e4m3fn": "c10::Float8_e4m3fn", "Float8_e5m2": "c10::Float8_e5m2",
    "Float8_e4m3fnuz": "c10::Float8_e4m3fnuz", "Float8_e5m2fnuz": "c10::Float8_e5m2fnuz",
    "Char": "signed char", "Byte": "unsigned char", "Bool": "bool", "Short": "short int",
    "Int": "int", "Long": "long int", "ComplexFloat": "c10::complex<float>",
    "ComplexDouble": "c10::complex<double>",
}
ALIASES.update({f"torch.{t}": v for t, v in {
    "float64": "double", "float32": "float", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
    "float8_e4m3fn": "c10::Float8_e4m3fn", "float8_e5m2": "c10::Float8_e5m2",
    "float8_e4m3fnuz": "c10::Float8_e4m3fnuz", "float8_e5m2fnuz": "c10::Float8_e5m2fnuz",
    "int8": "signed char", "uint8": "unsigned char", "bool": "bool", "int16": "short int",
    "int32": "int", "int64": "long int"}.items()})
# c10::ScalarType enum values (c10/core/ScalarType.h), as a dtype argument is recorded.
SCALAR_TYPE = {
    0: "unsigned char", 1: "signed char", 2: "short int", 3: "int", 4: "long int",
    5: "c10::Half", 6: "float", 7: "double", 11: "bool", 15: "c10::BFloat16",
    23: "c10::Float8_e5m2", 24: "c10::Float8_e4m3fn", 25: "c10::Float8_e5m2fnuz",
    26: "c10::Float8_e4m3fnuz",
}
# Types that are not tensors (a scalar argument, or a list of them).
NOT_TENSOR = frozenset({"", "Scalar", "ScalarList", "TensorList", "GenericList", "Device",
                        "None", "c10::Device", "c10::Layout", "c10::MemoryFormat"})


def canonical(type_name: str | None) -> str | None:
    """The c10 spelling of a recorded type, or None when it is not a known tensor type."""
    if not isinstance(type_name, str):
        return None
    name = ALIASES.get(type_name, type_name)
    return name if name in TYPES else None


def element_bytes(type_name: str | None) -> int | None:
    """Bytes per element of a recorded tensor type; None when unknown."""
    name = canonical(type_name)
    return TYPES[name][0] if name else None


def compute_key(type_name: str | None) -> str | None:
    """fp64 fp32 bf16 fp16 fp8 int8 for a floating/int8 type; None otherwise or unknown."""
    name = canonical(type_name)
    return TYPES[name][1] if name else None


def scalar_type(value) -> str | None:
    """The type string of a c10::ScalarType argument (an int, or its name); None if unknown."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return SCALAR_TYPE.get(value)
    return canonical(value) if isinstance(value, str) else None
