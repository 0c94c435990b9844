"""The start-time histogram that lets the nsys reader skip the second read of every time
(traceq.ingest.nsys.start_histogram): the quartiles lie in the buckets it names, its proof never
keeps a record the exact rule drops, and on an export whose span exceeds the rule's smallest
margin without any absurd record, the tables are those of the exact path with no second read."""
from __future__ import annotations

import math

import numpy as np
import pytest

from traceq.ingest.nsys import reader as nsys
from traceq.ingest.nsys.start_histogram import MAX_BUCKETS, StartHistogram
from traceq.ingest.validate import bounds_of


def _streamed(starts: np.ndarray, rng: np.random.Generator) -> StartHistogram:
    h = StartHistogram()
    at = 0
    while at < len(starts):
        n = int(rng.integers(1, 5000))
        h.add(starts[at:at + n])
        at += n
    return h


def _datasets(rng: np.random.Generator):
    s = 10**9
    yield "one value", np.full(7, 123_456_789, np.int64)
    yield "two values", np.array([5, 10**12], np.int64)
    yield "one-second capture", rng.integers(0, s, 20_000)
    yield "two-hour capture", np.sort(rng.integers(0, 7200 * s, 50_000))
    yield "negative times", rng.integers(-3600 * s, 60 * s, 20_000)
    yield "bursts an hour apart", np.concatenate([rng.integers(0, s // 10, 10_000),
                                                  rng.integers(3600 * s, 3600 * s + s // 10, 10_000)])
    bulk = rng.integers(0, 2 * s, 30_000)
    yield "garbage far away", np.concatenate([bulk, np.array([2**61, -(2**61), 10**16], np.int64)])
    yield "late minority", np.concatenate([bulk, rng.integers(10**6 * s, 10**6 * s + s, 5_000)])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_quartiles_lie_in_the_buckets_the_histogram_names(seed):
    rng = np.random.default_rng(seed)
    for what, starts in _datasets(rng):
        starts = rng.permutation(starts.astype(np.int64))
        h = _streamed(starts, rng)
        assert h.n == len(starts) and int(h.counts.sum()) == len(starts), what
        assert len(h.counts) <= MAX_BUCKETS, what
        ordered = np.sort(starts)
        for rank in (math.floor((len(starts) - 1) * 0.25), math.ceil((len(starts) - 1) * 0.75), 0, len(starts) - 1):
            lo, hi = h.range_of(rank)
            assert lo <= ordered[rank] <= hi, (what, rank)


@pytest.mark.parametrize("seed", [4, 5, 6, 7])
def test_the_proof_never_keeps_what_the_exact_rule_drops(seed):
    """Against validate.bounds_of (exact order statistics): whenever keeps_all says yes, the
    exact bounds keep the lowest start and the highest end. And on a plain long capture the
    proof holds (it is not vacuous)."""
    rng = np.random.default_rng(seed)
    proven = {}
    for what, starts in _datasets(rng):
        starts = starts.astype(np.int64)
        ends = starts + rng.integers(0, 10**6, len(starts))
        h = _streamed(rng.permutation(starts), rng)
        lowest, highest = int(starts.min()), int(ends.max())
        lo, hi, _ = bounds_of(starts.copy())
        proven[what] = h.keeps_all(lowest, highest)
        if proven[what]:
            assert lo <= lowest and highest <= hi, what
    assert proven["two-hour capture"] and proven["bursts an hour apart"] and proven["negative times"]
    # far garbage widens the buckets beyond any proof; a late minority is dropped by the exact rule
    assert not proven["garbage far away"] and not proven["late minority"]


def test_the_proof_is_tight_at_the_margin():
    """Starts 0..999 s evenly (quartiles ~250 s and ~750 s: margin 1000 x 500 s): a record
    ending just inside the exact upper bound is provably kept, one far beyond it is not."""
    s = 10**9
    starts = np.arange(0, 1000 * s, s // 100, dtype=np.int64)
    h = StartHistogram()
    h.add(starts)
    lo, hi, _ = bounds_of(starts.copy())
    assert h.keeps_all(0, hi - 10**12)          # 1000 s inside the exact bound
    assert not h.keeps_all(0, hi + 1)


KERNEL_COLUMNS = ["start", "end", "deviceId", "streamId", "correlationId", "globalPid", "demangledName",
                  "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ", "registersPerThread"]


def _long_capture(path, late_s: int):
    """Kernels and their launches in two bursts `late_s` seconds apart (no absurd record)."""
    from fuzzing import write_sqlite

    s = 10**9
    kernels, calls = [], []
    for i in range(400):
        t = 1000 + i * 10_000 + (late_s * s if i % 2 else 0)
        kernels.append((t, t + 5_000, 0, 7, i, 704643072, 0, 1, 1, 1, 128, 1, 1, 32))
        calls.append((t - 900, t - 100, 0, 704643072 + 11, 1, i))
    return write_sqlite(path, [
        ("StringIds", ["id", "value"], [(0, "k0"), (1, "cudaLaunchKernel")]),
        ("CUPTI_ACTIVITY_KIND_KERNEL", KERNEL_COLUMNS, kernels),
        ("CUPTI_ACTIVITY_KIND_RUNTIME", ["start", "end", "eventClass", "globalTid", "nameId", "correlationId"], calls)])


def test_a_long_capture_is_ingested_without_a_second_read_of_its_times(tmp_path, monkeypatch):
    """Two bursts 1,500 s apart: the span exceeds the rule's smallest margin (1000 s), so the
    exact path reads every time again; the histogram shows nothing can be dropped. Same
    tables either way, and no second read."""
    path = _long_capture(tmp_path / "long.sqlite", 1500)
    monkeypatch.setattr(StartHistogram, "keeps_all", lambda self, lo, hi: False)
    exact = nsys.read(path)
    monkeypatch.undo()

    def no_second_read(self, bounds=None):
        raise AssertionError("second read of the activity times")

    monkeypatch.setattr(nsys.Export, "activity_times", no_second_read)
    fast = nsys.read(path)
    assert fast.warnings == exact.warnings == []
    for name in ("gpu_ops", "host_ops", "regions"):
        assert fast.tables[name].equals(exact.tables[name]), name
    assert fast.tables["gpu_ops"].num_rows == 400 and fast.tables["host_ops"].num_rows == 400


def test_a_capture_with_an_absurd_record_still_takes_the_exact_path(tmp_path, monkeypatch):
    """A record 10 days after a one-second capture: the histogram cannot prove it is kept, the
    exact quartiles are computed (the second read happens) and the record is dropped."""
    from fuzzing import write_sqlite

    reads = []
    orig = nsys.Export.activity_times

    def counted(self, bounds=None):
        reads.append(bounds)
        return orig(self, bounds)

    monkeypatch.setattr(nsys.Export, "activity_times", counted)
    kernels = [(1000 + i * 10_000, 6000 + i * 10_000, 0, 7, i, 704643072, 0, 1, 1, 1, 128, 1, 1, 32) for i in range(50)]
    kernels.append((10 * 86400 * 10**9, 10 * 86400 * 10**9 + 5, 0, 7, 99, 704643072, 0, 1, 1, 1, 128, 1, 1, 32))
    path = write_sqlite(tmp_path / "late.sqlite", [
        ("StringIds", ["id", "value"], [(0, "k0")]),
        ("CUPTI_ACTIVITY_KIND_KERNEL", KERNEL_COLUMNS, kernels)])
    parsed = nsys.read(path)
    assert reads == [None]
    assert parsed.tables["gpu_ops"].num_rows == 50
    assert [w[:33] for w in parsed.warnings if w.startswith("dropped")] == ["dropped 1 CUDA activity records w"]
