"""Kernels replayed from CUDA/HIP graphs, attributed to the ops that captured them
(`traceq ingest EXEC_TRACE --graph-capture CAPTURE_TRACE_OR_DIR`).

A kernel replayed from a graph has no op of its own in the execution trace: it carries the
correlation id of the graph launch call (cudaGraphLaunch / cuGraphLaunch / hipGraphLaunch)
that replayed it. The ops that launched it ran once, while the graph was captured; vLLM and
SGLang record that capture in a trace of its own, beside the execution trace. Matching:

1. Capture trace (decoded by traceq's Kineto reader): each capture window, from a
   *StreamBeginCapture call to the next *StreamEndCapture call of the same thread, is one
   captured graph. Its kernels are that thread's kernel launch calls inside the window, in
   launch order, each named by the call's `kernel` arg (ROCm writes it; a launch under
   capture runs no kernel, so this is the one record of its name). The ops of a launch are
   the thread's cpu_ops inside the window that enclose the call (innermost = latest start).
2. Execution trace: the kernels with the correlation id of one graph launch call (same
   process) are one replay, in start order.
3. A replay matches the captured graph whose kernels have the same names, as many of each.
   Within it, the k-th replayed kernel of a name is the k-th launch of that name at capture
   (launch order itself on one stream; robust to kernels of concurrent streams that start in
   another order). No captured graph with those kernels, or several with different ops: a
   warning (runs.warnings), nothing attributed for that replay, never a guess. A capture
   without kernel names (CUDA runtime calls carry none) is matched by kernel count alone,
   when exactly one captured graph has that count, with a warning saying so.
4. The store (the contract the roofline analysis relies on): per replay and per captured
   cpu_op that (itself or in its subtree) launched a replayed kernel, one host_ops row of
   kind 'graph_op': its name and shape columns (input_dims, input_types, input_strides,
   concrete_inputs) from the capture, pid of the launching process, tid of the graph launch
   call, start_ns/end_ns = the GPU span of the replayed kernels under it (so the rows nest as
   the captured ops did), a fresh negative external_id, correlation null. Each replayed
   kernel's gpu_ops.external_id is the external_id of its innermost graph_op.

With capture traces, the GPU rows of a rank are held in memory (Arrow) until the replays are
matched, then written in their order. Replayed memcpy/memset nodes are left unattributed
(their launches at capture are copies, not kernels). A directory of capture traces: the
files its execution_details.json lists
(vLLM: [{file, batch_size, mode}]), else every trace in it; of those, a file named for a
rank (graph_capture_rank_0...) serves only that rank.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from ..errors import BadInput, TraceqError
from ..rules.host_api import GRAPH_LAUNCH
from .common import NotATrace, rank_from_filename

_BEGIN = r"^(cuda|cu|hip)StreamBeginCapture"
_END = r"^(cuda|cu|hip)StreamEndCapture"
_KERNEL_LAUNCH = r"(?i)Launch(Cooperative)?Kernel|LaunchKernel"
SHAPE_COLUMNS = ("input_dims", "input_types", "input_strides", "concrete_inputs")
DETAILS = "execution_details.json"
_TRACE_SUFFIXES = (".json", ".json.gz", ".gz")


# ------------------------------------------------------------------ the capture files
def capture_files(path: str | Path) -> list[Path]:
    """The capture traces `--graph-capture PATH` names: the file, or the traces of the
    directory (those its execution_details.json lists, when it has one). Each must be a
    readable Kineto trace: else a BadInput naming it."""
    p = Path(path)
    if not p.exists():
        raise BadInput("no such file or directory (--graph-capture)", p)
    if p.is_dir():
        details = p / DETAILS
        if details.is_file():
            files = [p / name for name in _listed(details)]
        else:
            files = sorted(f for f in p.iterdir() if f.is_file() and not f.name.startswith(".")
                           and f.name.endswith(_TRACE_SUFFIXES) and f.name != DETAILS)
        if not files:
            raise BadInput("holds no capture trace (*.json, *.json.gz) (--graph-capture)", p)
    else:
        files = [p]
    for f in files:
        if not f.is_file():
            raise BadInput(f"no such capture trace (listed in {DETAILS})", f)
        try:
            with open(f, "rb") as fh:
                head = fh.read(64)
        except OSError as exc:
            raise BadInput(f"capture trace: {exc.strerror or exc}", f) from None
        text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
        if head[:2] != b"\x1f\x8b" and text[:1] not in (b"{", b"["):
            raise BadInput("not a graph capture trace (not a Kineto/Chrome trace: no JSON, no gzip)", f)
    return files


def _listed(details: Path) -> list[str]:
    try:
        entries = json.loads(details.read_text())
        names = [e["file"] for e in entries]
    except (OSError, ValueError, TypeError, KeyError):
        raise BadInput('not a list of {"file": ...} objects', details) from None
    if not all(isinstance(n, str) and n and Path(n).name == n for n in names):
        raise BadInput("a file entry is not a plain file name", details)
    return names


def digest(files: list[Path]) -> str:
    """One sha256 of the capture traces (order-free): part of the execution run's identity."""
    from .hashing import sha256_file

    h = hashlib.sha256()
    for sha in sorted(sha256_file(f) for f in files):
        h.update(sha.encode())
    return h.hexdigest()


def with_capture(source_sha256: str, capture_digest: str | None) -> str:
    """The identity of an execution trace ingested with capture traces (`digest`)."""
    if capture_digest is None:
        return source_sha256
    return hashlib.sha256(f"{source_sha256}+graph-capture:{capture_digest}".encode()).hexdigest()


def for_rank(files: list[Path], rank: int) -> list[Path]:
    """The capture traces of `rank`: those named for it, else those named for no rank."""
    ranks = {f: rank_from_filename(f) for f in files}
    mine = [f for f in files if ranks[f] == rank]
    return mine or [f for f in files if ranks[f] is None]


# ------------------------------------------------------------------ a capture trace -> graphs
def read_capture(path: Path):
    """The captured graphs of one capture trace: (launches, ops, enclosing pairs) frames.

    launches: graph, pos (launch order), kernel (name or null), start_ns, end_ns;
    ops: op (key), name, start_ns, end_ns and the shape columns the store has;
    pairs: graph, pos, op, inner (the op is the launch's innermost)."""
    import polars as pl

    host, names = _decode(path)
    rt = host.filter(pl.col("kind").is_in(["runtime", "driver"]))
    begins = rt.filter(pl.col("name").str.contains(_BEGIN)).select("pid", "tid", lo=pl.col("start_ns")).sort("lo")
    ends = rt.filter(pl.col("name").str.contains(_END)).select("pid", "tid", _e=pl.col("start_ns"),
                                                                 hi=pl.col("end_ns")).sort("_e")
    windows = (begins.join_asof(ends, left_on="lo", right_on="_e", by=["pid", "tid"], strategy="forward",
                               check_sortedness=False)
               .filter(pl.col("hi").is_not_null()).sort("lo").with_row_index("graph").drop("_e"))
    if windows.height == 0:
        raise BadInput("not a graph capture trace (no cudaStreamBeginCapture/hipStreamBeginCapture ... "
                       "EndCapture call in it)", path)
    tag = f"{path.name}#"
    windows = windows.with_columns(graph=pl.lit(tag) + pl.col("graph").cast(pl.String))

    def inside(frame: pl.DataFrame) -> pl.DataFrame:
        return (frame.sort("start_ns").join_asof(windows, left_on="start_ns", right_on="lo", by=["pid", "tid"],
                                                        check_sortedness=False)
                .filter(pl.col("hi").is_not_null() & (pl.col("end_ns") <= pl.col("hi"))))

    calls = rt.join(names, on=["pid", "correlation"], how="left")
    calls = calls.filter(pl.col("kernel").is_not_null() | (pl.col("name").str.contains(_KERNEL_LAUNCH)
                                                            & ~pl.col("name").str.contains(GRAPH_LAUNCH)))
    launches = (inside(calls).sort("graph", "start_ns", "correlation")
                .with_columns(pos=pl.int_range(pl.len()).over("graph"))
                .select("graph", "pos", "kernel", "start_ns", "end_ns"))
    shapes = [c for c in SHAPE_COLUMNS if c in host.columns]
    ops = inside(host.with_row_index("op").filter(pl.col("kind") == "cpu_op")).select(
        "graph", pl.col("op").cast(pl.Int64), "name", "start_ns", "end_ns", *shapes)
    pairs = (launches.join_where(ops.select("graph", "op", o_start="start_ns", o_end="end_ns"),
                                 pl.col("graph") == pl.col("graph_right"), pl.col("o_start") <= pl.col("start_ns"),
                                 pl.col("o_end") >= pl.col("end_ns"))
             .sort("graph", "pos", pl.col("o_start"), pl.col("o_end"), descending=[False, False, True, False])
             .with_columns(inner=pl.int_range(pl.len()).over("graph", "pos") == 0)
             .select("graph", "pos", "op", "inner"))
    return launches.drop("start_ns", "end_ns"), ops.drop("graph"), pairs


def _decode(path: Path):
    """host_ops of the trace (traceq's Kineto reader) and the kernel named by each launch call
    (pid, correlation, kernel)."""
    import polars as pl
    import pyarrow as pa

    from .kineto.reader import decode_file
    from .kineto.translate import translate

    tmp = Path(tempfile.mkdtemp(prefix="traceq-capture-"))
    try:
        try:
            decoded = decode_file(path, tmp)
            names = pl.concat([pl.read_parquet(p, columns=["pid", "correlation", "launch_kernel"], glob=False) for p in decoded.parts]
                              or [pl.DataFrame(schema={"pid": pl.Int64, "correlation": pl.Int64, "launch_kernel": pl.String})])
            pieces: dict[str, list] = {}

            class _Keep:
                def __init__(self, table: str):
                    self.table = table

                def write(self, t) -> None:
                    pieces.setdefault(self.table, []).append(t)

            translate(decoded, path, _Keep, [])
        except NotATrace as exc:
            raise BadInput(f"not a graph capture trace: {exc.problem}", path) from None
        except TraceqError as exc:
            raise BadInput(f"graph capture trace: {exc.problem}", path) from None
        except OSError as exc:
            raise BadInput(f"graph capture trace: {exc.strerror or exc}", path) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if "host_ops" not in pieces:
        raise BadInput("not a graph capture trace (no host calls in it)", path)
    host = pl.from_arrow(pa.concat_tables(pieces["host_ops"], promote_options="default"))
    names = (names.filter(pl.col("launch_kernel").is_not_null() & pl.col("correlation").is_not_null())
             .unique(["pid", "correlation"], keep="first", maintain_order=True).rename({"launch_kernel": "kernel"}))
    return host, names


def load_captures(files: list[Path]):
    """`read_capture` of each file, concatenated (op keys made unique across the files)."""
    import polars as pl

    launches, ops, pairs = [], [], []
    offset = 0
    for f in files:
        la, op, pa_ = read_capture(f)
        launches.append(la)
        ops.append(op.with_columns(pl.col("op") + offset))
        pairs.append(pa_.with_columns(pl.col("op") + offset))
        offset += int(op["op"].max() or 0) + 1
    return (pl.concat(launches), pl.concat(ops, how="diagonal_relaxed"), pl.concat(pairs))


# ------------------------------------------------------------------ replays -> captured graphs
def _signatures(frame, key: list[str], order: str):
    """Per group of `key`: its kernel count n and the signature of its kernel names (the
    sorted names, hashed; null when a name is missing)."""
    import polars as pl

    return frame.sort(order).group_by(key).agg(
        n=pl.len(), sig=pl.when(pl.col("kernel").null_count() == 0)
        .then(pl.col("kernel").sort().str.join("\x1f").hash()).otherwise(None))


def _op_signature(graphs: list[str], launches, pairs, ops) -> set:
    """What the ops of the graphs launched, position by position (name and shapes of each
    launch's innermost op): one element when the graphs would be attributed alike."""
    import polars as pl

    cols = [c for c in ("name", *SHAPE_COLUMNS) if c in ops.columns]
    inner = (pairs.filter(pl.col("graph").is_in(graphs) & pl.col("inner")).join(ops, on="op")
             .sort("graph", "pos").group_by("graph", maintain_order=True)
             .agg(s=pl.concat_str([pl.col(c).fill_null("") for c in cols], separator="\x1e").str.join("\x1f")))
    return set(inner["s"].to_list()) if inner.height == len(graphs) else {None, *graphs}


def match(replays, launches, pairs, ops) -> tuple:
    """Replays (pid, correlation, kernel, start_ns, row) -> (their kernels with graph and pos,
    warnings). Python loops over the distinct replay signatures only."""
    import polars as pl

    warnings: list[str] = []
    rsig = _signatures(replays.rename({"name": "kernel"}) if "name" in replays.columns else replays,
                       ["pid", "correlation"], "start_ns")
    gsig = _signatures(launches, ["graph"], "pos")
    chosen = []
    for (n, sig), reps in rsig.group_by("n", "sig", maintain_order=True):
        named = gsig.filter((pl.col("n") == n) & (pl.col("sig") == sig)) if sig is not None else gsig.clear()
        graph = None
        if named.height == 1:
            graph = named["graph"][0]
        elif named.height > 1:
            cands = named["graph"].to_list()
            if len(_op_signature(cands, launches, pairs, ops)) == 1:
                graph = cands[0]   # captured alike: any of them attributes the same ops and shapes
            else:
                warnings.append(f"graph replays: {reps.height} replay(s) of {n} kernels match {len(cands)} captured "
                                f"graphs with different ops ({', '.join(cands[:3])}{', ...' if len(cands) > 3 else ''}): "
                                "not attributed (give --graph-capture the capture trace of this batch size)")
        else:
            unnamed = gsig.filter((pl.col("n") == n) & pl.col("sig").is_null())
            if unnamed.height == 1:
                graph = unnamed["graph"][0]
                warnings.append(f"graph replays: {reps.height} replay(s) of {n} kernels matched captured graph "
                                f"{graph} by kernel count alone (the capture trace names no kernels)")
            else:
                warnings.append(f"graph replays: {reps.height} replay(s) of {n} kernels match no captured graph "
                                "(kernel names or counts differ): not attributed")
        if graph is not None:
            chosen.append(reps.select("pid", "correlation", graph=pl.lit(graph)))
    if not chosen:
        return None, warnings
    chosen = pl.concat(chosen)
    named_graphs = gsig.filter(pl.col("sig").is_not_null())["graph"]
    ks = (replays.join(chosen, on=["pid", "correlation"]).sort("start_ns", "row")
          .with_columns(k=pl.int_range(pl.len()).over("pid", "correlation", "name"),
                        j=pl.int_range(pl.len()).over("pid", "correlation"),
                        by_name=pl.col("graph").is_in(named_graphs.implode())))
    la = launches.with_columns(k=pl.int_range(pl.len()).over("graph", "kernel", order_by="pos"))
    by_name = ks.filter("by_name").join(la, left_on=["graph", "name", "k"], right_on=["graph", "kernel", "k"])
    by_order = ks.filter(~pl.col("by_name")).join(la.select("graph", "pos"), left_on=["graph", "j"], right_on=["graph", "pos"]) \
        .with_columns(pos=pl.col("j"))
    return pl.concat([by_name.select("row", "pid", "correlation", "start_ns", "end_ns", "graph", "pos"),
                      by_order.select("row", "pid", "correlation", "start_ns", "end_ns", "graph", "pos")]), warnings


def attribute(host, gpu, launches, ops, pairs):
    """(graph_op host rows, gpu row -> external_id, warnings) for the execution trace's
    `host` (its graph launch calls: pid, tid, correlation, start_ns) and `gpu` rows (row,
    pid, correlation, kind, name, start_ns, end_ns), after the store contract (module doc)."""
    import polars as pl

    calls = host.select("pid", "correlation", "tid", call_ns="start_ns").unique(["pid", "correlation"])
    replays = gpu.filter(pl.col("kind") == "kernel").join(calls.select("pid", "correlation"), on=["pid", "correlation"])
    if replays.height == 0:
        return None, None, []
    kernels, warnings = match(replays, launches, pairs, ops)
    total_ns = int((replays["end_ns"] - replays["start_ns"]).sum())
    if kernels is None:
        return None, None, warnings
    under = kernels.join(pairs, on=["graph", "pos"])   # each kernel with each captured op above it
    spans = (under.group_by("pid", "correlation", "op")
             .agg(start_ns=pl.col("start_ns").min(), end_ns=pl.col("end_ns").max())
             .join(calls, on=["pid", "correlation"])
             .join(ops.select("op", o_start=pl.col("start_ns"), o_end=pl.col("end_ns")), on="op")
             .sort("call_ns", "correlation", "o_start", "o_end", descending=[False, False, False, True])
             .with_columns(external_id=pl.lit(-1, pl.Int64) - pl.int_range(pl.len(), dtype=pl.Int64)))
    shapes = [c for c in SHAPE_COLUMNS if c in ops.columns]
    rows = spans.join(ops.select("op", "name", *shapes), on="op", maintain_order="left").select(
        "pid", "tid", kind=pl.lit("graph_op"), name="name", start_ns="start_ns", end_ns="end_ns",
        correlation=pl.lit(None, pl.Int64), external_id="external_id", unfinished=pl.lit(False), *shapes)
    ids = (under.filter("inner").join(spans.select("pid", "correlation", "op", "external_id"),
                                      on=["pid", "correlation", "op"]).select("row", "external_id"))
    done_ns = int(kernels.filter(pl.col("row").is_in(ids["row"].implode()))
                  .select((pl.col("end_ns") - pl.col("start_ns")).sum()).item() or 0)
    if done_ns < total_ns:
        warnings.append(f"graph replays: {100 * done_ns / max(total_ns, 1):.1f} % of the replayed kernel time "
                        f"({replays.height} kernels) attributed to captured ops")
    return rows, ids, warnings


# ------------------------------------------------------------------ the ingest's fill
def attributing(fill: Callable, files: list[Path], rank: int, warnings: list[str]) -> Callable:
    """A Kineto reader's `fill(open_table)` that attributes the graph replays: host rows are
    written through (the graph launch calls noted), GPU rows held until the captures are
    matched, then written in their order with their external_id; the graph_op rows follow
    the host rows."""

    def wrapped(open_table) -> None:
        import polars as pl
        import pyarrow as pa

        held: list = []
        calls: list = []
        low = [0]

        class _Tee:
            def __init__(self, writer):
                self.writer = writer

            def write(self, t) -> None:
                self.writer.write(t)
                h = pl.from_arrow(t.select(["pid", "tid", "kind", "name", "start_ns", "correlation", "external_id"]))
                low[0] = min(low[0], int(h["external_id"].min() or 0))
                calls.append(h.filter(pl.col("kind").is_in(["runtime", "driver"]) & pl.col("name").str.contains(GRAPH_LAUNCH)
                                      & pl.col("correlation").is_not_null()))

        class _Hold:
            def write(self, t) -> None:
                held.append(t)

        def proxy(table: str):
            if table == "gpu_ops":
                return _Hold()
            return _Tee(open_table(table)) if table == "host_ops" else open_table(table)

        fill(proxy)
        if not held:
            return
        gpu = pa.concat_tables(held, promote_options="default")
        mine = for_rank(files, rank)
        host = pl.concat(calls) if calls else None
        if host is None or host.height == 0:
            warnings.append("graph capture given, but no graph launch call (cudaGraphLaunch/hipGraphLaunch) in this trace")
        elif not mine:
            warnings.append(f"graph capture given, but none of its traces is for rank {rank}")
        else:
            frame = pl.from_arrow(gpu.select(["pid", "correlation", "kind", "name", "start_ns", "end_ns"])).with_row_index("row")
            rows, ids, notes = attribute(host, frame, *load_captures(mine))
            warnings.extend(notes)
            if rows is not None and rows.height:
                low_id = min(low[0], int(_ext_min(gpu)))
                shift = low_id if low_id < 0 else 0
                rows = rows.with_columns(pl.col("external_id") + shift)
                ids = ids.with_columns(pl.col("external_id") + shift)
                open_table("host_ops").write(rows.to_arrow())
                ext = (pl.from_arrow(gpu.select(["external_id"])).with_row_index("row")
                       .join(ids.rename({"external_id": "_g"}), on="row", how="left", maintain_order="left")
                       .select(pl.coalesce("_g", "external_id"))["_g"])
                gpu = gpu.set_column(gpu.schema.get_field_index("external_id"), "external_id", ext.to_arrow())
        out = open_table("gpu_ops")
        for batch in gpu.to_batches(max_chunksize=1 << 16):
            out.write(pa.Table.from_batches([batch]))

    return wrapped


def _ext_min(gpu) -> int:
    """The least external id of the GPU rows, 0 when none is negative."""
    import pyarrow.compute as pc

    m = pc.min(gpu["external_id"]).as_py()
    return min(int(m), 0) if m is not None else 0
