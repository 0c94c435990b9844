"""Per-op performance model: flop and minimal memory traffic of one op call, from its recorded shapes."""
