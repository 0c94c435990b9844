"""A pageable cudaMemcpyAsync blocks the host until its copy is done (the CUDA runtime stages
pageable memory synchronously): on the critical path it is a blocking copy that waits for the
GPU, not launch time (issue 46 item 5: "one blocking 463 ms copy is launch 97.8 %"). Hand-made
trace, µs: one step [0, 1100); a GEMM [10, 1010) launched at 0; the .item()-style DtoH copy
into pageable memory called at 20, returning at 1030 after its copy [1010, 1025)."""
from __future__ import annotations

import pytest
from kineto_synth import Trace


def trace(pageable: bool) -> Trace:
    t = Trace()
    t.step(1, 0, 1100)
    t.launch("gemm_kernel", 0, 10, 10, 1000)
    dst = "Pageable" if pageable else "Pinned"
    t.launch(f"Memcpy DtoH (Device -> {dst})", 20, 1010, 1010, 15, api="cudaMemcpyAsync", cat="gpu_memcpy")
    t.cpu_op("aten::post", 1030, 70)
    return t


def bounds(tmp_path, pageable: bool) -> dict:
    from traceq.engine.critical_path import run_paths
    from traceq.engine.scope import open_scope
    from traceq.ingest import ingest

    ingest([trace(pageable).write(tmp_path / "t.json.gz")], tmp_path / "s", run="t")
    steps = run_paths(open_scope(tmp_path / "s", "t"), detail=False)["steps"]
    assert len(steps) == 1
    return {k: v / 1000 for k, v in steps[0]["bounds"].items() if v}


def test_a_pageable_async_copy_waits_for_the_gpu_on_the_path(tmp_path):
    b = bounds(tmp_path, True)
    # the GEMM [10, 1010) is on the path; the launch call [0, 10) before it; the copy
    # [1010, 1025); the host's wait past it [1025, 1030) and its own work [1030, 1100)
    assert b.get("gpu") == pytest.approx(1000)
    assert b.get("launch", 0) <= 10
    assert sum(b.values()) == pytest.approx(1100)


def test_a_pinned_async_copy_is_a_launch(tmp_path):
    b = bounds(tmp_path, False)
    # the same call with pinned memory is asynchronous: its 1010 µs are the host's launch call
    assert b.get("launch", 0) >= 1000 and b.get("gpu", 0) < 100
