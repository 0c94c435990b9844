"""Typer's option coercion without pydantic for plain `str`/`int`/`float`/`bool` parameters.

Typer (>= 0.2x) coerces every command-line value through a pydantic `TypeAdapter`, built when
the command runs: importing pydantic and building the adapters costs ~0.1-0.2 s per command,
a third of an analysis command's whole run on a small trace.
`install()` wraps typer's `build_runtime_param` so that a value of the declared type, or a
string that plainly spells an integer / a decimal number, is converted directly; anything
else (a malformed number, a path, a choice, a parser, min/max bounds) goes to typer's own
pydantic-backed coercion, so errors and edge cases read exactly as typer's own. On a typer
without this hook (older versions, no pydantic) `install()` does nothing.
"""
from __future__ import annotations

import re
import sys

_INT = re.compile(r"\s*[+-]?[0-9]+\s*")
_FLOAT = re.compile(r"\s*[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*")
_PLAIN = (str, int, float, bool)


def _fast(annotation, value):
    """The coerced value, or NotImplemented when typer's own coercion must decide."""
    if type(value) is annotation:
        return value
    if isinstance(value, bytes) or not isinstance(value, str):
        return NotImplemented
    if annotation is str:
        return value
    if annotation is int and _INT.fullmatch(value):
        return int(value)
    if annotation is float and _FLOAT.fullmatch(value):
        return float(value)
    return NotImplemented


def _leaf(annotation):
    """The plain type a runtime param handles directly (list[T] -> T), else None."""
    args = getattr(annotation, "__args__", None)
    if getattr(annotation, "__origin__", None) is list and args and len(args) == 1:
        annotation = args[0]
    return annotation if annotation in _PLAIN else None


def install() -> None:
    core = sys.modules.get("typer.core")
    if core is None or getattr(core.build_runtime_param, "traceq_fast", False):
        return
    try:
        from typer._coercion import RuntimeParam
    except ImportError:
        return
    original = core.build_runtime_param

    class FastRuntimeParam(RuntimeParam):
        """Direct conversion of plain values; typer's runtime param for the rest (built lazily)."""

        def _coerce_value(self, value, param, ctx):
            leaf = _leaf(self.annotation)
            if leaf is not self.annotation:       # list[T]: a list or tuple of values
                if isinstance(value, (list, tuple)):
                    out = [_fast(leaf, v) for v in value]
                    if not any(v is NotImplemented for v in out):
                        return out
            else:
                out = _fast(leaf, value)
                if out is not NotImplemented:
                    return out
            slow = self.__dict__.get("_slow")
            if slow is None:
                slow = original(self.__dict__["_descriptor"])
                object.__setattr__(self, "_slow", slow)
            return slow._coerce_value(value, param=param, ctx=ctx)

    def build_runtime_param(descriptor):
        info = descriptor.parameter_info
        plain = (descriptor.file_annotation is None and _leaf(descriptor.annotation) is not None
                 and getattr(info, "parser", None) is None
                 and all(getattr(info, a, None) in (None, False) for a in ("min", "max", "clamp", "path_type"))
                 and not any(getattr(info, a, False) for a in ("exists", "resolve_path")))
        if not plain:
            return original(descriptor)
        rp = FastRuntimeParam(parameter_info=info, annotation=descriptor.annotation)
        object.__setattr__(rp, "_descriptor", descriptor)
        return rp

    build_runtime_param.traceq_fast = True
    core.build_runtime_param = build_runtime_param
