from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from loghelpers import FakeClock

from broker.log import LogConfig, PartitionLog, TopicPartition


@pytest.fixture
def fast_tmp(tmp_path: Path) -> Iterator[Path]:
    """A scratch directory on tmpfs when there is one: the crash trials simulate crashes
    by editing files, so they need no real fsync, and thousands of fsyncs on a shared
    disk would dominate their run time. Falls back to tmp_path."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    d = Path(tempfile.mkdtemp(prefix="skiff-log-test-", dir=shm))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def small_config() -> LogConfig:
    return LogConfig(
        segment_bytes=1024,
        index_interval_bytes=128,
        segment_index_bytes=4096,
        file_delete_delay_ms=1000,
    )


@pytest.fixture
def open_log(
    tmp_path: Path, clock: FakeClock, small_config: LogConfig
) -> Iterator[Callable[..., PartitionLog]]:
    opened: list[PartitionLog] = []

    def make(config: LogConfig | None = None, **kw: object) -> PartitionLog:
        plog = PartitionLog(
            tmp_path / "t-0", TopicPartition("t", 0), config or small_config, clock=clock, **kw
        )  # type: ignore[arg-type]
        opened.append(plog)
        return plog

    yield make
    for p in opened:
        p.close()
