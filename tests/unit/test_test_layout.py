"""pytest imports the test modules outside packages by their base name (rootdir import
mode), so two `test_x.py` in different folders break collection of the whole suite with
"import file mismatch" (a fresh clone has no __pycache__ to hide it)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_test_module_names_are_unique() -> None:
    names = Counter(p.name for p in TESTS.rglob("test_*.py")
                    if "node_modules" not in p.parts and not (p.parent / "__init__.py").exists())
    assert [n for n, count in names.items() if count > 1] == []
