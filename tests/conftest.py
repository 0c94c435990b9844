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


def generated_ranks_store(tmp_path_factory) -> Path:
    """A store with a generated 4-rank NCCL run "job" (benchmarks/make_many_ranks.py from
    trace_filter rank 0; rank 1 arrives 2 ms late)."""
    import sys

    from traceq.ingest import ingest

    sys.path.insert(0, str(REPO / "benchmarks"))
    import make_many_ranks

    template = shared_trace("kineto/hta/trace_filter/sampled_rank-0.json.gz")
    out = tmp_path_factory.mktemp("gen4") / "job"
    make_many_ranks.make(4, out, 1, 2.0, 200, clock_skew_us=2000, seed=3, template=template)
    store = out.parent / "store"
    ingest([out], store, jobs=1)
    return store


def mixed_ranks_store(tmp_path_factory) -> Path:
    """A store with run "mix": trace_filter ranks 0-1, nccl_parser_config as rank 2, HTA's
    CPU-only capture as rank 3 (ranks that differ: another model, no GPU ops, no steps)."""
    from traceq.ingest import ingest

    tf = shared_trace("kineto/hta/trace_filter")
    nccl = shared_trace("kineto/hta/nccl_parser_config/nccl_data.json.gz")
    cpu = shared_trace("kineto/hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")
    store = tmp_path_factory.mktemp("mixed") / "store"
    ingest([tf], store, run="mix", jobs=1)
    ingest([nccl], store, run="mix", rank=2, jobs=1)
    ingest([cpu], store, run="mix", rank=3, jobs=1)
    return store


def shared_kineto_traces() -> list[str]:
    """Every Chrome trace under ../shared/traces/kineto, relative to SHARED_TRACES: the JSON files
    that hold events with a phase (`ph`), in a top-level `traceEvents` or a bare array; other
    JSON files there (e.g. a run's execution_details.json, a list of run records) are not traces."""
    import gzip
    import json

    root = SHARED_TRACES / "kineto"
    if not root.exists():
        return []
    out = []
    for p in sorted(root.rglob("*.json*")):
        raw = p.read_bytes()
        doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
        events = doc if isinstance(doc, list) else doc.get("traceEvents") if isinstance(doc, dict) else None
        if isinstance(events, list) and any(isinstance(e, dict) and "ph" in e for e in events):
            out.append(p.relative_to(SHARED_TRACES).as_posix())
    return out


@pytest.fixture
def store_dir(tmp_path) -> Path:
    return tmp_path / "store"


def make_store(path: Path, run: str = "syn", rank: int = 0, **tables: list[dict]):
    """A store with one rank whose tables are given as lists of row dicts (synthetic tests)."""
    import pyarrow as pa

    from traceq.store import RankData, Store

    st = Store(path)

    def table(rows):   # every key of every row (from_pylist looks at the first row only)
        keys = list(dict.fromkeys(k for r in rows for k in r))
        return pa.Table.from_pylist([{k: r.get(k) for k in keys} for r in rows])

    data = RankData(run=run, rank=rank, tables={k: table(v) for k, v in tables.items() if v},
                    source_path=f"{run}.syn", source_sha256=f"{run}-{rank}", source_format="kineto")
    st.commit([st.stage(data)])
    return st


def run_traceq(*args, cwd, width: int = 200):
    """The real CLI in a subprocess (no colour, fixed width, no TRACEQ_STORE from outside)."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("TRACEQ_STORE", "FORCE_COLOR")}
    env.update(NO_COLOR="1", TRACEQ_WIDTH=str(width), PYTHONIOENCODING="utf-8")
    return subprocess.run([sys.executable, "-m", "traceq", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(autouse=True)
def _no_ambient_width(monkeypatch):
    """Output widths come from what a test sets, never from the environment the suite runs in
    (a pipe is as wide as TRACEQ_WIDTH, else COLUMNS, else 200: traceq.render.pipe_width)."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("TRACEQ_WIDTH", raising=False)
