"""Write a large synthetic traceq timer log (JSONL) for the ingest memory/time benchmark.

    python benchmarks/make_timer_log.py OUT.jsonl --records 5000000 [--threads 8] [--gpu]

Regions follow each other on each thread (a third start a little late), keys drawn from a few
hundred; with --gpu every fourth region is GPU-timed and followed by its duration record.
~86 bytes per record: 5 M records are 432 MB. Deterministic (seeded). Measure an ingest with
`/usr/bin/time -v python -m traceq ingest OUT.jsonl --store S -q` (docs/hardening.md)."""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np


def write_log(out: str, records: int, threads: int = 8, gpu: bool = False, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    header = {"traceq_timer": 1, "writer": "make_timer_log", "epoch_ns": 1_795_279_013_106_961_230,
              "perf_ns": 2_221_569_026_564, "host": "bench", "pid": 1000, "rank": 0, "world_size": 1}
    keys = ["step", "forward", "backward", "optimizer"] + [f"layer{i}/block" for i in range(300)]
    with open(out, "w") as f:
        f.write(json.dumps(header) + "\n")
        if gpu:
            f.write('{"gpu_timing":"cuda_events","pid":1000,"device_index":0,"device_name":"H100",'
                    '"sm_count":132,"memory_bytes":85000000000}\n')
        done, block = 0, 100_000
        t = np.full(threads, 2_221_569_500_000, np.int64)
        while done < records:
            n = min(block, records - done)
            tid = rng.integers(0, threads, n)
            dur = rng.integers(1_000, 2_000_000, n)
            lines = []
            for i in range(n):   # a generator, not traceq: a Python loop is fine here
                th = int(tid[i])
                s = int(t[th]) + int(rng.integers(0, 500)) if i % 3 else int(t[th])
                e = s + int(dur[i])
                t[th] = e + 10
                key = keys[i % 4] if i % 5 else keys[4 + int(dur[i]) % 300]
                if gpu and i % 4 == 0:
                    lines.append(f'{{"key":"{key}","start_ns":{s},"end_ns":{e},"pid":1000,"tid":{th},'
                                 f'"gpu":{i}}}\n{{"gpu_id":{i},"pid":1000,"gpu_dur_ns":{dur[i] // 2}}}\n')
                else:
                    lines.append(f'{{"key":"{key}","start_ns":{s},"end_ns":{e},"pid":1000,"tid":{th}}}\n')
            f.write("".join(lines))
            done += n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--records", type=int, default=5_000_000)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--gpu", action="store_true")
    args = ap.parse_args(argv)
    write_log(args.out, args.records, args.threads, args.gpu)
    return 0


if __name__ == "__main__":
    sys.exit(main())
