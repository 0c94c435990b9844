"""Peak memory of the analyses on a run of many millions of kernels (issue 36 item 14).

    python benchmarks/bench_memory.py make STORE --kernels 12000000 [--source EXPORT]
    python benchmarks/bench_memory.py measure STORE [--commands summary,overlap,...] [--limit-gb 4]

`make` ingests a real nsys export (default: the CloverLeaf export of ../shared/traces, 1312
kernels and their runtime calls) into STORE, then rewrites the run's gpu_ops and host_ops
files as K copies of themselves one after another in time (copy k shifted by k x (span + 1
ms), correlation ids offset by k x (max + 1)), and the manifest's row counts with them: a
store of the shape a 2.3 GB export ingests to, without the export.

`measure` runs each analysis command through `/usr/bin/time -v` (a fresh process each) and
prints its wall time, peak RSS and exit status; `--limit-gb` runs it under `prlimit --as`
as well (virtual memory: DuckDB reserves more than it touches, so the peak RSS is the
figure to compare). BENCH_CODE=/path/to/checkout measures that checkout's traceq.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CODE = Path(os.environ.get("BENCH_CODE", REPO))
SOURCE = REPO.parent / "shared" / "traces" / "nsys" / "pipit" / "perlmutter-cloverleaf-cuda.sqlite"
COMMANDS = ["summary", "overlap", "stalls", "hotspots", "breakdown", "diagnose", "report"]


def make(store: Path, kernels: int, source: Path = SOURCE) -> None:
    import duckdb

    store = store.resolve()
    shutil.rmtree(store, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "traceq", "ingest", str(source), "--store", str(store), "--run", "big", "-q"],
                   check=True, cwd=CODE, env={**os.environ, "PYTHONPATH": str(CODE)})
    con = duckdb.connect()
    runs = store / "runs.parquet"
    files = {t: next((store / t).glob("run=big/rank=*/*.parquet")) for t in ("gpu_ops", "host_ops")}
    g = str(files["gpu_ops"])
    n0, lo, hi, corr = con.execute(f"SELECT count(*), min(start_ns), max(end_ns), max(correlation) FROM '{g}'").fetchone()
    h = str(files["host_ops"])
    hlo, hhi, hcorr = con.execute(f"SELECT min(start_ns), max(end_ns), max(correlation) FROM '{h}'").fetchone()
    copies = max(1, kernels // n0)
    span = max(hi, hhi) - min(lo, hlo) + 1_000_000
    corr = max(corr or 0, hcorr or 0) + 1
    counts = {}
    for table, path in files.items():
        tmp = path.with_suffix(".tmp")
        con.execute(f"COPY (SELECT * REPLACE (start_ns + k * {span} AS start_ns, end_ns + k * {span} AS end_ns, "
                    f"correlation + k * {corr} AS correlation) FROM '{path}', range({copies}) t(k) ORDER BY k) "
                    f"TO '{tmp}' (FORMAT parquet, COMPRESSION zstd)")
        counts[table] = con.execute(f"SELECT count(*) FROM read_parquet('{tmp}')").fetchone()[0]
        tmp.replace(path)
    con.execute(f"COPY (SELECT * REPLACE ({counts['gpu_ops']}::BIGINT AS n_gpu_ops, {counts['host_ops']}::BIGINT "
                f"AS n_host_ops) FROM read_parquet('{runs}')) TO '{runs}.tmp' (FORMAT parquet)")
    Path(f"{runs}.tmp").replace(runs)
    size = sum(p.stat().st_size for p in store.rglob("*.parquet")) / 1e6
    print(f"{store}: run 'big', {counts['gpu_ops']:,} gpu_ops, {counts['host_ops']:,} host_ops ({copies} copies), "
          f"{size:.0f} MB of Parquet")


def measure(store: Path, commands: list[str], limit_gb: float | None) -> None:
    out = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    for cmd in commands:
        args = ["report", "big", "-o", str(out / "r.html")] if cmd == "report" else [cmd, "--run", "big"]
        full = ["/usr/bin/time", "-v"]
        if limit_gb:
            full += ["prlimit", f"--as={int(limit_gb * 2**30)}"]
        full += [sys.executable, "-m", "traceq", *args, "--store", str(store.resolve())]
        r = subprocess.run(full, capture_output=True, text=True, cwd=CODE,
                           env={**os.environ, "PYTHONPATH": str(CODE), "COLUMNS": "100", "NO_COLOR": "1"})
        wall = re.search(r"Elapsed \(wall clock\) time.*: (\S+)", r.stderr).group(1)
        rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr).group(1)) // 1024
        said = next((ln for ln in r.stderr.splitlines() if ln.startswith("traceq")), "")[:90]
        print(f"{cmd:10} rc={r.returncode}  wall={wall:>8}  peak RSS={rss:6} MB  {said}", flush=True)
    shutil.rmtree(out, ignore_errors=True)


def main(argv: list[str]) -> int:
    mode, store = argv[0], Path(argv[1])
    if mode == "make":
        kernels = int(argv[argv.index("--kernels") + 1]) if "--kernels" in argv else 12_000_000
        make(store, kernels, Path(argv[argv.index("--source") + 1]) if "--source" in argv else SOURCE)
    else:
        commands = argv[argv.index("--commands") + 1].split(",") if "--commands" in argv else COMMANDS
        limit = float(argv[argv.index("--limit-gb") + 1]) if "--limit-gb" in argv else None
        measure(store, commands, limit)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
