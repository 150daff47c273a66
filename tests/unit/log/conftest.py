from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from loghelpers import FakeClock

from broker.log import LogConfig, PartitionLog, TopicPartition


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
