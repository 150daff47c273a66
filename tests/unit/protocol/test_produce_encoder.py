"""The narrow Produce encoder writes exactly kio's bytes for ProduceResponse v0-v13
(v0-v2 with kio 0.5.0's classes, broker/protocol/_kio_legacy)."""

from __future__ import annotations

import datetime
import io
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.static.primitive import i32Timedelta

from broker.protocol.api import response_schema
from broker.protocol.produce_encoder import (
    MAX_VERSION,
    MIN_VERSION,
    ProducePartition,
    ProduceTopic,
    encode_produce_response,
)
from broker.protocol.wire import NodeEndpoint

I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
ERRORS = st.sampled_from([0, 2, 6, 7, 19, 20, 74, 87])
TEXT = st.text(max_size=12)
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)

partitions = st.builds(
    ProducePartition,
    partition_index=I32,
    error_code=ERRORS,
    base_offset=I64,
    log_append_time_ms=st.one_of(st.just(-1), st.integers(0, 2**45)),
    log_start_offset=I64,
    record_errors=st.lists(st.tuples(I32, st.one_of(st.none(), TEXT)), max_size=2),
    error_message=st.one_of(st.none(), TEXT),
    current_leader=st.one_of(st.just((-1, -1)), st.tuples(I32, I32)),
)
topics = st.lists(st.builds(ProduceTopic, name=TEXT,
                            partitions=st.lists(partitions, max_size=3),
                            topic_id=st.uuids()), max_size=3)
endpoints = st.lists(st.builds(NodeEndpoint, node_id=I32, host=TEXT, port=I32,
                               rack=st.one_of(st.none(), TEXT)), max_size=2)


def kio_bytes(version: int, ts: list[ProduceTopic], throttle_ms: int,
              eps: list[NodeEndpoint]) -> bytes:
    """The same response built as kio entities and written by kio."""
    schema = response_schema(0, version)
    mod = __import__(schema.__module__, fromlist=["PartitionProduceResponse"])

    def partition(p: ProducePartition) -> Any:
        kw: dict[str, Any] = dict(
            index=p.partition_index, error_code=ErrorCode(p.error_code), base_offset=p.base_offset,
        )
        if version >= 2:
            kw["log_append_time"] = (None if p.log_append_time_ms < 0
                                     else EPOCH + datetime.timedelta(
                                         milliseconds=p.log_append_time_ms))
        if version >= 5:
            kw["log_start_offset"] = p.log_start_offset
        if version >= 8:
            kw["record_errors"] = tuple(
                mod.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
                for i, m in p.record_errors)
            kw["error_message"] = p.error_message
        if version >= 10:
            kw["current_leader"] = mod.LeaderIdAndEpoch(
                leader_id=p.current_leader[0], leader_epoch=p.current_leader[1])
        return mod.PartitionProduceResponse(**kw)

    kw: dict[str, Any] = dict(
        responses=tuple(mod.TopicProduceResponse(
            **({"topic_id": t.topic_id} if version >= 13 else {"name": t.name}),
            partition_responses=tuple(partition(p) for p in t.partitions))
            for t in ts),
    )
    if version >= 1:
        kw["throttle_time"] = i32Timedelta.parse(datetime.timedelta(milliseconds=throttle_ms))
    if version >= 10:
        kw["node_endpoints"] = tuple(
            mod.NodeEndpoint(node_id=e.node_id, host=e.host, port=e.port, rack=e.rack)
            for e in eps)
    buf = io.BytesIO()
    entity_writer(schema)(buf, schema(**kw))
    return buf.getvalue()


@pytest.mark.parametrize("version", range(MIN_VERSION, MAX_VERSION + 1))
@settings(max_examples=60, deadline=None)
@given(ts=topics, throttle_ms=st.integers(0, 2**31 - 1), eps=endpoints)
def test_bytes_equal_kio(version: int, ts: list[ProduceTopic], throttle_ms: int,
                         eps: list[NodeEndpoint]) -> None:
    if version < 8:  # fields the version cannot carry
        ts = [replace(t, partitions=[replace(p, record_errors=(), error_message=None)
                                     for p in t.partitions]) for t in ts]
    if version < 10:
        ts = [replace(t, partitions=[replace(p, current_leader=(-1, -1))
                                     for p in t.partitions]) for t in ts]
        eps = []
    assert encode_produce_response(version, ts, throttle_ms, eps) == kio_bytes(
        version, ts, throttle_ms, eps)


@pytest.mark.parametrize("version", range(MIN_VERSION, MAX_VERSION + 1))
def test_appended_partitions_equal_kio(version: int) -> None:
    """The common answer (no error, no record errors, no message, no leader hint), which
    flexible versions write in one pack, beside partitions that take the long way."""
    appended = [ProducePartition(i, 0, 1000 * i, -1 if i % 2 else 1_700_000_000_000, 7)
                for i in range(3)]
    others = [ProducePartition(9, 6, -1, -1, -1, current_leader=(2, 5) if version >= 10
                               else (-1, -1))]
    if version >= 8:
        others.append(ProducePartition(8, 87, -1, -1, -1, record_errors=[(0, "bad")],
                                       error_message="invalid record"))
    ts = [ProduceTopic("t", appended + others, topic_id=None), ProduceTopic("u", appended[:1])]
    assert encode_produce_response(version, ts, 5) == kio_bytes(version, ts, 5, [])


def test_versions_outside_the_range_are_refused() -> None:
    for version in (MIN_VERSION - 1, MAX_VERSION + 1):
        with pytest.raises(ValueError, match="outside"):
            encode_produce_response(version, [])
