"""The core is sans-IO: no clocks, sockets, files, event loops or global randomness."""

from __future__ import annotations

import ast
import pathlib

import pytest

PURE = ["raft/core.py", "raft/roles.py", "raft/messages.py", "raft/store.py", "raft/control.py",
        "raft/voters.py", "raft/leader.py"]
FORBIDDEN = {"asyncio", "socket", "os", "time", "random", "threading", "selectors", "io",
             "pathlib", "subprocess", "anyio", "datetime", "broker"}
ROOT = pathlib.Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("path", PURE)
def test_pure_modules_import_no_io(path: str) -> None:
    tree = ast.parse((ROOT / path).read_text())
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
            if node.module == "random":
                # only the Random type, for annotations; instances are injected
                assert {a.name for a in node.names} <= {"Random"}, path
                continue
        for name in names:
            assert name.split(".")[0] not in FORBIDDEN, f"{path} imports {name}"


# raft's IO shell (driver, stores, the Kafka message translation) may use the floor-1 Kafka
# wire package and the file helpers; nothing else of broker, and the pure core none of it.
RAFT_MAY_IMPORT_FROM_BROKER = ("broker.protocol", "broker.util")


def _imports(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


def test_raft_imports_only_the_floor_below_from_broker() -> None:
    for f in (ROOT / "raft").rglob("*.py"):
        for name in _imports(ast.parse(f.read_text())):
            if name == "broker" or name.startswith("broker."):
                assert any(name == allowed or name.startswith(allowed + ".")
                           for allowed in RAFT_MAY_IMPORT_FROM_BROKER), f"{f} imports {name}"


def test_transitions_are_listed_at_the_top_of_core() -> None:
    doc = ast.get_docstring(ast.parse((ROOT / "raft/core.py").read_text())) or ""
    for role in ("Unattached", "Prospective", "Candidate", "Leader", "Follower", "Resigned"):
        assert f"{role:<11} ->" in doc, role
