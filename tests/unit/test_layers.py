"""The floors of docs/architecture.md: a module imports from its own floor or below, never above.

Every import counts, wherever it stands (top level, inside a function, under TYPE_CHECKING):
a lazy or type-only import still ties the lower module to the higher one. The few imports
that break the rule would be listed in KNOWN_UPWARD with the issue that removes them (none
today); the list must match exactly, so a new upward import fails here and so does a fixed
one that is still listed. raft's own purity rules are tests/unit/raft/test_raft_core_purity.py.
"""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]

# floor -> package prefixes (the longest prefix that matches a module decides its floor)
FLOORS: dict[int, tuple[str, ...]] = {
    1: ("broker.errors", "broker.util", "broker.protocol", "broker.config", "broker.logsetup",
        "broker.log", "broker.metrics.stats", "broker.security", "broker.quotas", "broker.native"),
    2: ("raft.core", "raft.roles", "raft.messages", "raft.store", "raft.control", "raft.config",
        "raft.voters", "raft.leader"),
    3: ("raft.driver", "raft.kafka_messages", "raft.stores", "raft.eventloop", "broker.coordinator",
        "broker.metadata", "broker.replication", "broker.group", "broker.share", "broker.txn",
        "broker.controller",
        "broker.metrics.telemetry", "broker.security.scram_admin"),
    4: ("broker.server", "broker.handlers"),
    5: ("broker.admin", "broker.metrics"),
    6: ("broker.node", "raft.tools"),
    7: ("broker.cli", "broker.testing"),
}
# Packages that are only a name (their __init__ holds a docstring; broker's also runs
# broker/native.py's check of the compiled modules): importable from anywhere.
NAMESPACES = {"broker", "raft"}

# Imports that go up a floor and are tolerated until an issue removes them: none today (the
# Kafka handlers took the whole Node until broker/handlers/services.py's BrokerServices).
KNOWN_UPWARD: set[tuple[str, str]] = set()

# What the wire package may import of the project: itself and the floor-1 leaves beside it
# (broker.native comes with `import broker`, before any compiled module).
PROTOCOL_MAY_IMPORT = ("broker.protocol", "broker.errors", "broker.util", "broker.native")


def floor_of(module: str) -> int | None:
    best: tuple[int, int] | None = None
    for floor, prefixes in FLOORS.items():
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (
                    best is None or len(prefix) > best[1]):
                best = (floor, len(prefix))
    return best[0] if best else None


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> list[pathlib.Path]:
    return sorted(p for top in ("broker", "raft") for p in (ROOT / top).rglob("*.py")
                  if "_generated" not in p.parts)


def imported(path: pathlib.Path) -> set[str]:
    """Every project module `path` imports (for `from a.b import c`: a.b.c when that is a
    module the floors know, else a.b)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module in NAMESPACES:
                out.update(f"{node.module}.{a.name}" for a in node.names)
            else:
                out.add(node.module)
    return {m for m in out if m.split(".")[0] in NAMESPACES}


def test_every_module_has_a_floor() -> None:
    unplaced = [module_name(p) for p in project_modules()
                if module_name(p) not in NAMESPACES and floor_of(module_name(p)) is None]
    assert not unplaced, f"give these a floor in FLOORS and docs/architecture.md: {unplaced}"


def test_no_module_imports_a_higher_floor() -> None:
    upward: set[tuple[str, str]] = set()
    for path in project_modules():
        me = module_name(path)
        mine = floor_of(me)
        for target in imported(path):
            theirs = floor_of(target)
            if mine is not None and theirs is not None and theirs > mine:
                upward.add((me, target))
    new = upward - KNOWN_UPWARD
    assert not new, f"imports of a higher floor: {sorted(new)}"
    fixed = KNOWN_UPWARD - upward
    assert not fixed, f"no longer upward, remove from KNOWN_UPWARD: {sorted(fixed)}"


def test_the_wire_package_imports_nothing_above_it() -> None:
    for path in (ROOT / "broker" / "protocol").rglob("*.py"):
        for target in imported(path):
            assert any(target == ok or target.startswith(ok + ".")
                       for ok in PROTOCOL_MAY_IMPORT), f"{path} imports {target}"


def test_importing_the_wire_package_loads_nothing_else_of_the_project() -> None:
    modules = [module_name(p) for p in (ROOT / "broker" / "protocol").rglob("*.py")]
    probe = (f"import sys\nfor m in {modules!r}: __import__(m)\n"
             "print('\\n'.join(m for m in sys.modules if m.split('.')[0] in ('broker', 'raft')))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True).stdout.split()
    loaded = {m for m in out if m not in NAMESPACES}
    assert loaded and all(any(m == ok or m.startswith(ok + ".") for ok in PROTOCOL_MAY_IMPORT)
                          for m in loaded), sorted(loaded)


# Import circles that remain, by the packages each may span, with the issue that ends them
# (none today: issue 32 broke the last two, config <-> security/quotas and the controller
# channel <-> rpc); a circle outside these (a new sideways tangle inside a floor) fails here.
KNOWN_CIRCLES: dict[str, tuple[str, ...]] = {}


def _import_graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for top in ("broker", "raft", "pipeline")
             for p in (ROOT / top).rglob("*.py")
             if "_generated" not in p.parts and "_kio_legacy" not in p.parts
             and "_kio_next" not in p.parts}

    def resolve(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in paths}
    for me, path in paths.items():
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                target = resolve(name)
                if target is not None and target != me:
                    graph[me].add(target)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = set()
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.add(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        found.append(component)
    return found


def test_no_import_circle_beyond_the_known_ones() -> None:
    """Modules that import each other, directly or around a ring, inside a floor or across
    packages: the floors above cannot see them."""
    def within(component: set[str], prefixes: tuple[str, ...]) -> bool:
        return all(any(m == p or m.startswith(p + ".") for p in prefixes) for m in component)

    circles = _circles(_import_graph())
    unknown = [sorted(c) for c in circles
               if not any(within(c, prefixes) for prefixes in KNOWN_CIRCLES.values())]
    assert not unknown, f"new import circles: {unknown}"
    gone = [name for name, prefixes in KNOWN_CIRCLES.items()
            if not any(within(c, prefixes) for c in circles)]
    assert not gone, f"these circles are gone, remove them from KNOWN_CIRCLES: {gone}"


def test_the_circle_finder_finds_a_ring() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert _circles({"a": {"b"}, "b": set()}) == []
