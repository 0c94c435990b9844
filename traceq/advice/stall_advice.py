"""What to do about the stall causes: the advice lines of `traceq stalls` (the host's data
wait over 5 % of step time, the TensorBoard profiler's rule; a cause that dominates GPU idle
time) and the texts the data-loading rule shares. PyTorch APIs are named only where the trace
shows PyTorch; elsewhere the same advice is given in CUDA/HIP and framework-neutral terms."""
from __future__ import annotations

# Advice when the host waits for data for more than this share of step time (TensorBoard
# profiler plugin: 5 %).
DATA_WAIT_ADVICE_PCT = 5.0


def advice(res) -> list[str]:
    """Advice lines when data wait exceeds 5 % of step time (TB profiler rule), and for
    the other causes when they dominate GPU idle time. `res`: the stall attribution's result
    (traceq.engine.stall_attribution.Stalls; advice takes it as given, never imports it)."""
    out = []
    if res.data_bound():
        head = f"advice [data loading, {res.data_wait_pct():.1f} % of step time > {DATA_WAIT_ADVICE_PCT:g} %]:"
        out += _torch_data_advice(head, res.single_process_loader) if res.pytorch else [f"{head} {NEUTRAL_DATA_ADVICE}"]
    said = CAUSE_ADVICE if res.pytorch else NEUTRAL_CAUSE_ADVICE
    top = ledger_top(getattr(res, "ledger", None))
    if top is not None:   # the time ledger's largest idle cause decides (traceq steps)
        cause, share = top
        if cause in said:
            out.append(f"advice [{cause.replace('_', ' ')}, {share:.0f} % of GPU idle time in the time ledger]: "
                       + said[cause])
        return out
    c = res.causes
    if c.height and c["idle_pct"].sum() > 10:
        row = c.sort("idle_ns", descending=True).row(0, named=True)
        if row["cause"] in said:
            out.append(f"advice [{row['cause'].replace('_', ' ')}, {row['share_pct']:.0f} % of GPU idle time]: "
                       + said[row["cause"]])
    return out


# the time ledger's idle labels (traceq/queries/ledger.sql) in the stall vocabulary
LEDGER_CAUSE = {"data": "data_loading", "communication_wait": "communication", "sync": "synchronization",
                "blocking_copy": "blocking_copy", "memory_management": "memory_management", "warmup": "warmup",
                "launch": "launch_overhead", "host_compute": "host_compute", "unattributed": "unattributed"}
LEDGER_IDLE_ADVICE_PCT = 10.0   # GPU idle share of the step windows below which no cause gets advice


def ledger_top(t: dict | None) -> tuple[str, float] | None:
    """(the largest idle cause of the ledger's totals in the stall vocabulary, its share of the
    ledger's idle, %) when idle is over LEDGER_IDLE_ADVICE_PCT of the windows; None without a
    ledger or below that. Ties go to the earlier label (ledger.sql's precedence)."""
    if not t or not t.get("window_ns") or not t.get("idle_ns"):
        return None
    if 100.0 * t["idle_ns"] / t["window_ns"] <= LEDGER_IDLE_ADVICE_PCT:
        return None
    top = largest_idle_label(t)
    return LEDGER_CAUSE[top], 100.0 * t[top + "_ns"] / t["idle_ns"]


def largest_idle_label(t: dict) -> str:
    """The ledger label (LEDGER_CAUSE's keys, ledger.sql's idle labels in precedence order)
    with the most time in the totals `t`; ties go to the earlier label."""
    labels = list(LEDGER_CAUSE)
    return max(labels, key=lambda c: (t.get(c + "_ns", 0), -labels.index(c)))


def _torch_data_advice(head: str, single_process_loader: bool) -> list[str]:
    """The data-loading advice lines for a PyTorch program (TensorBoard profiler's rule)."""
    first = ("the DataLoader runs in the training process (num_workers=0): set num_workers (e.g. 4-8 per GPU) so "
             "batches are prepared in parallel worker processes" if single_process_loader else
             "raise DataLoader num_workers so batches are prepared in parallel worker processes")
    return [f"{head} {first}",
            "advice [data loading]: pin_memory=True (page-locked batches copy to the GPU asynchronously), "
            "and tensor.to(device, non_blocking=True)",
            "advice [data loading]: prefetch_factor (batches each worker prepares ahead) and "
            "persistent_workers=True (no worker restart every epoch)",
            "advice [data loading]: cache decoded/pre-processed samples (or decode/augment on the GPU, "
            "e.g. DALI) when per-sample loading or decoding is the slow part"]


# What to do when a stall cause dominates GPU idle time (traceq diagnose cites the evidence).
CAUSE_ADVICE = {
    "synchronization": "the host blocks on the GPU (cudaStreamSynchronize/cudaDeviceSynchronize, .item(), .cpu()): "
                       "remove per-step syncs",
    "blocking_copy": "synchronous or pageable copies: pin host memory and copy with non_blocking=True",
    "memory_management": "allocator churn (cudaMalloc/cudaFree while the GPU idles): keep the caching allocator on, "
                         "no torch.cuda.empty_cache() in the loop",
    "launch_overhead": "the host spends the gaps issuing kernels: fewer, larger kernels (torch.compile), CUDA graphs, "
                       "or more work per launch (traceq diagnose: the launch evidence and what fits this workload)",
    "host_compute": "the host computes (framework/Python) while the GPU idles: CPU-bound; torch.compile, CUDA graphs, "
                    "more work per launch, less per-step Python",
    "communication": "the host waits in collectives: overlap communication with compute (DDP bucketing), fewer/larger "
                     "collectives",
    "warmup": "one-off start-up work (module/library loading, JIT/compile, context creation, first allocations), "
              "paid once: profile steady-state steps (torch.profiler.schedule(wait=1, warmup=2, active=3), or "
              "--skip-first N steps here) before optimising launches or kernels",
}

# The same, where the scope shows no PyTorch (framework.sql: a CUDA/HIP application, a JAX,
# TensorFlow or TensorRT program, timer regions alone): CUDA/HIP calls, framework-neutral fixes.
NEUTRAL_CAUSE_ADVICE = {
    "synchronization": "the host blocks on the GPU (cudaStreamSynchronize/cudaDeviceSynchronize/cudaEventSynchronize): "
                       "synchronize only where the host needs a result, order streams with events",
    "blocking_copy": "synchronous or pageable copies: allocate host buffers page-locked (cudaMallocHost/cudaHostRegister) "
                     "and copy with cudaMemcpyAsync",
    "memory_management": "allocator churn (cudaMalloc/cudaFree while the GPU idles): allocate once outside the loop and "
                         "reuse, or use the stream-ordered pool (cudaMallocAsync)",
    "launch_overhead": "the host spends the gaps issuing kernels: fewer, larger kernels (fusion), CUDA graphs, or more "
                       "work per launch",
    "host_compute": "the host computes while the GPU idles: CPU-bound; move host work off the launching thread, more "
                    "work per launch, CUDA graphs",
    "communication": "the host waits in collectives: overlap communication with compute, fewer/larger collectives",
    "warmup": "one-off start-up work (module/library loading, JIT compilation, context creation, first allocations), "
              "paid once: profile steady-state iterations (nsys --capture-range=cudaProfilerApi or --delay, or "
              "--skip-first N steps here) before optimising launches or kernels",
}

# Data-loading advice where the scope shows no PyTorch (timer IO regions, --data-pattern
# regions): the fixes every input pipeline has, with each framework's knob as an example.
NEUTRAL_DATA_ADVICE = ("prepare input ahead of the GPU: load and decode in parallel workers or threads and prefetch "
                       "the next batches (PyTorch DataLoader num_workers, tf.data prefetch and num_parallel_calls, "
                       "DALI), read into page-locked buffers and copy asynchronously, cache or GPU-decode samples when "
                       "per-sample loading is the slow part")
