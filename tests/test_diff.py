"""`diff` (DESIGN §4.6) on HTA's trace_diff pair (control = A, test = B). Expected counts and
times are computed here from the raw JSON (gzip + json, by event category), independently of
the ingestor; categories come from the same rule table (traceq.rules.categories) applied to the raw
names."""
from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from conftest import shared_trace
from scoped import diff
from traceq.analyses.diff import headline
from traceq.rules.categories import categorize
from traceq.cli import app
from traceq.ingest import ingest

CONTROL = "kineto/hta/trace_diff/control/control.json.gz"
TEST = "kineto/hta/trace_diff/test/test.json.gz"
KINDS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}


def raw_ops(path: Path) -> list[tuple[str, str, int]]:
    """(name, kind, duration ns) of every GPU kernel / memcpy / memset event (integer µs here)."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    return [(e["name"], KINDS[e["cat"]], round(e["dur"] * 1000)) for e in events
            if e.get("ph") == "X" and e.get("cat") in KINDS]


def raw_step_regions(path: Path) -> tuple[int, int]:
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    steps = [e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    return len(steps), sum(round(e["dur"] * 1000) for e in steps)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    s = tmp_path_factory.mktemp("diff") / "store"
    ingest([shared_trace(CONTROL)], store=s, run="control")
    ingest([shared_trace(TEST)], store=s, run="test")
    return s


@pytest.fixture(scope="module")
def result(store):
    return diff(store, "control", "test")


@pytest.fixture(scope="module")
def raw():
    return raw_ops(shared_trace(CONTROL)), raw_ops(shared_trace(TEST))


def test_kernels_appeared_and_disappeared_match_the_raw_json(result, raw):
    a, b = raw
    names_a = {n for n, k, _ in a if k == "kernel"}
    names_b = {n for n, k, _ in b if k == "kernel"}
    k = result["kernels"].filter(pl.col("kind") == "kernel")
    appeared = set(k.filter(pl.col("status") == "appeared")["name"])
    disappeared = set(k.filter(pl.col("status") == "disappeared")["name"])
    assert appeared == names_b - names_a and appeared
    assert disappeared == names_a - names_b and disappeared
    count_a, count_b = Counter(n for n, kind, _ in a), Counter(n for n, kind, _ in b)
    for row in result["kernels"].iter_rows(named=True):
        assert (row["count_a"], row["count_b"]) == (count_a[row["name"]], count_b[row["name"]]), row["name"]
    assert result["kernels"].height == len(set(count_a) | set(count_b))


def test_per_category_deltas_match_the_raw_json(result, raw):
    def per_category(ops):
        names = pl.Series([n for n, _, _ in ops])
        kinds = pl.Series([k for _, k, _ in ops])
        cats = categorize(names, kinds).to_list()
        count, total = Counter(), defaultdict(int)
        for (_, _, dur), c in zip(ops, cats):
            count[c] += 1
            total[c] += dur
        return count, total

    (ca, ta), (cb, tb) = per_category(raw[0]), per_category(raw[1])
    cats = result["categories"]
    assert set(cats["category"]) == set(ca) | set(cb)
    for row in cats.iter_rows(named=True):
        c = row["category"]
        assert (row["count_a"], row["count_b"]) == (ca[c], cb[c]), c
        assert (row["total_a_ns"], row["total_b_ns"]) == (ta[c], tb[c]), c
        assert row["delta_ns"] == tb[c] - ta[c] and row["delta_count"] == cb[c] - ca[c]
        assert row["status"] == ("appeared" if not ca[c] else "disappeared" if not cb[c] else
                                 "unchanged" if (ca[c], ta[c]) == (cb[c], tb[c]) else "changed")
    # sorted by the size of the change
    deltas = cats["delta_ns"].abs().to_list()
    assert deltas == sorted(deltas, reverse=True)


def test_regions_and_headline(result, raw):
    steps = result["regions"].filter(pl.col("source") == "step").row(0, named=True)
    n_a, t_a = raw_step_regions(shared_trace(CONTROL))
    n_b, t_b = raw_step_regions(shared_trace(TEST))
    assert steps["name"] == "ProfilerStep#*"
    assert (steps["count_a"], steps["count_b"], steps["total_a_ns"], steps["total_b_ns"]) == (n_a, n_b, t_a, t_b)
    h = result["headline"].row(0, named=True)
    assert h["gpu_a_ns"] == sum(d for *_, d in raw[0]) and h["gpu_b_ns"] == sum(d for *_, d in raw[1])
    assert (h["ops_a"], h["ops_b"]) == (len(raw[0]), len(raw[1]))
    assert h["kernels_appeared"] == result["kernels"].filter(pl.col("status") == "appeared").height
    for m in ("idle", "compute", "overlap"):
        assert h[f"{m}_delta_pct"] == pytest.approx(h[f"{m}_b_pct"] - h[f"{m}_a_pct"])
    assert 0 < h["overlap_a_pct"] < 100 and 0 < h["idle_b_pct"] < 100
    text = headline(result)
    assert text.startswith("control → test: step time") and "; GPU time" in text and "appeared" in text


def test_diff_of_a_run_with_itself_is_all_unchanged(store):
    r = diff(store, "control", "control")
    for t in ("categories", "kernels", "regions"):
        assert set(r[t]["status"]) == {"unchanged"} and (r[t]["delta_ns"] == 0).all()
    assert r["headline"]["gpu_delta_ns"][0] == 0


def test_top_limits_kernels_and_regions(store):
    r = diff(store, "control", "test", top=3)
    assert r["kernels"].height == 3 and r["regions"].height == 3
    assert r["categories"].height > 3


def test_cli_diff_json_object_and_table(store):
    runner = CliRunner()
    res = runner.invoke(app, ["diff", "control", "test", "--store", str(store), "-f", "json", "--top", "5"])
    assert res.exit_code == 0, res.output
    obj = json.loads(res.stdout)
    assert set(obj) == {"categories", "kernels", "regions", "headline", "per_step"}
    assert len(obj["kernels"]) == 5 and obj["headline"]["run_b"] == "test"
    res = runner.invoke(app, ["diff", "control", "test", "--store", str(store), "--top", "5"])
    assert res.exit_code == 0, res.output
    out = res.output
    assert out.startswith("control → test: step time 77.5 ms → 124.1 ms (+60.1 %)")
    for title in ("per category", "per kernel", "per region", "comm overlap"):
        assert title in out
    res = runner.invoke(app, ["diff", "control", "test", "--store", str(store), "--only", "kernels", "-f", "csv"])
    assert res.exit_code == 0
    assert pl.read_csv(res.stdout.encode())["status"].is_in(["appeared", "disappeared", "changed", "unchanged"]).all()
    res = runner.invoke(app, ["diff", "control", "nope", "--store", str(store)])
    assert res.exit_code != 0


def test_diff_with_a_cpu_only_run(store, tmp_path):
    ingest([shared_trace("kineto/hta/rank_non_gpu/rank_non_gpu.json.gz")], store=store, run="cpu")
    r = diff(store, "cpu", "control")
    assert r["headline"]["ops_a"][0] == 0
    assert set(r["kernels"]["status"]) == {"appeared"}
    assert r["headline"]["idle_a_pct"][0] is None


def test_headline_leads_with_step_time_from_the_raw_profiler_steps(result):
    # step time = mean ProfilerStep duration (one rank), from the raw JSON:
    # control 6 steps, 464.945 ms in all -> 77.491 ms; test 6 steps, 744.401 ms -> 124.067 ms
    (na, ta), (nb, tb) = raw_step_regions(shared_trace(CONTROL)), raw_step_regions(shared_trace(TEST))
    h = result["headline"].row(0, named=True)
    assert (h["steps_a"], h["steps_b"]) == (na, nb) == (6, 6)
    assert h["step_a_ns"] == round(ta / na) == 77_490_833
    assert h["step_b_ns"] == round(tb / nb) == 124_066_833
    assert h["step_delta_pct"] == pytest.approx(100 * (tb / nb - ta / na) / (ta / na))
    assert h["throughput_a"] is None and h["throughput_unit"] is None   # no batch label
    line = headline(result)
    assert line.startswith("control → test: step time 77.5 ms → 124.1 ms (+60.1 %); per step: ")
    assert line.index("step time") < line.index("GPU time") < line.index("idle")


def test_diff_per_step_changes_and_throughput_on_the_dataloader_pair(tmp_path):
    # slow_dataloader vs fast_dataloader (6 ProfilerSteps each, CPU only), from the raw JSON:
    # step time 775.064 ms / 6 = 129.177 ms -> 175.438 ms / 6 = 29.240 ms; data wait = the
    # DataLoader __next__ regions per step: 608.580 / 6 = 101.430 ms -> 0.227 / 6 = 0.038 ms
    root = Path(__file__).resolve().parent.parent / "sample_traces"
    s = tmp_path / "store"
    ingest([root / "slow_dataloader"], store=s, run="slow_dataloader", labels={"batch": "32"})
    ingest([root / "fast_dataloader"], store=s, run="fast_dataloader", labels={"batch": "32"})
    raw = {}
    for name in ("slow_dataloader", "fast_dataloader"):
        events = json.loads(gzip.decompress((root / name / "rank0.pt.trace.json.gz").read_bytes()))["traceEvents"]
        steps = [round(e["dur"] * 1000) for e in events
                 if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")]
        loads = [round(e["dur"] * 1000) for e in events
                 if e.get("ph") == "X" and e["name"].startswith("enumerate(DataLoader)")]
        raw[name] = (len(steps), sum(steps) / len(steps), sum(loads) / len(steps))
    r = diff(s, "slow_dataloader", "fast_dataloader")
    h = r["headline"].row(0, named=True)
    (n_a, step_a, wait_a), (n_b, step_b, wait_b) = raw["slow_dataloader"], raw["fast_dataloader"]
    assert (h["steps_a"], h["steps_b"]) == (n_a, n_b) == (6, 6)
    assert h["step_a_ns"] == pytest.approx(step_a, abs=1) and h["step_b_ns"] == pytest.approx(step_b, abs=1)
    assert h["step_delta_pct"] == pytest.approx(-77.36, abs=0.01)
    # throughput = batch / step time: 32 / 0.129177 s = 247.7 items/s; 32 / 0.029240 s = 1094.4
    assert h["throughput_a"] == pytest.approx(32e9 / step_a, rel=1e-6)
    assert h["throughput_b"] == pytest.approx(32e9 / step_b, rel=1e-6)
    assert h["throughput_unit"] == "items/s"
    first = r["per_step"].row(0, named=True)
    assert first["what"] == "data wait"
    assert first["per_step_a_ns"] == pytest.approx(wait_a, abs=1)
    assert first["per_step_b_ns"] == pytest.approx(wait_b, abs=1)
    line = headline(r)
    assert line.startswith("slow_dataloader → fast_dataloader: step time 129.2 ms → 29.2 ms (-77.4 %); "
                           "throughput 247.7 → 1,094.4 items/s; per step: data wait 101.4 ms → 37.8 µs")
