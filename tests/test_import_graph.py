"""The package's import graph: no circles, whatever hides them.

Every import of the package's own modules counts: at module level, inside functions and
under ``TYPE_CHECKING``.  A circle hidden by an import inside a function still ties the two
modules together; one under ``TYPE_CHECKING`` still ties their types.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "agent_latency"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in (SRC / PACKAGE).rglob("*.py")}


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules that ``name`` imports (a package's ``from . import x`` names the
    module ``x`` where there is one, else the package)."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in known
                       else module for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if not target or target == name:
                continue
            found.add(target)
            # Importing a submodule runs its packages' __init__ first, unless the importer
            # sits inside them (then they are already running).
            package = target.rpartition(".")[0]
            while package and package in known and not name.startswith(package + "."):
                found.add(package)
                package = package.rpartition(".")[0]
    return found


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def _graph() -> dict[str, set[str]]:
    known = _modules()
    # A package's __init__ hands names on: importing it means importing what it re-exports,
    # so an edge to a package is an edge to its face only (counted like any module).
    return {name: _imports(name, path, known) for name, path in known.items()}


class TestImportGraph:
    """No module of the package takes part in an import circle."""

    def test_finds_the_modules(self) -> None:
        """The walk sees the package (a broken walk would pass vacuously)."""
        graph = _graph()
        assert len(graph) > 80
        llm = "agent_latency.instrumentation.llm"
        assert f"{llm}._call" in graph[f"{llm}._stream"]

    def test_no_circles(self) -> None:
        """Every import, in a function or under TYPE_CHECKING too, runs one way."""
        circles = _circles(_graph())
        assert circles == [], "\n".join(" <-> ".join(c) for c in circles)

    def test_budget_is_pure(self) -> None:
        """The budget engine imports nothing else of the package."""
        graph = _graph()
        outside = {f"{m} -> {t}" for m, targets in graph.items()
                   if m.startswith(f"{PACKAGE}.budget") for t in targets
                   if not t.startswith(f"{PACKAGE}.budget")}
        assert outside == set()

    def test_names_at_the_bottom(self) -> None:
        """semconv takes nothing from the package but the budget's names."""
        allowed = {f"{PACKAGE}.budget", f"{PACKAGE}.budget._interval"}
        assert _graph()[f"{PACKAGE}.semconv"] <= allowed

    def test_detects_a_circle(self) -> None:
        """The check itself finds a two-module loop."""
        assert _circles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]


def _imports_inside_functions_without_a_reason() -> list[str]:
    """Imports inside functions with no comment on their line or above their block."""
    found = []
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        lines = path.read_text().splitlines()
        seen: set[int] = set()
        for fn in ast.walk(ast.parse("\n".join(lines), str(path))):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno in seen:
                    continue
                seen.add(node.lineno)
                i = node.lineno - 1
                # The block of imports it stands in (blank lines inside it included).
                j = i
                while j > 0 and (lines[j - 1].strip().startswith(("import ", "from ", "#"))
                                 or (not lines[j - 1].strip() and j > 1
                                     and lines[j - 2].strip().startswith(
                                         ("import ", "from ", "#")))):
                    j -= 1
                    if lines[j].strip().startswith("#"):
                        break
                said = "#" in lines[i] or any(lines[k].strip().startswith("#")
                                               for k in range(j, i))
                if not said:
                    found.append(f"{path.relative_to(SRC)}:{node.lineno}: {lines[i].strip()}")
    return found


class TestImportsInsideFunctions:
    """An import inside a function says why it is there (start-up time, an optional library)."""

    def test_each_says_why(self) -> None:
        """Every one has a comment on its line or above its block."""
        assert _imports_inside_functions_without_a_reason() == []
