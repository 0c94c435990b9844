"""Classification tables as data: what a kernel name, a host op or a library is.

    categories   kernel category rules (ingest classifies every GPU op with them)
    host_api     host-API classes (synchronisation, blocking copies, allocator calls,
                 communication ops) as SQL macros shared by the stall attribution and the
                 advice rules
"""
