"""Kernel identity: the function a GPU kernel *is*, from its (demangled, possibly truncated) name.

identity = the namespace-qualified function name without return type, template arguments and
parameter list:

    void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, ...>(int, ...)
        -> at::native::vectorized_elementwise_kernel

Rules (in this order):
- copy/set labels of the runtime (`Memcpy HtoD (Pageable -> Device)`, `[CUDA memset]`) are kept
  as they are: they are not function names;
- Itanium-mangled names (`_ZN...`) are read as far as their nested name (`_ZN4vllm7moe_sum...`
  -> `vllm::moe_sum`); a mangled wrapper also gets the identifiers of its template argument;
- wrapper kernels whose template argument is the kernel (`cutlass::Kernel<X>`, `Kernel2<X>`,
  `cutlass::device_kernel<X>`, `cutlass_cudnn_*::Kernel<X>`) keep that argument, itself reduced
  to its identity: `cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_nn_align1>`,
  `cutlass::device_kernel<flash::FlashAttnFwdSm90>`;
- `(anonymous namespace)` and `<unnamed>` stay as namespace components, `operator()` and other
  operator names stay whole; lambdas (`{lambda(float)#1}`, `[lambda() (instance 1)]`) are
  scopes like any other;
- a name cut off inside `<` or `(` keeps what came before the cut; a name with no template or
  parameters (`ampere_sgemm_128x64_nn`, `triton_poi_fused_add_0`) is its own identity.

Hostile names are bounded (docs/hardening.md): only the first `PARSE_CHARS` characters of a name
are parsed (a longer name is read as if it were cut there), the scan is linear in that length,
wrapper arguments are unwrapped at most `MAX_WRAPPERS` deep, and a mangled name whose length
prefix is longer than what follows it is not a mangled name: its identity is the raw text.

`library` names the vendor / library from the identity (see LIBRARIES). Both are computed once
per distinct name (`identities`), like the category.
"""
from __future__ import annotations

import re

import polars as pl

from .bounds import MAX_WRAPPERS, PARSE_CHARS

_ANON = "\x01"        # placeholder for "(anonymous namespace)" / "<unnamed>" while parsing
_OPEN, _CLOSE = "<([{", ">)]}"
_OPERATOR = re.compile(r"\boperator\s*(\(\)|\[\]|<=>|<<=|>>=|<<|>>|->\*|->|<=|>=|==|!=|&&|\|\||\+\+|--"
                       r"|[-+*/%^&|~!=<>,]=?|new(\[\])?|delete(\[\])?|\w[\w:]*)")
_RUNTIME_LABEL = re.compile(r"^\s*(\[?\s*CUDA mem(cpy|set)|mem(cpy|set)\b|__amd_rocclr_)", re.I)
# the last component of a wrapper whose first template argument names the kernel
_WRAPPER = re.compile(r"^(cutlass\w*::)?(Kernel2?|device_kernel)$")


def _mask_specials(s: str) -> tuple[str, list[str]]:
    """Replace operator names by placeholders (brackets inside them must not count as nesting)."""
    ops: list[str] = []

    def keep(m: re.Match) -> str:
        ops.append("operator" + re.sub(r"\s+", "", m.group(1)))
        return f"\x02{len(ops) - 1}\x03"

    s = s.replace("(anonymous namespace)", _ANON).replace("<unnamed>", _ANON)
    return _OPERATOR.sub(keep, s), ops


def _unmask(s: str, ops: list[str]) -> str:
    s = re.sub("\x02(\\d+)\x03", lambda m: ops[int(m.group(1))], s)
    return s.replace(_ANON, "(anonymous namespace)")


def _split_top(s: str) -> tuple[str, str | None]:
    """Scan the (masked) name. Returns (head, first_template_arg): head is the text before the
    parameter list at bracket depth 0, template groups removed; first_template_arg is the text
    of the first template argument of the last name component (None when it has none)."""
    out: list[str] = []
    has_text = False                               # "".join(out).strip() != "", kept as we go
    depth = 0
    group_start = -1
    last_targ: str | None = None
    i = 0
    while i < len(s):
        c = s[i]
        if c in _OPEN:
            if depth == 0:
                if c == "(" and has_text and not out[-1:] == [":"]:
                    break                          # the parameter list: the name ends here
                group_start = i
            depth += 1
        elif c in _CLOSE:
            depth = max(depth - 1, 0)
            if depth == 0 and group_start >= 0:
                inner = s[group_start + 1:i]
                if s[group_start] == "<":
                    last_targ = inner
                elif s[group_start] in "{[":       # a lambda scope: keep it, compacted
                    out.append(s[group_start] + _without_parens(inner).replace(" ", "") + c)
                    has_text = True
                group_start = -1
        elif depth == 0:
            if c == ":" and last_targ is not None and out[-1:] != [":"]:
                last_targ = None                   # `A<T>::f`: the template belonged to A
            out.append(c)
            has_text = has_text or not c.isspace()
        i += 1
    if depth > 0 and group_start >= 0 and s[group_start] == "<":
        last_targ = s[group_start + 1:]            # truncated inside the template arguments
    return "".join(out), last_targ


def _without_parens(text: str) -> str:
    r"""`re.sub(r"\(.*\)", "", text)` in linear time (the regex is quadratic in a run of `(`
    without `)`): on each line, from its first `(` to its last `)` is removed."""
    if "(" not in text:
        return text
    lines = text.split("\n")
    for k, line in enumerate(lines):
        i, j = line.find("("), line.rfind(")")
        if 0 <= i < j:
            lines[k] = line[:i] + line[j + 1:]
    return "\n".join(lines)


def _first_arg(targ: str) -> str:
    depth = 0
    for i, c in enumerate(targ):
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
        elif c == "," and depth == 0:
            return targ[:i]
    return targ


def _demangled_identity(name: str, nested: int = 0) -> str:
    masked, ops = _mask_specials(name.strip())
    head, targ = _split_top(masked)
    # the return type and qualifiers are separated from the name by spaces at depth 0
    words = [w for w in head.split(" ") if w]
    func = words[-1] if words else ""
    if len(words) > 1 and words[-1] in ("const", "volatile", "&", "&&"):
        func = words[-2]
    func = func.strip("*&")
    ident = _unmask(func, ops)
    last = ident.split("::")[-1]
    if nested < MAX_WRAPPERS and (targ is not None and _WRAPPER.match(ident.replace("(anonymous namespace)::", "")) or
                                  (targ is not None and _WRAPPER.match(last) and ident.startswith("cutlass"))):
        inner = _demangled_identity(_unmask(_first_arg(targ), ops), nested=nested + 1)
        if inner:
            ident = f"{ident}<{inner}>"
    return ident


_SOURCE_NAME = re.compile(r"(\d+)")
_WRAPPED_NAME = re.compile(r"(?:S_|N|I|E|L|K)*(\d+)")


def _length(digits: str, start: int, s: str) -> int | None:
    """The length a source name's prefix `digits` gives, None when it is longer than what is
    left of `s` after `start` (not a mangled name; never converts more digits than that)."""
    if len(digits) > len(str(len(s))):
        return None
    n = int(digits)
    return n if n <= len(s) - start else None


def _mangled_identity(name: str) -> str:
    """`_ZN4vllm7moe_sumILi2EEEvPT_...` -> `vllm::moe_sum`; `_Z5saxpyPfS_` -> `saxpy`.
    Reads length-prefixed source names of the leading (nested) name; for a wrapper the source
    names of its template argument are appended as `<a::b::c>`. A length longer than the rest
    of the name means it is not a mangled name: the raw name is its identity."""
    s = name.strip()
    i = 2
    nested = i < len(s) and s[i] == "N"
    if nested:
        i += 1
        while i < len(s) and s[i] in "rVKL":     # cv-qualifiers of a nested name
            i += 1
    parts: list[str] = []
    while i < len(s):
        m = _SOURCE_NAME.match(s, i)
        if not m:
            break
        start = m.end()
        n = _length(m.group(1), start, s)
        if n is None:
            return s
        parts.append(s[start:start + n])
        i = start + n
        if not nested:
            break
        if s.startswith("S_", i) and parts:      # a substitution of the first namespace
            i += 2
    ident = "::".join(p for p in parts if p)
    if not ident:
        return s
    if _WRAPPER.match(parts[-1]) and s.startswith("I", i):
        inner = []
        j = i + 1
        while j < len(s) and len(inner) < 4:
            m = _WRAPPED_NAME.match(s, j)
            n = _length(m.group(1), m.end(), s) if m else None
            if n is None:
                break
            inner.append(s[m.end():m.end() + n])
            j = m.end() + n
            if s.startswith("I", j) or s.startswith("E", j):
                break
        if inner:
            ident += "<" + "::".join(inner) + ">"
    return ident


def kernel_identity(name: str | None) -> str:
    """The identity of one kernel name (see the module docstring). Never raises."""
    if not name:
        return ""
    s = name[:PARSE_CHARS].strip()
    if _RUNTIME_LABEL.match(s):
        return s
    if s.startswith("_Z"):
        return _mangled_identity(s)
    try:
        ident = _demangled_identity(s)
    except (IndexError, ValueError):            # pragma: no cover - defensive: malformed input
        ident = ""
    return ident or s.split("(")[0].split("<")[0].strip() or s


# (library, case-insensitive regex on the identity), first match wins. Specific libraries come
# before the general ones they build on (flash-attn kernels are CUTLASS templates; cuDNN ships
# its own CUTLASS copy).
LIBRARIES: list[tuple[str, str]] = [
    ("runtime", r"^\s*(\[?\s*CUDA mem(cpy|set)|mem(cpy|set)\b|__amd_rocclr_)"),
    # expert-parallel all-to-all before NCCL (nccl_ep:: would otherwise read as NCCL)
    ("DeepEP", r"(^|::)(deep_ep|dpsk::ep)::"),
    ("NCCL EP", r"(^|::)nccl_ep::"),
    ("UCCL", r"(^|::)uccl::"),
    ("MORI", r"(^|::)mori::"),
    ("MSCCL++", r"mscclpp"),
    ("NCCL/RCCL", r"^nccl|^rccl|^(\w+::)*nccl\w*kernel|^msccl"),
    ("NVSHMEM", r"nvshmem"),
    ("oneCCL", r"(^|::|_)oneccl_"),
    ("HCCL", r"hccl|^hcom_"),
    ("flash-attn", r"(^|::|<)(pytorch_)?flash(::|_fwd|_bwd|attn|_attn)|^flash_|flashattn|FlashAttn"),
    ("FlashInfer", r"flashinfer"),
    ("xformers", r"xformers|fmha_cutlass|PyTorchMemEffAttention|AttentionKernel|AttentionBackwardKernel"),
    ("TensorRT-LLM", r"tensorrt_llm|trtllm|^bmm_|^Bmm_|^fmha_v2|^fmhaSm|^xqa_kernel"),
    # TensorRT's own xmma/sm* tactic kernels end in `_trt` (`sm80_xmma_gemm_…_execute_kernel_trt`)
    ("TensorRT", r"myelin|^__myl_|nvinfer1|^trt_|genericReformat|^copyPackedKernel|tensorrt|^sm\d+_\w+_trt$"),
    ("vLLM", r"^vllm::|^_*vllm"),
    ("SGLang", r"sglang|^sgl_|^sgl::"),
    ("AITER", r"aiter"),
    ("fbgemm", r"fbgemm|^split_embedding|^batched_embedding|^bounds_check_indices|^linearize_index|"
               r"^permute_pooled_embs|^recat_copy_async|^(\w+::)*jagged_|^dense_to_jagged|^ssd_cache"),
    ("TransformerEngine", r"^transformer_engine"),
    ("DeepGEMM", r"^deep_gemm"),
    ("Apex", r"^apex::|^cuApplyLayerNorm|^cuApplyRMSNorm|^cuComputeGradInput|^cuComputePartGradGammaBeta|"
             r"^cuComputeGradGammaBeta|^multi_tensor_apply_kernel|^(\w+::)*fused_adam|^welford_kernel"),
    # xmma kernels are shared: cuDNN's carry `_cudnn*` (caught by `cudnn`), cuBLAS's `_cublas` or
    # nothing, TensorRT's `_trt` (above); an unsuffixed xmma convolution/pooling kernel is cuDNN's
    ("cuDNN", r"cudnn|^sm\d+_xmma_(?!gemm_)|^xmma_(?!gemm_)|^(volta|turing|ampere|maxwell|pascal|hopper|ada)_[a-z0-9]*scudnn|"
              r"^(\w+::)*implicit_convolve|^(\w+::)*explicit_convolve|^(\w+::)*wgrad_alg|^(\w+::)*dgrad_|"
              r"^fft2d_|^fft3d_|^im2col4d|^(\w+::)*winograd|^bn_fw|^bn_bw|^nchwToNhwc|^nhwcToNchw|^pooling_[fb]w_"),
    ("Triton", r"^triton_|^triton::"),
    ("nvFuser", r"nvfuser|^CudaCodeGen::"),
    ("CUTLASS", r"^cutlass|^cute::"),
    ("cuBLASLt", r"^nvjet|cublasLt"),
    ("cuBLAS", r"cublas|^(volta|turing|ampere|maxwell|pascal|hopper|ada|sm\d+)_[a-z0-9]*gemm|^sm\d+_xmma_gemm_|"
               r"^(\w+::)*gemv2?[NT]?_kernel|^(\w+::)*gemmSN_|^(\w+::)*gemmk1_|^(\w+::)*gemm_kernel|"
               r"^(\w+::)*splitKreduce_kernel|^(\w+::)*gemvNSP|^(\w+::)*dot_kernel|^(\w+::)*scal_kernel"),
    ("hipBLASLt/Tensile", r"^Cijk_|hipblaslt"),
    ("rocBLAS", r"rocblas"),
    ("MIOpen", r"^miopen|MIOpen|^igemm_|^naive_conv_|^gridwise_convolution|^batched_transpose|"
               r"^transpose_NCHW2CNHW|^transpose_CNHW2NCHW|^general_4d_reorder|^SubTensorOpWithScalar|^Op[1-5]dTensor|"
               r"^ConvHip|^mloPooling|^gcnAsm"),
    ("CK", r"^ck::|^ck_tile::"),
    ("MTIA", r"mtia"),
    ("CUB", r"(^|::)cub::|^cub\w*::|thrust::"),
    ("ATen", r"^at::|^at_cuda_detail::|^c10::|^torch::"),
]
_LIBRARY_RE = [(lib, re.compile(p, re.I)) for lib, p in LIBRARIES]
OTHER_LIBRARY = "other"


def kernel_library(identity: str) -> str:
    """The vendor/library of a kernel identity (`other` when none is recognised)."""
    for lib, pattern in _LIBRARY_RE:
        if pattern.search(identity or ""):
            return lib
    return OTHER_LIBRARY


def identities(names: pl.Series) -> pl.DataFrame:
    """identity and library per row of `names`, computed once per distinct name."""
    distinct = names.unique()
    ident = [kernel_identity(n) for n in distinct]
    table = pl.DataFrame({"name": distinct, "identity": pl.Series(ident, dtype=pl.String),
                          "library": pl.Series([kernel_library(i) for i in ident], dtype=pl.String)})
    rows = pl.DataFrame({"name": names})
    return rows.join(table, on="name", how="left", nulls_equal=True, maintain_order="left").select("identity", "library")
