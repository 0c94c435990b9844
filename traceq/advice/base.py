"""What every advice rule shares: the `Finding` it returns, the scope facts (`Evidence`)
and the floor below which nothing is advised."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..lazy import polars as pl

from ..queries import install_macros, load as load_sql
# A finding under FLOOR_PCT of its time base is noise: it is listed as "also seen", never
# advised first. The time base is the GPU op time for kernel findings and the GPU span for
# idle-time (stall) and exposed-communication findings: idle time measured against busy
# time would pass the floor on any mostly-idle trace. (A per-step floor in ms is no floor: a
# long step passes it with a cost nobody would chase, and a trace without steps counts the
# whole capture as one step.)
FLOOR_PCT = 1.0
# ... and a finding worth under FLOOR_NS in all is no finding on any trace (the 10 µs under
# which diagnose says the GPU ran nothing to judge): "up to 0.00 ms" is not advice.
FLOOR_NS = 10_000
# less GPU work than this in the whole scope is no GPU work to judge (a capture of one memset)
MIN_GPU_WORK_NS = FLOOR_NS


def floor_words(stepped: bool = True) -> str:
    """The floor in words, for "no finding above the floor (...)"."""
    return (f"{FLOOR_PCT:g} % of GPU time, or of the step windows for idle and exposed communication time, and "
            f"{FLOOR_NS // 1000} µs")


# the worst rank's gain is named beside the mean when it exceeds the mean by this factor
WORST_RANK_FACTOR = 1.1


@dataclass
class Finding:
    id: str                        # rule id, e.g. "channels_last"
    category: str                  # kernel category or stall cause the evidence is about
    evidence: str                  # the numbers that triggered the rule, in words
    gpu_ms: float                  # GPU time (or GPU idle time) the evidence covers, ms, whole scope
    est_gain_ms_per_step: float    # time the fix can win per step at most, ms
    advice: str                    # what to do
    kernels: list[str] = field(default_factory=list)   # kernel names cited (hotspots marks them)
    cited_ms: list[float] = field(default_factory=list)  # per cited name, the GPU time the finding covers, ms
    base_ns: int | None = None     # the floor's time base when it is not the GPU op time (idle findings: span)
    stepped: bool = True           # the scope has steps (Evidence.stepped): texts give ms per step
    also: bool = False             # seen, but not to be advised first whatever its size ("also seen")
    # [ms/step, rank]: the estimated gain on the rank where the finding's ledger time per step
    # is largest, when the scope has several ranks (traceq.advice.on_ledger); None otherwise
    worst: list | None = None

    def gain(self) -> str:
        """The estimated gain in words: per step, or in all when the trace has no steps; with
        the worst rank beside the mean when it is more than WORST_RANK_FACTOR of it
        ("6.67 ms/step mean, 11.80 on rank 1")."""
        if not self.stepped:
            return f"{self.gpu_ms:,.2f} ms in all"
        text = f"{self.est_gain_ms_per_step:,.2f} ms/step"
        if self.worst and self.worst[0] > WORST_RANK_FACTOR * self.est_gain_ms_per_step:
            text += f" mean, {self.worst[0]:,.2f} on rank {self.worst[1]}"
        return text

    def below_floor(self, ev: Evidence) -> bool:
        if self.also:
            return True
        base = self.base_ns or ev.gpu_ns
        if not base:      # a CPU-only data wait: its own share of step time decided it
            return False
        return self.gpu_ms * 1e6 < FLOOR_NS or 100.0 * self.gpu_ms * 1e6 / base < FLOOR_PCT

    def as_dict(self) -> dict:
        return {"id": self.id, "category": self.category, "evidence": self.evidence,
                "gpu_ms": round(self.gpu_ms, 4), "est_gain_ms_per_step": round(self.est_gain_ms_per_step, 4),
                "advice": self.advice}


class Findings(list):
    """The findings above the floor, largest estimated gain first (a list), and in `also`
    those below it: seen in the trace, too small to advise first."""

    def __init__(self, items=(), also=()):
        super().__init__(items)
        self.also = list(also)


@dataclass
class Evidence:
    """Facts about the scope (queries/advice_run.sql) and its GPU ops with their launch
    context (queries/advice_ops.sql)."""
    ops: pl.DataFrame
    steps: int            # the scope's steps (Scope.ensure_steps), else one per rank
    gpu_ns: int
    backward_host: int
    backward_gpu: int
    optimizer_host: int
    optimizer_gpu: int
    pytorch: bool = False  # PyTorch evidence (queries/framework.sql): advice may name PyTorch APIs
    stepped: bool = True   # the scope has steps; else `steps` is one per rank (the whole trace)
    optimizers: tuple[str, ...] = ()   # optimizer classes named by Optimizer.step#X.step
    compiled: int = 0      # kernels / host ops of compiled code (Triton, nvFuser, torch.compile)
    devices: str = ""      # the ranks' device lists (runs.devices JSON, '|'-separated)

    @property
    def training(self) -> bool:
        """Backward or optimizer evidence; without both the trace is inference."""
        return bool(self.backward_host or self.backward_gpu or self.optimizer_host or self.optimizer_gpu)

    def said(self, pytorch: str, cuda: str) -> str:
        """The advice in PyTorch's words when the scope shows PyTorch, else `cuda`: the same
        fix in CUDA/HIP runtime calls and framework-neutral terms (a CUDA application, JAX,
        TensorFlow or TensorRT program is not told to change a DataLoader)."""
        return pytorch if self.pytorch else cuda

    def pct(self, ns: float) -> float:
        return 100.0 * ns / self.gpu_ns if self.gpu_ns else 0.0

    def per_step_ms(self, ns: float) -> float:
        return ns / 1e6 / max(self.steps, 1)

    def per_step(self, ns: float) -> str:
        """", 1.23 ms/step" for evidence texts; nothing in a scope without steps (its one
        "step" is the whole trace: the ms in all already say it)."""
        return f", {self.per_step_ms(ns):.2f} ms/step" if self.stepped else ""

    def training_words(self) -> str:
        parts = []
        if self.backward_host or self.backward_gpu:
            parts.append(f"backward: {self.backward_host:,} host ops/regions, {self.backward_gpu:,} kernels")
        if self.optimizer_host or self.optimizer_gpu:
            parts.append(f"optimizer: {self.optimizer_host:,} host ops/regions, {self.optimizer_gpu:,} kernels")
        return "; ".join(parts) or "no backward or optimizer (inference)"


def evidence_parts(scope) -> tuple[dict, pl.DataFrame]:
    """The scope's facts (queries/advice_run.sql: counts and sums) and ops (advice_ops.sql:
    counts and sums per kernel/copy group): both add up over ranks (merge_evidence)."""
    scope.ensure_steps()
    install_macros(scope.con)
    return (scope.df(load_sql("advice_run")).row(0, named=True),
            scope.df(load_sql("advice_ops"), {"by_rank": False}).drop("rank"))


def evidence_for(scope) -> Evidence:
    return _evidence(*evidence_parts(scope))


def evidence_by_rank(scope) -> dict[int, Evidence]:
    """The Evidence of each rank of the scope alone, in one pass over all of them
    (queries/advice_run_ranks.sql, advice_ops.sql per rank): what `evidence_for` gives on
    the scope narrowed to that rank."""
    scope.ensure_steps()
    install_macros(scope.con)
    facts = scope.df(load_sql("advice_run_ranks"))
    ops = scope.df(load_sql("advice_ops"), {"by_rank": True})
    parts = {r: o.drop("rank") for (r,), o in ops.partition_by("rank", as_dict=True).items()}
    empty = ops.clear().drop("rank")
    return {f["rank"]: _evidence(f, parts.get(f["rank"], empty)) for f in facts.iter_rows(named=True)}


def merge_evidence(parts: list[tuple[dict, pl.DataFrame]]) -> Evidence:
    """The Evidence of several ranks from each rank's evidence_parts (traceq.engine.per_rank):
    facts summed, ops re-grouped with their counts, durations and bytes summed."""
    text = ("optimizers", "devices")
    facts = {k: sum(int(f[k] or 0) for f, _ in parts) for k in parts[0][0] if k not in text}
    facts["optimizers"] = ",".join(sorted({o for f, _ in parts for o in (f.get("optimizers") or "").split(",") if o}))
    facts["devices"] = "|".join(sorted({f.get("devices") or "" for f, _ in parts} - {""}))
    ops = pl.concat([o for _, o in parts], how="vertical_relaxed")
    sums = ("n", "dur_ns", "bytes")
    keys = [c for c in ops.columns if c not in sums]
    ops = ops.group_by(keys, maintain_order=True).agg(pl.col(c).sum() for c in sums).select(ops.columns)
    return _evidence(facts, ops)


def _evidence(facts: dict, ops: pl.DataFrame) -> Evidence:
    steps = int(facts["steps"]) or int(facts["ranks"])
    return Evidence(ops, steps, int(facts["gpu_ns"]), int(facts["backward_host"]), int(facts["backward_gpu"]),
                    int(facts["optimizer_host"]), int(facts["optimizer_gpu"]), bool(facts.get("pytorch")),
                    stepped=bool(int(facts["steps"])),
                    optimizers=tuple(o for o in (facts.get("optimizers") or "").split(",") if o),
                    compiled=int(facts.get("compiled") or 0), devices=facts.get("devices") or "")


def ms(ns: float) -> str:
    return f"{ns / 1e6:,.2f} ms"


def short_name(name: str, width: int = 100) -> str:
    """A kernel name as evidence shows it: without the return type and the parameter list
    (the template arguments, which tell kernels apart, stay), shortened in the middle."""
    from ..text import shorten

    text = name[5:] if name.startswith("void ") else name
    if text.endswith(")"):
        depth = 0
        for i in range(len(text) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(text[i], 0)
            if depth == 0:
                if "->" not in text[i:]:       # Kineto copies: "Memcpy HtoD (Pageable -> Device)" stays
                    text = text[:i].rstrip() or text
                break
    return shorten(text, width)


def kernel_finding(id_: str, category: str, ops: pl.DataFrame, ev: "Evidence", what: str, advice: str,
                   beside: str = "") -> Finding:
    """A finding about the GPU ops `ops` (advice_ops rows: name, n, dur_ns): `what` they are
    (count and kind, in words), their time, share of GPU time and time per step, the top
    names (then `beside`, more evidence); the gain is all of their time."""
    ns = ops["dur_ns"].sum()
    names, shown = top_names(ops)
    per_name = dict(zip(*ops.group_by("name").agg(pl.col("dur_ns").sum()).get_columns()))
    return Finding(id_, category,
                   f"{what}, {ms(ns)} ({ev.pct(ns):.1f} % of GPU time{ev.per_step(ns)}): {shown}{beside}",
                   ns / 1e6, ev.per_step_ms(ns), advice, names, [per_name[n] / 1e6 for n in names])


def top_names(df: pl.DataFrame, n: int = 3) -> tuple[list[str], str]:
    """The n kernel names with the most time in `df` (advice_ops rows: name, n, dur_ns) and their text,
    e.g. "nchwToNhwcKernel ×120 (4.10 ms)"."""
    agg = (df.group_by("name").agg(pl.col("n").sum(), pl.col("dur_ns").sum().alias("ns"))
           .sort(["ns", "name"], descending=[True, False]))
    names = agg["name"].to_list()
    # the name without return type and parameters: template arguments stay, so the
    # FillFunctor and AddFunctor instances of vectorized_elementwise_kernel read apart
    shown = [f"{short_name(r['name'])} ×{r['n']:,} ({ms(r['ns'])})" for r in agg.head(n).iter_rows(named=True)]
    more = f" and {agg.height - n} more" if agg.height > n else ""
    return names, ", ".join(shown) + more
