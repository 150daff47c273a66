"""The fast Fetch encoder writes exactly kio's bytes for FetchResponse v0-v16 (v0-v3 with kio
0.5.0's classes, broker/protocol/_kio_legacy)."""

from __future__ import annotations

import dataclasses
import io
import os
import tempfile
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, BinaryIO

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.static.primitive import i32Timedelta

from broker.protocol.api import response_schema
from broker.protocol.fetch_encoder import (
    FetchPartition,
    FetchResponseData,
    FetchTopic,
    NodeEndpoint,
    encode_fetch_response,
)
from broker.protocol.frames import FileSlice, ResponseChunks

I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
ERRORS = st.sampled_from([0, 1, 3, 6, 74, 75])
PAIR_I = st.one_of(st.just((-1, -1)), st.tuples(I32, I32))


@st.composite
def partitions(draw: Any) -> FetchPartition:
    return FetchPartition(
        partition_index=draw(I32),
        error_code=draw(ERRORS),
        high_watermark=draw(I64),
        last_stable_offset=draw(I64),
        log_start_offset=draw(I64),
        aborted_transactions=draw(st.one_of(st.none(), st.lists(st.tuples(I64, I64),
                                                                 max_size=3))),
        preferred_read_replica=draw(I32),
        records=draw(st.one_of(st.none(), st.binary(max_size=300))),
        diverging_epoch=draw(st.one_of(st.just((-1, -1)), st.tuples(I32, I64))),
        current_leader=draw(PAIR_I),
        snapshot_id=draw(st.one_of(st.just((-1, -1)), st.tuples(I64, I32))),
    )


@st.composite
def responses(draw: Any) -> FetchResponseData:
    topics = draw(st.lists(st.builds(
        FetchTopic,
        partitions=st.lists(partitions(), max_size=4),
        topic=st.text(max_size=20),
        topic_id=st.one_of(st.none(), st.uuids()),
    ), max_size=3))
    return FetchResponseData(
        topics=topics,
        throttle_time_ms=draw(st.integers(0, 2**31 - 1)),
        error_code=draw(ERRORS),
        session_id=draw(I32),
        node_endpoints=draw(st.lists(st.builds(
            NodeEndpoint, node_id=I32, host=st.text(max_size=10), port=I32,
            rack=st.one_of(st.none(), st.text(max_size=5))), max_size=2)),
    )


def kio_bytes(version: int, data: FetchResponseData) -> bytes:
    """The same response built as kio entities and written by kio."""
    schema = response_schema(1, version)
    mod = __import__(schema.__module__, fromlist=["PartitionData"])

    def partition(p: FetchPartition) -> Any:
        kw: dict[str, Any] = dict(
            partition_index=p.partition_index,
            error_code=ErrorCode(p.error_code),
            high_watermark=p.high_watermark,
            records=p.records,
        )
        if version >= 4:
            kw["last_stable_offset"] = p.last_stable_offset
            kw["aborted_transactions"] = None if p.aborted_transactions is None else tuple(
                mod.AbortedTransaction(producer_id=a, first_offset=b)
                for a, b in p.aborted_transactions)
        if version >= 5:
            kw["log_start_offset"] = p.log_start_offset
        if version >= 11:
            kw["preferred_read_replica"] = p.preferred_read_replica
        if version >= 12:
            kw["diverging_epoch"] = mod.EpochEndOffset(
                epoch=p.diverging_epoch[0], end_offset=p.diverging_epoch[1])
            kw["current_leader"] = mod.LeaderIdAndEpoch(
                leader_id=p.current_leader[0], leader_epoch=p.current_leader[1])
            kw["snapshot_id"] = mod.SnapshotId(
                end_offset=p.snapshot_id[0], epoch=p.snapshot_id[1])
        return mod.PartitionData(**kw)

    def topic(t: FetchTopic) -> Any:
        ps = tuple(partition(p) for p in t.partitions)
        if version >= 13:
            return mod.FetchableTopicResponse(topic_id=t.topic_id, partitions=ps)
        return mod.FetchableTopicResponse(topic=t.topic, partitions=ps)

    kw: dict[str, Any] = dict(responses=tuple(topic(t) for t in data.topics))
    if version >= 1:
        kw["throttle_time"] = i32Timedelta.parse(timedelta(milliseconds=data.throttle_time_ms))
    if version >= 7:
        kw["error_code"] = ErrorCode(data.error_code)
        kw["session_id"] = data.session_id
    if version >= 16:
        kw["node_endpoints"] = tuple(
            mod.NodeEndpoint(node_id=e.node_id, host=e.host, port=e.port, rack=e.rack)
            for e in data.node_endpoints)
    buf = io.BytesIO()
    entity_writer(schema)(buf, schema(**kw))
    return buf.getvalue()


@dataclass(frozen=True)
class Slice:
    file: BinaryIO
    position: int
    length: int

    def read_bytes(self) -> bytes:
        return os.pread(self.file.fileno(), self.length, self.position)


def with_file_slices(data: FetchResponseData, f: BinaryIO) -> FetchResponseData:
    """The same response with every non-empty records field moved into `f` as a slice."""
    def move(p: FetchPartition) -> FetchPartition:
        if not p.records:
            return p
        assert isinstance(p.records, bytes)
        pos = f.seek(0, os.SEEK_END)
        f.write(b"junk" + p.records + b"junk")
        f.flush()
        half = len(p.records) // 2
        # Split in two: a slice then bytes, to exercise multi-chunk records.
        recs: list[bytes | FileSlice] = [Slice(f, pos + 4, half), p.records[half:]]
        return dataclasses.replace(p, records=recs)
    return FetchResponseData(
        topics=[FetchTopic(partitions=[move(p) for p in t.partitions], topic=t.topic,
                           topic_id=t.topic_id) for t in data.topics],
        throttle_time_ms=data.throttle_time_ms, error_code=data.error_code,
        session_id=data.session_id, node_endpoints=data.node_endpoints)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 18), responses())
def test_matches_kio_byte_for_byte(version: int, data: FetchResponseData) -> None:
    expected = kio_bytes(version, data)
    chunks = encode_fetch_response(version, data)
    assert chunks.size == len(expected)
    assert chunks.to_bytes() == expected
    with tempfile.TemporaryFile() as f:
        sliced = encode_fetch_response(version, with_file_slices(data, f))
        assert sliced.size == len(expected)
        assert sliced.to_bytes() == expected


def test_records_stay_file_slices() -> None:
    with tempfile.TemporaryFile() as f:
        f.write(b"x" * 1000)
        s = Slice(f, 100, 800)
        data = FetchResponseData(topics=[FetchTopic(topic="t", partitions=[
            FetchPartition(0, records=s), FetchPartition(1, records=b""),
            FetchPartition(2, records=None)])])
        for version in (0, 3, 4, 11, 12, 13):
            chunks = encode_fetch_response(version, data)
            parts = list(chunks)
            assert parts[1] is s and len(parts) == 3
            assert isinstance(chunks, ResponseChunks)


def test_empty_records_are_empty_not_null() -> None:
    data = FetchResponseData(topics=[FetchTopic(topic="t", partitions=[
        FetchPartition(0, records=b"")])])
    v11 = encode_fetch_response(11, data).to_bytes()
    assert v11.endswith(b"\x00\x00\x00\x00")  # int32 length 0, not -1
    v12 = encode_fetch_response(12, data).to_bytes()
    assert v12.endswith(b"\x01\x00\x00\x00")  # uvarint 0+1, then partition/topic/top tags


def test_version_bounds() -> None:
    with pytest.raises(ValueError):
        encode_fetch_response(-1, FetchResponseData(topics=[]))
    with pytest.raises(ValueError):
        encode_fetch_response(19, FetchResponseData(topics=[]))


def test_topic_id_v13() -> None:
    tid = uuid.uuid4()
    data = FetchResponseData(topics=[FetchTopic(topic_id=tid, partitions=[])])
    assert tid.bytes in encode_fetch_response(13, data).to_bytes()
