"""Make an N-rank Kineto run from one rank of a real multi-rank trace, with a known straggler.

    python benchmarks/make_many_ranks.py N OUTDIR [--straggler R] [--delay-ms D]
        [--jitter-us J] [--clock-skew-us C] [--seed S] [--template PATH]

The template (default: ../shared/traces/kineto/hta/trace_filter/sampled_rank-0.json.gz,
rank 0 of a 128-rank NCCL job) is copied to OUTDIR/rank-<r>.json.gz for r = 0..N-1 with:

- arrival jitter: the k-th NCCL kernel of each stream (one collective instance; those longer than
  the delay + jitter) starts
  a_{r,k} µs later on rank r, a_{r,k} uniform in [0, J]; its end stays where it was, as in
  a real collective, which completes on every rank together. The straggler rank arrives
  D ms later still (a_{R,k} += 1000·D): the others' kernels start earlier and wait for it.
- a raw clock error: every timestamp of rank r moves by e_r µs, uniform in [-C, C]
  (integer µs, so the values stay exact in float64 µs).
- distributedInfo.rank = r, world_size = N.
- collective identity: the template's args are copied, so its "Process Group Name" /
  "Collective name" (PyTorch >= 2.1) stay on every rank; with --seq each NCCL kernel also
  gets "Seq", its 1-based order in its process group (as PyTorch >= 2.4 writes it; the group
  is the template's "Process Group Name", else one per stream, named by the stream's index),
  so traceq matches instances by (process group, sequence number).
- --drop R:S:K leaves the K-th collective of stream S out of rank R's trace (a rank whose
  trace window missed one collective): matched by order, every later instance of that stream
  would pair different collectives; matched by sequence number, only that instance has a
  rank fewer.

The ground truth (a, e, straggler, delay) goes to OUTDIR/.truth.json (a dot file, which
`traceq ingest OUTDIR` skips).
"""
from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
from pathlib import Path

DEFAULT_TEMPLATE = (Path(__file__).resolve().parents[1].parent / "shared" / "traces" / "kineto" / "hta"
                    / "trace_filter" / "sampled_rank-0.json.gz")


def _load(path: Path) -> dict:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return json.load(f)


def collective_kernels(events: list[dict]) -> list[tuple[int, int, int]]:
    """(event index, stream, k): the k-th NCCL kernel (by start) of each stream."""
    kern = [(i, e) for i, e in enumerate(events)
            if e.get("cat") == "kernel" and str(e.get("name", "")).startswith("nccl") and e.get("ph") == "X"]
    kern.sort(key=lambda ie: (ie[1]["args"]["stream"], float(ie[1]["ts"])))
    out, seen = [], {}
    for i, e in kern:
        s = e["args"]["stream"]
        out.append((i, s, seen.get(s, 0)))
        seen[s] = seen.get(s, 0) + 1
    return out


def add_seq(events: list[dict], colls: list[tuple[int, int, int]]) -> None:
    """Give every NCCL kernel a "Seq" (1-based order in its process group, by start) and a
    "Process Group Name" where the template has none (the index of its stream)."""
    streams = sorted({s for _, s, _ in colls})
    seen: dict[str, int] = {}
    for i, s, _k in sorted(colls, key=lambda c: float(events[c[0]]["ts"])):
        args = events[i]["args"]
        pg = str(args.setdefault("Process Group Name", str(streams.index(s))))
        seen[pg] = seen.get(pg, 0) + 1
        args["Seq"] = seen[pg]


def make(n: int, outdir: Path, straggler: int | None = None, delay_ms: float = 2.0, jitter_us: int = 200,
         clock_skew_us: int = 2000, seed: int = 0, template: Path = DEFAULT_TEMPLATE, seq: bool = False,
         drop: dict[int, list[tuple[int, int]]] | None = None) -> dict:
    rng = random.Random(seed)
    trace = _load(template)
    events = trace["traceEvents"]
    colls = collective_kernels(events)
    if seq:
        add_seq(events, colls)
    # a collective shorter than the arrival delay + jitter cannot start later and still end
    # together: those keep their times on every rank (a real job's tiny sends do not show skew)
    needed = (delay_ms * 1000 if straggler is not None else 0) + jitter_us
    colls = [c for c in colls if float(events[c[0]]["dur"]) > needed]
    if not colls:
        raise SystemExit(f"--delay-ms + jitter ({needed / 1000:.1f} ms) must stay below some collective's duration")
    ts0 = [e.get("ts") for e in events]
    dur0 = {i: float(events[i]["dur"]) for i, _, _ in colls}
    outdir.mkdir(parents=True, exist_ok=True)
    truth = {"world_size": n, "straggler": straggler, "delay_ms": delay_ms, "template": str(template),
             "clock_error_us": [], "arrival_us": [], "seq": seq,
             "dropped": {str(r): [f"{s}:{k}" for s, k in v] for r, v in (drop or {}).items()}}
    for r in range(n):
        err = rng.randint(-clock_skew_us, clock_skew_us)
        arrivals = {}
        for i, s, k in colls:
            a = rng.randint(0, jitter_us) + (round(delay_ms * 1000) if r == straggler else 0)
            arrivals[f"{s}:{k}"] = a
        for e, t in zip(events, ts0):
            if t is not None:
                e["ts"] = t + err
        for i, s, k in colls:
            a = arrivals[f"{s}:{k}"]
            events[i]["ts"] = ts0[i] + err + a
            events[i]["dur"] = dur0[i] - a
        trace["distributedInfo"] = {**trace.get("distributedInfo", {}), "rank": r, "world_size": n}
        gone = {i for i, s, k in colls if (s, k) in set((drop or {}).get(r, []))}
        trace["traceEvents"] = [e for i, e in enumerate(events) if i not in gone] if gone else events
        with gzip.open(outdir / f"rank-{r}.json.gz", "wt", compresslevel=1) as f:
            json.dump(trace, f)
        trace["traceEvents"] = events
        truth["clock_error_us"].append(err)
        truth["arrival_us"].append(arrivals)
    (outdir / ".truth.json").write_text(json.dumps(truth))
    return truth


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", type=int, help="number of ranks")
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--straggler", type=int, default=None, help="rank that arrives late (default: none)")
    ap.add_argument("--delay-ms", type=float, default=2.0, help="its extra arrival delay per collective, ms")
    ap.add_argument("--jitter-us", type=int, default=200, help="arrival jitter of every rank, µs (uniform 0..J)")
    ap.add_argument("--clock-skew-us", type=int, default=2000, help="raw clock error of a rank, µs (uniform ±C)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--template", type=Path, default=DEFAULT_TEMPLATE)
    ap.add_argument("--seq", action="store_true", help='write "Seq" (and a process group) on every NCCL kernel')
    ap.add_argument("--drop", action="append", default=[], metavar="R:S:K",
                    help="leave the K-th collective of stream S out of rank R (repeatable)")
    a = ap.parse_args(argv)
    drop: dict[int, list[tuple[int, int]]] = {}
    for spec in a.drop:
        try:
            r, s, k = (int(x) for x in spec.split(":"))
        except ValueError:
            print(f"make_many_ranks: --drop {spec!r}: expected RANK:STREAM:K", file=sys.stderr)
            return 2
        drop.setdefault(r, []).append((s, k))
    if not a.template.exists():
        print(f"make_many_ranks: {a.template}: template trace not found", file=sys.stderr)
        return 2
    make(a.n, a.outdir, a.straggler, a.delay_ms, a.jitter_us, a.clock_skew_us, a.seed, a.template, a.seq, drop)
    print(f"{a.n} ranks written to {a.outdir} (truth in {a.outdir / '.truth.json'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
