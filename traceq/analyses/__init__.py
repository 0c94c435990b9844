"""The analyses: one module per analysis, each holding its declaration (`ANALYSIS`), how it is
computed (SQL in traceq/sql), mapped over ranks and reduced, shown in the terminal, JSON and
CSV, and its section of the HTML report. `registry` collects them; `spec` is what a
declaration is made of. See docs/architecture.md."""
