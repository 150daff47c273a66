"""first_null_array: a non-nullable array sent as null is found; nullable ones pass."""

from __future__ import annotations

import struct

import pytest
from kio.index import UnknownAPIKey, UnknownEntity, load_request_schema

from broker.protocol.headers import FrameError, parse_request
from broker.protocol.nulls import first_null_array
from broker.testing.wire import raw_frame
from tests.support.probe import null_probe


def _produce_v3(topic_array: bytes) -> bytes:
    body = struct.pack(">hhi", -1, 1, 1000) + topic_array
    return raw_frame(0, 3, 1, body)[4:]


def test_null_topic_array_in_produce_is_refused_at_parse() -> None:
    with pytest.raises(FrameError, match=r"non-nullable field topic_data .* serialized as null"):
        parse_request(_produce_v3(struct.pack(">i", -1)))


def test_null_partition_array_inside_a_topic_names_its_path() -> None:
    topic = struct.pack(">h", 1) + b"t" + struct.pack(">i", -1)
    with pytest.raises(FrameError, match=r"topic_data\[0\]\.partition_data"):
        parse_request(_produce_v3(struct.pack(">i", 1) + topic))


def test_empty_arrays_parse() -> None:
    parsed = parse_request(_produce_v3(struct.pack(">i", 0)))
    assert parsed.body.topic_data == ()


def test_a_nullable_array_may_be_null() -> None:
    # Metadata v1+: topics = null means every topic.
    frame = raw_frame(3, 1, 1, struct.pack(">i", -1))[4:]
    assert parse_request(frame).body.topics is None


API_KEYS = range(0, 90)
VERSIONS = range(0, 20)
# API keys in that range kio carries no schemas for, each with the reason; any other key
# whose schemas do not load fails the test below.
NO_SCHEMAS = {
    4: "LeaderAndIsr: a ZooKeeper-era inter-broker API, removed in Kafka 4.0",
    5: "StopReplica: a ZooKeeper-era inter-broker API, removed in Kafka 4.0",
    6: "UpdateMetadata: a ZooKeeper-era inter-broker API, removed in Kafka 4.0",
    7: "ControlledShutdown: a ZooKeeper-era inter-broker API, removed in Kafka 4.0",
}
MIN_APIS_CHECKED = 86  # kio 0.6.5: every key in API_KEYS but NO_SCHEMAS


def _schemas(api_key: int) -> list[type]:
    """The request schemas of every version of `api_key`; a version the API does not have
    (UnknownEntity) is passed over, any other error fails."""
    found = []
    for version in VERSIONS:
        try:
            found.append(load_request_schema(api_key, version))
        except UnknownEntity:
            continue
    return found


@pytest.mark.parametrize("api_key", API_KEYS)
def test_every_schema_with_nullable_fields_null_passes(api_key: int) -> None:
    if api_key in NO_SCHEMAS:
        with pytest.raises(UnknownAPIKey):
            load_request_schema(api_key, 0)
        return
    schemas = _schemas(api_key)
    assert schemas, f"no request schema of API key {api_key} loads (list it in NO_SCHEMAS?)"
    for schema in schemas:
        assert first_null_array(null_probe(schema)) is None


def test_enough_apis_are_checked() -> None:
    checked = [k for k in API_KEYS if k not in NO_SCHEMAS and _schemas(k)]
    assert len(checked) >= MIN_APIS_CHECKED, checked
