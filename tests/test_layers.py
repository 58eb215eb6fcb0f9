"""The import graph of the apps: no circle between modules, no import from a lower app to a higher one.

The layer order is the one written in docs/architecture.md ("Layers"); this test reads it from there, so the
document and the code cannot drift apart. Every import counts, including the ones inside functions (a lazy import
still makes the importing module depend on the imported one; it only hides the circle from Python at load time).
"""

from __future__ import annotations

import ast
import functools
import re
from collections import defaultdict
from pathlib import Path

from tests.python_source import parse

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def _declared_layers() -> tuple[list[str], set[str]]:
    """The ```layers block of docs/architecture.md: one package per line, lowest first (the ground floor first, the
    project's wiring last); `project:` names the wiring modules, the only ones the top package may hold."""
    text = ARCHITECTURE.read_text()
    block = re.search(r"```layers\n(.*?)```", text, re.S)
    assert block, "docs/architecture.md has no ```layers block"
    apps, project = [], set()
    for line in block.group(1).splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("project:"):
            project.update(line.removeprefix("project:").split())
        else:
            apps.append(line)
    return apps, project


def _modules(apps: list[str]) -> dict[str, Path]:
    modules = {}
    for app in apps:
        for path in sorted((ROOT / app).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if "migrations" in parts:
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def _resolve(name: str, modules) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_edges(modules: dict[str, Path]) -> dict[str, dict[str, int]]:
    """module -> {imported module: line}, for every import statement anywhere in the module."""
    edges: dict[str, dict[str, int]] = defaultdict(dict)
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(parse(path.read_text(), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package
                    for _ in range(node.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    base = f"{anchor}.{base}" if base else anchor
                # `from package import module` imports the module; `from module import name` the module.
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names
                ]
            for target in targets:
                resolved = _resolve(target, modules)
                if resolved and resolved != module:
                    edges[module].setdefault(resolved, node.lineno)
    return edges


def _app(module: str) -> str:
    return module.split(".", 1)[0]


def _is_project(module: str, project: set[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in project)


def upward_imports(edges, apps: list[str]) -> list[str]:
    rank = {app: index for index, app in enumerate(apps)}
    found = []
    for module, targets in sorted(edges.items()):
        for target, line in sorted(targets.items()):
            if rank[_app(target)] > rank[_app(module)]:
                found.append(f"{module}:{line} imports {target} ({_app(target)} is above {_app(module)})")
    return found


def import_circles(edges) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    counter = 0
    nodes = set(edges) | {t for targets in edges.values() for t in targets}
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, {}))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, {})))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
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
    return circles


@functools.cache
def _graph():
    apps, project = _declared_layers()
    modules = _modules(apps)
    return apps, project, modules, import_edges(modules)


def test_every_app_is_in_the_layer_order():
    apps, _, _, _ = _graph()
    packages = {p.parent.name for p in ROOT.glob("*/apps.py")} | {"providers"}
    assert packages <= set(apps), f"apps missing from docs/architecture.md's layers: {sorted(packages - set(apps))}"


def test_no_import_circle():
    *_, edges = _graph()
    circles = import_circles(edges)
    assert circles == [], "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_no_import_from_a_lower_app_to_a_higher_one():
    apps, _, _, edges = _graph()
    found = upward_imports(edges, apps)
    assert found == [], "upward imports:\n" + "\n".join(found)


def test_the_ground_floor_imports_no_app():
    apps, _, modules, edges = _graph()
    ground = apps[0]
    assert ground == "core", "the first layer is the ground floor"
    assert any(_app(m) == ground for m in modules), "the walk found no ground-floor module"
    found = [
        f"{module}:{line} imports {target}"
        for module, targets in sorted(edges.items())
        if _app(module) == ground
        for target, line in sorted(targets.items())
        if _app(target) != ground
    ]
    assert found == [], "the ground floor reaches up:\n" + "\n".join(found)


def test_the_project_package_holds_only_the_wiring():
    apps, project, modules, _ = _graph()
    top = apps[-1]
    assert top == "opencompany" and project, "the last layer is the project's wiring, with its `project:` modules"
    stray = sorted(m for m in modules if _app(m) == top and m != top and not _is_project(m, project))
    assert stray == [], f"modules in {top}/ that are not wiring (move them to an app or the ground floor): {stray}"


def test_the_walk_sees_function_local_imports_and_circles(tmp_path):
    # The checks above can only pass for the right reason if the walk finds what they look for.
    files = {
        "low/__init__.py": "",
        "low/a.py": "def later():\n    from high.b import thing\n    return thing\n",
        "high/__init__.py": "",
        "high/b.py": "from low import a\n\nthing = a\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    modules = {"low": tmp_path / "low/__init__.py", "low.a": tmp_path / "low/a.py"}
    modules |= {"high": tmp_path / "high/__init__.py", "high.b": tmp_path / "high/b.py"}
    edges = import_edges(modules)
    assert edges["low.a"] == {"high.b": 2}
    assert import_circles(edges) == [["high.b", "low.a"]]
    assert upward_imports(edges, ["low", "high"]) == ["low.a:2 imports high.b (high is above low)"]
