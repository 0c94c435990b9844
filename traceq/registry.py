"""One declared description per analysis, from which the CLI command, its `--help`, the
Python API method, the JSON shape and the terminal table are all derived.

Adding an analysis
------------------
1. Write its SQL in `traceq/queries/<name>.sql` (header comment: definition, parameters,
   output columns with units) and a Python function that runs it on a `Scope`
   (`traceq/analysis/<name>.py`), returning a polars DataFrame, or an `Out` when it has a
   headline, notes or more than one table.
2. Declare it in `traceq/analyses.py` (this module's `Analysis`; nothing heavy is imported
   there, so `traceq --help` stays fast)::

       Analysis(
           name="hotspots",                                   # CLI command, API method, JSON "analysis"
           help="Kernel hotspots: time per kernel name ...",  # first line = the one-line help
           examples=("traceq hotspots --top 10",),
           compute="traceq.views:hotspots",                   # (scope, **params) -> DataFrame | Out
           params=(Param("top", int, 20, "Show the N longest (0 = all).", "N", flags=("-n",)),),
           columns=(Column("total_ns", "summed duration", "ns"), ...),   # units + meaning (help, JSON)
           headline="traceq.analysis.hotspots:headline",      # (df, scope) -> str, when compute gives a frame
           sort=("total_ns desc",), drop_first=("stddev_ns", "min_ns", "max_ns"),
           report="Kernel hotspots",                          # title of its section in `traceq report`
                                                              # (traceq/report/sections.py; named in --help)
       )

   That is all: `traceq hotspots --help`, `traceq.open_store().hotspots(top=5)`, the JSON
   document `{"analysis", "run", "rank", "steps", "labels", "headline", "units", "rows"}` and the
   terminal table (numbers never cut: `drop_first` columns go first on a narrow terminal, named
   in a footnote; `--wide` keeps all) follow from the declaration.
3. Optional hooks, all "module:function" strings resolved lazily: `view` (Out -> terminal
   `Block`s, for several tables or reshaped rows), `json` (Result -> a custom JSON document,
   for analyses whose issue fixes the shape), `runs=2` (two positional runs, e.g. `diff`),
   `scope="run"` for an analysis of a whole run that takes no --rank/--steps (e.g. `ranks`: its
   `compute` is called as (store, run, **params) and returns an `Out` whose `value.run` names the run),
   `scope="store"` for one over many runs of the store (no --run; `compute(store, **params)`, e.g.
   `compare`, `model`, `check`), `per_rank=True` for an analysis that runs per rank on the executor
   for a run of several ranks (add `*EXECUTOR_PARAMS` to its params; its `compute` gets a scope for
   which `traceq.analysis.per_rank.mapped(scope)` is true and maps over the ranks there),
   `after` ((Result) -> exit status, called by the CLI once the output is written: warnings on
   stderr, `check`'s exit 1 on a failed gate).

Every parameter is declared once (`Param`): name (the Python keyword; the CLI option is
`--name-with-dashes`), type, default, help, metavar, short flags, choices (checked with a
one-line error), `argument=True` for a positional argument, `multiple=True` for a repeatable
option (or a variadic argument; the value is a list), `required=True` for an option without default.
"""
from __future__ import annotations

import importlib
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

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")

    def check(self, value):
        if self.choices and value is not None and value not in self.choices:
            from .errors import TraceqError

            raise TraceqError(f"{self.option} {value!r}: choose from {', '.join(self.choices)}")
        return value


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
    name: str
    help: str
    compute: str
    examples: tuple[str, ...] = ()
    params: tuple[Param, ...] = ()
    columns: tuple[Column, ...] = ()
    headline: str | None = None
    sort: tuple[str, ...] = ()
    drop_first: tuple[str, ...] = ()
    view: str | None = None
    json: str | None = None
    csv: str | None = None
    runs: int = 1
    report: str | None = None
    scope: str = "steps"          # "steps": --run/--rank/--steps...; "run": --run only; "store": no run
    after: str | None = None
    per_rank: bool = False        # a map over ranks on the executor for a run of several ranks
                                  # (traceq.analysis.per_rank): params include EXECUTOR_PARAMS

    def param(self, name: str) -> Param:
        return next(p for p in self.params if p.name == name)

    def doc(self) -> str:
        """The `--help` text: description, output columns with units, sort order, examples."""
        parts = [self.help.strip()]
        if self.columns:
            cols = "\n".join(f"  {c.name}{f' [{c.unit or unit_of(c.name)}]' if (c.unit or unit_of(c.name)) else ''}: {c.meaning}"
                             for c in self.columns)
            parts.append("Output columns:\n\n\b\n" + cols)
        if self.sort:
            parts.append("Rows sorted by " + ", ".join(self.sort) + ".")
        if self.report:
            parts.append(f"The HTML report (traceq report) shows it in the section \"{self.report}\".")
        if self.examples:
            parts.append(("Example:" if len(self.examples) == 1 else "Examples:") + "\n\n\b\n"
                         + "\n".join(f"  {e}" for e in self.examples))
        return "\n\n".join(parts)


def resolve(ref: str) -> Callable:
    mod, _, attr = ref.partition(":")
    return getattr(importlib.import_module(mod), attr)


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

    def rows_df(self, df=None):
        """The table with the run in every row (first column) — what JSON and CSV print."""
        import polars as pl

        frame = self.df if df is None else df
        if "run" in frame.columns or not isinstance(self.run, str):
            return frame
        return frame.select(pl.lit(self.run, pl.String).alias("run"), pl.all())

    def to_dict(self) -> dict:
        if self.analysis.json:
            return resolve(self.analysis.json)(self)
        doc = {"analysis": self.analysis.name, "run": self.run, "rank": self.rank, "steps": self.steps,
               "labels": self.labels, "headline": self.headline, "units": self.units(),
               "rows": self.rows_df().to_dicts()}
        for name, t in self.tables.items():
            doc[name] = self.rows_df(t).to_dicts()
        return doc

    def csv_tables(self) -> list:
        """(name, frame) pairs CSV prints: the main table, then each extra one after a `# name` line."""
        if self.analysis.csv:
            return resolve(self.analysis.csv)(self)
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


# the parameters of a per-rank analysis that choose where its tasks run (traceq.executor.resolve)
EXECUTOR_OPTIONS = ("executor", "scheduler", "scheduler_file", "jobs")


def compute(spec: Analysis, store=None, run=None, rank=None, steps=None, runs: tuple = (), *,
            step_pattern: str | None = None, skip_first: int = 0, **params) -> Result:
    """Run one analysis: open the scope(s), call the declared function, wrap the answer."""
    from .analysis.scope import open_scope

    for p in spec.params:
        if p.name not in params:
            if p.required:
                raise TypeError(f"{spec.name}() needs {p.name}=")
            params[p.name] = p.default
        p.check(params[p.name])
    fn = resolve(spec.compute)
    if spec.scope in ("run", "store"):
        got = fn(store, run, **params) if spec.scope == "run" else fn(store, **params)
        run_value = getattr(got.value, "run", run)
        return Result(spec, got.df, got.headline, run_value, None, None, {}, params, got.tables, got.notes,
                      got.highlight, got.value)
    if spec.runs == 2:
        a = open_scope(store, runs[0], rank, steps, step_pattern, skip_first)
        b = open_scope(a.store, runs[1], rank, steps, step_pattern, skip_first)
        got, scope, run_value, labels = fn(a, b, **params), a, [a.run, b.run], {a.run: run_labels(a), b.run: run_labels(b)}
    elif spec.per_rank:
        from .executor import resolve as resolve_executor

        ex = {k: params[k] for k in EXECUTOR_OPTIONS}
        scope = open_scope(store, run, rank, steps, step_pattern, skip_first, executor=resolve_executor(*ex.values()))
        mine = {k: v for k, v in params.items() if k not in ex}
        got, run_value, labels = fn(scope, **mine), scope.run, run_labels(scope)
    else:
        scope = open_scope(store, run, rank, steps, step_pattern, skip_first)
        got, run_value, labels = fn(scope, **params), scope.run, run_labels(scope)
    out = got if isinstance(got, Out) else Out(got)
    head = out.headline
    if head is None and spec.headline:
        head = resolve(spec.headline)(out.df, scope)
    return Result(spec, out.df, head, run_value, rank, steps, labels, params, out.tables, out.notes,
                  out.highlight, out.value)


def blocks(result: Result) -> list[Block]:
    """The terminal view: the declared `view` hook, or one table with headline and notes."""
    if result.analysis.view:
        return resolve(result.analysis.view)(result)
    return [Block(result.df, result.headline, notes=result.notes, highlight=result.highlight,
                  drop_first=result.analysis.drop_first)]
