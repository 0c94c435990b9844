"""Small output defects of issue 8: diff of a run with itself (4), device counts of
multi-rank runs (6)."""
from __future__ import annotations

import json

import pyarrow as pa
from typer.testing import CliRunner

from traceq.cli import app
from traceq.ingest import ingest
from traceq.report import build_report
from traceq.report.sections import count_devices
from traceq.store import RankData, Store

from conftest import SAMPLES


def test_diff_of_a_run_with_itself_is_all_unchanged(tmp_path):
    store = str(tmp_path / "store")
    ingest([SAMPLES / "nsys_sample.sqlite"], store, run="delta")   # also a column name of the table
    runner = CliRunner()
    r = runner.invoke(app, ["diff", "delta", "delta", "--store", store])
    assert r.exit_code == 0, r.output
    assert "A: delta" in r.output and "B: delta" in r.output and "+0.00 ms (+0.0 %)" in r.output
    r = runner.invoke(app, ["diff", "delta", "delta", "--store", store, "-f", "json"])
    h = json.loads(r.output)["headline"]
    assert h["gpu_delta_ns"] == 0 and h["kernels_changed"] == 0 and h["kernels_appeared"] == 0
    assert h["kernels_unchanged"] == 10   # the sample has 10 distinct kernel/copy/memset names


def _eight_rank_store(path, hosts):
    """8 ranks, each listing the 8 GPUs of its node (as Kineto deviceProperties does)."""
    st = Store(path)
    staged = []
    for rank in range(8):
        ops = pa.Table.from_pylist([{"name": "k", "kind": "kernel", "category": "gemm", "start_ns": 1000 * rank,
                                     "end_ns": 1000 * rank + 500, "device": rank % 4, "stream": 7}])
        data = RankData(run="r8", rank=rank, tables={"gpu_ops": ops}, source_path=f"rank{rank}.json",
                        source_sha256=f"s{rank}", source_format="kineto", host=hosts[rank],
                        devices=[{"id": i, "name": "Tesla V100-SXM2-16GB"} for i in range(8 if hosts[rank] == "n0" or len(set(hosts)) == 1 else 4)])
        staged.append(st.stage(data))
    st.commit(staged)
    return st


def test_devices_are_counted_once_per_node(tmp_path):
    st = _eight_rank_store(tmp_path / "one", ["n0"] * 8)
    rows = st.manifest_rows()
    assert count_devices(rows) == {"Tesla V100-SXM2-16GB": 8}
    html = build_report(st, None, tmp_path / "r.html") and (tmp_path / "r.html").read_text()
    assert "8× Tesla V100-SXM2-16GB" in html and "64×" not in html
    # two nodes: 8 GPUs on n0 (listed by ranks 0-3), 4 on n1 (listed by ranks 4-7): 12 devices
    st2 = _eight_rank_store(tmp_path / "two", ["n0"] * 4 + ["n1"] * 4)
    assert count_devices(st2.manifest_rows()) == {"Tesla V100-SXM2-16GB": 12}


def test_devices_without_ids_count_per_rank():
    rows = [{"host": None, "rank": r, "devices": json.dumps([{"name": "MI300X"}])} for r in range(2)]
    assert count_devices(rows) == {"MI300X": 2}
