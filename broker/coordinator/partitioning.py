"""Which partition of a coordinator's internal topic (__consumer_offsets,
__transaction_state, __share_group_state) holds a key: Kafka's partitionFor."""

from __future__ import annotations

_INT_MIN = -(1 << 31)


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: 31*h + c over UTF-16 code units, in 32-bit two's complement."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= (1 << 31) else h


def kafka_abs(n: int) -> int:
    """Kafka's Utils.abs: Integer.MIN_VALUE maps to 0 (Math.abs would stay negative)."""
    return 0 if n == _INT_MIN else abs(n)


def partition_for(key: str, num_partitions: int) -> int:
    return kafka_abs(java_string_hash(key)) % num_partitions
