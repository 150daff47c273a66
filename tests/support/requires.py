"""Tools the suite drives and tests/run.sh installs (kcat, node and kafkajs, go and sarama,
podman, Java and Maven, prometheus and promtool, openssl, the pipeline extra, root for
network namespaces).

A test that finds one missing skips through `require_tool` (inside a test or fixture) or
`tool_mark` (a skipif mark); both put `MISSING_TOOL` at the start of the reason. Outside CI
that is a skip saying what to install; under CI (CI=true) tests/conftest.py turns such a skip
into a failure, because tests/run.sh was meant to install the tool and a silent skip would
hide that it did not.
"""

from __future__ import annotations

import importlib.util
import os
import shutil

import pytest

MISSING_TOOL = "missing tool"


def under_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def missing_reason(name: str, reason: str) -> str:
    return f"{MISSING_TOOL} {name}: {reason}"


def have(command: str) -> bool:
    return shutil.which(command) is not None


def have_module(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def require_tool(name: str, reason: str, available: bool | None = None, *,
                 allow_module_level: bool = False) -> None:
    """Skip the running test or fixture (or module) when `name` (a command unless `available`
    says otherwise) is missing; a failure under CI."""
    if available is None:
        available = have(name)
    if not available:
        pytest.skip(missing_reason(name, reason), allow_module_level=allow_module_level)


def tool_mark(name: str, reason: str, available: bool | None = None) -> pytest.MarkDecorator:
    """`pytest.mark.skipif` for a missing tool, recognised by the CI hook."""
    if available is None:
        available = have(name)
    return pytest.mark.skipif(not available, reason=missing_reason(name, reason))


def is_missing_tool_skip(longrepr: object) -> bool:
    """Whether a skipped report's longrepr (path, line, "Skipped: reason") is a missing tool."""
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        message = str(longrepr[2])
    else:
        message = str(longrepr)
    return message.removeprefix("Skipped: ").startswith(MISSING_TOOL)
