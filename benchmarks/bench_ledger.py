"""The time ledger's budget (issue 46, DESIGN budgets): the ledger of the 8x replica (the
HTA `trace_diff/control` trace copied 8 times in time, ~225 MB of JSON) in < 1 s, linear in
events. Times `traceq.engine.ledger.ledger(open_scope(store, run))` in fresh processes on
stores of the 1x and 8x replicas (ingested once into benchmarks/.cache/ledger/), median of
--repeats runs, and checks the partition on each (labels add up to every window exactly).

    python benchmarks/bench_ledger.py [--repeats 3] [--scales 1,8] [--reuse-cache DIR]

Prints one JSON document: per scale the events (host and GPU ops), the median, min and max
wall time of the ledger alone (the store opened and the scope resolved before the clock
starts) computed with the cache off, its rows, ns per event, whether the 8x budget (< 1 s)
is met, and the median time to read it back from <store>/.cache/ledger (kept_median_s).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

BUDGET_8X_S = 1.0

PROBE = r"""
import json, sys, time
from traceq.engine.ledger import LABEL_COLUMNS, ledger
from traceq.engine.scope import open_scope
scope = open_scope(sys.argv[1], sys.argv[2])
scope.ensure_steps()
t0 = time.perf_counter()
lg = ledger(scope)
wall = time.perf_counter() - t0
s = lg.steps
exact = bool(s.height) and all(sum(r[c] for c in LABEL_COLUMNS) == r["window_ns"] for r in s.iter_rows(named=True))
n = scope.df("SELECT (SELECT count(*) FROM host_ops WHERE run = $run) + (SELECT count(*) FROM gpu_ops WHERE run = $run) AS n",
             {"run": scope.run})["n"][0]
print(json.dumps({"wall_s": wall, "rows": s.height, "events": int(n), "exact": exact}))
"""


def store_of(scale: int, trace: Path) -> tuple[Path, str]:
    """A store holding the replica of `scale` (ingested once, kept in benchmarks/.cache)."""
    from bench_inputs import CACHE

    store = CACHE / "ledger" / f"rep{scale}"
    ok = store / ".bench_ok"
    if not ok.exists():
        store.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "traceq", "ingest", str(trace), "--store", str(store),
                        "--run", f"rep{scale}"], check=True, stdout=subprocess.DEVNULL)
        ok.write_text("ingested\n")
    return store, f"rep{scale}"


def main(argv: list[str] | None = None) -> int:
    import os

    import bench_inputs
    from bench_inputs import kineto_inputs

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--scales", default="1,8", help="replica sizes, comma-separated (default 1,8)")
    ap.add_argument("--reuse-cache", action="append", type=Path, default=[], metavar="DIR",
                    help="another benchmarks/.cache to take the replicas from, read-only (as bench.py; "
                         "also $TRACEQ_BENCH_REUSE_CACHE)")
    args = ap.parse_args(argv)
    env = os.environ.get("TRACEQ_BENCH_REUSE_CACHE")
    bench_inputs.READ_ONLY_CACHES[:] = [p.resolve() for p in [*args.reuse_cache, *([Path(env)] if env else [])]
                                        if p.resolve() != bench_inputs.CACHE.resolve()]
    scales = [int(x) for x in args.scales.split(",")]
    files = kineto_inputs(scales)
    out = {"budget_8x_s": BUDGET_8X_S, "scales": {}}
    for n in scales:
        store, run = store_of(n, files[f"rep{n}"])
        def probe(cache: bool) -> list[dict]:
            env = {**os.environ, "TRACEQ_FINDINGS_CACHE": "1" if cache else "0"}
            got = []
            for _ in range(max(1, args.repeats)):
                p = subprocess.run([sys.executable, "-c", PROBE, str(store), run], check=True, capture_output=True,
                                   text=True, env=env)
                got.append(json.loads(p.stdout.strip().splitlines()[-1]))
            return got

        runs = probe(False)   # computed: the sweep itself (the cache off)
        probe(True)           # writes the file beside the store
        kept = probe(True)    # read back, as every command after the first
        walls = [r["wall_s"] for r in runs]
        med = statistics.median(walls)
        out["scales"][f"{n}x"] = {"events": runs[0]["events"], "rows": runs[0]["rows"],
                                  "exact": all(r["exact"] for r in runs + kept), "median_s": round(med, 3),
                                  "min_s": round(min(walls), 3), "max_s": round(max(walls), 3),
                                  "ns_per_event": round(1e9 * med / max(runs[0]["events"], 1), 1),
                                  "kept_median_s": round(statistics.median(r["wall_s"] for r in kept), 3)}
    if "8x" in out["scales"]:
        out["budget_8x_met"] = out["scales"]["8x"]["median_s"] < BUDGET_8X_S
    if "1x" in out["scales"] and "8x" in out["scales"]:
        a, b = out["scales"]["1x"], out["scales"]["8x"]
        out["growth_8x_over_1x"] = round(b["median_s"] / max(a["median_s"], 1e-9), 2)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
