"""The benchmark's inputs, built once and cached in benchmarks/.cache/ (gitignored).

- `traces/control.json`: HTA's `trace_diff/control` trace decompressed (the 1x original);
- `traces/repN.json`: that trace replicated N times in time (`replicate_trace.py`);
- `ranks8/rank{0..7}.json`: eight copies of rep1.json, each with its own
  `distributedInfo.rank` (the 8 rank files of one run);
- `nsys/cloverleaf-x2000000.sqlite`: a real Perlmutter nsys export grown to >= 2 M rows;
- `hta-venv/`: HolisticTraceAnalysis 0.5.0 in its own venv.

Other caches (e.g. the main worktree's) can be read as well (`--reuse-cache DIR`): an input
found valid there is used in place and never rewritten; whatever is missing is built into
this checkout's cache.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from bench_measure import log
from replicate_trace import replicate

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"
SHARED = Path(os.environ.get("TRACEQ_SHARED", HERE.parent.parent / "shared"))
CONTROL_GZ = SHARED / "traces/kineto/hta/trace_diff/control/control.json.gz"
NSYS_SRC = SHARED / "traces/nsys/pipit/perlmutter-cloverleaf-cuda.sqlite"
HTA_SPEC = "HolisticTraceAnalysis==0.5.0"
NSYS_TABLES = (  # replicated tables; each has start, end, correlationId
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
)
NSYS_MIN_ROWS = 2_000_000
RANK_FILES = 8

READ_ONLY_CACHES: list[Path] = []  # searched after CACHE; never written


def _source_sig() -> str:
    """Identity of the source trace: size + content hash (its mtime changes when the
    shared folder is copied again)."""
    data = CONTROL_GZ.read_bytes()
    return f"{len(data)}-sha1:{hashlib.sha1(data).hexdigest()[:16]}"


def _stamp_ok(stamp: Path, sig: str) -> bool:
    if not stamp.exists():
        return False
    text = stamp.read_text().strip()
    if text == sig:
        return True
    # stamps written by earlier versions: "<size>-<mtime>"; same size = same shared file
    m = re.fullmatch(r"(\d+)-(\d+)", text)
    return bool(m) and m.group(1) == sig.split("-")[0]


def _find(rel: str, valid) -> Path | None:
    """The first cache (own, then read-only ones) holding a valid `rel`."""
    for root in [CACHE, *READ_ONLY_CACHES]:
        p = root / rel
        if valid(p):
            return p
    return None


def kineto_inputs(scales) -> dict[str, Path]:
    """{"json": control.json, "gz": control.json.gz, "rep<N>": repN.json for N in scales}."""
    sig = _source_sig()
    files: dict[str, Path] = {"gz": CONTROL_GZ}
    plain = _find("traces/control.json", lambda p: p.exists()
                  and p.stat().st_size > 10 * CONTROL_GZ.stat().st_size)
    if plain is None:
        plain = CACHE / "traces/control.json"
        plain.parent.mkdir(parents=True, exist_ok=True)
        plain.write_bytes(gzip.decompress(CONTROL_GZ.read_bytes()))
    files["json"] = plain
    for n in scales:
        rel = f"traces/rep{n}.json"
        found = _find(rel, lambda p: p.exists() and _stamp_ok(Path(f"{p}.ok"), sig))
        if found is None:
            found = CACHE / rel
            found.parent.mkdir(parents=True, exist_ok=True)
            log(f"replicating control x{n} -> {found} (one-off)")
            events = replicate(CONTROL_GZ, n, found)
            Path(f"{found}.events").write_text(str(events))
            Path(f"{found}.ok").write_text(sig)
        files[f"rep{n}"] = found
    return files


_RANK_RE = re.compile(rb'("distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*)(\d+)')


def rank_dir(rep1: Path, n: int = RANK_FILES) -> Path:
    """n rank files of one run: copies of rep1.json whose distributedInfo.rank is 0..n-1
    (the rank traceq reads first), named rank<k>.json."""
    sig = f"{rep1.stat().st_size}-{n}"

    def valid(p: Path) -> bool:
        return (p / ".ok").exists() and (p / ".ok").read_text() == sig

    found = _find(f"ranks{n}", valid)
    if found is not None:
        return found
    out = CACHE / f"ranks{n}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    data = rep1.read_bytes()
    head = data[:1 << 20]
    if not _RANK_RE.search(head):
        raise RuntimeError(f"{rep1}: no distributedInfo.rank in the first MiB")
    log(f"writing {n} rank files -> {out} (one-off)")
    for k in range(n):
        new_head = _RANK_RE.sub(lambda m: m.group(1) + str(k).encode(), head, count=1)
        (out / f"rank{k}.json").write_bytes(new_head + data[len(head):])
    (out / ".ok").write_text(sig)
    return out


def nsys_input(min_rows: int = NSYS_MIN_ROWS) -> tuple[Path, dict]:
    """The Perlmutter export with its activity rows replicated in time to >= min_rows."""
    rel = f"nsys/cloverleaf-x{min_rows}.sqlite"
    found = _find(rel, lambda p: p.exists() and p.with_suffix(".meta.json").exists())
    if found is not None:
        return found, json.loads(found.with_suffix(".meta.json").read_text())
    out = CACHE / rel
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
    out.with_suffix(".meta.json").write_text(json.dumps(meta, indent=1))
    return out, meta


_HTA_VERSION = ("import hta, importlib.metadata as m; "
                "print(m.version('HolisticTraceAnalysis'))")


def hta_python() -> tuple[Path | None, str]:
    """HTA's venv python and version: a working one in any cache, else installed into ours."""
    want = HTA_SPEC.split("==")[1]
    for root in [CACHE, *READ_ONLY_CACHES]:
        py = root / "hta-venv" / "bin" / "python"
        if py.exists():
            r = subprocess.run([str(py), "-c", _HTA_VERSION], capture_output=True, text=True)
            if r.returncode == 0 and r.stdout.strip() == want:
                return py, want
    from venvs import ensure_venv

    return ensure_venv(CACHE / "hta-venv", HTA_SPEC, _HTA_VERSION, log)


if __name__ == "__main__":  # build everything (e.g. before a timed run)
    sys.exit(print(kineto_inputs((1, 8, 16, 32)), nsys_input()[0]))
