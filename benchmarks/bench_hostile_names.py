"""Hostile kernel names through `traceq ingest` (issue 36 items 7 and 12): time and peak RSS.

    python benchmarks/bench_hostile_names.py OUTDIR [--only brackets,huge,digits] [--nsys EXPORT]
    (BENCH_CODE=/path/to/other/checkout measures that checkout's traceq)

Writes, for each hostile name, a small Kineto trace (one launch + one kernel of that name) and
a copy of a shared nsys export whose first kernel's name (StringIds) is replaced by it, then
ingests each into a fresh store with `/usr/bin/time -v` and prints wall time and peak RSS:

- brackets: 'void f{' + '('*300000 + '>'*300000 + '}(int)' (1.3 MB trace: quadratic before);
- huge:     a 100 MB name ('void k<' + 'a'*100e6 + '>(int)');
- digits:   '_Z' + 5000 digits (ValueError of int() before).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CODE = Path(os.environ.get("BENCH_CODE", REPO))   # the checkout whose traceq is measured
SHARED_NSYS = REPO.parent / "shared" / "traces" / "nsys" / "DLProf" / "nsys_profile.sqlite"

NAMES = {
    "brackets": lambda: "void f{" + "(" * 300_000 + ">" * 300_000 + "}(int)",
    "huge": lambda: "void k<" + "a" * 100_000_000 + ">(int)",
    "digits": lambda: "_Z" + "1" * 5000,
}


def kineto(name: str, path: Path) -> Path:
    events = [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 100, "ts": 10, "dur": 5,
         "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": 20, "dur": 30,
         "args": {"correlation": 1, "device": 0, "stream": 7}},
    ]
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def nsys(name: str, path: Path, source: Path = SHARED_NSYS) -> Path:
    shutil.copyfile(source, path)
    con = sqlite3.connect(path)
    (sid,) = con.execute("SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start LIMIT 1").fetchone()
    con.execute("UPDATE StringIds SET value = ? WHERE id = ?", (name, sid))
    con.commit()
    con.close()
    return path


def measure(trace: Path, store: Path) -> dict:
    shutil.rmtree(store, ignore_errors=True)
    cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "traceq", "ingest", str(trace), "--store", str(store), "-q"]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=CODE,   # `-m` puts the cwd first on sys.path
                       env={**os.environ, "PYTHONPATH": str(CODE)})
    wall = re.search(r"Elapsed \(wall clock\) time.*: (\S+)", r.stderr).group(1)
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr).group(1))
    first = next((ln for ln in r.stderr.splitlines() if ln.startswith("traceq") or "Error" in ln), "")
    return {"rc": r.returncode, "wall": wall, "rss_mb": rss // 1024, "said": first[:100]}


def main(argv: list[str]) -> int:
    out = Path(argv[0]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    only = argv[argv.index("--only") + 1].split(",") if "--only" in argv else list(NAMES)
    source = Path(argv[argv.index("--nsys") + 1]) if "--nsys" in argv else SHARED_NSYS
    for key in only:
        name = NAMES[key]()
        for fmt, make, suffix in (("kineto", kineto, ".json"), ("nsys", lambda n, p: nsys(n, p, source), ".sqlite")):
            trace = make(name, out / f"{key}{suffix}")
            got = measure(trace, out / f"store-{key}-{fmt}")
            print(f"{key:9} {fmt:7} {trace.stat().st_size / 1e6:8.1f} MB  rc={got['rc']}  wall={got['wall']:>8}  "
                  f"peak RSS={got['rss_mb']} MB  {got['said']}", flush=True)
            trace.unlink()
            shutil.rmtree(out / f"store-{key}-{fmt}", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
