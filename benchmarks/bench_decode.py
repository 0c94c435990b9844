"""The limit beside the result: how long msgspec alone takes to decode the same bytes.

    python benchmarks/bench_decode.py FILE generic|typed

Run by bench.py in a fresh process per measurement; it reads the whole file into memory
first (timed apart), then times the decode alone, inside the process (no interpreter
start-up, no imports):

- generic: `msgspec.json.decode(data)`: every value to Python dicts/lists/str/float;
- typed: `msgspec.json.Decoder(Trace).decode(data)` with traceq's own event struct
  (`traceq.ingest.kineto.events.Event`: ph, cat, name, pid, tid, ts, dur and the args it keeps);
  unknown fields are skipped without building objects.

Prints one JSON object: decode_s, read_s, events, bytes, peak_rss_mb (ru_maxrss of this
process, 1 MB = 10^6 bytes; with typed, traceq's ingest imports count in it). A .gz file is decompressed before the clock starts.
"""
from __future__ import annotations

import gzip
import json
import resource
import sys
import time
from typing import Union

import msgspec

from traceq.ingest.kineto.events import Event   # the struct traceq's own decode uses

class Trace(msgspec.Struct, gc=False):
    traceEvents: list[Event] = []
    distributedInfo: Union[dict, None] = None


def main(path: str, mode: str) -> dict:
    t0 = time.perf_counter()
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    read_s = time.perf_counter() - t0
    if mode == "generic":
        t0 = time.perf_counter()
        obj = msgspec.json.decode(data)
        decode_s = time.perf_counter() - t0
        events = len(obj["traceEvents"]) if isinstance(obj, dict) else len(obj)
    elif mode == "typed":
        dec = msgspec.json.Decoder(Trace)
        t0 = time.perf_counter()
        obj = dec.decode(data)
        decode_s = time.perf_counter() - t0
        events = len(obj.traceEvents)
    else:
        raise SystemExit(f"unknown mode {mode!r} (generic or typed)")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6
    return {"decode_s": decode_s, "read_s": read_s, "events": events, "bytes": len(data),
            "peak_rss_mb": rss, "msgspec": msgspec.__version__}


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
