"""The core is sans-IO: no clocks, sockets, files, event loops or global randomness."""

from __future__ import annotations

import ast
import pathlib

import pytest

PURE = ["raft/core.py", "raft/roles.py", "raft/messages.py", "raft/store.py", "raft/control.py"]
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


def test_raft_never_imports_broker() -> None:
    for f in (ROOT / "raft").rglob("*.py"):
        tree = ast.parse(f.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert all(not a.name.startswith("broker") for a in node.names), f
            elif isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("broker"), f


def test_transitions_are_listed_at_the_top_of_core() -> None:
    doc = ast.get_docstring(ast.parse((ROOT / "raft/core.py").read_text())) or ""
    for role in ("Unattached", "Prospective", "Candidate", "Leader", "Follower", "Resigned"):
        assert f"{role:<11} ->" in doc, role
