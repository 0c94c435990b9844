"""Launch overhead: the GPU waits on the host issuing kernels.

Fires when: GPU idle time is attributed to launch_overhead (the launching thread inside
CUDA/HIP API calls while the GPU waits) AND the launch statistics show launch-bound work:
many short kernels (>= 30 % under 10 µs) or a mean CPU launch time at least the mean
kernel time.
Ruled out by: no launch idle time in gaps the host was late for (launch time in gaps whose
next GPU op was already launched does not count: the GPU waited on something else); launch statistics without launch evidence (long
kernels, cheap launches); already graph-launched work (cudaGraphLaunch calls >= launches
/ 2); below the floor.
Estimated gain: the launch_overhead idle time per step.
"""
from __future__ import annotations

from ..base import Evidence, Finding
from .stall_facts import idle_text, late_row, queued_text

SHORT_KERNELS_PCT = 30.0


def launch_overhead(scope, ev: Evidence, stalls) -> Finding | None:
    row = late_row(stalls, "launch_overhead", "launch_ns")
    st = stalls.launch
    if row is None or not row["idle_ns"] or st is None or st.height == 0:
        return None
    launches = int(st["launches"].sum())
    kernels = int(st["kernels"].sum())
    graphs = int(st["graph_launches"].sum())
    short_pct = float((st["short_kernels_pct"] * st["kernels"]).sum() / max(kernels, 1))
    mean_launch = float((st["mean_launch_ns"].fill_null(0) * st["launches"]).sum() / max(launches, 1))
    mean_kernel = float((st["mean_kernel_ns"] * st["kernels"]).sum() / max(kernels, 1))
    if graphs * 2 >= max(launches, 1):
        return None
    if short_pct < SHORT_KERNELS_PCT and mean_launch < mean_kernel:
        return None
    return Finding(
        "launch_overhead", "launch_overhead",
        f"{idle_text(row, ev, 'launching')}; {launches:,} launches, mean CPU launch {mean_launch / 1e3:.1f} µs vs "
        f"mean kernel {mean_kernel / 1e3:.1f} µs, {short_pct:.0f} % of {kernels:,} kernels < 10 µs, "
        f"{graphs:,} graph launches{queued_text(row)}",
        row["idle_ns"] / 1e6, ev.per_step_ms(row["idle_ns"]),
        ev.said("cut launches: torch.compile (fuses small kernels; mode='reduce-overhead' adds CUDA graphs), "
                "CUDA graphs (torch.cuda.graphs) for static shapes"
                + (", fused/foreach optimizers" if ev.optimizer_gpu or ev.optimizers else "")
                + (", or a larger batch" if ev.training else ", or larger batches per forward (batch requests)"),
                "cut launches: fuse small kernels, capture the repeated launch sequence once in a CUDA graph and "
                "replay it (cudaStreamBeginCapture ... cudaGraphLaunch; hipGraph on ROCm), or give each kernel more "
                "work (a larger batch or problem per launch)"))
