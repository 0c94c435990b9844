"""Peak memory and time of the MCP server's `sql` tool on a huge result (issue 50): the tool
reads a query of N rows with the default row/byte caps and must return the capped rows, the
cut stated, in bounded memory whatever N is.

    python benchmarks/bench_mcp_sql.py [--rows 100000000,1000] [--max-rows N]

Each N runs `traceq.mcp.tools.call(store, "sql", {"query": "SELECT * FROM range(N)"})` in a
fresh process on an empty store and prints its wall time, peak RSS (getrusage, MiB), the rows
returned and the cut. The peak RSS of 100 M rows should equal that of 1,000 rows within a few
tens of MiB: the result is fetched in Arrow batches and the fetch stops at the cap.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile

CHILD = r"""
import json, resource, sys, time
from traceq.mcp import tools
store, n, cap = sys.argv[1], int(sys.argv[2]), sys.argv[3]
args = {"query": f"SELECT * FROM range({n})"}
if cap != "-":
    args["max_rows"] = int(cap)
t0 = time.perf_counter()
doc = json.loads(tools.call(store, "sql", args)[0])
wall = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"rows": n, "returned": doc["row_count"], "cut": doc.get("cut"), "wall_s": round(wall, 3),
                  "peak_rss_mib": round(rss, 1)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="100000000,1000")
    ap.add_argument("--max-rows", default="-")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        for n in a.rows.split(","):
            out = subprocess.run([sys.executable, "-c", CHILD, f"{d}/store", n, a.max_rows],
                                 capture_output=True, text=True)
            if out.returncode:
                sys.exit(f"bench_mcp_sql: N={n}: exit {out.returncode}: {out.stderr.strip()[-500:]}")
            print(json.dumps(json.loads(out.stdout.strip().splitlines()[-1])))


if __name__ == "__main__":
    main()
