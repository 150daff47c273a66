"""Every import of Skiff's broker internals that `pipeline/` uses, in one place.

The log-directory source needs only stable, read-only pieces: the partition directory
naming, the offset checkpoint reader and the v2 record-batch decoder; the exactly-once sink
needs the Kafka client connection (kio requests on asyncio). If these move, this file is
the one to change.
"""

from __future__ import annotations

from broker.log.checkpoints import LOG_START_OFFSET_CHECKPOINT, read_offsets_checkpoint
from broker.log.log import TopicPartition as _BrokerTopicPartition
from broker.protocol.records import BatchHeader, Record, decode_records, valid_prefix
from broker.protocol.transport import KafkaConnection


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """`<topic>-<n>` to (topic, n); None for anything else (deleted, future, files)."""
    tp = _BrokerTopicPartition.parse_dir_name(name)
    return None if tp is None else (tp.topic, tp.partition)


__all__ = [
    "LOG_START_OFFSET_CHECKPOINT",
    "BatchHeader",
    "KafkaConnection",
    "Record",
    "decode_records",
    "parse_partition_dir",
    "read_offsets_checkpoint",
    "valid_prefix",
]
