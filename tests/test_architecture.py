"""The shape of the package (docs/architecture.md): no import cycles between traceq's modules
(imports at module level, inside functions, or by importlib), no private name used across
modules, no module over 600 lines, advice that never imports the analyses, and an analysis
that is one module found by the registry."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "traceq"
MAX_LINES = 600


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _package_of(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = _package_of(module, path).split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str, path: Path) -> set[str]:
    """The traceq modules `module` imports anywhere in its text (the target of `from X import Y`
    is X.Y when that is a module, else X; `importlib.import_module("...")` with a literal too)."""
    tree = ast.parse(path.read_text(), str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, path, node)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            targets = [node.args[0].value]
        out |= {t for t in targets if t in MODULES and t != module}
    return out


def _graph() -> dict[str, set[str]]:
    graph = {m: _imports(m, p) for m, p in MODULES.items()}
    # the registry imports every analysis module by listing the package (importlib with a computed name)
    graph["traceq.analyses.registry"] |= {m for m in MODULES if m.startswith("traceq.analyses.")
                                         and m.rpartition(".")[2] not in ("spec", "registry")}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    import sys

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def test_the_graph_sees_function_level_and_importlib_imports():
    graph = _graph()
    # hotspots imports the category rules inside compute(), traceq/__init__ uses importlib
    assert "traceq.rules.categories" in graph["traceq.analyses.hotspots"]
    assert "traceq.api" in graph["traceq.__init__".replace(".__init__", "")]


def test_advice_never_imports_the_analyses():
    graph = _graph()
    for module, targets in graph.items():
        if module.startswith("traceq.advice"):
            bad = {t for t in targets if t.startswith(("traceq.analyses", "traceq.engine", "traceq.report"))}
            assert not bad, f"{module} imports {sorted(bad)}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_size(module):
    lines = len(MODULES[module].read_text().splitlines())
    assert lines <= MAX_LINES, f"{MODULES[module]}: {lines} lines (at most {MAX_LINES}: split it by concept)"


def _private_uses(module: str, path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    bad = []
    aliases = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = _resolve(module, path, node)
            if not base.startswith("traceq"):
                continue
            for a in node.names:
                if f"{base}.{a.name}" in MODULES:
                    aliases.add(a.asname or a.name)
                elif a.name.startswith("_") and not a.name.startswith("__"):
                    bad.append(f"from {base} import {a.name}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("traceq"):
                    aliases.add(a.asname or a.name.split(".")[0])
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            bad.append(f"{node.value.id}.{node.attr}")
    return bad


def test_no_private_name_used_across_modules():
    bad = {m: uses for m, p in MODULES.items() if (uses := _private_uses(m, p))}
    assert not bad, bad


def test_every_analysis_is_one_module_the_registry_finds():
    from traceq.analyses.registry import REGISTRY

    found = {p.stem for p in (PACKAGE / "analyses").glob("*.py")} - {"__init__", "spec", "registry"}
    assert set(REGISTRY) == found
    for name, spec in REGISTRY.items():
        assert spec.compute.__module__ == f"traceq.analyses.{name}"


def test_module_level_api_functions_stay_functions_once_the_analyses_are_loaded():
    """`traceq.sql(query, store)` and `traceq.<analysis>(store, ...)` are the Python API: no
    subpackage of the same name may replace them as attributes of the package."""
    import traceq
    import traceq.analyses.registry  # noqa: F401  (loads every analysis and what they import)
    from traceq.analyses.registry import REGISTRY

    for name in ("sql", "runs", "open_store", *REGISTRY):
        assert callable(getattr(traceq, name)), name
        assert f"traceq.{name}" not in MODULES, f"traceq/{name} is a module: it shadows traceq.{name}()"
