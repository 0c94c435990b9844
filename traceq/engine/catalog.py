"""`runs` (what is in the store) and `sql` (the escape hatch: DuckDB SQL over the store's views)."""
from __future__ import annotations

from ..lazy import polars as pl

from ..store import Store, fetch_pl

RUNS_SQL = """
-- One row per run: ranks, source formats, devices, row counts, labels.
SELECT run,
       count(*)                                   AS ranks,
       string_agg(DISTINCT rank::VARCHAR, ',' ORDER BY rank::VARCHAR) AS rank_ids,
       string_agg(DISTINCT source_format, ',')    AS formats,
       (SELECT string_agg(DISTINCT d.name, ', ') FROM (
            SELECT json_extract_string(unnest(json_extract(r2.devices, '$[*]')), '$.name') AS name
            FROM runs r2 WHERE r2.run = r.run) d WHERE d.name IS NOT NULL) AS devices,
       sum(n_gpu_ops)                             AS gpu_ops,
       sum(n_host_ops)                            AS host_ops,
       sum(n_regions)                             AS regions,
       sum(n_timer_stats)                         AS timer_stats,
       -- metrics a result file states (mila / milabench): rows of the metrics table
       (SELECT count(*) FROM metrics m WHERE m.run = r.run) AS metrics,
       any_value(labels)                          AS labels,
       max(ingested_at)                           AS ingested_at
FROM runs r
GROUP BY run
ORDER BY max(ingested_at), run
"""


def runs(store=None) -> pl.DataFrame:
    st = store if isinstance(store, Store) else Store(store)
    return fetch_pl(st.connect(), RUNS_SQL)


def sql(query: str, store=None, *, allow_writes: bool = False, strict: bool = False) -> pl.DataFrame:
    """Run DuckDB SQL over the store's views. Queries only, unless `allow_writes` (then any
    statement, with file access only to the paths it names outside the store); `strict`:
    the store's tables only, whatever the statement names; see `traceq.sql_guard`. The whole
    result is in memory: `traceq sql` streams it instead (traceq.sql_stream)."""
    import duckdb

    from ..sql_guard import connect
    from ..sql_stream import sql_error

    st = store if isinstance(store, Store) else Store(store)
    con = connect(st, query, allow_writes=allow_writes, strict=strict)
    try:
        return fetch_pl(con, query)
    except duckdb.Error as exc:
        raise sql_error(exc, strict) from None
