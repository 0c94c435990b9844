"""Start-up cost of every traceq command on a small run, as whole fresh processes.

Issue 11's start-up goals: `traceq --help` < 0.15 s and an analysis command on a small run
< 0.4 s, whole process (interpreter start-up + imports + work + exit). This script builds two
small stores (cached under benchmarks/.cache/startup/):

- `small`: the 33 MiB `trace_diff/control` Kineto trace (run `control`, ingested twice, as
  `control` and `control2`, for `diff`) and the bundled nsys sample (run `nsys`);
- `xp`: the synthetic experiment tree of sample_traces/make_experiment.py (for `compare`,
  `model`, `check`).

and times every command in table and JSON output, N fresh processes each (default 7), printing
the median wall time and the median CPU time (user + system, which other load on a shared
machine disturbs less). It also times `traceq ingest` of the control trace into a fresh store.

    python benchmarks/bench_startup.py                 # all commands, 7 repeats
    python benchmarks/bench_startup.py -n 11 --only hotspots,summary
    python benchmarks/bench_startup.py --json out.json

`main()` returns the results as a dict (benchmarks/bench.py may call it).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CACHE = HERE / ".cache" / "startup"
SHARED = Path(os.environ.get("TRACEQ_SHARED", REPO.parent / "shared"))
CONTROL_GZ = SHARED / "traces/kineto/hta/trace_diff/control/control.json.gz"
NSYS_SAMPLE = REPO / "sample_traces/nsys_sample.sqlite"
TARGETS = REPO / "sample_traces/targets.toml"

HELP_BUDGET_S = 0.15
ANALYSIS_BUDGET_S = 0.4

# (label, store, argv after `traceq`); "{small}"/"{xp}" are replaced by the store paths.
COMMANDS: list[tuple[str, list[str]]] = [
    ("--help", ["--help"]),
    ("hotspots --help", ["hotspots", "--help"]),
    ("runs", ["runs", "--store", "{small}"]),
    ("sql", ["sql", "SELECT category, count(*) AS n FROM gpu_ops GROUP BY 1 ORDER BY 1", "--store", "{small}"]),
    ("hotspots", ["hotspots", "--store", "{small}", "--run", "control"]),
    ("summary", ["summary", "--store", "{small}", "--run", "control"]),
    ("overlap", ["overlap", "--store", "{small}", "--run", "control"]),
    ("breakdown", ["breakdown", "--store", "{small}", "--run", "control"]),
    ("stalls", ["stalls", "--store", "{small}", "--run", "control"]),
    ("diff", ["diff", "control", "control2", "--store", "{small}"]),
    ("diagnose", ["diagnose", "--store", "{small}", "--run", "control"]),
    ("ranks", ["ranks", "--store", "{small}", "--run", "control"]),
    ("hotspots nsys", ["hotspots", "--store", "{small}", "--run", "nsys"]),
    ("compare", ["compare", "--store", "{xp}", "--where", "p=8"]),
    ("model", ["model", "--store", "{xp}", "--param", "p", "--param", "b"]),
    ("check", ["check", "--store", "{xp}", "--targets", str(TARGETS)]),
    ("doctor", ["doctor", "--store", "{small}"]),
]
NO_JSON = {"--help", "hotspots --help", "doctor"}


# Runs `traceq` from another source tree (e.g. a `git archive` of an older commit), bypassing
# the editable install, for before/after comparisons on the same machine at the same time.
FROM_SOURCE = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in "
               "type(f).__module__]; sys.path.insert(0, sys.argv.pop(1)); sys.argv[0] = 'traceq'; "
               "from traceq.cli import main; main()")


def traceq_cmd(source: str | None = None) -> list[str]:
    if source:
        return [sys.executable, "-c", FROM_SOURCE, str(Path(source).resolve())]
    exe = Path(sys.executable).parent / "traceq"
    if exe.exists():
        return [str(exe)]
    found = shutil.which("traceq")
    return [found] if found else [sys.executable, "-m", "traceq"]


def timed(argv: list[str]) -> dict:
    """One fresh process: wall seconds, CPU seconds (user + system), exit status."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, "rc": r.returncode, "stderr": r.stderr.decode(errors="replace")[-300:]}


def build_stores(tq: list[str]) -> dict[str, Path] | None:
    small, xp = CACHE / "small", CACHE / "xp"
    if not CONTROL_GZ.exists():
        print(f"bench_startup: {CONTROL_GZ} not found (set TRACEQ_SHARED); nothing measured")
        return None
    if not (small / "runs.parquet").exists():
        shutil.rmtree(small, ignore_errors=True)
        for run in ("control", "control2"):
            subprocess.run(tq + ["ingest", str(CONTROL_GZ), "--store", str(small), "--run", run, "-q"], check=True)
        subprocess.run(tq + ["ingest", str(NSYS_SAMPLE), "--store", str(small), "--run", "nsys", "-q"], check=True)
    if not (xp / "runs.parquet").exists():
        shutil.rmtree(xp, ignore_errors=True)
        tree = CACHE / "xp-traces"
        shutil.rmtree(tree, ignore_errors=True)
        subprocess.run([sys.executable, str(REPO / "sample_traces/make_experiment.py"), str(tree)], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run(tq + ["ingest", str(tree), "--recursive", "--store", str(xp), "-q"], check=True)
    return {"small": small, "xp": xp}


def measure(argv: list[str], repeats: int) -> dict:
    runs = [timed(argv) for _ in range(repeats)]
    return {"wall_s": statistics.median(r["wall_s"] for r in runs),
            "wall_min_s": min(r["wall_s"] for r in runs),
            "cpu_s": statistics.median(r["cpu_s"] for r in runs),
            "rc": sorted({r["rc"] for r in runs}),
            "error": next((r["stderr"] for r in runs if r["rc"] not in (0, 1)), None),
            "walls": [round(r["wall_s"], 4) for r in runs]}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--repeats", type=int, default=7, help="fresh processes per command (median)")
    ap.add_argument("--only", help="comma-separated command labels (e.g. hotspots,summary,--help)")
    ap.add_argument("--no-json", action="store_true", help="table output only (skip the -f json runs)")
    ap.add_argument("--no-ingest", action="store_true", help="skip timing the ingest of the control trace")
    ap.add_argument("--json", metavar="FILE", help="also write the results there")
    ap.add_argument("--source", metavar="DIR", help="time the traceq package under DIR (a source tree "
                    "holding traceq/) instead of the installed one")
    args = ap.parse_args(argv)

    stores = build_stores(traceq_cmd())
    tq = traceq_cmd(args.source)
    if stores is None:
        return {}
    only = set(args.only.split(",")) if args.only else None
    results: dict = {"repeats": args.repeats, "command": tq, "commands": {}}
    print(f"{'command':<18} {'format':<6} {'wall (s)':>9} {'min (s)':>8} {'cpu (s)':>8}  budget")
    for label, cmd in COMMANDS:
        if only and label not in only and label.split()[0] not in only:
            continue
        argv_ = [a.format(small=stores["small"], xp=stores["xp"]) for a in cmd]
        for fmt in ("table", "json"):
            if fmt == "json" and (args.no_json or label in NO_JSON):
                continue
            res = measure(tq + argv_ + (["-f", "json"] if fmt == "json" else []), args.repeats)
            budget = HELP_BUDGET_S if label.endswith("--help") else ANALYSIS_BUDGET_S
            res["budget_s"] = budget
            res["ok"] = res["wall_s"] < budget
            results["commands"][f"{label} [{fmt}]"] = res
            flag = "ok" if res["ok"] else "OVER"
            err = f"  rc={res['rc']} {res['error'].strip().splitlines()[-1]}" if res["error"] else ""
            print(f"{label:<18} {fmt:<6} {res['wall_s']:>9.3f} {res['wall_min_s']:>8.3f} {res['cpu_s']:>8.3f}"
                  f"  < {budget:.2f} {flag}{err}", flush=True)
    if not args.no_ingest and (not only or "ingest" in only):
        fresh = CACHE / "ingest-store"
        runs = []
        for _ in range(max(3, args.repeats // 2)):
            shutil.rmtree(fresh, ignore_errors=True)
            runs.append(timed(tq + ["ingest", str(CONTROL_GZ), "--store", str(fresh), "-q"]))
        shutil.rmtree(fresh, ignore_errors=True)
        res = {"wall_s": statistics.median(r["wall_s"] for r in runs), "wall_min_s": min(r["wall_s"] for r in runs),
               "cpu_s": statistics.median(r["cpu_s"] for r in runs), "rc": sorted({r["rc"] for r in runs})}
        results["ingest control.json.gz"] = res
        print(f"{'ingest control.gz':<18} {'-':<6} {res['wall_s']:>9.3f} {res['wall_min_s']:>8.3f} {res['cpu_s']:>8.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return results


if __name__ == "__main__":
    main()
