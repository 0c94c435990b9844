"""Matrix multiplications: flop = 2·B·M·N·K (+ B·M·N for a bias or addmm's C input, one add
per output element: TraceLens' GEMM.flops_func(M, N, K, bias) counts it, and its addmm rows
— 788×768×768 + bias = 0.930167808 GFLOP — are matched exactly); bytes = each operand read once (its distinct
elements), the output written once (B·M·N), a bias / addmm's `beta·C` input read once.

Sources: ATen native_functions.yaml signatures (mm(self, mat2), addmm(self, mat1, mat2, beta,
alpha), bmm, baddbmm, matmul, linear(input, weight[N, K], bias), _scaled_mm(self, mat2,
scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum)); the convention is
TraceLens' GEMM model (perf_model.py, class GEMM).
Vendor GEMMs are read by a layout
declared in ops.toml; when the operand shapes do not give M, N and K unambiguously the op is
not modelled.
"""
from __future__ import annotations

from math import prod

from .base import Args, OpCost, broadcast, times, total
from .dtypes import compute_key, element_bytes, scalar_type


def cost(flop: int, bytes_: int | None, dtype: str | None) -> OpCost:
    return OpCost("gemm", flop, bytes_, dtype, "matrix")


def plain(a: Args, ia: int, ib: int, extra: tuple[int, ...] = ()) -> OpCost | None:
    """A [.., M, K] @ B [.., K, N] with equal batch dims (mm, bmm, addmm, baddbmm)."""
    x, y = a.shape(ia), a.shape(ib)
    if x is None or y is None or len(x) != len(y) or len(x) not in (2, 3):
        return None
    if x[:-2] != y[:-2] or x[-1] != y[-2]:
        return None
    b, m, k, n = prod(x[:-2]), x[-2], x[-1], y[-1]
    out = times(b * m * n, a.size(ia))
    bias = b * m * n if any(a.has(i) for i in extra) else 0
    return cost(2 * b * m * n * k + bias, total(a.read(ia), a.read(ib), out, *(a.read(i) for i in extra)),
                a.dtype(ia))


def mm(a: Args) -> OpCost | None:
    return plain(a, 0, 1)


def addmm(a: Args) -> OpCost | None:
    return plain(a, 1, 2, extra=(0,))


def matmul(a: Args) -> OpCost | None:
    """Any rank: a 1-D operand is a row (left) or a column (right); batch dims broadcast."""
    x, y = a.shape(0), a.shape(1)
    if not x or not y:
        return None
    xm = [1] + x if len(x) == 1 else x
    ym = y + [1] if len(y) == 1 else y
    if xm[-1] != ym[-2]:
        return None
    batch = broadcast([xm[:-2], ym[:-2]])
    if batch is None:
        return None
    b, m, k, n = prod(batch), xm[-2], xm[-1], ym[-1]
    return cost(2 * b * m * n * k, total(a.read(0), a.read(1), times(b * m * n, a.size(0))),
                a.dtype(0))


def linear(a: Args) -> OpCost | None:
    """input [..., K] · weight[N, K]ᵀ (+ bias[N])."""
    x, w = a.shape(0), a.shape(1)
    if not x or w is None or len(w) != 2 or x[-1] != w[1]:
        return None
    m, k, n = prod(x[:-1]), x[-1], w[0]
    bias = m * n if a.has(2) else 0
    return cost(2 * m * n * k + bias, total(a.read(0), a.read(1), a.read(2), times(m * n, a.size(0))),
                a.dtype(0))


def scaled_mm(a: Args) -> OpCost | None:
    """fp8 GEMM: operands and scales read, bias read, output in out_dtype (default: mat1's)."""
    x, y = a.shape(0), a.shape(1)
    if x is None or y is None or len(x) != 2 or len(y) != 2 or x[1] != y[0]:
        return None
    m, k, n = x[0], x[1], y[1]
    out_type = scalar_type(a.value(6)) or a.type(0)
    out = times(m * n, element_bytes(out_type) if a.types is not None else None)
    reads = (a.read(i) for i in range(6) if i != 5)   # self, mat2, scale_a, scale_b, bias
    return cost(2 * m * n * k + (m * n if a.has(4) else 0), total(*reads, out), a.dtype(0))


def vendor(a: Args, layout: str) -> OpCost | None:
    """A GEMM whose positional roles ops.toml declares: `a` [M, K], `w_nk` [N, K] (a weight in
    linear's layout), `b_kn` [K, N], `out` [M, N] (written, not read), `bias` [N], `read` (a
    tensor read once: a scale); `auto` for the first two tensors resolved by their shapes."""
    roles = [r.strip() for r in layout.split(",")]
    if roles == ["auto"]:
        return auto(a)
    pos = {r: i for i, r in enumerate(roles)}
    if "a" not in pos or ("w_nk" not in pos and "b_kn" not in pos):
        return None
    x = a.shape(pos["a"])
    if x is None or len(x) < 2:
        return None
    m, k = prod(x[:-1]), x[-1]
    if "w_nk" in pos:
        w = a.shape(pos["w_nk"])
        ok = w is not None and len(w) == 2 and w[1] == k
        n = w[0] if ok else 0
    else:
        w = a.shape(pos["b_kn"])
        ok = w is not None and len(w) == 2 and w[0] == k
        n = w[1] if ok else 0
    if not ok:
        return None
    reads = [a.read(i) for i, r in enumerate(roles) if r in ("a", "w_nk", "b_kn", "bias", "read")]
    if "out" in pos and a.has(pos["out"]):
        out = times(m * n, a.size(pos["out"]))
    else:
        out = times(m * n, a.size(pos["a"]) if compute_key(a.type(pos["a"])) != "fp8" else None)
    bias = m * n if "bias" in pos and a.has(pos["bias"]) else 0
    return cost(2 * m * n * k + bias, total(*reads, out), a.dtype(pos["a"]))


def auto(a: Args) -> OpCost | None:
    """The first two tensors are A [M, K] and B, B being [N, K] or [K, N]; a following 1-D
    tensor of N elements is a bias. None when both readings fit with different N."""
    idx = [i for i in range(len(a.dims)) if a.has(i)]
    if len(idx) < 2:
        return None
    x, w = a.shape(idx[0]), a.shape(idx[1])
    if len(x) != 2 or len(w) != 2:
        return None
    k = x[1]
    nk, kn = w[1] == k, w[0] == k
    if nk and kn and w[0] != w[1] or not (nk or kn):
        return None
    n = w[0] if nk else w[1]
    roles = ["a", "w_nk" if nk else "b_kn"]
    if len(idx) > 2 and a.shape(idx[2]) == [n]:
        roles.append("bias")
    layout = [""] * (idx[len(roles) - 1] + 1)
    for r, i in zip(roles, idx):
        layout[i] = r
    return vendor(a, ",".join(layout))

