"""bench/replay.py's requests: encoded once with kio, resent with only the correlation id
(and Fetch's offsets) patched; what it reads back from batch headers and Produce answers."""

from __future__ import annotations

import datetime
import io
import struct

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchRequest
from kio.schema.fetch.v12.response import (
    AbortedTransaction,
    FetchableTopicResponse,
    FetchResponse,
    LeaderIdAndEpoch,
    PartitionData,
)
from kio.schema.produce.v9.request import ProduceRequest
from kio.schema.produce.v9.response import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from kio.schema.request_header.v2 import RequestHeader
from kio.schema.types import BrokerId, ProducerId, TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32, i32Timedelta, i64

from bench import replay
from broker.protocol.records import Record, build_batch, decode_records, iter_batches


def decode(frame: bytes | bytearray, schema: type) -> tuple[RequestHeader, object]:
    (size,) = struct.unpack_from(">i", frame, 0)
    assert size == len(frame) - 4
    body = bytes(frame[4:])
    header, used = entity_reader(RequestHeader)(body, 0)
    request: object
    request, rest = entity_reader(schema)(body, used)
    assert used + rest == len(body)
    return header, request


def test_the_produce_frame_decodes_with_kio_and_carries_one_batch_per_partition() -> None:
    value = bytes(range(100))
    frame = replay.produce_frame("t", [1, 4], 3, 100, acks=1, timestamp_ms=1_700_000_000_000,
                                 value=value)
    header, request = decode(frame, ProduceRequest)
    assert (header.request_api_key, header.request_api_version) == (0, 9)
    assert header.correlation_id == 0 and header.client_id == replay.CLIENT_ID
    assert isinstance(request, ProduceRequest)
    assert request.acks == 1 and request.transactional_id is None
    (topic,) = request.topic_data
    assert topic.name == "t" and [p.index for p in topic.partition_data] == [1, 4]
    for p in topic.partition_data:
        assert p.records is not None
        (batch,) = [h for h, _ in iter_batches(p.records)]  # CRC checked
        assert batch.producer_id == -1  # no sequence to repeat: the broker appends it again
        records = decode_records(p.records)
        assert [r.value for r in records] == [value] * 3
        assert {r.timestamp for r in records} == {1_700_000_000_000}


def test_patching_the_correlation_id_changes_that_field_only() -> None:
    frame = bytearray(replay.produce_frame("topic", [0], 2, 10))
    before = bytes(frame)
    for cid in (1, 7_000_000, 2**31 - 1):
        replay.set_correlation_id(frame, cid)
        header, request = decode(frame, ProduceRequest)
        assert header.correlation_id == cid
        assert frame[:replay.CORRELATION_ID_AT] == before[:replay.CORRELATION_ID_AT]
        assert frame[replay.CORRELATION_ID_AT + 4:] == before[replay.CORRELATION_ID_AT + 4:]
        assert request == decode(before, ProduceRequest)[1]


def test_fetch_offsets_are_patched_per_partition() -> None:
    template = replay.fetch_template("events", [0, 2, 5], max_wait_ms=100,
                                     partition_max_bytes=4096)
    frame = bytearray(template.frame)
    _, request = decode(frame, FetchRequest)
    assert isinstance(request, FetchRequest)
    assert [int(p.fetch_offset) for p in request.topics[0].partitions] == [0, 0, 0]
    replay.set_fetch_offset(frame, template, 2, 123_456_789_012)
    replay.set_fetch_offset(frame, template, 5, 7)
    replay.set_correlation_id(frame, 42)
    header, request = decode(frame, FetchRequest)
    assert isinstance(request, FetchRequest)
    assert header.correlation_id == 42
    assert request.max_wait == i32Timedelta.parse(datetime.timedelta(milliseconds=100))
    (topic,) = request.topics
    assert topic.topic == "events"
    assert [(int(p.partition), int(p.fetch_offset), int(p.partition_max_bytes))
            for p in topic.partitions] == [(0, 0, 4096), (2, 123_456_789_012, 4096), (5, 7, 4096)]


def _batch(base: int, n: int) -> bytes:
    return build_batch([Record(timestamp=1, value=b"v")] * n, base_offset=base)


def test_the_next_offset_comes_from_whole_batches_and_skips_what_was_read() -> None:
    data = _batch(10, 5) + _batch(15, 3)  # offsets 10-14, 15-17
    assert replay.next_offset_after(data, 10) == (18, 8)
    # a fetch from inside the first batch gets it whole; records before the offset not counted
    assert replay.next_offset_after(data, 12) == (18, 6)
    partial = data + _batch(18, 4)[:30]
    assert replay.next_offset_after(partial, 10) == (18, 8)
    assert replay.next_offset_after(b"", 99) == (99, 0)


def _fetch_answer(topics: tuple[FetchableTopicResponse, ...], error: ErrorCode = ErrorCode.none
                  ) -> bytes:
    response = FetchResponse(throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
                             error_code=error, session_id=i32(0), responses=topics)
    buf = io.BytesIO()
    buf.write(struct.pack(">i", 7))  # correlation id
    buf.write(b"\0")  # the flexible response header's tagged fields
    entity_writer(FetchResponse)(buf, response)
    return buf.getvalue()


def _partition(index: int, records: bytes | None, error: ErrorCode = ErrorCode.none,
               **tagged: object) -> PartitionData:
    aborted = tuple(AbortedTransaction(producer_id=ProducerId(7 + i), first_offset=i64(i))
                    for i in range(index % 3)) if records is not None else None
    return PartitionData(partition_index=i32(index), error_code=error, high_watermark=i64(99),
                         last_stable_offset=i64(98), log_start_offset=i64(0),
                         aborted_transactions=aborted, records=records, **tagged)


def test_fetch_answers_read_in_place_as_kio_reads_them() -> None:
    records = _batch(10, 5) + _batch(15, 3)
    frame = _fetch_answer((
        FetchableTopicResponse(topic=TopicName("t"), partitions=(
            _partition(0, records), _partition(1, b""), _partition(2, None),
            _partition(4, records[:40], current_leader=LeaderIdAndEpoch(
                leader_id=BrokerId(3), leader_epoch=i32(5))),
        )),
        FetchableTopicResponse(topic=TopicName("other-topic"), partitions=(
            _partition(5, None, ErrorCode.not_leader_or_follower),)),
    ))
    error, partitions = replay.read_fetch_answer(memoryview(frame))
    assert error == 0
    assert (error, [(p.topic, p.partition, p.error_code, len(p.records)) for p in partitions]
            ) == replay.fetch_answer_with_kio(frame)
    assert bytes(partitions[0].records) == records
    assert partitions[-1].error_code == ErrorCode.not_leader_or_follower.value
    assert replay.next_offset_after(partitions[0].records, 10) == (18, 8)
    # as the replayer reads it: a view of its (writable) receive buffer
    error_w, partitions_w = replay.read_fetch_answer(memoryview(bytearray(frame)))
    assert (error_w, [(p.topic, p.partition, p.error_code, bytes(p.records))
                      for p in partitions_w]) == \
        (error, [(p.topic, p.partition, p.error_code, bytes(p.records)) for p in partitions])


def test_a_fetch_answer_cut_short_is_refused() -> None:
    frame = _fetch_answer((FetchableTopicResponse(topic=TopicName("t"), partitions=(
        _partition(0, _batch(0, 2)),)),), ErrorCode.unknown_server_error)
    assert replay.read_fetch_answer(memoryview(frame))[0] == ErrorCode.unknown_server_error.value
    for cut in range(len(frame)):
        with pytest.raises(ValueError):
            replay.read_fetch_answer(memoryview(frame[:cut]))


def test_produce_answers_report_their_errors() -> None:
    response = ProduceResponse(responses=(TopicProduceResponse(
        name=TopicName("t"), partition_responses=(
            PartitionProduceResponse(index=i32(0), error_code=ErrorCode.none, base_offset=i64(0),
                                     log_append_time=None, log_start_offset=i64(0),
                                     record_errors=(), error_message=None),
            PartitionProduceResponse(index=i32(1), error_code=ErrorCode.not_leader_or_follower,
                                     base_offset=i64(-1), log_append_time=None,
                                     log_start_offset=i64(-1), record_errors=(),
                                     error_message=None))),),
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)))
    buf = io.BytesIO()
    buf.write(struct.pack(">i", 3))  # correlation id
    buf.write(b"\0")  # the flexible response header's tagged fields
    entity_writer(ProduceResponse)(buf, response)
    assert replay.produce_errors(buf.getvalue()) == ["t-1: NOT_LEADER_OR_FOLLOWER"]


def test_an_idempotent_frame_gives_each_send_the_next_sequences_and_a_valid_crc() -> None:
    value = bytes(range(50))
    batch = build_batch([Record(timestamp=1_700_000_000_000, value=value)] * 4,
                        producer_id=41, producer_epoch=2, base_sequence=0)
    frame = replay.produce_frame("t", [0, 3], 4, 50, timestamp_ms=1_700_000_000_000,
                                 value=value, producer_id=41, producer_epoch=2)
    idempotent = replay.IdempotentFrame(frame, batch, 2, 4)
    for expected in (0, 4, 8):
        sent = idempotent.next()
        _, request = decode(sent, ProduceRequest)
        assert isinstance(request, ProduceRequest)
        for p in request.topic_data[0].partition_data:
            assert p.records is not None
            (h,) = [h for h, _ in iter_batches(p.records)]  # CRC checked
            assert (h.producer_id, h.producer_epoch, h.base_sequence) == (41, 2, expected)
            assert [r.value for r in decode_records(p.records)] == [value] * 4


def test_an_idempotent_frame_must_find_every_partition_batch() -> None:
    batch = build_batch([Record(timestamp=1, value=b"x")], producer_id=1, producer_epoch=0,
                        base_sequence=0)
    frame = replay.produce_frame("t", [0], 1, 1, timestamp_ms=1, value=b"x",
                                 producer_id=1, producer_epoch=0)
    try:
        replay.IdempotentFrame(frame, batch, 2, 1)
    except AssertionError as e:
        assert "1 batches found for 2 partitions" in str(e)
    else:
        raise AssertionError("a frame with fewer batches than partitions was accepted")
