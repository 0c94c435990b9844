"""The critical path marked in an exported trace (traceq.export.chrome): a "critical path"
process per rank with one slice per path segment, and flows where the path moves between
tracks (a host thread, a GPU stream, another rank).

The path comes as a frame of segments (what `traceq.engine.critical_path.path_segments`
returns), ordered along the path in time:

    rank i32, step i64, start_ns i64, end_ns i64   the rank's own clock (as gpu_ops.start_ns)
    bound str    cpu | data_loading | launch | gpu | gpu_gap | communication | sync | memcpy
    kind str     host (a stretch on a CPU thread) | gpu (a GPU op's run) | edge (a delay
                 between two ops: launch delay, stream gap, sync wait, cross-rank wait)
    name str, pid i64, tid i64 (null unless host), device i32, stream i64 (null unless gpu)

Slices: name "BOUND: NAME", args bound, kind, name, step, on the rank's path track (its
own lanes where segments overlap). Flows: between consecutive segments that are not edges
and lie on different tracks, from the end of the first (1 ns before it, inside the op) to
the start of the next (bound there: "bp": "e"), on the op tracks of the export; a segment
whose track the export does not have is bound on the path track instead. An edge has no
track of its own: the flow across it joins the ops on either side.
"""
from __future__ import annotations

import polars as pl

from ..engine.critical_path import SEGMENT_SCHEMA as PATH_SCHEMA
from .lanes import lanes

# the columns of the critical path's segments (engine/critical_path.py) the marks read
SEGMENT_SCHEMA = {c: t for c, t in PATH_SCHEMA.items() if c != "category"}
PATH_TID = 1


def add_path(events, segments: pl.DataFrame, clock) -> int:
    """Write the marks of `segments` (module doc) to the writer `events` (chrome.Writer:
    its `tracks` name the exported pid/tid of each op track; `clock`: chrome.Clock). Returns
    how many segments were marked."""
    if segments is None or segments.height == 0:
        return 0
    missing = set(SEGMENT_SCHEMA) - set(segments.columns)
    if missing:
        raise ValueError(f"critical-path segments lack column(s) {', '.join(sorted(missing))}")
    seg = segments.select([pl.col(c).cast(t) for c, t in SEGMENT_SCHEMA.items()]).with_row_index("_i")
    tracks = events.tracks
    rows = []
    for rank in seg["rank"].unique(maintain_order=True).to_list():
        if rank not in tracks.path_pid:
            tracks.path_pid[rank] = tracks.next_pid
            tracks.next_pid += 1
            pid = tracks.path_pid[rank]
            rows += [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": f"rank {rank} · critical path"}},
                     {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": -1000 + rank}},
                     {"ph": "M", "name": "thread_name", "pid": pid, "tid": PATH_TID, "args": {"name": "critical path"}}]
    lane = lanes(seg["rank"].cast(pl.Int64).to_numpy(), seg["start_ns"].to_numpy(), seg["end_ns"].to_numpy())
    shift = clock.shift
    for s, ln in zip(seg.iter_rows(named=True), lane.tolist()):
        start = s["start_ns"] + shift.get(s["rank"], 0)
        end = max(s["end_ns"], s["start_ns"]) + shift.get(s["rank"], 0)
        rows.append({"ph": "X", "cat": "critical_path", "name": f"{s['bound']}: {s['name']}",
                     "pid": tracks.path_pid[s["rank"]], "tid": PATH_TID + ln, "ts": start / 1000,
                     "dur": (end - start) / 1000,
                     "args": {"bound": s["bound"], "kind": s["kind"], "name": s["name"], "step": s["step"]}})
    rows += _flows(events, seg, shift, lane)
    for r in rows:
        events.event(r)
    return seg.height


def _track(tracks, s: dict, lane: int) -> tuple[int, int]:
    """The exported (pid, tid) of a segment's op track; the path track when the export has none."""
    if s["kind"] == "host" and (s["rank"], s["pid"]) in tracks.host_pid and s["tid"] is not None:
        return tracks.host_pid[(s["rank"], s["pid"])], s["tid"]
    if s["kind"] == "gpu" and (s["rank"], s["device"], s["stream"]) in tracks.gpu_tid:
        return tracks.gpu_pid[s["rank"]], tracks.gpu_tid[(s["rank"], s["device"], s["stream"])]
    return tracks.path_pid[s["rank"]], PATH_TID + lane


def _flows(events, seg: pl.DataFrame, shift: dict, lane) -> list[dict]:
    """Flows between consecutive non-edge segments on different tracks (module doc)."""
    ops = [(s, ln) for s, ln in zip(seg.iter_rows(named=True), lane.tolist()) if s["kind"] != "edge"]
    out = []
    for (a, la), (b, lb) in zip(ops, ops[1:]):
        src, dst = _track(events.tracks, a, la), _track(events.tracks, b, lb)
        if src == dst:
            continue
        fid = events.flow_ids(1)
        t_src = max(a["end_ns"] - 1, a["start_ns"]) + shift.get(a["rank"], 0)
        t_dst = b["start_ns"] + shift.get(b["rank"], 0)
        common = {"id": fid, "cat": "critical_path", "name": "critical path"}
        out.append({"ph": "s", "pid": src[0], "tid": src[1], "ts": t_src / 1000, **common})
        out.append({"ph": "f", "bp": "e", "pid": dst[0], "tid": dst[1], "ts": t_dst / 1000, **common})
    return out


def segments_of(scope) -> tuple[pl.DataFrame | None, str | None]:
    """The scope's critical path (traceq.engine.critical_path.path_segments): (frame, None)."""
    from ..engine.critical_path import path_segments

    return path_segments(scope), None

