"""Many ranks: ingest, the cross-rank analysis and the per-rank analyses on the local pool vs
Dask, and the per-rank analyses in one process as before (DESIGN §8).

    python benchmarks/bench_ranks.py [--ranks 8,64,256] [--workers 2] [--modes local,dask,single]
        [--analyses summary,overlap,stalls,breakdown,diagnose] [--out FILE] [--append] [--keep-store]

For each N, `make_many_ranks.py` makes an N-rank run from rank 0 of the real trace_filter
trace (cached in benchmarks/.cache/ranks-N), with per-rank arrival jitter, raw clock errors
and one straggler (rank N//3, 2 ms late). Then, each mode in a fresh process:

- local:  `ingest(jobs=workers)` on the process pool, then `ranks()` and summary, overlap,
          stalls, breakdown, diagnose (registry.compute: a map over ranks, a reduce) on it;
- dask:   the same on a LocalCluster of `workers` single-threaded worker processes that the
          child starts and hands to traceq by its scheduler address (one cluster for all);
- single: the per-rank analyses as before this map existed: in one process over the whole
          run's views (the store the local mode left).

Measured: wall seconds of the ingest, of `ranks()` (and of its stages) and of each per-rank
analysis; peak RSS of the client process after each stage (ru_maxrss only grows) and of each
worker (local: the largest pool child, from RUSAGE_CHILDREN; dask: ru_maxrss of every worker
process). The per-worker and client peaks of local/dask must not grow with N: each worker
holds one rank at a time, the client metadata and per-rank results. The single mode's client
holds every rank's events at once, and grows.
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


ANALYSES = ("summary", "overlap", "stalls", "breakdown", "diagnose")


def _store(n: int) -> Path:
    return CACHE / f"store-{n}"


def _per_rank(store: Path, name: str, spec) -> None:
    """One per-rank analysis as the CLI runs it (`spec` None: the single-process path)."""
    from traceq.analyses.diagnose import diagnose_scoped
    from traceq.analyses.registry import REGISTRY, compute
    from traceq.engine.scope import open_scope

    if name == "diagnose":
        diagnose_scoped(open_scope(store, executor=spec))
        return
    if spec is None:
        REGISTRY[name].compute(open_scope(store))
        return

    compute(REGISTRY[name], store, executor=spec.kind, scheduler=spec.scheduler, jobs=spec.jobs)


def child(n: int, kind: str, workers: int, analyses: tuple[str, ...] = ANALYSES) -> dict:
    """One measurement in this (fresh) process."""
    from traceq.analyses.ranks import ranks
    from traceq.executor import ExecutorSpec
    from traceq.ingest import ingest

    def rss() -> float:
        return _mib(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)

    src = _generate(n)
    cluster = client = None
    if kind == "dask":
        from distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                               silence_logs=40)
        client = Client(cluster)
        spec = ExecutorSpec("dask", scheduler=cluster.scheduler_address)
    elif kind == "local":
        spec = ExecutorSpec("local", jobs=workers)
    else:
        spec = None
    store = _store(n)
    row: dict = {"ranks": n, "executor": kind, "workers": workers if spec else 1}
    client_rss: dict = {"start": rss()}
    try:
        if spec is not None:
            shutil.rmtree(store, ignore_errors=True)
            t0 = time.perf_counter()
            res = ingest([src], store, executor=spec)
            row["files"] = len(res)
            row["ingest_s"] = round(time.perf_counter() - t0, 2)
            client_rss["ingest"] = rss()
            stages: dict = {}
            t0 = time.perf_counter()
            rr = ranks(store, executor=spec, timings=stages)
            row["ranks_s"] = round(time.perf_counter() - t0, 2)
            row["ranks_stages_s"] = {k: round(v, 3) for k, v in stages.items()}
            client_rss["ranks"] = rss()
            truth = json.loads((src / ".truth.json").read_text())
            row.update(straggler_found=rr.straggler["rank"], straggler_injected=truth["straggler"],
                       instances=rr.instances.height)
        times = {}
        for name in analyses:
            t0 = time.perf_counter()
            _per_rank(store, name, spec)
            times[name] = round(time.perf_counter() - t0, 2)
            client_rss[name] = rss()
        row["analysis_s"] = times
        row["client_peak_rss_mib"] = client_rss
        if kind == "dask":
            row["worker_peak_rss_mib"] = sorted(_mib(v) for v in client.run(
                lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss).values())
        elif kind == "local":
            row["worker_peak_rss_mib"] = [_mib(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)]
        return row
    finally:
        if client is not None:
            client.close()
            cluster.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", default="8,64,256")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--modes", default="local,dask,single", help="local, dask, single (the order they run in: "
                    "single reads the store local leaves)")
    ap.add_argument("--analyses", default=",".join(ANALYSES), help="per-rank analyses to time (default: all)")
    ap.add_argument("--out", type=Path, default=HERE / "results_ranks.json")
    ap.add_argument("--append", action="store_true", help="add the rows to those already in --out")
    ap.add_argument("--keep-store", action="store_true", help="keep the store local/dask wrote (benchmarks/.cache/"
                    "store-N) for a later --modes single run")
    ap.add_argument("--child", nargs=2, metavar=("N", "KIND"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(int(a.child[0]), a.child[1], a.workers, tuple(a.analyses.split(",")))))
        return 0
    template = HERE.parent.parent / "shared" / "traces" / "kineto" / "hta" / "trace_filter" / "sampled_rank-0.json.gz"
    if not template.exists():
        print("bench_ranks: ../shared/traces not found; nothing to measure")
        return 0
    old = json.loads(a.out.read_text()) if a.append and a.out.exists() else {"rows": []}
    rows = old["rows"]
    started, load = time.strftime("%Y-%m-%d %H:%M", time.gmtime()), os.getloadavg()[0]
    for n in (int(x) for x in a.ranks.split(",")):
        t0 = time.perf_counter()
        _generate(n)
        print(f"{n} ranks generated ({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
        for kind in a.modes.split(","):
            p = subprocess.run([sys.executable, __file__, "--child", str(n), kind, "--workers", str(a.workers),
                                "--analyses", a.analyses],
                               capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
            if p.returncode != 0:
                rows.append({"ranks": n, "executor": kind, "error": p.stderr.strip().splitlines()[-1:]})
            else:
                rows.append(json.loads(p.stdout.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]), file=sys.stderr)
            note = (f"{started}-{time.strftime('%H:%M', time.gmtime())} UTC, ranks {a.ranks}, modes {a.modes}, "
                    f"{a.workers} workers, load average at the start: {load:.1f} (shared machine)")
            note = "; ".join(x for x in (old.get("note"), note) if x)
            a.out.write_text(json.dumps({"machine": {"cpus": os.cpu_count()}, "note": note, "rows": rows}, indent=1))
        if not a.keep_store:
            shutil.rmtree(_store(n), ignore_errors=True)
    head = f"{'ranks':>5} {'mode':>6} {'ingest':>7} {'ranks':>6} " + " ".join(f"{x:>9}" for x in ANALYSES)
    print(head + f" {'client MiB':>10} {'worker MiB':>12}  straggler")
    for r in rows:
        if "error" in r:
            print(f"{r['ranks']:>5} {r['executor']:>6}  error: {r['error']}")
            continue
        c = r["client_peak_rss_mib"]
        print(f"{r['ranks']:>5} {r['executor']:>6} {r.get('ingest_s', ''):>7} {r.get('ranks_s', ''):>6} "
              + " ".join(f"{r['analysis_s'].get(x, '-'):>9}" for x in ANALYSES)
              + f" {max(c.values()):>10} {','.join(map(str, r.get('worker_peak_rss_mib', []))):>12}"
              + (f"  {r['straggler_found']} (injected {r['straggler_injected']})" if "straggler_found" in r else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
