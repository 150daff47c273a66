"""broker/protocol/fetch_codec.py, through raft/kafka_messages.py, writes exactly what kio
writes for the quorum's Fetch messages."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from broker.protocol.fetch_codec import RESPONSE_VERSIONS
from raft import kafka_messages
from raft.kafka_messages import encode_batches, encode_fetch_request, encode_fetch_response
from raft.messages import Batch, FetchRequest, FetchResponse, SnapshotId, VoteResponse

i32 = st.integers(-1, 2**31 - 1)
i64 = st.integers(-1, 2**63 - 1)


def kio_bytes(entity: object) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


@settings(max_examples=300, deadline=None)
@given(epoch=i32, replica=i32, offset=i64, last_epoch=i32, max_bytes=i32,
       wait=st.integers(0, 2**31 - 1),
       cluster_id=st.one_of(st.none(), st.text(max_size=40)),
       directory=st.one_of(st.none(), st.uuids()))
def test_request_bytes_match_kio(epoch, replica, offset, last_epoch, max_bytes, wait,
                                 cluster_id, directory):
    """The narrow encoder, the replica's directory id (v17's tagged field) included."""
    msg = FetchRequest(epoch, replica, offset, last_epoch, max_bytes, wait, directory)
    api_key, version, entity = kafka_messages.encode_request(msg, cluster_id)
    assert (api_key, version) == (kafka_messages.FETCH, 17)
    assert (encode_fetch_request(msg, cluster_id, kafka_messages.METADATA_TOPIC_ID)
            == kio_bytes(entity))


batches = st.lists(
    st.builds(lambda base, epoch, values: Batch(base, epoch, tuple(values)),
              st.integers(0, 2**40), st.integers(0, 2**31 - 1),
              st.lists(st.binary(max_size=300), min_size=1, max_size=4)),
    max_size=3)


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(list(RESPONSE_VERSIONS)),
       error=st.sampled_from([ErrorCode.none, ErrorCode.fenced_leader_epoch,
                              ErrorCode.not_leader_or_follower,
                              ErrorCode.offset_out_of_range]),
       epoch=i32, leader=i32, hw=i64, start=i64, batches=batches,
       diverging=st.tuples(i32, i64),
       snapshot=st.one_of(st.none(), st.builds(SnapshotId, i64, i32)))
def test_response_bytes_match_kio(version, error, epoch, leader, hw, start, batches,
                                  diverging, snapshot):
    msg = FetchResponse(error, epoch, leader, hw, start, tuple(batches), diverging[0],
                        diverging[1], snapshot)
    entity = kafka_messages.encode_response(kafka_messages.FETCH, version, msg)
    fast = encode_fetch_response(version, msg, encode_batches(msg.batches),
                                 kafka_messages.METADATA_TOPIC_ID)
    assert fast == kio_bytes(entity)


def test_defaults_leave_the_tagged_fields_out():
    msg = FetchResponse(ErrorCode.none, -1, -1, 5, 0)
    entity = kafka_messages.encode_response(kafka_messages.FETCH, 17, msg)
    fast = encode_fetch_response(17, msg, b"", kafka_messages.METADATA_TOPIC_ID)
    assert fast == kio_bytes(entity)
    assert fast.endswith(b"\x00\x00\x00")  # partition, topic and response tag counts


@settings(max_examples=200, deadline=None)
@given(api_key=st.integers(0, 80), version=st.integers(0, 20),
       cid=st.integers(-(2**31), 2**31 - 1),
       client_id=st.one_of(st.none(), st.text(max_size=30)), flexible=st.booleans())
def test_request_headers_match_kio(api_key, version, cid, client_id, flexible):
    from kio.schema.request_header.v1.header import RequestHeader as V1
    from kio.schema.request_header.v2.header import RequestHeader as V2
    from kio.static.primitive import i16, i32

    from broker.protocol.headers import request_header

    cls = V2 if flexible else V1
    header = cls(request_api_key=i16(api_key), request_api_version=i16(version),
                 correlation_id=i32(cid), client_id=client_id)
    assert request_header(api_key, version, cid, client_id, flexible) == kio_bytes(header)


@settings(max_examples=100, deadline=None)
@given(cid=st.integers(-(2**31), 2**31 - 1))
def test_response_headers_match_kio(cid):
    from kio.schema.response_header.v0.header import ResponseHeader as V0
    from kio.schema.response_header.v1.header import ResponseHeader as V1
    from kio.static.primitive import i32

    from broker.protocol import headers

    vote = kafka_messages.encode_response(
        kafka_messages.VOTE, 2, VoteResponse(ErrorCode.none, 1, 1, True, False))
    flexible_frame = headers.encode_response(vote, cid)
    assert flexible_frame[4:].startswith(kio_bytes(V1(correlation_id=i32(cid))))
    assert flexible_frame[4:] == kio_bytes(V1(correlation_id=i32(cid))) + kio_bytes(vote)
    fetch_v13 = headers.encode_response(b"body", cid, api=(kafka_messages.FETCH, 13))
    assert fetch_v13[4:] == kio_bytes(V1(correlation_id=i32(cid))) + b"body"
    old = headers.encode_response(b"body", cid, api=(kafka_messages.FETCH, 11))  # not flexible
    assert old[4:] == kio_bytes(V0(correlation_id=i32(cid))) + b"body"
