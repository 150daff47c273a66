"""__transaction_state records in Kafka's formats (TransactionLogKey v0, TransactionLogValue
v0 and v1), byte for byte."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.errors import KafkaError
from broker.txn.records import (
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)


def test_key_v0_bytes() -> None:
    assert encode_key("my-txn") == b"\x00\x00" + b"\x00\x06my-txn"
    assert decode_key(encode_key("my-txn")) == "my-txn"


def test_value_v0_bytes_ongoing() -> None:
    v = TransactionLogValue(producer_id=42, producer_epoch=3, timeout_ms=60000, state=1,
                            partitions=frozenset({("a", 1), ("a", 0), ("b", 2)}),
                            last_update_ms=1700, start_ms=1600)
    expected = (
        struct.pack(">hqhib", 0, 42, 3, 60000, 1)
        + struct.pack(">i", 2)
        + struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, 0, 1)
        + struct.pack(">h", 1) + b"b" + struct.pack(">ii", 1, 2)
        + struct.pack(">qq", 1700, 1600)
    )
    assert encode_value(v) == expected
    assert decode_value(expected) == v


def test_value_v0_empty_has_null_partitions() -> None:
    v = TransactionLogValue(producer_id=1, producer_epoch=0, timeout_ms=1000, state=0,
                            partitions=frozenset(), last_update_ms=5, start_ms=-1)
    data = encode_value(v)
    assert data[17:21] == struct.pack(">i", -1)  # after version, id, epoch, timeout, state
    assert decode_value(data) == v


def test_value_v1_flexible_with_tagged_fields() -> None:
    v = TransactionLogValue(producer_id=7, producer_epoch=1, timeout_ms=900, state=4,
                            partitions=frozenset(), last_update_ms=9, start_ms=8,
                            previous_producer_id=6, next_producer_id=-1,
                            client_transaction_version=2)
    data = encode_value(v, version=1)
    expected = (
        struct.pack(">hqhib", 1, 7, 1, 900, 4) + b"\x01"  # compact array, 0 elements
        + struct.pack(">qq", 9, 8)
        + b"\x02" + b"\x00\x08" + struct.pack(">q", 6) + b"\x02\x02" + struct.pack(">h", 2)
    )
    assert data == expected
    assert decode_value(data) == v


@given(st.integers(0, 2**40), st.integers(0, 32767), st.integers(1, 2**31 - 1),
       st.sampled_from([1, 2, 3, 4, 5]),
       st.frozensets(st.tuples(st.sampled_from(["x", "topic", "é"]), st.integers(0, 100)),
                     max_size=20),
       st.sampled_from([0, 1]))
def test_roundtrip(pid: int, epoch: int, timeout: int, state: int,
                   parts: frozenset[tuple[str, int]], version: int) -> None:
    v = TransactionLogValue(pid, epoch, timeout, state, parts, 123, 100)
    assert decode_value(encode_value(v, version)) == v


@pytest.mark.parametrize("data", [
    b"", b"\x00", b"\x00\x05", struct.pack(">hqhib", 0, 1, 1, 1, 1) + struct.pack(">i", 99),
    encode_value(TransactionLogValue(1, 1, 1, 1, frozenset({("t", 0)}), 1, 1))[:-3],
    encode_value(TransactionLogValue(1, 1, 1, 1, frozenset({("t", 0)}), 1, 1)) + b"\x00",
])
def test_malformed_values_are_corrupt(data: bytes) -> None:
    with pytest.raises(KafkaError):
        decode_value(data)


def test_malformed_key_is_corrupt() -> None:
    with pytest.raises(KafkaError):
        decode_key(b"\x00\x01\x00\x01a")
    with pytest.raises(KafkaError):
        decode_key(b"\x00\x00\x00\x09a")
