"""The package's floors hold: every import runs downwards, none runs in a circle, and the
scripts that run in other interpreters import only what is there.

Read from the source (``ast``), not by importing it: a function-local import counts too.
"""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

import pytest

from specsweep.testing.workflow import REPO

PACKAGE = REPO / "specsweep"

#: Each room of the package (a subpackage, or a top-level module) on its floor, from the ground up
#: (docs/design.md, "Layers"). An import from one room into another must go to a lower floor.
FLOORS = {
    "specsweep": 0,  # the package's face (HARNESS_VERSION)
    "contracts": 0,
    "files": 1, "records": 1, "refengine": 1,
    "warmup": 2, "engines": 2,
    "plan": 3, "images": 3, "analysis": 3,
    "serve": 4, "report": 4,
    "workflow": 5,
    "testing": 6,  # the tests' factories and drivers: they may run any stage, the workflow's adapters too
    "__main__": 6,
}

#: Scripts run by path in another interpreter (a server's environment, an image, SGLang's pinned venv),
#: where the package may be absent: the top-level modules each may import besides the standard library.
PROBES = {
    "specsweep/serve/provenance.py": set(),  # piped into `python -` inside any container
    "specsweep/serve/guard.py": set(),
    "specsweep/serve/watchdog.py": set(),
    # the micro-benchmark: torch; the reference engine's own communicators and model with --runner refengine,
    # imported in that runner only (they exist wherever that engine runs)
    "specsweep/serve/allreduce_bench.py": {"torch", "specsweep.refengine.multirank", "specsweep.refengine.config",
                                           "specsweep.refengine.model"},
    "specsweep/engines/sglang/parse_check.py": {"sglang"},
    "specsweep/engines/sglang/model_check.py": {"sglang"},
}


def _module(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in sorted(PACKAGE.rglob("*.py"))}


@functools.cache
def _imports(path: Path, top_level_only: bool = False) -> list[tuple[str, int]]:
    """(module, line) of every absolute import in ``path``; with ``top_level_only``, those that run when
    the module is imported (not those inside a function)."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if top_level_only and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, ast.Import):
                found.extend((alias.name, child.lineno) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                found.append((child.module, child.lineno))
                # `from specsweep.serve import client` imports the module specsweep.serve.client
                found.extend((f"{child.module}.{a.name}", child.lineno) for a in child.names
                             if f"{child.module}.{a.name}" in MODULES)
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return found


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _package_imports(top_level_only: bool = False) -> list[tuple[str, str, int]]:
    """(importer, imported, line) for every import of one specsweep module by another."""
    return [(name, target, line) for name, path in MODULES.items()
            for target, line in _imports(path, top_level_only)
            if target.split(".")[0] == "specsweep" and target != name]


def _rel(module: str) -> str:
    return str(MODULES[module].relative_to(REPO))


def test_every_room_has_a_floor():
    assert sorted({_room(m) for m in MODULES} - set(FLOORS)) == []


def test_imports_run_only_downwards():
    upward = [f"{_rel(a)}:{line} imports {b} ({_room(a)} is on floor {FLOORS[_room(a)]}, "
              f"{_room(b)} on {FLOORS[_room(b)]})"
              for a, b, line in _package_imports() if _room(a) != _room(b)
              and FLOORS[_room(b)] >= FLOORS[_room(a)]]
    assert upward == []


def test_contracts_import_nothing_of_the_package():
    outside = [f"{_rel(a)}:{line} imports {b}" for a, b, line in _package_imports()
               if _room(a) == "contracts" and _room(b) != "contracts"]
    assert outside == []


def test_serving_imports_no_analysis():
    found = [f"{_rel(a)}:{line} imports {b}" for a, b, line in _package_imports()
             if _room(a) == "serve" and _room(b) == "analysis"]
    assert found == []


def test_only_the_engine_adapters_import_the_reference_engine():
    allowed = {"refengine", "engines", "testing"}  # testing: the engine's own test model (testing.refengine)
    found = [f"{_rel(a)}:{line} imports {b}" for a, b, line in _package_imports()
             if _room(b) == "refengine" and _room(a) not in allowed
             and b not in PROBES.get(_rel(a), set())]
    assert found == []


def test_no_import_cycle_between_modules():
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for a, b, _ in _package_imports(top_level_only=True):
        # an import of a name from a package counts as an import of the package's __init__
        target = b if b in MODULES else b.rsplit(".", 1)[0]
        if target in MODULES and target != a:
            graph[a].add(target)
    cycles: list[list[str]] = []
    state: dict[str, int] = {}

    def walk(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                walk(nxt, stack)
        stack.pop()
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            walk(module, [])
    assert cycles == []


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_scripts_run_elsewhere_import_only_the_standard_library(probe: str):
    path = REPO / probe
    assert path.is_file(), f"{probe} is gone: update PROBES"
    extra = PROBES[probe]
    foreign = [f"{probe}:{line} imports {name}" for name, line in _imports(path)
               if name.split(".")[0] not in sys.stdlib_module_names and name != "__future__"
               and name not in extra and name.split(".")[0] not in extra]
    assert foreign == []
