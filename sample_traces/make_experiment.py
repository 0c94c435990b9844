"""Write a synthetic experiment tree: Kineto traces whose step time follows a known law.

    python sample_traces/make_experiment.py OUT_DIR [--ranks 2,4,8,16,32] [--batch 16,64,256]
                                            [--reps 3] [--steps 8] [--noise 0.02] [--seed 0]

One file per rank, named the Extra-Deep way, `synth.p<P>.b<B>.r<REP>.mpi<RANK>.json`, so that
`traceq ingest OUT_DIR --recursive` groups them into one run per configuration and repetition
with labels p, b, rep and app=synth. To keep the tree small only the first RANK_FILES ranks of
each configuration are written (the law is a function of the label p, not of the file count).

Each rank has STEPS ProfilerStep#N regions (N = 1..STEPS) one after the other on its main
thread; inside each step a `forward` annotation (first 60 %) launching a GEMM kernel, and an
NCCL all-reduce kernel (last 20 % of the step). The duration of step N of repetition R is

    law(p, b) · (1 + rep_noise_R) · (1 + noise · z_N)       z ~ N(0, 1), rep_noise_R ~ N(0, noise/2)

with law(p, b) = C0 + C1 · p · log2(p) · b   (seconds; C0, C1 below), the same on every rank
of the configuration. Deterministic for a given seed.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

C0 = 0.01
C1 = 2e-5
RANK_FILES = 2
BASE_NS = 1_700_000_000_000_000_000


def law(p: float, b: float) -> float:
    """The true step time in seconds."""
    return C0 + C1 * p * math.log2(p) * b


def rank_trace(step_s: list[float], rank: int, world: int) -> dict:
    ev = []
    t = 1000.0   # µs
    for n, dur_s in enumerate(step_s, start=1):
        dur = dur_s * 1e6
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1,
                   "ts": round(t, 3), "dur": round(dur, 3)})
        ev.append({"ph": "X", "cat": "user_annotation", "name": "forward", "pid": 1, "tid": 1,
                   "ts": round(t + 1, 3), "dur": round(0.6 * dur - 2, 3)})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                   "ts": round(t + 2, 3), "dur": 3, "args": {"correlation": 2 * n}})
        ev.append({"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "pid": 0, "tid": 7,
                   "ts": round(t + 6, 3), "dur": round(0.5 * dur, 3),
                   "args": {"device": 0, "stream": 7, "correlation": 2 * n}})
        ev.append({"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float", "pid": 0,
                   "tid": 8, "ts": round(t + 0.78 * dur, 3), "dur": round(0.2 * dur, 3),
                   "args": {"device": 0, "stream": 8, "correlation": 2 * n + 1}})
        t += dur
    return {"schemaVersion": 1, "distributedInfo": {"rank": rank, "world_size": world},
            "baseTimeNanoseconds": BASE_NS, "traceEvents": ev}


def write_tree(out: str | Path, ranks=(2, 4, 8, 16, 32), batches=(16, 64, 256), reps: int = 3, steps: int = 8,
               noise: float = 0.02, seed: int = 0, app: str = "synth") -> list[Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    written = []
    for p in ranks:
        for b in batches:
            for r in range(1, reps + 1):
                rep_factor = 1 + rng.normal(0, noise / 2)
                step_s = [law(p, b) * rep_factor * (1 + noise * z) for z in rng.standard_normal(steps)]
                for rank in range(min(p, RANK_FILES)):
                    path = out / f"{app}.p{p}.b{b}.r{r}.mpi{rank}.json"
                    path.write_text(json.dumps(rank_trace(step_s, rank, p)))
                    written.append(path)
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--ranks", default="2,4,8,16,32")
    ap.add_argument("--batch", default="16,64,256")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--noise", type=float, default=0.02)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    files = write_tree(a.out, [int(x) for x in a.ranks.split(",")], [int(x) for x in a.batch.split(",")],
                       a.reps, a.steps, a.noise, a.seed)
    print(f"wrote {len(files)} files to {a.out}")


if __name__ == "__main__":
    main()
