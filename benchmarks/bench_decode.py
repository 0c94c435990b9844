"""The limit beside the result: how long msgspec alone takes to decode the same bytes.

    python benchmarks/bench_decode.py FILE generic|typed

Run by bench.py in a fresh process per measurement; it reads the whole file into memory
first (timed apart), then times the decode alone, inside the process (no interpreter
start-up, no imports):

- generic: `msgspec.json.decode(data)`: every value to Python dicts/lists/str/float;
- typed: `msgspec.json.Decoder(Trace).decode(data)` with structs holding only the fields
  traceq reads (the raw event relation of `traceq/ingest/kineto_raw.py`: ph, cat, name, pid,
  tid, ts, dur and the args it keeps); unknown fields are skipped without building objects.

Prints one JSON object: decode_s, read_s, events, bytes, peak_rss_mb (ru_maxrss of this
process, 1 MB = 10^6 bytes). A .gz file is decompressed before the clock starts.
"""
from __future__ import annotations

import gzip
import json
import resource
import sys
import time
from typing import Union

import msgspec

Num = Union[int, float, str, None]


class Args(msgspec.Struct, gc=False):
    external_id: Num = msgspec.field(default=None, name="External id")
    external_id_lc: Num = msgspec.field(default=None, name="external id")
    correlation: Num = None
    finished: Union[str, bool, int, None] = None
    stream: Num = None
    device: Num = None
    bytes: Num = None
    registers: Num = msgspec.field(default=None, name="registers per thread")
    grid: Union[list, None] = None
    block: Union[list, None] = None
    kind: Union[str, int, None] = None
    in_nelems: Num = msgspec.field(default=None, name="In msg nelems")
    out_nelems: Num = msgspec.field(default=None, name="Out msg nelems")
    dtype: Union[str, None] = None
    collective: Num = msgspec.field(default=None, name="Collective name")
    pg_name: Num = msgspec.field(default=None, name="Process Group Name")
    pg_desc: Num = msgspec.field(default=None, name="Process Group Description")
    group_size: Num = msgspec.field(default=None, name="Group size")
    seq: Num = msgspec.field(default=None, name="Seq")


class Event(msgspec.Struct, gc=False):
    ph: Union[str, None] = None
    cat: Union[str, None] = None
    name: Union[str, None] = None
    pid: Num = None
    tid: Num = None
    ts: Num = None
    dur: Num = None
    args: Union[Args, None] = None


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
