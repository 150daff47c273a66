"""Log cleaner (compaction). Placeholder wiring until the compaction milestone."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.log.log import PartitionLog
    from broker.log.manager import LogManager


class LogCleaner:
    def __init__(self, manager: LogManager) -> None:
        self.manager = manager

    def clean_once(self, now_ms: int) -> int:
        return 0

    def abort(self, plog: PartitionLog) -> None:
        return None
