"""Make an N-rank Kineto run from one rank of a real multi-rank trace, with a known straggler.

    python benchmarks/make_many_ranks.py N OUTDIR [--straggler R] [--delay-ms D]
        [--jitter-us J] [--clock-skew-us C] [--seed S] [--template PATH]

The template (default: ../shared/traces/kineto/hta/trace_filter/sampled_rank-0.json.gz,
rank 0 of a 128-rank NCCL job) is copied to OUTDIR/rank-<r>.json.gz for r = 0..N-1 with:

- arrival jitter: the k-th NCCL kernel of each stream (one collective instance) starts
  a_{r,k} µs later on rank r, a_{r,k} uniform in [0, J]; its end stays where it was, as in
  a real collective, which completes on every rank together. The straggler rank arrives
  D ms later still (a_{R,k} += 1000·D): the others' kernels start earlier and wait for it.
- a raw clock error: every timestamp of rank r moves by e_r µs, uniform in [-C, C]
  (integer µs, so the values stay exact in float64 µs).
- distributedInfo.rank = r, world_size = N.

The ground truth (a, e, straggler, delay) goes to OUTDIR/.truth.json (a dot file, which
`traceq ingest OUTDIR` skips).
"""
from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
from pathlib import Path

DEFAULT_TEMPLATE = (Path(__file__).resolve().parents[1].parent / "shared" / "traces" / "kineto" / "hta"
                    / "trace_filter" / "sampled_rank-0.json.gz")


def _load(path: Path) -> dict:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return json.load(f)


def collective_kernels(events: list[dict]) -> list[tuple[int, int, int]]:
    """(event index, stream, k): the k-th NCCL kernel (by start) of each stream."""
    kern = [(i, e) for i, e in enumerate(events)
            if e.get("cat") == "kernel" and str(e.get("name", "")).startswith("nccl") and e.get("ph") == "X"]
    kern.sort(key=lambda ie: (ie[1]["args"]["stream"], float(ie[1]["ts"])))
    out, seen = [], {}
    for i, e in kern:
        s = e["args"]["stream"]
        out.append((i, s, seen.get(s, 0)))
        seen[s] = seen.get(s, 0) + 1
    return out


def make(n: int, outdir: Path, straggler: int | None = None, delay_ms: float = 2.0, jitter_us: int = 200,
         clock_skew_us: int = 2000, seed: int = 0, template: Path = DEFAULT_TEMPLATE) -> dict:
    rng = random.Random(seed)
    trace = _load(template)
    events = trace["traceEvents"]
    colls = collective_kernels(events)
    shortest = min(float(events[i]["dur"]) for i, _, _ in colls)
    if (delay_ms * 1000 if straggler is not None else 0) + jitter_us >= shortest:
        raise SystemExit(f"--delay-ms + jitter must stay below the shortest collective ({shortest / 1000:.1f} ms)")
    ts0 = [e.get("ts") for e in events]
    dur0 = {i: float(events[i]["dur"]) for i, _, _ in colls}
    outdir.mkdir(parents=True, exist_ok=True)
    truth = {"world_size": n, "straggler": straggler, "delay_ms": delay_ms, "template": str(template),
             "clock_error_us": [], "arrival_us": []}
    for r in range(n):
        err = rng.randint(-clock_skew_us, clock_skew_us)
        arrivals = {}
        for i, s, k in colls:
            a = rng.randint(0, jitter_us) + (round(delay_ms * 1000) if r == straggler else 0)
            arrivals[f"{s}:{k}"] = a
        for e, t in zip(events, ts0):
            if t is not None:
                e["ts"] = t + err
        for i, s, k in colls:
            a = arrivals[f"{s}:{k}"]
            events[i]["ts"] = ts0[i] + err + a
            events[i]["dur"] = dur0[i] - a
        trace["distributedInfo"] = {**trace.get("distributedInfo", {}), "rank": r, "world_size": n}
        with gzip.open(outdir / f"rank-{r}.json.gz", "wt", compresslevel=1) as f:
            json.dump(trace, f)
        truth["clock_error_us"].append(err)
        truth["arrival_us"].append(arrivals)
    (outdir / ".truth.json").write_text(json.dumps(truth))
    return truth


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", type=int, help="number of ranks")
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--straggler", type=int, default=None, help="rank that arrives late (default: none)")
    ap.add_argument("--delay-ms", type=float, default=2.0, help="its extra arrival delay per collective, ms")
    ap.add_argument("--jitter-us", type=int, default=200, help="arrival jitter of every rank, µs (uniform 0..J)")
    ap.add_argument("--clock-skew-us", type=int, default=2000, help="raw clock error of a rank, µs (uniform ±C)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--template", type=Path, default=DEFAULT_TEMPLATE)
    a = ap.parse_args(argv)
    if not a.template.exists():
        print(f"make_many_ranks: {a.template}: template trace not found", file=sys.stderr)
        return 2
    make(a.n, a.outdir, a.straggler, a.delay_ms, a.jitter_us, a.clock_skew_us, a.seed, a.template)
    print(f"{a.n} ranks written to {a.outdir} (truth in {a.outdir / '.truth.json'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
