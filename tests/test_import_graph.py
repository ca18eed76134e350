"""The package's import graph: layers import one way (docs/architecture.md, "Imports run one way").

Every module of `fedbench/` is parsed with `ast`; module-level and function-level imports,
absolute and relative, all count (a lazy import inside a function is still a dependency).
Modules are grouped into layer nodes: each subpackage (`fedbench.algorithms`, `fedbench.engine`,
...) is one node, each top-level module (`fedbench.grid`, `fedbench.config`, ...) its own.
Registry entries (`"module:attribute"` strings, imported on first lookup) are not counted; each
names a module of its own package.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "fedbench"

# Layer pairs that must not import each other in this direction (docs/architecture.md).
FORBIDDEN = [
    ("fedbench.algorithms", "fedbench.engine"),
    ("fedbench.algorithms", "fedbench.outputs"),
    ("fedbench.models", "fedbench.algorithms"),
    ("fedbench.models", "fedbench.engine"),
    ("fedbench.data", "fedbench.algorithms"),
    ("fedbench.data", "fedbench.engine"),
    ("fedbench.metrics", "fedbench.engine"),
    ("fedbench.engine", "fedbench.report"),
    ("fedbench.engine", "fedbench.outputs"),
    ("fedbench.engine", "fedbench.grid"),
    # The report reads result files and draws: the output kinds hand it everything else.
    ("fedbench.report", "fedbench.engine"),
    ("fedbench.report", "fedbench.grid"),
    ("fedbench.report", "fedbench.config"),
    ("fedbench.report", "fedbench.outputs"),
    ("fedbench.report", "fedbench.cells"),
    # The kinds build on the grid's cells; the grid asks the kinds, never the reverse.
    ("fedbench.outputs", "fedbench.grid"),
    ("fedbench.cells", "fedbench.grid"),
    ("fedbench.cells", "fedbench.outputs"),
]


# docs/architecture.md's layers, top to bottom: a module imports only from layers below its own.
# (fedbench itself holds only __version__; fedbench.worker is the adapters' standard-library
# front door and imports nothing of fedbench at module level.)
LAYERS = [
    ("fedbench.__main__",),
    ("fedbench.cli",),
    (
        "fedbench.jobs",
        "fedbench.record",
        "fedbench.cost",
        "fedbench.worker",
        "fedbench.advice",
        "fedbench.testing",
        "fedbench.scaffold",
    ),
    ("fedbench.claims",),
    ("fedbench.grid",),
    ("fedbench.outputs",),
    ("fedbench.cells", "fedbench.report"),
    ("fedbench.config",),
    ("fedbench.engine",),
    ("fedbench.algorithms",),
    ("fedbench.data", "fedbench.models", "fedbench.metrics", "fedbench.papers"),
    ("fedbench.objectives", "fedbench.incentive_game", "fedbench.landscape_file"),
    ("fedbench.tree", "fedbench.rng", "fedbench.io", "fedbench.registry", "fedbench.gpu"),
    ("fedbench",),
]


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _imports(name: str, path: Path) -> set[str]:
    """Every module `name` imports, absolute names, `from a import b` as `a.b` too."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def _node(module: str) -> str:
    """The layer node of a `fedbench` module: its subpackage, or the top-level module itself."""
    parts = module.split(".")
    return ".".join(parts[:2])


def module_edges() -> dict[tuple[str, str], list[tuple[str, str]]]:
    """(importer node, imported node) -> the (importing module, imported module) pairs behind it."""
    modules = _modules()
    edges: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for name, path in modules.items():
        for target in sorted(_imports(name, path)):
            if target.split(".")[0] == "snakemake":
                edges[(_node(name), "snakemake")].append((name, target))
            if target in modules and target != name:
                src, dst = _node(name), _node(target)
                if src != dst:
                    edges[(src, dst)].append((name, target))
    return edges


EDGES = module_edges()
NODES = sorted({n for edge in EDGES for n in edge})


def _reach(start: str) -> set[str]:
    """Every node reachable from `start` in one or more steps."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        a = todo.pop()
        for x, b in EDGES:
            if x == a and b not in seen:
                seen.add(b)
                todo.append(b)
    return seen


def _cycles() -> set[frozenset[str]]:
    """The node sets of the graph's cycles (its strongly connected components of 2+ nodes)."""
    reach = {n: _reach(n) for n in NODES}
    return {
        frozenset(m for m in NODES if m in reach[n] and n in reach[m])
        for n in NODES
        if n in reach[n]
    }


def _because(a: str, b: str) -> str:
    return ", ".join(f"{src} imports {dst}" for src, dst in sorted(set(EDGES[(a, b)])))


def _describe(cycle: frozenset[str]) -> str:
    """`cycle`'s nodes and one closed path through them, each step with the imports behind it."""
    start = min(cycle)
    parents, todo = {start: None}, [start]
    while todo:  # breadth first, back to `start`
        a = todo.pop(0)
        for x, b in sorted(EDGES):
            if x != a or b not in cycle:
                continue
            if b == start:
                path = [a]
                while parents[path[-1]] is not None:
                    path.append(parents[path[-1]])
                path = [*reversed(path), start]
                steps = (f"  {x} -> {y}: {_because(x, y)}" for x, y in zip(path, path[1:]))
                head = f"{' -> '.join(path)} (cycle among {', '.join(sorted(cycle))})"
                return "\n".join([head, *steps])
            if b not in parents:
                parents[b] = a
                todo.append(b)
    raise AssertionError(cycle)


def _offenders(a: str, b: str) -> str:
    return f"{a} -> {b}: {_because(a, b)}" if (a, b) in EDGES else ""


def test_parser_sees_absolute_relative_and_function_level_imports(tmp_path):
    pkg = tmp_path / "fedbench" / "report"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    mod = pkg / "x.py"
    mod.write_text(
        "import fedbench.io\n"
        "from . import tables\n"
        "def f():\n"
        "    from ..engine.loop import run_rounds\n"
        "    from fedbench import grid\n"
    )
    found = _imports("fedbench.report.x", mod)
    assert {
        "fedbench.io",
        "fedbench.report.tables",
        "fedbench.engine.loop",
        "fedbench.grid",
    } <= found
    assert ("fedbench.engine", "fedbench.algorithms") in EDGES  # the graph is not empty


def test_no_package_cycles():
    found = [_describe(c) for c in sorted(_cycles(), key=sorted)]
    assert not found, "import cycle between packages:\n" + "\n".join(found)


def test_no_module_cycles():
    """Within a package too: no module reaches itself (a TYPE_CHECKING import counts)."""
    modules = _modules()
    graph = {n: {t for t in _imports(n, p) if t in modules and t != n} for n, p in modules.items()}
    reach = {m: _closure(graph, m) for m in graph}
    cycles = {
        " <-> ".join(sorted(m for m in reach[start] if start in reach[m]))
        for start in graph
        if start in reach[start]
    }
    assert not cycles, "import cycle between modules:\n" + "\n".join(sorted(cycles))


def _closure(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for b in graph[todo.pop()] - seen:
            seen.add(b)
            todo.append(b)
    return seen


def test_every_import_goes_down_the_documented_layers():
    level = {node: i for i, layer in enumerate(LAYERS) for node in layer}
    nodes = {_node(m) for m in _modules()}
    assert nodes == set(level), "add the new module to LAYERS and docs/architecture.md"
    up = [_offenders(a, b) for a, b in sorted(EDGES) if b in level and level[a] >= level[b]]
    assert not up, "import against the layers:\n" + "\n".join(up)


@pytest.mark.parametrize(("importer", "imported"), FORBIDDEN)
def test_forbidden_edge_absent(importer, imported):
    assert (importer, imported) not in EDGES, "forbidden import " + _offenders(importer, imported)


def test_no_module_imports_snakemake():
    bad = [_offenders(a, b) for a, b in sorted(EDGES) if b == "snakemake"]
    assert not bad, "fedbench must run without Snakemake:\n" + "\n".join(bad)


def test_tree_is_the_bottom_layer():
    bad = [_offenders(a, b) for a, b in sorted(EDGES) if a == "fedbench.tree"]
    assert not bad, "fedbench.tree must import nothing of fedbench:\n" + "\n".join(bad)
