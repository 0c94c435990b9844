"""Measuring whole processes for the benchmarks: wall time, CPU time (user + system of the
process tree) and peak RSS of one fresh process, and the statistics over repeats.

Peak RSS and CPU time come from GNU `/usr/bin/time -v` (wait4's rusage of the child, which
includes every descendant it waited for: a process pool's workers count in the CPU time;
the peak RSS is the largest single process of the tree, not the sum). Without GNU time a
fresh Python wrapper per measurement reads getrusage(RUSAGE_CHILDREN) instead.

Sizes are decimal: 1 MB = 10^6 bytes.
"""
from __future__ import annotations

import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TIME_BIN = "/usr/bin/time"
MB = 1e6


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _time_v_works() -> bool:
    if not os.access(TIME_BIN, os.X_OK):
        return False
    r = subprocess.run([TIME_BIN, "-v", "true"], capture_output=True, text=True)
    return r.returncode == 0 and "Maximum resident set size" in r.stderr


USE_TIME_V = _time_v_works()
RSS_TOOL = "/usr/bin/time -v" if USE_TIME_V else "getrusage(RUSAGE_CHILDREN) wrapper"

# Fallback when GNU time is absent: a fresh wrapper process per measurement, so that
# RUSAGE_CHILDREN's ru_maxrss (a max over all children ever waited for) is this child's.
_WRAPPER = r"""
import json, resource, subprocess, sys
r = subprocess.run(sys.argv[2:], stdout=open(sys.argv[1] + ".out", "wb"),
                   stderr=open(sys.argv[1] + ".err", "wb"))
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
open(sys.argv[1], "w").write(json.dumps({"rc": r.returncode, "maxrss_kb": ru.ru_maxrss,
                                         "cpu_s": ru.ru_utime + ru.ru_stime}))
"""


def measure(cmd: list[str], cwd: Path | None = None, env: dict | None = None,
            timeout: float = 1800) -> dict:
    """Run `cmd` once as a fresh process: wall s, CPU s (user+sys), peak RSS MB, rc, output."""
    with tempfile.TemporaryDirectory(prefix="tq-meas-") as td:
        stats = Path(td) / "stats"
        if USE_TIME_V:
            full = [TIME_BIN, "-v", "-o", str(stats)] + cmd
            t0 = time.perf_counter()
            r = subprocess.run(full, cwd=cwd, env=env, capture_output=True, text=True,
                               errors="replace", timeout=timeout)
            wall = time.perf_counter() - t0
            txt = stats.read_text(errors="replace") if stats.exists() else ""
            m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", txt)
            rss_kb = int(m.group(1)) if m else 0
            m = re.search(r"Exit status: (\d+)", txt)
            rc = int(m.group(1)) if m else r.returncode
            cpu = sum(float(x) for x in
                      re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)", txt))
            out, err = r.stdout, r.stderr
        else:
            full = [sys.executable, "-c", _WRAPPER, str(stats)] + cmd
            t0 = time.perf_counter()
            subprocess.run(full, cwd=cwd, env=env, timeout=timeout)
            wall = time.perf_counter() - t0
            d = json.loads(stats.read_text())
            rc, rss_kb, cpu = d["rc"], d["maxrss_kb"], d["cpu_s"]
            out = Path(str(stats) + ".out").read_text(errors="replace")
            err = Path(str(stats) + ".err").read_text(errors="replace")
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mb": rss_kb * 1024 / MB, "rc": rc,
            "stdout": out, "stderr": err, "load1": os.getloadavg()[0]}


def summarize(runs: list[dict], stat: str) -> dict:
    """Headline numbers over repeats. `stat` "min": the fastest run (best of N, the least
    disturbed by other load); "median": the median wall. CPU time and cores used
    (cpu/wall) are those of the headline run (for "median", the lower middle run); peak
    RSS is the largest of all runs."""
    ok = [r for r in runs if r["rc"] == 0]
    res: dict = {"runs": len(runs), "ok": len(ok)}
    if ok:
        by_wall = sorted(ok, key=lambda r: r["wall_s"])
        head = by_wall[0] if stat == "min" else by_wall[(len(by_wall) - 1) // 2]
        res["wall_median_s"] = statistics.median(r["wall_s"] for r in ok)
        res["wall_min_s"] = by_wall[0]["wall_s"]
        res["wall_s"] = res["wall_min_s"] if stat == "min" else res["wall_median_s"]
        res["wall_s_all"] = [round(r["wall_s"], 3) for r in ok]
        res["cpu_s"] = head["cpu_s"]
        res["cpu_s_all"] = [round(r["cpu_s"], 3) for r in ok]
        res["cores_used"] = head["cpu_s"] / head["wall_s"] if head["wall_s"] else None
        res["peak_rss_mb"] = max(r["peak_rss_mb"] for r in ok)
        res["peak_rss_mb_all"] = [round(r["peak_rss_mb"], 1) for r in ok]
        res["load1_max"] = max(r["load1"] for r in runs)
    else:
        last = runs[-1]
        res["error"] = (last["stderr"] or last["stdout"])[-2000:]
    return res


def headline(values: list[float], stat: str) -> float:
    return min(values) if stat == "min" else statistics.median(values)


def slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of log(y) against log(x): the growth exponent (1.0 = linear)."""
    pts = [(math.log(x), math.log(max(y, 1e-4))) for x, y in points if y is not None]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    den = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / den if den else None


# ---------------------------------------------------------------------------- printing


def fmt(v, unit="", nd=2):
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:,.{nd}f}{unit}"
    return f"{v}{unit}"


def print_table(title: str, header: list[str], rows: list[list]) -> None:
    w = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h))
         for i, h in enumerate(header)]
    print(f"\n{title}")
    print("  ".join(str(h).ljust(w[i]) for i, h in enumerate(header)))
    print("  ".join("-" * x for x in w))
    for r in rows:
        print("  ".join(str(c).ljust(w[i]) for i, c in enumerate(r)))


def met(v, target, better="le") -> str:
    if v is None:
        return "n/a"
    ok = v <= target if better == "le" else v >= target
    return "met" if ok else "NOT met"
