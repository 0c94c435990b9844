"""Shared fixtures. Tests that read ../shared/traces skip cleanly when it is absent."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_TRACES = Path(os.environ.get("TRACEQ_SHARED_TRACES", REPO.parent / "shared" / "traces"))
SAMPLES = REPO / "sample_traces"


def shared_trace(rel: str) -> Path:
    """Path of a file under ../shared/traces, or skip the test when it is not there."""
    p = SHARED_TRACES / rel
    if not p.exists():
        pytest.skip(f"../shared/traces/{rel} not available")
    return p


@pytest.fixture
def store_dir(tmp_path) -> Path:
    return tmp_path / "store"
