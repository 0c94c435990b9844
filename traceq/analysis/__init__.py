"""Analyses: each module exposes one function taking a store and scope, returning a polars
DataFrame (plus a headline). The SQL lives in traceq/queries/; Python only binds the scope."""
