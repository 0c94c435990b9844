"""The CLI command of every registered analysis, derived from its declaration
(traceq/analyses): options, metavars, --help text and output handling are the same for all.

Common options: --store DIR, --run NAME, --rank N, --steps A:B (analyses of two runs take
them as positional RUN_A RUN_B instead of --run), -f/--format table|json|csv (always the output
format), -o/--output FILE (write the output there instead of stdout), --wide (never drop
columns on a narrow terminal).

Aliases (ALIASES): a command that is an analysis with some parameters fixed, under the name the
users of another tool look for (`traceq kernels` = `traceq hotspots --window tb`).
"""
from __future__ import annotations

import inspect
import sys
from typing import Annotated, Optional

import typer

from .analyses.spec import Analysis, Param
from .cli_options import (AnalysisFormatOpt, OutputOpt, RankOpt, RunOpt, SkipFirstOpt, StepPatternOpt, StepsOpt,
                          StoreOpt, WideOpt)


def _common(spec: Analysis) -> list[tuple[str, object, object]]:
    """(name, annotation, default) of the options every analysis takes."""
    empty = inspect.Parameter.empty
    out: list[tuple[str, object, object]] = []
    if spec.runs == 2:
        out += [("run_a", Annotated[Optional[str], typer.Argument(help="Baseline run (A).", metavar="RUN_A",
                                                                  show_default=False)], None),
                ("run_b", Annotated[Optional[str], typer.Argument(help="Run compared with it (B).", metavar="RUN_B",
                                                                  show_default=False)], None),
                ("run_opt", Annotated[Optional[list[str]], typer.Option(
                    "--run", help="The runs as options, as every analysis names a run: --run A --run B "
                                  "(the same as RUN_A RUN_B).", metavar="NAME", show_default=False)], None)]
    out.append(("store", StoreOpt, None))
    if spec.scope == "store":
        return out
    if spec.runs == 1:
        out.append(("run", RunOpt, None))
    if spec.scope == "run":
        return out
    return out + [("rank", RankOpt, None), ("steps", StepsOpt, None), ("step_pattern", StepPatternOpt, None),
                  ("skip_first", SkipFirstOpt, 0)]


def _tail() -> list[tuple[str, object, object]]:
    return [("fmt", AnalysisFormatOpt, "table"), ("output", OutputOpt, None), ("wide", WideOpt, False)]


def _param(p: Param) -> tuple[str, object, object]:
    typ = list[p.type] if p.multiple else p.type
    if p.default is None and not p.required and not (p.argument and not p.multiple):
        typ = Optional[typ]
    if p.argument:
        info = typer.Argument(help=p.help, metavar=p.metavar, show_default=False)
    else:
        info = typer.Option(p.option, *p.flags, help=p.help, metavar=p.metavar, show_default=p.default is not None)
    empty = p.required or (p.argument and p.default is None and not p.multiple)
    return p.name, Annotated[typ, info], (inspect.Parameter.empty if empty else p.default)


def two_runs(command: str, a: str | None, b: str | None, named: list[str] | None) -> tuple[str, str]:
    """The two runs of `command`, positional (RUN_A RUN_B) and/or --run, in that order."""
    runs = [r for r in (a, b) if r is not None] + list(named or [])
    if len(runs) != 2:
        _usage(f"{command}: name two runs, the baseline first: RUN_A RUN_B or --run A --run B "
               f"({len(runs)} given)")
    return runs[0], runs[1]


def make_command(spec: Analysis):
    """A function typer turns into `traceq <spec.name>`: its signature is built from the spec."""
    params = _common(spec) + [_param(p) for p in spec.params] + _tail()

    def command(**kw) -> None:
        run_command(spec, kw)

    command.__name__ = spec.name
    command.__doc__ = spec.doc()
    command.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, annotation=a, default=d) for n, a, d in params])
    command.__annotations__ = {n: a for n, a, _ in params}
    return command


# Commands that are an analysis with some parameters fixed, under the name users of another tool
# look for: `traceq kernels` is `traceq hotspots --window tb`, the TensorBoard profiler plugin's
# Kernel view. {alias: (analysis, fixed parameters, common options it does not take, help, examples)}
ALIASES = {
    "kernels": ("hotspots", {"window": "tb"}, ("steps", "step_pattern", "skip_first"),
                "The TensorBoard profiler plugin's Kernel view (the same as `traceq hotspots --window tb`): "
                "every kernel of the trace, no copies or memsets, with its time, tensor-core use, blocks per SM "
                "and estimated achieved occupancy (duration-weighted means), and the advice for avoidable work. "
                "It covers the whole trace, as the plugin does, so it takes no step options (`traceq hotspots "
                "--steps A:B` picks steps).",
                ("traceq kernels --run resnet50 --top 20", "traceq kernels -f csv -o kernels.csv")),
}


def alias_spec(name: str) -> tuple[Analysis, dict] | None:
    """The declaration an alias command is made from (its analysis, less the fixed parameters,
    with the alias' name and help) and the fixed parameters; None when `name` is no alias."""
    from dataclasses import replace

    from .analyses.registry import REGISTRY

    if name not in ALIASES:
        return None
    analysis, fixed, _, help_text, examples = ALIASES[name]
    spec = REGISTRY[analysis]
    return replace(spec, name=name, help=help_text, examples=examples,
                   params=tuple(p for p in spec.params if p.name not in fixed)), fixed


def make_alias(name: str):
    """The command of an alias: the analysis' command with the fixed parameters set and the
    common options it does not take left out."""
    from .analyses.registry import REGISTRY

    shown, fixed = alias_spec(name)
    analysis, _, without, _, _ = ALIASES[name]
    spec = REGISTRY[analysis]
    command = make_command(shown)
    sig = command.__signature__
    params = [p for p in sig.parameters.values() if p.name not in without]

    def alias(**kw) -> None:
        run_command(spec, {**kw, **fixed})

    alias.__name__, alias.__doc__ = name, command.__doc__
    alias.__signature__ = sig.replace(parameters=params)
    alias.__annotations__ = {p.name: p.annotation for p in params}
    return alias


def register_all(app: typer.Typer) -> None:
    from .analyses.registry import REGISTRY

    for spec in REGISTRY.values():
        app.command(name=spec.name.replace("_", "-"), help=spec.doc())(make_command(spec))
    for name in ALIASES:
        app.command(name=name, help=alias_spec(name)[0].doc())(make_alias(name))


def run_command(spec: Analysis, kw: dict) -> None:
    from .errors import TraceqError
    from .analyses.registry import compute

    fmt, output, wide = kw.pop("fmt"), kw.pop("output"), kw.pop("wide")
    if fmt not in ("table", "json", "csv"):
        _usage(f"--format {fmt!r}: choose table, json or csv")
    for p in spec.params:
        try:
            p.check(kw.get(p.name))
        except TraceqError as exc:
            _usage(str(exc))
    runs = two_runs(spec.name, kw.pop("run_a"), kw.pop("run_b"), kw.pop("run_opt")) if spec.runs == 2 else ()
    result = compute(spec, runs=runs, **kw)
    if output:
        try:
            with open(output, "w", encoding="utf-8", newline="") as fh:
                write(result, fmt, fh, wide)
        except OSError as exc:
            raise TraceqError(f"cannot write: {exc.strerror}", output) from None
    else:
        write(result, fmt, sys.stdout, wide)
    if spec.after:
        code = spec.after(result)
        if code:
            raise typer.Exit(code)


def _usage(message: str) -> None:
    from .render import clean

    sys.stderr.write(f"traceq: {clean(message)}\n")
    raise typer.Exit(2)


def write(result, fmt: str, out, wide: bool = False) -> None:
    """Print one Result as table (terminal blocks), json (one document) or csv."""
    if fmt == "json":
        out.write(result.to_json() + "\n")
        return
    if fmt == "csv":
        for i, (name, df) in enumerate(result.csv_tables()):
            if name is not None:
                out.write(("\n" if i else "") + f"# {name}\n")
            out.write(df.write_csv())
        return
    from .analyses.registry import blocks
    from .render import console, emit, print_text

    for b in blocks(result):
        if b.lines is not None:
            con = console(file=out)
            for line in b.lines:
                print_text(con, line)
            continue
        emit(b.df, "table", headline=b.headline, title=b.title, highlight=b.highlight, notes=b.notes,
             file=out, drop_first=b.drop_first, wide=wide, max_rows=b.max_rows, more=b.more,
             undefined=b.undefined)
