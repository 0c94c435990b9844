"""`traceq mcp`: a Model Context Protocol server over one store (issue 50; docs/mcp.md).

    tools.py    the tools, generated from the analyses' registry, and calling them (no SDK)
    facts.py    what a result cannot show (`limits`), the store's schema, definitions, `explain`
    server.py   the wiring to the official `mcp` SDK (the optional extra `traceq[mcp]`), stdio

Safe by construction: `sql` is strict (traceq.sql_guard: the store's files only) and capped
(rows, bytes, seconds: traceq.sql_stream.capped); no tool writes; no parameter names a file
(an analysis parameter whose metavar is FILE, DIR or PATH is not offered); no tool, resource
or prompt description holds a string from a trace.
"""
