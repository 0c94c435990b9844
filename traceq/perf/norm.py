"""Normalizations (layer, RMS, batch, group, instance; forward and backward).

Layouts in ops.toml name each positional role: `x` the input (its shape is the op's n
elements), `g` grad_output (read), `w`/`b` weight and bias (read), `s` saved statistics (read),
`rs` running statistics (read; also written by a training forward), `r` a residual added
before the norm (read), `o` an output buffer passed in (written), `ro` a residual output
(written), `xio`/`rio` an input/residual updated in place (read and written); a forward without `o` writes a new tensor of x's shape.

Flop per element (n = elements of x), TraceLens' Normalization model (perf_model.py) rounded
to its per-element terms (its per-channel terms, ≤ 6·C, are left out):
  mean/variance norm forward: 5 (3 for the statistics, 2 for normalize·scale+shift);
  batch norm in eval (running statistics): 2;  RMS norm forward: 4 (square, sum, scale, weight);
  a fused residual add: +1; mean/variance backward: 9; RMS backward: 8, +2 with grad_weight.
Bytes: minimal traffic, every role read or written once; a backward writes grad_input when
output_mask[0] (always, for an op without a mask) and grad_weight/grad_bias (weight-sized)
as the mask asks. TraceLens instead counts 2–6 channel-sized tensors whether present or not
(batch norm forward: 1.00037 vs our 1.00000 MiB) and, for miopen/cudnn batch-norm backward,
leaves out grad_input; see docs/perf_model.md.
"""
from __future__ import annotations

from math import prod

from .base import Args, OpCost, total

FLOP_PER_ELEMENT = {"meanvar": 5, "rms": 4, "meanvar_bwd": 9, "rms_bwd": 8}


def norm(a: Args, layout: str, kind: str, training: int | None = None,
         mask: int | None = None) -> OpCost | None:
    roles = [r.strip() for r in layout.split(",")]
    pos = {r: i for i, r in enumerate(roles)}
    xi = pos.get("x", pos.get("xio"))
    if xi is None or not a.has(xi):
        return None
    x = a.shape(xi)
    n = prod(x)
    size = a.size(xi)
    backward = kind.endswith("_bwd")
    is_training = a.flag(training, True) if training is not None else True
    flop = FLOP_PER_ELEMENT[kind] * n
    if kind == "meanvar" and not is_training:
        flop = 2 * n
    flop += n * sum(1 for r in roles if r in ("r", "rio"))
    reads = [a.read(i) for i, r in enumerate(roles)
             if r in ("x", "xio", "g", "w", "b", "s", "rs", "r", "rio")]
    writes = [a.read(i) for i, r in enumerate(roles) if r in ("o", "ro", "xio", "rio")]
    if is_training and not backward:
        writes += [a.read(i) for i, r in enumerate(roles) if r == "rs"]
    if backward:
        m = a.value(mask) if mask is not None else None
        m = list(m) if isinstance(m, (list, tuple)) and len(m) >= 2 else [True, True, True]
        w_elems = prod(a.shape(pos["w"])) if "w" in pos and a.has(pos["w"]) else 0
        if kind == "rms_bwd" and m[1] and w_elems:
            flop += 2 * n
        writes.append(None if size is None else (n * int(bool(m[0])) + w_elems * sum(
            bool(v) for v in m[1:3])) * size)
    elif "o" not in pos and "xio" not in pos:
        writes.append(None if size is None else n * size)
    return OpCost("norm", flop, total(*reads, *writes), a.dtype(xi), "vector")
