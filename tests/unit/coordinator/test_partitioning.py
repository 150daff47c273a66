"""Kafka's partitionFor: Java's String.hashCode and Kafka's Utils.abs, against values printed
by OpenJDK 17."""

from __future__ import annotations

import pytest

from broker.coordinator.partitioning import java_string_hash, kafka_abs, partition_for


def test_java_string_hash_known_values() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    # UTF-16 code units: U+1F600 is the surrogate pair D83D DE00
    assert java_string_hash("\U0001F600") == 31 * 0xD83D + 0xDE00
    assert java_string_hash("polygenelubricants") == -(2**31)


@pytest.mark.parametrize(("group", "java_hash", "partition"), [
    # printed by String.hashCode and Utils.abs(h) % 50 on OpenJDK 17
    ("my-group", -1906497762, 12),
    ("console-consumer-12345", 158455506, 6),
    ("grp-\u00e9\U0001F600", 294093604, 4),
    ("a" * 20, 1542361408, 8),
])
def test_hash_matches_java(group: str, java_hash: int, partition: int) -> None:
    assert java_string_hash(group) == java_hash
    assert partition_for(group, 50) == partition


def test_partition_for_uses_kafka_abs() -> None:
    assert kafka_abs(-(2**31)) == 0
    assert kafka_abs(-5) == 5
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
