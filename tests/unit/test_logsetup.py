"""broker/logsetup.py: each event reaches stderr in one write with its newline, so lines
from the node and its workers, which share stderr, never run into one another."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator

import pytest
import structlog

from broker.logsetup import configure_logging


class RecordingStream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return super().write(text)


@pytest.fixture(autouse=True)
def restore_structlog() -> Iterator[None]:
    saved = structlog.get_config()
    try:
        yield
    finally:
        structlog.configure(**saved)


def recorded_stderr(monkeypatch: pytest.MonkeyPatch) -> RecordingStream:
    """Set in the test itself: pytest's capture sets sys.stderr again after the fixtures."""
    stream = RecordingStream()
    monkeypatch.setattr(sys, "stderr", stream)
    return stream


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_each_event_is_one_write_ending_its_line(monkeypatch: pytest.MonkeyPatch,
                                                 fmt: str) -> None:
    stderr = recorded_stderr(monkeypatch)
    configure_logging(fmt)
    log = structlog.get_logger("test")
    log.info("formatting_storage", directories=["/var/lib/skiff/data"])
    log.info("node_starting", compiled_modules="compiled (mypyc)")
    assert len(stderr.writes) == 2
    assert all(w.endswith("\n") and w.count("\n") == 1 for w in stderr.writes)
    if fmt == "json":
        events = [json.loads(line) for line in stderr.getvalue().splitlines()]
        assert [e["event"] for e in events] == ["formatting_storage", "node_starting"]


def test_events_below_the_level_are_not_written(monkeypatch: pytest.MonkeyPatch) -> None:
    stderr = recorded_stderr(monkeypatch)
    configure_logging("json", "WARNING")
    structlog.get_logger("test").info("quiet")
    structlog.get_logger("test").warning("loud")
    assert [json.loads(w)["event"] for w in stderr.writes] == ["loud"]
