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
-- iv_contains(o, i)  -> (key, oid, iid): every (outer, inner) pair where the inner interval
--                       lies fully inside the outer one (documented below).
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

-- iv_contains(outer_t, inner_t): which intervals lie fully inside which, without a quadratic join.
--
-- iv_contains(outer_t, inner_t) -> (key, oid, iid): one row per pair with
--     outer.key = inner.key AND outer.start_ns <= inner.start_ns AND inner.end_ns <= outer.end_ns
-- (closed bounds, as nsys' nvtx_gpu_proj rule: a launch call that starts exactly when the
-- range starts, or ends exactly when it ends, is inside). Every enclosing outer interval
-- gets the inner one (nested ranges all count it).
--
-- Inputs: table or view names with columns
--   outer_t: key (any type, e.g. a struct {rank, pid, tid}), oid (id of the outer interval),
--            start_ns, end_ns (BIGINT)
--   inner_t: key, iid, start_ns, end_ns
--
-- Method (a grid index by duration class, so every join is an equi-join on selective keys):
-- an outer interval of duration d gets class c = floor(log2(max(d, 1))) and is entered in
-- the buckets start>>c .. end>>c of width 2^c ns, at most 3 of them because d < 2^(c+1).
-- An inner interval is looked up, for each class present under its key, in the single
-- bucket holding its start (a contained interval starts inside the outer one, so that
-- bucket is one of the outer's). Within one bucket of class c only intervals of length
-- >= 2^c meet, so candidates per lookup are bounded by ~3 per nesting level. Rows:
-- 3 x outer + (classes per key) x inner; candidates are O(inner x classes x depth), linear
-- in the data for a fixed nesting structure (benchmarks/ checks it on 1x to 16x the data).

CREATE OR REPLACE TEMP MACRO iv_contains(outer_t, inner_t) AS TABLE
WITH o AS (
    SELECT key, oid, start_ns, end_ns,
           CAST(floor(log2(greatest(end_ns - start_ns, 1))) AS INTEGER) AS cls
    FROM query_table(outer_t)
    WHERE end_ns >= start_ns
), o_buckets AS (
    SELECT key, oid, start_ns, end_ns, cls,
           unnest(range(start_ns >> cls, (end_ns >> cls) + 1)) AS bucket
    FROM o
), classes AS (
    SELECT DISTINCT key, cls FROM o
), i_buckets AS (
    SELECT i.key, i.iid, i.start_ns, i.end_ns, c.cls, i.start_ns >> c.cls AS bucket
    FROM query_table(inner_t) i
    JOIN classes c ON c.key = i.key
    WHERE i.end_ns >= i.start_ns
)
SELECT ob.key, ob.oid, ib.iid
FROM o_buckets ob
JOIN i_buckets ib
  ON ib.key = ob.key AND ib.cls = ob.cls AND ib.bucket = ob.bucket
WHERE ob.start_ns <= ib.start_ns AND ib.end_ns <= ob.end_ns;
