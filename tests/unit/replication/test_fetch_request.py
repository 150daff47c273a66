"""raft/fetch_codec.encode_fetch_request_body writes exactly what kio writes for the same
replica Fetch request, for every version the replica fetcher and the quorum send (v12-v17),
and kio reads it back."""

from __future__ import annotations

import datetime
import importlib
import io
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader, entity_writer

from broker.protocol.fetch_codec import (
    REQUEST_VERSIONS,
    ForgottenTopic,
    PartitionFetch,
    TopicFetch,
    encode_fetch_request_body,
)

i32 = st.integers(-1, 2**31 - 1)
i64 = st.integers(-1, 2**63 - 1)
VERSIONS = list(REQUEST_VERSIONS)

partitions = st.builds(PartitionFetch, st.integers(0, 2**31 - 1), i32, i64, i32, i64, i32,
                       st.one_of(st.none(), st.uuids()))  # v17's ReplicaDirectoryId
topics = st.lists(
    st.builds(TopicFetch, st.text(min_size=1, max_size=20), st.one_of(st.none(), st.uuids()),
              st.lists(partitions, min_size=1, max_size=4)),
    max_size=3)
forgotten_topics = st.lists(
    st.builds(ForgottenTopic, st.text(min_size=1, max_size=20), st.one_of(st.none(), st.uuids()),
              st.lists(st.integers(0, 2**31 - 1), max_size=4)),
    max_size=3)


def kio_entity(version: int, replica_id: int, replica_epoch: int, max_wait_ms: int,
               min_bytes: int, max_bytes: int, topics: list[TopicFetch],
               cluster_id: str | None = None, session_id: int = 0, session_epoch: int = -1,
               forgotten: list[ForgottenTopic] | None = None) -> Any:
    m = importlib.import_module(f"kio.schema.fetch.v{version}.request")

    def build(cls: Any, **fields: Any) -> Any:
        return cls(**{k: v for k, v in fields.items() if k in cls.__dataclass_fields__})

    extra: dict[str, Any] = {"replica_id": replica_id}
    if version >= 15:
        extra = {"replica_state": m.ReplicaState(replica_id=replica_id,
                                                  replica_epoch=replica_epoch)}
    return build(
        m.FetchRequest, max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=0, session_id=session_id,
        session_epoch=session_epoch, rack_id="", cluster_id=cluster_id, **extra,
        forgotten_topics_data=tuple(
            build(m.ForgottenTopic, topic=f.topic, topic_id=f.topic_id,
                  partitions=tuple(f.partitions)) for f in forgotten or ()),
        topics=tuple(
            build(m.FetchTopic, topic=t.topic, topic_id=t.topic_id,
                  partitions=tuple(
                      build(m.FetchPartition, partition=p.partition,
                            current_leader_epoch=p.current_leader_epoch,
                            fetch_offset=p.fetch_offset,
                            last_fetched_epoch=p.last_fetched_epoch,
                            log_start_offset=p.log_start_offset,
                            partition_max_bytes=p.partition_max_bytes,
                            replica_directory_id=p.replica_directory_id)
                      for p in t.partitions))
            for t in topics),
    )


def kio_bytes(entity: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


@settings(max_examples=400, deadline=None)
@given(version=st.sampled_from(VERSIONS), replica_id=i32, replica_epoch=i64,
       max_wait_ms=st.integers(0, 2**31 - 1), min_bytes=i32, max_bytes=i32, topics=topics,
       cluster_id=st.one_of(st.none(), st.text(max_size=30)), session_id=i32,
       session_epoch=i32, forgotten=forgotten_topics)
def test_bytes_match_kio(version: int, replica_id: int, replica_epoch: int, max_wait_ms: int,
                         min_bytes: int, max_bytes: int, topics: list[TopicFetch],
                         cluster_id: str | None, session_id: int, session_epoch: int,
                         forgotten: list[ForgottenTopic]) -> None:
    fast = encode_fetch_request_body(version, replica_id=replica_id, replica_epoch=replica_epoch,
                                     max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                                     max_bytes=max_bytes, topics=topics, cluster_id=cluster_id,
                                     session_id=session_id, session_epoch=session_epoch,
                                     forgotten=forgotten)
    entity = kio_entity(version, replica_id, replica_epoch, max_wait_ms, min_bytes, max_bytes,
                        topics, cluster_id, session_id, session_epoch, forgotten)
    assert fast == kio_bytes(entity)
    decoded, used = entity_reader(type(entity))(fast, 0)
    assert used == len(fast)
    assert decoded == entity


def test_the_fetchers_shape_on_v16_carries_the_replica_state() -> None:
    tid = uuid.uuid4()
    body = encode_fetch_request_body(
        16, replica_id=4, replica_epoch=77, max_wait_ms=500, min_bytes=1, max_bytes=10 << 20,
        topics=[TopicFetch("t", tid, [PartitionFetch(0, 3, 1000, 3, 0, 1 << 20)])])
    m = importlib.import_module("kio.schema.fetch.v16.request")
    decoded, _ = entity_reader(m.FetchRequest)(body, 0)
    assert (decoded.replica_state.replica_id, decoded.replica_state.replica_epoch) == (4, 77)
    [topic] = decoded.topics
    assert topic.topic_id == tid
    assert topic.partitions[0].fetch_offset == 1000


@pytest.mark.parametrize("version", [11, 18])
def test_versions_outside_the_encoders_range_are_refused(version: int) -> None:
    with pytest.raises(ValueError, match="outside"):
        encode_fetch_request_body(version, replica_id=1, replica_epoch=1, max_wait_ms=0,
                                  min_bytes=1, max_bytes=1, topics=[])
