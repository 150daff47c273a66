"""raft/fetch_codec.decode_fetch_response reads what kio writes, field for field, for Fetch
answers v12-v17, keeps records as slices of the frame when asked, and refuses malformed
answers with ValueError."""

from __future__ import annotations

import datetime
import importlib
import io
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from raft.fetch_codec import DECODED_RESPONSE_VERSIONS, decode_fetch_response
from raft.kafka_bytes import read_uvarint, tagged_field, uvarint

i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
errors = st.sampled_from([ErrorCode.none, ErrorCode.fenced_leader_epoch,
                          ErrorCode.not_leader_or_follower, ErrorCode.offset_out_of_range])
# kio drops tagged structs equal to their defaults, so the strategies draw both.
pairs32_64 = st.one_of(st.just((-1, -1)), st.tuples(i32, i64))
pairs32_32 = st.one_of(st.just((-1, -1)), st.tuples(i32, i32))
pairs64_32 = st.one_of(st.just((-1, -1)), st.tuples(i64, i32))


def module(version: int) -> Any:
    return importlib.import_module(f"kio.schema.fetch.v{version}.response")


def kio_bytes(entity: object) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


@st.composite
def answers(draw: st.DrawFn, version: int) -> Any:
    m = module(version)
    topics = []
    for _ in range(draw(st.integers(0, 3))):
        parts = []
        for _ in range(draw(st.integers(0, 3))):
            diverging, leader, snapshot = draw(pairs32_64), draw(pairs32_32), draw(pairs64_32)
            parts.append(m.PartitionData(
                partition_index=draw(i32), error_code=draw(errors),
                high_watermark=draw(i64), last_stable_offset=draw(i64),
                log_start_offset=draw(i64),
                diverging_epoch=m.EpochEndOffset(epoch=diverging[0], end_offset=diverging[1]),
                current_leader=m.LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=leader[1]),
                snapshot_id=m.SnapshotId(end_offset=snapshot[0], epoch=snapshot[1]),
                aborted_transactions=tuple(
                    m.AbortedTransaction(producer_id=draw(i64), first_offset=draw(i64))
                    for _ in range(draw(st.integers(0, 2)))),
                preferred_read_replica=draw(i32),
                records=draw(st.one_of(st.none(), st.binary(max_size=200))),
            ))
        if version >= 13:
            topic = m.FetchableTopicResponse(topic_id=draw(st.uuids()), partitions=tuple(parts))
        else:
            topic = m.FetchableTopicResponse(topic=draw(st.text(max_size=20)),
                                             partitions=tuple(parts))
        topics.append(topic)
    extra: dict[str, Any] = {}
    if version >= 16:
        extra["node_endpoints"] = tuple(
            m.NodeEndpoint(node_id=draw(i32), host=draw(st.text(max_size=20)),
                           port=draw(i32), rack=draw(st.one_of(st.none(), st.text(max_size=8))))
            for _ in range(draw(st.integers(0, 2))))
    return m.FetchResponse(
        throttle_time=datetime.timedelta(milliseconds=draw(st.integers(0, 2**31 - 1))),
        error_code=draw(errors), session_id=draw(i32), responses=tuple(topics), **extra)


def assert_same(version: int, kio_answer: Any, answer: Any) -> None:
    assert datetime.timedelta(milliseconds=answer.throttle_time_ms) == kio_answer.throttle_time
    assert answer.error_code == kio_answer.error_code
    assert answer.session_id == kio_answer.session_id
    assert len(answer.responses) == len(kio_answer.responses)
    for kt, t in zip(kio_answer.responses, answer.responses, strict=True):
        if version >= 13:
            assert (t.topic_id, t.topic) == (kt.topic_id, "")
        else:
            assert (t.topic, t.topic_id) == (kt.topic, None)
        assert len(t.partitions) == len(kt.partitions)
        for kp, p in zip(kt.partitions, t.partitions, strict=True):
            assert (p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                    p.log_start_offset, p.preferred_read_replica) == (
                kp.partition_index, kp.error_code, kp.high_watermark, kp.last_stable_offset,
                kp.log_start_offset, kp.preferred_read_replica)
            assert tuple(p.diverging_epoch) == (kp.diverging_epoch.epoch,
                                                kp.diverging_epoch.end_offset)
            assert tuple(p.current_leader) == (kp.current_leader.leader_id,
                                               kp.current_leader.leader_epoch)
            assert tuple(p.snapshot_id) == (kp.snapshot_id.end_offset, kp.snapshot_id.epoch)
            assert [tuple(a) for a in p.aborted_transactions or ()] == [
                (a.producer_id, a.first_offset) for a in kp.aborted_transactions or ()]
            assert (None if p.records is None else bytes(p.records)) == (
                None if kp.records is None else bytes(kp.records))
    kio_endpoints = getattr(kio_answer, "node_endpoints", ())
    assert [tuple(e) for e in answer.node_endpoints] == [
        (e.node_id, e.host, e.port, e.rack) for e in kio_endpoints]


@pytest.mark.parametrize("version", list(DECODED_RESPONSE_VERSIONS))
@settings(max_examples=150, deadline=None)
@given(data=st.data(), lead=st.binary(max_size=8))
def test_decodes_what_kio_writes(version: int, data: st.DataObject, lead: bytes) -> None:
    entity = data.draw(answers(version))
    body = kio_bytes(entity)
    frame = lead + body  # the answer starts after a header
    kio_answer, _ = entity_reader(type(entity))(frame, len(lead))
    for keep in (True, False):
        answer = decode_fetch_response(memoryview(frame), len(lead), version, keep)
        assert_same(version, kio_answer, answer)


def test_kept_records_are_slices_of_the_frame_and_copies_otherwise() -> None:
    m = module(16)
    records = bytes(range(256)) * 4
    entity = m.FetchResponse(
        throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, session_id=0,
        responses=(m.FetchableTopicResponse(topic_id=uuid.uuid4(), partitions=(
            m.PartitionData(partition_index=0, error_code=ErrorCode.none, high_watermark=5,
                            last_stable_offset=5, log_start_offset=0,
                            diverging_epoch=m.EpochEndOffset(epoch=-1, end_offset=-1),
                            current_leader=m.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1),
                            snapshot_id=m.SnapshotId(end_offset=-1, epoch=-1),
                            aborted_transactions=(), preferred_read_replica=-1,
                            records=records),)),),
        node_endpoints=())
    frame = bytearray(kio_bytes(entity))
    kept = decode_fetch_response(memoryview(frame), 0, 16, True).responses[0].partitions[0]
    copied = decode_fetch_response(memoryview(frame), 0, 16, False).responses[0].partitions[0]
    assert isinstance(kept.records, memoryview) and kept.records.obj is frame
    assert isinstance(copied.records, bytes) and copied.records == records
    frame[frame.index(records)] ^= 0xFF  # the kept slice sees the frame's bytes
    assert bytes(kept.records) != records and copied.records == records


def _one_partition_body(partition_tags: list[bytes], topic_tags: list[bytes],
                        response_tags: list[bytes]) -> bytes:
    out = bytearray(b"\x00\x00\x00\x00" b"\x00\x00" b"\x00\x00\x00\x00")  # throttle, error, session
    out += b"\x02" + uuid.UUID(int=7).bytes + b"\x02"
    out += (3).to_bytes(4, "big") + b"\x00\x00" + (9).to_bytes(8, "big") * 3
    out += b"\x00" + b"\xff\xff\xff\xff" + uvarint(4) + b"abc"  # aborted null, replica, records
    for tags in (partition_tags, topic_tags, response_tags):
        out += uvarint(len(tags)) + b"".join(tags)
    return bytes(out)


def test_unknown_tags_are_skipped_at_every_level() -> None:
    unknown = tagged_field(9, b"\x01\x02\x03")
    body = _one_partition_body(
        [tagged_field(0, (4).to_bytes(4, "big") + (80).to_bytes(8, "big") + b"\x00"), unknown],
        [unknown], [unknown, tagged_field(0, b"\x01")])  # node_endpoints: empty
    answer = decode_fetch_response(body, 0, 16, True)
    p = answer.responses[0].partitions[0]
    assert (p.partition_index, p.high_watermark, bytes(p.records or b"")) == (3, 9, b"abc")
    assert tuple(p.diverging_epoch) == (4, 80)
    assert answer.node_endpoints == ()
    assert p.aborted_transactions is None


def test_every_truncation_is_refused_with_value_error() -> None:
    body = _one_partition_body([tagged_field(1, (2).to_bytes(4, "big") * 2 + b"\x00")],
                               [], [])
    decode_fetch_response(body, 0, 16, True)
    for n in range(len(body)):
        with pytest.raises(ValueError):
            decode_fetch_response(body[:n], 0, 16, True)


@pytest.mark.parametrize("bad", [
    # 2**31 topics in a few bytes: refused before any is read
    b"\x00" * 10 + uvarint(2**31) + b"\x00",
    # records longer than the frame
    _one_partition_body([], [], []).replace(uvarint(4) + b"abc", uvarint(2**30) + b"abc"),
    # a tagged struct shorter than its fields
    _one_partition_body([tagged_field(0, b"\x00\x01")], [], []),
    # a varint that never ends
    b"\x00" * 10 + b"\xff" * 8,
])
def test_malformed_answers_are_refused(bad: bytes) -> None:
    with pytest.raises(ValueError):
        decode_fetch_response(bad, 0, 16, True)


def test_versions_outside_the_range_are_refused() -> None:
    with pytest.raises(ValueError):
        decode_fetch_response(b"", 0, 11, True)


def test_read_uvarint() -> None:
    for n in (0, 1, 127, 128, 300, 2**21, 2**32 - 1):
        assert read_uvarint(b"\xaa" + uvarint(n) + b"\x55", 1) == (n, 1 + len(uvarint(n)))
    with pytest.raises(ValueError):
        read_uvarint(b"\x80\x80", 0)
