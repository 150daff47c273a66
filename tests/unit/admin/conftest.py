"""Fixtures of the admin service tests; the pieces live in harness.py."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.admin.harness import NODE_ID, AdminTestNode


@pytest.fixture
def node(tmp_path: Path) -> Iterator[AdminTestNode]:
    n = AdminTestNode(tmp_path)
    asyncio.run(n.register(NODE_ID))
    n.ready.set()
    yield n
    n.close()
