"""The driver's kio translation and Kafka framing, byte for byte through kio."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from broker.protocol import headers
from raft import kafka_messages
from raft.kafka_messages import CorruptBatch, decode_batches, encode_batch
from raft.messages import (
    Batch,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)

REQUESTS = [
    (3, VoteRequest(7, 3, 6, 120, True)),
    (3, VoteRequest(7, 3, 6, 120, False)),
    (1, BeginQuorumEpochRequest(7, 1)),
    (1, EndQuorumEpochRequest(7, 1, (3, 2))),
    (2, FetchRequest(7, 2, 100, 6, 1 << 20, 200)),
    (2, FetchSnapshotRequest(7, 2, SnapshotId(90, 5), 4096, 65536)),
]


@pytest.mark.parametrize("src,msg", REQUESTS)
def test_request_round_trip_through_frames(src: int, msg: object) -> None:
    api_key, version, entity = kafka_messages.encode_request(msg, "cluster-x")  # type: ignore[arg-type]
    frame = headers.encode_request(api_key, version, 42, "raft-1", entity)
    api, ver, cid, decoded = headers.decode_request(frame[4:])
    assert (api, ver, cid) == (api_key, version, 42)
    assert kafka_messages.decode_request(api, decoded) == (src, msg)


RESPONSES = [
    (VoteRequest(7, 3, 6, 120, True), VoteResponse(ErrorCode.none, 7, -1, True, True)),
    (VoteRequest(7, 3, 6, 120, False), VoteResponse(ErrorCode.none, 8, 2, False, False)),
    (BeginQuorumEpochRequest(7, 1), BeginQuorumEpochResponse(ErrorCode.fenced_leader_epoch,
                                                               8, 2)),
    (EndQuorumEpochRequest(7, 1, ()), EndQuorumEpochResponse(ErrorCode.none, 7, 1)),
    (FetchRequest(7, 2, 100, 6, 1 << 20, 200),
     FetchResponse(ErrorCode.none, 7, 1, 103, 0,
                   (Batch(100, 7, (b"a", b"b")), Batch(102, 7, (b"c",))))),
    (FetchRequest(7, 2, 100, 6, 1 << 20, 200),
     FetchResponse(ErrorCode.none, 7, 1, 90, 0, (), 5, 95)),
    (FetchRequest(7, 2, 10, 2, 1 << 20, 200),
     FetchResponse(ErrorCode.none, 7, 1, 90, 50, (), -1, -1, SnapshotId(50, 3))),
    (FetchRequest(7, 2, 10, 2, 1 << 20, 200),
     FetchResponse(ErrorCode.not_leader_or_follower, 7, 3)),
    (FetchSnapshotRequest(7, 2, SnapshotId(90, 5), 4, 8),
     FetchSnapshotResponse(ErrorCode.none, 7, 1, SnapshotId(90, 5), 12, 4, b"abcdefgh")),
]


@pytest.mark.parametrize("req,resp", RESPONSES)
def test_response_round_trip_through_frames(req: object, resp: object) -> None:
    api_key, version, _ = kafka_messages.encode_request(req, None)  # type: ignore[arg-type]
    entity = kafka_messages.encode_response(api_key, version, resp)  # type: ignore[arg-type]
    frame = headers.encode_response(entity, 9)
    from kio.index import load_response_schema
    from kio.schema.response_header.v1.header import ResponseHeader
    from kio.serial import entity_reader
    payload = frame[4:]
    _h, hsize = entity_reader(ResponseHeader)(payload, 0)
    decoded, _ = entity_reader(load_response_schema(api_key, version))(payload, hsize)
    assert kafka_messages.decode_response(req, decoded) == resp  # type: ignore[arg-type]


def test_requests_for_other_topics_are_refused() -> None:
    api_key, _version, entity = kafka_messages.encode_request(BeginQuorumEpochRequest(1, 1), None)
    bad_topic = type(entity.topics[0])(topic_name="other", partitions=entity.topics[0].partitions)
    bad = type(entity)(cluster_id=None, voter_id=-1, topics=(bad_topic,), leader_endpoints=())
    with pytest.raises(kafka_messages.WireError) as e:
        kafka_messages.decode_request(api_key, bad)
    assert e.value.error == ErrorCode.unknown_topic_or_partition


def test_oversized_and_malformed_frames() -> None:
    with pytest.raises(headers.FrameError):
        headers.decode_request(b"\x00\x34\x00\x02\x00\x00\x00\x01\xff")
    with pytest.raises(headers.FrameError):
        headers.decode_request(b"\x00")


def test_batches_round_trip_and_corruption_is_caught() -> None:
    b = Batch(10, 4, (b"x" * 300, b"", b"z"))
    raw = encode_batch(b)
    assert decode_batches(raw) == [b]
    assert decode_batches(raw + raw[:20]) == [b]  # a cut trailing batch is left out
    bad = bytearray(raw)
    bad[-1] ^= 1
    with pytest.raises(CorruptBatch):
        decode_batches(bytes(bad))
    huge = raw[:8] + (1 << 30).to_bytes(4, "big") + raw[12:]
    with pytest.raises(CorruptBatch):
        decode_batches(huge)
