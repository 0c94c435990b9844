"""The `traceq` command line. It only parses arguments and renders; the work is in the
Python API (`traceq.ingest`, `traceq.analyses`). Heavy libraries are imported inside the
commands so `traceq --help` stays fast.

Errors the user can act on print one line, `traceq: <file>: <problem>`, and exit 2;
`--debug` (anywhere on the command line, or TRACEQ_DEBUG=1) shows the traceback instead.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from typing import Annotated, Optional

import typer

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
        from . import __version__

        typer.echo(f"traceq {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                help="Show the version and exit.")] = False) -> None:
    pass


# ---------------------------------------------------------------- shared options
StoreOpt = Annotated[Optional[str], typer.Option("--store", help="Store folder (default ./.traceq or $TRACEQ_STORE).", show_default=False)]
RunOpt = Annotated[Optional[str], typer.Option("--run", help="Run to analyse (default: the most recently ingested).", show_default=False)]
RankOpt = Annotated[Optional[int], typer.Option("--rank", help="One rank (default: every rank of the run).", show_default=False)]
StepsOpt = Annotated[Optional[str], typer.Option("--steps", metavar="A:B", help="Steps A to B, both included, by the step numbers the tables show (ProfilerStep#N, else 0-based), e.g. 5:10, 7, 5:.", show_default=False)]
StepPatternOpt = Annotated[Optional[str], typer.Option("--step-pattern", metavar="REGEX", help="Steps are the regions (NVTX ranges, annotations) whose name matches REGEX; numbered by the last number in their names.", show_default=False)]
SkipFirstOpt = Annotated[int, typer.Option("--skip-first", metavar="N", help="Leave out the first N steps of each rank (warm-up).")]
FormatOpt = Annotated[str, typer.Option("--format", "-f", help="Output: table, json (list of row objects) or csv.")]


def fail(message: str, code: int = 2) -> None:
    sys.stderr.write(f"traceq: {message}\n")
    raise typer.Exit(code)


def warn(message: str) -> None:
    sys.stderr.write(f"traceq: warning: {message}\n")


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

        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(), transient=True,
                                 console=Console(stderr=True))
        self.per_file = {}
        if 1 < len(files) <= self.MAX_FILE_LINES:
            for path, _ in files:
                self.per_file[str(path)] = self.progress.add_task(f"  {path.name}", total=1)
        self.overall = self.progress.add_task(f"ingesting {len(files)} file(s)", total=len(files))
        self.progress.start()

    def update(self, event: str, path) -> None:
        task = self.per_file.get(str(path))
        if task is not None:
            self.progress.update(task, completed=1)
        self.progress.advance(self.overall)

    def stop(self) -> None:
        self.progress.stop()


ExecutorOpt = Annotated[Optional[str], typer.Option(
    "--executor", help="Where per-rank tasks run: local (process pool) or dask (Dask distributed; "
    "env TRACEQ_EXECUTOR).", show_default=False)]
SchedulerOpt = Annotated[Optional[str], typer.Option(
    "--scheduler", help="Dask scheduler address (env DASK_SCHEDULER_ADDRESS); default: a LocalCluster "
    "of --jobs workers.", show_default=False)]
SchedulerFileOpt = Annotated[Optional[str], typer.Option(
    "--scheduler-file", help="Dask scheduler file (env DASK_SCHEDULER_FILE), e.g. from dask-jobqueue or "
    "dask-mpi.", show_default=False)]


@app.command()
def ingest(
    paths: Annotated[list[str], typer.Argument(help="Trace files, or directories (one directory = the ranks of one run).", show_default=False)],
    store: StoreOpt = None,
    run: Annotated[Optional[str], typer.Option("--run", help="Run name (default: file stem, or directory name).", show_default=False)] = None,
    label: Annotated[Optional[list[str]], typer.Option("--label", help="key=value label for the run (repeatable), e.g. amp=on.", show_default=False)] = None,
    rank: Annotated[Optional[int], typer.Option("--rank", help="Rank of a single file (overrides what the file says).", show_default=False)] = None,
    fmt: Annotated[str, typer.Option("--format", help="Input format: auto, nsys, kineto, timer or deep500.")] = "auto",
    force: Annotated[bool, typer.Option("--force", help="Re-ingest files already in the store (replaces them).")] = False,
    jobs: Annotated[Optional[int], typer.Option("--jobs", "-j", help="Parallel workers for a directory (default: CPU count).", show_default=False)] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary table.")] = False,
    output: Annotated[str, typer.Option("--output", "-o", help="Summary as table, json or csv.")] = "table",
    recursive: Annotated[bool, typer.Option("--recursive", "-r", help="Ingest a whole experiment tree: every trace below DIR, grouped into runs by the parameters in their names (Extra-Deep style cifar10.p8.b64.r2.mpi3.sqlite, or --name-pattern).")] = False,
    name_pattern: Annotated[Optional[str], typer.Option("--name-pattern", help="With --recursive: regex with named groups read from file names; (?P<rank>..) is the rank, (?P<run>..) the run name, other groups become labels.", show_default=False)] = None,
    executor: ExecutorOpt = None,
    scheduler: SchedulerOpt = None,
    scheduler_file: SchedulerFileOpt = None,
) -> None:
    """Ingest nsys SQLite exports, Kineto/PyTorch traces (.json/.json.gz) or timer logs into the store.

    Re-ingesting the same file into the same run is a no-op; --force replaces it. A failed
    ingest leaves the store exactly as it was.

    Example: traceq ingest rank0.pt.trace.json.gz rank1.pt.trace.json.gz --run baseline --label amp=off
    """
    from .ingest.hashing import start_hashing

    hashes = start_hashing(paths)   # hashing runs on another core while the heavy imports load
    import polars as pl

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
        results = do_ingest(paths, store, run=run, labels=_labels(label), rank=rank, fmt=fmt, force=force,
                            jobs=jobs, on_progress=progress.update if progress else None, hashes=hashes,
                            assign=assign, executor=spec)
    finally:
        if progress is not None:
            progress.stop()
    for r in results:
        for w in r.warnings:
            warn(f"{r.path}: {w}")
        if r.note:
            sys.stderr.write(f"traceq: {r.path}: {r.note} (--force re-ingests it)\n")
    if quiet:
        return
    from .render import emit

    def shown(path: str) -> str:
        if output != "table":
            return path
        try:
            return os.path.relpath(path)
        except ValueError:
            return path

    df = pl.DataFrame([{"file": shown(r.path), "run": r.run, "rank": r.rank, "format": r.format, "status": r.status,
                        "gpu_ops": r.counts.get("gpu_ops"), "host_ops": r.counts.get("host_ops"),
                        "regions": r.counts.get("regions"), "timer_stats": r.counts.get("timer_stats")}
                       for r in results],
                      schema={"file": pl.String, "run": pl.String, "rank": pl.Int64, "format": pl.String, "status": pl.String,
                              "gpu_ops": pl.Int64, "host_ops": pl.Int64, "regions": pl.Int64, "timer_stats": pl.Int64})
    from .store import Store

    if output == "table" and not df["timer_stats"].fill_null(0).sum():
        df = df.drop("timer_stats")
    added = sum(r.status != "unchanged" for r in results)
    emit(df, output, headline=f"{added} of {len(results)} file(s) ingested into {Store(store).path}"
         + ("" if added == len(results) else f" ({len(results) - added} unchanged: already in the store; --force re-ingests)"))


# ---------------------------------------------------------------- runs / sql
@app.command()
def runs(store: StoreOpt = None, fmt: FormatOpt = "table") -> None:
    """List the runs in the store: ranks, source formats, devices, row counts, labels.

    Example: traceq runs --format json
    """
    from .analyses import runs as runs_df
    from .render import emit
    from .store import Store

    df = runs_df(store)
    emit(df, fmt, headline=f"{df.height} run(s) in {Store(store).path}")


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help="SQL over the views runs, gpu_ops, host_ops, regions, timer_stats.", show_default=False)],
    store: StoreOpt = None,
    fmt: FormatOpt = "table",
    allow_writes: Annotated[bool, typer.Option("--allow-writes", help="Also run statements that write (COPY … TO, CREATE, ATTACH, SET, INSTALL …), never into the store.")] = False,
) -> None:
    """Run SQL queries (DuckDB dialect) over the store's views. Read-only: statements other
    than queries are refused unless --allow-writes, and nothing may write into the store.

    Example: traceq sql "SELECT category, sum(end_ns - start_ns)/1e6 AS ms FROM gpu_ops GROUP BY 1 ORDER BY 2 DESC"
    """
    from .analyses import sql as run_sql
    from .render import emit

    emit(run_sql(query, store, allow_writes=allow_writes), fmt)


# ---------------------------------------------------------------- hotspots
@app.command()
def hotspots(
    store: StoreOpt = None,
    run: RunOpt = None,
    rank: RankOpt = None,
    steps: StepsOpt = None,
    step_pattern: StepPatternOpt = None,
    skip_first: SkipFirstOpt = 0,
    top: Annotated[int, typer.Option("--top", "-n", help="Show the N longest (0 = all).")] = 20,
    category: Annotated[Optional[str], typer.Option("--category", "-c", help="Only these categories, comma-separated (e.g. transpose,memset).", show_default=False)] = None,
    fmt: FormatOpt = "table",
) -> None:
    """Kernel hotspots: time per kernel name (nsys cuda_gpu_kern_sum semantics), its category,
    and advice for avoidable work (layout transposes, memsets, tiny-kernel swarms, pageable copies).

    Example: traceq hotspots --top 10 --category transpose,memset
    """
    import polars as pl

    from .analysis.hotspots import headline, hotspots_scoped
    from .analysis.scope import open_scope
    from .categories import CATEGORIES
    from .render import emit

    cats = [c.strip() for c in category.split(",") if c.strip()] if category else None
    if cats:
        unknown = [c for c in cats if c not in CATEGORIES]
        if unknown:
            fail(f"--category: unknown {', '.join(unknown)} (choose from {', '.join(CATEGORIES)})")
    scope = open_scope(store, run, rank, steps, step_pattern, skip_first)
    everything = hotspots_scoped(scope)
    full = everything.filter(pl.col("category").is_in(cats)) if cats else everything
    df = full.head(top) if top else full
    if fmt != "table":
        emit(df, fmt)
        return
    # short labels are made unique over every name of the run, so a filtered table reads the same
    from .kernels.labels import short_labels
    label = dict(zip(everything["name"], short_labels(everything["name"].to_list(), everything["identity"].to_list())))
    df = df.with_columns(identity=pl.col("name").replace_strict(label, default=None))
    shown = df.select("name", "identity", "category", "count", "total_ns", "pct", "mean_ns", "median_ns", "min_ns", "max_ns", "stddev_ns")
    advice = full.filter(pl.col("avoidable")).group_by("advice").agg(pl.col("total_ns").sum(), pl.col("category").first()).sort("total_ns", descending=True)
    notes = [f"advice [{r['category']}, {r['total_ns'] / 1e6:,.2f} ms]: {r['advice']}" for r in advice.iter_rows(named=True)]
    highlight = [i for i, a in enumerate(df["avoidable"]) if a]
    emit(shown, "table", headline=headline(everything, scope), highlight=highlight, notes=notes)


@app.command()
def doctor(store: StoreOpt = None) -> None:
    """Verify every file of the store's manifest (exists, readable, row counts as recorded) and
    say what to re-ingest. Exit 0 when the store is sound, 1 when something is damaged.

    Example: traceq doctor --store .traceq
    """
    from .doctor import check_store
    from .store import Store

    problems, checked = check_store(store)
    if problems.height == 0:
        sys.stdout.write(f"{Store(store).path}: store OK ({checked} files of "
                         f"{len(Store(store).manifest_rows())} ranks verified)\n")
        return
    for p in problems.iter_rows(named=True):
        sys.stderr.write(f"traceq: {p['file']}: {p['problem']} (run {p['run']!r} rank {p['rank']}, "
                         f"{p['table']}); repair: {p['reingest']}\n")
    raise typer.Exit(1)


# ---------------------------------------------------------------- more commands
# Command groups owned by other modules register themselves on `app` when imported.
for _mod in ("traceq.cli_analyses", "traceq.cli_regions", "traceq.cli_report", "traceq.cli_timer",
             "traceq.cli_experiments", "traceq.cli_ranks"):
    if importlib.util.find_spec(_mod) is not None:
        importlib.import_module(_mod)


def _damaged_store_file(exc: Exception) -> str | None:
    """The store file named by a DuckDB/Arrow read error (a corrupt or vanished Parquet file)."""
    import re

    if type(exc).__module__.split(".")[0] not in ("duckdb", "_duckdb", "pyarrow"):
        return None
    m = re.search(r"""["']([^"']+\.parquet)["']""", str(exc)) or re.search(r"(\S+\.parquet)", str(exc))
    return m.group(1) if m else None


def main() -> None:
    """Console entry point: one-line errors, exit code 2 for bad input, --debug for tracebacks."""
    debug = "--debug" in sys.argv or os.environ.get("TRACEQ_DEBUG") == "1"
    argv = [a for a in sys.argv[1:] if a != "--debug"]
    try:
        app(args=argv, prog_name="traceq", standalone_mode=True)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        sys.stderr.write("traceq: interrupted\n")
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001 - the single place that turns errors into one line
        from .errors import TraceqError

        if debug:
            raise
        if isinstance(exc, TraceqError):
            sys.stderr.write(f"traceq: {exc}\n")
            sys.exit(exc.exit_code)
        damaged = _damaged_store_file(exc)
        if damaged:
            sys.stderr.write(f"traceq: {damaged}: store file is damaged ({type(exc).__name__}); "
                             "run `traceq doctor` to see what to re-ingest\n")
            sys.exit(1)
        sys.stderr.write(f"traceq: internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)\n")
        sys.exit(1)


if __name__ == "__main__":   # `python -m traceq.cli`: run the module-level app, with every command
    from traceq.cli import main as _main

    _main()
