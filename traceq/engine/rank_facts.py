"""What `traceq diagnose` weighs for each rank of a scope, computed for all of them in one
pass: every query runs once over the scope's ranks with the rank in its grouping, and its
rows are split by rank (polars `partition_by`). Each rank's facts are those of the scope
narrowed to that rank alone (`open_scope(..., rank=r)`): its stall attribution (a `Stalls`
with its RunFacts, critical path and the host calls the stall rules cite), its advice
Evidence and the ingest's truncation warning. Diagnose then judges
each rank from its own slices (traceq/analyses/diagnose.py); the rules take the facts they
are given.

Per rank and not pooled: stalls_ranks.sql (the causes), framework_ranks.sql (PyTorch
evidence), advice_run_ranks.sql, advice_ops.sql/advice_memory.sql/advice_ranges.sql with
$by_rank, and the small queries of run_facts and the stall rules grouped by rank. The
stall attribution itself (stalls_gaps.sql: gaps, steps, launch statistics) already keys
every row by rank: it runs once on the whole scope.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..lazy import polars as pl

from ..queries import install_macros, load as load_sql
from .scope import Scope
from .stall_attribution import stalls_scoped


@dataclass
class RankFacts:
    stalls: object           # the rank's Stalls (traceq.engine.stall_attribution), .facts and .host_calls set
    evidence: object         # its advice Evidence (traceq.advice.base)
    truncated: str | None    # the ingest's truncation warning (traceq.engine.truncation)


def split(df: pl.DataFrame, ranks: list[int], keep_rank: bool = False) -> dict:
    """{rank: its rows of `df` (a frame with a rank column), in the frame's order, without the
    rank column unless `keep_rank`}; a rank without rows gets an empty frame of the same schema."""
    parts = {int(r): d for (r,), d in df.partition_by("rank", as_dict=True).items()} if df.height else {}
    empty = df.clear()
    out = {r: parts.get(r, empty) for r in ranks}
    return out if keep_rank else {r: d.drop("rank") for r, d in out.items()}


def scope_ranks(scope: Scope) -> list[int]:
    return [r[0] for r in scope.con.execute("SELECT rank FROM scope_window ORDER BY rank").fetchall()]


def rank_stalls(scope: Scope, min_gap_us: float) -> tuple[object, dict]:
    """(the scope's Stalls, {rank: the rank's Stalls}): `stalls_scoped` once on the scope, the
    causes, the single-process loader and the PyTorch evidence per rank."""
    ranks = scope_ranks(scope)
    st = stalls_scoped(scope, min_gap_us)
    causes = split(scope.df(load_sql("stalls_ranks")), ranks)
    single = scope.df(
        "SELECT r.rank, count(*) AS n FROM regions r JOIN scope_window w ON w.rank = r.rank "
        "WHERE r.run = $run AND r.source = 'dataloader' AND coalesce(r.domain, '') <> 'gpu' "
        "AND r.name LIKE '%SingleProcessDataLoaderIter%' GROUP BY r.rank")
    single = {int(r) for r, n in single.iter_rows() if n}
    install_macros(scope.con)
    torch = {int(r): bool(p) for r, p in scope.df(load_sql("framework_ranks")).iter_rows()}
    steps, gaps = split(st.steps, ranks, True), split(st.gaps, ranks, True)
    launch = split(st.launch, ranks, True)
    per = {r: replace(st, causes=causes[r], steps=steps[r], gaps=gaps[r], launch=launch[r],
                      single_process_loader=r in single, pytorch=torch.get(r, False), host_calls=None, facts=None)
           for r in ranks}
    return st, per


def rank_facts(scope: Scope, min_gap_us: float) -> dict[int, RankFacts]:
    """{rank: RankFacts} of every rank of the scope (module docstring)."""
    from ..advice.base import evidence_by_rank
    from ..advice.rules import HOST_CALLS
    from ..advice.rules.stall_facts import host_calls_by_rank
    from ..advice.run_facts import run_facts_by_rank
    from .ledger import with_ledger
    from .path_facts import path_facts_by_rank
    from .truncation import truncation_by_rank

    st, per = rank_stalls(scope, min_gap_us)
    facts = run_facts_by_rank(scope, st, per)
    paths = path_facts_by_rank(scope)
    calls = {where: host_calls_by_rank(scope, where) for where in HOST_CALLS}
    evidence = evidence_by_rank(scope)
    cut = truncation_by_rank(scope)
    out = {}
    for r, s in per.items():
        s.facts = with_ledger(scope, facts[r], rank=r)
        s.facts.path = paths.get(r)
        s.host_calls = {where: calls[where][r] for where in HOST_CALLS}
        out[r] = RankFacts(s, evidence[r], cut.get(r))
    return out

