"""Import-graph checks: no cycles among first-party packages, pure layers.

The graph is built by parsing every ``.py`` file of the first-party top-level
packages (those matched by ``[tool.setuptools.packages.find] include`` in
pyproject.toml that exist on disk) with :mod:`ast`.  Every ``import`` and
``from ... import`` statement counts, wherever it is: at module level, inside
functions or methods, inside ``try`` blocks, and in ``if TYPE_CHECKING:`` bodies
too (they never run, but a type named from the floor above is a dependency on
it all the same: a lower floor types what it is handed with a protocol of its
own, e.g. :class:`engine.config.view.RunView`).

``from pkg import name`` is resolved to the submodule ``pkg.name`` when that
submodule exists, otherwise to ``pkg`` itself.  Importing ``a.b.c`` also
imports ``a`` and ``a.b`` (their ``__init__`` run first), but those parent
edges are not added: a package's ``__init__`` importing its own children is
the normal shape and would make every package a cycle.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import tomllib
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]


def _first_party_packages() -> list[str]:
    """Top-level package dirs matched by pyproject's packages.find include."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = data["tool"]["setuptools"]["packages"]["find"]["include"]
    names = []
    for path in sorted(ROOT.iterdir()):
        if not (path / "__init__.py").is_file():
            continue
        if any(fnmatch.fnmatch(path.name, pat) for pat in patterns):
            names.append(path.name)
    return names


PACKAGES = _first_party_packages()


def _module_files() -> dict[str, Path]:
    """Map dotted module name -> file for every first-party module."""
    out: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


MODULES = _module_files()


def _is_type_checking(test: ast.expr) -> bool:
    """Whether an ``if`` test is ``TYPE_CHECKING`` / ``typing.TYPE_CHECKING``."""
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    if isinstance(test, ast.Attribute):
        return test.attr == "TYPE_CHECKING"
    return False


@functools.cache
def _scan() -> dict[str, list[tuple[ast.Import | ast.ImportFrom, bool]]]:
    """Map module -> (import statement, whether it is inside a function and not under ``if
    TYPE_CHECKING:``) for every import statement, ``if TYPE_CHECKING:`` bodies included: each
    file parsed once, on first use (not while pytest collects); the trees are not kept."""
    out: dict[str, list[tuple[ast.Import | ast.ImportFrom, bool]]] = {}
    for module, path in MODULES.items():
        found = out.setdefault(module, [])
        stack: list[tuple[ast.AST, bool, bool]] = [(ast.parse(path.read_text(), filename=str(path)), False, False)]
        while stack:  # (node, inside a function, under TYPE_CHECKING)
            node, inside, typing_only = stack.pop()
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.append((node, inside and not typing_only))
            typing_only = typing_only or (isinstance(node, ast.If) and _is_type_checking(node.test))
            inside = inside or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            stack.extend((child, inside, typing_only) for child in ast.iter_child_nodes(node))
    return out


def _targets(module: str, path: Path, node: ast.AST) -> list[str]:
    """Dotted names (first-party or not) that one import statement loads."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    assert isinstance(node, ast.ImportFrom)
    if node.level:
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{node.module}" if node.module else package
    else:
        base = node.module or ""
    out = []
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        out.append(sub if sub in MODULES else base)
    return out


@functools.cache
def _all_imports() -> dict[str, list[tuple[str, int]]]:
    """Map module -> [(imported dotted name, line)] for every import statement (:func:`_scan`)."""
    out: dict[str, list[tuple[str, int]]] = {}
    for module, imports in _scan().items():
        path = MODULES[module]
        out[module] = [(target, node.lineno) for node, _ in imports for target in _targets(module, path, node)]
    return out


def _resolve(name: str) -> str | None:
    """The first-party module a dotted name denotes (longest known prefix)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in MODULES:
            return candidate
        parts.pop()
    return None


def _graph() -> nx.DiGraph:
    """Directed first-party import graph; edges carry the importing lines."""
    graph = nx.DiGraph()
    graph.add_nodes_from(MODULES)
    for module, found in _all_imports().items():
        for name, line in found:
            target = _resolve(name)
            if target is None or target == module:
                continue
            if graph.has_edge(module, target):
                graph[module][target]["lines"].append(line)
            else:
                graph.add_edge(module, target, lines=[line])
    return graph


def test_packages_discovered():
    """The discovery finds every package of the project."""
    assert {"app", "engine", "actors", "backends", "topologies"} <= set(PACKAGES)
    assert "engine.config" in MODULES


def test_function_level_and_type_checking_imports_counted():
    """Imports inside functions are edges, and so are ``if TYPE_CHECKING:`` ones."""
    graph = _graph()
    assert graph.has_edge("app.cli", "actors.driver")  # imported inside main()
    assert graph.has_edge("engine.protocols.base", "engine.config.view")  # TYPE_CHECKING only


def test_exemptions_still_needed():
    """Every layer exemption matches an import that exists (drop stale ones)."""
    found = {(module, name.split(".")[0]) for module, names in _all_imports().items() for name, _ in names}
    stale = sorted(set(LAYER_EXEMPT) - found)
    assert not stale, f"LAYER_EXEMPT entries with no matching import: {stale}"


def test_no_import_cycles():
    """No strongly connected component of size > 1 in the import graph."""
    graph = _graph()
    problems = []
    for component in nx.strongly_connected_components(graph):
        if len(component) < 2:
            continue
        cycle = nx.find_cycle(graph.subgraph(component))
        hops = [f"    {src} -> {dst} (line {', '.join(map(str, graph[src][dst]['lines']))})" for src, dst in cycle]
        problems.append(
            f"  component of {len(component)} modules: {sorted(component)}\n  one cycle:\n" + "\n".join(hops)
        )
    assert not problems, "import cycles found:\n" + "\n\n".join(problems)


# Layering: the pure layers must not pull in Ray or the actor layer.
# Exemptions: (module, imported top-level name) -> reason. None today: the commands that start
# the driver (`debate run`, `debate sweep`) live in app/, the floor above actors/.
LAYER_EXEMPT: dict[tuple[str, str], str] = {}


# What the pure layers may import from backends/: the registry's metadata (names, capabilities,
# resource rules; backend classes load lazily from it) and the installed-vLLM probe. Neither
# loads a model library or Ray (test_backend_metadata_is_light).
# The modules that register the engine's own backends: the core imports backends.registry by name
# (engine/backend_registry.py, on the first lookup of a backend), never by an import statement.
REGISTRATION = (
    "backends.registry",
    "backends.installed",
    "backends.base",
    "backends.simulated_backend",
    "backends.openai_backend",
    "backends.preflight",
    "backends.model_store",
)


def _layer_violations(package: str, forbidden: set[str]) -> list[str]:
    """Import statements in ``package`` whose top-level name is forbidden."""
    bad = []
    for module, found in _all_imports().items():
        if module != package and not module.startswith(package + "."):
            continue
        for name, line in found:
            top = name.split(".")[0]
            if top in forbidden and (module, top) not in LAYER_EXEMPT:
                bad.append(f"  {module}:{line} imports {name}")
    return bad


def test_backend_registration_is_light():
    """The modules the core imports by name to register the built-in backends load no model
    library, no HTTP client and no Ray at import time: their module-level imports are the
    standard library, engine/ and each other."""
    import sys

    for module in REGISTRATION:
        tree = ast.parse(MODULES[module].read_text())
        for node in tree.body:
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target in _targets(module, MODULES[module], node):
                top = target.split(".")[0]
                ok = top in sys.stdlib_module_names or top == "engine" or _resolve(target) in REGISTRATION
                assert ok, f"{module} imports {target} at module level"


def test_topologies_layer_pure():
    """topologies/ imports neither ray nor the actor layer."""
    bad = _layer_violations("topologies", {"ray", "actors", "backends"})
    assert not bad, "topologies/ must stay pure:\n" + "\n".join(bad)


def test_nothing_below_imports_the_commands():
    """app/ (the commands) is the top floor: no module of another package imports it."""
    bad = [
        f"  {module}:{line} imports {name}"
        for module, found in _all_imports().items()
        if not module.startswith("app")
        for name, line in found
        if name.split(".")[0] == "app"
    ]
    assert not bad, "only app/ may import app/:\n" + "\n".join(bad)


def test_engine_layer_pure():
    """engine/ imports neither ray nor the actor layer, and of backends/ only its metadata."""
    bad = _layer_violations("engine", {"ray", "actors", "backends"})
    assert not bad, "engine/ must stay pure:\n" + "\n".join(bad)


def _function_level_imports():
    """(file, line, the file's lines, the node) of every import inside a function (TYPE_CHECKING
    bodies aside)."""
    for module, imports in _scan().items():
        path = MODULES[module]
        lines = path.read_text().splitlines()
        for node, in_function in imports:
            if in_function:
                yield path.relative_to(ROOT), node.lineno, lines, node


def test_function_level_imports_say_why():
    """An import inside a function is there to keep a slow import (Ray, torch, vLLM, pandas, ...)
    off start-up, and says so in a comment on it or on the line before; every other import is at
    module level, where a reader looks for a module's dependencies."""
    bare = []
    for path, line, lines, node in _function_level_imports():
        before = lines[line - 2].strip() if line > 1 else ""
        if "#" not in lines[line - 1] and not before.startswith("#"):
            bare.append(f"  {path}:{line}: {ast.unparse(node)}")
    assert not bare, "function-level imports without a comment saying why:\n" + "\n".join(bare)


# The floors, bottom to top: a package imports only packages below it (its own modules aside).
FLOORS = ("topologies", "engine", "backends", "actors", "app")
# (importing module, imported module) -> why it may reach a floor above
FLOOR_EXEMPT = {
    ("topologies.base", "engine.errors"): "TopologyError is a UserError: one error base under every floor",
}


def test_each_floor_imports_only_the_floors_below():
    """topologies < engine < backends < actors < app, every import counted (function-level and
    TYPE_CHECKING ones too); a new package must be placed here."""
    assert set(FLOORS) == set(PACKAGES), f"place every package on a floor: {sorted(set(PACKAGES) ^ set(FLOORS))}"
    up = []
    for module, found in _all_imports().items():
        here = FLOORS.index(module.split(".")[0])
        for name, line in found:
            target = _resolve(name)
            if target and FLOORS.index(target.split(".")[0]) > here and (module, target) not in FLOOR_EXEMPT:
                up.append(f"  {module}:{line} imports {target}")
    assert not up, "imports reaching a floor above:\n" + "\n".join(up)
