-- stalls_data: when the host is loading data (input of `stalls`).
--
-- Definition: per rank, the union over all its processes and threads of
--   * DataLoader spans: regions of source `dataloader` (Kineto
--     `enumerate(DataLoader)#...__next__` / `enumerate(DataPipe)#...`: the time the training
--     loop waits for the next batch, including waiting for worker processes);
--   * timer IO regions: regions of source `timer` whose key is IO (case-insensitive);
--   * regions of any source whose name matches $data_pattern (a regular expression,
--     RE2 syntax, partial match; e.g. 'load|decode|h2d'), when given.
--
-- Parameters: $run (text), $data_pattern (text or NULL). Requires scope_window and the
-- macros of intervals.sql.
--
-- Output columns (one row per interval of the union):
--   key        rank (integer)
--   start_ns   start of a maximal data-loading interval, ns
--   end_ns     its end, ns
WITH d AS (
    SELECT r.rank AS key, r.start_ns, r.end_ns
    FROM regions r
    JOIN scope_window w ON w.rank = r.rank
    WHERE r.run = $run
      AND coalesce(r.domain, '') <> 'gpu'
      AND (r.source = 'dataloader'
           OR (r.source = 'timer' AND upper(r.name) = 'IO')
           OR ($data_pattern IS NOT NULL AND regexp_matches(r.name, $data_pattern)))
)
SELECT key, start_ns, end_ns FROM iv_union(d)
