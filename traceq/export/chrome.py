"""A run of the store -> one Chrome-trace JSON document (the Trace Event Format), written as
Kineto writes its traces, so that ui.perfetto.dev, chrome://tracing, HTA and traceq itself
read it (docs/export.md).

    {"traceEvents": [...], "displayTimeUnit": "ns", "baseTimeNanoseconds": ORIGIN,
     "otherData": {"traceq_version", "run", "ranks", "origin_ns", "rank_shift_ns", ...}}

Processes: per rank one per host pid ("rank R", or "rank R · pid P" when the rank has
several), one for its GPU ops ("rank R · GPU", a thread per (device, stream)), and one for
its critical path when one is marked (`path_marks`). Times: `ts`/`dur` in µs with ns
decimals, on the run's common clock (traceq.clocks: rank time + clock_offset_ns +
coalesce(clock_refine_ns, 0)) minus ORIGIN, the earliest event of the run on that clock, so
the run starts at 0; `rank_shift_ns[R]` is what was added to rank R's own times
(ts_ns = start_ns + shift).

Events are built per rank and table as polars columns and JSON-encoded by polars
(`struct.json_encode`), then streamed to the file in pieces: no Python object per event.
Overlapping slices of one track go to extra lanes (`lanes`).
"""
from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from ..errors import TraceqError
from .lanes import lanes

FORMATS = ("perfetto", "chrome")
GPU_CAT = {"kernel": "kernel", "memcpy": "gpu_memcpy", "memset": "gpu_memset", "sync": "cuda_sync"}
HOST_CAT = {"runtime": "cuda_runtime", "driver": "cuda_driver", "cpu_op": "cpu_op", "python": "python_function",
            "sync_api": "cuda_runtime", "other": "other"}
SLICE = 1 << 16      # events JSON-encoded and written at once
LANE_TID = 1 << 40    # tid of an extra lane: LANE_TID * lane + the track's tid
SHAPES = (("input_dims", "Input Dims"), ("input_types", "Input type"), ("input_strides", "Input Strides"),
          ("concrete_inputs", "Concrete Inputs"))


@dataclass
class Clock:
    """The run's common clock: `shift[rank]` ns added to a rank's own times gives ns since
    `origin_ns` (the epoch ns of ts 0)."""
    origin_ns: int
    shift: dict[int, int]



@dataclass
class Tracks:
    """The exported pid/tid of each track: host threads by (rank, pid, tid), GPU streams by
    (rank, device, stream); the process of each rank's GPU ops and critical path."""
    host_pid: dict[tuple[int, int], int] = field(default_factory=dict)
    gpu_pid: dict[int, int] = field(default_factory=dict)
    gpu_tid: dict[tuple[int, int, int], int] = field(default_factory=dict)
    path_pid: dict[int, int] = field(default_factory=dict)
    next_pid: int = 1


class Writer:
    """The output document, written as it is built: `lines` (JSON-encoded events, one per
    item), `event` (one dict); `flow_ids(n)` hands out unique flow ids."""

    def __init__(self, path: Path, tracks: Tracks) -> None:
        self.path = path
        self.tracks = tracks
        self.n_events = 0
        self._flow = 0
        gz = path.name.endswith(".gz")
        try:
            raw = open(path, "wb")
        except OSError as exc:
            raise TraceqError(f"cannot write: {exc.strerror}", str(path)) from None
        self._raw = raw
        self._fh = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=3, mtime=0) if gz else raw
        self._fh.write(b'{"traceEvents": [\n')

    def flow_ids(self, n: int) -> int:
        """The first of `n` new flow ids."""
        first = self._flow + 1
        self._flow += n
        return first

    def lines(self, encoded: pl.Series) -> None:
        """Write JSON-encoded events (polars writes the text: no Python string per event)."""
        if encoded.len() == 0:
            return
        sep = pl.lit(",") if self.n_events else pl.when(pl.int_range(pl.len()) > 0).then(pl.lit(",")).otherwise(pl.lit(""))
        pl.DataFrame({"j": encoded}).select(pl.concat_str([sep, pl.col("j")])).write_csv(
            self._fh, include_header=False, quote_style="never")
        self.n_events += encoded.len()

    def frame(self, df: pl.DataFrame, encode) -> None:
        """`encode` (a frame -> its JSON lines) applied and written a slice of `SLICE` rows at a
        time: the JSON text of one slice in memory at once."""
        for lo in range(0, df.height, SLICE):
            self.lines(encode(df.slice(lo, SLICE)))

    def event(self, ev: dict) -> None:
        self.lines(pl.Series([json.dumps(ev, ensure_ascii=False)]))

    def close(self, tail: dict) -> None:
        end = "],\n" + ",\n".join(f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in tail.items())
        self._fh.write((end + "\n}\n").encode("utf-8"))
        if self._fh is not self._raw:
            self._fh.close()
        self._raw.close()

    def abort(self) -> None:
        try:
            if self._fh is not self._raw:
                self._fh.close()
            self._raw.close()
        finally:
            self.path.unlink(missing_ok=True)


# ---------------------------------------------------------------- encoding
def _encode(df: pl.DataFrame, args: list[pl.Expr], nullable: tuple[str, ...] = (),
            raw: tuple[tuple[str, str], ...] = ()) -> pl.Series:
    """The JSON text of each event of `df` (columns ph, cat, name, pid, tid, ts, dur): args
    from `args` (the first one never null), the `nullable` arg keys left out where null, and
    the `raw` columns (compact JSON text) spliced in as JSON values (key: arg name)."""
    cols = [c for c in ("ph", "cat", "name", "pid", "tid", "ts", "dur") if c in df.columns]
    text = df.select(pl.struct(*cols, pl.struct(*args).alias("args")).struct.json_encode().alias("j"))["j"]
    if nullable:
        keys = "|".join(json.dumps(k)[1:-1] for k in nullable)
        text = text.str.replace_all(f',"(?:{keys})":null', "")
    if raw:
        body = text.str.slice(0, text.str.len_bytes() - 2)
        parts = [pl.lit(body)]
        extra = df.select([pl.when(pl.col(c).is_not_null()).then(pl.lit(f",{json.dumps(k)}:") + pl.col(c))
                           .otherwise(pl.lit("")).alias(c) for c, k in raw])
        text = pl.DataFrame({"b": body}).hstack(extra).select(
            pl.concat_str([pl.col("b"), *[pl.col(c) for c, _ in raw], pl.lit("}}")]).alias("j"))["j"]
    return text


def _ts(clock: Clock, rank: int, df: pl.DataFrame, start: str = "start_ns", end: str = "end_ns") -> pl.DataFrame:
    """ts and dur in µs: divided by NumPy (correctly rounded, so that the JSON text has the ns
    decimals exactly; polars' division is not always)."""
    s = df[start].fill_null(0).to_numpy()
    e = np.maximum(df[end].fill_null(df[start]).fill_null(0).to_numpy(), s)
    return df.with_columns(ts=pl.Series((s + clock.shift.get(rank, 0)) / 1000), dur=pl.Series((e - s) / 1000))


def _with_lanes(df: pl.DataFrame, key: str = "tid") -> pl.DataFrame:
    """`tid` moved to extra lanes (LANE_TID * lane + tid) where the track's slices overlap."""
    if df.height == 0:
        return df
    track = (df["pid"].cast(pl.Int64) * (1 << 20) + df[key].cast(pl.Int64)).to_numpy()
    lane = lanes(track, df["start_ns"].to_numpy(), df["end_ns"].to_numpy())
    if not lane.any():
        return df
    return df.with_columns(tid=pl.col("tid") + pl.Series(lane * LANE_TID, dtype=pl.Int64))


def _meta(writer: Writer, pid: int, name: str, sort: int, threads: list[tuple[int, str, int]]) -> None:
    rows = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}},
            {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": sort}}]
    for tid, tname, tsort in threads:
        rows += [{"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": tname}},
                 {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tsort}}]
    writer.lines(pl.Series([json.dumps(r, ensure_ascii=False) for r in rows]))


def _lane_names(df: pl.DataFrame, base: dict[int, str]) -> list[tuple[int, str, int]]:
    """Thread names of the extra lanes in `df` (their tids over LANE_TID)."""
    out = []
    for tid in df.filter(pl.col("tid") >= LANE_TID)["tid"].unique().sort().to_list():
        lane, orig = divmod(tid, LANE_TID)
        out.append((tid, f"{base.get(orig, orig)} (overlap {lane})", 1000 + tid % 1000 + lane))
    return out


# ---------------------------------------------------------------- one rank
def write_rank(writer: Writer, con, run: str, rank: int, clock: Clock, tracks: Tracks, sort: int) -> dict:
    """The events of one rank: processes and threads, host ops and regions on their threads,
    GPU ops on their streams, GPU-side annotations, and the launch -> GPU op flows."""
    from ..store import fetch_pl

    p = {"run": run, "rank": rank}
    host = fetch_pl(con, "SELECT * FROM host_ops WHERE run = $run AND rank = $rank", p)
    regions = fetch_pl(con, "SELECT * FROM regions WHERE run = $run AND rank = $rank", p)
    gpu = fetch_pl(con, "SELECT * FROM gpu_ops WHERE run = $run AND rank = $rank", p)
    on_gpu = (pl.col("source_category") == "gpu_user_annotation").fill_null(False) | (pl.col("domain") == "gpu").fill_null(False)
    gpu_regions = regions.filter(on_gpu & pl.col("device").is_not_null())
    regions = regions.filter(~(on_gpu & pl.col("device").is_not_null())).with_columns(
        pl.col("pid").fill_null(0), pl.col("tid").fill_null(0))

    pids = sorted(set(host["pid"].drop_nulls().to_list()) | set(regions["pid"].to_list()))
    for hp in pids:
        tracks.host_pid[(rank, hp)] = tracks.next_pid
        tracks.next_pid += 1
    host = host.filter(pl.col("pid").is_not_null()).with_columns(pl.col("tid").fill_null(0))
    streams = pl.concat([gpu.select("device", "stream"), gpu_regions.select("device", "stream")]).unique().sort(
        ["device", "stream"], nulls_last=True)
    if streams.height:
        tracks.gpu_pid[rank] = tracks.next_pid
        tracks.next_pid += 1
        for i, (d, s) in enumerate(streams.iter_rows()):
            tracks.gpu_tid[(rank, d, s)] = i + 1

    def out_pid(df: pl.DataFrame) -> pl.Expr:
        return pl.col("pid").replace_strict({k[1]: v for k, v in tracks.host_pid.items() if k[0] == rank},
                                            return_dtype=pl.Int64)

    # host ops and CPU-side regions share their threads' tracks
    h = _ts(clock, rank, host).with_columns(
        ph=pl.lit("X"), cat=pl.coalesce("source_category", pl.col("kind").replace_strict(HOST_CAT, default="other")),
        orig_pid=pl.col("pid"), pid=out_pid(host))
    r = _ts(clock, rank, regions).with_columns(
        ph=pl.lit("X"), orig_pid=pl.col("pid"), pid=out_pid(regions),
        cat=pl.when(pl.col("source_category").is_in(["user_annotation", "cpu_op"]))
              .then("source_category").otherwise(pl.lit("user_annotation")))
    both = _with_lanes(pl.concat([h.select("pid", "tid", "start_ns", "end_ns").with_columns(_t=pl.lit(0)),
                                  r.select("pid", "tid", "start_ns", "end_ns").with_columns(_t=pl.lit(1))]))
    h = h.with_columns(tid=both.filter(pl.col("_t") == 0)["tid"])
    r = r.with_columns(tid=both.filter(pl.col("_t") == 1)["tid"])

    # processes and threads
    for hp in pids:
        out = tracks.host_pid[(rank, hp)]
        tids = sorted(set(host.filter(pl.col("pid") == hp)["tid"].to_list())
                      | set(regions.filter(pl.col("pid") == hp)["tid"].to_list()))
        base = {t: f"thread {t}" for t in tids}
        name = f"rank {rank}" if len(pids) == 1 else f"rank {rank} · pid {hp}"
        _meta(writer, out, name, sort, [(t, base[t], i) for i, t in enumerate(tids)]
              + _lane_names(both.filter(pl.col("pid") == out), base))
    writer.frame(h, lambda part: _encode(part, [pl.col("orig_pid").alias("pid"), pl.col("correlation"),
                                                pl.col("external_id").alias("External id"), pl.col("kind")],
                                         nullable=("correlation", "External id"), raw=SHAPES))
    writer.lines(_encode(r, [pl.col("source").alias("source"), pl.col("domain"), pl.col("step")],
                         nullable=("domain", "step")))

    # GPU ops and GPU-side annotations on their streams
    gpid = tracks.gpu_pid.get(rank)
    if gpid is not None:
        tid_of = {(d, s): t for (rk, d, s), t in tracks.gpu_tid.items() if rk == rank}
        keyed = pl.DataFrame({"device": [k[0] for k in tid_of], "stream": [k[1] for k in tid_of],
                              "tid": list(tid_of.values())},
                             schema={"device": pl.Int32, "stream": pl.Int64, "tid": pl.Int64})
        g = _ts(clock, rank, gpu.join(keyed, on=["device", "stream"], how="left", nulls_equal=True,
                                      maintain_order="left"))
        g = g.with_columns(ph=pl.lit("X"), cat=pl.col("kind").replace_strict(GPU_CAT, default="kernel"),
                           orig_pid=pl.col("pid"), pid=pl.lit(gpid, pl.Int64))
        ga = _ts(clock, rank, gpu_regions.drop("tid").join(keyed, on=["device", "stream"], how="left",
                                                            nulls_equal=True, maintain_order="left"))
        ga = ga.with_columns(ph=pl.lit("X"), cat=pl.lit("gpu_user_annotation"), pid=pl.lit(gpid, pl.Int64))
        both = _with_lanes(pl.concat([g.select("pid", "tid", "start_ns", "end_ns").with_columns(_t=pl.lit(0)),
                                      ga.select("pid", "tid", "start_ns", "end_ns").with_columns(_t=pl.lit(1))]))
        g = g.with_columns(tid=both.filter(pl.col("_t") == 0)["tid"])
        ga = ga.with_columns(tid=both.filter(pl.col("_t") == 1)["tid"])
        base = {t: f"GPU {d} · stream {s}" for (d, s), t in tid_of.items()}
        _meta(writer, gpid, f"rank {rank} · GPU", sort + 1, [(t, n, t) for t, n in sorted(base.items())]
              + _lane_names(both, base))
        grid = pl.when(pl.col("grid_x").is_not_null()).then(pl.concat_list(
            pl.col("grid_x"), pl.col("grid_y").fill_null(1), pl.col("grid_z").fill_null(1)))
        block = pl.when(pl.col("block_x").is_not_null()).then(pl.concat_list(
            pl.col("block_x"), pl.col("block_y").fill_null(1), pl.col("block_z").fill_null(1)))
        gargs = [pl.col("device"), pl.col("stream"), pl.col("correlation"), pl.col("external_id").alias("External id"),
                 grid.alias("grid"), block.alias("block"), pl.col("registers").alias("registers per thread"),
                 pl.col("shared_memory").alias("shared memory"), pl.col("blocks_per_sm").alias("blocks per SM"),
                 pl.col("warps_per_sm").alias("warps per SM"),
                 pl.col("est_occupancy_pct").alias("est. achieved occupancy %"), pl.col("bytes"),
                 pl.col("copy_kind").alias("kind"), pl.col("src_kind"), pl.col("dst_kind"),
                 pl.col("collective").alias("Collective name"), pl.col("pg_name").alias("Process Group Name"),
                 pl.col("pg_desc").alias("Process Group Description"), pl.col("group_size").alias("Group size"),
                 pl.col("seq").alias("Seq"), pl.col("category"), pl.col("library"),
                 pl.col("orig_pid").alias("launch pid")]
        nullable = ("stream", "correlation", "External id", "grid", "block", "registers per thread", "shared memory",
                    "blocks per SM", "warps per SM", "est. achieved occupancy %", "bytes", "kind", "src_kind",
                    "dst_kind", "Collective name", "Process Group Name", "Process Group Description", "Group size",
                    "Seq", "category", "library", "launch pid")
        writer.frame(g, lambda part: _encode(part, gargs, nullable=nullable))
        writer.lines(_encode(ga, [pl.col("device"), pl.col("stream")], nullable=("stream",)))
        _launch_flows(writer, h, g)
    return {"rank": rank, "host_ops": host.height, "regions": regions.height + gpu_regions.height, "gpu_ops": gpu.height}


def _launch_flows(writer: Writer, h: pl.DataFrame, g: pl.DataFrame) -> None:
    """ac2g flows, as Kineto writes them: from the launching runtime/driver call (its start) to
    each GPU op with its correlation id (the op's start, bound to the op: "bp": "e")."""
    calls = h.filter(pl.col("correlation").is_not_null() & pl.col("kind").is_in(["runtime", "driver", "sync_api"]))
    calls = calls.select("orig_pid", "correlation", c_pid="pid", c_tid="tid", c_ts="ts").unique(
        ["orig_pid", "correlation"], keep="first", maintain_order=True)
    ops = g.filter(pl.col("correlation").is_not_null()).select("orig_pid", "correlation", "pid", "tid", "ts")
    pairs = ops.join(calls, on=["orig_pid", "correlation"], how="inner", maintain_order="left")
    if pairs.height == 0:
        return
    first = writer.flow_ids(pairs.height)
    pairs = pairs.with_columns(id=pl.int_range(first, first + pairs.height, dtype=pl.Int64),
                               cat=pl.lit("ac2g"), name=pl.lit("ac2g"))
    s = pairs.select(pl.lit("s").alias("ph"), "id", pl.col("c_pid").alias("pid"), pl.col("c_tid").alias("tid"),
                     pl.col("c_ts").alias("ts"), "cat", "name")
    f = pairs.select(pl.lit("f").alias("ph"), "id", "pid", "tid", "ts", "cat", "name", pl.lit("e").alias("bp"))
    for part in (s, f):
        writer.frame(part, lambda p: p.select(pl.struct(pl.all()).struct.json_encode())[:, 0])


# ---------------------------------------------------------------- the run
def run_clock(con, run: str, ranks: list[int]) -> Clock:
    """The run's common clock (module doc): ORIGIN = the earliest event start of the run."""
    from ..store import fetch_pl

    m = fetch_pl(con, "SELECT rank, coalesce(clock_offset_ns, 0) + coalesce(clock_refine_ns, 0) AS off "
                      "FROM runs WHERE run = $run", {"run": run})
    off = dict(m.iter_rows())
    first = fetch_pl(con, """
        SELECT rank, min(t) AS t FROM (
            SELECT rank, min(start_ns) AS t FROM gpu_ops WHERE run = $run GROUP BY rank
            UNION ALL SELECT rank, min(start_ns) FROM host_ops WHERE run = $run GROUP BY rank
            UNION ALL SELECT rank, min(start_ns) FROM regions WHERE run = $run GROUP BY rank) GROUP BY rank""",
                     {"run": run})
    starts = [t + off.get(r, 0) for r, t in first.iter_rows() if t is not None and r in ranks]
    origin = min(starts) if starts else 0
    return Clock(origin, {r: off.get(r, 0) - origin for r in ranks})
