"""The `traceq` command line. It only parses arguments and renders; the work is in the
Python API (`traceq.ingest`, the analyses of traceq/analyses). Heavy libraries are imported inside the
commands so `traceq --help` stays fast.

Errors the user can act on print one line, `traceq: <file>: <problem>`, and exit 2;
`--debug` (anywhere on the command line, or TRACEQ_DEBUG=1) shows the traceback instead.
"""
from __future__ import annotations

import os
import sys
from typing import Annotated, Optional

import typer

from . import cli_coercion

cli_coercion.install()   # plain str/int options without pydantic (start-up time)

app = typer.Typer(
    name="traceq",
    help=(
        "Fast answers from GPU training traces: nsys SQLite exports, PyTorch profiler (Kineto) "
        "traces and timer logs, ingested into one Parquet store.\n\n"
        "Examples:\n\n\b\n"
        "  traceq ingest sample_traces/nsys_sample.sqlite\n"
        "  traceq ingest runs/amp/ --run amp --label amp=on   # a directory = the ranks of one run\n"
        "  traceq hotspots --top 10\n"
        "  traceq sql \"SELECT category, count(*) FROM gpu_ops GROUP BY 1\"\n\n"
        "The store is ./.traceq unless --store or TRACEQ_STORE says otherwise. "
        "Add --debug anywhere to see a traceback instead of a one-line error."
    ),
    no_args_is_help=True,
    add_completion=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)

def _version(value: bool) -> None:
    if value:
        from .version import __version__

        typer.echo(f"traceq {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                help="Show the version and exit.")] = False) -> None:
    pass


# ---------------------------------------------------------------- shared options
from .cli_options import FormatOpt, OutputOpt, StoreOpt  # noqa: E402

INPUT_FORMATS = ("auto", "nsys", "kineto", "timer", "deep500", "mila", "spans")


def _safe(message: str) -> str:
    from .render import clean

    return clean(message)


def fail(message: str, code: int = 2) -> None:
    sys.stderr.write(f"traceq: {_safe(message)}\n")
    raise typer.Exit(code)


def warn(message: str) -> None:
    sys.stderr.write(f"traceq: warning: {_safe(message)}\n")


def _emit_to(df, fmt: str, output: str | None, **kw) -> None:
    """emit() to stdout, or to the file named by -o/--output."""
    from .errors import TraceqError
    from .render import emit

    if output is None:
        emit(df, fmt, **kw)
        return
    try:
        with open(output, "w", encoding="utf-8", newline="") as fh:
            emit(df, fmt, file=fh, **kw)
    except OSError as exc:
        raise TraceqError(f"cannot write: {exc.strerror}", output) from None


def _labels(items: list[str] | None) -> dict[str, str]:
    out = {}
    for item in items or []:
        if "=" not in item:
            fail(f"--label {item!r}: expected key=value (e.g. amp=on)")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


# ---------------------------------------------------------------- ingest
class _IngestProgress:
    """Rich progress on stderr: one line per file (up to 12) and an overall bar."""

    MAX_FILE_LINES = 12

    def __init__(self, files) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}", markup=False), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(), transient=True,
                                 console=Console(stderr=True))
        self.per_file = {}
        if 1 < len(files) <= self.MAX_FILE_LINES:
            for path, _ in files:
                self.per_file[str(path)] = self.progress.add_task(f"  {_safe(path.name)}", total=1)
        self.overall = self.progress.add_task(f"ingesting {len(files)} file(s)", total=len(files))
        self.progress.start()

    def update(self, event: str, path) -> None:
        task = self.per_file.get(str(path))
        if task is not None:
            self.progress.update(task, completed=1)
        self.progress.advance(self.overall)

    def stop(self) -> None:
        self.progress.stop()


from .cli_options import ExecutorOpt, SchedulerFileOpt, SchedulerOpt  # noqa: E402


@app.command()
def ingest(
    paths: Annotated[list[str], typer.Argument(help="Trace files, or directories (one directory = the ranks of one run).", show_default=False)],
    store: StoreOpt = None,
    run: Annotated[Optional[str], typer.Option("--run", help="Run name (default: file stem, or directory name).", show_default=False)] = None,
    label: Annotated[Optional[list[str]], typer.Option("--label", help="key=value label for the run (repeatable), e.g. amp=on.", show_default=False)] = None,
    rank: Annotated[Optional[int], typer.Option("--rank", help="Rank of a single file (overrides what the file says).", show_default=False)] = None,
    input_format: Annotated[str, typer.Option("--input-format", "-i", help="Input format: auto, nsys, kineto, timer, deep500, mila or spans (a CSV/JSON span log, with --map).", metavar="FORMAT")] = "auto",
    spans_map: Annotated[Optional[str], typer.Option("--map", help="With --input-format spans: the columns, e.g. name=phase,start=t0,end=t1,unit=s (or dur=COL instead of end; unit s|ms|us|ns).", metavar="KEY=COL,...", show_default=False)] = None,
    force: Annotated[bool, typer.Option("--force", help="Re-ingest files already in the store (replaces them).")] = False,
    jobs: Annotated[Optional[int], typer.Option("--jobs", "-j", help="Parallel workers for a directory (default: CPU count).", show_default=False)] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary table.")] = False,
    fmt: Annotated[str, typer.Option("--format", "-f", help="Output format of the summary: table, json or csv "
                                     "(an input format here, e.g. --format nsys, is read as --input-format with a warning).",
                                     metavar="table|json|csv")] = "table",
    output: OutputOpt = None,
    recursive: Annotated[bool, typer.Option("--recursive", "-r", help="Ingest a whole experiment tree: every trace below DIR, grouped into runs by the parameters in their names (Extra-Deep style cifar10.p8.b64.r2.mpi3.sqlite, or --name-pattern).")] = False,
    name_pattern: Annotated[Optional[str], typer.Option("--name-pattern", help="With --recursive: regex with named groups read from file names; (?P<rank>..) is the rank, (?P<run>..) the run name, other groups become labels.", show_default=False)] = None,
    graph_capture: Annotated[Optional[str], typer.Option("--graph-capture", help="The trace of the CUDA/HIP graph capture (file, or directory of them: vLLM/SGLang write them beside the execution trace; execution_details.json picks the files): kernels replayed from the graphs are attributed to the ops that captured them.", metavar="CAPTURE_TRACE_OR_DIR", show_default=False)] = None,
    executor: ExecutorOpt = None,
    scheduler: SchedulerOpt = None,
    scheduler_file: SchedulerFileOpt = None,
) -> None:
    """Ingest nsys SQLite exports, Kineto/PyTorch traces (.json/.json.gz) or timer logs into the store.

    Re-ingesting the same file into the same run is a no-op; --force replaces it. A failed
    ingest leaves the store exactly as it was.

    Example: traceq ingest rank0.pt.trace.json.gz rank1.pt.trace.json.gz --run baseline --label amp=off

    Example: traceq ingest graph_execution.json.gz --graph-capture capture_traces/
    """
    from .ingest.hashing import start_hashing

    if fmt in INPUT_FORMATS:      # --format naming an input format: taken as --input-format
        warn(f"--format {fmt} names an input format: use --input-format {fmt} (--format is the output format)")
        input_format, fmt = fmt, "table"
    if fmt not in ("table", "json", "csv"):
        fail(f"--format {fmt!r}: choose table, json or csv (the input format is --input-format)")
    hashes = start_hashing(paths)   # hashing runs on another core while the heavy imports load
    from .executor import resolve as resolve_executor
    from .ingest import expand, ingest as do_ingest

    assign = None
    if recursive or name_pattern:
        from .experiments.params import plan_tree

        if not recursive:
            fail("--name-pattern needs --recursive")
        plan = [fp for p in paths for fp in plan_tree(p, name_pattern)]
        assign = {str(fp.path): (fp.run, fp.labels, fp.rank) for fp in plan}
        paths = [str(fp.path) for fp in plan]
    spec = resolve_executor(executor, scheduler, scheduler_file, jobs)

    progress = _IngestProgress(expand(paths)) if not quiet and sys.stderr.isatty() else None
    try:
        results = do_ingest(paths, store, run=run, labels=_labels(label), rank=rank, fmt=input_format, force=force,
                            jobs=jobs, on_progress=progress.update if progress else None, hashes=hashes,
                            assign=assign, executor=spec, graph_capture=graph_capture,
                            spans_map=spans_map)
    finally:
        if progress is not None:
            progress.stop()
    for r in results:
        for w in r.warnings:
            warn(f"{r.path}: {w}")
        if r.note:
            sys.stderr.write(_safe(f"traceq: {r.path}: {r.note} (--force re-ingests it)") + "\n")
    results = [r for r in results if r.status != "skipped"]   # said in their warnings
    if quiet:
        return

    given = _as_given(paths)

    def shown(path: str) -> str:      # the table cuts a long path in the middle, keeping its file name
        return path if fmt != "table" else given(path)

    import polars as pl   # after ingesting: a Kineto decode loads it while its workers decode

    df = pl.DataFrame([{"file": shown(r.path), "run": r.run, "rank": r.rank, "format": r.format, "status": r.status,
                        "gpu_ops": r.counts.get("gpu_ops"), "host_ops": r.counts.get("host_ops"),
                        "regions": r.counts.get("regions"), "timer_stats": r.counts.get("timer_stats"),
                        "metrics": r.counts.get("metrics")}
                       for r in results],
                      schema={"file": pl.String, "run": pl.String, "rank": pl.Int64, "format": pl.String, "status": pl.String,
                              "gpu_ops": pl.Int64, "host_ops": pl.Int64, "regions": pl.Int64, "timer_stats": pl.Int64,
                              "metrics": pl.Int64})
    from .store import Store

    if fmt == "table":   # the counts no file of this ingest has are left out of the table
        df = df.drop([c for c in ("timer_stats", "metrics") if not df[c].fill_null(0).sum()])
    added = sum(r.status != "unchanged" for r in results)
    _emit_to(df, fmt, output, drop_first=("regions", "host_ops"), headline=f"{added} of {len(results)} file(s) ingested into {Store(store).path}"
         + ("" if added == len(results) else f" ({len(results) - added} unchanged: already in the store; --force re-ingests)"))


def _as_given(paths: list[str]):
    """A stored path as the user wrote it: the argument itself, or the argument + the part below
    it for a file found in a directory argument; any other path as it is."""
    roots = sorted(((os.path.abspath(p), p) for p in paths), key=lambda r: -len(r[0]))

    def given(path: str) -> str:
        full = os.path.abspath(path)
        for root, arg in roots:
            if full == root:
                return arg
            if full.startswith(root.rstrip(os.sep) + os.sep):
                return os.path.join(arg, os.path.relpath(full, root))
        return path
    return given


# ---------------------------------------------------------------- runs / sql
@app.command()
def runs(store: StoreOpt = None, fmt: FormatOpt = "table", output: OutputOpt = None) -> None:
    """List the runs in the store: ranks, source formats, devices, row counts, labels.

    JSON is a list of run objects; labels are an object ({"amp": "on"}).

    Example: traceq runs --format json
    """
    from .engine.catalog import runs as runs_df
    from .store import Store

    df = runs_df(store)
    if fmt == "table":   # counts no run has are left out of the table (JSON/CSV keep every column)
        df = df.drop([c for c in ("timer_stats", "metrics") if c in df.columns and not df[c].fill_null(0).sum()])
    if fmt == "json":
        import json

        import polars as pl

        df = df.with_columns(pl.col("labels").map_elements(lambda v: json.loads(v) if v else {},
                                                           return_dtype=pl.Object))
    _emit_to(df, fmt, output, headline=f"{df.height} run(s) in {Store(store).path}")


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help="SQL over the views runs, gpu_ops, host_ops, regions, timer_stats, metrics, memory_events.", show_default=False)],
    store: StoreOpt = None,
    fmt: FormatOpt = "table",
    output: OutputOpt = None,
    allow_writes: Annotated[bool, typer.Option("--allow-writes", help="Also run statements that write (COPY … TO, EXPORT DATABASE, ATTACH, CREATE): only to the paths the statement names in '…' or $$…$$ outside the store. SET, INSTALL, LOAD and network access stay refused.")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Read the store's tables and nothing else, whatever the statement names: no file outside the store (read_csv('/etc/passwd') is refused), no ATTACH, COPY or extension. What `traceq mcp` runs.")] = False,
) -> None:
    """Run SQL queries (DuckDB dialect) over the store's views. Read-only: statements other
    than queries are refused unless --allow-writes. DuckDB's file access is locked to the
    paths the statement names in string literals outside the store (a glob: the folder above
    it, or the files it matches outside the store), in every mode, or with --strict to the
    store's own files: the store can never be written.

    Results stream: -o FILE is written in Arrow batches (bounded memory, any size) and
    appears only when complete; a table shows the first 200 rows and says when there are
    more. Nested values go to CSV as JSON text, blobs as hex (docs/sql.md).

    Example: traceq sql "SELECT category, sum(end_ns - start_ns)/1e6 AS ms FROM gpu_ops GROUP BY 1 ORDER BY 2 DESC"
    """
    from .sql_stream import run_query

    run_query(query, store, fmt, output, allow_writes=allow_writes, strict=strict)


# ---------------------------------------------------------------- mcp
@app.command()
def mcp(store: StoreOpt = None) -> None:
    """Serve the store to an AI assistant over the Model Context Protocol (stdio): one tool per
    analysis (its parameters as --help declares them), list_runs, describe_store, a strict and
    capped sql, explain (a finding's evidence rows); the store's schema and the definitions as
    resources; a "diagnose this run" prompt. Read-only: no tool writes, no query reads a file
    outside the store. Needs the extra: pip install 'traceq[mcp]' (docs/mcp.md has the client
    configuration).

    Example (Claude Desktop, VS Code, Cursor: the command to start): traceq mcp --store /data/traces/.traceq
    """
    from .mcp.server import INSTALL_HINT, available, serve
    from .store.layout import resolve_store_path

    if not available():
        fail(INSTALL_HINT)
    serve(str(resolve_store_path(store).resolve()))


# ---------------------------------------------------------------- report
@app.command()
def report(
    runs: Annotated[Optional[list[str]], typer.Argument(help="Runs to report (default: the most recently ingested). "
                                                             "Two runs add a diff of the second against the first.",
                                                        metavar="RUN", show_default=False)] = None,
    output: Annotated[str, typer.Option("--output", "-o", help="HTML file to write.", metavar="FILE")] = "report.html",
    title: Annotated[Optional[str], typer.Option("--title", help="Page title (default: the run names).", metavar="TEXT", show_default=False)] = None,
    run_opt: Annotated[Optional[list[str]], typer.Option("--run", help="A run to report, as every analysis names "
                                                          "one (repeat for two; after any RUN arguments).",
                                                          metavar="NAME", show_default=False)] = None,
    store: StoreOpt = None,
) -> None:
    """Write one self-contained HTML report (plotly.js inlined; opens offline): headline numbers per
    run and rank, GPU timeline (down-sampled), GPU time per category and region, hotspots with
    advice, data-loading stalls and communication overlap per step; with two runs, their diff.

    Example: traceq report baseline amp -o report.html --title "AMP + channels_last"
    """
    from .report.page import build_report

    runs = [*(runs or []), *(run_opt or [])] or None
    res = build_report(store, runs, output, title)
    for w in res.warnings:
        warn(w)
    size = res.bytes / 1e6
    sys.stdout.write(_safe(f"{res.path}: report of {', '.join(res.runs)}"
                           + (" with their diff" if len(res.runs) == 2 else "")
                           + f" ({size:.1f} MB, {res.seconds:.1f} s)") + "\n")


# ---------------------------------------------------------------- export
@app.command()
def export(
    run: Annotated[Optional[str], typer.Argument(help="Run to export (default: the most recently ingested).",
                                                 metavar="RUN", show_default=False)] = None,
    output: Annotated[str, typer.Option("--output", "-o", help="File to write (.gz: gzip-compressed).",
                                        metavar="FILE")] = "trace.json",
    fmt: Annotated[str, typer.Option("--format", "-f", help="perfetto (ui.perfetto.dev) or chrome (chrome://tracing): "
                                     "the same Trace Event Format JSON.", metavar="perfetto|chrome")] = "perfetto",
    rank: Annotated[Optional[int], typer.Option("--rank", help="One rank (default: every rank, each a process).",
                                                metavar="N", show_default=False)] = None,
    no_findings: Annotated[bool, typer.Option("--no-findings", help="Leave out diagnose's findings.")] = False,
    run_opt: Annotated[Optional[str], typer.Option("--run", help="The run to export, as every analysis names it "
                                                   "(the same as RUN).", metavar="NAME", show_default=False)] = None,
    store: StoreOpt = None,
) -> None:
    """Write a run as a Chrome-trace JSON that ui.perfetto.dev and chrome://tracing open: every
    rank a process on the run's common clock, GPU ops on their streams, launch -> kernel
    flows, diagnose's findings as instant events, and the critical path where traceq has one.
    Re-ingesting the file gives the same GPU ops (docs/export.md).

    Example: traceq export baseline --format perfetto -o baseline.json.gz
    """
    from .export.run import export_run

    if run is not None and run_opt is not None and run != run_opt:
        fail(f"export: two runs named ({run!r} and --run {run_opt!r}); export takes one")
    run = run if run is not None else run_opt
    res = export_run(store, run, output, format=fmt, rank=rank, findings=not no_findings,
                     segments=_path_segments(store, run, rank))
    for n in res.notes:
        warn(n)
    sys.stdout.write(_safe(f"{res.path}: run {res.run}, {len(res.ranks)} rank(s), {res.events:,} events, "
                           f"{res.findings} finding(s), {res.segments} path segment(s) "
                           f"({res.bytes / 1e6:.1f} MB, {res.seconds:.1f} s)") + "\n")


def _path_segments(store, run, rank):
    """The critical path to mark (traceq.engine.critical_path, when this traceq has it)."""
    from .engine.scope import open_scope
    from .export.path_marks import segments_of

    segments, why = segments_of(open_scope(store, run, rank, only_run=True))
    if why and os.environ.get("TRACEQ_DEBUG") == "1":
        warn(why)
    return segments


# ---------------------------------------------------------------- analyses
# One command per analysis of the registry (traceq/analyses), derived from its declaration.
from .cli_analyses import register_all  # noqa: E402

register_all(app)

@app.command()
def doctor(store: StoreOpt = None) -> None:
    """Verify every file of the store's manifest (exists, readable, row counts as recorded, text
    valid UTF-8) and say what to re-ingest or remove (traceq rm); report staging folders left by
    killed ingests, with their size. Exit 0 when the store is sound, 1 when something is damaged.

    Example: traceq doctor --store .traceq
    """
    from .doctor import check_store, stale_staging
    from .store import Store

    problems, checked = check_store(store)
    stale = stale_staging(store)
    if len(stale) > 3:   # one line for many (a kill of an ingest of many ranks leaves one per rank)
        mb = sum(size for _, size, _ in stale) / 1e6
        warn(f"{Store(store).path / '.staging'}: {len(stale)} stale staging folders ({mb:.1f} MB) of ingests "
             "that are gone; the next ingest removes them")
    for folder, size, why in stale if len(stale) <= 3 else []:
        warn(f"{folder}: stale staging folder ({size / 1e6:.1f} MB; {why}); the next ingest removes it")
    if problems.height == 0:
        sys.stdout.write(f"{Store(store).path}: store OK ({checked} files of "
                         f"{len(Store(store).manifest_rows())} ranks verified)\n")
        return
    for p in problems.iter_rows(named=True):
        sys.stderr.write(f"traceq: {p['file']}: {p['problem']} (run {p['run']!r} rank {p['rank']}, "
                         f"{p['table']}); repair: {p['reingest']}\n")
    raise typer.Exit(1)


@app.command()
def rm(
    runs: Annotated[list[str], typer.Argument(help="Runs to remove (names as `traceq runs` lists them).",
                                              metavar="RUN", show_default=False)],
    store: StoreOpt = None,
) -> None:
    """Remove runs from the store: their manifest rows (replaced atomically, under the same lock
    as an ingest) and their table files. An unknown run changes nothing.

    Example: traceq rm old_baseline
    """
    from .store import Store

    st = Store(store)
    removed = st.remove(runs)
    for run, n in removed.items():
        sys.stdout.write(_safe(f"{st.path}: removed run {run!r} ({n} rank(s))") + "\n")


# `traceq --help` lists commands in the order a user meets them (click keeps insertion order):
# load and find runs, what to fix first, then the analyses, then the store's tools. Commands
# not named here keep their place after the named ones, before the store's tools.
HELP_ORDER = ("ingest", "runs", "diagnose", "summary", "hotspots", "kernels", "stalls", "breakdown", "overlap",
              "critical-path", "diff", "compare", "ranks", "model", "check", "report")
HELP_LAST = ("sql", "mcp", "doctor", "rm", "export")


def _help_rank(cmd) -> tuple[int, int]:
    name = cmd.name or cmd.callback.__name__.replace("_", "-")
    if name in HELP_LAST:
        return (2, HELP_LAST.index(name))
    return (0, HELP_ORDER.index(name)) if name in HELP_ORDER else (1, 0)


app.registered_commands.sort(key=_help_rank)   # stable: unnamed commands keep their order


def _damaged_store_file(exc: Exception) -> str | None:
    """The store file named by a DuckDB/Arrow read error (a corrupt or vanished Parquet file)."""
    import re

    if type(exc).__module__.split(".")[0] not in ("duckdb", "_duckdb", "pyarrow"):
        return None
    m = re.search(r"""["']([^"']+\.parquet)["']""", str(exc)) or re.search(r"(\S+\.parquet)", str(exc))
    return m.group(1) if m else None


def _is_panic(exc: BaseException) -> bool:
    """polars' PanicException (a Rust panic; derives from BaseException, not Exception)."""
    return any(c.__name__ == "PanicException" for c in type(exc).__mro__)


def main() -> None:
    """Console entry point: one-line errors, exit code 2 for bad input, --debug for tracebacks.

    Query results go from DuckDB to polars as Arrow streams, without pyarrow (store.ARROW_STREAMS,
    start-up time). The process ends with os._exit once stdout and stderr are flushed, skipping
    the interpreter's teardown: unloading polars, pyarrow and DuckDB costs 0.08-0.15 s, and
    DuckDB would report leaked Arrow streams. Nothing is left to do by then: every file is
    written and closed (the store's manifest by an atomic rename), a Dask client and its
    cluster are closed by the map that used them, temporary folders are removed by their owners.
    An exception other than SystemExit (only with --debug) propagates as usual.
    """
    from . import allocators, arrow_without_pandas
    from .store import exchange as store

    store.ARROW_STREAMS = True
    os.environ.setdefault(arrow_without_pandas.ENV, "0")   # inherited by the ingest workers
    if _command(sys.argv[1:]) == "ingest":
        allocators.apply()   # before polars and pyarrow load; the ingest workers inherit it
    try:
        _main()
    except SystemExit as exc:
        _leave(exc.code)
    _leave(0)


def _leave(code) -> None:
    """sys.exit(code) without interpreter teardown (no atexit handlers, no module cleanup);
    a plain sys.exit under a profiler or tracer (cProfile, coverage: they write at exit)."""
    if sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(code)
    if code is None:
        code = 0
    elif not isinstance(code, int):
        sys.stderr.write(f"{code}\n")
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):   # a closed pipe (`traceq ... | head`): nothing more to say
            code = code or 1
    os._exit(code)


def _command(argv: list[str]) -> str | None:
    """The command argv names (its first word, --debug aside), or None."""
    return next((a for a in argv if a != "--debug"), None)


def _app_for(argv: list[str]) -> typer.Typer:
    """`app` with only the command that argv names (typer builds the click command of every
    registered command on each call: ~20 ms of start-up); the whole app for anything else."""
    import copy

    name = _command(argv) or ""
    keep = [c for c in app.registered_commands if (c.name or c.callback.__name__.replace("_", "-")) == name]
    if len(keep) != 1 or app.registered_groups:
        return app
    one = copy.copy(app)
    one.registered_commands = keep
    return one


def _main() -> None:
    debug = "--debug" in sys.argv or os.environ.get("TRACEQ_DEBUG") == "1"
    argv = [a for a in sys.argv[1:] if a != "--debug"]
    try:
        _app_for(argv)(args=argv, prog_name="traceq", standalone_mode=True)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        sys.stderr.write("traceq: interrupted\n")
        sys.exit(130)
    except BaseException as exc:  # noqa: BLE001 - the single place that turns errors into one line
        if not isinstance(exc, Exception) and not _is_panic(exc):
            raise   # GeneratorExit and the like: not an error of traceq's
        if debug:
            raise
        if _is_panic(exc):   # a Rust panic in polars (a BaseException): a bug, said in one line
            first = (str(exc).strip().splitlines() or [""])[0][:200]
            sys.stderr.write(f"traceq: internal error: polars panicked ({_safe(first)}); "
                             "rerun with --debug for the traceback\n")
            sys.exit(1)
        from .errors import TraceqError

        if isinstance(exc, TraceqError):
            sys.stderr.write(f"traceq: {_safe(str(exc))}\n")
            sys.exit(exc.exit_code)
        damaged = _damaged_store_file(exc)
        if damaged:
            sys.stderr.write(f"traceq: {_safe(damaged)}: store file is damaged ({type(exc).__name__}); "
                             "run `traceq doctor` to see what to re-ingest\n")
            sys.exit(1)
        sys.stderr.write(f"traceq: internal error: {type(exc).__name__}: {_safe(str(exc))} (rerun with --debug for the traceback)\n")
        sys.exit(1)


if __name__ == "__main__":   # `python -m traceq.cli`: run the module-level app, with every command
    from traceq.cli import main as _main

    _main()
