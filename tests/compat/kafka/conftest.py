"""The differential harness's counts at the end of the run (tests/compat/kafka/
test_differential.py hands its tally over through the config): "fields compared: N,
differences: M (accepted K)"."""

from __future__ import annotations

import pytest


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter,
                            config: pytest.Config) -> None:
    tally = getattr(config, "skiff_differential_tally", None)
    if tally is not None and tally.compared:
        terminalreporter.write_line(f"differential (Kafka 4.4 vs Skiff): {tally.summary()}")
