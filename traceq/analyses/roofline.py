"""Roofline: how close each op runs to the hardware. Per (op, input dims, dtypes): FLOPs and
minimal bytes per call from the performance model (traceq/perf, docs/perf_model.md), the GPU
time of the op's calls (every GPU op its subtree launched), achieved TFLOP/s and TB/s (mean over
calls), the arithmetic intensity, the device's peaks (traceq/rules/gpus.toml) and the share of
the roofline min(peak compute, intensity × peak bandwidth) reached. Headline: MFU over the GPU
span, the share of GPU time the model covers, the op losing the most time against its roofline.
Which op call owns each GPU op: traceq/engine/op_owner.py (SQL: traceq/queries/op_calls.sql,
op_points.sql).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..engine.scope import Scope
from ..engine.truncation import no_gpu_reason
from ..errors import TraceqError
from ..lazy import polars as pl
from .spec import Analysis, Block, Column, Out, Param, Result, cols, top_param

REPORT_ROWS = 30
NO_SHAPES = ("the trace records no input shapes: profile with record_shapes=True (torch.profiler), or "
             "emit_nvtx(record_shapes=True) under nsys, to get FLOPs and bytes per op")

COLUMNS = (
    Column("op", "the op (aten::mm, ...) whose calls own the GPU work: of the modelled ops around its launch, "
                 "the outermost that is no wrapper of a same-family op (aten::linear yields to aten::addmm)"),
    Column("category", "the model's op family: gemm, attention, conv, norm, softmax, elementwise, reduce, embedding"),
    Column("input_dims", "the op's input dims as the trace gives them (a list of lists; JSON: a list)"),
    Column("input_types", "the op's input dtypes as the trace gives them (null from nsys)"),
    Column("calls", "op calls that launched GPU work"),
    Column("kernel_ns", "GPU time of all GPU ops the calls launched, memsets included"),
    Column("flop", "floating-point operations per call (the model's formula)"),
    Column("bytes", "minimal bytes moved per call: each input read once, the output written once", "bytes"),
    Column("tflops", "achieved TFLOP/s (1e12 flop/s): mean over calls of flop / the call's GPU time"),
    Column("tbps", "achieved TB/s (1e12 B/s): mean over calls of bytes / the call's GPU time"),
    Column("intensity", "arithmetic intensity, flop/byte"),
    Column("peak_tflops", "the device's dense peak for the op's dtype and unit (tensor cores or not), TFLOP/s"),
    Column("peak_tbps", "the device's peak memory bandwidth, TB/s"),
    Column("roofline_pct", "achieved TFLOP/s against min(peak_tflops, intensity × peak_tbps); the memory roof "
                           "alone where the device has no compute peak for the dtype (integers)", "%"),
    Column("bound", "compute when intensity × peak_tbps ≥ peak_tflops, else memory"),
)


@dataclass
class Efficiency:
    """The headline's numbers (diagnose's efficiency view and the report read them)."""
    device: str | None                 # the device name the trace records
    known: bool                        # traceq knows its peaks (or they were given)
    peak_tflops: float | None          # the peak MFU is measured against (dtype of most flop)
    peak_dtype: str | None
    mfu_pct: float | None
    modelled_pct: float | None         # share of GPU op time the model covers
    span_ns: int = 0
    gpu_ns: int = 0
    flop: float = 0.0
    shapes: bool = True
    worst: list[dict] = field(default_factory=list)    # rows losing the most time, most first

    def to_dict(self) -> dict:
        return {"device": self.device, "peaks_known": self.known, "mfu_pct": self.mfu_pct,
                "mfu_peak_tflops": self.peak_tflops, "mfu_dtype": self.peak_dtype,
                "modelled_pct": self.modelled_pct, "shapes": self.shapes, "worst": self.worst}


def _devices(scope: Scope) -> list[str]:
    rows = scope.con.execute(
        "SELECT DISTINCT json_extract_string(d.value, '$.name') FROM runs r, json_each(r.devices) d "
        "WHERE r.run = $run AND r.rank IN (SELECT rank FROM scope_window) AND r.devices IS NOT NULL",
        {"run": scope.run}).fetchall()
    return sorted(n for (n,) in rows if n)


def _names(scope: Scope) -> tuple[dict[str, str], bool]:
    """({op name: family} of the scope's op names the performance model covers, whether any CPU
    op or NVTX range of the scope records input shapes)."""
    from ..perf.cost import family_of

    names = scope.con.execute(
        "SELECT DISTINCT name FROM host_ops WHERE run = $run AND kind IN ('cpu_op', 'graph_op') "
        "AND rank IN (SELECT rank FROM scope_window) "
        "UNION SELECT DISTINCT trim(split_part(name, ',', 1)) FROM regions WHERE run = $run AND source = 'nvtx' "
        "AND input_dims IS NOT NULL AND rank IN (SELECT rank FROM scope_window)", {"run": scope.run}).fetchall()
    kept = {n: f for (n,) in names if n and (f := family_of(n))}
    shapes = scope.con.execute(
        "SELECT (SELECT count(*) FROM (SELECT 1 FROM host_ops WHERE run = $run AND kind IN ('cpu_op', 'graph_op') "
        "AND input_dims IS NOT NULL AND rank IN (SELECT rank FROM scope_window) LIMIT 1)) + "
        "(SELECT count(*) FROM (SELECT 1 FROM regions WHERE run = $run AND source = 'nvtx' AND input_dims IS NOT NULL "
        "AND rank IN (SELECT rank FROM scope_window) LIMIT 1))", {"run": scope.run}).fetchone()[0]
    return kept, bool(shapes)


def groups_of(calls: pl.DataFrame, ops: pl.DataFrame) -> pl.DataFrame:
    """One row per op and arguments (op, input dims, input types, concrete inputs: what the
    FLOP count depends on) over the calls that own GPU work: calls, kernel_ns (their GPU ops'
    summed durations), inv_ns_mean (mean over calls of 1 / the call's GPU ns: flop times it is
    the mean achieved flop/ns), tensor_core_ns (the part in tensor-core kernels), ranks."""
    per_call = (ops.filter(pl.col("owner").is_not_null())
                .group_by("owner").agg(gpu_ns=pl.col("dur_ns").sum(),
                                       tc_ns=pl.col("dur_ns").filter(pl.col("tensor_core")).sum()))
    keys = ["op", "family", "input_dims", "input_types", "concrete_inputs"]
    return (per_call.join(calls.with_row_index("owner").select("owner", "rank", *keys), on="owner")
            .group_by(keys).agg(calls=pl.len(), kernel_ns=pl.col("gpu_ns").sum(),
                                inv_ns_mean=(1.0 / pl.when(pl.col("gpu_ns") > 0).then(pl.col("gpu_ns"))).mean(),
                                tensor_core_ns=pl.col("tc_ns").sum(), ranks=pl.col("rank").n_unique())
            .with_columns(pl.col("calls").cast(pl.Int64), pl.col("kernel_ns").cast(pl.Int64),
                          pl.col("tensor_core_ns").cast(pl.Int64))
            .sort(["kernel_ns", "op", "input_dims", "input_types", "concrete_inputs"],
                  descending=[True, False, False, False, False], nulls_last=True))


def rest_of(ops: pl.DataFrame) -> pl.DataFrame:
    """The GPU time no modelled call owns, per GPU op name: category, kind, count, total_ns and
    graph_replay (replayed from a CUDA/HIP graph without a known captured op)."""
    return (ops.filter(pl.col("owner").is_null())
            .group_by("name").agg(pl.col("category").first(), pl.col("kind").first(), count=pl.len(),
                                  total_ns=pl.col("dur_ns").sum(),
                                  graph_replay=pl.col("graph_replay").any())
            .with_columns(pl.col("count").cast(pl.Int64), pl.col("total_ns").cast(pl.Int64))
            .sort(["total_ns", "name"], descending=[True, False]))


def span_of(ops: pl.DataFrame) -> dict:
    """span_ns: Σ over ranks and devices of last GPU op end − first start (the MFU denominator);
    gpu_ns: summed GPU op time."""
    per = ops.group_by("rank", "device").agg(span=pl.col("end_ns").max() - pl.col("start_ns").min(),
                                             busy=pl.col("dur_ns").sum())
    return {"span_ns": int(per["span"].sum() or 0), "gpu_ns": int(per["busy"].sum() or 0)}


def _parse(text):
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _spec(scope: Scope):
    """(the device name the scope records, its DeviceSpec): the first name traceq knows, else
    the first name with no spec (None, None without a recorded device)."""
    from ..perf.devices import device_spec

    names = _devices(scope)
    known = [(n, s) for n in names if (s := device_spec(n)) is not None]
    return known[0] if known else ((names[0] if names else None), None)


def model_rows(groups: pl.DataFrame, spec, peak_tflops: float | None, peak_tbps: float | None) -> pl.DataFrame:
    """The roofline table from groups_of's rows: the model's cost per row, achieved rates and
    the device's roofline."""
    from ..perf.cost import op_cost

    out: dict[str, list] = {k: [] for k in ("category", "flop", "bytes", "dtype", "unit", "peak_tflops", "peak_tbps")}
    for r in groups.iter_rows(named=True):
        cost = op_cost(r["op"], _parse(r["input_dims"]), _parse(r["input_types"]), _parse(r["concrete_inputs"]))
        dtype = cost.dtype if cost else None
        unit = cost.unit if cost else None
        if cost and unit == "matrix" and dtype == "fp32" and r["kernel_ns"] and \
                (r["tensor_core_ns"] or 0) >= 0.5 * r["kernel_ns"]:
            dtype = "tf32"      # FP32 inputs computed on tensor cores: TF32
        out["category"].append(cost.family if cost else r["family"])
        out["flop"].append(cost.flop if cost else None)
        out["bytes"].append(cost.bytes if cost else None)
        out["dtype"].append(dtype)
        out["unit"].append(unit)
        pt = (peak_tflops or (spec.peak_tflops(dtype, unit) if spec else None)) if cost else None
        out["peak_tflops"].append(pt)
        out["peak_tbps"].append((peak_tbps or (spec.hbm_tbps if spec else None)) if cost else None)
    df = groups.with_columns(**{k: pl.Series(k, v, dtype=pl.Float64 if k.startswith("peak") else
                                             pl.Int64 if k in ("flop", "bytes") else pl.String)
                                for k, v in out.items()})
    roof = pl.min_horizontal(pl.col("peak_tflops"), pl.col("intensity") * pl.col("peak_tbps"))
    return (df.with_columns(tflops=pl.col("flop") * pl.col("inv_ns_mean") / 1e3,
                            tbps=pl.col("bytes") * pl.col("inv_ns_mean") / 1e3,
                            intensity=pl.when(pl.col("bytes") > 0).then(pl.col("flop") / pl.col("bytes")))
              .with_columns(roofline_pct=pl.when(roof > 0).then(100 * pl.col("tflops") / roof),
                            bound=pl.when(pl.col("intensity").is_null() | pl.col("peak_tbps").is_null()).then(None)
                            .when(pl.col("peak_tflops").is_null()).then(pl.lit("memory"))
                            .when(pl.col("intensity") * pl.col("peak_tbps") >= pl.col("peak_tflops"))
                            .then(pl.lit("compute")).otherwise(pl.lit("memory")))
              .with_columns(lost_ns=(pl.col("kernel_ns") * (1 - pl.col("roofline_pct").clip(0, 100) / 100))))


def efficiency_of(df: pl.DataFrame, span: dict, device: str | None, spec, peak_tflops: float | None,
                  shapes: bool) -> Efficiency:
    """MFU = Σ modelled flop / (GPU span × peak of the dtype carrying the most flop, on tensor
    cores when its ops are matrix ops); modelled_pct = modelled GPU time / all GPU op time."""
    span_ns, gpu_ns = span.get("span_ns") or 0, span.get("gpu_ns") or 0
    known = df.filter(pl.col("flop").is_not_null())
    flop = float((known["flop"] * known["calls"]).sum()) if known.height else 0.0
    eff = Efficiency(device, spec is not None or bool(peak_tflops), None, None, None,
                     round(100 * known["kernel_ns"].sum() / gpu_ns, 2) if gpu_ns else None,
                     span_ns, gpu_ns, flop, shapes)
    if known.height:
        by = (known.with_columns(f=pl.col("flop") * pl.col("calls")).group_by("dtype", "unit")
              .agg(pl.col("f").sum(), pl.col("peak_tflops").max())
              .sort(["f", "dtype", "unit"], descending=[True, False, False], nulls_last=True))
        top = by.row(0, named=True)
        eff.peak_dtype, eff.peak_tflops = top["dtype"], top["peak_tflops"]
        if eff.peak_tflops and span_ns:
            eff.mfu_pct = round(100 * flop / (span_ns * 1e-9) / (eff.peak_tflops * 1e12), 3)
        worst = (known.filter(pl.col("lost_ns").is_not_null())
                 .sort(["lost_ns", "op", "input_dims", "input_types", "concrete_inputs"],
                       descending=[True, False, False, False, False], nulls_last=True).head(3))
        eff.worst = [{"op": r["op"], "input_dims": _parse(r["input_dims"]), "kernel_ns": r["kernel_ns"],
                      "tflops": r["tflops"], "roofline_pct": r["roofline_pct"], "bound": r["bound"],
                      "lost_ns": round(r["lost_ns"])} for r in worst.iter_rows(named=True)]
    return eff


def roofline_scoped(scope: Scope, peak_tflops: float | None = None, peak_tbps: float | None = None):
    """(table, unmodelled GPU ops, Efficiency) of a scope."""
    from ..engine.op_owner import owned

    names, shapes = _names(scope)
    calls, ops = owned(scope, names)
    rest, span = rest_of(ops), span_of(ops)
    device, spec = _spec(scope)
    df = model_rows(groups_of(calls, ops), spec, peak_tflops, peak_tbps)
    eff = efficiency_of(df, span, device, spec, peak_tflops, shapes)
    return df, rest, eff


def _fmt_dims(text: str | None, scalars: bool = True) -> str:
    """Input dims as compact JSON; without `scalars`, the trailing empty dims (scalar arguments)
    left out, so a narrow column shows the tensors' shapes."""
    v = _parse(text)
    if v is None:
        return "–"
    if not scalars and isinstance(v, list):
        while v and v[-1] == []:
            v = v[:-1]
    return json.dumps(v, separators=(",", ":"))


def headline(df: pl.DataFrame, eff: Efficiency, scope: Scope) -> str:
    where = f"run {scope.run}{'' if scope.rank is None else f' rank {scope.rank}'}"
    if not eff.gpu_ns:
        return f"{where}: no GPU kernels, copies or memsets in scope ({no_gpu_reason(scope)})"
    dev = eff.device or "device not recorded"
    parts = [f"{where} on {dev}" + ("" if eff.known else " (peaks unknown to traceq: --peak-tflops/--peak-tbps)")]
    if not eff.shapes:
        parts.append(NO_SHAPES)
    if eff.mfu_pct is not None:
        parts.append(f"MFU {eff.mfu_pct:.1f} % ({eff.flop / 1e12:,.3g} TFLOP in {eff.span_ns / 1e6:,.2f} ms of GPU span "
                     f"against {eff.peak_tflops:,.1f} TFLOP/s {eff.peak_dtype or ''})".replace(" )", ")"))
    if eff.modelled_pct is not None and eff.shapes:
        parts.append(f"the model covers {eff.modelled_pct:.1f} % of GPU op time")
    if eff.worst:
        w = eff.worst[0]
        parts.append(f"furthest below its roofline by time: {w['op']} {dims_words(w['input_dims'])} at "
                     f"{w['roofline_pct']:.0f} % ({w['bound']}-bound, {w['kernel_ns'] / 1e6:,.2f} ms)")
    return "; ".join(parts)


def dims_words(dims) -> str:
    """Input dims (a list) for a sentence: compact, trailing scalars left out, at most 48 chars."""
    from ..text import shorten

    return shorten(_fmt_dims(json.dumps(dims), scalars=False), 48)


ROW_FIELDS = tuple(c.name for c in COLUMNS)


def compute(scope: Scope, top: int = 30, peak_tflops: float | None = None, peak_tbps: float | None = None) -> Out:
    for name, v in (("--peak-tflops", peak_tflops), ("--peak-tbps", peak_tbps)):
        if v is not None and not v > 0:
            raise TraceqError(f"{name} {v}: must be a positive number")
    df, rest, eff = roofline_scoped(scope, peak_tflops, peak_tbps)
    table = df.select(*ROW_FIELDS)
    notes = []
    replay = rest.filter(pl.col("graph_replay"))
    if replay.height:
        notes.append(f"{replay['count'].sum():,} GPU ops ({replay['total_ns'].sum() / 1e6:,.2f} ms) were replayed from "
                     "CUDA/HIP graphs without their capture trace: no op is known for them (traceq ingest TRACE "
                     "--graph-capture CAPTURE_TRACE_OR_DIR attributes them)")
    return Out(table.head(top) if top else table, headline(table, eff, scope),
               tables={"unmodelled": rest.head(top) if top else rest}, notes=notes, value=eff)


# the terminal's column order: what a reader looks for first (how close to the roof), then the
# model's numbers, which a narrow terminal drops first (drop_first)
VIEW_ORDER = ("op", "input_dims", "calls", "kernel_ns", "tflops", "tbps", "roofline_pct", "bound", "category",
              "input_types", "flop", "bytes", "intensity", "peak_tflops", "peak_tbps")
DIMS_WIDTH = 28


def view(res: Result) -> list[Block]:
    from ..text import shorten

    df = res.df.with_columns(pl.col("input_dims").map_elements(lambda t: shorten(_fmt_dims(t, scalars=False), DIMS_WIDTH),
                                                               return_dtype=pl.String),
                             pl.col("input_types").str.replace_all(r'c10::|"|\[|\]', "")
                             .str.replace_all(",", " ")).select(VIEW_ORDER)
    blocks = [Block(df, res.headline, notes=res.notes, drop_first=res.analysis.drop_first)]
    rest = res.tables.get("unmodelled")
    if rest is not None and rest.height:
        blocks.append(Block(rest.select("name", "category", "count", "total_ns", "graph_replay"),
                            title="GPU time the model does not cover, per GPU op name",
                            drop_first=("graph_replay", "category")))
    return blocks


def _json(res: Result) -> dict:
    def rows(df):
        out = []
        for r in res.rows_df(df).to_dicts():
            for k in ("input_dims", "input_types"):
                if k in r:
                    r[k] = _parse(r[k])
            out.append(r)
        return out

    eff: Efficiency = res.value
    return {"analysis": "roofline", "run": res.run, "rank": res.rank, "steps": res.steps, "labels": res.labels,
            "headline": res.headline, "efficiency": eff.to_dict() if eff else None, "units": res.units(),
            "rows": rows(res.df), "unmodelled": res.rows_df(res.tables["unmodelled"]).to_dicts()}


# ---------------------------------------------------------------- the report
def report_section(ctx) -> list:
    """The MFU headline, the roofline figure (log-log: one point per op and shape, sized by GPU
    time, the device's roofs) and the table."""
    from ..report.html import table
    from ..report.parts import Section, add, add_table

    sec = Section("roofline", ANALYSIS.report,
                  intro="Per op and input shapes: FLOPs and minimal bytes per call from the performance model "
                        "(docs/perf_model.md), achieved TFLOP/s and TB/s, and the share of the device's roofline "
                        "min(peak compute, intensity × peak bandwidth) reached. MFU = modelled FLOPs / (GPU span "
                        "× peak).")
    with ctx.guard(sec, "roofline"):
        df, rest, eff = roofline_scoped(ctx.scope)
        sec.headline = headline(df, eff, ctx.scope)
        ctx.results["roofline"] = (df, eff)
        if df.height:
            fig = figure(df, eff)
            add(sec, fig, "roofline")
            shown = df.select(*ROW_FIELDS).head(REPORT_ROWS).with_columns(
                pl.col("input_dims").map_elements(_fmt_dims, return_dtype=pl.String))
            add_table(sec, table(shown, max_rows=REPORT_ROWS), "roofline")
    return [sec]


def figure(df: pl.DataFrame, eff: Efficiency):
    """Log-log roofline: x intensity (flop/byte), y achieved TFLOP/s, one point per row sized by
    GPU time, and the roofs of the device (the peak of each dtype shown, the bandwidth slope)."""
    from ..report.figures import roofline_figure

    pts = df.filter(pl.col("tflops").is_not_null() & pl.col("intensity").is_not_null() & (pl.col("tflops") > 0))
    if not pts.height:
        return None
    # one roof per distinct peak, named by the dtypes and units that have it (fp32 on matrix
    # units is the vector peak: one roof)
    roofs = (pts.filter(pl.col("peak_tflops").is_not_null())
             .with_columns(label=pl.col("dtype").fill_null("?") + " " + pl.col("unit").fill_null("?"))
             .group_by("peak_tflops").agg(pl.col("label").unique().sort().str.join("/"))
             .sort("peak_tflops", descending=True))
    bw = pts["peak_tbps"].drop_nulls()
    return roofline_figure(pts, [(r["label"], r["peak_tflops"]) for r in roofs.iter_rows(named=True)],
                           bw[0] if len(bw) else None, eff.device)


ANALYSIS = Analysis(
    name="roofline",
    help="Roofline and MFU: per op and input shapes, FLOPs and bytes per call (the performance model), achieved "
         "TFLOP/s and TB/s, and how close each op runs to the device's roofline.\n\n"
         "An op's GPU time is every GPU op its calls launched (memsets included); TFLOP/s is the mean over calls. "
         "The roofline is min(peak TFLOP/s of the op's dtype, intensity × peak TB/s), with dense peaks from "
         "traceq's device table (--peak-tflops/--peak-tbps override). MFU = modelled FLOPs / (GPU span × peak). "
         "Needs input shapes (torch.profiler record_shapes=True, or emit_nvtx(record_shapes=True) under nsys).",
    examples=("traceq roofline --top 10", "traceq roofline -f json -o roofline.json",
              "traceq roofline --peak-tflops 989 --peak-tbps 3.35"),
    compute=compute,
    params=(top_param(30, "Show the N rows with the most GPU time (0 = all)."),
            Param("peak_tflops", float, None, "Peak TFLOP/s to measure against (default: the device's, per dtype).",
                  "TFLOPS"),
            Param("peak_tbps", float, None, "Peak memory bandwidth in TB/s (default: the device's).", "TBPS")),
    columns=COLUMNS,
    sort=("kernel_ns descending",),
    drop_first=("input_types", "peak_tbps", "peak_tflops", "bytes", "flop", "intensity", "category", "tbps"),
    view=view,
    json=_json,
    report="Roofline: how close ops run to the hardware",
    report_section=report_section,
    order=37,
    tables=(("unmodelled", cols("name: GPU op name no modelled op owns",
                                "category: rule-table category (traceq.rules.categories)",
                                "kind: kernel | memcpy | memset",
                                "count: number of ops",
                                "total_ns: their summed duration, ns",
                                "graph_replay: replayed from a CUDA/HIP graph without a known captured op")),),
)
