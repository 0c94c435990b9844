"""traceq performance benchmark (DESIGN.md §7), side by side with HTA 0.5.0.

One run measures, as whole processes (interpreter start-up + import + work, exactly as a
user runs them), wall time and peak RSS of:

  1. Kineto ingest: HTA `TraceAnalysis(trace_dir=DIR)` versus `traceq ingest FILE --store
     <fresh store>` on the 35 MB `trace_diff/control` trace (plain .json and the .json.gz
     users have) and on that trace replicated 8x in time (~250 MB JSON).
  2. nsys SQLite ingest throughput (rows/s) on an export grown to >= 2 M rows by
     replicating the kernel / runtime / memcpy / sync rows of a real Perlmutter export.
  3. `traceq --help` start-up (median of 5 fresh processes).
  4. Every analysis command that exists, on the 1x, 2x, 4x, 8x and 16x replicated traces,
     and the growth exponent (log-log slope of time versus size).

It prints a table and writes benchmarks/results.json. HTA is installed into its own venv
under benchmarks/.cache/ (kept, so re-runs are fast); replicated traces are cached there
too. See benchmarks/README.md.

    python benchmarks/bench.py                 # everything
    python benchmarks/bench.py --hta-only      # only the HTA side (no traceq needed)
    python benchmarks/bench.py --skip-hta      # only the traceq side
    python benchmarks/bench.py --quick         # no 16x, fewer repeats (smoke run)
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import platform
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CACHE = HERE / ".cache"
SHARED = Path(os.environ.get("TRACEQ_SHARED", REPO.parent / "shared"))
CONTROL_GZ = SHARED / "traces/kineto/hta/trace_diff/control/control.json.gz"
NSYS_SRC = SHARED / "traces/nsys/pipit/perlmutter-cloverleaf-cuda.sqlite"
HTA_SPEC = "HolisticTraceAnalysis==0.5.0"
HTA_VENV = CACHE / "hta-venv"
SCALES = (1, 2, 4, 8, 16)
PARTS = ("hta", "kineto", "nsys", "help", "analyses")
ANALYSES = ("hotspots", "summary", "overlap", "breakdown", "stalls", "diff", "report")
NSYS_TABLES = (  # replicated tables; each has start, end, correlationId
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
)
NSYS_MIN_ROWS = 2_000_000
TIME_BIN = "/usr/bin/time"
STAT = "min"  # headline statistic over repeats: "min" (best of N) or "median"

sys.path.insert(0, str(HERE))
from replicate_trace import replicate  # noqa: E402


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------- measuring


def _time_v_works() -> bool:
    if not os.access(TIME_BIN, os.X_OK):
        return False
    r = subprocess.run([TIME_BIN, "-v", "true"], capture_output=True, text=True)
    return r.returncode == 0 and "Maximum resident set size" in r.stderr


USE_TIME_V = _time_v_works()

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
    """Run `cmd` once as a fresh process; wall seconds, peak RSS (MB), rc, output."""
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
            cpu = sum(float(x) for x in re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)", txt))
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
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mb": rss_kb / 1024, "rc": rc,
            "stdout": out, "stderr": err, "load1": os.getloadavg()[0]}


def summarize(runs: list[dict]) -> dict:
    ok = [r for r in runs if r["rc"] == 0]
    res = {"runs": len(runs), "ok": len(ok)}
    if ok:
        res["wall_median_s"] = statistics.median(r["wall_s"] for r in ok)
        res["wall_min_s"] = min(r["wall_s"] for r in ok)
        res["wall_s"] = res["wall_min_s"] if STAT == "min" else res["wall_median_s"]
        res["wall_s_all"] = [round(r["wall_s"], 3) for r in ok]
        res["peak_rss_mb"] = max(r["peak_rss_mb"] for r in ok)
        res["cpu_s"] = min(r["cpu_s"] for r in ok)  # user+sys, least affected by other load
        res["load1_max"] = max(r["load1"] for r in runs)
    else:
        last = runs[-1]
        res["error"] = (last["stderr"] or last["stdout"])[-2000:]
    return res


# ---------------------------------------------------------------------------- inputs


def build_kineto_inputs(work: Path, scales) -> dict:
    """control.json (plain), control.json.gz (as shipped), repN.json for each N."""
    src_sig = f"{CONTROL_GZ.stat().st_size}-{int(CONTROL_GZ.stat().st_mtime)}"
    rep_dir = CACHE / "traces"
    rep_dir.mkdir(parents=True, exist_ok=True)
    files = {"gz": CONTROL_GZ}
    plain = rep_dir / "control.json"
    if not plain.exists():
        plain.write_bytes(gzip.decompress(CONTROL_GZ.read_bytes()))
    files["json"] = plain
    for n in scales:
        out = rep_dir / f"rep{n}.json"
        stamp = rep_dir / f"rep{n}.json.ok"
        if not (out.exists() and stamp.exists() and stamp.read_text() == src_sig):
            log(f"replicating control x{n} -> {out}")
            events = replicate(CONTROL_GZ, n, out)
            stamp.write_text(src_sig)
            (rep_dir / f"rep{n}.json.events").write_text(str(events))
        files[f"rep{n}"] = out
    return files


def trace_dir_for(path: Path, work: Path) -> Path:
    """HTA needs a directory holding only the trace: a fresh folder with a symlink."""
    d = Path(tempfile.mkdtemp(prefix="hta-dir-", dir=work))
    (d / path.name).symlink_to(path.resolve())
    return d


def build_nsys_input(min_rows: int = NSYS_MIN_ROWS) -> tuple[Path, dict]:
    """Copy the Perlmutter export and replicate its activity rows in time to >= min_rows."""
    out = CACHE / "nsys" / f"cloverleaf-x{min_rows}.sqlite"
    meta_path = out.with_suffix(".meta.json")
    if out.exists() and meta_path.exists():
        return out, json.loads(meta_path.read_text())
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    shutil.copyfile(NSYS_SRC, tmp)
    os.chmod(tmp, 0o644)
    con = sqlite3.connect(tmp)
    tables = [t for t in NSYS_TABLES
              if con.execute("SELECT 1 FROM sqlite_master WHERE name=?", (t,)).fetchone()]
    base = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}
    lo = min(con.execute(f"SELECT min(start) FROM {t}").fetchone()[0] for t in tables)
    hi = max(con.execute(f"SELECT max(end) FROM {t}").fetchone()[0] for t in tables)
    max_corr = max(con.execute(f"SELECT coalesce(max(correlationId),0) FROM {t}").fetchone()[0]
                   for t in tables)
    shift = (hi - lo) + 1_000_000
    id_step = max_corr + 1
    per_copy = sum(base[t] for t in tables if t != "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")
    copies = math.ceil(min_rows / per_copy)  # copies of kernel+runtime+memcpy >= min_rows
    con.execute("CREATE TEMP TABLE k(k INTEGER)")
    con.executemany("INSERT INTO k VALUES (?)", [(i,) for i in range(1, copies)])
    for t in tables:
        cols = [r[1] for r in con.execute(f"PRAGMA table_info({t})")]
        sel = []
        for c in cols:
            if c in ("start", "end"):
                sel.append(f"{c} + k.k * {shift}")
            elif c == "correlationId":
                sel.append(f"CASE WHEN correlationId IS NULL THEN NULL "
                           f"ELSE correlationId + k.k * {id_step} END")
            else:
                sel.append(f'"{c}"')
        collist = ", ".join(f'"{c}"' for c in cols)
        con.execute(f"CREATE TEMP TABLE orig AS SELECT * FROM {t}")
        con.execute(f"INSERT INTO {t} ({collist}) SELECT {', '.join(sel)} "
                    f"FROM orig, k ORDER BY k.k")
        con.execute("DROP TABLE orig")
    con.commit()
    counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}
    con.close()
    os.replace(tmp, out)
    meta = {"source": str(NSYS_SRC), "copies": copies, "base_rows": base, "rows": counts,
            "total_rows": sum(counts.values()), "bytes": out.stat().st_size}
    meta_path.write_text(json.dumps(meta, indent=1))
    return out, meta


# ---------------------------------------------------------------------------- HTA


def ensure_hta() -> tuple[Path | None, str]:
    from venvs import ensure_venv

    return ensure_venv(HTA_VENV, HTA_SPEC, "import hta, importlib.metadata as m; "
                                           "print(m.version('HolisticTraceAnalysis'))", log)


HTA_LOAD = ("import sys\nfrom hta.trace_analysis import TraceAnalysis\n"
            "TraceAnalysis(trace_dir=sys.argv[1])\n")


def time_hta(py: Path, trace: Path, work: Path, repeats: int) -> dict:
    runs = []
    for _ in range(repeats):
        d = trace_dir_for(trace, work)
        try:
            runs.append(measure([str(py), "-c", HTA_LOAD, str(d)], cwd=work))
        finally:
            shutil.rmtree(d, ignore_errors=True)
    return summarize(runs)


# ---------------------------------------------------------------------------- traceq


def traceq_cmd() -> list[str] | None:
    r = subprocess.run([sys.executable, "-c", "import traceq.cli"], capture_output=True)
    if r.returncode != 0:
        return None
    # The console script beside this interpreter (not a pyenv/asdf shim, which adds its
    # own start-up), else whatever `traceq` is on PATH, else `python -m traceq.cli`.
    exe = Path(sys.executable).parent / "traceq"
    if exe.exists():
        return [str(exe)]
    found = shutil.which("traceq")
    return [found] if found else [sys.executable, "-m", "traceq.cli"]


def time_traceq_ingest(tq: list[str], trace: Path, work: Path, repeats: int,
                       keep_store: Path | None = None, extra: list[str] | None = None) -> dict:
    """Ingest into a fresh store each time; the last store is moved to keep_store."""
    runs = []
    for i in range(repeats):
        store = Path(tempfile.mkdtemp(prefix="tq-store-", dir=work))
        shutil.rmtree(store)  # let traceq create it
        runs.append(measure(tq + ["ingest", str(trace), "--store", str(store)] + (extra or []),
                            cwd=work))
        if keep_store is not None and i == repeats - 1 and runs[-1]["rc"] == 0:
            shutil.rmtree(keep_store, ignore_errors=True)
            shutil.move(str(store), keep_store)
        else:
            shutil.rmtree(store, ignore_errors=True)
    return summarize(runs)


def store_row_counts(tq: list[str], store: Path) -> dict:
    """Rows per canonical table: `traceq sql` first, else the Parquet files directly."""
    counts = {}
    for t in ("gpu_ops", "host_ops", "regions"):
        r = subprocess.run(tq + ["sql", f"SELECT count(*) AS n FROM {t}", "--store", str(store),
                                 "--format", "json"], capture_output=True, text=True)
        n = None
        if r.returncode == 0:
            try:
                rows = json.loads(r.stdout)
                n = int(list(rows[0].values())[0])
            except Exception:  # noqa: BLE001
                n = None
        if n is None:
            files = [p for p in store.rglob("*.parquet") if t in p.parts or p.stem == t
                     or p.parent.name == t or f"/{t}/" in str(p)]
            if files:
                import pyarrow.parquet as pq
                n = sum(pq.ParquetFile(p).metadata.num_rows for p in files)
        counts[t] = n
    return counts


def help_text(tq: list[str]) -> str:
    r = subprocess.run(tq + ["--help"], capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "200", "TERM": "dumb"})
    return r.stdout + r.stderr


def discover_analyses(tq: list[str]) -> list[str]:
    text = help_text(tq)
    found = []
    for name in ANALYSES:
        if not re.search(rf"(^|[\s│|]){name}(\s|$)", text, re.M):
            continue
        r = subprocess.run(tq + [name, "--help"], capture_output=True, text=True)
        if r.returncode == 0:
            found.append(name)
    return found


# A command that reports its own compute time on stderr ("took 0.12 s", "elapsed: 85 ms",
# "computed in 0.3 s") is timed by that; otherwise by wall time minus start-up.
_INPROC = re.compile(r"(?:took|elapsed|computed in|done in)[:=]?\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s)\b",
                     re.I)


def analysis_cmd(tq, name, store, run, base_run, work) -> list[str]:
    if name == "diff":
        return tq + ["diff", base_run, run, "--store", str(store)]
    if name == "report":
        return tq + ["report", run, "-o", str(work / f"report-{run}.html"), "--store", str(store)]
    return tq + [name, "--run", run, "--store", str(store)]


def time_analysis(tq, name, store, run, base_run, work, repeats, startup_s) -> dict:
    cmd = analysis_cmd(tq, name, store, run, base_run, work)
    env = {**os.environ, "COLUMNS": "200"}
    runs = [measure(cmd, cwd=work, env=env) for _ in range(repeats)]
    res = summarize(runs)
    res["cmd"] = " ".join(cmd[len(tq):])
    if res.get("ok"):
        startup = min(startup_s, res["wall_s"])
        inproc = []
        for r in runs:
            m = _INPROC.findall(r["stderr"]) if r["rc"] == 0 else []
            if m:
                v, u = m[-1]
                inproc.append(float(v) / (1000 if u == "ms" else 1))
        if inproc and len(inproc) == res["ok"]:
            res["time_s"] = min(inproc) if STAT == "min" else statistics.median(inproc)
            res["time_source"] = "printed by command"
        else:
            res["time_s"] = res["wall_s"] - startup
            res["time_source"] = "wall - `traceq --help` start-up"
    return res


# The same analysis through the Python API (`traceq.hotspots(store, run=...)`, DESIGN §1)
# in a fresh process, heavy libraries imported first, so the timing is the analysis alone
# (DuckDB connection + views + SQL + result), without interpreter/library start-up.
_API_PROBE = r"""
import importlib, json, sys, time
name, store, run, base = sys.argv[1:5]
for m in ("duckdb", "polars", "pyarrow", "pyarrow.parquet", "numpy"):
    try:
        importlib.import_module(m)
    except ImportError:
        pass
import traceq
fn = getattr(traceq, name)
if name == "diff":
    tries = [lambda: fn(store, base, run), lambda: fn(store, a=base, b=run),
             lambda: fn(store, run_a=base, run_b=run), lambda: fn(store, runs=[base, run])]
else:
    tries = [lambda: fn(store, run=run), lambda: fn(store=store, run=run)]
err = None
for t in tries:
    t0 = time.perf_counter()
    try:
        out = t()
    except TypeError as e:
        err = e
        continue
    dt = time.perf_counter() - t0
    rows = None
    try:
        rows = len(out)
    except Exception:
        pass
    print(json.dumps({"api_s": dt, "rows": rows}))
    sys.exit(0)
sys.exit(f"no call signature worked: {err}")
"""


def time_api(name, store, run, base_run, repeats) -> dict | None:
    r0 = subprocess.run([sys.executable, "-c", "import traceq, sys; "
                         f"sys.exit(0 if callable(getattr(traceq, {name!r}, None)) else 1)"],
                        capture_output=True)
    if r0.returncode != 0:
        return None
    vals, err = [], None
    for _ in range(repeats):
        r = subprocess.run([sys.executable, "-c", _API_PROBE, name, str(store), run,
                            base_run or ""], capture_output=True, text=True)
        if r.returncode != 0:
            err = (r.stderr or r.stdout)[-1000:]
            break
        vals.append(json.loads(r.stdout.strip().splitlines()[-1])["api_s"])
    if not vals:
        return {"error": err}
    return {"api_s": min(vals) if STAT == "min" else statistics.median(vals),
            "api_s_all": [round(v, 4) for v in vals]}


def slope(points: list[tuple[float, float]]) -> float | None:
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
        return f"{v:.{nd}f}{unit}"
    return f"{v}{unit}"


def print_table(title: str, header: list[str], rows: list[list]) -> None:
    w = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h))
         for i, h in enumerate(header)]
    print(f"\n{title}")
    print("  ".join(str(h).ljust(w[i]) for i, h in enumerate(header)))
    print("  ".join("-" * x for x in w))
    for r in rows:
        print("  ".join(str(c).ljust(w[i]) for i, c in enumerate(r)))


def check(v, target, better="le"):
    if v is None:
        return "n/a"
    ok = v <= target if better == "le" else v >= target
    return "PASS" if ok else "FAIL"


# ---------------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hta-only", action="store_true", help="measure HTA only")
    ap.add_argument("--skip-hta", action="store_true", help="do not run HTA")
    ap.add_argument("--quick", action="store_true", help="scales 1,2,4,8; 1 repeat")
    ap.add_argument("--repeats", type=int, default=None,
                    help="runs per measurement; default 3 (HTA on >100 MiB: 2; analyses: 5)")
    ap.add_argument("--stat", choices=("min", "median"), default="min",
                    help="headline statistic over the repeats (default min = best of N, "
                         "the least disturbed by other load on the machine)")
    ap.add_argument("--hta-scaling", action="store_true",
                    help="also time HTA on every scale (16x takes ~1.5 min and ~3 GB)")
    ap.add_argument("--parts", default=",".join(PARTS),
                    help=f"comma-separated subset of {','.join(PARTS)} (analyses also "
                         "ingests the replicated traces it needs)")
    ap.add_argument("--out", type=Path, default=HERE / "results.json")
    args = ap.parse_args()
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if parts - set(PARTS):
        ap.error(f"unknown --parts {sorted(parts - set(PARTS))}; choose from {PARTS}")
    if args.hta_only:
        parts = {"hta"}
    if args.skip_hta:
        parts.discard("hta")

    if not CONTROL_GZ.exists():
        print(f"benchmark skipped: shared traces not found at {SHARED} "
              "(set TRACEQ_SHARED to the folder holding traces/)")
        return 0

    global STAT
    STAT = args.stat
    scales = (1, 2, 4, 8) if args.quick else SCALES
    rep_tq = args.repeats or (1 if args.quick else 3)
    rep_hta_small = args.repeats or (1 if args.quick else 3)
    rep_hta_large = args.repeats or (1 if args.quick else 2)
    rep_an = args.repeats or (1 if args.quick else 5)
    work = Path(tempfile.mkdtemp(prefix="traceq-bench-"))
    results: dict = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(),
                    "rss_tool": "/usr/bin/time -v" if USE_TIME_V else "getrusage wrapper"},
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "load1_at_start": os.getloadavg()[0],
        "statistic": args.stat,
    }
    if os.getloadavg()[0] > (os.cpu_count() or 1) * 0.5:
        log(f"warning: load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs: "
            "other work on this machine will inflate the timings")
    try:
        files = build_kineto_inputs(work, scales)
        sizes = {k: v.stat().st_size for k, v in files.items()}
        json_mb = {k: sizes[k] / 2**20 for k in sizes}
        plain_mb = {"gz": json_mb["json"], **{k: json_mb[k] for k in json_mb if k != "gz"}}
        results["inputs"] = {k: {"path": str(v), "mib": round(json_mb[k], 1),
                                 "uncompressed_mib": round(plain_mb[k], 1)}
                             for k, v in files.items()}

        # ---- HTA
        hta = {}
        if "hta" in parts:
            py, ver = ensure_hta()
            results["hta_version"] = ver
            if py is None:
                log(f"HTA unavailable: {ver}")
                hta = None
            else:
                hta_keys = ["json", "gz", "rep8"]
                if args.hta_scaling:
                    hta_keys += [f"rep{n}" for n in scales if n != 8]
                for k in hta_keys:
                    if k not in files:
                        continue
                    rep = rep_hta_small if plain_mb[k] < 100 else rep_hta_large
                    log(f"HTA load {k} ({json_mb[k]:.0f} MiB) x{rep}")
                    hta[k] = time_hta(py, files[k], work, rep)
                    log(f"  -> {hta[k].get('wall_s')} s, {hta[k].get('peak_rss_mb')} MB")
        results["hta"] = hta

        tq = traceq_cmd() if parts - {"hta"} else None
        if tq is None and parts - {"hta"}:
            log("traceq is not importable (pip install -e .); traceq parts skipped")
            results["traceq"] = None

        if tq is not None:
            results["traceq_cmd"] = " ".join(tq)
            # ---- start-up
            hs = [measure(tq + ["--help"]) for _ in range(5)]
            help_median = statistics.median(r["wall_s"] for r in hs)
            startup = min(r["wall_s"] for r in hs) if STAT == "min" else help_median
            results["help"] = {"wall_s": help_median, "wall_min_s": min(r["wall_s"] for r in hs),
                               "peak_rss_mb": max(r["peak_rss_mb"] for r in hs),
                               "all": [round(r["wall_s"], 3) for r in hs],
                               "rc": [r["rc"] for r in hs], "subtracted_startup_s": startup}
            log(f"traceq --help median {help_median:.3f} s")
            # What any command that touches data pays before its first query: a fresh
            # interpreter importing the heavy libraries (reference for the CLI timings).
            li = [measure([sys.executable, "-c", "import duckdb, polars, pyarrow.parquet, numpy, "
                           "rich.table, typer"]) for _ in range(5)]
            results["libs_import"] = summarize(li)
            log(f"python + duckdb/polars/pyarrow/numpy/rich/typer import: "
                f"{results['libs_import'].get('wall_s')} s")

            # ---- Kineto ingest
            stores = {}
            ing = {}
            keys = ((["json", "gz"] if "kineto" in parts else [])
                    + ([f"rep{n}" for n in scales] if parts & {"kineto", "analyses"} else []))
            for k in keys:
                rep = rep_tq
                keep = None
                if k.startswith("rep"):
                    keep = work / f"store-{k}"
                    stores[k] = keep
                log(f"traceq ingest {k} ({json_mb[k]:.0f} MiB) x{rep}")
                ing[k] = time_traceq_ingest(tq, files[k], work, rep, keep_store=keep,
                                            extra=["--run", k] if keep else None)
                ing[k]["rss_over_json"] = (ing[k]["peak_rss_mb"] / plain_mb[k]
                                           if ing[k].get("ok") else None)
                log(f"  -> {ing[k].get('wall_s')} s, {ing[k].get('peak_rss_mb')} MB"
                    + (f"  ERROR {ing[k]['error'][-300:]}" if not ing[k].get("ok") else ""))
            if ing:
                results["traceq_ingest"] = ing

            # ---- nsys ingest
            if "nsys" in parts and NSYS_SRC.exists():
                log("building the large nsys export")
                nsys_file, meta = build_nsys_input()
                log(f"  {meta['total_rows']} activity rows, {meta['bytes'] / 2**20:.0f} MiB")
                store = work / "store-nsys"
                r = time_traceq_ingest(tq, nsys_file, work, rep_tq, keep_store=store)
                nsys = {"input": meta, **r}
                if r.get("ok"):
                    counts = store_row_counts(tq, store)
                    nsys["rows_ingested"] = counts
                    total = sum(v for v in counts.values() if v)
                    nsys["rows_total"] = total
                    nsys["rows_per_s"] = total / r["wall_s"] if total else None
                    shutil.rmtree(store, ignore_errors=True)
                results["nsys_ingest"] = nsys
                log(f"  -> {nsys.get('wall_s')} s, {nsys.get('rows_per_s')} rows/s"
                    + (f"  ERROR {nsys['error'][-300:]}" if not nsys.get("ok") else ""))

            # ---- analyses at every scale
            cmds = discover_analyses(tq) if "analyses" in parts else []
            results["analyses_found"] = cmds
            log(f"analysis commands found: {cmds}")
            base_run = None
            if "diff" in cmds:  # diff repN against the 1x original in the same store
                base_run = "control_base"
                for k, s in stores.items():
                    subprocess.run(tq + ["ingest", str(files["gz"]), "--store", str(s),
                                         "--run", base_run], capture_output=True)
            an: dict = {}
            for name in cmds:
                an[name] = d = {}
                for n in scales:
                    k = f"rep{n}"
                    if k not in stores or not stores[k].exists():
                        continue
                    r = time_analysis(tq, name, stores[k], k, base_run, work, rep_an, startup)
                    if name == "report":   # its budget is the whole process and the file size
                        html = work / f"report-{k}.html"
                        r["bytes"] = html.stat().st_size if html.exists() else None
                    if name != "report":
                        api = time_api(name, stores[k], k, base_run, rep_an)
                        if api:
                            r["api"] = api
                    d[n] = r
                    api_txt = (r.get("api") or {}).get("api_s")
                    log(f"{name} x{n}: CLI {fmt(r.get('time_s'), nd=3)} s (wall "
                        f"{fmt(r.get('wall_s'), nd=3)}), API {fmt(api_txt, nd=3)} s"
                        + (f"  ERROR {r['error'][-300:]}" if not r.get("ok") else "")
                        + (f"  API ERROR {r['api']['error'][-300:]}"
                           if (r.get("api") or {}).get("error") else ""))
                ns = [n for n in d if isinstance(n, int)]
                ok = [n for n in ns if d[n].get("ok")]
                full = len(ok) == len(scales)
                d["exponent"] = slope([(n, d[n]["time_s"]) for n in ok]) if full else None
                d["wall_exponent"] = slope([(n, d[n]["wall_s"]) for n in ok]) if full else None
                api_ok = [n for n in ns if (d[n].get("api") or {}).get("api_s") is not None]
                d["api_exponent"] = (slope([(n, d[n]["api"]["api_s"]) for n in api_ok])
                                     if len(api_ok) == len(scales) else None)
            if an:
                results["analyses"] = an
    finally:
        shutil.rmtree(work, ignore_errors=True)

    results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    report(results, plain_mb)  # also adds the HTA/traceq ratios to results
    args.out.write_text(json.dumps(_strip(results), indent=1, default=str))
    print(f"\nwrote {args.out}")
    return 0


def _strip(o):
    if isinstance(o, dict):
        return {str(k): _strip(v) for k, v in o.items() if k not in ("stdout", "stderr")}
    if isinstance(o, list):
        return [_strip(v) for v in o]
    if isinstance(o, float):
        return round(o, 4)
    return o


def report(res: dict, plain_mb: dict) -> None:
    hta = res.get("hta") or {}
    ing = res.get("traceq_ingest") or {}
    rows = []
    labels = {"json": "control 1x .json", "gz": "control 1x .json.gz", "rep8": "control x8 .json"}
    for k in ("json", "gz", "rep8"):
        h, t = hta.get(k) or {}, ing.get(k) or {}
        ratio = (h["wall_s"] / t["wall_s"]) if h.get("wall_s") and t.get("wall_s") else None
        cratio = (h["cpu_s"] / t["cpu_s"]) if h.get("cpu_s") and t.get("cpu_s") else None
        if k in ing and ratio:
            ing[k]["hta_ratio_wall"], ing[k]["hta_ratio_cpu"] = ratio, cratio
        rss2 = 2 * plain_mb.get(k, 0)
        rows.append([labels[k], f"{plain_mb.get(k, 0):.0f}", fmt(h.get("wall_s")),
                     fmt(h.get("cpu_s")), fmt(h.get("peak_rss_mb"), nd=0), fmt(t.get("wall_s")),
                     fmt(t.get("cpu_s")), fmt(t.get("peak_rss_mb"), nd=0), fmt(ratio, "x", 1),
                     fmt(cratio, "x", 1),
                     (check(ratio, 10, "ge") if k == "rep8" else "") ,
                     f"{fmt(t.get('peak_rss_mb'), nd=0)}/{rss2:.0f} "
                     f"{check(t.get('peak_rss_mb'), rss2)}" if t.get("peak_rss_mb") else "n/a"])
    print_table(f"Kineto ingest, whole process, {res.get('statistic')} wall of the repeats "
                "(HTA TraceAnalysis load vs traceq ingest)",
                ["input", "JSON MiB", "HTA s", "HTA cpu s", "HTA MB", "traceq s", "traceq cpu s",
                 "traceq MB", "HTA/traceq", "(cpu)", ">=10x", "traceq RSS <= 2x JSON (MB)"], rows)
    for k in sorted((k for k in hta if k not in labels), key=lambda s: int(s[3:])):
        print(f"  HTA {k}: {fmt(hta[k].get('wall_s'))} s, {fmt(hta[k].get('peak_rss_mb'), nd=0)} MB")
    if ing:
        srows = []
        for k in sorted((k for k in ing if k.startswith("rep")), key=lambda s: int(s[3:])):
            t = ing[k]
            srows.append([k, f"{plain_mb[k]:.0f}", fmt(t.get("wall_s")), fmt(t.get("cpu_s")),
                          fmt(t.get("peak_rss_mb"), nd=0), fmt(t.get("rss_over_json"), "x"),
                          "ok" if t.get("ok") else "ERROR"])
        print_table("traceq ingest scaling", ["input", "JSON MiB", "wall s", "cpu s", "peak MB",
                                              "RSS/JSON", "status"], srows)
    if "help" in res:
        h = res["help"]["wall_s"]
        print(f"\ntraceq --help: median {h:.3f} s of 5, peak {res['help']['peak_rss_mb']:.0f} MB "
              f"(target < 0.5 s: {check(h, 0.5)})")
        li = res.get("libs_import") or {}
        print(f"fresh python importing duckdb+polars+pyarrow+numpy+rich+typer: "
              f"{fmt(li.get('wall_s'), nd=3)} s, {fmt(li.get('peak_rss_mb'), nd=0)} MB "
              "(the floor under any data command's wall time and RSS)")
    if "nsys_ingest" in res:
        n = res["nsys_ingest"]
        rps = n.get("rows_per_s")
        print(f"nsys ingest: {n['input']['total_rows']} source rows "
              f"({n['input']['bytes'] / 2**20:.0f} MiB), wall {fmt(n.get('wall_s'))} s "
              f"(cpu {fmt(n.get('cpu_s'))} s), "
              f"peak {fmt(n.get('peak_rss_mb'), nd=0)} MB, rows ingested "
              f"{n.get('rows_ingested')}, {fmt(rps, nd=0)} rows/s "
              f"(target >= 1M: {check(rps, 1e6, 'ge')})")
    an = res.get("analyses") or {}
    if an:
        scales = sorted({n for d in an.values() for n in d if isinstance(n, int)})
        arows = []
        for name, d in an.items():
            cells = []
            for n in scales:
                r = d.get(n) or {}
                cells.append(fmt(r.get("time_s"), nd=3) if r.get("ok") else
                             ("ERR" if r else "-"))
            t8 = (d.get(8) or {}).get("time_s")
            arows.append([name, "CLI"] + cells + [fmt(d.get("exponent")), check(t8, 1.0),
                                                   check(d.get("exponent"), 1.1)])
            if any((d.get(n) or {}).get("api") for n in scales):
                acells = []
                for n in scales:
                    a = (d.get(n) or {}).get("api") or {}
                    acells.append(fmt(a.get("api_s"), nd=3) if "api_s" in a else
                                  ("ERR" if a else "-"))
                a8 = ((d.get(8) or {}).get("api") or {}).get("api_s")
                arows.append(["", "API"] + acells + [fmt(d.get("api_exponent")), check(a8, 1.0),
                                                      check(d.get("api_exponent"), 1.1)])
        rep = (an.get("report") or {}).get(8) or {}
        if rep.get("ok"):
            mb = (rep.get("bytes") or 0) / 1e6
            print(f"traceq report, 8x (~250 MB) run: whole process {rep['wall_s']:.2f} s (budget < 10 s) "
                  f"{check(rep['wall_s'], 10.0)}; HTML {mb:.1f} MB (budget < 20 MB) {check(mb, 20.0)}")
        print_table(f"Analyses: seconds ({res.get('statistic')} of repeats). CLI = whole-process "
                    "wall minus `traceq --help` start-up (or the time the command prints); "
                    "API = the Python call alone, libraries already imported",
                    ["command", "how"] + [f"{n}x" for n in scales] + ["exponent", "<1s@8x",
                                                                     "<=linear"], arows)


if __name__ == "__main__":
    sys.exit(main())
