"""Peak memory and time of `traceq sql` writing a huge result (issue 51 item 4).

    python benchmarks/bench_sql_stream.py [--rows 100000000] [--formats csv,json] [--limit-gb 3]

Runs `traceq sql "SELECT * FROM range(N)" -f FMT -o FILE` on an empty store in a fresh
process through `/usr/bin/time -v` and prints its wall time, peak RSS, exit status and the
size of the file written (the result streams in Arrow record batches: the peak RSS stays
flat as N grows). `--limit-gb` runs it under `prlimit --as` too (address space: DuckDB
reserves more than it touches). BENCH_CODE=/path/to/checkout measures that checkout's
traceq (e.g. main before the change).
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CODE = Path(os.environ.get("BENCH_CODE", REPO))


def measure(rows: int, fmt: str, limit_gb: float | None, tmp: Path) -> dict:
    out = tmp / f"out.{fmt}"
    cmd = [sys.executable, "-m", "traceq", "sql", f"SELECT * FROM range({rows})", "-f", fmt, "-o", str(out),
           "--store", str(tmp / "store")]
    if limit_gb:
        cmd = ["prlimit", f"--as={int(limit_gb * 2**30)}", *cmd]
    r = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True, cwd=CODE,
                       env={**os.environ, "PYTHONPATH": str(CODE)})
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr)
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", r.stderr)
    last = [l for l in r.stderr.splitlines() if l.startswith("traceq:")]
    size = out.stat().st_size if out.exists() else None
    if out.exists():
        out.unlink()
    return {"rows": rows, "format": fmt, "exit": r.returncode, "wall": wall.group(1) if wall else "?",
            "peak_rss_mb": int(rss.group(1)) / 1024 if rss else None, "file_mb": size / 1e6 if size is not None else None,
            "error": last[0] if last else ""}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000_000)
    ap.add_argument("--formats", default="csv")
    ap.add_argument("--limit-gb", type=float, default=None)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        print(f"traceq at {CODE}")
        for fmt in a.formats.split(","):
            m = measure(a.rows, fmt, a.limit_gb, Path(d))
            rss = f"{m['peak_rss_mb']:.0f} MB" if m["peak_rss_mb"] is not None else "?"
            size = f"{m['file_mb']:.0f} MB" if m["file_mb"] is not None else "none"
            print(f"{m['rows']:>12,} rows  -f {fmt:4}  exit {m['exit']}  wall {m['wall']:>8}  peak RSS {rss:>8}  "
                  f"file {size}  {m['error']}")


if __name__ == "__main__":
    main()
