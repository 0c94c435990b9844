"""Hostile Kineto traces (issue 36 items 1, 5, 6, 9): one bad token, invalid UTF-8, deep
nesting and special files.

A damaged event must not cost the rest of the trace. Each repaired trace is compared with a
reference written by hand the way the repair reads it (`NaN` -> `null`, `Infinity` ->
`1e999`, a raw TAB -> `\\t`, a trailing comma removed, an invalid byte -> U+FFFD), and a
skipped event with the same trace without that event: the tables must be equal.
"""
from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, shared_trace
from traceq.errors import BadInput
from traceq.ingest.kineto import reader as kineto
from traceq.ingest.kineto import windows as kineto_windows
from traceq.schema import TRUNCATED_WARNING

N = 40   # launch + kernel pairs; the damaged one is kernel "k20", mid-file


def events() -> list[dict]:
    out = []
    for i in range(N):
        out.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                    "ts": 1000 + 100 * i, "dur": 3, "args": {"correlation": i}})
        out.append({"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": 1010 + 100 * i,
                    "dur": 50, "args": {"correlation": i, "device": 0, "stream": 7,
                                        "est. achieved occupancy %": 25}})
    return out


def text() -> bytes:
    return json.dumps({"traceEvents": events(), "distributedInfo": {"rank": 0}}).encode()


K20 = b'"name": "k20", "pid": 0, "tid": 7, "ts": 3010, "dur": 50'
OCC20 = b'"correlation": 20, "device": 0, "stream": 7, "est. achieved occupancy %": 25}'


def damaged(old: bytes, new: bytes) -> bytes:
    t = text()
    assert t.count(old) == 1
    return t.replace(old, new)


def tables(tmp_path: Path, data: bytes, name: str = "t.json") -> tuple[dict, list[str]]:
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    parsed = kineto.read(path)
    return parsed.tables, parsed.warnings


def same(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for name in a:
        assert a[name].equals(b[name]), name


@pytest.fixture(params=["whole", "windows"])
def windowed(request, monkeypatch):
    """Decoded in one window, or in windows of 1 KB (the damage lies mid-file, in the middle
    of a window; the walk past it ends at a window boundary)."""
    if request.param == "windows":
        monkeypatch.setattr(kineto_windows, "WINDOW", 1024)


# (damage, reference written by hand, the warning)
REPAIRS = {
    "NaN": (K20.replace(b'"dur": 50', b'"dur": NaN'), K20.replace(b'"dur": 50', b'"dur": null'),
            "repaired 1 non-finite number"),
    "nan in an arg": (OCC20.replace(b"25}", b"nan}"), OCC20.replace(b"25}", b"null}"), "repaired 1 non-finite number"),
    "Infinity": (OCC20.replace(b"25}", b"Infinity}"), OCC20.replace(b"25}", b"1e999}"), "repaired 1 non-finite number"),
    "-Infinity": (K20.replace(b'"dur": 50', b'"dur": -Infinity'), K20.replace(b'"dur": 50', b'"dur": -1e999'),
                  "repaired 1 non-finite number"),
    "bare inf": (K20.replace(b'"dur": 50', b'"dur": inf'), K20.replace(b'"dur": 50', b'"dur": 1e999'),
                 "repaired 1 non-finite number"),
    "raw TAB in a string": (K20.replace(b'"k20"', b'"k\t20"'), K20.replace(b'"k20"', b'"k\\t20"'),
                            "repaired 1 control character in a string"),
    "raw newline and ESC in a string": (K20.replace(b'"k20"', b'"k\n2\x1b0"'), K20.replace(b'"k20"', b'"k\\n2\\u001b0"'),
                                        "repaired 2 control characters in a string"),
    "trailing comma in args": (OCC20.replace(b"25}", b"25,}"), OCC20, "repaired 1 trailing comma"),
    "trailing comma in an event": (K20, K20, "repaired 1 trailing comma"),   # see test below
    "invalid UTF-8": (K20.replace(b'"k20"', b'"k20\xff"'), K20.replace(b'"k20"', '"k20\ufffd"'.encode()),
                      "replaced invalid UTF-8 by U+FFFD in 1 event"),
}


@pytest.mark.parametrize("case", list(REPAIRS))
def test_a_repairable_token_is_repaired_and_every_other_event_kept(case, windowed, tmp_path):
    bad, good, warning = REPAIRS[case]
    anchor = K20 if bad.startswith(b'"name"') else OCC20
    if case == "trailing comma in an event":   # `..."stream": 7, ...: 25},}` ends kernel k20's object
        anchor, bad, good = OCC20 + b"}", OCC20 + b",}", OCC20 + b"}"
    got, warnings = tables(tmp_path, damaged(anchor, bad))
    ref, ref_warnings = tables(tmp_path, damaged(anchor, good), "ref.json")
    same(got, ref)
    assert warnings == [warning] + ref_warnings
    names = got["gpu_ops"].column("name").to_pylist()
    infinite = "Infinity" in case or "inf" in case
    assert len(names) == N - (infinite and b'"dur"' in bad)   # an infinite duration is dropped, as 1e999 is


def test_a_trailing_comma_at_the_end_of_the_event_list_is_repaired(tmp_path):
    t = text()
    got, warnings = tables(tmp_path, t.replace(b"}}], ", b"}},], "))
    same(got, tables(tmp_path, t, "ref.json")[0])
    assert warnings == ["repaired 1 trailing comma"]


@pytest.mark.parametrize("bad", [b'"dur": 5.0.1', b'"dur": NaNa', b'"dur" 50', b'"dur": 50 "x": 1', b'"dur": tru'])
def test_an_event_that_cannot_be_repaired_is_skipped_named_and_the_rest_kept(bad, windowed, tmp_path):
    t = damaged(K20, K20.replace(b'"dur": 50', bad))
    got, warnings = tables(tmp_path, t)
    reference = [e for e in events() if e["name"] != "k20"]
    same(got, tables(tmp_path, json.dumps({"traceEvents": reference, "distributedInfo": {"rank": 0}}).encode(),
                     "ref.json")[0])
    damage = t.index(bad) + len(b'"dur"')
    assert len(warnings) == 1 and warnings[0].startswith("skipped 1 malformed event (at byte ")
    at = int(warnings[0].split("at byte ")[1].split(":")[0].replace(",", ""))
    assert damage <= at < damage + len(bad)   # the byte of the damage


def test_damage_in_many_events_is_counted_and_the_first_skip_named(windowed, tmp_path):
    t = text()
    for i in (3, 17, 30):   # three kernels with an unrepairable duration, two with NaN
        t = t.replace(f'"name": "k{i}", "pid": 0, "tid": 7, "ts": {1010 + 100 * i}, "dur": 50'.encode(),
                      f'"name": "k{i}", "pid": 0, "tid": 7, "ts": {1010 + 100 * i}, "dur": 5x'.encode())
    for i in (5, 6):
        t = t.replace(f'"ts": {1010 + 100 * i}, "dur": 50'.encode(), f'"ts": {1010 + 100 * i}, "dur": NaN'.encode())
    got, warnings = tables(tmp_path, t)
    assert sorted(got["gpu_ops"].column("name").to_pylist()) == sorted(f"k{i}" for i in range(N) if i not in (3, 17, 30))
    assert warnings[0].startswith("skipped 3 malformed events (first at byte ")
    assert warnings[0].endswith("; repaired 2 non-finite numbers")


def test_a_truncated_file_is_still_reported_as_truncated_with_the_damage_before_it(windowed, tmp_path):
    t = damaged(K20, K20.replace(b'"dur": 50', b'"dur": NaN'))
    cut = t[:t.index(b'"name": "k30"')]   # the writer was killed inside kernel k30
    got, warnings = tables(tmp_path, cut)
    complete = 2 * 30 + 1   # 30 launch + kernel pairs and the launch of k30
    assert warnings == ["repaired 1 non-finite number",
                        f"{TRUNCATED_WARNING} {complete} complete events; ingested those (was the writer killed?)"]
    assert got["gpu_ops"].column("name").to_pylist() == [f"k{i}" for i in range(30)]


def test_invalid_utf8_in_a_gz_trace_is_replaced(tmp_path):
    got, warnings = tables(tmp_path, damaged(K20, K20.replace(b'"k20"', b'"k\xc3\x2820"')), "t.json.gz")
    assert "k\ufffd(20" in got["gpu_ops"].column("name").to_pylist()
    assert warnings == ["replaced invalid UTF-8 by U+FFFD in 1 event"]


def test_invalid_utf8_in_the_metadata_is_replaced(tmp_path):
    t = text().replace(b'"distributedInfo": {"rank": 0}', b'"distributedInfo": {"rank": 0}, "hostname": "n\xff1"')
    parsed_tables, warnings = tables(tmp_path, t)
    assert parsed_tables["gpu_ops"].num_rows == N
    assert warnings == ["replaced invalid UTF-8 by U+FFFD in the trace's metadata"]


# ------------------------------------------------------------------ nesting (item 6)
DEEP = b"[" * 100_000 + b"]" * 100_000


def test_an_event_nested_100k_levels_deep_is_skipped(windowed, tmp_path):
    got, warnings = tables(tmp_path, damaged(K20, K20 + b', "x": ' + DEEP))
    assert sorted(got["gpu_ops"].column("name").to_pylist()) == sorted(f"k{i}" for i in range(N) if i != 20)
    assert len(warnings) == 1 and warnings[0].startswith("skipped 1 malformed event (at byte ")
    assert warnings[0].endswith(": nested deeper than 256 levels)")


def test_an_event_nested_200_levels_deep_is_kept(tmp_path):
    got, _ = tables(tmp_path, damaged(K20, K20 + b', "x": ' + b"[" * 200 + b"]" * 200))
    assert got["gpu_ops"].num_rows == N


@pytest.mark.parametrize("damage", [b', "x": ' + b"[" * 30_000, b', "x": [1', b', "x": {"y": 1', b', "x": "abc'])
def test_an_event_left_open_mid_file_is_skipped_and_the_events_after_it_kept(damage, windowed, tmp_path):
    got, warnings = tables(tmp_path, damaged(K20, K20 + damage))
    assert sorted(got["gpu_ops"].column("name").to_pylist()) == sorted(f"k{i}" for i in range(N) if i != 20)
    start = text().index(b'{"ph": "X", "cat": "kernel", "name": "k20"')
    assert warnings == [f"skipped 1 malformed event (at byte {start:,}: brackets or quotes left open)"]


def test_a_file_cut_inside_a_deep_event_is_truncated(tmp_path):
    t = damaged(K20, K20 + b', "x": ' + b"[" * 30_000)
    got, warnings = tables(tmp_path, t[:t.index(b"[" * 30_000) + 30_000])   # the writer was killed there
    assert got["gpu_ops"].column("name").to_pylist() == [f"k{i}" for i in range(20)]
    assert warnings == [f"{TRUNCATED_WARNING} 41 complete events; ingested those (was the writer killed?)"]


@pytest.mark.parametrize("doc, problem", [
    (DEEP, "no usable trace events: skipped 1 malformed event (at byte 1: nested deeper than 256 levels)"),
    (b'{"traceEvents":[' + b"[" * 30_000, "no complete event found"),
    (b'{"x": ' + DEEP + b', "traceEvents": []}', "nested too deep"),
    (b'{"traceEvents": [{"ph": "X"}], "x": ' + DEEP + b"}", "metadata is nested deeper than 256 levels"),
    (b'{"x": ' + b"[" * 30_000, "nested too deep"),
])
def test_a_document_nested_too_deep_is_refused_in_one_line(doc, problem, tmp_path):
    path = tmp_path / "deep.json"
    path.write_bytes(doc)
    with pytest.raises(BadInput) as err:
        kineto.read(path)
    assert problem in str(err.value) and "\n" not in str(err.value)


def traceq(*args, timeout=60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "traceq", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, env=dict(os.environ, TRACEQ_DEBUG="0"), timeout=timeout)


def test_cli_warning_names_the_file_and_the_damage(tmp_path):
    path = tmp_path / "trace.json"
    path.write_bytes(damaged(K20, K20.replace(b'"dur": 50', b'"dur": 5x').replace(b'"k20"', b'"k\t20"')
                             + b', "y": NaN'))
    res = traceq("ingest", path, "--store", tmp_path / "store", "-q")
    assert res.returncode == 0 and "Traceback" not in res.stderr
    at = path.read_bytes().index(b"5x") + 1   # the TAB and NaN repaired, the `x` is what is left
    assert res.stderr.strip() == f"traceq: warning: {path}: skipped 1 malformed event (at byte {at:,}: " \
                                 "expected ',' or '}', found 'x')"


# ------------------------------------------------------------------ special files (item 9)
@pytest.mark.parametrize("fmt", ["auto", "kineto", "nsys", "timer", "deep500"])
def test_a_fifo_is_refused_in_one_line_instead_of_hanging(fmt, tmp_path):
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    res = traceq("ingest", fifo, "--store", tmp_path / "store", "--input-format", fmt, timeout=30)
    assert res.returncode == 2
    assert res.stderr.strip() == f"traceq: {fifo}: not a regular file or directory (a FIFO); traceq reads trace files only"
    assert not (tmp_path / "store").exists()


def test_a_socket_and_a_device_are_refused(tmp_path):
    from traceq.ingest import expand

    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(tmp_path / "s.json"))
        with pytest.raises(BadInput, match=r"s\.json: not a regular file or directory \(a socket\)"):
            expand([tmp_path / "s.json"])
    finally:
        sock.close()
    with pytest.raises(BadInput, match=r"not a regular file or directory \(a character device\)"):
        expand(["/dev/null"])


# ------------------------------------------------------------------ a real trace
REAL = "kineto/hta/nccl_parser_config/nccl_data.json.gz"   # 9.8 MB of JSON: the parallel decoder's size


@pytest.mark.parametrize("token, lost", [(b"NaN", 0), (b"Infinity", 1), (b"inf", 1), (b"1.2.3", 1)])
def test_a_bad_token_in_a_kernel_of_a_real_trace_costs_at_most_that_kernel(token, lost, tmp_path):
    t = gzip.decompress(shared_trace(REAL).read_bytes())
    clean, _ = tables(tmp_path, t, "clean.json")
    kernel = t.index(b'"cat": "kernel"', len(t) // 2)
    dur = t.index(b'"dur": ', kernel) + 7
    got, warnings = tables(tmp_path, t[:dur] + token + t[t.index(b",", dur):])
    assert clean["gpu_ops"].num_rows == 3774   # catalog: 2,700 kernels, 960 copies, 114 memsets
    assert got["gpu_ops"].num_rows == clean["gpu_ops"].num_rows - lost
    assert clean["host_ops"].num_rows == got["host_ops"].num_rows
    assert warnings[0] == ("repaired 1 non-finite number" if token != b"1.2.3"
                           else f"skipped 1 malformed event (at byte {dur + 3:,}: expected ',' or '}}', found '.3')")


@pytest.mark.parametrize("token", [b"-Infinity", b"Infinity", b"NaN", b'"nan"', b"-inf"])
def test_a_non_finite_launch_fact_is_unknown_and_every_analysis_reads_the_run(tmp_path, token):
    """Found by benchmarks/fuzz_long.py: an occupancy of `-Infinity` (repaired to -inf) was stored
    as -inf and hotspots/overview failed casting it to DECIMAL. A launch fact that is not a finite
    number is unknown: null, the kernel kept, and every analysis reads the run."""
    data = damaged(OCC20, OCC20.replace(b": 25}", b": " + token + b"}"))
    got, _ = tables(tmp_path, data)
    ops = got["gpu_ops"].to_pylist()
    k20 = [op for op in ops if op["name"] == "k20"]
    assert len(ops) == N and len(k20) == 1
    assert k20[0]["est_occupancy_pct"] is None
    assert sorted({op["est_occupancy_pct"] for op in ops if op["name"] != "k20"}) == [25.0]
    path = tmp_path / "t.json"
    path.write_bytes(data)
    run = [sys.executable, "-m", "traceq"]
    store = tmp_path / "st"
    assert subprocess.run([*run, "ingest", path, "--store", store, "-q"], capture_output=True).returncode == 0
    for analysis in ("hotspots", "overview", "summary", "diagnose"):
        r = subprocess.run([*run, analysis, "--store", store, "-f", "json"], capture_output=True, text=True)
        assert r.returncode == 0, (analysis, r.stderr)
