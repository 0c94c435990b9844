"""Data-loading stalls and other GPU starvation (DESIGN §4.4; SQL in queries/stalls*.sql).

`stalls(store, ...)` returns a `Stalls` result with four tables:
  causes  GPU idle time in gaps >= min gap, by what the host was doing, in the fixed
          vocabulary data_loading, communication, synchronization, blocking_copy,
          memory_management, launch_overhead, host_compute, unattributed (queries/stalls.sql)
  steps   per step: data wait, GPU idle while waiting, shares of step time (stalls_steps.sql)
  gaps    every gap with its time split by cause (stalls_gaps.sql)
  launch  launch statistics per rank: launches, CPU launch time, launch delay, short
          kernels, CUDA-graph launches (launch_stats.sql)
plus `headline()` and `advice()` (the TensorBoard profiler's 5 % DataLoader rule, A3.4).
"""
from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from .. import queries
from .scope import Scope, check_regex, open_scope

DEFAULT_MIN_GAP_US = 50.0
# Advice when the host waits for data for more than this share of step time (TB plugin: 5 %).
DATA_WAIT_ADVICE_PCT = 5.0


@dataclass
class Stalls:
    causes: pl.DataFrame
    steps: pl.DataFrame
    gaps: pl.DataFrame
    min_gap_us: float
    data_pattern: str | None = None
    single_process_loader: bool = False   # a DataLoader with num_workers=0 was seen
    launch: pl.DataFrame | None = None    # launch statistics per rank (launch_stats.sql)
    pytorch: bool = False                 # PyTorch evidence (framework.sql): advice may name PyTorch APIs
    # the host calls the stall rules cite, counted per rank and summed by a map over ranks
    # (traceq.analysis.per_rank): SQL condition -> calls per name; None: the rules query the scope
    host_calls: dict | None = None

    # ------------------------------------------------------------------ derived numbers
    def data_wait_pct(self) -> float | None:
        """Host data wait as a share of all step time, % (None without steps)."""
        total = self.steps["step_ns"].sum() if self.steps.height else 0
        if not total:
            return None
        return 100.0 * self.steps["data_wait_ns"].sum() / total

    def queued_ns(self, column: str) -> int:
        """Gap time of `column` (stalls_gaps.sql: host_ns, launch_ns, gap_ns, ...) in gaps whose
        next GPU op was already launched when the gap began (`queued`): there the GPU waited on
        something other than the host."""
        g = self.gaps
        if g.height == 0 or "queued" not in g.columns:
            return 0
        return int(g.filter(pl.col("queued").fill_null(False))[column].sum())

    def queued_gaps(self) -> int:
        g = self.gaps
        return int(g["queued"].fill_null(False).sum()) if g.height and "queued" in g.columns else 0

    @property
    def wait_words(self) -> str:
        """What the host's data wait is called: "DataLoader wait" in a PyTorch program, else
        "data wait" (timer IO or --data-pattern regions of any program)."""
        return "DataLoader wait" if self.pytorch else "data wait"

    def data_bound(self) -> bool:
        pct = self.data_wait_pct()
        return pct is not None and pct > DATA_WAIT_ADVICE_PCT


def _check_pattern(con, pattern: str | None) -> None:
    if pattern is not None:
        check_regex(con, "--data-pattern", pattern)


def check_stalls_args(scope: Scope, min_gap_us: float, data_pattern: str | None) -> str | None:
    """Fail on a bad --min-gap-us or --data-pattern before any work; the pattern (None if empty)."""
    from ..errors import TraceqError

    if min_gap_us < 0:
        raise TraceqError(f"--min-gap-us {min_gap_us}: must be >= 0")
    data_pattern = data_pattern or None
    _check_pattern(scope.con, data_pattern)
    return data_pattern


def _stage(scope: Scope, min_gap_us: float, data_pattern: str | None, gaps: bool = True) -> str | None:
    """The temp tables the stall queries read: st_busy, st_data and st_gaps (with `gaps`
    False, st_gaps has its columns and no rows: DuckDB plans `WHERE false` as an empty result).
    Returns the data pattern as checked (None if empty)."""
    data_pattern = check_stalls_args(scope, min_gap_us, data_pattern)
    queries.install_macros(scope.con)
    scope.ensure_steps()
    scope.ensure_links(empty=not gaps)
    params = {"min_gap_ns": int(round(min_gap_us * 1000)), "data_pattern": data_pattern}
    for table, sql in (("st_busy", "stalls_busy"), ("st_data", "stalls_data"), ("st_gaps", "stalls_gaps")):
        sql = queries.load(sql) if gaps or table != "st_gaps" else f"SELECT * FROM ({queries.load(sql)}) WHERE false"
        scope.df(f"CREATE OR REPLACE TEMP TABLE {table} AS " + sql, params)
    return data_pattern


def stalls_scoped(scope: Scope, min_gap_us: float = DEFAULT_MIN_GAP_US, data_pattern: str | None = None) -> Stalls:
    data_pattern = _stage(scope, min_gap_us, data_pattern)
    causes = scope.df(queries.load("stalls"))
    steps = scope.df(queries.load("stalls_steps"))
    gaps = scope.df("SELECT * FROM st_gaps ORDER BY rank, device, start_ns")
    single = bool(scope.df(
        "SELECT count(*) AS n FROM regions r JOIN scope_window w ON w.rank = r.rank "
        "WHERE r.run = $run AND r.source = 'dataloader' AND r.name LIKE '%SingleProcessDataLoaderIter%'")["n"][0])
    launch = scope.df(queries.load("launch_stats"))
    pytorch = bool(scope.df(queries.load("framework"))["pytorch"][0])
    return Stalls(causes, steps, gaps, min_gap_us, data_pattern, single, launch, pytorch)


def data_steps(scope: Scope, data_pattern: str | None = None) -> pl.DataFrame:
    """The scope's steps with their host data wait: stalls_steps.sql's rank, step, step_source,
    start_ns, step_ns, data_wait_ns and data_wait_pct, as `stalls_scoped(scope).steps` has
    them, without the GPU gaps and their causes (the GPU idle columns are left out): what
    compare, model and check need of every run (a fifth of the time per run)."""
    _stage(scope, DEFAULT_MIN_GAP_US, data_pattern, gaps=False)
    steps = scope.df(queries.load("stalls_steps"))
    return steps.select("rank", "step", "step_source", "start_ns", "step_ns", "data_wait_ns", "data_wait_pct")


def stalls(store=None, run: str | None = None, rank: int | None = None, steps: str | None = None,
           min_gap_us: float = DEFAULT_MIN_GAP_US, data_pattern: str | None = None, *,
        step_pattern: str | None = None, skip_first: int = 0) -> Stalls:
    """GPU idle gaps >= `min_gap_us` attributed to what the host was doing (`.causes`, the
    fixed vocabulary of queries/stalls_gaps.sql), per-step data wait and GPU idle while
    waiting (`.steps`), every gap (`.gaps`) and launch statistics (`.launch`). `data_pattern`: regex of region names that
    also count as data loading."""
    return stalls_scoped(open_scope(store, run, rank, steps, step_pattern, skip_first), min_gap_us, data_pattern)


# ---------------------------------------------------------------------- text
def _ms(ns) -> str:
    return f"{ns / 1e6:,.1f} ms"


def headline(res: Stalls, scope: Scope) -> str:
    """One line on data loading: the host's data-wait share of step time and the verdict,
    e.g. "DataLoader wait 41.3 % of step time (7 steps, mean step 52.1 ms) — data-bound"."""
    where = f"run {scope.run}{'' if scope.rank is None else f' rank {scope.rank}'}"
    st = res.steps
    pct = res.data_wait_pct()
    if pct is None:
        return f"{where}: no steps with a duration in scope"
    if set(st["step_source"]) == {"trace"} and not st["data_wait_ns"].sum():
        return (f"{where}: no ProfilerStep, timer BATCH or DataLoader regions, and no data loading seen "
                "(--data-pattern marks your own regions as data loading)")
    timer_only = set(st["step_source"]) == {"BATCH"}
    what, of, unit = ("IO", "BATCH time", "batch") if timer_only else (res.wait_words, "step time", "step")
    verdict = "data-bound" if pct > DATA_WAIT_ADVICE_PCT else "not data-bound"
    line = (f"{where}: {what} {pct:.1f} % of {of} ({st.height} {unit}{'es' if timer_only else 's'}, "
            f"mean {unit} {_ms(st['step_ns'].mean())}) — {verdict}")
    idle_wait = st["gpu_idle_waiting_ns"].drop_nulls()
    if len(idle_wait):
        line += f"; GPU idle while loading data {100 * idle_wait.sum() / st['step_ns'].sum():.1f} % of {of}"
    elif st.height:
        line += " (CPU-only: no GPU ops)"
    return line


def causes_headline(res: Stalls) -> str:
    """One line on GPU idle time: share of the GPU span in gaps >= min gap, and the main cause."""
    c = res.causes
    if c.height == 0:
        return "no GPU ops in scope (CPU-only trace): GPU idle gaps not analysed"
    if res.gaps.height == 0:
        return f"no GPU idle gaps >= {res.min_gap_us:g} µs"
    top = c.sort("idle_ns", descending=True).row(0, named=True)
    return (f"GPU idle {c['idle_pct'].sum():.1f} % of the GPU span in {res.gaps.height:,} gaps >= "
            f"{res.min_gap_us:g} µs ({_ms(c['idle_ns'].sum())}); largest cause: "
            f"{top['cause'].replace('_', ' ')} ({top['share_pct']:.0f} % of that idle time)")


def advice(res: Stalls) -> list[str]:
    """Advice lines when data wait exceeds 5 % of step time (TB profiler rule), and for
    the other causes when they dominate GPU idle time."""
    out = []
    if res.data_bound():
        head = f"advice [data loading, {res.data_wait_pct():.1f} % of step time > {DATA_WAIT_ADVICE_PCT:g} %]:"
        out += _torch_data_advice(head, res.single_process_loader) if res.pytorch else [f"{head} {NEUTRAL_DATA_ADVICE}"]
    c = res.causes
    if c.height and c["idle_pct"].sum() > 10:
        top = c.sort("idle_ns", descending=True).row(0, named=True)
        said = CAUSE_ADVICE if res.pytorch else NEUTRAL_CAUSE_ADVICE
        if top["cause"] in said:
            out.append(f"advice [{top['cause'].replace('_', ' ')}, {top['share_pct']:.0f} % of GPU idle time]: "
                       + said[top["cause"]])
    return out


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
    "launch_overhead": "the host spends the gaps issuing kernels: fewer, larger kernels (torch.compile, fused/foreach "
                       "optimizers), CUDA graphs, or a larger batch",
    "host_compute": "the host computes (framework/Python) while the GPU idles: CPU-bound; torch.compile, CUDA graphs, "
                    "larger batches, less per-step Python",
    "communication": "the host waits in collectives: overlap communication with compute (DDP bucketing), fewer/larger "
                     "collectives",
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
}

# Data-loading advice where the scope shows no PyTorch (timer IO regions, --data-pattern
# regions): the fixes every input pipeline has, with each framework's knob as an example.
NEUTRAL_DATA_ADVICE = ("prepare input ahead of the GPU: load and decode in parallel workers or threads and prefetch "
                       "the next batches (PyTorch DataLoader num_workers, tf.data prefetch and num_parallel_calls, "
                       "DALI), read into page-locked buffers and copy asynchronously, cache or GPU-decode samples when "
                       "per-sample loading is the slow part")
