"""One clock for the ranks of a run.

Each rank's times are on its own clock; `runs.clock_offset_ns` (Kineto
`baseTimeNanoseconds`, nsys `utcEpochNs`) maps them to epoch ns. Hosts' clocks disagree by
micro- to milliseconds, more than the arrival skew to be measured, so ingest refines the
offset by aligning the ends of the collectives matched across the run's ranks (a collective
completes on all its ranks together) and stores the refinement in `runs.clock_refine_ns`, in
the same atomic manifest write that commits the ranks (`align_rows`, the hook of
`Store.commit`). A rank's time on the run's common clock is

    t + clock_offset_ns + coalesce(clock_refine_ns, 0)

`clock_refine_ns` is NULL when nothing was aligned (a single rank, no collective shared with
another rank). `traceq ranks` reads it, and computes it (`refine`) for a run whose manifest holds none.

SQL: queries/ranks_rank.sql (the collective instances of each rank, with their matching
key), queries/clock_refine.sql (the refinement).
"""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa


# Kernels of one collective end within this of each other on the common clock; pairs
# matched by order whose ends lie further apart are different operations (clock_refine.sql,
# collectives.sql).
END_TOLERANCE_NS = 500_000


def refine(con) -> dict[int, int | None]:
    """{rank: refine_ns or None} from the tables coll_kernels and rank_clock on `con`."""
    from .queries import run_script

    return dict(run_script(con, "clock_refine", {"end_tolerance_ns": END_TOLERANCE_NS}).iter_rows())


def rank_clock(rows: list[dict]) -> pa.Table:
    """The rank_clock table of clock_refine.sql from manifest rows (a missing offset is 0)."""
    return pa.table({"rank": pa.array([r["rank"] for r in rows], pa.int32()),
                     "raw_offset_ns": pa.array([r.get("clock_offset_ns") or 0 for r in rows], pa.int64())})


def refine_run(store_path: Path, rows: list[dict]) -> dict[int, int | None]:
    """The refinement of every rank of one run from its manifest rows (files in place)."""
    from .queries import install_macros, run_script
    from .store import table_view
    from .store.duck import connect
    from .store.layout import listed_files

    con = connect()
    try:
        install_macros(con)
        # ranks_rank reads the kernels and, for their launching ops, the host ops and annotations
        for table in ("gpu_ops", "host_ops", "regions"):
            files = [str(f) for r in rows if (f := listed_files(Path(store_path), r["files"]).get(table))]
            table_view(con, table, files)
        kernels = run_script(con, "ranks_rank", {"run": rows[0]["run"], "rank": None})
        con.register("coll_kernels", kernels.to_arrow())
        con.register("rank_clock", rank_clock(rows))
        return refine(con)
    finally:
        con.close()


def align_rows(store_path: Path, rows: dict[tuple[str, int], dict], runs: set[str]) -> None:
    """Store.commit's hook: set clock_refine_ns on the manifest rows of `runs` (in place)."""
    for run in sorted(runs):
        mine = [r for (name, _rank), r in rows.items() if name == run]
        found = refine_run(store_path, mine) if len(mine) > 1 else {}
        for r in mine:
            r["clock_refine_ns"] = found.get(r["rank"])
