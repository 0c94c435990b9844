"""Nsight Systems SQLite ingest: row counts against the raw export, the DLProf ground truth,
nsys `cuda_gpu_kern_sum` statistics, one test per format quirk, and hand-derived numbers on
`sample_traces/nsys_sample.sqlite`.

Expected values come from a second, independent reading of the source with plain `sqlite3`
SQL and Python (no traceq code), or are derived by hand from `make_nsys_sample.py`.
"""
from __future__ import annotations

import csv
import json
import re
import shutil
import sqlite3
import statistics
from pathlib import Path

import polars as pl
import pytest

from conftest import SAMPLES, SHARED_TRACES, shared_trace
from scoped import hotspots
from traceq.errors import BadInput
from traceq.ingest import ingest
from traceq.ingest.nsys import reader as nsys
from traceq.store import Store, fetch_pl

NSYS_FILES = sorted(p.relative_to(SHARED_TRACES).as_posix()
                    for p in (SHARED_TRACES / "nsys").rglob("*.sqlite")) if (SHARED_TRACES / "nsys").exists() else []
SAMPLE = SAMPLES / "nsys_sample.sqlite"
NVTX_RANGE_TYPES = "(59, 60, 70, 71)"
# What Kineto calls the GPU-side record of each synchronisation API (its `cuda_sync` names).
SYNC_RECORD_OF_API = {"cudaDeviceSynchronize": "Context Sync", "cudaStreamSynchronize": "Stream Sync",
                      "cudaEventSynchronize": "Event Sync", "cudaEventQuery": "Event Sync",
                      "cudaStreamWaitEvent": "Stream Wait Event"}


def raw(path: Path, sql: str, *params) -> list[tuple]:
    """Rows of `sql` on the source export itself (plain sqlite3)."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    con.text_factory = lambda b: b.decode("utf-8", "replace")
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def has_table(path: Path, table: str) -> bool:
    return bool(raw(path, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", table))


def raw_count(path: Path, table: str, where: str = "1") -> int:
    return raw(path, f"SELECT count(*) FROM {table} WHERE {where}")[0][0] if has_table(path, table) else 0


def q(store: Path, sql: str) -> pl.DataFrame:
    return fetch_pl(Store(store).connect(), sql)


def ingested(path: Path, tmp_path: Path) -> Path:
    store = tmp_path / "s"
    assert ingest([path], store=store)[0].status == "added"
    return store


def edited_copy(src: Path, tmp_path: Path, *statements: str, name: str = "edited.sqlite") -> Path:
    """A copy of `src` with SQL `statements` applied (for quirks no real file shows)."""
    dst = tmp_path / name
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    with con:
        for sql in statements:
            con.execute(sql)
    con.close()
    return dst


# ---------------------------------------------------------------------------------------------
# Every real export: row counts, kernel statistics, launch links


@pytest.mark.parametrize("rel", NSYS_FILES)
def test_every_shared_nsys_export_ingests_with_source_row_counts(rel, tmp_path):
    path = shared_trace(rel)
    if not any(raw_count(path, t) for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                                            "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS")):
        # an export that captured nothing (DynamicViT) is refused, not added as an empty run
        with pytest.raises(BadInput, match="no trace events"):
            ingested(path, tmp_path)
        return
    store = ingested(path, tmp_path)
    expected_gpu = {kind: n for kind, n in (
        ("kernel", raw_count(path, "CUPTI_ACTIVITY_KIND_KERNEL")),
        ("memcpy", raw_count(path, "CUPTI_ACTIVITY_KIND_MEMCPY")),
        ("memset", raw_count(path, "CUPTI_ACTIVITY_KIND_MEMSET")),
        ("sync", raw_count(path, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"))) if n}
    got_gpu = dict(q(store, "SELECT kind, count(*) AS n FROM gpu_ops GROUP BY kind").iter_rows())
    assert got_gpu == expected_gpu
    host = dict(q(store, "SELECT kind, count(*) AS n FROM host_ops GROUP BY kind").iter_rows())
    assert sum(host.values()) == raw_count(path, "CUPTI_ACTIVITY_KIND_RUNTIME", "eventClass IN (0, 1)")
    assert set(host) <= {"runtime", "driver", "sync_api"}
    regions = q(store, "SELECT count(*) AS n FROM regions")["n"][0]
    assert regions == raw_count(path, "NVTX_EVENTS", f"eventType IN {NVTX_RANGE_TYPES}")
    run = q(store, "SELECT * FROM runs").row(0, named=True)
    assert run["source_format"] == "nsys"
    assert (run["n_gpu_ops"], run["n_regions"]) == (sum(expected_gpu.values()), regions)
    no_kernels = "no CUDA kernel activity in this export" in json.loads(run["warnings"])
    assert no_kernels == (expected_gpu.get("kernel", 0) == 0)


@pytest.mark.parametrize("rel", NSYS_FILES)
def test_kernel_hotspots_follow_nsys_cuda_gpu_kern_sum(rel, tmp_path):
    """Per demangled name: count, total, avg, median, min, max, sample stddev (0 for one kernel)."""
    path = shared_trace(rel)
    if not raw_count(path, "CUPTI_ACTIVITY_KIND_KERNEL"):
        pytest.skip("no kernels in this export")
    durations: dict[str, list[int]] = {}
    for name, dur in raw(path, "SELECT s.value, k.end - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                               "JOIN StringIds s ON s.id = k.demangledName"):
        durations.setdefault(name, []).append(dur)
    store = ingested(path, tmp_path)
    got = hotspots(Store(store), run=path.stem).filter(pl.col("kind") == "kernel")
    assert sorted(got["name"].to_list()) == sorted(durations)
    for row in got.iter_rows(named=True):
        d = durations[row["name"]]
        assert (row["count"], row["total_ns"], row["min_ns"], row["max_ns"]) == (len(d), sum(d), min(d), max(d))
        assert row["mean_ns"] == pytest.approx(statistics.mean(d))
        assert row["median_ns"] == pytest.approx(statistics.median(d))
        assert row["stddev_ns"] == pytest.approx(statistics.stdev(d) if len(d) > 1 else 0.0)


@pytest.mark.parametrize("rel", NSYS_FILES)
def test_every_kernel_finds_its_launch_call_in_the_same_process(rel, tmp_path):
    path = shared_trace(rel)
    if not raw_count(path, "CUPTI_ACTIVITY_KIND_KERNEL"):
        pytest.skip("no kernels in this export")
    launches = {(gt >> 24 & 0xFFFFFF, corr) for gt, corr in raw(
        path, "SELECT globalTid, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass IN (0, 1)")}
    expected = sum((gp >> 24 & 0xFFFFFF, corr) in launches
                   for gp, corr in raw(path, "SELECT globalPid, correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL"))
    store = ingested(path, tmp_path)
    linked = q(store, "SELECT count(*) AS n, count(DISTINCT h.name) AS apis FROM gpu_ops g "
                      "JOIN host_ops h ON h.pid = g.pid AND h.correlation = g.correlation WHERE g.kind = 'kernel'")
    assert linked["n"][0] == expected == raw_count(path, "CUPTI_ACTIVITY_KIND_KERNEL")
    names = q(store, "SELECT DISTINCT h.name FROM gpu_ops g JOIN host_ops h ON h.pid = g.pid "
                     "AND h.correlation = g.correlation WHERE g.kind = 'kernel'")["name"].to_list()
    assert all(re.fullmatch(r"cu(da)?LaunchKernel(Ex)?|cudaGraphLaunch|cuLaunchKernel(Ex)?", n) for n in names)


@pytest.mark.parametrize("rel", NSYS_FILES)
def test_nvtx_depth_counts_the_enclosing_ranges_on_the_thread(rel, tmp_path):
    path = shared_trace(rel)
    if not raw_count(path, "NVTX_EVENTS", f"eventType IN {NVTX_RANGE_TYPES}"):
        pytest.skip("no NVTX ranges in this export")
    ranges = raw(path, f"SELECT globalTid, start, end FROM NVTX_EVENTS WHERE eventType IN {NVTX_RANGE_TYPES}")
    expected = sorted((gt & 0xFFFFFF, s, e, sum(1 for g2, s2, e2 in ranges
                                                 if g2 == gt and s2 <= s and e2 >= e) - 1)
                      for gt, s, e in ranges)
    got = q(ingested(path, tmp_path), "SELECT tid, start_ns, end_ns, depth FROM regions")
    assert sorted(got.iter_rows()) == expected


# ---------------------------------------------------------------------------------------------
# DLProf ground truth


def test_dlprof_iteration_report_rows_are_kernels_of_the_export(tmp_path):
    """dlprof_iteration.csv was made from this export. Its "GPU Start Time (ns)" is the export's
    own clock (ns since capture start, the `start` column), not epoch and not iteration-relative;
    "Kernel Name" is nsys' shortName, so it is a part of the demangled name; "API Call Start/Time"
    are the launch call's start and duration."""
    path = shared_trace("nsys/DLProf/w_Relu/nsys_profile.sqlite")
    lines = shared_trace("nsys/DLProf/w_Relu/dlprof_iteration.csv").read_text().splitlines()
    assert lines[0] == "Iteration Report"
    rows = list(csv.DictReader(lines[1:]))
    assert len(rows) == 59
    store = ingested(path, tmp_path)
    kernels = q(store, "SELECT g.*, h.start_ns AS api_start, h.end_ns - h.start_ns AS api_dur FROM gpu_ops g "
                       "LEFT JOIN host_ops h ON h.pid = g.pid AND h.correlation = g.correlation "
                       "WHERE g.kind = 'kernel'")
    by_start = {(k["start_ns"], k["end_ns"] - k["start_ns"]): k for k in kernels.iter_rows(named=True)}
    for row in rows:
        k = by_start[(int(row["GPU Start Time (ns)"]), int(row["GPU Duration (ns)"]))]
        assert row["Kernel Name"] in k["name"]
        assert (k["grid_x"], k["grid_y"], k["grid_z"], k["block_x"], k["block_y"], k["block_z"]) == tuple(
            int(row[c]) for c in ("Grid X", "Grid Y", "Grid Z", "Block X", "Block Y", "Block Z"))
        assert (k["api_start"], k["api_dur"]) == (int(row["API Call Start (ns)"]), int(row["API Call Time (ns)"]))
        assert k["device"] == int(row["Device ID"])


# ---------------------------------------------------------------------------------------------
# Format quirks, each on a real file where one shows it


def test_runtime_event_class_67_duplicates_are_dropped(tmp_path):
    """The 2022.2 saxpy export repeats API calls as eventClass 67 (CUDA backtrace) rows with the
    same correlationId and an unsuffixed name."""
    path = shared_trace("nsys/pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite")
    assert raw_count(path, "CUPTI_ACTIVITY_KIND_RUNTIME", "eventClass = 67") == 38
    store = ingested(path, tmp_path)
    host = q(store, "SELECT * FROM host_ops")
    assert host.height == 57 == raw_count(path, "CUPTI_ACTIVITY_KIND_RUNTIME", "eventClass IN (0, 1)")
    assert host.select("pid", "correlation").is_duplicated().sum() == 0
    assert q(store, "SELECT count(*) AS n FROM host_ops WHERE kind = 'driver'")["n"][0] == 1   # cuModuleGetLoadingMode


def test_api_version_suffixes_are_stripped(tmp_path):
    path = shared_trace("nsys/llama3-inference/demo.sqlite")
    raw_names = {re.sub(r"_v\d+$", "", n) for (n,) in raw(
        path, "SELECT s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
              "WHERE r.eventClass IN (0, 1)")}
    names = set(q(ingested(path, tmp_path), "SELECT DISTINCT name FROM host_ops")["name"])
    assert names == raw_names
    assert {"cudaLaunchKernel", "cudaDeviceSynchronize", "cuGetProcAddress"} <= names
    assert not any(re.search(r"_v\d{4,}$", n) for n in names)


def test_only_the_last_version_suffix_is_stripped(tmp_path):
    """`cudaGetDeviceProperties_v2` is the real API name; nsys records it as ..._v2_v12000."""
    names = q(ingested(SAMPLE, tmp_path), "SELECT DISTINCT name FROM host_ops")["name"].to_list()
    assert "cudaGetDeviceProperties_v2" in names


def test_schema_2_memcpy_labels_equal_the_schema_3_enum_tables(tmp_path):
    """2.x exports have no ENUM_* tables; the built-in labels must be what 3.x exports ship."""
    if not NSYS_FILES:
        pytest.skip("../shared/traces/nsys not available")
    three = [shared_trace(r) for r in NSYS_FILES if has_table(SHARED_TRACES / r, "ENUM_CUDA_MEMCPY_OPER")]
    assert three
    for path in three:
        assert dict(raw(path, "SELECT id, label FROM ENUM_CUDA_MEMCPY_OPER")) == nsys.MEMCPY_LABELS
        assert dict(raw(path, "SELECT id, label FROM ENUM_CUDA_MEM_KIND")) == nsys.MEM_KIND_LABELS
        assert dict(raw(path, "SELECT id, label FROM ENUM_CUPTI_SYNC_TYPE")) == nsys.SYNC_LABELS


@pytest.mark.parametrize("rel", [
    "nsys/DLProf/w_Relu/nsys_profile.sqlite",      # 2.9.1, no ENUM tables
    "nsys/Mordred-Deprecated/report1.sqlite",      # legacy, no meta table
    "nsys/llama3-inference/demo.sqlite",           # 3.16.1 with ENUM tables
])
def test_memcpy_names_and_memory_kinds_use_the_enum_labels(rel, tmp_path):
    path = shared_trace(rel)
    reference = shared_trace("nsys/llama3-inference/demo.sqlite")   # a 3.x export's ENUM tables
    oper = dict(raw(reference, "SELECT id, label FROM ENUM_CUDA_MEMCPY_OPER"))
    kind = dict(raw(reference, "SELECT id, label FROM ENUM_CUDA_MEM_KIND"))
    short = {1: "HtoD", 2: "DtoH", 8: "DtoD", 10: "PtoP"}
    expected = sorted((s, f"[CUDA memcpy {oper[c]}]", short[c], kind[a], kind[b], n) for s, c, a, b, n in raw(
        path, "SELECT start, copyKind, srcKind, dstKind, bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY"))
    got = q(ingested(path, tmp_path), "SELECT start_ns, name, copy_kind, src_kind, dst_kind, bytes FROM gpu_ops "
                                      "WHERE kind = 'memcpy'")
    assert sorted(got.iter_rows()) == expected
    assert {"Pageable", "Device"} <= {r[3] for r in expected} | {r[4] for r in expected}


def test_process_and_thread_ids_are_decoded_from_global_ids(tmp_path):
    path = shared_trace("nsys/llama3-inference/demo.sqlite")
    processes = dict(raw(path, "SELECT globalPid, pid FROM PROCESSES"))
    expected_pids = {processes[gp] for (gp,) in raw(path, "SELECT DISTINCT globalPid FROM CUPTI_ACTIVITY_KIND_KERNEL")}
    expected_threads = {(gt // 0x1000000 % 0x1000000, gt % 0x1000000) for (gt,) in raw(
        path, "SELECT DISTINCT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass IN (0, 1)")}
    store = ingested(path, tmp_path)
    assert set(q(store, "SELECT DISTINCT pid FROM gpu_ops")["pid"]) == expected_pids == {2423137}
    assert set(q(store, "SELECT DISTINCT pid, tid FROM host_ops").iter_rows()) == expected_threads
    assert set(q(store, "SELECT DISTINCT pid FROM regions")["pid"]) == expected_pids


def test_nvtx_domain_names_come_from_domain_create_events(tmp_path):
    """saxpy: MPI_* ranges are in domain 1, created as "MPI" (eventType 75); saxpy ranges are in
    the default domain. MPI names are registered strings (textId), saxpy plain text."""
    path = shared_trace("nsys/pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite")
    got = q(ingested(path, tmp_path), "SELECT name, domain, count(*) AS n FROM regions GROUP BY ALL ORDER BY name")
    assert got.rows() == [("MPI_Finalize", "MPI", 1), ("MPI_Init", "MPI", 1), ("MPI_Recv", "MPI", 5),
                          ("MPI_Send", "MPI", 10), ("saxpy", None, 5)]


def test_sync_records_are_named_after_the_api_that_waited(tmp_path):
    """syncType numbers disagree with ENUM_CUPTI_SYNC_TYPE across versions (cudaDeviceSynchronize is
    syncType 1 in 2.9 and 3.13, 0 in 3.16), so records are named like Kineto's `cuda_sync` events."""
    path = shared_trace("nsys/DLProf/w_Relu/nsys_profile.sqlite")
    api_of = {}
    for corr, name in raw(path, "SELECT r.correlationId, s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
                                "JOIN StringIds s ON s.id = r.nameId WHERE r.eventClass IN (0, 1)"):
        api_of[corr] = re.sub(r"_v\d+$", "", name)
    expected = sorted((s, SYNC_RECORD_OF_API[api_of[c]]) for s, c in raw(
        path, "SELECT start, correlationId FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"))
    store = ingested(path, tmp_path)
    assert sorted(q(store, "SELECT start_ns, name FROM gpu_ops WHERE kind = 'sync'").iter_rows()) == expected
    no_stream = q(store, "SELECT name, count(*) AS n FROM gpu_ops WHERE kind = 'sync' AND stream = -1 GROUP BY name "
                         "ORDER BY name")   # streamId 4294967295 in the export, -1 as in Kineto
    assert no_stream.rows() == [("Context Sync", 2), ("Event Sync", 16)]
    sync_apis = q(store, "SELECT name, count(*) AS n FROM host_ops WHERE kind = 'sync_api' GROUP BY name ORDER BY name")
    assert sync_apis.rows() == [("cudaDeviceSynchronize", 2), ("cudaEventSynchronize", 15),
                                ("cudaStreamSynchronize", 11), ("cudaStreamWaitEvent", 40)]


def test_run_facts_per_schema_generation(tmp_path):
    cases = {   # file -> (format_version, host, clock_offset_ns)
        "nsys/pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite": ("2.9.1", True, 1687813257637297504),
        "nsys/pipit/perlmutter-cloverleaf-cuda.sqlite": ("3.13.2", True, 1696392839587175550),
        "nsys/Mordred-Deprecated/report1.sqlite": (None, False, 0),
    }
    for i, (rel, (version, has_host, offset)) in enumerate(cases.items()):
        path = shared_trace(rel)
        store = tmp_path / f"s{i}"
        ingest([path], store=store)
        run = q(store, "SELECT * FROM runs").row(0, named=True)
        assert (run["format_version"], run["host"] is not None, run["clock_offset_ns"]) == (version, has_host, offset)
        gpus = raw(path, "SELECT DISTINCT id, name, smCount, totalMemory FROM TARGET_INFO_GPU ORDER BY id")
        # the device properties besides these: test_launch_facts
        base = ("id", "name", "sm_count", "memory_bytes")
        assert [{k: d[k] for k in base} for d in json.loads(run["devices"])] == \
            [{"id": i, "name": n, "sm_count": sm, "memory_bytes": m} for i, n, sm, m in gpus]


def test_rank_comes_from_the_rank_variables_of_the_capture_environment(tmp_path):
    """nvFuser's environment has SLURM_PROCID=0 and RANK=0; nothing of the block is stored."""
    path = shared_trace("nsys/nvFuser/report1_matmul_h100.sqlite")
    store = ingested(path, tmp_path)
    run = q(store, "SELECT * FROM runs").row(0, named=True)
    assert run["rank"] == 0
    stored = json.dumps({k: str(v) for k, v in run.items()})
    assert "SLURM" not in stored and "PATH=" not in stored


def test_rank_precedence_mpi_ranks_then_environment_in_design_order(tmp_path):
    env = "HOME=/home/x;LOCAL_RANK=9;RANK=7;OMPI_COMM_WORLD_RANK=5;SHELL=/bin/sh"
    edit = f"UPDATE TARGET_INFO_SYSTEM_ENV SET value = '{env}' WHERE name = 'DeviceEnvironment'"
    from_env = edited_copy(SAMPLE, tmp_path, edit, name="env.sqlite")
    assert nsys.read(from_env).rank == 5           # OMPI_COMM_WORLD_RANK before RANK; LOCAL_RANK ignored
    from_mpi = edited_copy(SAMPLE, tmp_path, edit, "CREATE TABLE MPI_RANKS (globalTid INTEGER, rank INTEGER)",
                           "INSERT INTO MPI_RANKS VALUES (72057594037927936, 3)", name="mpi.sqlite")
    assert nsys.read(from_mpi).rank == 3
    store = ingested(from_env, tmp_path)
    stored = json.dumps(q(store, "SELECT * FROM runs").row(0, named=True), default=str)
    assert "HOME=" not in stored and "/bin/sh" not in stored


def test_export_that_captured_nothing_is_refused():
    path = shared_trace("nsys/DynamicViT/nsys_profile.sqlite")   # only StringIds and TARGET_INFO_*
    with pytest.raises(BadInput, match=r"no trace events \(no CUDA kernels, copies, runtime calls or NVTX ranges\)"):
        nsys.read(path)


@pytest.mark.parametrize("rel", ["nsys/WeatherBench2/report1.sqlite"])
def test_exports_without_cuda_kernels_ingest_with_a_warning(rel, tmp_path):
    path = shared_trace(rel)
    parsed = nsys.read(path)
    assert pl.from_arrow(parsed.tables["gpu_ops"]).filter(pl.col("kind") == "kernel").height == 0
    assert parsed.warnings == ["no CUDA kernel activity in this export"]
    assert parsed.devices and parsed.devices[0]["name"].startswith("NVIDIA")


def test_invalid_utf8_in_strings_is_replaced_not_fatal(tmp_path):
    bad = edited_copy(
        SAMPLE, tmp_path,
        "UPDATE StringIds SET value = CAST(X'616d706572655fff5f6b65726e656c' AS TEXT) "
        "WHERE value = 'ampere_sgemm_128x64_nn'",
        "UPDATE NVTX_EVENTS SET text = CAST(X'666f7277617264c328' AS TEXT) WHERE text = 'forward'")
    store = ingested(bad, tmp_path)
    kernels = set(q(store, "SELECT DISTINCT name FROM gpu_ops WHERE kind = 'kernel'")["name"])
    assert "ampere_\ufffd_kernel" in kernels
    assert "forward\ufffd(" in set(q(store, "SELECT DISTINCT name FROM regions")["name"])


def test_sqlite_file_without_nsys_tables_is_bad_input(tmp_path):
    other = tmp_path / "other.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    con.commit()
    con.close()
    with pytest.raises(BadInput) as err:
        ingest([other], store=tmp_path / "s")
    assert err.value.problem == "SQLite file is not an Nsight Systems export (no nsys tables)"
    assert not Store(tmp_path / "s").exists()


def test_corrupt_sqlite_file_is_bad_input_in_one_line(tmp_path):
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(SAMPLE.read_bytes()[:100] + b"\x07" * 8000)
    with pytest.raises(BadInput) as err:
        ingest([corrupt], store=tmp_path / "s")
    assert "\n" not in str(err.value) and "corrupt.sqlite" in str(err.value)
    assert not Store(tmp_path / "s").exists()


def test_missing_tables_and_columns_mean_no_rows_and_nulls(tmp_path):
    """Tables are created lazily and columns come and go between schema versions."""
    thin = edited_copy(
        SAMPLE, tmp_path,
        "DROP TABLE CUPTI_ACTIVITY_KIND_MEMSET", "DROP TABLE ENUM_CUDA_MEMCPY_OPER", "DROP TABLE ENUM_CUDA_MEM_KIND",
        "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN registersPerThread",
        "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN demangledName",
        "ALTER TABLE CUPTI_ACTIVITY_KIND_MEMCPY DROP COLUMN srcKind",
        "ALTER TABLE NVTX_EVENTS DROP COLUMN domainId")
    store = ingested(thin, tmp_path)
    kinds = dict(q(store, "SELECT kind, count(*) AS n FROM gpu_ops GROUP BY kind").iter_rows())
    assert kinds == {"kernel": 24, "memcpy": 9, "sync": 3}
    kernels = q(store, "SELECT DISTINCT name, registers FROM gpu_ops WHERE kind = 'kernel'")
    assert "nchwToNhwcKernel" in kernels["name"].to_list()       # shortName when demangledName is gone
    assert kernels["registers"].null_count() == kernels.height
    copies = q(store, "SELECT DISTINCT name, src_kind, dst_kind FROM gpu_ops WHERE kind = 'memcpy' ORDER BY name")
    assert copies.rows() == [("[CUDA memcpy Device-to-Host]", None, "Pageable"),
                             ("[CUDA memcpy Host-to-Device]", None, "Device")]
    assert q(store, "SELECT count(*) AS n FROM regions WHERE domain IS NOT NULL")["n"][0] == 0


def test_open_and_cross_thread_nvtx_ranges_are_kept_and_flagged(tmp_path):
    """An open range (end NULL) ends at the last timestamp of the capture; a range ending on another
    thread stays with the thread that opened it."""
    edited = edited_copy(
        SAMPLE, tmp_path,
        "UPDATE NVTX_EVENTS SET end = NULL WHERE text = 'epoch'",
        "UPDATE NVTX_EVENTS SET endGlobalTid = globalTid + 8 WHERE text = 'forward'")
    last = max(raw(edited, "SELECT max(end) FROM CUPTI_ACTIVITY_KIND_RUNTIME")[0][0],
               raw(edited, "SELECT max(coalesce(end, start)) FROM NVTX_EVENTS")[0][0])
    parsed = nsys.read(edited)
    regions = pl.from_arrow(parsed.tables["regions"])
    epoch = regions.filter(pl.col("name") == "epoch").row(0, named=True)
    assert (epoch["end_ns"], epoch["unfinished"], epoch["depth"]) == (last, True, 0)
    assert regions.filter(pl.col("unfinished"))["name"].to_list() == ["epoch"]
    assert set(regions.filter(pl.col("name") == "forward")["tid"]) == {4242}
    assert any(w.startswith("3 NVTX ranges end on another thread") for w in parsed.warnings)


# ---------------------------------------------------------------------------------------------
# The sample export: numbers derived by hand from DURATIONS_NS in make_nsys_sample.py


def test_sample_is_what_the_generator_writes(tmp_path):
    from importlib.util import module_from_spec, spec_from_file_location

    spec = spec_from_file_location("make_nsys_sample", SAMPLES / "make_nsys_sample.py")
    gen = module_from_spec(spec)
    spec.loader.exec_module(gen)
    gen.write(tmp_path / "again.sqlite")
    con_a, con_b = sqlite3.connect(SAMPLE), sqlite3.connect(tmp_path / "again.sqlite")
    tables = [t for (t,) in con_a.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    for t in tables:
        assert con_a.execute(f"SELECT * FROM {t}").fetchall() == con_b.execute(f"SELECT * FROM {t}").fetchall()
    assert SAMPLE.stat().st_size < 200_000


# name -> (category, count, total, mean, median, min, max, sample stddev), all ns.
SAMPLE_HOTSPOTS = {
    # 390k, 400k, 410k pageable + 150k, 160k, 170k pinned: mean = median = (170k + 390k) / 2 = 280k;
    # deviations ±110k, ±120k, ±130k -> stddev = sqrt(2 * (110² + 120² + 130²) / 5) k = sqrt(17_360) k
    "[CUDA memcpy Host-to-Device]": ("memcpy", 6, 1_680_000, 280_000, 280_000, 150_000, 410_000, 131_757.3528),
    # 40k, 50k, 60k: mean = median = 50k, stddev = sqrt((10k² + 10k²) / 2) = 10k
    "void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, false, true>(int, int, "
                 "int, const float *, int, float *, const float *, kernel_conv_params, unsigned long long, int, float, "
                 "float, int, const float *, const float *, bool, int, int)": ("conv", 3, 150_000, 50_000, 50_000,
                                                                            40_000, 60_000, 10_000),
    "ampere_sgemm_128x64_nn": ("gemm", 3, 93_000, 31_000, 31_000, 30_000, 32_000, 1_000),   # 30k, 31k, 32k
    # 8k, 2k (step 0), 6k, 4k (step 1), 5k, 5k (step 2): deviations 3, -3, 1, -1, 0, 0 k -> sqrt(20 / 5) k = 2k
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char *, "
    "3>>(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char *, 3>)": ("elementwise", 6, 30_000, 5_000,
                                                                                   5_000, 2_000, 8_000, 2_000),
    "void at::native::<unnamed>::multi_tensor_apply_kernel<at::native::<unnamed>::TensorListMetadata<4>, "
    "at::native::<unnamed>::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double *, double, "
    "double, double, double, double, bool, float *, float *>(T1, T2, T3...)": ("optimizer", 3, 63_000, 21_000, 21_000,
                                                                              20_000, 22_000, 1_000),
    "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>("
    "cudnn::ops::nchw2nhwc_params_t<float>, const float *, float *)": ("transpose", 3, 42_000, 14_000, 14_000, 12_000,
                                                                       16_000, 2_000),   # 12k, 14k, 16k
    "void cudnn::ops::nhwcToNchwKernel<float, float, float, true, false, (cudnnKernelDataType_t)0>("
    "cudnn::ops::nhwc2nchw_params_t<float>, const float *, float *)": ("transpose", 3, 27_000, 9_000, 9_000, 8_000,
                                                                       10_000, 1_000),   # 8k, 9k, 10k
    "[CUDA memcpy Device-to-Host]": ("memcpy", 3, 6_000, 2_000, 2_000, 1_800, 2_200, 200),   # 1.8k, 2k, 2.2k
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char *, 1>>("
    "int, at::native::FillFunctor<float>, at::detail::Array<char *, 1>)": ("memset", 3, 6_000, 2_000, 2_000, 1_500,
                                                                           2_500, 500),   # 1.5k, 2k, 2.5k
    "[CUDA memset]": ("memset", 3, 3_600, 1_200, 1_200, 1_000, 1_400, 200),   # 1k, 1.2k, 1.4k
}
# All op time: kernels 42k + 150k + 27k + 93k + 30k + 6k + 63k = 411k, copies 1_686k, memsets 3.6k
SAMPLE_GPU_TOTAL_NS = 2_100_600


def test_sample_hotspots_match_the_hand_derived_numbers(tmp_path):
    store = ingested(SAMPLE, tmp_path)
    got = hotspots(Store(store), run="nsys_sample")
    assert sorted(got["name"]) == sorted(SAMPLE_HOTSPOTS)
    for row in got.iter_rows(named=True):
        category, count, total, mean, median, lo, hi, sd = SAMPLE_HOTSPOTS[row["name"]]
        assert (row["category"], row["count"], row["total_ns"], row["min_ns"], row["max_ns"]) == (
            category, count, total, lo, hi)
        assert (row["mean_ns"], row["median_ns"]) == (mean, median)
        assert row["stddev_ns"] == pytest.approx(sd)
        assert row["pct"] == pytest.approx(100 * total / SAMPLE_GPU_TOTAL_NS)
    assert got.row(0, named=True)["name"] == "[CUDA memcpy Host-to-Device]"   # 1_680_000 / 2_100_600 = 80.0 %


def test_sample_host_ops_regions_and_run_facts(tmp_path):
    store = ingested(SAMPLE, tmp_path)
    host = q(store, "SELECT kind, name, count(*) AS n FROM host_ops GROUP BY ALL ORDER BY name")
    assert host.rows() == [                 # 8 kernels per step x 3 steps; 2 async copies + 1 blocking per step
        ("driver", "cuModuleGetLoadingMode", 1), ("runtime", "cudaGetDeviceProperties_v2", 1),
        ("runtime", "cudaLaunchKernel", 24), ("runtime", "cudaMemcpy", 3), ("runtime", "cudaMemcpyAsync", 6),
        ("runtime", "cudaMemsetAsync", 3), ("sync_api", "cudaStreamSynchronize", 3)]
    regions = q(store, "SELECT name, domain, tid, depth, count(*) AS n FROM regions GROUP BY ALL ORDER BY depth, name")
    assert regions.rows() == [
        ("epoch", None, 4242, 0, 1), ("prefetch", None, 4250, 0, 3), ("step", None, 4242, 1, 3),
        ("backward", None, 4242, 2, 3), ("forward", None, 4242, 2, 3), ("load_batch", "sample.io", 4242, 2, 3),
        ("optimizer", None, 4242, 2, 3)]
    assert q(store, "SELECT DISTINCT name FROM gpu_ops WHERE kind = 'sync'")["name"].to_list() == ["Stream Sync"]
    pageable = q(store, "SELECT src_kind, count(*) AS n FROM gpu_ops WHERE copy_kind = 'HtoD' GROUP BY ALL ORDER BY 1")
    assert pageable.rows() == [("Pageable", 3), ("Pinned", 3)]
    run = q(store, "SELECT * FROM runs").row(0, named=True)
    assert (run["format_version"], run["rank"], run["host"], run["clock_offset_ns"]) == (
        "3.16.1", 0, "sample-host", 1_700_000_000_000_000_000)
    assert json.loads(run["devices"]) == [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", "sm_count": 108,
                                           "memory_bytes": 85_899_345_920}]
