"""The import graph of ``src/marag``: no file imports another in a circle, and no module imports
from a floor above its own (ARCHITECTURE.md, "Package layout"). Every import statement counts,
including those inside functions and under ``TYPE_CHECKING``: a lazy import is still a
dependency. The graph is read from the source with ``ast``; nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "marag"

# Ground first. Units on one floor may import each other (the cycle check still applies); a unit
# is a top-level module or sub-package of marag, and "marag" is the package's own __init__
# (the public façade over api), so nothing inside may import from it.
FLOORS = [
    {"types", "config", "methods", "metrics", "version", "http", "jax_tf"},
    {"corpus", "datasets"},
    {"roles", "llm", "retrieval", "eval"},
    {"report", "workflows"},
    {"view", "api"},
    {"train"},
    {"web"},
    {"commands"},
    {"cli"},
    {"marag"},
]


def module_name(path: Path, package: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts).removesuffix(".__init__")


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """module -> the package modules it imports (the longest existing module of each name)."""
    files = {module_name(p, package): p for p in sorted(package.rglob("*.py"))}

    def resolve(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for mod, path in files.items():
        base = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                src = node.module or ""
                if node.level:
                    b = base
                    for _ in range(node.level - 1):
                        b = b.rpartition(".")[0]
                    src = f"{b}.{src}" if src else b
                # "from pkg import sub" imports the module pkg.sub; "from pkg import name", pkg
                names = [f"{src}.{a.name}" if f"{src}.{a.name}" in files else src
                         for a in node.names]
            else:
                continue
            for name in names:
                target = resolve(name) if name.split(".")[0] == package.name else None
                # A module's own enclosing sub-package __init__ runs first anyway: not an edge. The
                # top package's __init__ is the public façade, so importing from it is one.
                inside = target is not None and target != package.name and mod.startswith(
                    target + ".")
                if target and target != mod and not inside:
                    deps.add(target)
        graph[mod] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for start, first in graph.items():
        if start in index:
            continue
        work = [(start, iter(sorted(first)))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def floor_of(module: str) -> int:
    u = unit(module)
    for i, floor in enumerate(FLOORS):
        if u in floor:
            return i
    raise AssertionError(f"{module}: '{u}' is on no floor; add it to FLOORS (and ARCHITECTURE.md)")


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} -> {d}" for m, deps in graph.items() for d in deps
                  if floor_of(d) > floor_of(m))


def test_the_package_has_no_import_cycle():
    assert cycles(import_graph()) == []


def test_no_module_imports_from_a_floor_above_it():
    assert upward_imports(import_graph()) == []


def test_the_checks_catch_a_cycle_and_an_upward_import(tmp_path):
    pkg = tmp_path / "marag"
    (pkg / "retrieval").mkdir(parents=True)
    (pkg / "__init__.py").write_text("__version__ = '0'\n")
    (pkg / "retrieval" / "__init__.py").write_text("")
    (pkg / "retrieval" / "index.py").write_text("from marag.retrieval import bm25\n")
    # the cycle goes through a lazy import, and the version comes from the package's top
    (pkg / "retrieval" / "bm25.py").write_text(
        "def f():\n    from marag.retrieval.index import g\n    from marag import __version__\n")
    (pkg / "types.py").write_text("from .retrieval.bm25 import f\n")
    graph = import_graph(pkg)
    assert cycles(graph) == [["marag.retrieval.bm25", "marag.retrieval.index"]]
    assert upward_imports(graph) == ["marag.retrieval.bm25 -> marag",
                                     "marag.types -> marag.retrieval.bm25"]
