"""A share of a zero-length GPU span is undefined (issue 31, item 12): (hta window) a capture whose
only GPU op lasts 0 ns, or one sub-µs-wide op that HTA's µs rounding empties, has span 0.
The default window is the time ledger's step window (issue 46): the step, or the whole capture
when there are no steps, so the same captures there have a span and an idle share.
Its idle/compute/non-compute shares are null in JSON and "–" in tables and headlines, never 0
or 100 %; the same for hotspots' share of a zero total and overlap's shares without
communication. Expected values are derived from the events each test writes."""
from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))
from conftest import make_store, shared_trace  # noqa: E402
from kineto_synth import Trace  # noqa: E402
from scoped import summary  # noqa: E402

from traceq.cli import app  # noqa: E402
from traceq.ingest import ingest  # noqa: E402
from traceq.render import UNDEFINED  # noqa: E402

PCTS = ("idle_pct", "compute_pct", "non_compute_pct")


def cli(*args):
    res = CliRunner().invoke(app, [str(a) for a in args])
    assert res.exit_code == 0, res.output
    return res.output


def first_line(out: str) -> str:
    return next(ln for ln in out.splitlines() if not ln.startswith("Fix first:"))


@pytest.fixture(scope="module")
def zero_op(tmp_path_factory) -> Path:
    """One host step [0, 1000) µs launching one kernel that lasts 0 µs (at 200 µs)."""
    d = tmp_path_factory.mktemp("zero_op")
    t = Trace()
    t.step(1, 0, 1000)
    t.launch("gemm_kernel", 100, 10, 200, 0)
    ingest([t.write(d / "t.pt.trace.json.gz")], store=d / "s", jobs=1)
    return d / "s"


def test_zero_duration_op_gives_a_zero_span_with_undefined_shares(zero_op):
    row = summary(zero_op, window="hta").row(0, named=True)
    assert (row["ops"], row["span_ns"], row["busy_ns"], row["idle_ns"], row["compute_ns"]) == (1, 0, 0, 0, 0)
    assert [row[c] for c in PCTS] == [None, None, None]
    # the ledger's window is the step [0, 1000) µs: all of it idle, the 0 ns kernel busy for none
    row = summary(zero_op).row(0, named=True)
    assert (row["ops"], row["span_ns"], row["busy_ns"], row["idle_ns"], row["compute_ns"]) == (1, 10**6, 0, 10**6, 0)
    assert [row[c] for c in PCTS] == [100.0, 0.0, 0.0]


def test_cli_prints_undefined_shares_not_0_or_100(zero_op):
    out = cli("summary", "--store", zero_op, "--window", "hta")
    head = first_line(out)
    assert head == ("run t rank 0 [HTA window]: GPU idle – of 0.0 µs; compute –, non-compute – "
                    "(zero-length GPU span: no share of it is defined)")
    row = [ln for ln in out.splitlines() if ln.strip().startswith("0 ")][0].split()
    assert row[-3:] == [UNDEFINED] * 3 and "100" not in out
    doc = json.loads(cli("summary", "--store", zero_op, "--window", "hta", "--format", "json"))
    assert list(doc["rows"][0]) == ["run", "rank", "ops", "span_ns", "busy_ns", "idle_ns", "compute_ns",
                                    "non_compute_ns", *PCTS]
    assert [doc["rows"][0][c] for c in PCTS] == [None, None, None]
    assert cli("summary", "--store", zero_op, "--window", "hta", "--format", "csv").splitlines()[1].endswith(",,,")
    assert first_line(cli("summary", "--store", zero_op)) == (
        "run t rank 0: GPU idle 100.0 % of 1.0 ms; compute 0.0 %, non-compute 0.0 %")


def test_hotspots_share_of_a_zero_total_is_undefined(zero_op):
    doc = json.loads(cli("hotspots", "--store", zero_op, "--format", "json"))
    assert [r["pct"] for r in doc["rows"]] == [None]     # was NaN: 0 / 0
    assert "(share undefined: every op lasts 0 ns)" in doc["headline"] and "nan" not in doc["headline"]


def test_overlap_without_communication_shows_undefined_overlap(zero_op):
    out = cli("overlap", "--store", zero_op, "--by", "across")
    assert f"overlap min / median / max                     {UNDEFINED} / {UNDEFINED} / {UNDEFINED}" in out
    doc = json.loads(cli("overlap", "--store", zero_op, "--format", "json"))
    assert doc["rows"][0]["overlap_pct"] is None


def test_hta_window_rounding_a_short_op_to_nothing_does_not_crash(tmp_path):
    """One memset [200.2, 201.7) µs: the all window measures 1.5 µs, all non-compute (memory);
    HTA's window rounds it to [ceil 201, floor 201) = 0 µs: span 0, shares undefined. The
    headline formatted None and raised TypeError (traceq summary --window hta)."""
    t = Trace()
    t.launch("Memset (Device)", 100, 10, 200.2, 1.5, api="cudaMemsetAsync", cat="gpu_memset")
    ingest([t.write(tmp_path / "t.pt.trace.json.gz")], store=tmp_path / "s", jobs=1)
    # the ledger's window is the capture: the launch call's start (100 µs) to the memset's end
    row = summary(tmp_path / "s").row(0, named=True)
    assert (row["span_ns"], row["non_compute_ns"], row["idle_ns"]) == (101_700, 1500, 100_200)
    assert row["compute_pct"] == 0.0 and row["non_compute_pct"] == pytest.approx(100 * 1500 / 101_700)
    row = summary(tmp_path / "s", window="hta").row(0, named=True)
    assert (row["ops"], row["span_ns"]) == (1, 0) and [row[c] for c in PCTS] == [None, None, None]
    out = cli("summary", "--store", tmp_path / "s", "--window", "hta")
    assert first_line(out).startswith("run t rank 0 [HTA window]: GPU idle – of 0.0 µs; compute –")


def _kernel(s, e, corr, name="gemm_kernel"):
    return {"pid": 1, "device": 0, "stream": 7, "kind": "kernel", "name": name, "category": "gemm",
            "start_ns": s, "end_ns": e, "correlation": corr}


def test_multi_rank_headline_sums_spans_and_skips_undefined_ranks(tmp_path):
    # rank 0: one 0 ns kernel (span 0); rank 1: [0,100) and [150,200): span 200, busy 150,
    # idle 50 (25 %), compute 150 (75 %), non-compute 0. Summed: 50 / 200 idle, 150 / 200 compute.
    make_store(tmp_path / "s", rank=0, gpu_ops=[_kernel(500, 500, 1)])
    make_store(tmp_path / "s", rank=1, gpu_ops=[_kernel(0, 100, 1), _kernel(150, 200, 2)])
    head = first_line(cli("summary", "--store", tmp_path / "s"))
    assert head == ("run syn, 2 ranks: GPU idle 25.0 % of 0.2 µs (summed spans); compute 75.0 %, "
                    "non-compute 0.0 %; most idle: rank 1 (25.0 %)")
    make_store(tmp_path / "z", rank=0, gpu_ops=[_kernel(500, 500, 1)])
    make_store(tmp_path / "z", rank=1, gpu_ops=[_kernel(900, 900, 1)])
    head = first_line(cli("summary", "--store", tmp_path / "z"))
    assert head == ("run syn, 2 ranks: GPU idle – of 0.0 µs (summed spans); compute –, non-compute – "
                    "(zero-length GPU span: no share of it is defined)")


def test_real_capture_whose_only_gpu_op_is_one_memset(tmp_path):
    """WeatherBench2's nsys export: its one GPU op is a memset of 1.472 µs, inside one
    microsecond-wide window of HTA's rounding (ceil of its start = floor of its end)."""
    path = shared_trace("nsys/WeatherBench2/report1.sqlite")
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    (start, end), = con.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMSET").fetchall()
    # the capture the ledger's window spans: the CUDA API calls and the memset (no NVTX ranges)
    (lo, hi), = con.execute("SELECT min(s), max(e) FROM (SELECT start s, end e FROM CUPTI_ACTIVITY_KIND_RUNTIME "
                            "UNION ALL SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMSET)").fetchall()
    con.close()
    assert -(-start // 1000) == end // 1000, "fixture: the memset rounds to nothing in µs"
    ingest([path], store=tmp_path / "s", run="weatherbench2")
    row = summary(tmp_path / "s", window="all").row(0, named=True)
    assert (row["span_ns"], row["non_compute_ns"], row["compute_pct"]) == (hi - lo, end - start, 0.0)
    out = cli("summary", "--store", tmp_path / "s", "--window", "hta")
    assert first_line(out) == ("run weatherbench2 rank 0 [HTA window]: GPU idle – of 0.0 µs; compute –, "
                               "non-compute – (zero-length GPU span: no share of it is defined)")
    doc = json.loads(cli("summary", "--store", tmp_path / "s", "--window", "hta", "--format", "json"))
    assert [doc["rows"][0][c] for c in PCTS] == [None, None, None] and doc["rows"][0]["span_ns"] == 0
