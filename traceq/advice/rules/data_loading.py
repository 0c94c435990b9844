"""Data loading: the GPU (or the training loop) waits for the next batch.

Fires when: GPU idle time is attributed to data_loading (DataLoader spans, timer IO
regions, --data-pattern regions) — or, on a trace without GPU ops, the host waits for
data more than 5 % of step time (TensorBoard profiler rule).
Ruled out by: no data-loading idle time / data wait <= 5 % of step time; below the floor.
Estimated gain: the data-loading idle time per step (CPU-only: the data wait per step).
The advice follows the evidence: num_workers=0 (a single-process DataLoader) gets worker
processes first, a loader with workers more of them with prefetching; pin_memory only
where copies from pageable host memory are in the trace.
"""
from __future__ import annotations

from ...lazy import polars as pl

from ..stall_advice import DATA_WAIT_ADVICE_PCT, NEUTRAL_DATA_ADVICE
from ..base import Evidence, Finding
from .stall_facts import cause_row, idle_text, ledger_ns, ledger_text


def data_loading(scope, ev: Evidence, stalls) -> Finding | None:
    loop = "training" if ev.training else "main"
    workers = (f"the DataLoader runs in the {loop} process (num_workers=0): set num_workers (e.g. 4-8 per GPU)"
               if stalls.single_process_loader else
               "raise DataLoader num_workers, with prefetch_factor and persistent_workers=True")
    pageable = ev.ops.filter((pl.col("kind") == "memcpy")
                             & ((pl.col("src_kind") == "Pageable") | (pl.col("dst_kind") == "Pageable")))["n"].sum()
    pin = "; pin_memory=True with .to(device, non_blocking=True) (the batches are copied from pageable memory)" \
        if pageable else ""
    advice = ev.said(f"{workers}{pin}; cache or GPU-decode samples when per-sample loading is the slow part",
                     NEUTRAL_DATA_ADVICE)
    row = cause_row(stalls, "data_loading")
    if row is not None and row["idle_ns"]:
        return Finding("dataloader", "data_loading", idle_text(row, ev, "loading data"),
                       row["idle_ns"] / 1e6, ev.per_step_ms(row["idle_ns"]), advice)
    ns = ledger_ns(stalls, "data_ns")
    if ns:   # none in the stall gaps: the ledger's (a data wait before the step's first GPU op, ...)
        return Finding("dataloader", "data_loading", ledger_text(stalls, ns, ev, "loading data"),
                       ns / 1e6, ev.per_step_ms(ns), advice)
    pct = stalls.data_wait_pct()
    if stalls.causes.height == 0 and pct is not None and pct > DATA_WAIT_ADVICE_PCT:
        st = stalls.steps
        ns = int(st["data_wait_ns"].sum())
        return Finding("dataloader", "data_loading",
                       f"{stalls.wait_words} {ns / 1e6:,.2f} ms = {pct:.1f} % of step time (> {DATA_WAIT_ADVICE_PCT:g} %) "
                       f"over {st.height} steps, {ns / 1e6 / max(st.height, 1):.2f} ms/step",
                       0.0, ns / 1e6 / max(st.height, 1), advice)
    return None
