"""Small output defects of issue 8: diff of a run with itself (4), device counts of
multi-rank runs (6)."""
from __future__ import annotations

import json

import pyarrow as pa
from typer.testing import CliRunner

from traceq.cli import app
from traceq.ingest import ingest
from traceq.report import build_report
from traceq.report.page import count_devices
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


def test_reingest_without_run_names_the_run_it_is_already_in(tmp_path):
    store = tmp_path / "store"
    copy = tmp_path / "copy.sqlite"
    copy.write_bytes((SAMPLES / "nsys_sample.sqlite").read_bytes())
    ingest([SAMPLES / "nsys_sample.sqlite"], store, run="resnet 50 (amp)")
    again = ingest([copy], store)   # same content under another file name, no --run
    assert [(r.run, r.status) for r in again] == [("resnet 50 (amp)", "unchanged")]
    assert again[0].note == "already in the store as run 'resnet 50 (amp)' rank 0"
    assert [r["run"] for r in Store(store).manifest_rows()] == ["resnet 50 (amp)"]
    r = CliRunner().invoke(app, ["ingest", str(copy), "--store", str(store), "-q"])
    assert r.exit_code == 0 and "already in the store as run 'resnet 50 (amp)' rank 0" in r.output
    # an explicit --run is a deliberate second run; --force without --run replaces in place
    assert ingest([copy], store, run="second")[0].status == "added"
    assert ingest([copy], store, force=True)[0].run in ("resnet 50 (amp)", "second")
    assert sorted(r["run"] for r in Store(store).manifest_rows()) == ["resnet 50 (amp)", "second"]
