"""How the many-runs analyses (compare, model, check) show their answers: seconds as ms on
screen (JSON and CSV keep SI units), and their warnings on stderr once the output is written."""
from __future__ import annotations

import sys

from ..lazy import polars as pl


def seconds_as_ms(df: pl.DataFrame, cols) -> pl.DataFrame:
    """Table output only: values in s shown in ms (json/csv keep SI units)."""
    ms = pl.col("unit") == "s"
    return df.with_columns(*[pl.when(ms).then(pl.col(c) * 1e3).otherwise(pl.col(c)).alias(c) for c in cols],
                           pl.when(ms).then(pl.lit("ms")).otherwise(pl.col("unit")).alias("unit"))


def print_warnings(result) -> int:
    """The warnings of the answer (`result.value["warnings"]`) on stderr; exit status 0."""
    for w in result.value.get("warnings", ()):
        sys.stderr.write(f"traceq: warning: {w}\n")
    return 0
