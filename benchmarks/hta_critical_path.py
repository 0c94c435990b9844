"""Reference critical paths from HTA 0.6.1 (PyPI `traceinsight`) for the shared Kineto traces and
the repo's real GPU samples: tests/data/hta_critical_path/<name>.json, which traceq's
critical-path analysis is compared against (docs/hta_critical_path.md says what HTA computes).

HTA runs in its own venv (benchmarks/.cache/hta061-venv; the older benchmarks/.cache/hta-venv
holds HolisticTraceAnalysis 0.5.0 for the other benchmarks), never as a traceq dependency;
benchmarks/hta_cp_dump.py runs inside it, one trace per run (HTA reads a directory of traces).
A trace HTA fails on gets a file too: its `ok` is false and `error` says what HTA raised or logged.

    python benchmarks/hta_critical_path.py [--shared ../shared/traces] [--only NAME ...]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = ROOT / "tests" / "data" / "hta_critical_path"
SPEC = "traceinsight==0.6.1"
VERSION = "import hta, importlib.metadata as m; print(m.version('traceinsight'))"
ALEXNET_REGION = "[param|pytorch.model.alex_net|0|0|0|measure|forward]"   # HTA's own test uses it

# name -> (trace, annotation[, data_load_events]); "shared:" paths are under --shared, others
# under the repo. data_load_events is None (HTA's default) except where a name says otherwise.
TRACES = {
    "hta_alexnet": ("shared:kineto/hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
                    ALEXNET_REGION),
    "hta_alexnet_profilerstep": (
        "shared:kineto/hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
        "ProfilerStep"),
    "hta_cuda_event_sync": ("shared:kineto/hta/critical_path/cuda_event_sync/event_sync_trace.json.gz",
                            "ProfilerStep"),
    "tb_resnet50": ("shared:kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz", "ProfilerStep"),
    "tl_mi300_bert": ("shared:kineto/tracelens/mi300/gaunernst_bert-small-uncased__1016001.json.gz",
                      "ProfilerStep"),
    "tl_mi300_falcon": ("shared:kineto/tracelens/mi300/Falconsai_nsfw_image_detection__1016002.json.gz",
                        "ProfilerStep"),
    "tl_h100_bert": ("shared:kineto/tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz",
                     "ProfilerStep"),
    "tl_h100_falcon": ("shared:kineto/tracelens/h100/Falconsai_nsfw_image_detection__1016002.json.gz",
                       "ProfilerStep"),
    "hta_trace_filter_rank0": ("shared:kineto/hta/trace_filter/sampled_rank-0.json.gz", "ProfilerStep"),
    **{f"gpu_{s}": (f"sample_traces/gpu/{s}/rank0.pt.trace.json.gz", "ProfilerStep")
       for s in ("train_slow_loader", "train_gpu_bound", "train_small_sync", "two_streams",
                 "infer_cuda_graph", "ddp_gloo_straggler")},
    # the same trace with the DataLoader's record_function region declared as data loading:
    # without it HTA makes no node for that region (user_annotation), see the docs
    "gpu_train_slow_loader_dl": ("sample_traces/gpu/train_slow_loader/rank0.pt.trace.json.gz", "ProfilerStep",
                                 ["DataLoader"]),
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "traces")
    ap.add_argument("--only", nargs="*", help="names from TRACES")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(HERE))
    from venvs import ensure_venv

    py, version = ensure_venv(HERE / ".cache" / "hta061-venv", SPEC, VERSION)
    if py is None:
        print(f"traceinsight (HTA 0.6.1) unavailable: {version}", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    for name, (rel, annotation, *dl) in TRACES.items():
        if args.only and name not in args.only:
            continue
        src = args.shared / rel.removeprefix("shared:") if rel.startswith("shared:") else ROOT / rel
        if not src.exists():
            print(f"{name}: {src} missing, skipped")
            continue
        out = args.out / f"{name}.json"
        r = subprocess.run([str(py), str(HERE / "hta_cp_dump.py"), str(src), str(out),
                            "--annotation", annotation, *(["--data-load-events", *dl[0]] if dl else [])],
                           capture_output=True, text=True, cwd=HERE)
        if r.returncode != 0:
            print(f"{name}: dump crashed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
            continue
        res = json.loads(out.read_text())
        if res["ok"]:
            steps = [s for s in res["steps"] if s.get("ok")]
            print(f"{name}: ok, {len(steps)}/{len(res['steps'])} steps, path "
                  + " ".join(f"{s['path_ns'] / 1e6:.3f}" for s in steps) + " ms")
        else:
            print(f"{name}: HTA failed: {res.get('error')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
