"""Ingest source files into the store: sniff the format, translate, stage, commit.

Readers are pure translators (`read(path) -> Parsed`, see `common.Parsed`; the Kineto reader
`read(path, scratch)` streams its tables into the staging area instead); this module
owns what is common: format sniffing, run/rank naming, sha256 idempotency, parallel
parsing of the ranks of a directory, and the all-or-nothing commit to the store.

A file of a directory that is not a trace (`common.NotATrace`: a README, a config file) is
skipped with a warning (an `IngestResult` of status "skipped"); a directory left without any
trace, or a file named on its own that is not a trace, fails the ingest.
"""
from __future__ import annotations

import os
import re
import stat
import sys
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial, wraps
from pathlib import Path
from typing import Callable

from ..errors import BadInput, TraceqError
from ..executor import ExecutorSpec, partial_results, run_map
from ..store import RankData, Staged, Store, staging
from .common import NotATrace, Parsed, rank_from_filename
from .. import arrow_without_pandas
from . import hashing
from .hashing import hash_later, sha256_file

FORMATS = ("nsys", "kineto", "timer", "deep500", "mila", "spans")
MAX_RANK = 1 << 20   # ranks and world sizes beyond this are garbage, not clusters
_TRACE_SUFFIXES = (".json", ".json.gz", ".sqlite", ".db", ".jsonl", ".txt", ".gz")


def _reader(fmt: str) -> Callable[[Path], Parsed]:
    """The reader of a format that returns its tables (Kineto and nsys stream: `_read`)."""
    if fmt == "timer":
        from .timers.log import read_log as read
    elif fmt == "deep500":
        from .timers.deep500 import read_stats as read
    elif fmt == "mila":
        from .timers.mila import read
    else:
        raise TraceqError(f"unknown format {fmt!r} (choose from auto, {', '.join(FORMATS)})")
    return read


def sniff(path: Path) -> str:
    """Tell the format from the content (not the extension)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except IsADirectoryError:
        raise BadInput("is a directory", path) from None
    except OSError as exc:
        raise BadInput(exc.strerror or str(exc), path) from None
    if not head:
        raise BadInput("empty file", path)
    if head.startswith(b"SQLite format 3\x00"):
        return "nsys"
    if head[:2] == b"\x1f\x8b":
        return "kineto"   # gzip: Chrome trace JSON (.json.gz)
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith(b"{") and b'"traceq_timer"' in head.split(b"\n", 1)[0]:
        return "timer"
    if text.startswith(b"{") and b'"traceEvents"' not in head and (
            b'"train_rate"' in head or (b'"avg"' in head and b'"unit"' in head)):
        return "mila"   # mila training results / milabench summary
    if text[:1] in (b"{", b"["):
        return "kineto"
    # replace: a Deep500 key may hold a stray byte (repaired when read), and the head may end
    # inside a character
    decoded = head.decode("utf-8", "replace")
    if "min:" in decoded and "mean:" in decoded and "stdev:" in decoded:
        return "deep500"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        raise NotATrace("not a trace (unrecognised binary content)", path) from None
    raise NotATrace("not a trace (not nsys SQLite, Chrome/Kineto JSON or a timer log)", path)


def expand(paths: list[str | Path]) -> list[tuple[Path, str | None]]:
    """Files to ingest, each with the run name its directory implies (None for plain files)."""
    out: list[tuple[Path, str | None]] = []
    for p in map(Path, paths):
        if not p.exists():
            raise BadInput("no such file or directory", p)
        refuse_special(p)
        if p.is_dir():
            try:
                entries = sorted(e for e in p.iterdir() if e.is_file() and not e.name.startswith("."))
            except PermissionError:
                raise BadInput("directory is not readable", p) from None
            except OSError as exc:
                raise BadInput(exc.strerror or str(exc), p) from None
            files = [e for e in entries if e.name.endswith(_TRACE_SUFFIXES)]
            if not files:
                raise BadInput("directory holds no trace files (*.json[.gz], *.sqlite, *.jsonl, *.txt)", p)
            name = p.resolve().name
            out.extend((f, name) for f in files)
        else:
            if not os.access(p, os.R_OK):
                raise BadInput("permission denied", p)
            out.append((p, None))
    return out


_SPECIAL = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
            (stat.S_ISBLK, "a block device"))


def refuse_special(path: Path) -> None:
    """Refuse an input that is neither a regular file nor a directory (a FIFO, a socket, a
    device): opening a FIFO blocks until a writer comes, and none of them is a trace file."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise BadInput(exc.strerror or str(exc), path) from None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return
    kind = next((name for test, name in _SPECIAL if test(mode)), "a special file")
    raise BadInput(f"not a regular file or directory ({kind}); traceq reads trace files only", path)


def default_run_name(path: Path) -> str:
    """The file stem without a trailing rank (`prof.mpi3` -> `prof`), or the directory name
    for files named only by their rank (rank0.json)."""
    name = path.name
    stem = path.stem
    for suffix in (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json", ".sqlite", ".jsonl", ".txt", ".gz", ".db"):
        if name.endswith(suffix) and len(name) > len(suffix):
            stem = name[: -len(suffix)]
            break
    if re.fullmatch(r"(rank|worker)[-_.]?\d+", stem, re.I) and path.resolve().parent.name:
        return path.resolve().parent.name
    # `nsys -o prof.mpi%q{SLURM_PROCID}` (Extra-Deep), `prof_rank3`: the ranks of one run `prof`
    base = re.sub(r"[-_.](mpi|rank|worker)[-_.]?\d+$", "", stem, flags=re.I)
    return base or stem


@dataclass
class IngestResult:
    path: str
    run: str
    rank: int | None     # None: skipped
    format: str | None   # None: skipped
    status: str          # added | replaced | unchanged | skipped (a file of a directory that is not a trace)
    counts: dict[str, int]
    warnings: list[str]
    note: str | None = None   # why nothing was done ("already in the store as run 'x' rank 0")


@dataclass
class _Job:
    path: Path
    run: str
    fmt: str
    rank: int | None
    labels: dict[str, str]
    sha256: str | None   # None: still being hashed (ingest fills it in before the commit)
    size: int | None = None
    skippable: bool = False   # a file of a directory: skipped when it is not a trace
    captures: list[Path] | None = None   # --graph-capture: the capture traces (graph_capture)
    owner: dict | None = None   # the ingest that commits it (its staging folder names it)
    spans_map: str | None = None   # --input-format spans: the column mapping (timers.spans)


@dataclass
class _Skipped:
    """What a worker returns instead of a `Staged` for a skippable file that is not a trace."""
    path: str
    run: str
    problem: str


def _skipped(path: str, run: str, problem: str) -> IngestResult:
    reason = problem if problem.startswith("not a trace") else f"not a trace ({problem})"
    return IngestResult(path, run, None, None, "skipped", {}, [f"skipped: {reason}"])


def _read(fmt: str, path: Path, scratch: Path, spans_map: str | None = None) -> Parsed:
    """Translate one file. Kineto and nsys stream: they write their tables when staged
    (`Parsed.fill`; Kineto decodes into `scratch` first); the other readers return their tables."""
    if fmt == "kineto":
        from .kineto.reader import read

        return read(path, scratch)
    if fmt == "nsys":
        from .nsys.reader import read

        return read(path, stream=True)
    if fmt == "timer":
        from .timers.log import read_log

        return read_log(path, scratch)   # streams too: ordered out of core in `scratch`
    if fmt == "spans":
        from .timers.spans import read_spans

        return read_spans(path, spans_map)
    return _reader(fmt)(path)


def _parse_and_stage(store_path: str, job: _Job) -> Staged | _Skipped:
    """Worker: read one file and write its tables to the store's staging area."""
    arrow_without_pandas.apply()   # a worker spawned by the command line: no pandas import
    try:
        with staging.owned_by(job.owner):
            return _stage(store_path, job)
    except NotATrace as exc:
        if not job.skippable:
            raise
        return _Skipped(str(job.path), job.run, exc.problem)


def _stage(store_path: str, job: _Job) -> Staged:
    fmt = sniff(job.path) if job.fmt == "auto" else job.fmt
    store = Store(store_path)
    with store.scratch() as scratch:
        parsed = _read(fmt, job.path, scratch, job.spans_map)
        rank, late = _rank(job, parsed)
        if job.captures:
            if parsed.fill is None or parsed.format != "kineto":
                raise BadInput("--graph-capture needs a Kineto execution trace (this is "
                               f"{parsed.format})", job.path)
            from .graph_capture import attributing

            parsed.fill = attributing(parsed.fill, job.captures, rank or 0, parsed.warnings)
        from .occupancy import filling

        filling(parsed)   # kernels' blocks/warps per SM and occupancy where the source has none
        data = RankData(
            run=job.run, rank=rank or 0, tables=parsed.tables, source_path=str(job.path),
            source_sha256=job.sha256, source_bytes=job.size, source_format=parsed.format,
            format_version=parsed.format_version,
            world_size=parsed.world_size, host=parsed.host, devices=parsed.devices,
            clock_offset_ns=parsed.clock_offset_ns, labels={**parsed.labels, **job.labels}, warnings=parsed.warnings,
        )
        staged = store.stage(data, fill=parsed.fill)
    staged.data.warnings.extend(late)   # after the reader's own, which a streaming reader adds while staged
    staged.data.tables = {}   # already on disk; do not ship tables back to the parent
    return staged


def _rank(job: _Job, parsed: Parsed) -> tuple[int | None, list[str]]:
    """The rank of the file (`--rank`, what the file says, its name), and warnings about
    values ignored; `parsed.world_size` is cleared when out of range."""
    warnings: list[str] = []
    rank = job.rank if job.rank is not None else parsed.rank
    if rank is not None and not 0 <= rank < MAX_RANK:
        warnings.append(f"ignored rank {rank} written in the file (not in 0..{MAX_RANK - 1})")
        rank = None
    if parsed.world_size is not None and not 0 < parsed.world_size <= MAX_RANK:
        warnings.append(f"ignored world size {parsed.world_size} written in the file")
        parsed.world_size = None
    if rank is None:
        rank = rank_from_filename(job.path)
    if rank is not None and not 0 <= rank < MAX_RANK:
        raise BadInput(f"rank {rank} is out of range (0..{MAX_RANK - 1})", job.path)
    return rank, warnings


def _ingest(
    paths: list[str | Path],
    store: Store | str | Path | None = None,
    *,
    run: str | None = None,
    labels: dict[str, str] | None = None,
    rank: int | None = None,
    fmt: str = "auto",
    force: bool = False,
    jobs: int | None = None,
    on_progress: Callable[[str, Path], None] | None = None,
    hashes: dict | None = None,
    assign: dict | None = None,
    executor: ExecutorSpec | None = None,
    later: dict[str, Future] | None = None,
    graph_capture: str | Path | None = None,
    spans_map: str | None = None,
) -> list[IngestResult]:
    """Ingest files or directories (a directory = the ranks of one run). All or nothing.

    `assign`: {file path: (run, labels, rank)} from an experiment tree
    (traceq.experiments.params.plan_tree); `labels` are added to the run's labels.
    Files are parsed and staged on `executor` (default: a local process pool of `jobs`);
    the manifest is committed once, here.

    `graph_capture`: a capture trace, or a directory of them, of the CUDA/HIP graphs the
    files replay (traceq.ingest.graph_capture): replayed kernels are attributed to the ops
    that captured them; the capture traces' sha256 is part of each file's identity."""
    arrow_without_pandas.apply()   # before the first use of pyarrow (only under the command line)
    st = store if isinstance(store, Store) else Store(store)
    owner = staging.owner_id()   # each staging folder names this process: stale once it is gone
    if fmt != "auto" and fmt not in FORMATS:
        raise TraceqError(f"unknown format {fmt!r} (choose from auto, {', '.join(FORMATS)})")
    if fmt == "spans":
        from .timers.spans import parse_map

        mapping = parse_map(spans_map)   # a bad mapping is refused before any file is read
    elif spans_map:
        raise TraceqError("--map applies to --input-format spans")
    files = expand(paths)
    captures = digest = None
    if graph_capture is not None:
        from . import graph_capture as gc

        captures = gc.capture_files(graph_capture)
        digest = gc.digest(captures)
    if fmt == "spans":   # the same span log read through another mapping is another source
        digest = f"{digest}+spans:" + ",".join(f"{k}={v}" for k, v in sorted(mapping.items()))
    if rank is not None and len(files) > 1 and not assign:
        raise TraceqError("--rank applies to a single file; a directory's ranks come from the files")
    manifest = st.manifest_rows()
    # The sizes of the store's sources (None: a row of an older store, size unknown). A file
    # whose size none of them has cannot be in the store already: it is decoded while its
    # sha256 is still being computed (`later`), instead of after (1.3 s for a 0.9 GB trace).
    sizes = {r.get("source_bytes") for r in manifest}
    later = {} if later is None else later   # the hashes begun here (`ingest` stops them on failure)
    todo: list[_Job] = []
    results: list[IngestResult] = []
    members = {path: path.parent for path, dir_run in files if dir_run is not None}   # file of a directory -> it
    for path, dir_run in files:
        run_name = run or dir_run or default_run_name(path)
        if fmt == "auto" and path in members:
            try:
                sniff(path)   # before any work: a file that is not a trace is skipped
            except NotATrace as exc:
                results.append(_skipped(str(path), run_name, exc.problem))
                if on_progress:
                    on_progress("done", path)
                continue
        file_labels, file_rank = dict(labels or {}), rank
        if assign and str(path) in assign:
            a_run, a_labels, a_rank = assign[str(path)]
            run_name = run or a_run
            file_labels = {**a_labels, **file_labels}
            file_rank = a_rank if rank is None else rank
        pending = (hashes or {}).get(str(path))   # started early by the caller (hashing.start_hashing)
        try:
            size = path.stat().st_size
        except OSError as exc:
            raise BadInput(exc.strerror or str(exc), path) from None
        sha = None
        if None in sizes or size in sizes:   # it could be in the store already: its hash decides
            sha = _identity(_sha(pending, path), digest)
            if run is None:   # no --run: a file already in the store stays in the run it is in
                same = [r["run"] for r in manifest if r["source_sha256"] == sha]
                if same and run_name not in same:
                    run_name = same[0]
            if not force:
                hit = next((r for r in manifest if r["run"] == run_name and r["source_sha256"] == sha), None)
                if hit is not None:
                    results.append(IngestResult(str(path), run_name, hit["rank"], hit["source_format"], "unchanged",
                                                {}, [], note=f"already in the store as run {run_name!r} rank {hit['rank']}"))
                    if on_progress:
                        on_progress("done", path)
                    continue
        else:
            later[str(path)] = pending if pending is not None else hash_later(path)
        if fmt == "auto" and path not in members:
            sniff(path)   # fail fast, before any work, on files that are not traces
        todo.append(_Job(path, run_name, fmt, file_rank, file_labels, sha, size, skippable=path in members,
                         captures=captures, owner=owner, spans_map=spans_map))
    _check_traces_left(members, results)
    staged: list[Staged] = []
    fresh = st.missing_root()   # a failed first ingest leaves no folder behind
    try:
        try:
            done = run_map(partial(_parse_and_stage, os.path.abspath(st.path)), todo, executor or ExecutorSpec(jobs=jobs),
                           (lambda job, _res: on_progress("done", job.path)) if on_progress else None)
        except BaseException as exc:
            staged = [s for s in partial_results(exc) if isinstance(s, Staged)]
            raise
        staged = [s for s in done if isinstance(s, Staged)]
        skipped = [_skipped(s.path, s.run, s.problem) for s in done if isinstance(s, _Skipped)]
        _check_traces_left(members, results + skipped)
        for s in staged:
            if s.data.source_sha256 is None:
                s.data.source_sha256 = _identity(_sha(later[s.data.source_path], Path(s.data.source_path)), digest)
        _check_duplicate_ranks(staged)
        from ..clocks import align_rows

        statuses = st.commit(staged, force=force, align=align_rows)   # + the runs' common clock
    except BaseException:
        st.discard(staged)
        st.remove_if_unused(fresh)
        raise
    for s, status in zip(staged, statuses):
        d = s.data
        results.append(IngestResult(d.source_path, d.run, d.rank, d.source_format, status, s.counts, d.warnings))
    return results + skipped


def _check_traces_left(members: dict[Path, Path], results: list[IngestResult]) -> None:
    """Fail when every file of a directory was skipped as not a trace."""
    skipped = {Path(r.path) for r in results if r.status == "skipped"}
    for directory in dict.fromkeys(members.values()):
        files = [f for f, d in members.items() if d == directory]
        if all(f in skipped for f in files):
            names = ", ".join(f.name for f in files[:5]) + (", ..." if len(files) > 5 else "")
            raise BadInput(f"directory holds no trace ({len(files)} file(s) that are not traces: {names})", directory)


@wraps(_ingest)
def ingest(*args, **kwargs) -> list[IngestResult]:
    later: dict[str, Future] = {}
    try:
        return _ingest(*args, **kwargs, later=later)
    except BaseException:   # stop this ingest's source hashes still running: nothing will use them
        hashing.stop([*(kwargs.get("hashes") or {}).values(), *later.values()])
        raise


def _sha(pending: Future | None, path: Path) -> str:
    """The sha256 of `path`: from the hash begun in the background, else computed now."""
    try:
        return pending.result() if pending is not None else sha256_file(path)
    except OSError as exc:
        raise BadInput(exc.strerror or str(exc), path) from None


def _identity(sha: str, capture_digest: str | None) -> str:
    """A file's identity in the manifest: its sha256, with the capture traces' when given."""
    if capture_digest is None:
        return sha
    from .graph_capture import with_capture

    return with_capture(sha, capture_digest)


def _check_duplicate_ranks(staged: list[Staged]) -> None:
    seen: dict[tuple[str, int], str] = {}
    for s in staged:
        key = (s.data.run, s.data.rank)
        if key in seen:
            raise BadInput(f"rank {key[1]} of run {key[0]!r} also comes from {seen[key]}; "
                           "give each rank its own file or ingest them as separate runs", s.data.source_path)
        seen[key] = s.data.source_path


class _CallableModule(type(sys.modules[__name__])):
    """`traceq.ingest(...)` is the function even after `import traceq.ingest` has made the
    package attribute `traceq.ingest` this module (a submodule import sets it)."""

    def __call__(self, *args, **kwargs):
        return ingest(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
