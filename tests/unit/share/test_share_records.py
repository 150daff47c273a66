"""__share_group_state's records (broker/share/records.py) in Kafka 4.4's formats: keys and
values round-trip, the bytes are Kafka's layout, and bad input is CORRUPT_MESSAGE."""

from __future__ import annotations

import struct
import uuid

import pytest
from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.share.records import (
    SHARE_SNAPSHOT_KEY_TYPE,
    SHARE_UPDATE_KEY_TYPE,
    SharePartitionKey,
    ShareSnapshotValue,
    ShareUpdateValue,
    StateBatch,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

TID = uuid.UUID("12345678-1234-5678-1234-567812345678")
KEY = SharePartitionKey("g1", TID, 3)


def test_key_layout_and_round_trip() -> None:
    raw = encode_key(SHARE_UPDATE_KEY_TYPE, KEY)
    # int16 record type, string group id, 16-byte uuid, int32 partition
    assert raw == struct.pack(">hh", 1, 2) + b"g1" + TID.bytes + struct.pack(">i", 3)
    assert decode_key(raw) == (SHARE_UPDATE_KEY_TYPE, KEY)
    assert decode_key(encode_key(SHARE_SNAPSHOT_KEY_TYPE, KEY)) == (SHARE_SNAPSHOT_KEY_TYPE, KEY)


def test_coordinator_key_is_kafkas_text() -> None:
    # Kafka's Uuid.toString: url-safe base64 without padding
    assert KEY.coordinator_key() == "g1:EjRWeBI0VngSNFZ4EjRWeA:3"


def test_snapshot_value_layout_and_round_trip() -> None:
    value = ShareSnapshotValue(2, 3, 4, 100, 1_700_000_000_000, 1_700_000_000_500,
                               (StateBatch(100, 104, 2, 1), StateBatch(105, 105, 0, 3)))
    raw = encode_value(value)
    assert raw[:2] == b"\x00\x00"  # value version 0
    head = struct.pack(">iiiqqq", 2, 3, 4, 100, 1_700_000_000_000, 1_700_000_000_500)
    assert raw[2:2 + len(head)] == head
    assert raw[2 + len(head)] == 3  # compact array of two
    assert raw[-1] == 0  # no tagged fields: DeliveryCompleteCount left at -1
    assert decode_value(SHARE_SNAPSHOT_KEY_TYPE, raw) == value


def test_delivery_complete_count_is_tag_0() -> None:
    value = ShareUpdateValue(1, 7, -1, (StateBatch(0, 9, 4, 5),), delivery_complete_count=10)
    raw = encode_value(value)
    assert raw.endswith(b"\x01\x00\x04" + struct.pack(">i", 10))
    assert decode_value(SHARE_UPDATE_KEY_TYPE, raw) == value


@pytest.mark.parametrize("raw", [
    b"", b"\x00", struct.pack(">h", 7) + b"\x00\x01g", encode_key(0, KEY) + b"\x00",
])
def test_bad_keys_are_corrupt(raw: bytes) -> None:
    with pytest.raises(KafkaError) as exc:
        decode_key(raw)
    assert exc.value.error_code is ErrorCode.corrupt_message


def test_bad_values_are_corrupt() -> None:
    good = encode_value(ShareUpdateValue(0, 0, 5, (StateBatch(5, 6, 2, 1),)))
    for raw in (good[:-3], good + b"\x00", b"\x00\x01" + good[2:], good[:5] + b"\x7f"):
        with pytest.raises(KafkaError) as exc:
            decode_value(SHARE_UPDATE_KEY_TYPE, raw)
        assert exc.value.error_code is ErrorCode.corrupt_message
