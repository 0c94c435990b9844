"""Hypothesis strategies for hostile traces, and the contract every ingest must keep.

Shared by the property tests (tests/test_fuzz_ingest.py, small example budgets) and the
long run (benchmarks/fuzz_long.py). The contract (`check_contract`):

- ingest either succeeds (its warnings count what was dropped) or raises TraceqError whose
  message is one line naming the file (the CLI prints it and exits 2); any other exception
  is an internal error, i.e. a bug;
- a failed ingest leaves every file of the store byte-identical;
- on what was ingested, hotspots, summary, overlap, breakdown and stalls either return
  DataFrames or raise TraceqError (e.g. "no GPU kernels"), never anything else.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import sqlite3
from pathlib import Path

from hypothesis import strategies as st

# ------------------------------------------------------------------ values
HUGE = [1e300, -1e300, -1e18, 1e18, 10**30, -(10**30), 2**63, 2**63 - 1, -(2**63), 2**64, 1.7976931348623157e308,
        5e-324, -1, 0, 2**62, 2**62 + 1]
# text with unicode, control characters, markup, quotes, surrogates as escapes
WEIRD_TEXT = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", "\x00", "\x1b[31mred\x1b[0m", "[red]x[/red]", "<script>alert(1)</script>", "a\nb", "\u202e",
                     "ProfilerStep#1", "ProfilerStep#99999999999999999999", "enumerate(DataLoader)#_x",
                     "ncclKernel_AllReduce", "cudaLaunchKernel", "cudaDeviceSynchronize", "Memcpy HtoD (Pinned -> Device)",
                     "{ForeignNode[/x]}", "'", '"', "\\", "\ud7ff", "日本語"]),
)
SANE_TIME = st.integers(min_value=1_000, max_value=50_000)
TIME = st.one_of(
    SANE_TIME, SANE_TIME, SANE_TIME,
    st.floats(min_value=1_000, max_value=50_000, allow_nan=False),
    st.sampled_from(HUGE),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    SANE_TIME.map(str), st.sampled_from(["1e300", "-1e18", "nan", "inf", "abc", "0x10", ""]),
    st.none(), st.booleans(), st.just([1, 2]), st.just({"a": 1}),
)
IDENT = st.one_of(st.integers(0, 8), st.integers(-(2**70), 2**70), st.sampled_from(["stream 7", "0x1f", "1890023232",
                  "Spans", "", "-3", "99999999999999999999999"]), st.none(), st.floats(allow_nan=False), st.booleans())
ANY_JSON = st.recursive(st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False)
                        | WEIRD_TEXT, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
                        max_leaves=6)
PH = st.one_of(st.sampled_from(["X", "X", "X", "B", "E", "i", "M", "C", "s", "f"]), WEIRD_TEXT, st.none(), st.integers())
CAT = st.one_of(st.sampled_from(["kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "cuda_runtime", "Runtime",
                                 "cuda_driver", "cpu_op", "Operator", "user_annotation", "gpu_user_annotation",
                                 "python_function", "cuda_sync", "mtia_runtime", "Trace", "ac2g"]),
                WEIRD_TEXT, st.none(), st.integers())
DIMS = st.one_of(st.lists(st.integers(-(2**40), 2**40), max_size=4), st.lists(st.integers(1, 64), min_size=3, max_size=3),
                 ANY_JSON)


@st.composite
def kineto_event(draw) -> dict:
    args = draw(st.fixed_dictionaries({}, optional={
        "correlation": IDENT, "External id": IDENT, "external id": IDENT, "device": IDENT, "stream": IDENT,
        "bytes": TIME, "grid": DIMS, "block": DIMS, "registers per thread": IDENT,
        "shared memory": IDENT, "blocks per SM": TIME, "warps per SM": TIME, "est. achieved occupancy %": TIME,
        "finished": st.one_of(st.sampled_from(["false", "true", False, True, 0]), ANY_JSON),
        "kind": st.one_of(st.sampled_from(["HtoD", "DtoH"]), ANY_JSON)}))
    ev = draw(st.fixed_dictionaries({"ph": PH, "ts": TIME}, optional={
        "cat": CAT, "name": WEIRD_TEXT, "pid": IDENT, "tid": IDENT, "dur": TIME,
        "args": st.one_of(st.just(args), ANY_JSON)}))
    return ev


@st.composite
def nested_events(draw) -> list[dict]:
    """A well-formed core (kernels launched by runtime calls, B/E pairs, steps) that the hostile
    events are mixed into, so that analyses have something real to chew on."""
    n = draw(st.integers(0, 6))
    base = draw(st.integers(1_000, 10_000))
    out = [{"ph": "X", "cat": "cpu_op", "name": f"ProfilerStep#{i}", "pid": 1, "tid": 1, "ts": base + 100 * i,
            "dur": 90} for i in range(n)]
    for i in range(n):
        out.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                    "ts": base + 100 * i + 5, "dur": 3, "args": {"correlation": i}})
        out.append({"ph": "X", "cat": "kernel", "name": draw(st.sampled_from(["gemm", "ncclKernel_AllReduce", "transpose"])),
                    "pid": 0, "tid": 7, "ts": base + 100 * i + 10, "dur": draw(st.integers(0, 80)),
                    "args": {"correlation": i, "device": 0, "stream": 7}})
    for _ in range(draw(st.integers(0, 3))):   # B/E, maybe mismatched
        t = base + draw(st.integers(0, 600))
        out.append({"ph": "B", "cat": draw(st.sampled_from(["user_annotation", "cpu_op"])), "name": "region",
                    "pid": 1, "tid": draw(st.integers(1, 2)), "ts": t})
        if draw(st.booleans()):
            out.append({"ph": "E", "pid": 1, "tid": 1, "ts": t + draw(st.integers(-50, 200))})
    return out


@st.composite
def kineto_document(draw) -> bytes:
    events = draw(nested_events()) + draw(st.lists(kineto_event(), max_size=12))
    events = draw(st.permutations(events)) if len(events) < 20 else events
    shape = draw(st.sampled_from(["object", "object", "list", "odd"]))
    if shape == "list":
        doc = events
    else:
        doc = {"traceEvents": events if shape == "object" else draw(ANY_JSON)}
        doc.update(draw(st.fixed_dictionaries({}, optional={
            "baseTimeNanoseconds": st.one_of(st.integers(-(2**70), 2**70), ANY_JSON),
            "deviceProperties": st.one_of(st.just([{"id": 0, "name": "GPU", "numSms": 108}]), ANY_JSON),
            "distributedInfo": st.one_of(st.fixed_dictionaries({"rank": IDENT, "world_size": IDENT}), ANY_JSON),
            "schemaVersion": ANY_JSON, "hostname": ANY_JSON})))
    text = json.dumps(doc, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 9)) == 0 and b'{"ph"' in text:   # a duplicated key: the last one wins in JSON
        text = text.replace(b'{"ph"', b'{"ts": 1e300, "ph"', 1)
    if draw(st.integers(1, 20)) == 20 and len(text) > 10:   # truncated by a killed writer, mostly late
        text = text[: int(len(text) * draw(st.floats(0.3, 0.99)))]
    return text


# ------------------------------------------------------------------ nsys
SQL_VALUE = st.one_of(st.integers(-(2**63), 2**63 - 1), st.sampled_from([1e300, -1e18, 0.5, "abc", "12", b"\xff\x00", None]),
                      st.integers(1_000, 50_000), st.integers(1_000, 50_000), st.integers(1_000, 50_000))
KERNEL_COLS = ["start", "end", "deviceId", "streamId", "correlationId", "globalPid", "demangledName", "shortName",
               "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ", "registersPerThread"]
RUNTIME_COLS = ["start", "end", "eventClass", "globalTid", "correlationId", "nameId"]
NVTX_COLS = ["eventType", "start", "end", "text", "textId", "domainId", "globalTid", "endGlobalTid"]
MEMCPY_COLS = ["start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes", "copyKind", "srcKind", "dstKind"]


@st.composite
def nsys_export(draw) -> list[tuple[str, list[str], list[tuple]]]:
    """(table, columns, rows) of a hostile nsys export: tables and columns may be missing,
    values of any storage class, intervals inverted, ids pointing nowhere."""
    tables = []
    strings = [(i, draw(st.one_of(WEIRD_TEXT, st.sampled_from(["gemm", "cudaLaunchKernel", "cudaStreamSynchronize"])))) for i in range(4)]
    tables.append(("StringIds", ["id", "value"], strings + draw(st.lists(st.tuples(SQL_VALUE, SQL_VALUE), max_size=2))))

    def table(name, cols, sane_row):
        if draw(st.integers(0, 5)) == 0:
            return
        kept = [c for c in cols if draw(st.integers(0, 7))]   # a column may be missing
        rows = []
        for i in range(draw(st.integers(0, 5))):
            row = sane_row(i)
            rows.append(tuple(row.get(c) if draw(st.integers(0, 3)) else draw(SQL_VALUE) for c in kept))
        tables.append((name, kept, rows))

    gpid = 42 << 24
    table("CUPTI_ACTIVITY_KIND_KERNEL", KERNEL_COLS, lambda i: {
        "start": 1000 + 100 * i, "end": 1050 + 100 * i, "deviceId": 0, "streamId": 7, "correlationId": i,
        "globalPid": gpid, "demangledName": i % 4, "shortName": 0, "gridX": 1, "gridY": 1, "gridZ": 1,
        "blockX": 128, "blockY": 1, "blockZ": 1, "registersPerThread": 32})
    table("CUPTI_ACTIVITY_KIND_RUNTIME", RUNTIME_COLS, lambda i: {
        "start": 990 + 100 * i, "end": 995 + 100 * i, "eventClass": 0, "globalTid": gpid + 1, "correlationId": i,
        "nameId": 1 + (i % 2)})
    table("CUPTI_ACTIVITY_KIND_MEMCPY", MEMCPY_COLS, lambda i: {
        "start": 1060 + 100 * i, "end": 1070 + 100 * i, "deviceId": 0, "streamId": 7, "correlationId": 100 + i,
        "globalPid": gpid, "bytes": 4096, "copyKind": 1, "srcKind": 1, "dstKind": 2})
    table("NVTX_EVENTS", NVTX_COLS, lambda i: {
        "eventType": 59, "start": 900 + 100 * i, "end": 1090 + 100 * i if i % 3 else None, "text": "step",
        "textId": None, "domainId": 0, "globalTid": gpid + 1, "endGlobalTid": gpid + 1})
    if draw(st.booleans()):
        tables.append(("MPI_RANKS", ["rank"], draw(st.lists(st.tuples(SQL_VALUE), max_size=2))))
    if draw(st.booleans()):
        tables.append(("TARGET_INFO_GPU", ["id", "name", "smCount", "totalMemory"],
                       draw(st.lists(st.tuples(SQL_VALUE, SQL_VALUE, SQL_VALUE, SQL_VALUE), max_size=2))))
    if draw(st.booleans()):
        tables.append(("TARGET_INFO_SESSION_START_TIME", ["utcEpochNs"], [(draw(SQL_VALUE),)]))
    if draw(st.booleans()):
        tables.append(("ENUM_CUDA_MEMCPY_OPER", ["id", "label"], draw(st.lists(st.tuples(SQL_VALUE, SQL_VALUE), max_size=2))))
    return tables


def write_sqlite(path: Path, tables) -> Path:
    con = sqlite3.connect(path)
    for name, cols, rows in tables:
        con.execute(f'CREATE TABLE "{name}" ({", ".join(f"{c!r}" for c in cols) or "dummy"})')
        if cols and rows:
            con.executemany(f'INSERT INTO "{name}" VALUES ({", ".join("?" * len(cols))})', rows)
    con.commit()
    con.close()
    return path


def write_kineto(path: Path, text: bytes, gz: bool = False) -> Path:
    path.write_bytes(gzip.compress(text, 1) if gz else text)
    return path


# ------------------------------------------------------------------ the contract
def store_digest(store: Path) -> dict[str, str]:
    """Every file of the store (but the lock) with its sha256."""
    out = {}
    if store.exists():
        for f in sorted(store.rglob("*")):
            if f.is_file() and f.name != ".lock" and ".staging" not in f.parts:
                out[str(f.relative_to(store))] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def run_analyses(store: Path, run: str) -> None:
    """Every analysis on the run; only TraceqError (an answer for the user) may come out."""
    from scoped import breakdown, hotspots, overlap, stalls, summary

    from traceq.errors import TraceqError

    for fn in (hotspots, summary, overlap, breakdown, stalls):
        try:
            fn(store, run=run)
        except TraceqError as exc:
            assert "\n" not in str(exc), f"{fn.__name__}: multi-line error {exc!r}"


def check_contract(path: Path, store: Path, run: str = "fuzz") -> str:
    """Ingest `path` into `store` under `run` and check the contract (module doc).
    Returns "added" or "refused: <message>"."""
    from traceq.errors import TraceqError
    from traceq.ingest import ingest

    before = store_digest(store)
    try:
        results = ingest([path], store, run=run, jobs=1)
    except TraceqError as exc:
        msg = str(exc)
        assert "\n" not in msg and "\r" not in msg, f"multi-line error: {msg!r}"
        assert msg.startswith(str(path)), f"error does not name the file: {msg!r}"
        assert store_digest(store) == before, "a failed ingest changed the store"
        return f"refused: {msg}"
    for r in results:
        for w in r.warnings:
            assert "\n" not in w, f"multi-line warning {w!r}"
    run_analyses(store, run)
    return "added"


# ------------------------------------------------------------------ one damaged event (issue 36)
DAMAGE = ["NaN", "nan", "Infinity", "-Infinity", "inf", "-inf", "control", "utf8", "comma", "deep", "garbage", "open"]


@st.composite
def damaged_kineto(draw) -> tuple[bytes, set[str], str]:
    """A valid trace of launch + kernel pairs (kernels named k0, k1, ...) with one kernel event
    damaged by one token class (`DAMAGE`) at a random place in it: a number replaced by a
    non-finite literal or garbage, a raw control character or invalid UTF-8 in a string, a
    comma before a `}` or `]`, a value nested up to 100k levels deep, a bracket or a quote left
    open (not in the last event: a list whose last item is left open reads as a file cut
    there). Returns (the text, the kernels that must all be kept: every one but the damaged,
    the class)."""
    import re

    n = draw(st.integers(2, 60))
    kind = draw(st.sampled_from(DAMAGE))
    hit = draw(st.integers(0, n - 1 - (kind == "open")))
    parts = []
    for i in range(n):
        parts.append(json.dumps({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                                 "ts": 1000 + 100 * i, "dur": 3, "args": {"correlation": i}}).encode())
        kernel = json.dumps({"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": 1010 + 100 * i,
                             "dur": 50, "args": {"correlation": i, "device": 0, "stream": 7, "grid": [4, 1, 1],
                                                 "est. achieved occupancy %": 12.5}}).encode()
        if i == hit:
            kernel = _damage(draw, kernel, kind, re)
        parts.append(kernel)
    text = b'{"traceEvents": [' + b", ".join(parts) + b'], "distributedInfo": {"rank": 0}}'
    return text, {f"k{i}" for i in range(n) if i != hit}, kind


def _damage(draw, ev: bytes, kind: str, re) -> bytes:
    """`ev` with one damage of class `kind` at a place drawn from its numbers, strings or brackets."""
    def pick(pattern: bytes) -> re.Match:
        found = list(re.finditer(pattern, ev))
        return found[draw(st.integers(0, len(found) - 1))]

    if kind in ("NaN", "nan", "Infinity", "-Infinity", "inf", "-inf", "garbage", "deep"):
        m = pick(rb"(?<=[:\[,] )-?\d+(?:\.\d+)?|(?<=\[)\d+")
        new = {"garbage": draw(st.sampled_from([b"1.2.3", b"0x1f", b"@", b"--1", b"1e", b"tru"])),
               "deep": b"[" * (k := draw(st.sampled_from([257, 3000, 100_000]))) + b"]" * k}.get(kind, kind.encode())
        return ev[:m.start()] + new + ev[m.end():]
    if kind in ("control", "utf8"):
        m = pick(rb'"[^"]+"')
        at = draw(st.integers(m.start() + 1, m.end() - 1))
        new = bytes([draw(st.integers(0, 31))]) if kind == "control" else \
            draw(st.sampled_from([b"\xff", b"\xc3(", b"\xed\xa0\x80", b"\x80", b"\xf0\x28\x8c"]))
        return ev[:at] + new + ev[at:]
    if kind == "open":   # a bracket opened before a value, or a closing bracket or quote lost
        m = pick(rb'(?<=: )[\d"\[{]|[}\]"]')
        if m.group() in (b"}", b"]", b'"') and draw(st.booleans()):
            return ev[:m.start()] + ev[m.end():]
        return ev[:m.start()] + draw(st.sampled_from([b"[", b"{", b"[[", b"["])) + ev[m.start():]
    m = pick(rb"[}\]]")   # comma
    return ev[:m.start()] + b"," + ev[m.start():]


def check_damaged(path: Path, keep: set[str]) -> None:
    """Ingest (the reader) keeps every kernel of `keep`, reports no truncation, and warns of
    the damage in one line when something was repaired or skipped."""
    from traceq.ingest.kineto import reader
    from traceq.schema import TRUNCATED_WARNING

    parsed = reader.read(path)
    names = set(parsed.tables["gpu_ops"].column("name").to_pylist()) if "gpu_ops" in parsed.tables else set()
    assert keep <= names, f"lost kernels {sorted(keep - names)[:5]}; warnings {parsed.warnings}"
    assert not any(w.startswith(TRUNCATED_WARNING) for w in parsed.warnings), parsed.warnings
    assert all("\n" not in w for w in parsed.warnings)

# ------------------------------------------------------------------ timer logs, Deep500 text
KEY_BYTES = st.one_of(
    WEIRD_TEXT.map(lambda s: json.dumps(s, ensure_ascii=False).encode("utf-8", "surrogatepass")),
    st.sampled_from([b'"step"', b'"forward"', b'"data/load"']),
    st.binary(max_size=8).map(lambda b: b'"' + b.replace(b"\\", b"").replace(b'"', b"").replace(b"\n", b"") + b'"'),
    st.sampled_from([b'"caf\xe9"', b'"\xff\xfe"', b'"\xed\xa0\x80"', b'"\\ud800"', b'"a\\u0000b"', b"1", b"null",
                     b"[1]", b"{}"]),
)
def mostly(sane, odd):
    """`sane` about nine times in ten, else `odd` (Hypothesis draws boundary choices often: a
    plain one_of would make most logs refusals)."""
    return st.integers(0, 9).flatmap(lambda i: odd if i == 9 else sane)


TIMER_INT = mostly(st.integers(0, 10_000), st.one_of(
    st.sampled_from(HUGE).map(str).map(str.encode), st.integers(-(2**70), 2**70),
    st.sampled_from([b"1.5", b"1e3", b'"7"', b"true", b"null", b"NaN"])))


def _json_int(v) -> bytes:
    return v if isinstance(v, bytes) else str(v).encode()


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@st.composite
def timer_log(draw) -> bytes:
    """A hostile traceq timer log: header anchors of any size (or missing, or nested), records
    with random bytes in keys, integers beyond int64, missing fields, nesting, unknown kinds,
    GPU records pointing nowhere, and a last line cut short."""
    anchors = draw(mostly(st.just("sane"), st.sampled_from(["huge", "missing", "nested"])))
    if anchors == "sane":
        epoch, perf = draw(st.integers(0, 2**62)), draw(st.integers(0, 2**40))
    elif anchors == "huge":
        epoch, perf = draw(st.sampled_from(HUGE + [9 * 10**18, -9 * 10**18])), draw(st.sampled_from(HUGE))
    else:
        epoch, perf = None, 0
    head = b'{"traceq_timer":' + draw(mostly(st.just(b"1"), st.sampled_from([b"2", b"0", b'"1"']))) + b',"perf_ns":' + _json_int(perf)
    if epoch is not None:
        head += b',"epoch_ns":' + _json_int(int(epoch))
    if anchors == "nested":
        head += b',"epoch_ns":0,"x":' + _nested(draw(st.sampled_from([3, 70, 5000])))
    head += b',"rank":' + json.dumps(draw(st.one_of(st.none(), st.integers(-5, 2**70)))).encode() + b"}"
    lines = [head]
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(mostly(st.just("region"), st.sampled_from(["gpu", "gpu", "info", "other", "nested"])))
        if kind == "region":
            s = draw(TIMER_INT)
            e = draw(st.one_of(TIMER_INT, st.just(s)))
            fields = {b"key": draw(KEY_BYTES), b"start_ns": _json_int(s), b"end_ns": _json_int(e),
                      b"pid": _json_int(draw(st.one_of(st.just(1), TIMER_INT))), b"tid": _json_int(draw(st.integers(1, 3)))}
            if draw(st.booleans()):
                fields[b"gpu"] = _json_int(draw(st.integers(0, 3)))
            fields = {k: v for k, v in fields.items() if draw(mostly(st.just(True), st.booleans()))}   # maybe missing
        elif kind == "gpu":
            fields = {b"gpu_id": _json_int(draw(st.integers(0, 3))), b"pid": b"1", b"gpu_dur_ns": _json_int(draw(TIMER_INT))}
        elif kind == "info":
            fields = {b"gpu_timing": b'"cuda_events"', b"pid": b"1", b"device_index": _json_int(draw(TIMER_INT)),
                      b"device_name": draw(KEY_BYTES)}
        elif kind == "nested":
            fields = {b"key": b'"n"', b"start_ns": b"1", b"end_ns": b"2", b"pid": b"1", b"tid": b"1",
                      b"x": _nested(draw(st.sampled_from([2, 65, 3000])))}
        else:
            fields = {draw(KEY_BYTES): draw(KEY_BYTES)}
        if kind != "other":
            fields = {b'"' + k + b'"': v for k, v in fields.items()}
        lines.append(b"{" + b",".join(k + b":" + v for k, v in fields.items()) + b"}")
    text = b"\n".join(lines) + b"\n"
    if draw(st.integers(0, 9)) == 0:   # cut short by a killed writer
        text = text[: int(len(text) * draw(st.floats(0.5, 0.99)))]
    return text


STAT = st.one_of(st.floats(0, 10).map(lambda x: f"{x:.5f}"), st.sampled_from(["nan", "inf", "-inf", "NaN", "1e400", "x", ""]))


@st.composite
def deep500_text(draw) -> bytes:
    """Deep500 stats text: sections, keys with random bytes, nan/inf statistics, missing or cut
    stats lines."""
    out = []
    for clock in draw(st.lists(st.sampled_from([b"CPU", b"GPU", b""]), max_size=2)):
        if clock:
            out.append(clock)
        for _ in range(draw(st.integers(0, 3))):
            out.append(draw(st.one_of(st.sampled_from([b"BATCH", b"IO", b"data load"]),
                                      st.binary(min_size=1, max_size=6).filter(lambda b: b.strip() and b"\n" not in b
                                                                               and b"\r" not in b))))
            if draw(st.integers(0, 6)):
                out.append(("min: %s mean: %s median: %s max: %s stdev: %s" % tuple(draw(STAT) for _ in range(5))).encode())
        out.append(b"---")
    text = b"\n".join(out) + b"\n"
    if b"min:" not in text:
        text += b"IO\nmin: 1 mean: 1 median: 1 max: 1 stdev: 0\n"
    if draw(st.integers(0, 6)) == 0:
        text = text[: int(len(text) * draw(st.floats(0.3, 0.99)))]
    return text
