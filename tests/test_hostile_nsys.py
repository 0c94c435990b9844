"""Hostile Nsight Systems exports (issue 36): repeated ids in lookup tables, invalid UTF-8.

Each export is a copy of a shared one edited with sqlite3; the expected values come from the
unedited copy ingested the same way (the reference) and from the edit itself.
"""
from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from conftest import shared_trace
from traceq.cli import app
from traceq.ingest import ingest
from traceq.store import Store, fetch_pl

SAXPY = "nsys/pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"


def edited(src: Path, dst: Path, *statements: str) -> Path:
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    with con:
        for sql in statements:
            con.execute(sql)
    con.close()
    return dst


def without_key(table: str) -> list[str]:
    """Statements that rebuild `table` without its PRIMARY KEY (so that an id can repeat)."""
    return [f"CREATE TABLE copy_ AS SELECT * FROM {table}", f"DROP TABLE {table}", f"ALTER TABLE copy_ RENAME TO {table}"]


def q(store: Path, sql: str) -> pl.DataFrame:
    return fetch_pl(Store(store).connect(), sql)


def ingested(path: Path, store: Path):
    res = ingest([path], store=store)[0]
    assert res.status == "added"
    return res


def test_repeated_string_ids_keep_the_first_row_and_say_how_many(tmp_path):
    """The saxpy export names 22 NVTX ranges through 4 StringIds ids (52 and 59 one range
    each) and its kernels through StringIds too. Repeating ids 52 and 59 and the first
    kernel's name id (each with another text, after the original row) used to add a range
    per repeat (24 instead of 22) and a row per repeat to every join on the name; now each
    id keeps its first row, and the warning counts the 3 repeats."""
    src = shared_trace(SAXPY)
    ref = tmp_path / "ref"
    ingested(src, ref)
    kernel_id = sqlite3.connect(src).execute(
        "SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start LIMIT 1").fetchone()[0]
    bad = edited(src, tmp_path / "dup.sqlite", *without_key("StringIds"),
                 "INSERT INTO StringIds VALUES (52, 'impostor A'), (59, 'impostor B')",
                 f"INSERT INTO StringIds VALUES ({kernel_id}, 'impostor kernel')")
    got = ingested(bad, tmp_path / "s")
    cols = "name, start_ns, end_ns, pid, tid, depth"
    want = q(ref, f"SELECT {cols} FROM regions ORDER BY ALL")
    assert want.height == 22
    assert q(tmp_path / "s", f"SELECT {cols} FROM regions ORDER BY ALL").equals(want)
    kernels = "SELECT name, identity, category, start_ns FROM gpu_ops ORDER BY ALL"
    assert q(tmp_path / "s", kernels).equals(q(ref, kernels))
    assert q(tmp_path / "s", "SELECT count(*) AS n FROM gpu_ops WHERE name LIKE 'impostor%'")["n"][0] == 0
    assert [w for w in got.warnings if "repeated ids" in w] == [
        "repeated ids in lookup tables, the first row of each id kept (rows dropped: StringIds 3)"]


def test_repeated_enum_and_gpu_ids_keep_the_first_row(tmp_path):
    """ENUM_* labels and TARGET_INFO_GPU rows are looked up by id too: a repeated id keeps the
    row stored first (no second device 0, no label replaced by the impostor)."""
    src = shared_trace("nsys/llama3-inference/demo.sqlite")
    ref = tmp_path / "ref"
    ingested(src, ref)
    bad = edited(src, tmp_path / "dup.sqlite", *without_key("ENUM_CUDA_MEMCPY_OPER"),
                 "INSERT INTO ENUM_CUDA_MEMCPY_OPER SELECT id, name, 'impostor' FROM ENUM_CUDA_MEMCPY_OPER",
                 "INSERT INTO TARGET_INFO_GPU SELECT * FROM TARGET_INFO_GPU")
    con = sqlite3.connect(bad)
    enum_rows = con.execute("SELECT count(*) / 2 FROM ENUM_CUDA_MEMCPY_OPER").fetchone()[0]
    gpus = con.execute("SELECT count(*) / 2 FROM TARGET_INFO_GPU").fetchone()[0]
    con.close()
    got = ingested(bad, tmp_path / "s")
    assert [w for w in got.warnings if "repeated ids" in w] == [
        f"repeated ids in lookup tables, the first row of each id kept (rows dropped: ENUM_CUDA_MEMCPY_OPER "
        f"{enum_rows})",
        f"repeated ids in lookup tables, the first row of each id kept (rows dropped: TARGET_INFO_GPU {gpus})"]
    same = "SELECT name, kind, start_ns FROM gpu_ops ORDER BY ALL"
    assert q(tmp_path / "s", same).equals(q(ref, same))
    assert q(tmp_path / "s", "SELECT devices FROM runs").equals(q(ref, "SELECT devices FROM runs"))


@pytest.mark.parametrize("column", ["kernel", "nvtx", "gpu"])
def test_invalid_utf8_in_text_columns_is_replaced_and_the_store_stays_readable(tmp_path, column):
    """SQLite stores whatever bytes it is given in a TEXT column. A kernel name, an NVTX text
    and a GPU name with the byte 0xff (not UTF-8) ingest with U+FFFD in its place, and every
    analysis and a store-wide query over the names still work."""
    src = shared_trace(SAXPY)
    con = sqlite3.connect(src)
    kernel_id = con.execute("SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1").fetchone()[0]
    con.close()
    bad_text = "CAST(x'6361666566ff' AS TEXT)"     # b"cafef\xff"
    edit = {"kernel": f"UPDATE StringIds SET value = {bad_text} WHERE id = {kernel_id}",
            "nvtx": f"UPDATE NVTX_EVENTS SET text = {bad_text} WHERE text = 'saxpy'",
            "gpu": f"UPDATE TARGET_INFO_GPU SET name = {bad_text}"}[column]
    bad = edited(src, tmp_path / "bad.sqlite", edit)
    store = tmp_path / "s"
    ingested(bad, store)
    table, col = {"kernel": ("gpu_ops", "name"), "nvtx": ("regions", "name"), "gpu": ("runs", "devices")}[column]
    texts = q(store, f"SELECT CAST({col} AS VARCHAR) AS t FROM {table}")["t"].to_list()
    assert any("cafef\ufffd" in (t or "") or "cafef\\ufffd" in (t or "") for t in texts)   # runs.devices is JSON
    runner = CliRunner()
    for cmd in (["summary"], ["hotspots"], ["sql", "SELECT name FROM regions UNION ALL SELECT name FROM gpu_ops"]):
        r = runner.invoke(app, [*cmd, "--store", str(store)], env={"NO_COLOR": "1", "COLUMNS": "100"})
        assert r.exit_code == 0, (cmd, r.output)
    r = runner.invoke(app, ["doctor", "--store", str(store)])
    assert r.exit_code == 0, r.output
