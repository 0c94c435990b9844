"""Many ranks: every per-run analysis at 8, 64 and 256 ranks, whole processes, local and Dask.

    python benchmarks/bench_ranks.py [--ranks 8,64,256] [--modes local,dask] [--workers 2]
        [--analyses summary,overlap,...] [--big N:TEMPLATE] [--out FILE]

For each N, `make_many_ranks.py` makes an N-rank NCCL run from rank 0 of the real
trace_filter trace (70 KB per rank, cached in benchmarks/.cache/ranks-N; one seed for every N,
so rank r is the same trace at every size), with per-rank arrival jitter, raw clock errors,
"Seq" on every collective and one straggler (rank N//3, 2 ms late). Then:

- local: `traceq ingest DIR` and each analysis as the user runs it, `traceq A --store S -f json`,
  a fresh process each, with the default executor (one set-based pass while the run fits one
  process). Each analysis twice: `cold` with the store's findings cache removed first (the
  "Fix first" line computed), and `warm` (the cache the first run left, as a user's second
  command finds it). Wall seconds and peak RSS of the process (wait4's ru_maxrss).
- dask: the per-rank analyses (those with --executor) with `--executor dask --scheduler ADDR`
  on a LocalCluster of `--workers` single-threaded workers that this script starts (one cluster
  for every command; the workers' peak RSS read from them at the end); the JSON must equal
  the local one byte for byte.

Checked and written to the results: the straggler that `traceq ranks` names (= the injected
one at every size); that the per-rank rows of ranks 0, 1 and 3 (never the straggler) are the
same at every size (summary, overlap, stalls, diagnose); that Dask's JSON equals local's.
Growth: the exponent b of t = a·N^b between 64 and 256 ranks, per analysis (1 = linear).

`--big N:TEMPLATE`: also ingest + diagnose N ranks made from a larger template (e.g.
256:benchmarks/.cache/traces/rep1.json), locally and on Dask at 1 and 2 workers.

Writes benchmarks/results_ranks.json and prints a table.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"
ANALYSES = ("summary", "overlap", "stalls", "breakdown", "diagnose", "ranks", "hotspots", "roofline", "overview",
            "operators", "memory", "critical-path")
PER_RANK = ("summary", "overlap", "stalls", "breakdown", "diagnose", "overview", "ranks")   # accept --executor
SHARED_RANKS = (0, 1, 3)
SEED = 35


def _generate(n: int, template: Path | None = None, tag: str = "") -> Path:
    out = CACHE / f"ranks{tag}-{n}"
    if not (out / ".truth.json").exists():
        sys.path.insert(0, str(HERE))
        import make_many_ranks

        shutil.rmtree(out, ignore_errors=True)
        kw = {"template": template} if template else {}
        make_many_ranks.make(n, out, straggler=n // 3, delay_ms=2.0, jitter_us=200, clock_skew_us=2000, seed=SEED,
                             seq=True, **kw)
    return out


def timed(cmd: list[str], out: Path | None = None) -> dict:
    """Run `cmd` as a child process: wall seconds, its peak RSS (MiB) and exit status."""
    t0 = time.perf_counter()
    with open(os.devnull, "wb") as devnull:
        p = subprocess.Popen(cmd, stdout=devnull, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace").strip().splitlines() if p.stderr else []
    rc = os.waitstatus_to_exitcode(status)
    res = {"s": round(wall, 2), "rss_mib": round(usage.ru_maxrss / 1024, 1)}
    if rc != 0:
        res["error"] = (err[-1] if err else f"exit {rc}")[:300]
    return res


def traceq(*args: str) -> list[str]:
    return [sys.executable, "-m", "traceq", *args]


def analyse(store: Path, name: str, out: Path, extra: tuple[str, ...] = ()) -> dict:
    return timed(traceq(name, "--store", str(store), "-f", "json", "-o", str(out), *extra))


def per_rank_rows(path: Path, name: str) -> dict:
    """The rows of SHARED_RANKS in an analysis's JSON output (rank -> rows), for the cross-size check."""
    doc = json.loads(path.read_text())
    rows = doc.get("runs") if name == "diagnose" else doc.get("rows")
    out: dict = {}
    for r in rows or []:
        if r.get("rank") in SHARED_RANKS:
            out.setdefault(str(r["rank"]), []).append({k: v for k, v in r.items() if k != "run"})
    return out


def one_size(n: int, modes: list[str], workers: int, analyses: list[str], work: Path) -> dict:
    src = _generate(n)
    truth = json.loads((src / ".truth.json").read_text())
    store = work / f"store-{n}"
    shutil.rmtree(store, ignore_errors=True)
    row: dict = {"ranks": n, "files_mib": round(sum(f.stat().st_size for f in src.glob("*.json.gz")) / 2**20, 1)}
    ing = timed(traceq("ingest", str(src), "--store", str(store)))
    row["ingest"] = ing
    outs = work / f"out-{n}"
    outs.mkdir(exist_ok=True)
    local: dict = {}
    for name in analyses:
        shutil.rmtree(store / ".cache", ignore_errors=True)
        cold = analyse(store, name, outs / f"{name}.json")
        warm = analyse(store, name, outs / f"{name}.warm.json")
        local[name] = {"cold": cold, "warm": warm}
        print(f"  {n:>4} ranks {name:<14} cold {cold['s']:>6} s {cold['rss_mib']:>6} MiB   warm {warm['s']:>6} s"
              + (f"  ERROR {cold.get('error') or warm.get('error')}" if "error" in cold or "error" in warm else ""),
              file=sys.stderr, flush=True)
    row["local"] = local
    if "ranks" in analyses and (outs / "ranks.json").exists():
        doc = json.loads((outs / "ranks.json").read_text())
        row["straggler"] = {"found": (doc.get("straggler") or {}).get("rank"), "injected": truth["straggler"]}
    row["shared_rank_rows"] = {name: per_rank_rows(outs / f"{name}.json", name)
                               for name in ("summary", "overlap", "stalls", "diagnose")
                               if name in analyses and (outs / f"{name}.json").exists()}
    if "dask" in modes:
        row["dask"] = dask_size(store, [a for a in analyses if a in PER_RANK], workers, outs)
    return row


def dask_size(store: Path, analyses: list[str], workers: int, outs: Path) -> dict:
    import resource

    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                           silence_logs=40)
    client = Client(cluster)
    res: dict = {"workers": workers, "analyses": {}}
    try:
        for name in analyses:
            shutil.rmtree(store / ".cache", ignore_errors=True)
            out = outs / f"{name}.dask.json"
            t = analyse(store, name, out, ("--executor", "dask", "--scheduler", cluster.scheduler_address))
            t["same_as_local"] = out.exists() and out.read_bytes() == (outs / f"{name}.json").read_bytes()
            res["analyses"][name] = t
            print(f"        dask {name:<14} {t['s']:>6} s  same as local: {t['same_as_local']}", file=sys.stderr,
                  flush=True)
        res["worker_peak_rss_mib"] = sorted(round(v / 1024, 1) for v in client.run(
            lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss).values())
    finally:
        client.close()
        cluster.close()
    return res


def big(spec: str, work: Path) -> dict:
    """Ingest + diagnose N ranks of a larger template: local, and Dask at 1 and 2 workers."""
    n_s, template = spec.split(":", 1)
    n = int(n_s)
    src = _generate(n, Path(template), tag="-big")
    row: dict = {"ranks": n, "template": template,
                 "files_mib": round(sum(f.stat().st_size for f in src.glob("*.json.gz")) / 2**20, 1)}
    for mode, extra in (("local", ()), ("dask-1", ("--executor", "dask", "--jobs", "1")),
                        ("dask-2", ("--executor", "dask", "--jobs", "2"))):
        store = work / f"big-{mode}"
        shutil.rmtree(store, ignore_errors=True)
        ing = timed(traceq("ingest", str(src), "--store", str(store), *extra))
        diag = analyse(store, "diagnose", work / f"big-{mode}.json", extra)
        row[mode] = {"ingest": ing, "diagnose": diag}
        print(f"  big {n} {mode}: ingest {ing['s']} s, diagnose {diag['s']} s", file=sys.stderr, flush=True)
        shutil.rmtree(store, ignore_errors=True)
    return row


def growth(rows: list[dict]) -> dict:
    """Per analysis, b in t = a·N^b between the two largest sizes (cold runs)."""
    by_n = {r["ranks"]: r for r in rows if "local" in r}
    ns = sorted(by_n)
    if len(ns) < 2:
        return {}
    a, b = ns[-2], ns[-1]
    out = {}
    for name in by_n[b]["local"]:
        ta, tb = by_n[a]["local"].get(name, {}).get("cold", {}).get("s"), by_n[b]["local"][name]["cold"].get("s")
        if ta and tb:
            out[name] = round(math.log(tb / ta) / math.log(b / a), 2)
    return {"between": [a, b], "exponent": out}


def same_across_sizes(rows: list[dict]) -> dict:
    """Per analysis: are the rows of SHARED_RANKS identical at every size?"""
    out = {}
    sized = [r for r in rows if "shared_rank_rows" in r]
    for name in (sized[0]["shared_rank_rows"] if sized else {}):
        vals = [json.dumps(r["shared_rank_rows"].get(name), sort_keys=True) for r in sized]
        out[name] = len(set(vals)) == 1
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", default="8,64,256")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--modes", default="local,dask")
    ap.add_argument("--analyses", default=",".join(ANALYSES))
    ap.add_argument("--big", default=None, metavar="N:TEMPLATE")
    ap.add_argument("--out", type=Path, default=HERE / "results_ranks.json")
    a = ap.parse_args(argv)
    template = HERE.parent.parent / "shared" / "traces" / "kineto" / "hta" / "trace_filter" / "sampled_rank-0.json.gz"
    if not template.exists():
        print("bench_ranks: ../shared/traces not found; nothing to measure")
        return 0
    started, load = time.strftime("%Y-%m-%d %H:%M", time.gmtime()), os.getloadavg()[0]
    work = CACHE / "bench-ranks-work"
    work.mkdir(parents=True, exist_ok=True)
    modes = a.modes.split(",")
    analyses = [x for x in a.analyses.split(",") if x]
    rows = []
    for n in (int(x) for x in a.ranks.split(",")):
        rows.append(one_size(n, modes, a.workers, analyses, work))
        shutil.rmtree(work / f"store-{n}", ignore_errors=True)
    doc = {"machine": {"cpus": os.cpu_count()},
           "note": f"{started}-{time.strftime('%H:%M', time.gmtime())} UTC, load average at the start {load:.1f}",
           "rows": rows, "growth": growth(rows), "same_rows_across_sizes": same_across_sizes(rows)}
    if a.big:
        doc["big"] = big(a.big, work)
    a.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{'ranks':>5} {'ingest':>7} " + " ".join(f"{x[:9]:>9}" for x in analyses) + "  max MiB  straggler")
    for r in rows:
        cold = [r["local"][x]["cold"] for x in analyses]
        print(f"{r['ranks']:>5} {r['ingest']['s']:>7} " + " ".join(f"{c['s']:>9}" for c in cold)
              + f" {max(c['rss_mib'] for c in cold):>8}  {r.get('straggler', {}).get('found')}"
              f" (injected {r.get('straggler', {}).get('injected')})")
    print("growth exponent 64->256:", doc["growth"].get("exponent"))
    print("same rows of ranks 0,1,3 at every size:", doc["same_rows_across_sizes"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
