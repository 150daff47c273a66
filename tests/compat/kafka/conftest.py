"""The differential harness's counts at the end of the run (tests/compat/kafka/
test_differential.py): "fields compared: N, differences: M (accepted K)"."""

from __future__ import annotations

import sys

import pytest


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    module = sys.modules.get("tests.compat.kafka.test_differential")
    tally = getattr(module, "TALLY", None)
    if tally is not None and tally.compared:
        terminalreporter.write_line(f"differential (Kafka 4.4 vs Skiff): {tally.summary()}")
