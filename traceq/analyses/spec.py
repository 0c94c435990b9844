"""What an analysis declares, and what it returns.

Every analysis module of traceq/analyses ends with one `ANALYSIS = Analysis(...)`: its name (the
CLI command and Python API method), help text, parameters (`Param`), output columns
(`Column`, with units), sort order, and the functions that compute and show it. The registry
(traceq/analyses/registry.py) collects them; the CLI, the Python API, the JSON/CSV documents,
the terminal tables and the HTML report's sections are derived from them (see
docs/architecture.md, "How to add an analysis").

Nothing heavy is imported here: `traceq --help` imports every declaration.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class Param:
    name: str
    type: type = str
    default: Any = None
    help: str = ""
    metavar: str | None = None
    flags: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()
    argument: bool = False
    multiple: bool = False
    required: bool = False
    min: int | None = None       # the smallest value allowed (numbers)

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")

    def check(self, value):
        from ..errors import TraceqError

        if self.choices and value is not None and value not in self.choices:
            raise TraceqError(f"{self.option} {value!r}: choose from {', '.join(self.choices)}")
        if self.min is not None and value is not None and not isinstance(value, (list, tuple)) and value < self.min:
            raise TraceqError(f"{self.option} {value}: must be {self.min} or more"
                              + (" (0 = all)" if self.name == "top" else ""))
        return value


def top_param(default: int, help: str) -> Param:
    """`--top N` / `-n N`, the same in every analysis: N >= 0, 0 = all (a negative N is refused)."""
    return Param("top", int, default, help, "N", flags=("-n",), min=0)


@dataclass(frozen=True)
class Column:
    name: str
    meaning: str
    unit: str | None = None      # None: derived from the name's suffix (see unit_of)


def unit_of(column: str) -> str | None:
    """The unit a column name carries: `_ns` ns, `pct`/`_pct` %, `_s` s, `_bytes` bytes."""
    if column.endswith("_ns"):
        return "ns"
    if column == "pct" or column.endswith("_pct"):
        return "%"
    if column.endswith("_s"):
        return "s"
    if column.endswith("_bytes"):
        return "bytes"
    return None


# Tables with a row per step, gap or instance grow with the trace: the terminal shows the
# first TABLE_ROWS of them (Block.max_rows) and says so; JSON and CSV hold every row.
TABLE_ROWS = 200
# what a cut table of one row per step says after its count (Block.more)
STEPS_HINT = ", --steps A:B picks steps"


@dataclass
class Block:
    """One table as the terminal shows it (JSON/CSV never see a Block)."""
    df: Any = None
    headline: str | None = None
    title: str | None = None
    notes: list[str] = field(default_factory=list)
    highlight: list[int] = field(default_factory=list)
    drop_first: tuple[str, ...] = ()
    lines: list[str] | None = None     # text instead of a table (e.g. "no GPU ops")
    # a table of one row per step or gap grows with the trace: the terminal shows its first
    # `max_rows` rows and says how many there are and how to get them all (`more`: a hint)
    max_rows: int | None = None
    more: str = ""
    undefined: tuple[str, ...] = ()    # columns whose null is shown as render.UNDEFINED (reason in notes)


@dataclass
class Out:
    """What an analysis function returns when a bare DataFrame is not enough."""
    df: Any
    headline: str | None = None
    tables: dict = field(default_factory=dict)     # more tables, by name (JSON keys, Result.tables)
    notes: list[str] = field(default_factory=list)
    highlight: list[int] = field(default_factory=list)
    value: Any = None                               # the analysis' own object (e.g. Stalls)


@dataclass(frozen=True)
class Analysis:
    """One analysis, declared in its module (traceq/analyses/<name>.py) as `ANALYSIS`.

    compute   (scope, **params) -> DataFrame | Out; with scope="run" (store, run, **params),
              with scope="store" (store, **params), with runs=2 (scope_a, scope_b, **params)
    view      (Result) -> [Block]: the terminal tables, when one table with its headline is not it
    json      (Result) -> object: the JSON document, when its shape is fixed by an interface
    csv       (Result) -> [(name | None, DataFrame)]: the CSV tables, likewise
    headline  (df, scope) -> str, when `compute` returns a bare DataFrame
    after     (Result) -> exit status, called by the CLI once the output is written
    report    the title of its section in `traceq report` (named in --help)
    report_section  (RunReport) -> [Section]: that section of one run's report part
    order     where the command is listed (and its report section, unless report_order says)
    tables    ((name, columns), ...): the output columns of its further tables (Out.tables, by the
              name JSON gives them), documented in --help and the docs like `columns`
    """
    name: str
    help: str
    compute: Callable
    examples: tuple[str, ...] = ()
    params: tuple[Param, ...] = ()
    columns: tuple[Column, ...] = ()
    headline: Callable | None = None
    sort: tuple[str, ...] = ()
    drop_first: tuple[str, ...] = ()
    view: Callable | None = None
    json: Callable | None = None
    csv: Callable | None = None
    runs: int = 1
    report: str | None = None
    report_section: Callable | None = None
    scope: str = "steps"          # "steps": --run/--rank/--steps...; "run": --run only; "store": no run
    after: Callable | None = None
    per_rank: bool = False        # a map over ranks on the executor for a run of several ranks
                                  # (traceq.engine.per_rank): params include EXECUTOR_PARAMS
    order: int = 100
    report_order: int | None = None   # where its report section goes, when not at `order`
    tables: tuple[tuple[str, tuple[Column, ...]], ...] = ()

    def param(self, name: str) -> Param:
        return next(p for p in self.params if p.name == name)

    def doc(self) -> str:
        """The `--help` text: description, output columns with units, sort order, examples."""
        parts = [self.help.strip()]
        if self.columns:
            parts.append("Output columns:\n\n\b\n" + _column_lines(self.columns))
        for name, columns in self.tables:
            parts.append(f"Table {name}:\n\n\b\n" + _column_lines(columns))
        if self.sort:
            parts.append("Rows sorted by " + ", ".join(self.sort) + ".")
        if self.report:
            parts.append(f"The HTML report (traceq report) shows it in the section \"{self.report}\".")
        if self.examples:
            parts.append(("Example:" if len(self.examples) == 1 else "Examples:") + "\n\n\b\n"
                         + "\n".join(f"  {e}" for e in self.examples))
        return "\n\n".join(parts)


def _column_lines(columns) -> str:
    return "\n".join(f"  {c.name}{f' [{c.unit or unit_of(c.name)}]' if (c.unit or unit_of(c.name)) else ''}: {c.meaning}"
                     for c in columns)


@dataclass
class Result:
    """One analysis result: the main table, its headline and scope, and how JSON shows it."""
    analysis: Analysis
    df: Any
    headline: str | None
    run: str | list[str]
    rank: int | None
    steps: str | None
    labels: dict
    params: dict
    tables: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    highlight: list[int] = field(default_factory=list)
    value: Any = None

    def units(self, df=None) -> dict[str, str]:
        declared = {c.name: c.unit for c in self.analysis.columns if c.unit}
        frame = self.df if df is None else df
        out = {}
        for col in frame.columns:
            u = declared.get(col) or unit_of(col)
            if u:
                out[col] = u
        return out

    def _repr_html_(self) -> str:
        """A notebook's view: the headline and notes (escaped) above the main table and each
        further table (polars' HTML, its cells escaped), rows as JSON has them."""
        import html

        parts = [f"<p><b>{html.escape(self.analysis.name)}</b></p>"]
        parts += [f"<pre>{html.escape(line)}</pre>" for line in (self.headline or "").splitlines() if line]
        parts.append(self.rows_df()._repr_html_())
        for name, t in self.tables.items():
            if hasattr(t, "_repr_html_"):
                parts += [f"<p><b>{html.escape(str(name))}</b></p>", t._repr_html_()]
        parts += [f"<p>{html.escape(n)}</p>" for n in self.notes]
        return "\n".join(parts)

    def rows_df(self, df=None):
        """The table with the run in every row (first column) — what JSON and CSV print."""
        import polars as pl

        frame = self.df if df is None else df
        if "run" in frame.columns or not isinstance(self.run, str):
            return frame
        return frame.select(pl.lit(self.run, pl.String).alias("run"), pl.all())

    def to_dict(self) -> dict:
        if self.analysis.json:
            return self.analysis.json(self)
        doc = {"analysis": self.analysis.name, "run": self.run, "rank": self.rank, "steps": self.steps,
               "labels": self.labels, "headline": self.headline, "units": self.units(),
               "rows": self.rows_df().to_dicts()}
        for name, t in self.tables.items():
            doc[name] = self.rows_df(t).to_dicts()
        return doc

    def csv_tables(self) -> list:
        """(name, frame) pairs CSV prints: the main table, then each extra one after a `# name` line."""
        if self.analysis.csv:
            return self.analysis.csv(self)
        return [(None, self.rows_df()), *((n, self.rows_df(t)) for n, t in self.tables.items())]

    def to_json(self) -> str:
        import json

        return json.dumps(self.to_dict(), default=str, indent=1, ensure_ascii=False)


def run_labels(scope) -> dict:
    import json

    row = scope.con.execute("SELECT any_value(labels) FROM runs WHERE run = $run", {"run": scope.run}).fetchone()
    try:
        return json.loads(row[0]) if row and row[0] else {}
    except ValueError:
        return {}




# ---------------------------------------------------------------- parameters several analyses take
WINDOW = Param("window", str, "all",
               "all: every kernel, memcpy and memset, exact ns (traceq's definition). hta: HTA 0.5.0's window "
               "(ops launched before the last ProfilerStep), its kernel classification and its µs rounding, "
               "to reproduce HTA's numbers.", "all|hta", flags=("-w",), choices=("all", "hta"))


EXECUTOR_HELP = ("Where per-rank tasks run: local (process pool) or dask (Dask distributed; "
                 "env TRACEQ_EXECUTOR).")
SCHEDULER_HELP = ("Dask scheduler address (env DASK_SCHEDULER_ADDRESS); default: a LocalCluster "
                  "of --jobs workers.")
SCHEDULER_FILE_HELP = ("Dask scheduler file (env DASK_SCHEDULER_FILE), e.g. from dask-jobqueue or "
                       "dask-mpi.")


EXECUTOR_PARAMS = (Param("executor", str, None, EXECUTOR_HELP, "local|dask"),
                   Param("scheduler", str, None, SCHEDULER_HELP, "ADDRESS"),
                   Param("scheduler_file", str, None, SCHEDULER_FILE_HELP, "FILE"),
                   Param("jobs", int, None, "Workers for the per-rank tasks.", "N", flags=("-j",)))


WHERE = Param("where", str, None, "Label selector k=v[,k=v...] (e.g. app=cifar10,b=64).", "K=V[,K=V]")

# the parameters of a per-rank analysis that choose where its tasks run (traceq.executor.resolve)
EXECUTOR_OPTIONS = ("executor", "scheduler", "scheduler_file", "jobs")


def cols(*lines: str) -> tuple[Column, ...]:
    """Columns written as "name: meaning" lines (the unit from the name's suffix)."""
    return tuple(Column(*(s.strip() for s in line.split(":", 1))) for line in lines)


def sql_columns(name: str, *extra: Column) -> tuple[Column, ...]:
    """The output columns declared in the header of traceq/queries/<name>.sql, then `extra`."""
    from ..queries import output_columns

    return (*(Column(c, m) for c, m in output_columns(name)), *extra)
