"""Convolutions (N-d, groups, stride, padding, dilation, transposed): flop and minimal traffic.

Forward flop = 2 · output elements · C_in/groups · kernel volume (each output element is a dot
product over its group's input channels and the kernel window); transposed: the same with the
input and output swapped, 2 · input elements · C_out/groups · kernel volume. The bias add is
not counted as flop (TraceLens' CONV model neither: its convolution 128×3×224×224 ⊛ 768×3×16×16
stride 16 is 29.60 GFLOP). Output size per spatial dim:
  ⌊(in + 2·pad − dil·(k − 1) − 1) / stride⌋ + 1,   transposed: (in − 1)·stride − 2·pad +
  dil·(k − 1) + output_padding + 1 (PyTorch's Conv/ConvTranspose docs).

Backward (aten::convolution_backward, output_mask [input, weight, bias]): the data gradient and
the weight gradient each cost the forward's flop; the bias gradient one add per grad_output
element (TraceLens' CONV.flops_bwd_func likewise).

Bytes: forward input, weight and bias read once, output written once; TraceLens leaves the
bias out (a C_out-element difference). Backward: grad_output read; weight read and grad_input
written when the data gradient is asked; input read and grad_weight written when the weight
gradient is; grad_bias written when the bias gradient is.
"""
from __future__ import annotations

from math import prod

from .base import Args, OpCost, total

# positions: (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
LAYOUTS = {
    "convolution": (0, 1, 2, 3, 4, 5, 6, 7, 8),          # aten::convolution
    "convnd": (0, 1, 2, 3, 4, 5, None, None, 6),         # aten::conv{1,2,3}d
    "conv_transpose": (0, 1, 2, 3, 4, 7, True, 5, 6),    # aten::conv_transpose{1,2,3}d
}


def geometry(a: Args, x: list[int] | None, w: list[int] | None, pos: tuple) -> dict | None:
    """Shapes and hyper-parameters of one convolution; None when they do not fit."""
    if x is None or w is None or len(w) < 3:
        return None
    nd = len(w) - 2
    if len(x) == nd + 1:
        x = [1] + x                                       # an unbatched input
    if len(x) != nd + 2:
        return None
    stride = a.ints(pos[3], nd) if pos[3] is not None else [1] * nd
    padding = a.ints(pos[4], nd) if pos[4] is not None else [0] * nd
    dilation = a.ints(pos[5], nd) if pos[5] is not None else [1] * nd
    transposed = pos[6] if isinstance(pos[6], bool) else (
        a.flag(pos[6]) if pos[6] is not None else False)
    out_pad = a.ints(pos[7], nd) if pos[7] is not None and a.value(pos[7]) is not None else [0] * nd
    groups = a.value(pos[8]) if pos[8] is not None else 1
    groups = 1 if groups is None else groups
    if None in (stride, padding, dilation, out_pad) or not isinstance(groups, int) or groups < 1:
        return None
    if min(stride) < 1 or min(dilation) < 1:
        return None
    n, c_in, k = x[0], x[1], w[2:]
    c_out = w[1] * groups if transposed else w[0]
    if (w[0] if transposed else w[1] * groups) != c_in or c_out % groups:
        return None
    if transposed:
        sp = [(i - 1) * s - 2 * p + d * (kk - 1) + op + 1
              for i, s, p, d, kk, op in zip(x[2:], stride, padding, dilation, k, out_pad)]
    else:
        sp = [(i + 2 * p - d * (kk - 1) - 1) // s + 1
              for i, s, p, d, kk in zip(x[2:], stride, padding, dilation, k)]
    if min(sp) < 0:
        return None
    y = [n, c_out] + sp
    flop = 2 * prod(x) * (c_out // groups) * prod(k) if transposed else \
        2 * prod(y) * (c_in // groups) * prod(k)
    return {"x": x, "w": w, "y": y, "flop": flop}


def forward(a: Args, layout: str) -> OpCost | None:
    pos = LAYOUTS[layout]
    g = geometry(a, a.shape(pos[0]), a.shape(pos[1]), pos)
    if g is None:
        return None
    size = a.size(pos[0])
    out = None if size is None else prod(g["y"]) * size
    return OpCost("conv", g["flop"], total(a.read(pos[0]), a.read(pos[1]), a.read(pos[2]), out),
                  a.dtype(pos[0]), "matrix")


def backward(a: Args) -> OpCost | None:
    """convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
    transposed, output_padding, groups, output_mask)."""
    g = geometry(a, a.shape(1), a.shape(2), (1, 2, None, 4, 5, 6, 7, 8, 9))
    dy = a.shape(0)
    if g is None or dy is None or prod(dy) != prod(g["y"]):
        return None
    mask = a.value(10)
    if not (isinstance(mask, (list, tuple)) and len(mask) == 3):
        mask = [True, True, a.value(3) is not None]
    size = a.size(1)
    each = (lambda n: None if size is None else n * size)
    flop, parts = 0, [a.read(0)]
    if mask[0]:
        flop += g["flop"]
        parts += [a.read(2), each(prod(g["x"]))]
    if mask[1]:
        flop += g["flop"]
        parts += [a.read(1), each(prod(g["w"]))]
    if mask[2]:
        flop += prod(dy)
        parts.append(each(g["y"][1]))
    return OpCost("conv", flop, total(*parts), a.dtype(1), "matrix")
