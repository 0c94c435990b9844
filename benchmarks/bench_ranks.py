"""Many ranks: ingest and the cross-rank analysis on the local pool vs Dask (DESIGN §8).

    python benchmarks/bench_ranks.py [--ranks 8,64,256] [--workers 2] [--out FILE]

For each N, `make_many_ranks.py` makes an N-rank run from rank 0 of the real trace_filter
trace (cached in benchmarks/.cache/ranks-N), then, each in a fresh process:

- local: `ingest(jobs=workers)` on the process pool, then `ranks()` on it;
- dask:  the same on a LocalCluster of `workers` single-threaded worker processes that the
         child starts and hands to traceq by its scheduler address.

Measured: wall seconds of the ingest and of `ranks()` (and of its stages: per-rank map,
clock alignment + matching, the rank view, the per-type view), peak RSS of the client
process and of each worker (local: the largest pool child, from RUSAGE_CHILDREN; dask:
ru_maxrss of every worker process). The per-worker and client peaks must not grow with N:
each worker holds one rank at a time, the client holds metadata and per-rank summaries.
Writes benchmarks/results_ranks.json and prints a table.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"


def _generate(n: int) -> Path:
    out = CACHE / f"ranks-{n}"
    if not (out / ".truth.json").exists():
        sys.path.insert(0, str(HERE))
        import make_many_ranks

        shutil.rmtree(out, ignore_errors=True)
        make_many_ranks.make(n, out, straggler=n // 3, delay_ms=2.0, jitter_us=200, clock_skew_us=2000, seed=n)
    return out


def _mib(kib: int) -> float:
    return round(kib / 1024, 1)


def child(n: int, kind: str, workers: int) -> dict:
    """One measurement in this (fresh) process."""
    from traceq.analysis.ranks import ranks
    from traceq.executor import ExecutorSpec
    from traceq.ingest import ingest

    src = _generate(n)
    cluster = client = None
    if kind == "dask":
        from distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                               silence_logs=40)
        client = Client(cluster)
        spec = ExecutorSpec("dask", scheduler=cluster.scheduler_address)
    else:
        spec = ExecutorSpec("local", jobs=workers)
    store = Path(tempfile.mkdtemp(prefix=f"bench-ranks-{n}-"))
    try:
        t0 = time.perf_counter()
        res = ingest([src], store, executor=spec)
        t_ingest = time.perf_counter() - t0
        stages: dict = {}
        t0 = time.perf_counter()
        rr = ranks(store, executor=spec, timings=stages)
        t_ranks = time.perf_counter() - t0
        truth = json.loads((src / ".truth.json").read_text())
        if kind == "dask":
            worker_rss = sorted(_mib(v) for v in client.run(
                lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss).values())
        else:
            worker_rss = [_mib(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)]
        return {"ranks": n, "executor": kind, "workers": workers, "files": len(res),
                "ingest_s": round(t_ingest, 2), "ranks_s": round(t_ranks, 2),
                "ranks_stages_s": {k: round(v, 3) for k, v in stages.items()},
                "client_peak_rss_mib": _mib(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss),
                "worker_peak_rss_mib": worker_rss,
                "straggler_found": rr.straggler["rank"], "straggler_injected": truth["straggler"],
                "instances": rr.instances.height}
    finally:
        if client is not None:
            client.close()
            cluster.close()
        shutil.rmtree(store, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", default="8,64,256")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--executors", default="local,dask")
    ap.add_argument("--out", type=Path, default=HERE / "results_ranks.json")
    ap.add_argument("--child", nargs=2, metavar=("N", "KIND"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(int(a.child[0]), a.child[1], a.workers)))
        return 0
    template = HERE.parent.parent / "shared" / "traces" / "kineto" / "hta" / "trace_filter" / "sampled_rank-0.json.gz"
    if not template.exists():
        print("bench_ranks: ../shared/traces not found; nothing to measure")
        return 0
    rows = []
    for n in (int(x) for x in a.ranks.split(",")):
        t0 = time.perf_counter()
        _generate(n)
        print(f"{n} ranks generated ({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
        for kind in a.executors.split(","):
            p = subprocess.run([sys.executable, __file__, "--child", str(n), kind, "--workers", str(a.workers)],
                               capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
            if p.returncode != 0:
                rows.append({"ranks": n, "executor": kind, "error": p.stderr.strip().splitlines()[-1:]})
            else:
                rows.append(json.loads(p.stdout.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]), file=sys.stderr)
    a.out.write_text(json.dumps({"machine": {"cpus": os.cpu_count()}, "rows": rows}, indent=1))
    print(f"{'ranks':>5} {'executor':>8} {'ingest s':>9} {'ranks s':>8} {'client MiB':>10} {'worker MiB (peak each)':>24}  straggler")
    for r in rows:
        if "error" in r:
            print(f"{r['ranks']:>5} {r['executor']:>8}  error: {r['error']}")
            continue
        print(f"{r['ranks']:>5} {r['executor']:>8} {r['ingest_s']:>9} {r['ranks_s']:>8} {r['client_peak_rss_mib']:>10} "
              f"{','.join(map(str, r['worker_peak_rss_mib'])):>24}  {r['straggler_found']} (injected {r['straggler_injected']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
