"""Kernel categories: one ordered rule table (DESIGN §4.2). First matching rule wins.

A rule matches on the op kind and/or a case-insensitive regular expression on the name.
Users extend it by putting rules in front (`TRACEQ_CATEGORIES` = a TOML file with
`[[rule]] category = "..." pattern = "..."` entries, see README); categories are assigned
at ingest, per distinct name, with vectorised regex matching.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import polars as pl


@dataclass(frozen=True)
class Rule:
    category: str
    pattern: str | None = None      # regex on the name (case-insensitive)
    kinds: tuple[str, ...] = ()     # op kinds this rule applies to (empty = any)


RULES: list[Rule] = [
    Rule("sync", kinds=("sync",)),
    Rule("communication", r"nccl|rccl|hccl|c10d::|allreduce|all_reduce|allgather|reducescatter|alltoall"),
    Rule("memcpy", kinds=("memcpy",)),
    Rule("memset", kinds=("memset",)),
    Rule("memset", r"fillfunctor|fill_kernel|zero_kernel|zeros_kernel|memset"),
    Rule("transpose", r"nchwtonhwc|nhwctonchw|transpose|permute|cutensor.*(copy|perm)"),
    Rule("conv", r"conv|scudnn|winograd|fft2d|fft_|dgrad|wgrad|implicit_convolve|implicit_gemm|cudnn::cnn"),
    Rule("gemm", r"gemm|cutlass|cublas|matmul|nvjet|triton_mm|_mm_|\bgemv|sm\d+_xmma"),
    Rule("normalization", r"norm|bn_fw|bn_bw|batch_norm|layer_norm|welford|rms"),
    Rule("attention", r"flash|fmha|attention|attn|sdpa|mha_"),
    Rule("optimizer", r"multi_tensor_apply|adam|sgd|\blamb\b|lamb_|adagrad|optimizer|_foreach|fused_.*step"),
    Rule("elementwise", r"elementwise|pointwise|triton_poi|functor|relu|gelu|silu|sigmoid|tanh|activation|dropout|copy_kernel|cast|index_|scatter|gather"),
    Rule("reduce", r"reduce|reduction|triton_red|triton_per|softmax|sum_kernel|argmax|max_kernel|min_kernel|mean_kernel|cross_entropy|nll_loss"),
]

DEFAULT_CATEGORY = "other"
CATEGORIES = ["communication", "memcpy", "memset", "transpose", "gemm", "conv", "normalization",
              "attention", "optimizer", "elementwise", "reduce", "sync", "other"]

# Categories that usually mean avoidable work, with what to do about them.
ADVICE: dict[str, str] = {
    "transpose": "layout transposes: train in channels_last (model.to(memory_format=torch.channels_last)) with AMP so cuDNN needs no NCHW<->NHWC conversion",
    "memset": "memsets/fills: call optimizer.zero_grad(set_to_none=True) (default since PyTorch 2.0) instead of zero-filling gradients",
    "optimizer": "many tiny optimizer kernels: use a fused or foreach optimizer (torch.optim.AdamW(..., fused=True) / foreach=True)",
    "memcpy": "pageable host copies: pin host memory (DataLoader(pin_memory=True), tensor.pin_memory()) and use non_blocking=True",
}


def user_rules() -> list[Rule]:
    """Rules from the TOML file named by TRACEQ_CATEGORIES (tried before the built-in ones)."""
    path = os.environ.get("TRACEQ_CATEGORIES")
    if not path:
        return []
    import tomllib

    from .errors import TraceqError

    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise TraceqError(f"cannot read category rules ({exc})", path) from None
    rules = []
    for r in doc.get("rule", []):
        if "category" not in r or not ("pattern" in r or "kinds" in r):
            raise TraceqError("each [[rule]] needs `category` and `pattern` or `kinds`", path)
        rules.append(Rule(r["category"], r.get("pattern"), tuple(r.get("kinds", ()))))
    return rules


def categorize(names: pl.Series, kinds: pl.Series, rules: list[Rule] | None = None) -> pl.Series:
    """Category per (name, kind) row. Rules are evaluated once per distinct pair (a few
    hundred in a real trace), then joined back to the rows."""
    import re

    rules = user_rules() + RULES if rules is None else rules
    compiled = [(r.category, re.compile(r.pattern, re.I) if r.pattern else None, r.kinds) for r in rules]
    rows = pl.DataFrame({"name": names, "kind": kinds})
    pairs = rows.unique()

    def first_match(name: str | None, kind: str | None) -> str:
        for category, pattern, kinds_ in compiled:
            if kinds_ and kind not in kinds_:
                continue
            if pattern is not None and not pattern.search(name or ""):
                continue
            return category
        return DEFAULT_CATEGORY

    cats = [first_match(n, k) for n, k in pairs.iter_rows()]
    pairs = pairs.with_columns(category=pl.Series(cats, dtype=pl.String))
    return rows.join(pairs, on=["name", "kind"], how="left", nulls_equal=True, maintain_order="left")["category"]
