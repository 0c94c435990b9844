"""The long run of tests/test_hostile_sql.py's property: statements aimed at the store through
`traceq sql --allow-writes` (tests/fuzz_store.py) never change a byte of it.

    python benchmarks/fuzz_sql_long.py --minutes 10

The last line is a JSON summary: examples, minutes, outcomes (ran / refused by the text check /
refused by DuckDB) and failures (each with its statement).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import warnings  # noqa: E402

from hypothesis.errors import NonInteractiveExampleWarning  # noqa: E402

from fuzz_store import check_sql_contract, hostile_statement  # noqa: E402


warnings.simplefilter("ignore", NonInteractiveExampleWarning)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10)
    args = ap.parse_args()
    from traceq.ingest import ingest
    from traceq.store import Store

    work = Path(tempfile.mkdtemp(prefix="traceq-fuzz-sql-"))
    store = work / ".traceq"
    ingest([REPO / "sample_traces" / "nsys_sample.sqlite"], store, run="s")
    (work / "other").mkdir()
    os.symlink(store, work / "link")
    os.chdir(work)
    os.environ["HOME"] = str(work)
    table_file = json.loads(Store(store).manifest_rows()[0]["files"])["gpu_ops"]
    stats = {"examples": 0, "outcomes": Counter(), "failures": []}
    deadline = time.time() + args.minutes * 60

    strategy = hostile_statement(store, table_file)
    t0 = time.time()
    while time.time() < deadline:
        stmt = strategy.example()   # random draws (hypothesis' example(): no shrinking needed here)
        stats["examples"] += 1
        try:
            out = check_sql_contract(stmt, store)
            key = "ran" if out == "ran" else ("refused by DuckDB" if "Error" in out else "refused")
            stats["outcomes"][key] += 1
        except AssertionError as exc:
            stats["failures"].append({"statement": stmt, "error": str(exc)[:300]})
    shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"examples": stats["examples"], "minutes": round((time.time() - t0) / 60, 1),
                      "outcomes": dict(stats["outcomes"]), "failures": stats["failures"]}))
    return 1 if stats["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
