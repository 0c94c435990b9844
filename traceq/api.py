"""The Python API: `traceq.open_store(path)` and one method per analysis of the registry.

    import traceq
    s = traceq.open_store(".traceq")
    df = s.hotspots(run="baseline", top=10)     # a polars DataFrame, same parameters as the CLI
    df.headline                                 # the verdict line the CLI prints above the table
    r = s.result("hotspots", run="baseline")    # everything: r.df, r.headline, r.units(), r.to_json()

Each analysis method returns the table the CLI prints (all columns, as in JSON, without the
`run` column JSON adds) with the metadata of that answer set as attributes on the returned
frame: `headline`, `units` (column -> unit), `run`, `labels`, `tables` (the analysis' other
tables by name, e.g. stalls' `causes`). Polars operations make new frames without them (that is
why `result()` exists: a `Result` keeps them together). Parameters are the CLI's, as Python
keywords: `--min-gap-us 200` is `min_gap_us=200`; `diff` takes the two runs first.
"""
from __future__ import annotations

import inspect

from .analyses.spec import Analysis, Result


class TraceStore:
    """A traceq store opened for analysis (see the module docstring)."""

    def __init__(self, path=None):
        from .store import Store

        self.store = path if isinstance(path, Store) else Store(path)

    @property
    def path(self):
        return self.store.path

    def __repr__(self) -> str:
        return f"TraceStore({str(self.path)!r})"

    def __dir__(self):
        from .analyses.registry import REGISTRY

        return sorted({*super().__dir__(), *REGISTRY})

    def analyses(self) -> list[str]:
        from .analyses.registry import REGISTRY

        return list(REGISTRY)

    def result(self, name: str, *runs: str, run=None, rank=None, steps=None, step_pattern=None, skip_first=0,
               **params) -> Result:
        from .analyses.registry import REGISTRY
        from .errors import TraceqError

        if name not in REGISTRY:
            raise TraceqError(f"no analysis named {name!r} (analyses: {', '.join(REGISTRY)})")
        spec = REGISTRY[name]
        unknown = set(params) - {p.name for p in spec.params}
        if unknown:
            raise TypeError(f"{name}() got unexpected keyword argument(s): {', '.join(sorted(unknown))}")
        if spec.scope == "store" and run is not None:
            raise TypeError(f"{name}() works on the runs its parameters select: it takes no run")
        if spec.scope != "steps" and (rank is not None or steps is not None or step_pattern is not None or skip_first):
            raise TypeError(f"{name}() analyses the whole run: it takes no rank, steps, step_pattern or skip_first")
        if spec.runs == 2 and len(runs) != 2:
            raise TypeError(f"{name}() takes two runs (run_a, run_b)")
        from .analyses.registry import compute

        return compute(spec, self.store, run, rank, steps, runs=runs, step_pattern=step_pattern,
                       skip_first=skip_first, **params)

    def runs(self):
        from .engine.catalog import runs

        return runs(self.store)

    def sql(self, query: str):
        from .engine.catalog import sql

        return sql(query, self.store)

    def export(self, path, run=None, *, format="perfetto", rank=None, segments=None, findings=True):
        """`traceq export`: the run (default: the most recently ingested) as a Chrome-trace JSON
        at `path` (.gz: gzip); `segments`: a critical path to mark (traceq.export.path_marks).
        Returns what was written (traceq.export.run.Exported)."""
        from .export.run import export_run

        return export_run(self.store, run, path, format=format, rank=rank, segments=segments, findings=findings)

    def ingest(self, paths, **kw):
        from .ingest import ingest

        return ingest(paths, self.store, **kw)


def _frame(res: Result):
    df = res.df
    for attr, value in (("headline", res.headline), ("units", res.units()), ("run", res.run),
                        ("labels", res.labels), ("tables", res.tables), ("result", res)):
        object.__setattr__(df, attr, value)
    return df


def _method(spec: Analysis):
    def method(self, *runs, **kw):
        return _frame(self.result(spec.name, *runs, **kw))

    kw_only = inspect.Parameter.KEYWORD_ONLY
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)]
    if spec.runs == 2:
        params += [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in ("run_a", "run_b")]
    elif spec.scope != "store":
        params.append(inspect.Parameter("run", kw_only, default=None))
    if spec.scope == "steps":
        params += [inspect.Parameter("rank", kw_only, default=None), inspect.Parameter("steps", kw_only, default=None),
                   inspect.Parameter("step_pattern", kw_only, default=None),
                   inspect.Parameter("skip_first", kw_only, default=0)]
    params += [inspect.Parameter(p.name, kw_only, default=inspect.Parameter.empty if p.required else p.default)
               for p in spec.params]
    method.__signature__ = inspect.Signature(params)
    method.__name__ = method.__qualname__ = spec.name
    method.__doc__ = spec.doc().replace("\b\n", "")
    return method


def _install() -> None:
    from .analyses.registry import REGISTRY

    for spec in REGISTRY.values():
        setattr(TraceStore, spec.name, _method(spec))


_install()


def open_store(path=None) -> TraceStore:
    """Open the store at `path` (default ./.traceq or $TRACEQ_STORE) for analysis."""
    return TraceStore(path)


# ---------------------------------------------------------------- module-level aliases
def analysis_function(name: str):
    """`traceq.<name>(store, ...)`: the same as `traceq.open_store(store).<name>(...)`."""
    def function(store=None, *runs, **kw):
        return getattr(open_store(store), name)(*runs, **kw)

    method = getattr(TraceStore, name)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"traceq.{name}(store, ...) = traceq.open_store(store).{name}(...)\n\n{method.__doc__}"
    return function


def runs(store=None):
    """The runs in the store (`traceq runs`)."""
    return open_store(store).runs()


def sql(query: str, store=None, *, allow_writes: bool = False, strict: bool = False):
    """DuckDB SQL over the store's views (`traceq sql`); queries only unless `allow_writes`;
    `strict`: the store's tables only, no file a statement names (`traceq sql --strict`)."""
    from .engine.catalog import sql as run_sql

    return run_sql(query, open_store(store).store, allow_writes=allow_writes, strict=strict)
