"""Reference outputs of the retired TensorBoard profiler plugin (torch-tb-profiler 0.4.3) for
the shared Kineto traces it reads: tests/data/tb_reference/<name>.json, which
tests/test_tb_views.py compares `traceq overview`, `operators`, `memory` and the kernel
columns of `hotspots` against.

The plugin runs in its own venv (benchmarks/.cache/tb-venv, pandas 1.5 and numpy 1.26 as it
was published with), never as a traceq dependency; benchmarks/tb_dump.py runs inside it and
writes the plugin's raw numbers (µs as the plugin computes them, before its UI rounding).

    python benchmarks/tb_reference.py [--shared ../shared/traces]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = ROOT / "tests" / "data" / "tb_reference"
SPEC = "torch-tb-profiler==0.4.3"
EXTRA = ("pandas==1.5.3", "numpy==1.26.4")
VERSION = "import importlib.metadata as m; print(m.version('torch-tb-profiler'))"

# the shared traces the plugin reads, and the name of each one's reference file
TRACES = {
    "tb_resnet50": "kineto/tb_plugin/resnet50_num_workers_0.worker0.pt.trace.json.gz",
    "param_resnet": "kineto/param/resnet_kineto.json.gz",
    "tl_h100_bert": "kineto/tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz",
    "tl_h100_falcon": "kineto/tracelens/h100/Falconsai_nsfw_image_detection__1016002.json.gz",
    "tl_mi300_bert": "kineto/tracelens/mi300/gaunernst_bert-small-uncased__1016001.json.gz",
    "tl_mi300_falcon": "kineto/tracelens/mi300/Falconsai_nsfw_image_detection__1016002.json.gz",
    "tl_norm": "kineto/tracelens/perf_model_normalization/normalization_layer_test.json.gz",
    "hta_df_index": "kineto/hta/df_index_resolver/df_index_resolver.json.gz",
    "hta_alexnet": "kineto/hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
    "hta_nccl": "kineto/hta/nccl_parser_config/nccl_data.json.gz",
    "hta_ns_resolution": "kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "hta_mi250": "kineto/hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "traces")
    ap.add_argument("--only", nargs="*", help="names from TRACES")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(HERE))
    from venvs import ensure_venv

    py, version = ensure_venv(HERE / ".cache" / "tb-venv", SPEC, VERSION, extra=EXTRA)
    if py is None:
        print(f"torch-tb-profiler unavailable: {version}", file=sys.stderr)
        return 1
    OUT.mkdir(parents=True, exist_ok=True)
    for name, rel in TRACES.items():
        if args.only and name not in args.only:
            continue
        src = args.shared / rel
        if not src.exists():
            print(f"{name}: {src} missing, skipped")
            continue
        r = subprocess.run([str(py), str(HERE / "tb_dump.py"), str(src), str(OUT / f"{name}.json")],
                           capture_output=True, text=True)
        status = "ok" if r.returncode == 0 else "FAILED: " + r.stderr.strip().splitlines()[-1]
        print(f"{name}: {status}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
