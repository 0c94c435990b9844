"""Tensor cores: whether a kernel ran on tensor/matrix cores (its name's evidence), and whether a
framework op could have.

`uses_tensor_cores(name)`: the first rule of `traceq/rules/tensor_cores.toml` (data: an ordered table,
one comment per rule) that the kernel name matches says yes or no; no rule: no (no evidence:
Triton and hand-written kernels). Ingest stores it once per distinct kernel name as
`gpu_ops.tensor_core`.

`tensor_core_eligible(op_name, types)`: the TensorBoard profiler plugin's definition (pytorch/kineto
tb_plugin/torch_tb_profiler/profiler/tensor_core.py `TC_OP_Allowlist`: the GEMM/convolution/RNN-cell
ops of autocast's fp16 list, and their backward nodes), where traceq differs:
- attention ops are eligible (scaled_dot_product_attention and its flash/efficient/cuDNN kernels),
  so are `_scaled_mm` (FP8) and `_int_mm` (INT8);
- matrix-vector and outer products are not (mv, addmv, addr: cuBLAS runs GEMV on SIMT units), nor
  prelu (an elementwise op in autocast's list, not a GEMM);
- backward nodes are matched by family (MmBackward0, `autograd::engine::evaluate_function: ...`),
  not the plugin's exact pre-1.x names;
- with the op's recorded input types (Kineto `Input type`): eligible only when its first tensor
  input is fp16, bf16, fp8, int8 or fp32 (TF32 may apply on NVIDIA Ampere+ and AMD CDNA3); fp64,
  complex and integer inputs are not (the plugin looks at names only). No types, or none known:
  the name decides, as in the plugin.
"""
from __future__ import annotations

import re
from functools import lru_cache

from .bounds import PARSE_CHARS

# op names (aten:: and backward nodes) of the GEMM/convolution/attention/RNN-cell families
_ELIGIBLE_OPS = re.compile(
    r"^(aten::)?(_convolution(_nogroup)?|conv[123]d|conv_tbc|conv_transpose[123]d|convolution"
    r"|cudnn_convolution(_transpose)?(_backward(_weight|_input)?)?|miopen_convolution\w*|mkldnn_convolution"
    r"|convolution_backward|addmm_?|matmul|mm|linear|addbmm|baddbmm|bmm|chain_matmul|linalg_multi_dot"
    r"|_scaled_mm|_int_mm|_thnn_fused_(lstm|gru)_cell|lstm_cell|gru_cell|rnn_(tanh|relu)_cell"
    r"|scaled_dot_product_attention|_scaled_dot_product_(flash|efficient|cudnn)_attention(_backward)?"
    r"|_flash_attention_(forward|backward)|_efficient_attention_(forward|backward))$"
    r"|^(autograd::engine::evaluate_function: )?(CudnnConvolution(Transpose)?|Convolution|Mm|Bmm|Addmm|Addbmm"
    r"|Baddbmm|ScaledDotProduct\w*Attention)Backward\d*$")
# recorded type string -> compute dtype; fp32 counts (TF32), fp64/complex/integers do not
_TYPE_DTYPE = {
    "float": "fp32", "Float": "fp32", "torch.float32": "fp32",
    "c10::Half": "fp16", "Half": "fp16", "torch.float16": "fp16",
    "c10::BFloat16": "bf16", "BFloat16": "bf16", "torch.bfloat16": "bf16",
    "signed char": "int8", "c10::qint8": "int8", "torch.int8": "int8",
    "double": "fp64", "Double": "fp64", "torch.float64": "fp64",
}
ELIGIBLE_DTYPES = frozenset({"fp32", "fp16", "bf16", "fp8", "int8"})


def _dtype(type_name: str) -> str | None:
    if type_name in _TYPE_DTYPE:
        return _TYPE_DTYPE[type_name]
    if "Float8" in type_name or "float8" in type_name:
        return "fp8"
    if "complex" in type_name.lower():
        return "complex"
    if type_name in ("long int", "int", "short int", "bool", "unsigned char", "Long", "Int", "Bool", "Byte"):
        return "integer"
    return None


@lru_cache(maxsize=1)
def _rules() -> tuple[tuple[re.Pattern, bool], ...]:
    """The rules, compiled to match a lower-cased name: case-insensitive matching, three times
    faster than re.IGNORECASE on long kernel names (a pattern lower-cased keeps its meaning as
    long as it has no upper-case escape such as \\D or \\W: checked here)."""
    import tomllib
    from importlib import resources

    doc = tomllib.loads(resources.files("traceq").joinpath("rules/tensor_cores.toml").read_text())
    out = []
    for r in doc["rule"]:
        if re.search(r"\\[A-Z]", r["pattern"]):
            raise ValueError(f"tensor_cores.toml: upper-case escape in {r['pattern']!r} (patterns are lower-cased)")
        out.append((re.compile(r["pattern"].lower()), bool(r["tensor_core"])))
    return tuple(out)


@lru_cache(maxsize=65536)
def uses_tensor_cores(name: str) -> bool:
    """Whether the kernel name says it runs on tensor/matrix cores (the first rule of
    tensor_cores.toml that matches, case-insensitively; none: False). Like the identity, only
    the name's first PARSE_CHARS characters are read."""
    text = (name or "")[:PARSE_CHARS].lower()
    for pattern, verdict in _rules():
        if pattern.search(text):
            return verdict
    return False


def tensor_core_eligible(op_name: str, types: list[str] | None) -> bool:
    """Whether a framework op could run on tensor cores: a GEMM/convolution/attention/RNN-cell op
    (module docstring: the TensorBoard plugin's TC_OP_Allowlist and where traceq differs) whose
    first tensor input, when `types` are known, is fp16/bf16/fp8/int8 or fp32 (TF32)."""
    if not _ELIGIBLE_OPS.search((op_name or "").strip()):
        return False
    for t in types or ():
        dtype = _dtype(t) if isinstance(t, str) else None
        if dtype is not None:
            return dtype in ELIGIBLE_DTYPES
    return True
