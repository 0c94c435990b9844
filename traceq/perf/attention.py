"""Attention (softmax(Q·Kᵀ)·V as one fused op): flop and minimal traffic.

Forward flop = 2·B·H_q·P·(d_qk + d_v), P = the (query, key) pairs computed: N_q·N_kv, halved
for a causal mask when N_q = N_kv (FlashAttention's benchmark convention,
Dao-AILab/flash-attention benchmarks/benchmark_flash_attention.py, and TraceLens' SDPA model:
the diagonal is not added back). A causal mask with N_q ≠ N_kv counts the unmasked area of
the N_q × N_kv rectangle: top-left aligned for PyTorch's SDPA (`is_causal`: tril of the
rectangle), bottom-right aligned for flash-attn ≥ 2.1 (its README). Softmax flop is not counted.
GQA/MQA: H_q query heads, H_kv key/value heads (flop on H_q, traffic on each tensor's heads).

Backward flop = 2.5 × forward: five GEMMs of the forward's size over two (the recomputed
Q·Kᵀ, dV, dP, dQ, dK), FlashAttention's convention (same benchmark file: `flops(..., mode)`
2.5 for "bwd"); TraceLens adds the GQA head reduction, B·N_kv·(d_qk + d_v)·(H_q/H_kv − 1),
which we leave out (< 1/N_q of the total).

Bytes: forward Q, K, V read once, O written once. Backward Q, K, V, O, dO read once and dQ,
dK, dV written once (TraceLens leaves O out; flash backward reads it for rowsum(dO∘O)); the
softmax statistics (logsumexp, B·H_q·N_q fp32) are not counted in either direction.

Layouts: "bhnd" = [B, H, N, d] (ATen SDPA), "bnhd" = [B, N, H, d] (flash-attn). The causal
flag's position is declared per op name in ops.toml.
"""
from __future__ import annotations

from .base import Args, OpCost, total

BACKWARD_FACTOR = 2.5


def dims4(shape: list[int] | None, layout: str) -> tuple[int, int, int, int] | None:
    """(B, H, N, d) of a 4-D tensor in the layout; None when it is not 4-D."""
    if shape is None or len(shape) != 4:
        return None
    b, x, y, d = shape
    return (b, x, y, d) if layout == "bhnd" else (b, y, x, d)


def pairs(nq: int, nkv: int, causal: bool, align: str) -> float:
    """(query, key) pairs computed, as the area of the unmasked part of the score matrix."""
    if not causal:
        return nq * nkv
    if nq == nkv:
        return nq * nkv / 2
    if align == "bottom_right":
        return nq * (nkv - nq) + nq * nq / 2 if nq <= nkv else nkv * nkv / 2
    return nq * nq / 2 if nq <= nkv else nkv * nkv / 2 + (nq - nkv) * nkv


def attention(a: Args, q: int, layout: str, causal: int | None, align: str = "top_left",
              grad: int | None = None, out: int | None = None) -> OpCost | None:
    """Q, K, V at positions q, q+1, q+2; `grad`/`out` (dO, O) only for a backward op."""
    sq, sk, sv = (dims4(a.shape(q + i), layout) for i in range(3))
    if sq is None or sk is None or sv is None:
        return None
    b, hq, nq, dqk = sq
    bk, hkv, nkv, dk = sk
    bv, hv, nv, dv = sv
    if not (b == bk == bv and dk == dqk and nv == nkv and hv == hkv) or hkv == 0 or hq % hkv:
        return None
    is_causal = causal is not None and a.flag(causal)
    flop = 2 * b * hq * pairs(nq, nkv, is_causal, align) * (dqk + dv)
    backward = grad is not None
    if backward:
        flop *= BACKWARD_FACTOR
    size = a.size(q)
    elems_q, elems_o = b * hq * nq * dqk, b * hq * nq * dv
    if not backward:
        written = None if size is None else elems_o * size
        bytes_ = total(a.read(q), a.read(q + 1), a.read(q + 2), written)
    else:
        grads = None if size is None else (elems_q + b * hkv * nkv * (dqk + dv)) * size
        o_read = a.read(out) if out is not None and a.has(out) else (
            None if size is None else elems_o * size)
        bytes_ = total(a.read(q), a.read(q + 1), a.read(q + 2), a.read(grad), o_read, grads)
    return OpCost("attention", round(flop), bytes_, a.dtype(q), "matrix")
