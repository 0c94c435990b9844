"""Every analysis of traceq, declared once (see traceq/registry.py for what a declaration
gives and how to add one). The CLI commands, their --help, the Python API methods
(`traceq.open_store(...).hotspots(...)`), the JSON documents and the terminal tables are all
derived from `REGISTRY`. Nothing heavy is imported here, so `traceq --help` stays fast.

The module-level functions of the first API (`traceq.analyses.hotspots(store, run=...)`,
returning plain DataFrames) stay available as lazy attributes.
"""
from __future__ import annotations

from .registry import Analysis, Column, Param

WINDOW = Param("window", str, "all",
               "all: every kernel, memcpy and memset, exact ns (traceq's definition). hta: HTA 0.5.0's window "
               "(ops launched before the last ProfilerStep), its kernel classification and its µs rounding, "
               "to reproduce HTA's numbers.", "all|hta", flags=("-w",), choices=("all", "hta"))


EXECUTOR_HELP = ("Where per-rank tasks run: local (process pool) or dask (Dask distributed; "
                 "env TRACEQ_EXECUTOR).")
SCHEDULER_HELP = ("Dask scheduler address (env DASK_SCHEDULER_ADDRESS); default: a LocalCluster "
                  "of --jobs workers.")
SCHEDULER_FILE_HELP = ("Dask scheduler file (env DASK_SCHEDULER_FILE), e.g. from dask-jobqueue or "
                       "dask-mpi.")


EXECUTOR_PARAMS = (Param("executor", str, None, EXECUTOR_HELP, "local|dask"),
                   Param("scheduler", str, None, SCHEDULER_HELP, "ADDRESS"),
                   Param("scheduler_file", str, None, SCHEDULER_FILE_HELP, "FILE"),
                   Param("jobs", int, None, "Workers for the per-rank tasks.", "N", flags=("-j",)))


WHERE = Param("where", str, None, "Label selector k=v[,k=v...] (e.g. app=cifar10,b=64).", "K=V[,K=V]")


def _sql_columns(name: str, *extra: Column) -> tuple[Column, ...]:
    from .queries import output_columns

    return (*(Column(c, m) for c, m in output_columns(name)), *extra)


_SPECS = [
    Analysis(
        name="hotspots",
        help="Kernel hotspots: time per kernel name (nsys cuda_gpu_kern_sum semantics), its category, and "
             "advice for avoidable work (layout transposes, memsets, tiny-kernel swarms, pageable copies).",
        examples=("traceq hotspots --top 10 --category transpose,memset", "traceq hotspots -f json -o hot.json"),
        compute="traceq.views:hotspots",
        params=(
            Param("top", int, 20, "Show the N longest (0 = all).", "N", flags=("-n",)),
            Param("category", str, None, "Only these categories, comma-separated (e.g. transpose,memset).",
                  "CAT[,CAT]", flags=("-c",)),
        ),
        columns=_sql_columns("hotspots", Column("advice", "what to change for avoidable work (null otherwise)"),
                             Column("avoidable", "true when advice applies")),
        sort=("total_ns descending",),
        drop_first=("stddev_ns", "min_ns", "max_ns", "median_ns", "mean_ns", "category"),
        view="traceq.views:hotspots_view",
        report="Kernel hotspots",
    ),
    Analysis(
        name="summary",
        help="Where the GPU timeline goes, per rank: idle, compute and non-compute time as % of the span from "
             "the first GPU op's start to the last one's end (HTA's temporal breakdown).\n\n"
             "idle = span − |union of all ops|; compute = |union of compute kernels|; non-compute = the rest "
             "(communication, copies, memsets). A trace without GPU ops gives no rows and says so.",
        examples=("traceq summary --window hta --format json",),
        compute="traceq.views:summary",
        params=(WINDOW, *EXECUTOR_PARAMS),
        per_rank=True,
        columns=_sql_columns("summary"),
        sort=("rank",),
        drop_first=("busy_ns", "ops", "non_compute_ns", "compute_ns", "idle_ns", "span_ns"),
        report="Where GPU time goes",
    ),
    Analysis(
        name="overlap",
        help="Communication/compute overlap: communication kernel time, the part of it hidden under compute "
             "kernels, the exposed rest, overlap % = 100·overlapped/comm (HTA's definition) and exposed "
             "communication as % of step time; across ranks min/median/max and the slowest rank.",
        examples=("traceq overlap --by step --window hta",),
        compute="traceq.views:overlap",
        params=(WINDOW, Param("by", str, "rank", "rank: one row per rank; step: one row per rank and ProfilerStep "
                              "(ops grouped by the step that launched them); across: one row summarising the ranks "
                              "(min/median/max, straggler hints).", "rank|step|across",
                              choices=("rank", "step", "across")), *EXECUTOR_PARAMS),
        per_rank=True,
        columns=_sql_columns("overlap"),
        sort=("rank", "step"),
        drop_first=("compute_ns", "comm_ops", "steps", "step_ns", "overlapped_ns"),
        view="traceq.views:overlap_view",
        report="Communication / compute overlap",
    ),
    Analysis(
        name="breakdown",
        help="Per-region CPU time versus the GPU work launched inside it (NVTX ranges, record_function "
             "annotations, ProfilerSteps, DataLoader calls, timer keys).\n\n"
             "A GPU op counts for every region on the launching thread that fully contains its launch call "
             "(nsys nvtx_gpu_proj rule). gpu_proj = last op end - first op start per instance; gpu_busy = union "
             "of the ops; gpu_busy_per_cpu < 1: the GPU works less than the host spends in the region. Kineto "
             "GPU-side annotation spans show as source gpu_annotation. --by timer shows CPU vs GPU time per "
             "timer key with min/mean/median/max/stdev.",
        examples=("traceq breakdown --by nvtx --top 20",
                  "traceq breakdown --by annotation --steps 3:8 --format csv -o regions.csv",
                  "traceq breakdown --by timer"),
        compute="traceq.views:breakdown",
        params=(Param("by", str, "all", "Region kind: all, nvtx, annotation, step, dataloader or timer.",
                      "KIND", choices=("all", "nvtx", "annotation", "step", "dataloader", "timer")),
                Param("top", int, 30, "Show the N regions with the most CPU time (0 = all).", "N", flags=("-n",)),
                *EXECUTOR_PARAMS),
        per_rank=True,
        columns=_sql_columns("breakdown"),
        sort=("cpu_total_ns descending",),
        drop_first=("unfinished", "gpu_busy_per_cpu", "cpu_mean_ns", "gpu_proj_ns", "gpu_ops", "domain", "source"),
        view="traceq.views:breakdown_view",
        report="Regions: CPU versus GPU time",
    ),
    Analysis(
        name="stalls",
        help="Data-loading stalls and other GPU starvation.\n\n"
             "GPU idle gaps of at least --min-gap-us are split by what the host was doing, in precedence order: "
             "data_loading (DataLoader spans, timer IO regions, --data-pattern regions), communication (host in "
             "collectives), synchronization (cuda*Synchronize, .item()), blocking_copy (synchronous or pageable "
             "copies), memory_management (cudaMalloc/cudaFree/hipFree/...), launch_overhead (launching thread in "
             "other CUDA API calls), host_compute (CPU ops with no CUDA call), unattributed. "
             "--table launch: launch statistics per rank. Per step: host time waiting for data, GPU "
             "idle while waiting, and their share of the step, with advice when data wait exceeds 5 % of step "
             "time. Steps are ProfilerSteps, else timer BATCH regions, else the iterations between DataLoader "
             "calls. CPU-only traces still get the per-step data-wait share.",
        examples=("traceq stalls", "traceq stalls --min-gap-us 200 --data-pattern 'decode|augment'",
                  "traceq stalls --table steps --format csv -o steps.csv"),
        compute="traceq.views:stalls",
        params=(Param("min_gap_us", float, 50.0, "Smallest GPU idle gap to count, µs.", "US"),
                Param("data_pattern", str, None, "Regex: regions whose name matches also count as data loading "
                      "(e.g. 'load|decode').", "REGEX"),
                Param("table", str, "both", "Which table: both (steps, and causes as a second table), causes, "
                      "steps, gaps (every gap) or launch (launch statistics per rank).", "both|causes|steps|gaps|launch",
                      choices=("both", "causes", "steps", "gaps", "launch")), *EXECUTOR_PARAMS),
        per_rank=True,
        columns=_sql_columns("stalls_steps", Column("gpu_idle_waiting_pct", "100 · gpu_idle_waiting_ns / step_ns, %")),
        sort=("rank", "step"),
        drop_first=("gpu_idle_ns", "step_source", "gpu_idle_waiting_ns"),
        view="traceq.views:stalls_view",
        report="Data-loading stalls and GPU starvation",
    ),
    Analysis(
        name="diff",
        help="What changed from run A to run B: GPU time per kernel category and per kernel name (count, total "
             "in A and B, delta, appeared/disappeared/changed), CPU time per region name, and the summary/overlap "
             "headline numbers of both runs.\n\n"
             "--rank and --steps apply to both runs. JSON is one object "
             "{\"categories\": [...], \"kernels\": [...], \"regions\": [...], \"headline\": {...}}; CSV prints each "
             "table after a \"# <table>\" line (or one plain table with --only).",
        examples=("traceq diff baseline amp_channels_last --top 10",),
        compute="traceq.views:diff",
        params=(Param("top", int, 20, "Show the N largest kernel and region changes (0 = all).", "N", flags=("-n",)),
                Param("only", str, None, "Print one table: categories, kernels, regions or headline.", "TABLE",
                      choices=("headline", "categories", "kernels", "regions"))),
        drop_first=("count_a", "count_b", "status", "category", "source", "delta_count", "total_a_ns", "total_b_ns"),
        view="traceq.views:diff_view",
        json="traceq.views:diff_json",
        csv="traceq.views:diff_csv_tables",
        runs=2,
        report="What changed: A → B",
    ),

    Analysis(
        name="ranks",
        help="Across the ranks of a run: one clock, matched collectives, arrival skew, the straggler.\n\n"
             "Per rank: steps, mean step time, exposed communication, mean arrival lateness at collectives (its "
             "start − the first rank's start) and the clock offset that puts it on the common clock (trace base "
             "time, refined by aligning the ends of matched collectives). Per collective type: instances, mean/max "
             "arrival skew, the rank most often last, bus bandwidth (NCCL-tests formulas; when message sizes are "
             "known). The straggler is named with its evidence.\n\n"
             "JSON is one object {\"ranks\": [...], \"collectives\": [...], \"straggler\": {\"rank\", \"evidence\"}} "
             "(with --instances: the list of instances); CSV prints the rank table (or the instances).",
        examples=("traceq ranks --format json",),
        compute="traceq.analysis.ranks:ranks_out",
        params=(Param("instances", bool, False, "One row per matched collective instance (skew, last rank, bus "
                      "bandwidth) instead of the rank view."),
                *EXECUTOR_PARAMS),
        view="traceq.analysis.ranks:ranks_view",
        json="traceq.analysis.ranks:ranks_json",
        csv="traceq.analysis.ranks:ranks_csv",
        scope="run",
        report="Across ranks: collectives, skew and stragglers",
    ),
    Analysis(
        name="compare",
        help="Runs side by side: per metric and configuration, mean / sd / sd % / trimmed mean over the "
             "repetitions (runs whose labels differ only in rep) and the change against the baseline. "
             "Metrics: step_time (IQR-filtered median step), throughput (batch label / step time), "
             "data_wait, communication, gpu.<category> and region.<name> per step, imported metrics.",
        examples=("traceq compare control test amp --baseline control",
                  "traceq compare --where app=cifar10,b=64 --metric step_time --metric gpu.*"),
        compute="traceq.experiments.views:compare",
        params=(Param("run_names", str, None, "Runs to compare (default: every run, or those --where selects).",
                      "RUN", argument=True, multiple=True),
                WHERE,
                Param("baseline", str, None, "Run (or configuration) the changes are relative to (default: the "
                      "first).", "RUN"),
                Param("metric", str, None, "Only these metrics (repeatable; a trailing * matches a prefix, e.g. "
                      "gpu.*).", "METRIC", flags=("-m",), multiple=True)),
        view="traceq.experiments.views:compare_view",
        json="traceq.experiments.views:compare_json",
        csv="traceq.experiments.views:compare_csv",
        scope="store",
        report="Comparison",
    ),
    Analysis(
        name="model",
        help="Performance model in Extra-P's normal form, f(p) = c0 + sum c_k p^i_k log2(p)^j_k, chosen "
             "by leave-one-out cross-validated SMAPE over Extra-P's exponent sets; several parameters "
             "combine the single-parameter terms (sums and products). Runs are the repetitions at each "
             "parameter point; predictions come with a band from the cross-validation error and the "
             "repetitions' spread.",
        examples=("traceq model --param p --metric step_time --predict p=64",
                  "traceq model --param p --param b --where app=cifar10 --format json"),
        compute="traceq.experiments.views:model",
        params=(Param("param", str, None, "Label that is a model parameter (repeatable), e.g. --param ranks "
                      "--param batch.", "LABEL", flags=("-p",), multiple=True, required=True),
                Param("metric", str, "step_time", "Per-run metric to model (step_time, throughput, "
                      "gpu.<category>, ...).", "METRIC", flags=("-m",)),
                Param("region", str, None, "Model the time per step in this NVTX range / annotation (metric "
                      "region.NAME).", "NAME"),
                WHERE,
                Param("predict", str, None, "Predict at p=64[,b=32] (repeatable).", "P=V[,P=V]", multiple=True),
                Param("strong_scaling", bool, False, "Model time x ranks (the first --param is the rank count) "
                      "and show speedup and efficiency."),
                Param("export_extrap", str, None, "Also write the measurements in Extra-P's JSON input format "
                      "to this file.", "FILE")),
        view="traceq.experiments.views:model_view",
        json="traceq.experiments.views:model_json",
        csv="traceq.experiments.views:model_csv",
        after="traceq.experiments.views:model_after",
        scope="store",
    ),
    Analysis(
        name="check",
        help="Regression gate against targets, as mila's benchmarks do it: per target, result = trimmed "
             "mean over the matching runs (min and max dropped), sd, sd % = sd / result, diff % against the "
             "target (positive = better, for times and throughputs alike); gates min_runs (default 4), "
             "80th percentile of sd % < max_sd_pct (5), mean diff % >= -tolerance_pct (0).\n\n"
             "Exit 0 when every gate passes, 1 when one fails, 2 on bad input.",
        examples=("traceq check --targets targets.toml --junit check.xml",),
        compute="traceq.experiments.views:check",
        params=(Param("targets", str, None, "Targets TOML ([gate] rules and [[target]] entries).", "FILE",
                      flags=("-t",), required=True),
                Param("min_runs", int, None, "Override [gate] min_runs.", "N"),
                Param("junit", str, None, "Also write JUnit XML to this file (for CI).", "FILE")),
        view="traceq.experiments.views:check_view",
        json="traceq.experiments.views:check_json",
        csv="traceq.experiments.views:check_csv",
        after="traceq.experiments.views:check_after",
        scope="store",
    ),
]

REGISTRY: dict[str, Analysis] = {a.name: a for a in _SPECS}

_LEGACY = {
    "hotspots": ("traceq.analysis.hotspots", "hotspots"),
    "summary": ("traceq.analysis.summary", "summary"),
    "overlap": ("traceq.analysis.overlap", "overlap"),
    "breakdown": ("traceq.analysis.breakdown", "breakdown"),
    "timer_breakdown": ("traceq.analysis.breakdown", "timer_breakdown"),
    "stalls": ("traceq.analysis.stalls", "stalls"),
    "diff": ("traceq.analysis.diff", "diff"),
    "runs": ("traceq.analysis.catalog", "runs"),
    "sql": ("traceq.analysis.catalog", "sql"),
}

__all__ = ["REGISTRY", *_LEGACY]


def __getattr__(name: str):
    if name in _LEGACY:
        import importlib

        mod, attr = _LEGACY[name]
        return getattr(importlib.import_module(mod), attr)
    raise AttributeError(name)
