"""The long fuzzing run: the properties of tests/test_fuzz_ingest.py with a large example budget.

    python benchmarks/fuzz_long.py --minutes 60            # Kineto, nsys, damaged Kineto, timer logs, Deep500, names: a sixth each
    python benchmarks/fuzz_long.py --minutes 10 --only nsys   # or kineto, damaged, timer, deep500, names
    python benchmarks/fuzz_long.py --minutes 10 --only damaged   # one bad token in a valid trace
    python benchmarks/fuzz_long.py --minutes 10 --only names   # the kernel-name parser alone

Each property runs until its share of the time is spent (hypothesis, random seeds). Every
failure is printed with its hypothesis reproduction blob and the failing input is written to
benchmarks/fuzz_crashers/; turn it into a regression file/test under tests/. The last line
is a JSON summary: examples run, minutes, outcomes (added / refused) and failures.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from fuzzing import (check_contract, check_damaged, damaged_kineto, deep500_text, kineto_document,  # noqa: E402
                     nsys_export, timer_log, write_kineto, write_sqlite)
from fuzz_names import HOSTILE_NAME, check_name  # noqa: E402

CRASHERS = REPO / "benchmarks" / "fuzz_crashers"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("--only", choices=["kineto", "nsys", "damaged", "timer", "deep500", "names"])
    args = ap.parse_args()
    targets = [t for t in ("kineto", "nsys", "damaged", "timer", "deep500", "names") if args.only in (None, t)]
    stats = {"examples": Counter(), "outcomes": Counter(), "failures": []}
    tmp = Path(tempfile.mkdtemp(prefix="traceq-fuzz-"))
    t_start = time.time()
    for i, target in enumerate(targets):
        deadline = t_start + args.minutes * 60 * (i + 1) / len(targets)

        def one(path: Path, keep: set | None = None) -> None:
            if time.time() > deadline:
                return
            store = tmp / "store"
            shutil.rmtree(store, ignore_errors=True)
            stats["examples"][target] += 1
            try:
                if keep is not None:   # every kernel but the damaged one kept
                    check_damaged(path, keep)
                outcome = check_contract(path, store)
                stats["outcomes"][outcome.split(":")[0] if outcome == "added" else "refused: " + outcome.split(": ", 2)[-1][:50]] += 1
            except BaseException as exc:  # noqa: BLE001 - record, keep the input, go on
                CRASHERS.mkdir(exist_ok=True)
                keep = CRASHERS / f"{target}-{len(stats['failures'])}{''.join(path.suffixes)}"
                shutil.copy(path, keep)
                stats["failures"].append({"target": target, "file": str(keep), "error": f"{type(exc).__name__}: {exc}"[:300]})
                traceback.print_exc()

        cfg = settings(max_examples=200, deadline=None, database=None, phases=["generate"],
                       suppress_health_check=list(HealthCheck))
        if target == "kineto":
            @cfg
            @given(doc=kineto_document(), gz=st.booleans())
            def prop(doc, gz):
                one(write_kineto(tmp / ("t.json.gz" if gz else "t.json"), doc, gz))
        elif target == "damaged":
            @cfg
            @given(damaged=damaged_kineto(), gz=st.booleans())
            def prop(damaged, gz):
                one(write_kineto(tmp / ("t.json.gz" if gz else "t.json"), damaged[0], gz), damaged[1])
        elif target in ("timer", "deep500"):
            @cfg
            @given(text=timer_log() if target == "timer" else deep500_text())
            def prop(text):
                p = tmp / ("t.jsonl" if target == "timer" else "stats.txt")
                p.write_bytes(text)
                one(p)
        elif target == "names":
            @cfg
            @given(name=HOSTILE_NAME)
            def prop(name):
                if time.time() > deadline:
                    return
                stats["examples"][target] += 1
                try:
                    check_name(name)
                    stats["outcomes"]["name parsed"] += 1
                except BaseException as exc:  # noqa: BLE001 - record, keep the input, go on
                    CRASHERS.mkdir(exist_ok=True)
                    keep = CRASHERS / f"names-{len(stats['failures'])}.txt"
                    keep.write_text(name, errors="surrogatepass")
                    stats["failures"].append({"target": target, "file": str(keep), "error": f"{type(exc).__name__}: {exc}"[:300]})
                    traceback.print_exc()
        else:
            @cfg
            @given(tables=nsys_export())
            def prop(tables):
                p = tmp / "e.sqlite"
                p.unlink(missing_ok=True)
                one(write_sqlite(p, tables))
        while time.time() < deadline:   # a property ends when hypothesis thinks it is done: go again
            prop()
    shutil.rmtree(tmp, ignore_errors=True)
    summary = {"minutes": round((time.time() - t_start) / 60, 1), "examples": dict(stats["examples"]),
               "outcomes": dict(stats["outcomes"].most_common(12)), "failures": stats["failures"]}
    print(json.dumps(summary, indent=1))
    return 1 if stats["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
