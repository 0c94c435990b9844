-- intervals: the shared interval algebra every analysis builds on (sort-and-sweep, no
-- quadratic joins). Each macro takes the *name* of a table or view with columns
--   key      any type: intervals are combined only within the same key (e.g. rank,
--            or a struct {rank, step}); use a constant when there is one group
--   start_ns, end_ns   BIGINT, half-open [start_ns, end_ns)
--
-- iv_union(t)        -> (key, start_ns, end_ns): the union, as disjoint, sorted intervals.
--                       Touching intervals (start == previous max end) merge, as HTA does.
-- iv_intersect(a, b) -> (key, start_ns, end_ns): time covered by both a and b, where a and
--                       b are each unions (disjoint within a key), e.g. outputs of iv_union.
-- iv_gaps(t)         -> (key, start_ns, end_ns): the holes between consecutive intervals
--                       of a union (leading/trailing time is not a gap).
-- Lengths: sum(end_ns - start_ns) over the result.

CREATE OR REPLACE TEMP MACRO iv_union(t) AS TABLE
WITH s AS (
    SELECT key, start_ns, end_ns,
           max(end_ns) OVER (PARTITION BY key ORDER BY start_ns, end_ns
                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM query_table(t)
    WHERE end_ns >= start_ns
), islands AS (
    SELECT key, start_ns, end_ns,
           sum(CASE WHEN prev_end IS NULL OR start_ns > prev_end THEN 1 ELSE 0 END)
               OVER (PARTITION BY key ORDER BY start_ns, end_ns ROWS UNBOUNDED PRECEDING) AS island
    FROM s
)
SELECT key, min(start_ns) AS start_ns, max(end_ns) AS end_ns
FROM islands
GROUP BY key, island;

CREATE OR REPLACE TEMP MACRO iv_intersect(a, b) AS TABLE
WITH edges AS (
    SELECT key, start_ns AS t, 1 AS da, 0 AS db FROM query_table(a)
    UNION ALL SELECT key, end_ns, -1, 0 FROM query_table(a)
    UNION ALL SELECT key, start_ns, 0, 1 FROM query_table(b)
    UNION ALL SELECT key, end_ns, 0, -1 FROM query_table(b)
), at_t AS (
    SELECT key, t, sum(da) AS da, sum(db) AS db FROM edges GROUP BY key, t
), level AS (
    SELECT key, t,
           sum(da) OVER w AS in_a,
           sum(db) OVER w AS in_b,
           lead(t) OVER (PARTITION BY key ORDER BY t) AS t_next
    FROM at_t
    WINDOW w AS (PARTITION BY key ORDER BY t ROWS UNBOUNDED PRECEDING)
)
SELECT key, t AS start_ns, t_next AS end_ns
FROM level
WHERE in_a > 0 AND in_b > 0 AND t_next > t;

CREATE OR REPLACE TEMP MACRO iv_gaps(t) AS TABLE
SELECT key, end_ns AS start_ns, next_start AS end_ns
FROM (
    SELECT key, end_ns, lead(start_ns) OVER (PARTITION BY key ORDER BY start_ns) AS next_start
    FROM query_table(t)
)
WHERE next_start > end_ns;
