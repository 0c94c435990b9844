"""Build a large Kineto trace by replicating a real one N times in time.

Used by the benchmark (DESIGN §7): the 35 MB HTA `trace_diff/control` trace, copied
N times one after another on the time axis, gives a realistic ~250 MB (N=8) trace.
Every copy k shifts `ts` by k * (span + 1 ms) and offsets the ids that must stay
unique (`correlation`, `External id`, flow `id`) by k * (max id + 1). Metadata
(`ph == "M"`) and the whole-window `Trace` span are written once; the ProfilerStep
numbers are shifted so steps stay distinct.

    python benchmarks/replicate_trace.py SRC.json.gz N OUT.json
"""
from __future__ import annotations

import gzip
import re
import sys
from pathlib import Path

import msgspec

_STEP = re.compile(r"^ProfilerStep#(\d+)$")


def _load(path: Path) -> dict:
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return msgspec.json.decode(raw)


def replicate(src: Path, copies: int, out: Path) -> int:
    """Write `copies` time-shifted copies of `src` to `out`; returns the event count."""
    trace = _load(src)
    events = trace.pop("traceEvents")
    timed = [e for e in events if e.get("ph") != "M" and e.get("cat") != "Trace"]
    once = [e for e in events if e.get("ph") == "M" or e.get("cat") == "Trace"]
    t0 = min(float(e["ts"]) for e in timed if "ts" in e)
    t1 = max(float(e["ts"]) + float(e.get("dur", 0) or 0) for e in timed if "ts" in e)
    shift_us = int(t1 - t0) + 1000
    max_id = 0
    for e in timed:
        a = e.get("args") or {}
        for key in ("correlation", "External id"):
            if isinstance(a.get(key), int):
                max_id = max(max_id, a[key])
        if isinstance(e.get("id"), int):
            max_id = max(max_id, e["id"])
    id_step = max_id + 1
    n_steps = sum(1 for e in timed if _STEP.match(str(e.get("name", ""))))
    written = 0
    with open(out, "wb") as f:
        f.write(msgspec.json.encode(trace)[:-1])
        f.write(b', "traceEvents": [\n')
        first = True
        for e in once:
            f.write((b"" if first else b",\n") + msgspec.json.encode(e))
            first = False
            written += 1
        for k in range(copies):
            for e in timed:
                c = dict(e)
                if "ts" in c:
                    c["ts"] = c["ts"] + k * shift_us
                if isinstance(c.get("id"), int):
                    c["id"] = c["id"] + k * id_step
                a = c.get("args")
                if a:
                    a = dict(a)
                    for key in ("correlation", "External id"):
                        if isinstance(a.get(key), int) and a[key] > 0:
                            a[key] = a[key] + k * id_step
                    c["args"] = a
                m = _STEP.match(str(c.get("name", "")))
                if m and k:
                    c["name"] = f"ProfilerStep#{int(m.group(1)) + k * n_steps}"
                f.write((b"" if first else b",\n") + msgspec.json.encode(c))
                first = False
                written += 1
        f.write(b"\n]}\n")
    return written


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    n = replicate(Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))
    print(f"{n} events -> {sys.argv[3]} ({Path(sys.argv[3]).stat().st_size / 1e6:.1f} MB)")
