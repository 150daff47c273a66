"""Partition log engine: Kafka's on-disk format, segments, indexes, recovery, retention,
compaction. See PartitionLog (one partition) and LogManager (all of a process)."""

from broker.log.config import LogConfig
from broker.log.log import AppendResult, PartitionLog, ProducerStateHook, TopicPartition
from broker.log.manager import LogManager
from broker.log.segment import FileSlice

__all__ = [
    "AppendResult",
    "FileSlice",
    "LogConfig",
    "LogManager",
    "PartitionLog",
    "ProducerStateHook",
    "TopicPartition",
]
