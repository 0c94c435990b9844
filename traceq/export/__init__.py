"""`traceq export`: a run of the store as a Chrome-trace JSON for ui.perfetto.dev and
chrome://tracing (docs/export.md).

    chrome      the event writer: processes, threads, slices, launch flows, the common clock
    lanes       overlapping slices of one track moved to extra lanes (proper nesting)
    path_marks  the critical path: a track of its segments and flows between its ops
    run         `export_run`, the whole document: ranks, findings, path, metadata
"""
