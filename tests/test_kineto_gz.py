"""A .json.gz decoded while it is inflated (issue 35): the fast decoder's processes take parts
of the text as the inflater writes it. The reference is the same text as a plain .json read
by the robust decoder (the fast path off): the streamed path must give its rows exactly, with
every inflater (isal, zlib-ng, zlib), for concatenated gzip members, and when it must refuse
(an array end before a published cut) or the .gz is bad half way (an error, nothing left)."""
from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pytest

from conftest import SAMPLES
from traceq.errors import BadInput
from traceq.ingest.kineto import decode as kineto_decode
from traceq.ingest.kineto import reader as kineto
from traceq.ingest.kineto import text as kineto_text

SAMPLE_GZ = [SAMPLES / "slow_dataloader" / "rank0.pt.trace.json.gz",
             SAMPLES / "gpu" / "train_gpu_bound" / "rank0.pt.trace.json.gz"]


def inflaters() -> list[str]:
    out = ["zlib"]
    for name, module in (("isal", "isal"), ("zlib-ng", "zlib_ng")):
        try:
            __import__(module)
            out.append(name)
        except ImportError:
            pass
    return out


def plain_tables(text: bytes, tmp_path) -> dict[str, pa.Table]:
    """The reference: the text as a plain .json, read by the robust decoder."""
    path = tmp_path / "plain.json"
    path.write_bytes(text)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kineto_decode, "decode_fast", lambda *a: None)
        return kineto.read(path).tables


def streamed(mp: pytest.MonkeyPatch, inflater: str = "zlib") -> dict[str, int]:
    """Force the streamed path on a small text: parts of 16 KB, pieces of 32 KB, two
    processes. Counts the streamed decodes that gave the raw parts, and those refused."""
    seen = {"streamed": 0, "refused": 0}
    stream = kineto_decode._decode_streamed

    def counted(*a, **k):
        got = stream(*a, **k)
        if got is not kineto_decode._NOT_STREAMED:
            seen["streamed" if got is not None else "refused"] += 1
        return got

    mp.setenv("TRACEQ_INFLATE", inflater)
    mp.setattr(kineto_decode, "MIN_SPLIT", 0)
    mp.setattr(kineto_decode, "PART_BYTES", 16 << 10)
    mp.setattr(kineto_decode, "threads_here", lambda: 2)
    mp.setattr(kineto_decode, "_decode_streamed", counted)
    mp.setattr(kineto_text.Inflating, "PIECE", 32 << 10)
    return seen


def assert_same_tables(got: dict[str, pa.Table], want: dict[str, pa.Table]) -> None:
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name].equals(want[name]), name


@pytest.mark.parametrize("inflater", inflaters())
@pytest.mark.parametrize("sample", SAMPLE_GZ, ids=lambda p: p.parent.name)
def test_gz_decoded_while_inflated_gives_the_plain_json_rows(sample, inflater, tmp_path, monkeypatch):
    want = plain_tables(gzip.decompress(sample.read_bytes()), tmp_path)
    seen = streamed(monkeypatch, inflater)
    got = kineto.read(sample).tables
    assert seen == {"streamed": 1, "refused": 0}
    assert_same_tables(got, want)


def test_concatenated_gzip_members_stream_as_one_text(tmp_path, monkeypatch):
    text = gzip.decompress(SAMPLE_GZ[0].read_bytes())
    cuts = [0, 1000, len(text) // 3, len(text) // 3 + 7, 2 * len(text) // 3, len(text)]   # anywhere, not at events
    path = tmp_path / "members.json.gz"
    path.write_bytes(b"".join(gzip.compress(text[a:b], 6) for a, b in zip(cuts, cuts[1:])))
    want = plain_tables(text, tmp_path)
    seen = streamed(monkeypatch)
    got = kineto.read(path).tables
    assert seen == {"streamed": 1, "refused": 0}
    assert_same_tables(got, want)


def test_a_cut_past_the_array_end_is_refused_and_the_robust_decoder_reads_it(tmp_path, monkeypatch):
    """A list of objects after the event array: a part published while inflating may end
    past the array's `]` (no cut can be proved inside the array then). The streamed decode
    refuses, removes its parts, and the robust decoder gives the plain rows."""
    doc = json.loads(gzip.decompress(SAMPLE_GZ[0].read_bytes()))
    doc["zz_extra"] = [{"k": i, "v": "x" * 50} for i in range(2000)]   # ~130 KB of `},{` after the events
    text = json.dumps(doc, indent=1).encode()
    path = tmp_path / "extra.json.gz"
    path.write_bytes(gzip.compress(text))
    want = plain_tables(text, tmp_path)
    seen = streamed(monkeypatch)
    work = tmp_path / "work"
    work.mkdir()
    decoded = kineto.decode_file(path, work)
    assert seen == {"streamed": 0, "refused": 1}
    assert not list(work.glob("fast-*")) and not (work / "inflated.json").exists()
    assert not any("fast-" in p.name for p in decoded.parts)
    got = kineto.read(path).tables
    assert_same_tables(got, want)


@pytest.mark.parametrize("damage, problem", [("cut", "truncated .gz file"), ("flip", "corrupt .gz file")])
def test_a_bad_gz_found_half_way_is_one_error_and_leaves_no_parts(damage, problem, tmp_path, monkeypatch):
    data = bytearray(SAMPLE_GZ[0].read_bytes())
    if damage == "cut":
        data = data[: len(data) * 4 // 5]
    else:
        for i in range(len(data) * 4 // 5, len(data) * 4 // 5 + 64):
            data[i] ^= 0x5A
    path = tmp_path / f"{damage}.json.gz"
    path.write_bytes(bytes(data))
    streamed(monkeypatch)
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(BadInput, match=problem):
        kineto.decode_file(path, work)
    assert not list(work.glob("fast-*")) and not (work / "inflated.json").exists()
