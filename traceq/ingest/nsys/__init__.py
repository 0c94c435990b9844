"""Nsight Systems exports (`nsys export --type sqlite`) -> canonical tables.

    reader           the entry point `reader.read(path)`: the export's tables, chunk by chunk
    activity         CUDA activity chunks -> gpu_ops / host_ops rows, and the sync waits
    sqlite_arrow     SQLite query results as Arrow record batches, in rowid chunks
    start_histogram  the trace's span from a histogram of start times (one read of the activity)
"""
