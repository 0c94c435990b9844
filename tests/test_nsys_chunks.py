"""nsys activity tables are read in rowid-range chunks on several threads (traceq.ingest.nsys.sqlite_arrow):
the tables must not depend on how the export is cut, nor on how the sync records are matched
to their calls."""
from __future__ import annotations

import shutil
import sqlite3

import pyarrow as pa
import pytest

from conftest import shared_trace
from traceq.ingest.nsys import activity as nsys_activity
from traceq.ingest.nsys import reader as nsys
from traceq.ingest.nsys import sqlite_arrow


def tables(path) -> dict[str, pa.Table]:
    """The canonical tables of one read, text decoded (chunks carry their own dictionaries)."""
    out = {}
    for name, t in nsys.read(path).tables.items():
        out[name] = pa.table({c: t[c].cast(pa.string()) if pa.types.is_dictionary(t[c].type) else t[c]
                              for c in t.column_names})
    return out


@pytest.mark.parametrize("rel", ["nsys/pipit/perlmutter-cloverleaf-cuda.sqlite", "nsys/DLProf/nsys_profile.sqlite"])
def test_many_small_chunks_give_the_tables_of_one_chunk(rel, monkeypatch):
    path = shared_trace(rel)
    monkeypatch.setattr(sqlite_arrow, "CHUNK_ROWS", 1 << 30)
    whole = tables(path)
    monkeypatch.setattr(sqlite_arrow, "CHUNK_ROWS", 97)   # dozens of chunks per table, the last one short
    cut = tables(path)
    assert {n: t.num_rows for n, t in cut.items()} == {n: t.num_rows for n, t in whole.items()}
    assert whole["gpu_ops"].num_rows > 20 * 97 or rel.startswith("nsys/DLProf")
    for name in whole:
        assert cut[name].equals(whole[name]), name


def test_chunks_cover_every_rowid_once(tmp_path):
    db = tmp_path / "t.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t (a INTEGER)")
    con.executemany("INSERT INTO t (rowid, a) VALUES (?, ?)", [(r, r) for r in (-5, 1, 2, 3, 10, 11, 250)])
    con.commit()
    got = sqlite_arrow.chunks(con, "t", {"a"}, chunk_rows=4)
    assert got[:3] == [("rowid", -5, -2), ("rowid", -1, 2), ("rowid", 3, 6)]
    assert got[-1] == ("rowid", 247, 250) and len(got) == 64   # (250 - -5 + 1) / 4 ranges, back to back
    assert all(b[1] == a[2] + 1 for a, b in zip(got, got[1:]))
    q = sqlite_arrow.IntQuery("t", (("a", "a"),))
    rows = [v for r in got for v in sqlite_arrow.read_chunk(db, q, r).column("a").to_pylist()]
    assert rows == [-5, 1, 2, 3, 10, 11, 250]
    # a column that hides `rowid` moves the ranges to the next alias; an empty table has no chunks
    assert sqlite_arrow.chunks(con, "t", {"a", "ROWID"}, chunk_rows=400) == [("_rowid_", -5, 250)]
    con.execute("CREATE TABLE e (a INTEGER)")
    assert sqlite_arrow.chunks(con, "e", {"a"}) == []
    con.close()


def test_sync_records_find_their_call_when_correlation_ids_exceed_one_int64_key(tmp_path):
    """Correlation ids beyond 2**39 cannot share an int64 with the pid: the sync records are
    then matched by a join on both columns, and must get the same names."""
    src = shared_trace("nsys/pipit/perlmutter-cloverleaf-cuda.sqlite")
    big = tmp_path / "big-ids.sqlite"
    shutil.copyfile(src, big)
    con = sqlite3.connect(big)
    with con:
        for t in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"):
            con.execute(f"UPDATE {t} SET correlationId = correlationId + (1 << 45)")
    con.close()
    assert nsys_activity._pair_key(pa.array([1, 2]), pa.array([7, 1 << 45])) == (pa.array([(7 << 24) + 1, None]), False)
    before, after = tables(src)["gpu_ops"], tables(big)["gpu_ops"]
    sync = lambda t: t.filter(pa.compute.equal(t["kind"], "sync"))["name"].to_pylist()   # noqa: E731
    assert sync(after) == sync(before)
    assert "Context Sync" in sync(before)


def test_a_sane_but_absurd_record_is_dropped_after_the_tables_were_streamed(tmp_path):
    """One kernel eleven days after a one-second capture: its times are valid, so the stream
    writes it; only the quartiles (a second read) show it is absurd, and the tables are
    written again without it, in the store as in memory."""
    from traceq.ingest import ingest
    from traceq.store import Store

    src = shared_trace("nsys/pipit/perlmutter-cloverleaf-cuda.sqlite")
    edited = tmp_path / "late-kernel.sqlite"
    shutil.copyfile(src, edited)
    con = sqlite3.connect(edited)
    with con:
        con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1")
        con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 10 * 86400 * 1000000000 + 5, "
                    "end = 10 * 86400 * 1000000000 + 9 WHERE rowid = (SELECT max(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)")
    con.close()
    want = tables(src)
    parsed = nsys.read(edited)
    assert [w for w in parsed.warnings if w.startswith("dropped")] == [
        w for w in parsed.warnings if w.startswith("dropped 1 CUDA activity records") and "start 864000000000005 ns" in w]
    assert any(w.startswith("dropped") for w in parsed.warnings)
    res = ingest([edited], store=tmp_path / "s", jobs=1)[0]
    assert res.counts["gpu_ops"] == want["gpu_ops"].num_rows
    assert [w for w in res.warnings if w.startswith("dropped")] == [w for w in parsed.warnings if w.startswith("dropped")]
    # ingest fills the occupancy the export does not record (traceq.ingest.occupancy); the reader does not
    filled = ("blocks_per_sm", "warps_per_sm", "est_occupancy_pct")
    got = Store(tmp_path / "s").connect().sql(
        f"SELECT * EXCLUDE (run, rank, {', '.join(filled)}) FROM gpu_ops").to_arrow_table()
    assert got.cast(want["gpu_ops"].drop_columns(list(filled)).schema).equals(want["gpu_ops"].drop_columns(list(filled)))


KERNEL_COLUMNS = ["start", "end", "deviceId", "streamId", "correlationId", "globalPid", "demangledName",
                  "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ", "registersPerThread"]


def _kernel(start: int, end: int, correlation: int) -> tuple:
    return (start, end, 0, 7, correlation, 704643072, 0, 1, 1, 1, 128, 1, 1, 32)


def test_a_chunk_whose_rows_the_filter_all_leaves_out_is_skipped(tmp_path):
    """Runtime rows whose eventClass is neither runtime (0) nor driver (1), one of them text:
    the runtime query returns no row, and the kernels are ingested alone (found by the fuzzer:
    the empty chunk used to raise a KeyError)."""
    from fuzzing import write_sqlite
    from traceq.ingest import ingest

    path = write_sqlite(tmp_path / "e.sqlite", [
        ("StringIds", ["id", "value"], [(0, "k0"), (1, "cudaLaunchKernel"), (2, "cudaFree")]),
        ("CUPTI_ACTIVITY_KIND_KERNEL", KERNEL_COLUMNS, [_kernel(1000, 1050, 0), _kernel(1100, 1150, 1)]),
        ("CUPTI_ACTIVITY_KIND_RUNTIME", ["start", "end", "eventClass", "nameId"],
         [(990, 995, "abc", 1), (1090, 1095, 100000, 2)])])
    res = ingest([path], tmp_path / "s", jobs=1)[0]
    assert (res.counts["gpu_ops"], res.counts["host_ops"], res.warnings) == (2, 0, [])


def test_absurd_time_bounds_beyond_int64_are_applied(tmp_path):
    """A runtime call 5e17 ns before kernels at 0..1050 ns: the quartiles' margins lie beyond
    int64 (the rule keeps everything within ±LIMIT_NS), which the Arrow comparison used to
    reject (found by the fuzzer). The call and both kernels are kept."""
    from fuzzing import write_sqlite
    from traceq.ingest import ingest

    path = write_sqlite(tmp_path / "e.sqlite", [
        ("StringIds", ["id", "value"], [(0, "k0"), (1, "cudaLaunchKernel")]),
        ("CUPTI_ACTIVITY_KIND_KERNEL", KERNEL_COLUMNS, [_kernel(1000, 1050, 0), _kernel(0, 0, 0)]),
        ("CUPTI_ACTIVITY_KIND_RUNTIME", ["start", "end", "eventClass", "globalTid", "nameId"],
         [(-500_000_000_000_000_001, -500_000_000_000_000_000, 0, 0, 1)]),
        ("NVTX_EVENTS", ["eventType"], [(59,)])])
    res = ingest([path], tmp_path / "s", jobs=1)[0]
    assert (res.counts["gpu_ops"], res.counts["host_ops"], res.counts["regions"]) == (2, 1, 0)
    assert [w[:24] for w in res.warnings] == ["dropped 1 NVTX ranges wh"]
