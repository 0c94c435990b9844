"""pyarrow without pandas, in the processes of traceq's command line.

pyarrow asks whether its inputs are pandas objects (`pa.array`, `pa.table`, writing Parquet,
reading it), and the first time it asks it imports pandas when pandas is installed: 0.18 s of
CPU (measured on this project's benchmark machine) in every process that touches pyarrow, a
third of the ingest of a 33 MiB trace. traceq never hands pyarrow a pandas object. `apply()`
hides pandas from the import system while pyarrow asks once (pyarrow remembers the answer for
its input checks), so pyarrow's checks do not load pandas; any other import of pandas works
as usual, and once pandas is imported `Table.to_pandas` still converts to it.

Only traceq's command-line process does this (`cli.main` sets TRACEQ_PYARROW_PANDAS=0, which
the ingest workers it spawns inherit; their task calls `apply()` too): a Python program that
calls traceq is left as it is, and so is a command line run with TRACEQ_PYARROW_PANDAS=1.
"""
from __future__ import annotations

import os
import sys

ENV = "TRACEQ_PYARROW_PANDAS"


class _Hidden:
    """A meta path finder for which pandas does not exist."""

    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r} (hidden from pyarrow by traceq)", name=name)
        return None


def apply() -> None:
    """pyarrow's one check for pandas fails in this process, when TRACEQ_PYARROW_PANDAS=0 and
    pandas is not loaded yet (a loaded pandas costs nothing more: nothing is done)."""
    if os.environ.get(ENV) != "0" or "pandas" in sys.modules:
        return
    import pyarrow as pa

    hidden = _Hidden()
    sys.meta_path.insert(0, hidden)
    try:
        pa.array([0])   # asks whether [0] is a pandas object: the import fails, pyarrow keeps "no pandas"
    finally:
        sys.meta_path.remove(hidden)
