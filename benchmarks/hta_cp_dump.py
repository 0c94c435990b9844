"""Runs inside HTA 0.6.1's venv (benchmarks/.cache/hta061-venv, package `traceinsight`): HTA's
critical path of every ProfilerStep instance of one Kineto trace, written as JSON.

    python hta_cp_dump.py TRACE OUT.json [--annotation ProfilerStep] [--max-steps N]
                          [--max-edge-steps M] [--drop-last-step] [--data-load-events REGEX ...]

Times in the output are int ns on the trace's own clock: the file's `ts` µs x 1000 (HTA rounds
a float ts up and a float end down to whole µs, then shifts every event by the trace's first
ts, `Trace.min_ts`; both are undone here, so only the rounding to µs remains). HTA's edge
weights are whole µs; they are written x 1000. See docs/hta_critical_path.md.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import traceback
from collections import Counter
from pathlib import Path

NAME_MAX = 80   # op/kernel names in the edge list are cut to this many characters
MAX_BYTES = 290_000   # edge lists are cut (from the end) to keep the file under this size


class _Records(logging.Handler):
    """Collects HTA's log messages: its failures are logged, not raised."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def take(self) -> list[logging.LogRecord]:
        out, self.records = self.records, []
        return out


def _first_line(text: str) -> str:
    lines = [ln for ln in str(text).strip().splitlines() if ln.strip()]
    return lines[0][:300] if lines else ""


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {_first_line(e) or repr(e)}"


def _where(e: BaseException) -> str:
    """The innermost frame inside HTA that the exception passed through (file:line function)."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if "/hta/" in f.filename]
    if not frames:
        return ""
    f = frames[-1]
    return f"{f.filename.split('/hta/', 1)[1]}:{f.lineno} {f.name}"


def _log_summary(records: list[logging.LogRecord]) -> dict:
    """Errors verbatim (first line, deduplicated, first 5) and warnings counted by their
    first words (HTA warns once per kernel it could not link)."""
    errors = []
    warnings = Counter()
    for r in records:
        msg = _first_line(r.getMessage())
        if r.levelno >= logging.ERROR:
            if msg not in errors:
                errors.append(msg)
        else:
            warnings[" ".join(msg.split()[:6])] += 1
    return {"log_errors": errors[:5], "log_warnings": dict(sorted(warnings.items()))}


def _path(g, min_ts_us: int, names: dict, sym: list) -> tuple[list, dict, dict]:
    """The path's edges in path order: [start_ns, end_ns, weight_ns, type, bound_by, name],
    the per-bound_by weight sums (ns) and totals."""
    import pandas as pd

    stream = g.trace_df["stream"]
    rows, by_bound, by_type = [], Counter(), Counter()
    nodes = g.critical_path_nodes
    for u, v in zip(nodes, nodes[1:]):
        e = g.edges[u, v]["object"]
        a, b = g.node_list[u], g.node_list[v]
        ev = g.get_event_attribution_for_edge(e)
        etype = e.type.value.removeprefix("critical_path_")
        weight_ns = int(g.edges[u, v]["weight"]) * 1000   # the weight the path used (validated)
        if ev is not None and ev >= 0:
            short = names.get(ev)
            if short is None or (isinstance(short, float) and pd.isna(short)):
                short = sym[int(g.trace_df.name.loc[ev])]
            bound = g.bound_by({"type": e.type.value, "s_name": short, "stream": int(stream.loc[ev])})
            name = sym[int(g.trace_df.name.loc[ev])]
        else:   # dependency/sync/launch edges carry no event: name both ends
            bound = g.bound_by({"type": e.type.value, "s_name": None, "stream": -1}) \
                if e.type.value.endswith(("dependency", "launch_delay", "kernel_kernel_delay")) else ""
            name = f"{sym[int(g.trace_df.name.loc[a.ev_idx])]} -> {sym[int(g.trace_df.name.loc[b.ev_idx])]}"
        rows.append([(int(a.ts) + min_ts_us) * 1000, (int(b.ts) + min_ts_us) * 1000, weight_ns, etype,
                     bound, name[:NAME_MAX]])
        by_bound[bound] += weight_ns
        by_type[etype] += weight_ns
    return rows, dict(sorted(by_bound.items())), dict(sorted(by_type.items()))


def dump(trace: Path, annotation: str, max_steps: int, max_edge_steps: int, include_last: bool,
         data_load_events: list[str] | None = None) -> dict:
    import importlib.metadata as md

    import pandas as pd

    try:
        hta_version = "traceinsight " + md.version("traceinsight")
    except md.PackageNotFoundError:   # the older name, for a run in the HTA 0.5.0 venv
        hta_version = "HolisticTraceAnalysis " + md.version("HolisticTraceAnalysis")

    handler = _Records()
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.WARNING)
    out: dict = {"trace": trace.name, "hta": hta_version,
                 "pandas": pd.__version__, "annotation": annotation, "data_load_events": data_load_events,
                 "include_last_profiler_step": include_last, "time_unit": "ns, trace clock (ts us x 1000)"}
    from hta.trace_analysis import TraceAnalysis

    with tempfile.TemporaryDirectory() as tmp:   # HTA reads a directory: one trace per dir
        os.symlink(trace.resolve(), Path(tmp) / trace.name)
        try:
            ta = TraceAnalysis(trace_dir=tmp, include_last_profiler_step=include_last)
        except Exception as e:  # noqa: BLE001 - HTA's failure is the result
            out.update(ok=False, error=_error(e), error_at=_where(e), steps=[], **_log_summary(handler.take()))
            return out
        handler.take()   # parse-time warnings (ns rounding etc.) are not step results
    t = ta.t
    rank = sorted(t.traces)[0]
    df = t.get_trace(rank)
    sym = t.symbol_table.sym_table
    min_ts_us = int(t.min_ts)
    out.update(rank=rank, min_ts_us=min_ts_us, events=len(df))
    # the annotation instances exactly as HTA selects them: every event whose name contains
    # the annotation, in the dataframe's order (CPU ProfilerStep#N and any GPU twin alike)
    ids = [i for s, i in t.symbol_table.get_sym_id_map().items() if annotation in s]
    ann = df[df.name.isin(ids)]
    out["instances"] = len(ann)
    steps = []
    for k in range(min(len(ann), max_steps)):
        row = ann.iloc[k]
        step = {"instance_id": k, "name": sym[int(row["name"])], "cat": sym[int(row["cat"])],
                "start_ns": (int(row["ts"]) + min_ts_us) * 1000,
                "end_ns": (int(row["ts"]) + int(row["dur"]) + min_ts_us) * 1000}
        try:
            res = ta.critical_path_analysis(rank=rank, annotation=annotation, instance_id=k,
                                           data_load_events=data_load_events)
        except Exception as e:  # noqa: BLE001
            step.update(ok=False, error=_error(e), error_at=_where(e), **_log_summary(handler.take()))
            steps.append(step)
            continue
        if res is None:
            step.update(ok=False, error="critical_path_analysis returned None", **_log_summary(handler.take()))
            steps.append(step)
            continue
        g, success = res
        if not success:
            step.update(ok=False, error="critical_path_analysis returned success=False",
                        graph_nodes=g.number_of_nodes(), graph_edges=g.number_of_edges(),
                        **_log_summary(handler.take()))
            steps.append(step)
            continue
        try:
            edf = g.get_critical_path_breakdown()   # fills trace_df.s_name (HTA's short names)
            names = dict(zip(g.trace_df["index"], g.trace_df["s_name"]))
            summary = {k2: round(float(v), 6) for k2, v in g.summary().items()}
            edges, by_bound, by_type = _path(g, min_ts_us, names, sym)
        except Exception as e:  # noqa: BLE001
            step.update(ok=False, error=_error(e), error_at=_where(e), **_log_summary(handler.take()))
            steps.append(step)
            continue
        first, last = g.node_list[g.critical_path_nodes[0]], g.node_list[g.critical_path_nodes[-1]]
        step.update(
            ok=True, graph_nodes=g.number_of_nodes(), graph_edges=g.number_of_edges(),
            path_ns=sum(r[2] for r in edges), path_nodes=len(g.critical_path_nodes), path_edges=len(edges),
            path_start_ns=(int(first.ts) + min_ts_us) * 1000, path_end_ns=(int(last.ts) + min_ts_us) * 1000,
            breakdown_ns=int(edf.duration.sum()) * 1000, bound_by_ns=by_bound, type_ns=by_type,
            summary_pct=summary, **_log_summary(handler.take()))
        if k < max_edge_steps:
            step["edges"] = edges
        steps.append(step)
    out["steps"] = steps
    out["ok"] = any(s.get("ok") for s in steps)
    if not steps:
        out["error"] = f"no '{annotation}' annotation instance in the trace"
    elif not out["ok"]:
        out["error"] = steps[0]["error"]
    _fit(out)
    return out


def _fit(out: dict) -> None:
    """Cut the longest edge lists until the JSON fits MAX_BYTES; `edges_kept` says how many of
    a cut step's `path_edges` remain (the first ones, in path order)."""
    def size() -> int:
        return len(json.dumps(out, separators=(",", ":"), ensure_ascii=False).encode())

    while size() > MAX_BYTES:
        s = max((s for s in out["steps"] if s.get("edges")), key=lambda s: len(s["edges"]), default=None)
        if s is None:
            return
        s["edges"] = s["edges"][: len(s["edges"]) * 3 // 4]
        s["edges_kept"] = len(s["edges"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--annotation", default="ProfilerStep")
    ap.add_argument("--drop-last-step", action="store_true",
                    help="HTA's default: drop the last ProfilerStep's events at load")
    ap.add_argument("--data-load-events", nargs="*", help="regexes HTA counts as data loading")
    ap.add_argument("--max-steps", type=int, default=12)
    ap.add_argument("--max-edge-steps", type=int, default=3)
    args = ap.parse_args(argv)
    res = dump(args.trace, args.annotation, args.max_steps, args.max_edge_steps, not args.drop_last_step,
               args.data_load_events or None)
    args.out.write_text(json.dumps(res, indent=None, separators=(",", ":"), ensure_ascii=False) + "\n")
    print(json.dumps({k: res.get(k) for k in ("trace", "ok", "error", "instances")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
