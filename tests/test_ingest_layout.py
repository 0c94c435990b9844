"""The shape of traceq/ingest, read from the source (AST): no module over 600 lines, no import
cycle between its modules (imports at module level and inside functions both count, and so
does importlib), and no private name (leading underscore) of one module imported or used by
another module of traceq."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "traceq"
INGEST = ROOT / "ingest"
MAX_LINES = 600


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in ROOT.rglob("*.py")}


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _resolve(name: str, node: ast.ImportFrom) -> str:
    """The absolute module a `from ... import` names (its package for a relative import)."""
    if not node.level:
        return node.module or ""
    base = name.split(".")
    if not _is_package(name):
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(name: str) -> list[tuple[str, str | None]]:
    """(module, imported name or None) of every import anywhere in the module, function bodies
    included; `from pkg import sub` names the submodule when there is one."""
    out: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(MODULES[name].read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = _resolve(name, node)
            for a in node.names:
                sub = f"{mod}.{a.name}"
                out.append((sub, None) if sub in MODULES else (mod, a.name))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "import_module" and node.args and isinstance(node.args[0], ast.Constant):
            out.append((str(node.args[0].value), None))   # importlib.import_module("traceq.ingest...")
    return out


def test_no_ingest_module_is_over_600_lines():
    long = {str(p.relative_to(ROOT)): n for p in INGEST.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long


def test_no_import_cycle_inside_ingest():
    inside = {m for m in MODULES if m == "traceq.ingest" or m.startswith("traceq.ingest.")}
    graph = {m: {t for t, _ in _imports(m) if t in inside and t != m} for m in inside}
    # Tarjan's strongly connected components: a component of more than one module is a cycle
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not cycles


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_private_name_crosses_an_ingest_module():
    """Private names of an ingest module stay in it, and an ingest module uses no private name
    of another traceq module."""
    found = []
    for name in MODULES:
        in_ingest = name == "traceq.ingest" or name.startswith("traceq.ingest.")
        tree = ast.parse(MODULES[name].read_text())
        aliases: dict[str, str] = {}   # local name -> traceq module it is bound to
        for mod, imported in _imports(name):
            target_ingest = mod == "traceq.ingest" or mod.startswith("traceq.ingest.")
            if imported is not None and _private(imported) and mod in MODULES and mod != name \
                    and (in_ingest or target_ingest):
                found.append(f"{name}: from {mod} import {imported}")
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                mod = _resolve(name, node)
                for a in node.names:
                    if f"{mod}.{a.name}" in MODULES:
                        aliases[a.asname or a.name] = f"{mod}.{a.name}"
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname and a.name in MODULES:
                        aliases[a.asname] = a.name
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and _private(node.attr):
                mod = aliases.get(node.value.id)
                if mod is not None and mod != name and (in_ingest or mod.startswith("traceq.ingest")):
                    found.append(f"{name}: {node.value.id}.{node.attr}")
    assert not found
