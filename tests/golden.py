"""The golden corpus: the output of every analysis command, in every output format, on the
bundled samples and on every trace of ../shared/traces, recorded once and compared byte for
byte afterwards (tests/test_golden.py). A refactoring must leave every one of them unchanged;
a change of behaviour made on purpose re-records them and says so in its commit.

    python tests/golden.py record      # (re)write tests/golden/*.json from the current code
    python tests/golden.py check       # compare, print the cases that differ

Commands run in this process through the CLI application (typer's runner), at a fixed
terminal width and without colour, on two stores built once per session: the samples
(`samples`) and the shared traces (`shared`, skipped when ../shared/traces is absent). Each
output is kept as text when it is short and as its SHA-256 (with its size and first lines)
when it is long, so the corpus stays small; `--full DIR` writes every output in full, to
diff two versions by hand.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from pathlib import Path

HERE = Path(__file__).parent
REPO = HERE.parent
SAMPLES = REPO / "sample_traces"
SHARED = REPO.parent / "shared" / "traces"
GOLDEN = HERE / "golden"
KEEP_TEXT = 6000          # outputs up to this many characters are kept whole
FORMATS = ("table", "json", "csv")
WIDTH = "100"

# (run name, paths relative to the corpus root, extra ingest options)
SAMPLE_RUNS = [
    ("nsys_sample", ["nsys_sample.sqlite"], []),
    ("slow_dataloader", ["slow_dataloader"], []),
    ("fast_dataloader", ["fast_dataloader"], []),
    ("timer_sample", ["timer_sample.jsonl"], []),
    ("timer_stats", ["timer_sample_stats.txt"], []),
    # real GPU traces (H200, torch 2.11; sample_traces/make_gpu_samples.py)
    ("train_slow_loader", ["gpu/train_slow_loader"], []),
    ("train_gpu_bound", ["gpu/train_gpu_bound"], []),
    ("train_small_sync", ["gpu/train_small_sync"], []),
    ("two_streams", ["gpu/two_streams"], []),
    ("infer_cuda_graph", ["gpu/infer_cuda_graph"], []),
    ("ddp_gloo_straggler", ["gpu/ddp_gloo_straggler"], []),
]
SHARED_RUNS = [
    ("amd_mi250", ["kineto/hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"], []),
    ("backward_thread", ["kineto/hta/call_stack/backward_thread.json"], []),
    ("cpu_only", ["kineto/hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"], []),
    ("alexnet", ["kineto/hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"], []),
    ("event_sync", ["kineto/hta/critical_path/cuda_event_sync/event_sync_trace.json.gz"], []),
    ("cupti_profiler", ["kineto/hta/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz"], []),
    ("df_index", ["kineto/hta/df_index_resolver/df_index_resolver.json.gz"], []),
    ("no_dist_info", ["kineto/hta/distributed_info_unavailable/distributed_info_not_found.json.gz"], []),
    ("nccl_data", ["kineto/hta/nccl_parser_config/nccl_data.json.gz"], []),
    ("ns_resolution", ["kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"], []),
    ("rank_non_gpu", ["kineto/hta/rank_non_gpu/rank_non_gpu.json.gz"], []),
    ("diff_control", ["kineto/hta/trace_diff/control/control.json.gz"], []),
    ("diff_test", ["kineto/hta/trace_diff/test/test.json.gz"], []),
    ("trace_filter", ["kineto/hta/trace_filter"], []),
    ("triton", ["kineto/hta/triton_example/triton_example.json.gz"], []),
    ("param_resnet", ["kineto/param/resnet_kineto.json.gz"], []),
    ("tb_resnet50", ["kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz"], []),
    ("h100_falcon", ["kineto/tracelens/h100/Falconsai_nsfw_image_detection__1016002.json.gz"], []),
    ("h100_bert", ["kineto/tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz"], []),
    ("mi300_falcon", ["kineto/tracelens/mi300/Falconsai_nsfw_image_detection__1016002.json.gz"], []),
    ("mi300_bert", ["kineto/tracelens/mi300/gaunernst_bert-small-uncased__1016001.json.gz"], []),
    ("vllm_capture", ["kineto/tracelens/inference/vllm_decode_full/capture_traces/"
                      "graph_capture_rank_0.1773709742341309550.pt.trace.json.gz"], []),
    ("vllm_graph", ["kineto/tracelens/inference/vllm_decode_full/graph_execution.json.gz"], []),
    ("normalization", ["kineto/tracelens/perf_model_normalization/normalization_layer_test.json.gz"], []),
    ("dlprof", ["nsys/DLProf/nsys_profile.sqlite"], []),
    ("dlprof_relu", ["nsys/DLProf/w_Relu/nsys_profile.sqlite"], []),
    ("dynamicvit", ["nsys/DynamicViT/nsys_profile.sqlite"], []),
    ("mordred", ["nsys/Mordred-Deprecated/report1.sqlite"], []),
    ("weatherbench2", ["nsys/WeatherBench2/report1.sqlite"], []),
    ("llama3", ["nsys/llama3-inference/demo.sqlite"], []),
    ("nvfuser", ["nsys/nvFuser/report1_matmul_h100.sqlite"], []),
    ("cloverleaf", ["nsys/pipit/perlmutter-cloverleaf-cuda.sqlite"], []),
    ("saxpy_mpi", ["nsys/pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"], []),
]

# the commands run on every run (each in every format), then the per-corpus extras
PER_RUN = [
    ["hotspots"], ["hotspots", "--top", "0", "--category", "transpose,memset,elementwise"],
    ["summary"], ["summary", "--window", "hta"],
    ["overlap"], ["overlap", "--by", "step"], ["overlap", "--by", "across"],
    ["breakdown"], ["breakdown", "--by", "annotation", "--top", "0"],
    ["stalls"], ["stalls", "--table", "gaps"], ["stalls", "--table", "launch"],
    ["stalls", "--min-gap-us", "10", "--data-pattern", "load|decode"],
    ["diagnose"], ["diagnose", "--skip-first", "1"], ["ranks"], ["roofline"],
    ["overview"], ["operators"], ["memory"],
    ["critical-path"], ["critical-path", "--what-if", "data_loading=0", "--what-if", "gemm=0.5"],
]
EXTRA = {
    "samples": [
        ["breakdown", "--run", "timer_sample", "--by", "timer"],
        ["breakdown", "--run", "timer_stats", "--by", "timer"],
        ["diff", "slow_dataloader", "fast_dataloader"],
        ["diff", "slow_dataloader", "fast_dataloader", "--only", "kernels", "--top", "3"],
        ["stalls", "--run", "slow_dataloader", "--steps", "2:4"],
        ["runs"],
    ],
    "shared": [
        ["diff", "diff_control", "diff_test"],
        ["diff", "diff_control", "diff_test", "--only", "headline"],
        ["compare", "diff_control", "diff_test"],
        ["overlap", "--run", "trace_filter", "--rank", "1"],
        ["runs"],
    ],
}
# HTML reports (the page is compared, its generation time left out)
REPORTS = {
    "samples": [["nsys_sample"], ["slow_dataloader", "fast_dataloader"], ["timer_sample"], ["ddp_gloo_straggler"]],
    "shared": [["diff_control", "diff_test"], ["tb_resnet50"], ["trace_filter"], ["llama3"], ["cpu_only"]],
}
# Floats printed at full precision (JSON, CSV, the report's figure data) can differ in their
# last digits between two runs of the same code: DuckDB adds a column's values on several
# threads, in an order that varies. They are compared to 9 significant digits, every decimal
# number alike (a standard deviation of exactly 500.0 in one run is 500.00000000001 in the
# next: both read 500); the terminal tables round their numbers anyway.
FLOAT = re.compile(r"(?<![\w.])-?\d+\.\d+(?:[eE][-+]?\d+)?(?![\w.])")
# what differs between two recordings of the same code: ingest and report times
VOLATILE = [(re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d(\.\d+)?)?( UTC|Z|[+-]\d\d:?\d\d)?"), "<time>")]


def groups(corpus: str) -> list[tuple[str, list[tuple[str, list[str], list[str]]], list[list[str]]]]:
    """(group id, runs to ingest, argvs): each run alone with the per-run commands, then the
    corpus's extras on the runs they name. A group gets a store of its own, so groups run
    in parallel."""
    runs = SAMPLE_RUNS if corpus == "samples" else SHARED_RUNS
    out = [(run, [(run, paths, extra)], [[*c, "--run", run] for c in PER_RUN]) for run, paths, extra in runs]
    named = {a for argv in EXTRA[corpus] + REPORTS[corpus] for a in argv}
    extra_runs = [r for r in runs if r[0] in named]
    argvs = EXTRA[corpus] + [["report", *r] for r in REPORTS[corpus]]
    out.append(("extra", extra_runs, argvs))
    return out


def corpus_root(corpus: str) -> Path:
    return SAMPLES if corpus == "samples" else SHARED


def _cases(argvs: list[list[str]]) -> list[tuple[str, list[str]]]:
    """(case id, argv): every command in every format (a report: its page)."""
    out = []
    for argv in argvs:
        for fmt in ([None] if argv[0] == "report" else FORMATS):
            args = argv if fmt is None else [*argv, "--format", fmt]
            out.append((" ".join(args), args))
    return out


def _env() -> dict:
    return {"NO_COLOR": "1", "TRACEQ_WIDTH": WIDTH, "COLUMNS": WIDTH, "TRACEQ_STORE": ""}


def build_store(corpus: str, runs, where: Path) -> tuple[Path, dict]:
    """Ingest `runs` into a store under `where`: the store folder, and what each ingest that
    failed said (a case of the corpus too)."""
    from typer.testing import CliRunner

    from traceq.cli import app

    store = where / "store"
    runner = CliRunner()
    root = corpus_root(corpus)
    failed = {}
    for run, paths, extra in runs:
        args = ["ingest", *(str(root / p) for p in paths), "--run", run, "--store", str(store), "-q", *extra]
        r = runner.invoke(app, args, env=_env())
        if r.exit_code != 0:
            failed[f"ingest {run}"] = f"exit {r.exit_code}\n{r.output.replace(str(root), '<root>')}"
    return store, failed


def run_case(store: Path, args: list[str]) -> str:
    """What `traceq ARGS --store STORE` prints (its exit status, then stdout; a one-line error
    as the CLI would print it), or for `report` the page it writes."""
    from typer.testing import CliRunner

    from traceq.cli import app
    from traceq.errors import TraceqError

    runner = CliRunner()
    page = store.parent / "report.html"
    if args[0] == "report":
        args = [*args, "-o", str(page)]
    r = runner.invoke(app, [*args, "--store", str(store)], env=_env())
    exc = r.exception
    if isinstance(exc, TraceqError):
        text = f"error: {exc}\n"
    elif exc is not None and not isinstance(exc, SystemExit):
        first = str(exc).splitlines()[0] if str(exc) else ""
        text = f"internal error: {type(exc).__name__}: {first}\n"
    elif args[0] == "report":
        text = page.read_text(encoding="utf-8") if r.exit_code == 0 else r.stdout
    else:
        text = r.stdout
    text = text.replace(str(store), "<store>")
    for pattern, repl in VOLATILE:
        text = pattern.sub(repl, text)
    if "table" not in args:   # JSON, CSV, the report's figure data: full-precision floats
        text = FLOAT.sub(lambda m: f"{float(m.group()):.9g}", text)
    return f"exit {r.exit_code}\n{text}"


def digest(text: str) -> dict:
    if len(text) <= KEEP_TEXT:
        return {"text": text}
    return {"sha256": hashlib.sha256(text.encode()).hexdigest(), "chars": len(text),
            "head": "\n".join(text.splitlines()[:12])}


def record_group(job) -> dict[str, str]:
    """Every case of one group, in full text (runs in a worker process)."""
    import tempfile

    os.environ.update(_env())
    corpus, _, runs, argvs = job
    with tempfile.TemporaryDirectory() as tmp:
        store, failed = build_store(corpus, runs, Path(tmp))
        out = dict(failed)
        for case, args in _cases(argvs):
            out[case] = run_case(store, args)
    return out


def record(corpus: str, full: Path | None = None, jobs: int | None = None) -> dict:
    """{case: digest} of the corpus, its groups on `jobs` worker processes."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    work = [(corpus, gid, runs, argvs) for gid, runs, argvs in groups(corpus)]
    jobs = jobs or min(len(work), os.cpu_count() or 1)
    out = {}
    with ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn")) as pool:
        for got in pool.map(record_group, work):
            for case, text in got.items():
                out[case] = digest(text)
                if full is not None:
                    name = re.sub(r"[^\w.-]+", "_", case)[:150]
                    (full / corpus).mkdir(parents=True, exist_ok=True)
                    (full / corpus / name).write_text(text)
    return out


def corpora() -> list[str]:
    return ["samples"] + (["shared"] if SHARED.is_dir() else [])


def main(argv: list[str]) -> int:
    mode = argv[0] if argv else "check"
    full = Path(argv[argv.index("--full") + 1]) if "--full" in argv else None
    only = argv[argv.index("--corpus") + 1] if "--corpus" in argv else None
    bad = 0
    for corpus in corpora():
        if only and corpus != only:
            continue
        got = record(corpus, full)
        path = GOLDEN / f"{corpus}.json"
        if mode == "record":
            GOLDEN.mkdir(exist_ok=True)
            path.write_text(json.dumps(got, indent=1, ensure_ascii=False, sort_keys=True) + "\n")
            print(f"{path}: {len(got)} cases")
            continue
        want = json.loads(path.read_text())
        for case in sorted(set(want) | set(got)):
            if want.get(case) != got.get(case):
                bad += 1
                print(f"{corpus}: differs: {case}")
    print(f"{bad} case(s) differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main(sys.argv[1:]))
