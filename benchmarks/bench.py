"""traceq performance benchmark (issue 11, DESIGN.md §7): every goal, one run, side by side
with HTA 0.5.0. Each measurement is a whole, fresh process as a user runs it.

Parts (`--parts`, default all):

  hta       HTA `TraceAnalysis(trace_dir=DIR)` load of the 1x original (.json, .json.gz)
            and of the 8x replica: the reference of the ingest ratios.
  ingest    `traceq ingest FILE --store <fresh>` of the 1x original (.json, .json.gz) and of
            the 1x, 8x, 16x, 32x replicas: wall, CPU, peak RSS; ratios vs HTA; growth
            exponents (log-log slope) of time and RSS from 1x to 32x.
  decode    the limit: msgspec decoding the same bytes (generic and typed, timed inside a
            fresh process) for 1x and 8x, and traceq's ingest as a multiple of it.
  cores     a directory of 8 rank files ingested in one command, and the one 8x file:
            wall, CPU (user+sys of the process tree), utilisation = CPU / wall / cores.
  nsys      nsys SQLite ingest rows/s on a real export grown to >= 2 M activity rows; and
            (not with --quick) peak RSS of one ingest of the export grown to >= 4 M and
            >= 8 M rows, with the growth exponent over the three sizes (reported: memory
            of nsys ingest bounded whatever the export's size).
  startup   `traceq --help` and every analysis command on a small run, whole process
            (benchmarks/bench_startup.py when present, else measured here).
  analyses  every analysis command on the 1x, 8x and 32x runs after ingest, and their
            growth exponents.

It prints a table per part and a final goals table, and writes benchmarks/results.json.
Inputs and the HTA venv are cached in benchmarks/.cache/. See benchmarks/README.md.

    python benchmarks/bench.py                       # everything (~15 min on 2 cores)
    python benchmarks/bench.py --quick               # 1x and 8x only, one repeat each
    python benchmarks/bench.py --parts ingest,decode # a subset
    python benchmarks/bench.py --reuse-cache /work/main/benchmarks/.cache
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import bench_inputs as inputs  # noqa: E402
from bench_measure import RSS_TOOL, fmt, headline, log, measure, slope, summarize  # noqa: E402
from bench_report import HTA_KEYS, INGEST_SCALES, label, report  # noqa: E402

PARTS = ("hta", "ingest", "decode", "cores", "nsys", "startup", "analyses")
ALIASES = {"kineto": "ingest", "help": "startup"}  # names of earlier versions
ANALYSIS_SCALES = (1, 8, 32)
NSYS_GROWTH_ROWS = (4_000_000, 8_000_000)   # the nsys export grown further: memory at size
DECODE_KEYS = ("json", "rep8")
ANALYSES = ("hotspots", "summary", "overlap", "breakdown", "stalls", "diagnose", "diff", "roofline", "overview",
            "operators", "memory", "critical-path", "report")
# the analyses that read the run's findings kept beside the store: the "Fix first" line, and
# diagnose (its verdict too)
CACHED_FINDINGS = ("hotspots", "summary", "overlap", "breakdown", "stalls", "diagnose", "overview")
SMALL_ANALYSES = ("hotspots", "summary", "overlap", "breakdown", "stalls", "diagnose", "diff")

def traceq_cmd() -> list[str] | None:
    r = subprocess.run([sys.executable, "-c", "import traceq.cli"], capture_output=True)
    if r.returncode != 0:
        return None
    # traceq's modules as bytecode, as an installed package has them: from a source checkout
    # under PYTHONDONTWRITEBYTECODE every measured process would compile them again (~20 ms)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "traceq")], capture_output=True)
    # The console script beside this interpreter (not a pyenv/asdf shim, which adds its
    # own start-up), else whatever `traceq` is on PATH, else `python -m traceq.cli`.
    exe = Path(sys.executable).parent / "traceq"
    if exe.exists():
        return [str(exe)]
    found = shutil.which("traceq")
    return [found] if found else [sys.executable, "-m", "traceq.cli"]


def _git(*args: str) -> str:
    r = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


def machine_facts() -> dict:
    cpu_model = ""
    try:
        m = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())
        cpu_model = m.group(1).strip() if m else ""
    except OSError:
        pass
    mem = None
    try:
        m = re.search(r"MemTotal:\s*(\d+) kB", Path("/proc/meminfo").read_text())
        mem = round(int(m.group(1)) * 1024 / 1e9, 1) if m else None
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "cpu_model": cpu_model, "mem_total_gb": mem,
            "platform": platform.platform(), "python": platform.python_version(),
            "rss_tool": RSS_TOOL,
            "note": "shared machine: other sessions' work runs beside the benchmark; see the "
                    "load averages at start and end and per measurement (load1_max)"}


def versions(hta: str | None) -> dict:
    code = ("import importlib.metadata as m, json; print(json.dumps({p: m.version(p) for p in "
            "('traceq', 'msgspec', 'duckdb', 'polars', 'pyarrow')}))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    v = json.loads(r.stdout) if r.returncode == 0 else {}
    v["HolisticTraceAnalysis"] = hta
    return v


def _probe(argv: list[str], repeats: int) -> tuple[list[dict], str | None]:
    """Run a limit probe (a script printing one JSON line) `repeats` times in fresh processes:
    its results, and the error of the first failing run (then it stops)."""
    vals: list[dict] = []
    for _ in range(repeats):
        r = subprocess.run([sys.executable, *argv], capture_output=True, text=True)
        if r.returncode != 0:
            return vals, (r.stderr or r.stdout)[-1000:]
        vals.append(json.loads(r.stdout.strip().splitlines()[-1]))
    return vals, None


class Bench:
    def __init__(self, args, parts: set[str]):
        self.args = args
        self.parts = parts
        self.stat = args.stat
        q = args.quick
        self.ingest_scales = (1, 8) if q else INGEST_SCALES
        self.nsys_sizes = () if q else NSYS_GROWTH_ROWS
        self.analysis_scales = (1, 8) if q else ANALYSIS_SCALES
        r = args.repeats
        self.rep = {"ingest": r or (1 if q else 3), "big": r or (1 if q else 2),
                    "hta": r or (1 if q else 3), "hta_big": r or (1 if q else 2),
                    "decode": r or (1 if q else 3), "cores": r or (1 if q else 3),
                    "nsys": r or (1 if q else 3), "startup": r or (2 if q else 5),
                    "analyses": r or (1 if q else 3)}
        self.work = Path(tempfile.mkdtemp(prefix="traceq-bench-"))
        self.tq: list[str] | None = None
        self.files: dict[str, Path] = {}
        self.stores: dict[str, Path] = {}
        self.res: dict = {}

    # ------------------------------------------------------------------ helpers
    def json_mb(self, key: str) -> float:
        """Uncompressed JSON size in MB (the .gz counts as its decompressed text)."""
        return self.files["json" if key == "gz" else key].stat().st_size / 1e6

    def ingest(self, key: str) -> dict:
        """traceq ingest of one input (memoised): `repeats` fresh stores; a replica's last
        store is kept (run name = key) for the analyses."""
        done = self.res.setdefault("ingest", {})
        if key in done:
            return done[key]
        path = self.files[key]
        big = key.startswith("rep") and int(key[3:]) >= 16
        repeats = self.rep["big" if big else "ingest"]
        log(f"traceq ingest {label(key)} ({self.json_mb(key):.0f} MB JSON) x{repeats}")
        runs = []
        for i in range(repeats):
            store = self.work / f"store-{key}-{i}"
            extra = ["--run", key] if key.startswith("rep") else []
            runs.append(measure(self.tq + ["ingest", str(path), "--store", str(store), "-q"]
                                + extra, cwd=self.work))
            keep = key.startswith("rep") and i == repeats - 1 and runs[-1]["rc"] == 0
            if keep:
                self.stores[key] = store
            else:
                shutil.rmtree(store, ignore_errors=True)
        s = summarize(runs, self.stat)
        s["json_mb"] = self.json_mb(key)
        s["input"] = str(path)
        done[key] = s
        log(f"  -> {fmt(s.get('wall_s'))} s, cpu {fmt(s.get('cpu_s'))} s, "
            f"{fmt(s.get('peak_rss_mb'), nd=0)} MB" + (f"  ERROR {s['error'][-300:]}"
                                                     if not s.get("ok") else ""))
        return s

    def help_startup(self) -> float:
        """Seconds a bare `traceq --help` takes (subtracted from analysis wall times)."""
        st = self.res.get("startup") or {}
        if st.get("help_s") is not None:
            return st["help_s"]
        if "_help" not in self.res:
            runs = [measure(self.tq + ["--help"]) for _ in range(5)]
            self.res["_help"] = headline([r["wall_s"] for r in runs], self.stat)
        return self.res["_help"]

    # ------------------------------------------------------------------ parts
    def part_hta(self) -> None:
        py, ver = inputs.hta_python()
        self.res["hta_version"] = ver
        if py is None:
            log(f"HTA unavailable: {ver}")
            self.res["hta"] = {"error": ver}
            return
        keys = list(HTA_KEYS)
        if self.args.hta_scaling:
            keys += [f"rep{n}" for n in self.ingest_scales if f"rep{n}" not in keys]
        hta = self.res["hta"] = {}
        code = ("import sys\nfrom hta.trace_analysis import TraceAnalysis\n"
                "TraceAnalysis(trace_dir=sys.argv[1])\n")
        for k in keys:
            rep = self.rep["hta"] if self.json_mb(k) < 100 else self.rep["hta_big"]
            log(f"HTA load {label(k)} ({self.json_mb(k):.0f} MB JSON) x{rep}")
            runs = []
            for _ in range(rep):
                # HTA reads a directory holding only the trace: a fresh folder, a symlink
                d = Path(tempfile.mkdtemp(prefix="hta-dir-", dir=self.work))
                (d / self.files[k].name).symlink_to(self.files[k].resolve())
                try:
                    runs.append(measure([str(py), "-c", code, str(d)], cwd=self.work))
                finally:
                    shutil.rmtree(d, ignore_errors=True)
            hta[k] = summarize(runs, self.stat)
            log(f"  -> {fmt(hta[k].get('wall_s'))} s, {fmt(hta[k].get('peak_rss_mb'), nd=0)} MB")

    def part_ingest(self) -> None:
        for k in ["json", "gz"] + [f"rep{n}" for n in self.ingest_scales]:
            self.ingest(k)
        ing = self.res["ingest"]
        pts = [(n, ing.get(f"rep{n}", {})) for n in self.ingest_scales]
        ok = [(n, s) for n, s in pts if s.get("ok")]
        if len(ok) == len(pts) and len(ok) >= 2:
            self.res["ingest_growth"] = {
                "scales": [n for n, _ in ok],
                "wall_exponent": slope([(n, s["wall_s"]) for n, s in ok]),
                "cpu_exponent": slope([(n, s["cpu_s"]) for n, s in ok]),
                "rss_exponent": slope([(n, s["peak_rss_mb"]) for n, s in ok]),
                "definition": "least-squares slope of log(value) vs log(scale) over the scales",
            }

    def part_decode(self) -> None:
        dec = self.res["decode"] = {}
        probe = str(HERE / "bench_decode.py")
        for k in DECODE_KEYS:
            dec[k] = {}
            for mode in ("generic", "typed"):
                vals, err = _probe([probe, str(self.files[k]), mode], self.rep["decode"])
                if not vals:
                    dec[k][mode] = {"error": err}
                    continue
                dec[k][mode] = {
                    "decode_s": headline([v["decode_s"] for v in vals], self.stat),
                    "decode_s_all": [round(v["decode_s"], 4) for v in vals],
                    "read_s": headline([v["read_s"] for v in vals], self.stat),
                    "events": vals[0]["events"], "bytes": vals[0]["bytes"],
                    "mb_per_s": vals[0]["bytes"] / 1e6 / headline([v["decode_s"] for v in vals],
                                                                  self.stat),
                    "peak_rss_mb": max(v["peak_rss_mb"] for v in vals),
                    "msgspec": vals[0]["msgspec"]}
                log(f"msgspec {mode} decode {label(k)}: {dec[k][mode]['decode_s']:.3f} s")
            t = self.ingest(k)
            for mode in ("generic", "typed"):
                d = dec[k].get(mode) or {}
                if t.get("ok") and d.get("decode_s"):
                    d["traceq_wall_multiple"] = t["wall_s"] / d["decode_s"]
                    d["traceq_cpu_multiple"] = t["cpu_s"] / d["decode_s"]

    def part_cores(self) -> None:
        cpus = os.cpu_count() or 1
        cores = self.res["cores"] = {"cpus": cpus}
        rdir = inputs.rank_dir(self.files["rep1"])
        n_files = len(list(rdir.glob("rank*.json")))
        log(f"traceq ingest of a directory of {n_files} rank files (1x each) "
            f"x{self.rep['cores']}")
        runs = []
        for i in range(self.rep["cores"]):
            store = self.work / f"store-ranks-{i}"
            runs.append(measure(self.tq + ["ingest", str(rdir), "--store", str(store), "-q",
                                           "--run", "ranks"], cwd=self.work))
            shutil.rmtree(store, ignore_errors=True)
        d = summarize(runs, self.stat)
        d.update(files=n_files, json_mb=sum(p.stat().st_size for p in rdir.glob("rank*.json")) / 1e6,
                 input=str(rdir))
        one = self.ingest("rep1")
        if d.get("ok") and one.get("ok"):
            d["serial_estimate_s"] = n_files * one["wall_s"]
            d["speedup_vs_serial"] = d["serial_estimate_s"] / d["wall_s"]
        cores["rank_dir"] = d
        log(f"  -> {fmt(d.get('wall_s'))} s, cpu {fmt(d.get('cpu_s'))} s, "
            f"{fmt(d.get('cores_used'))} cores" + (f"  ERROR {d['error'][-300:]}"
                                                  if not d.get("ok") else ""))
        for k in ("rep8",) + (("rep32",) if 32 in self.ingest_scales else ()):
            s = self.ingest(k)
            cores[f"one_file_{k[3:]}x"] = {
                "wall_s": s.get("wall_s"), "cpu_s": s.get("cpu_s"), "cores_used": s.get("cores_used"),
                "json_mb": s.get("json_mb")}
        for v in cores.values():
            if isinstance(v, dict) and v.get("cores_used") is not None:
                v["utilisation"] = v["cores_used"] / cpus

    def part_nsys(self) -> None:
        if not inputs.NSYS_SRC.exists():
            self.res["nsys"] = {"error": f"{inputs.NSYS_SRC} not found"}
            return
        log("the large nsys export (built once)")
        path, meta = inputs.nsys_input()
        log(f"  {meta['total_rows']:,} activity rows, {meta['bytes'] / 1e6:.0f} MB; "
            f"traceq ingest x{self.rep['nsys']}")
        runs, counts = [], None
        for i in range(self.rep["nsys"]):
            store = self.work / f"store-nsys-{i}"
            runs.append(measure(self.tq + ["ingest", str(path), "--store", str(store), "-q"],
                                cwd=self.work))
            if counts is None and runs[-1]["rc"] == 0:
                counts = self._row_counts(store)
            shutil.rmtree(store, ignore_errors=True)
        n = self.res["nsys"] = {"input": {**meta, "path": str(path)}, **summarize(runs, self.stat)}
        if n.get("ok") and counts:
            n["rows_ingested"] = counts
            n["rows_total"] = sum(v for v in counts.values() if v)
            n["rows_per_s"] = n["rows_total"] / n["wall_s"]
        n["limit"] = self._nsys_limit(path, n)
        log(f"  -> {fmt(n.get('wall_s'))} s, {fmt(n.get('rows_per_s'), nd=0)} rows/s"
            + (f"  ERROR {n['error'][-300:]}" if not n.get("ok") else ""))
        if n.get("ok") and self.nsys_sizes:
            self.res["nsys_growth"] = self._nsys_growth(meta["total_rows"], n["peak_rss_mb"], n["wall_s"])

    def _nsys_growth(self, rows: int, rss_mb: float, wall_s: float) -> dict:
        """Peak RSS of one ingest of the export grown further (the absurd-time rule's span
        check, the sync-call map and the writers must not grow with it)."""
        sizes = [{"rows": rows, "peak_rss_mb": rss_mb, "wall_s": wall_s}]
        for min_rows in self.nsys_sizes:
            log(f"the nsys export grown to >= {min_rows / 1e6:g} M rows (built once); traceq ingest x1")
            path, meta = inputs.nsys_input(min_rows)
            store = self.work / "store-nsys-big"
            r = measure(self.tq + ["ingest", str(path), "--store", str(store), "-q"], cwd=self.work)
            shutil.rmtree(store, ignore_errors=True)
            if r["rc"] != 0:
                return {"sizes": sizes, "error": (r.get("stderr") or "")[-300:]}
            sizes.append({"rows": meta["total_rows"], "peak_rss_mb": r["peak_rss_mb"], "wall_s": r["wall_s"]})
            log(f"  -> {meta['total_rows']:,} rows: {r['wall_s']:.2f} s, {r['peak_rss_mb']:.0f} MB")
        return {"sizes": sizes,
                "rss_exponent": slope([(d["rows"], d["peak_rss_mb"]) for d in sizes]),
                "wall_exponent": slope([(d["rows"], d["wall_s"]) for d in sizes]),
                "definition": "least-squares slope of log(value) vs log(activity rows in the export)"}

    def _nsys_limit(self, path: Path, n: dict) -> dict:
        """The limit beside the result: the ADBC reads alone of the same chunks, in fresh
        processes (benchmarks/bench_nsys_read.py), and traceq's whole-process wall as a multiple."""
        vals, err = _probe([str(HERE / "bench_nsys_read.py"), str(path)], self.rep["nsys"])
        if not vals:
            return {"error": err}
        read_s = headline([v["read_s"] for v in vals], self.stat)
        out = {"read_s": read_s, "read_s_all": [round(v["read_s"], 4) for v in vals],
               "rows": vals[0]["rows"], "rows_per_s": vals[0]["rows"] / read_s,
               "import_s": headline([v["import_s"] for v in vals], self.stat), "threads": vals[0]["threads"]}
        if n.get("ok") and n.get("wall_s"):
            out["traceq_wall_multiple"] = n["wall_s"] / read_s
        log(f"  limit: the ADBC reads alone {read_s:.3f} s ({out['rows_per_s']:,.0f} rows/s on "
            f"{out['threads']} threads), imports {out['import_s']:.3f} s")
        return out

    def _row_counts(self, store: Path) -> dict:
        counts = {}
        for t in ("gpu_ops", "host_ops", "regions"):
            r = subprocess.run(self.tq + ["sql", f"SELECT count(*) AS n FROM {t}", "--store",
                                          str(store), "--format", "json"],
                               capture_output=True, text=True)
            try:
                counts[t] = int(list(json.loads(r.stdout)[0].values())[0])
            except Exception:  # noqa: BLE001 - a table the store lacks counts as missing
                counts[t] = None
        return counts

    def part_startup(self) -> None:
        st = self.res["startup"] = {}
        try:
            import bench_startup
        except ImportError:
            bench_startup = None
        if bench_startup is not None and callable(getattr(bench_startup, "main", None)):
            log("start-up: benchmarks/bench_startup.py")
            try:
                d = bench_startup.main(["-n", str(self.rep["startup"]), "--no-json",
                                        "--no-ingest",
                                        "--only=" + ",".join(("--help",) + SMALL_ANALYSES)])
                cmds = d.get("commands") or {}
                st["source"] = "benchmarks/bench_startup.py (median of fresh processes)"
                st["help_s"] = (cmds.get("--help [table]") or {}).get("wall_s")
                st["small"] = {name: cmds[f"{name} [table]"]["wall_s"]
                               for name in SMALL_ANALYSES if f"{name} [table]" in cmds}
                st["bench_startup"] = d
            except (Exception, SystemExit) as e:  # noqa: BLE001 - fall back to measuring here
                log(f"bench_startup.main failed ({type(e).__name__}: {e}); measuring here")
                st.clear()
        if st.get("help_s") is None or not st.get("small"):
            self._startup_here(st)
        if st.get("small"):
            st["small_median_s"] = statistics.median(st["small"].values())
        log(f"  --help {fmt(st.get('help_s'), nd=3)} s; analysis on a small run: median "
            f"{fmt(st.get('small_median_s'), nd=3)} s")

    def _startup_here(self, st: dict) -> None:
        """`traceq --help` and each analysis command on a small run (the 1x original,
        ingested as runs `control` and `control2`), median wall of fresh processes."""
        n = self.rep["startup"]
        log(f"start-up: measured here, {n} fresh processes each")
        st["source"] = "bench.py (median of fresh processes)"
        runs = [measure(self.tq + ["--help"]) for _ in range(n)]
        st["help_s"] = statistics.median(r["wall_s"] for r in runs)
        st["help_s_all"] = [round(r["wall_s"], 3) for r in runs]
        store = self.work / "store-small"
        for run in ("control", "control2"):
            subprocess.run(self.tq + ["ingest", str(self.files["gz"]), "--store", str(store),
                                      "--run", run, "-q"], capture_output=True)
        st["small_run"] = f"{self.files['gz'].name} as runs control, control2"
        st["small"], st["small_all"] = {}, {}
        env = {**os.environ, "COLUMNS": "200"}
        for name in SMALL_ANALYSES:
            argv = (["diff", "control", "control2"] if name == "diff"
                    else [name, "--run", "control"])
            rs = [measure(self.tq + argv + ["--store", str(store)], cwd=self.work, env=env)
                  for _ in range(n)]
            ok = [r["wall_s"] for r in rs if r["rc"] == 0]
            if ok:
                st["small"][name] = statistics.median(ok)
                st["small_all"][name] = [round(v, 3) for v in ok]
            else:
                st.setdefault("errors", {})[name] = (rs[-1]["stderr"] or rs[-1]["stdout"])[-500:]
        shutil.rmtree(store, ignore_errors=True)

    def part_analyses(self) -> None:
        cmds = [c for c in ANALYSES if self._has_command(c)]
        an = self.res["analyses"] = {"commands": cmds, "scales": list(self.analysis_scales)}
        keys = [f"rep{n}" for n in self.analysis_scales]
        for k in keys:
            self.ingest(k)
        base = "control_base"
        if "diff" in cmds:  # diff repN against the 1x original in the same store
            for k in keys:
                if k in self.stores:
                    subprocess.run(self.tq + ["ingest", str(self.files["gz"]), "--store",
                                              str(self.stores[k]), "--run", base, "-q"],
                                   capture_output=True)
        startup = self.help_startup()
        an["subtracted_startup_s"] = startup
        for name in cmds:
            d = an[name] = {}
            # the report's budget is set at 8x; beyond it, it is the slowest command by far
            scales = [n for n in self.analysis_scales if name != "report" or n <= 8]
            for n in scales:
                k = f"rep{n}"
                if k not in self.stores:
                    continue
                repeats = self.rep["big" if n >= 16 else "analyses"]
                r = self._time_analysis(name, self.stores[k], k, base, startup, repeats)
                d[n] = r
                log(f"{name} {n}x: CLI {fmt(r.get('time_s'), nd=3)} s (wall "
                    f"{fmt(r.get('wall_s'), nd=3)}), API "
                    f"{fmt((r.get('api') or {}).get('api_s'), nd=3)} s"
                    + (f"  ERROR {r['error'][-300:]}" if not r.get("ok") else ""))
            full = [n for n in scales if (d.get(n) or {}).get("ok")]
            if len(full) == len(scales) > 1:
                d["exponent"] = slope([(n, d[n]["time_s"]) for n in full])
                d["wall_exponent"] = slope([(n, d[n]["wall_s"]) for n in full])
            api = [n for n in scales if ((d.get(n) or {}).get("api") or {}).get("api_s") is not None]
            if len(api) == len(scales) > 1:
                d["api_exponent"] = slope([(n, d[n]["api"]["api_s"]) for n in api])

    def _has_command(self, name: str) -> bool:
        r = subprocess.run(self.tq + [name, "--help"], capture_output=True, text=True)
        return r.returncode == 0

    def _time_analysis(self, name, store, run, base, startup, repeats) -> dict:
        if name == "diff":
            argv = ["diff", base, run]
        elif name == "report":
            argv = ["report", run, "-o", str(self.work / f"report-{run}.html")]
        else:
            argv = [name, "--run", run]
        env = {**os.environ, "COLUMNS": "200"}
        cold = None
        if name in CACHED_FINDINGS:
            # the first analysis after ingest computes the run's findings (its "Fix first"
            # line: kernel evidence and stall attribution) and keeps them beside the store
            # (traceq/engine/findings_cache.py); the repeats below read them. Measured once, cold.
            shutil.rmtree(Path(store) / ".cache", ignore_errors=True)
            cold = measure(self.tq + argv + ["--store", str(store)], cwd=self.work, env=env)
        runs = [measure(self.tq + argv + ["--store", str(store)], cwd=self.work, env=env)
                for _ in range(repeats)]
        res = summarize(runs, self.stat)
        res["cmd"] = " ".join(argv)
        if res.get("ok"):
            # whole-process wall minus the bare CLI start-up: the analysis "after ingest",
            # still including the imports the command needs
            res["time_s"] = max(res["wall_s"] - min(startup, res["wall_s"]), 0.0)
        if cold is not None and cold["rc"] == 0:
            res["cold_wall_s"] = round(cold["wall_s"], 4)
            res["cold_time_s"] = round(max(cold["wall_s"] - min(startup, cold["wall_s"]), 0.0), 4)
        if name == "report":
            html = self.work / f"report-{run}.html"
            res["bytes"] = html.stat().st_size if html.exists() else None
        else:
            api = time_api(name, store, run, base, repeats, self.stat)
            if api:
                res["api"] = api
        return res

    # ------------------------------------------------------------------ run
    def run(self) -> dict:
        res = self.res
        res["machine"] = machine_facts()
        res["git"] = {"commit": _git("rev-parse", "HEAD"), "branch": _git("rev-parse",
                                                                          "--abbrev-ref", "HEAD"),
                      "dirty": bool(_git("status", "--porcelain", "--untracked-files=no"))}
        res["started"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        res["load_avg_start"] = [round(x, 2) for x in os.getloadavg()]
        res["statistic"] = self.stat
        res["repeats"] = self.rep
        res["parts"] = [p for p in PARTS if p in self.parts]
        res["quick"] = self.args.quick
        t0 = time.perf_counter()
        if os.getloadavg()[0] > (os.cpu_count() or 1) * 0.5:
            log(f"warning: load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs: "
                "other work on this machine will inflate the timings")
        need_scales = set()
        if self.parts & {"ingest"}:
            need_scales |= set(self.ingest_scales)
        if self.parts & {"hta", "decode"}:
            need_scales.add(8)
        if "cores" in self.parts:
            need_scales |= {1, 8} | ({32} if 32 in self.ingest_scales else set())
        if "analyses" in self.parts:
            need_scales |= set(self.analysis_scales)
        self.files = inputs.kineto_inputs(sorted(need_scales))
        res["inputs"] = {k: {"path": str(v), "mb": round(v.stat().st_size / 1e6, 1),
                             "json_mb": round(self.json_mb(k), 1)} for k, v in self.files.items()}
        if "hta" in self.parts:
            self.part_hta()
        tq_parts = self.parts - {"hta"}
        if tq_parts:
            self.tq = traceq_cmd()
            if self.tq is None:
                log("traceq is not importable (pip install -e .); traceq parts skipped")
                tq_parts = set()
            else:
                res["traceq_cmd"] = " ".join(self.tq)
        for p in PARTS[1:]:
            if p in tq_parts:
                getattr(self, f"part_{p}")()
        res.pop("_help", None)
        res["versions"] = versions(res.get("hta_version"))
        res["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        res["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
        res["duration_s"] = time.perf_counter() - t0
        shutil.rmtree(self.work, ignore_errors=True)
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
             lambda: fn(store, run_a=base, run_b=run)]
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
    print(json.dumps({"api_s": time.perf_counter() - t0}))
    sys.exit(0)
sys.exit(f"no call signature worked: {err}")
"""


def time_api(name, store, run, base, repeats, stat) -> dict | None:
    r0 = subprocess.run([sys.executable, "-c", "import traceq, sys; "
                         f"sys.exit(0 if callable(getattr(traceq, {name!r}, None)) else 1)"],
                        capture_output=True)
    if r0.returncode != 0:
        return None
    vals, err = [], None
    for _ in range(repeats):
        r = subprocess.run([sys.executable, "-c", _API_PROBE, name, str(store), run, base],
                           capture_output=True, text=True)
        if r.returncode != 0:
            err = (r.stderr or r.stdout)[-1000:]
            break
        vals.append(json.loads(r.stdout.strip().splitlines()[-1])["api_s"])
    if not vals:
        return {"error": err}
    return {"api_s": headline(vals, stat), "api_s_all": [round(v, 4) for v in vals]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", default=",".join(PARTS),
                    help=f"comma-separated subset of {','.join(PARTS)} (each part ingests "
                         "the inputs it needs)")
    ap.add_argument("--quick", action="store_true",
                    help="1x and 8x only (no 16x/32x), one repeat each: a smoke run")
    ap.add_argument("--hta-only", action="store_true", help="same as --parts hta")
    ap.add_argument("--skip-hta", action="store_true", help="every part but hta")
    ap.add_argument("--hta-scaling", action="store_true",
                    help="also time HTA on the 1x/16x/32x replicas (32x: minutes, >5 GB)")
    ap.add_argument("--repeats", type=int, default=None,
                    help="fresh processes per measurement (default 3; 2 for HTA 8x and "
                         "traceq 16x/32x; 5 for start-up)")
    ap.add_argument("--stat", choices=("min", "median"), default="min",
                    help="headline over the repeats (default min = best of N, the least "
                         "disturbed by other load on the shared machine)")
    ap.add_argument("--reuse-cache", action="append", type=Path, default=[],
                    metavar="DIR", help="another benchmarks/.cache to take built inputs and "
                    "the HTA venv from, read-only (repeatable; also $TRACEQ_BENCH_REUSE_CACHE)")
    ap.add_argument("--out", type=Path, default=HERE / "results.json")
    args = ap.parse_args()
    parts = {ALIASES.get(p.strip(), p.strip()) for p in args.parts.split(",") if p.strip()}
    if parts - set(PARTS):
        ap.error(f"unknown --parts {sorted(parts - set(PARTS))}; choose from {PARTS}")
    if args.hta_only:
        parts = {"hta"}
    if args.skip_hta:
        parts.discard("hta")
    env_reuse = os.environ.get("TRACEQ_BENCH_REUSE_CACHE")
    inputs.READ_ONLY_CACHES[:] = [p.resolve() for p in args.reuse_cache
                                  + ([Path(x) for x in env_reuse.split(os.pathsep) if x]
                                     if env_reuse else [])
                                  if p.resolve() != inputs.CACHE.resolve()]
    if not inputs.CONTROL_GZ.exists():
        print(f"benchmark skipped: shared traces not found at {inputs.SHARED} "
              "(set TRACEQ_SHARED to the folder holding traces/)")
        return 0
    res = Bench(args, parts).run()
    report(res)   # prints the tables; adds the ratios and the goals to res
    args.out.write_text(json.dumps(_strip(res), indent=1, default=str) + "\n")
    print(f"\nwrote {args.out} (run took {res['duration_s'] / 60:.1f} min)")
    return 0


def _strip(o):
    if isinstance(o, dict):
        return {str(k): _strip(v) for k, v in o.items() if k not in ("stdout", "stderr")}
    if isinstance(o, list):
        return [_strip(v) for v in o]
    if isinstance(o, float):
        return round(o, 4)
    return o


if __name__ == "__main__":
    sys.exit(main())
