"""The registry: every analysis of traceq, collected from the modules of this package, and
the one way to run one.

    REGISTRY              {name: Analysis}, in declaration order (`Analysis.order`)
    compute(spec, ...)    open the scope(s), call the analysis, wrap the answer in a Result
    blocks(result)        the terminal view of a Result (its `view`, or one table)

A module of traceq/analyses that defines `ANALYSIS` is an analysis; `spec` and `registry`
are the package's own machinery. Modules are found by listing the package, so adding an
analysis touches its module, its SQL and its tests, and nothing else. Declarations import
nothing heavy (polars, DuckDB load when an analysis runs), so building the registry costs
a few milliseconds.
"""
from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from .spec import EXECUTOR_OPTIONS, Analysis, Block, Out, Result, run_labels

MACHINERY = frozenset({"spec", "registry"})


def _collect() -> dict[str, Analysis]:
    found = []
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if info.name in MACHINERY:
            continue
        spec = getattr(importlib.import_module(f"{__package__}.{info.name}"), "ANALYSIS", None)
        if isinstance(spec, Analysis):
            found.append(spec)
    found.sort(key=lambda a: (a.order, a.name))
    return {a.name: a for a in found}


REGISTRY: dict[str, Analysis] = _collect()


def compute(spec: Analysis, store=None, run=None, rank=None, steps=None, runs: tuple = (), *,
            step_pattern: str | None = None, skip_first: int = 0, **params) -> Result:
    """Run one analysis: open the scope(s), call the declared function, wrap the answer."""
    from ..engine.scope import open_scope

    for p in spec.params:
        if p.name not in params:
            if p.required:
                raise TypeError(f"{spec.name}() needs {p.name}=")
            params[p.name] = p.default
        p.check(params[p.name])
    fn = spec.compute
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
        from ..executor import resolve as resolve_executor

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
        head = spec.headline(out.df, scope)
    return Result(spec, out.df, head, run_value, rank, steps, labels, params, out.tables, out.notes,
                  out.highlight, out.value)


def blocks(result: Result) -> list[Block]:
    """The terminal view: the declared `view`, or one table with headline and notes."""
    if result.analysis.view:
        return result.analysis.view(result)
    return [Block(result.df, result.headline, notes=result.notes, highlight=result.highlight,
                  drop_first=result.analysis.drop_first)]
