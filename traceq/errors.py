"""User-facing errors: one line, naming the file and the problem (never a traceback)."""
from __future__ import annotations

from pathlib import Path


class TraceqError(Exception):
    """An error the user can act on. `str()` is the whole message, without the `traceq:` prefix."""

    exit_code = 2

    def __init__(self, problem: str, path: str | Path | None = None):
        self.path = None if path is None else str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}" if self.path else problem)


class BadInput(TraceqError):
    """The input file cannot be read as a trace of the expected format."""
