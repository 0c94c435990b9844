"""The limit beside the nsys result: how long the SQLite reads alone take.

    python benchmarks/bench_nsys_read.py EXPORT.sqlite

Run by bench.py in a fresh process. Times what traceq's nsys ingest cannot avoid: reading
the same columns of the same CUDA activity tables (`traceq.ingest.nsys.reader.ACTIVITY`) through
the same reader (ADBC SQLite straight into Arrow, rowid-range chunks on a thread per core:
`traceq.ingest.nsys.sqlite_arrow.read_chunk` over `traceq.threads.ordered_map`), with no
translation, no names, no Parquet. Inside the process: no interpreter start-up, no imports.

Prints one JSON object: read_s, rows, rows_per_s, import_s (traceq's nsys reader and its
imports, timed apart), threads.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def main(path: str) -> dict:
    t0 = time.perf_counter()
    from traceq.ingest.nsys.reader import ACTIVITY, open_export
    from traceq.ingest.nsys.sqlite_arrow import read_chunk
    from traceq.threads import ordered_map, workers

    import_s = time.perf_counter() - t0
    p = Path(path)
    with open_export(p) as export:
        plan = export._plan(ACTIVITY)   # the chunks (table, columns, rowid range) ingest reads
        t1 = time.perf_counter()
        rows = sum(b.num_rows for b in ordered_map(lambda item: read_chunk(p, item[1], item[2]), plan))
        read_s = time.perf_counter() - t1
    return {"read_s": read_s, "rows": rows, "rows_per_s": rows / read_s, "import_s": import_s,
            "threads": workers()}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
