"""The time ledger: one partition of every step of every GPU, the one place traceq accounts
for time. Every figure a user reads about busy, idle, exposed communication or what an idle
stretch cost (summary, overview, stalls, overlap, diagnose and its findings, ranks, the
report, `traceq steps`) is a sum of this table's columns.

For each (rank, device, step) of the scope the step's window (queries/ledger_windows.sql:
the step, stretched to the end of the last GPU op it launched; the whole capture when the
rank has no steps) is cut into labelled time, in integer ns, each instant labelled once
(queries/ledger.sql states the labels and their precedence; engine/ledger_sweep.py labels):

  GPU busy  compute, communication (exposed: no compute runs), copy
  GPU idle  data, communication_wait, sync, blocking_copy, memory_management, warmup,
            launch, host_compute, unattributed

so a step's labels add up to its window exactly. `ledger(scope)` computes it once per scope
and data pattern and keeps it on the scope; a run analysed as a map over its ranks computes
each batch of ranks on the executor and concatenates (every column is a per-row sum).
docs/ledger.md has the definitions with a worked example.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..lazy import polars as pl

from .ledger_sweep import LABELS

GPU_LABELS = LABELS[:3]
IDLE_LABELS = LABELS[3:]
LABEL_COLUMNS = tuple(f"{x}_ns" for x in LABELS)
PERIOD_SLICES = 10          # a rank with fewer than two steps: recurrence over tenths of its capture
# start-up calls a trace shows only by their length: a launch call of 1 ms and 100 times the
# rank's median launch loads its kernel's module (the same thresholds as advice/run_facts.py)
SLOW_LAUNCH_NS = 1_000_000
SLOW_LAUNCH_FACTOR = 100
SLOW_ALLOC_NS = 50_000_000   # an allocator call this long initialises a context or library
STEP_COLUMNS = ("rank", "device", "step", "step_source", "start_ns", "end_ns", "window_ns", *LABEL_COLUMNS,
                "busy_ns", "idle_ns", "comm_ns", "overlapped_comm_ns", "late_unattributed_ns")
SUM_COLUMNS = ("window_ns", *LABEL_COLUMNS, "busy_ns", "idle_ns", "comm_ns", "overlapped_comm_ns",
               "late_unattributed_ns")


@dataclass
class Ledger:
    """`steps`: one row per (rank, device, step) with STEP_COLUMNS: the window
    (start_ns, end_ns, window_ns), its time per label (<label>_ns), busy_ns (compute +
    communication + copy), idle_ns (the rest), comm_ns (time a communication op runs,
    hidden or not), overlapped_comm_ns (comm_ns − communication_ns: hidden by compute) and
    late_unattributed_ns (the unattributed time of idle the host had not issued the next op
    for: host time the trace does not show; the rest of unattributed is queued idle, or idle
    after the rank's last GPU op, which no op waits to end)."""
    steps: pl.DataFrame

    def per_rank(self) -> pl.DataFrame:
        """The columns summed per rank (over its devices and steps), with `steps` (the number
        of steps) and `devices`."""
        s = self.steps
        sums = [pl.col(c).sum() for c in SUM_COLUMNS]
        return (s.group_by("rank").agg(pl.col("step").n_unique().alias("steps"),
                                       pl.col("device").n_unique().alias("devices"), *sums)
                .sort("rank"))

    def total(self, column: str, rank: int | None = None) -> int:
        s = self.steps if rank is None else self.steps.filter(pl.col("rank") == rank)
        return int(s[column].sum()) if s.height else 0

    def window_ns(self, rank: int | None = None) -> int:
        return self.total("window_ns", rank)

    def pct(self, column: str, rank: int | None = None) -> float | None:
        """`column`'s time as a share of the windows, % (None without windows)."""
        w = self.window_ns(rank)
        return 100.0 * self.total(column, rank) / w if w else None

    def per_step_worst(self, column: str) -> dict | None:
        """`column` per step: the mean over ranks of a rank's mean per step, and the worst
        rank's (`{"mean_ns", "worst_ns", "worst_rank", "ranks"}`; None without steps)."""
        r = self.per_rank()
        if not r.height:
            return None
        r = r.with_columns((pl.col(column) / pl.col("steps").clip(1)).alias("_per"))
        worst = r.sort(["_per", "rank"], descending=[True, False]).row(0, named=True)
        return {"mean_ns": float(r["_per"].mean()), "worst_ns": float(worst["_per"]),
                "worst_rank": int(worst["rank"]), "ranks": r.height}

    def totals(self, rank: int | None = None) -> dict:
        """Every SUM_COLUMNS column summed over the rows (of `rank`), with `steps`: the
        number of (rank, step) windows."""
        s = self.steps if rank is None else self.steps.filter(pl.col("rank") == rank)
        out = {c: (int(s[c].sum()) if s.height else 0) for c in SUM_COLUMNS}
        out["steps"] = s.select(pl.struct("rank", "step").n_unique()).item() if s.height else 0
        return out

    @property
    def empty(self) -> bool:
        return self.steps.height == 0


def empty_steps() -> pl.DataFrame:
    schema = {"rank": pl.Int32, "device": pl.Int32, "step": pl.Int64, "step_source": pl.String,
              "start_ns": pl.Int64, "end_ns": pl.Int64, "window_ns": pl.Int64,
              **{c: pl.Int64 for c in STEP_COLUMNS[7:]}}
    return pl.DataFrame(schema=schema)


def ledger(scope, data_pattern: str | None = None) -> Ledger:
    """The scope's ledger, computed once per scope and data pattern (kept on the scope, and
    beside the store: traceq.engine.ledger_cache)."""
    cache = scope.__dict__.setdefault("_ledgers", {})
    key = data_pattern or None
    if key not in cache:
        from . import ledger_cache
        from .per_rank import concat, map_ranks, mapped

        if key:
            from .scope import check_regex

            check_regex(scope.con, "--data-pattern", key)   # a bad pattern fails, kept or not
        where, kept = ledger_cache.load(scope, key)   # kept beside the store by an earlier command
        if kept is not None:
            cache[key] = Ledger(kept if kept.height else empty_steps())
        elif mapped(scope):
            parts = map_ranks(scope, ledger_part, data_pattern=key)
            steps = concat(parts) if parts else empty_steps()
            cache[key] = Ledger(steps if steps.height else empty_steps())
        else:
            cache[key] = Ledger(ledger_part(scope, key))
        if kept is None:
            ledger_cache.save(where, cache[key].steps)
    return cache[key]


def ledger_part(scope, data_pattern: str | None = None) -> pl.DataFrame:
    """The ledger's rows of the scope's ranks (a task of the per-rank map, or the whole scope)."""
    import numpy as np

    from ..queries import install_macros, load as load_sql, run_script
    from ..store import fetch_pl, register_pl
    from .ledger_sweep import sweep
    from .scope import check_regex, step_list

    con = scope.con
    if data_pattern:
        check_regex(con, "--data-pattern", data_pattern)
    install_macros(con)
    scope.ensure_steps()
    scope.ensure_links()
    scope.df("CREATE OR REPLACE TEMP TABLE lg_windows AS " + load_sql("ledger_windows"))
    windows = fetch_pl(con, "SELECT * FROM lg_windows ORDER BY rank, lo_ns, hi_ns, step")
    if not windows.height:
        return empty_steps()
    register_pl(con, "lg_periods_df", _periods(step_list(con, scope.run, scope.step_pattern), windows))
    con.execute("CREATE OR REPLACE TEMP TABLE lg_periods AS SELECT * FROM lg_periods_df ORDER BY rank, lo_ns")
    con.unregister("lg_periods_df")
    act = run_script(con, "ledger", {"run": scope.run, "data_pattern": data_pattern or None,
                                     "slow_launch_ns": SLOW_LAUNCH_NS, "slow_launch_factor": SLOW_LAUNCH_FACTOR,
                                     "slow_alloc_ns": SLOW_ALLOC_NS})
    devs = fetch_pl(con, "SELECT rank, device FROM lg_devs ORDER BY rank, device")
    if not devs.height:
        return empty_steps()
    ops = fetch_pl(con, "SELECT rank, device, start_ns, end_ns, cls AS kind FROM lg_ops")
    queued = fetch_pl(con, "SELECT rank, device, queued_ns AS start_ns, end_ns, 12 AS kind FROM lg_idle "
                           "WHERE queued_ns IS NOT NULL UNION ALL "
                           "SELECT rank, device, start_ns, end_ns, 13 FROM lg_idle WHERE tail")
    devs = devs.with_columns(pl.int_range(pl.len()).cast(pl.Int64).alias("gpu"))
    wins = (devs.join(windows, on="rank").sort("gpu", "lo_ns", "hi_ns", "step")
            .with_columns(pl.int_range(pl.len()).alias("win")))
    parts = [wins.select("gpu", pl.col("lo_ns").alias("start_ns"), pl.col("hi_ns").alias("end_ns"),
                         pl.lit(0, pl.Int64).alias("kind"))]
    for f in (ops, act.select("rank", "device", "start_ns", "end_ns", pl.col("label").alias("kind")), queued):
        if f.height:
            parts.append(f.with_columns(pl.col("rank").cast(pl.Int32), pl.col("device").cast(pl.Int32))
                          .join(devs, on=["rank", "device"])
                          .select("gpu", "start_ns", "end_ns", pl.col("kind").cast(pl.Int64)))
    edges = pl.concat([p.with_columns(pl.col("start_ns").cast(pl.Int64), pl.col("end_ns").cast(pl.Int64))
                       for p in parts], how="vertical_relaxed")
    per, comm, late = sweep(edges["gpu"].to_numpy(), edges["start_ns"].to_numpy(), edges["end_ns"].to_numpy(),
                      edges["kind"].to_numpy(), wins.height)
    labels = {c: per[:, i + 1] for i, c in enumerate(LABEL_COLUMNS)}
    busy = per[:, 1:4].sum(axis=1)
    out = wins.select(pl.col("rank").cast(pl.Int32), pl.col("device").cast(pl.Int32), "step", "step_source",
                      pl.col("lo_ns").alias("start_ns"), pl.col("hi_ns").alias("end_ns"),
                      (pl.col("hi_ns") - pl.col("lo_ns")).alias("window_ns"))
    out = out.with_columns(**{c: pl.Series(c, v, pl.Int64) for c, v in labels.items()},
                           busy_ns=pl.Series(busy.astype(np.int64)),
                           comm_ns=pl.Series(comm.astype(np.int64)),
                           late_unattributed_ns=pl.Series(late.astype(np.int64)))
    return (out.with_columns((pl.col("window_ns") - pl.col("busy_ns")).alias("idle_ns"),
                             (pl.col("comm_ns") - pl.col("communication_ns")).alias("overlapped_comm_ns"))
               .select(STEP_COLUMNS).sort("rank", "device", "start_ns", "step"))


def _periods(all_steps: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """Per rank, the starts of the periods a start-up call's recurrence is judged over (each
    numbered p): the rank's steps when it has at least two (all of them, not only the scope's),
    else PERIOD_SLICES equal slices of its windows' span."""
    rows: list[dict] = []
    for rank in windows["rank"].unique().sort().to_list():
        mine = all_steps.filter(pl.col("rank") == rank).sort("start_ns")
        if mine.height >= 2:
            rows += [{"rank": rank, "p": i, "lo_ns": int(s)} for i, s in enumerate(mine["start_ns"].to_list())]
            continue
        w = windows.filter(pl.col("rank") == rank)
        lo, hi = int(w["lo_ns"].min()), int(w["hi_ns"].max())
        step = max(1, -(-(hi - lo) // PERIOD_SLICES))
        rows += [{"rank": rank, "p": i, "lo_ns": lo + i * step} for i in range(PERIOD_SLICES)]
    df = pl.DataFrame(rows, schema={"rank": pl.Int32, "p": pl.Int64, "lo_ns": pl.Int64})
    # calls before the first period start belong to the first period
    return df.with_columns(pl.when(pl.col("p") == 0).then(pl.lit(-(2 ** 62), pl.Int64)).otherwise(pl.col("lo_ns"))
                           .alias("lo_ns"))


def with_ledger(scope, facts, rank: int | None = None, data_pattern: str | None = None):
    """`facts` (traceq.advice.run_facts.RunFacts) with the ledger's totals of the scope (of
    `rank` alone when given): `facts.ledger` (Ledger.totals) and the GPU time the verdict and
    the rules read — span (the step windows), busy, communication (all and exposed) and
    exposed copies — taken from it, so that they are the ledger's numbers. Returns `facts`."""
    if facts is None:
        return facts
    lg = ledger(scope, data_pattern)
    t = lg.totals(rank)
    facts.ledger = t
    ranks = [rank] if rank is not None else (lg.steps["rank"].unique().sort().to_list() if lg.steps.height else [])
    facts.ledger_ranks = {int(r): (t if rank is not None else lg.totals(r)) for r in ranks} or None
    if t["window_ns"]:
        facts.span_ns = t["window_ns"]
        facts.busy_ns = t["busy_ns"]
        facts.comm_ns = t["comm_ns"]
        facts.exposed_comm_ns = t["communication_ns"]
        facts.exposed_copy_ns = t["copy_ns"]
    return facts
