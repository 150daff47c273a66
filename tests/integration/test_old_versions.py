"""Every API version Kafka 4.0 removed (KIP-896) and Kafka 3.9 served, sent over a socket to a
real `skiff dev` node as kio builds it (kio 0.5.0's classes for these versions) and checked
against that version's semantics; then a node with skiff.min.api.versions=kafka4 refuses them.
"""

from __future__ import annotations

import contextlib
import datetime
import importlib
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.record import MemoryRecords
from kio.schema.errors import ErrorCode

from broker.protocol.compression import Compression
from broker.protocol.kio_build import build
from broker.protocol.legacy import build_message_set
from broker.testing.wire import (
    api_versions_request,
    decode_response,
    encode_request,
    raw_frame,
    recv_frame,
)
from tests.support.node import SkiffNode

pytestmark = pytest.mark.timeout(120)
KEYS = {"produce": 0, "fetch": 1, "list_offsets": 2, "metadata": 3, "offset_commit": 8,
        "offset_fetch": 9, "find_coordinator": 10, "create_topics": 19, "delete_topics": 20,
        "offset_for_leader_epoch": 23, "describe_configs": 32, "describe_log_dirs": 35}


def mod(api: str, version: int) -> Any:
    try:
        return importlib.import_module(f"kio.schema.{api}.v{version}.request")
    except ModuleNotFoundError:
        return importlib.import_module(f"broker.protocol._kio_legacy.{api}.v{version}.request")


class Conn:
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=20)
        self.corr = 0

    def call(self, api: str, version: int, request: Any) -> Any:
        self.corr += 1
        self.sock.sendall(encode_request(request, self.corr, client_id="old-versions-test"))
        corr, resp = decode_response(KEYS[api], version, recv_frame(self.sock))
        assert corr == self.corr
        assert int(resp.__version__) == version
        return resp


@pytest.fixture
def conn(bootstrap: str) -> Iterator[Conn]:
    c = Conn(bootstrap)
    try:
        yield c
    finally:
        c.sock.close()


def create_topic(c: Conn, version: int, name: str, partitions: int = 1,
                 validate_only: bool = False) -> Any:
    m = mod("create_topics", version)
    return c.call("create_topics", version, build(
        m.CreateTopicsRequest, timeout=datetime.timedelta(seconds=10), validate_only=validate_only,
        topics=(build(m.CreatableTopic, name=name, num_partitions=partitions,
                      replication_factor=1, assignments=(), configs=()),)))


def produce(c: Conn, version: int, topic: str, data: bytes) -> Any:
    m = mod("produce", version)
    return c.call("produce", version, build(
        m.ProduceRequest, acks=-1, timeout=datetime.timedelta(seconds=10), topic_data=(
            build(m.TopicProduceData, name=topic, partition_data=(
                build(m.PartitionProduceData, index=0, records=data),)),)))


def fetch(c: Conn, version: int, topic: str, offset: int) -> Any:
    m = mod("fetch", version)
    return c.call("fetch", version, build(
        m.FetchRequest, replica_id=-1, max_wait=datetime.timedelta(milliseconds=100), min_bytes=1,
        max_bytes=1 << 20, topics=(build(m.FetchTopic, topic=topic, partitions=(
            build(m.FetchPartition, partition=0, fetch_offset=offset,
                  partition_max_bytes=1 << 20),)),)))


def test_removed_versions_over_the_wire(conn: Conn, topic_name: str) -> None:
    # CreateTopics v0 creates; v1 validate-only does not.
    r0 = create_topic(conn, 0, topic_name)
    assert [(t.name, t.error_code) for t in r0.topics] == [(topic_name, ErrorCode.none)]
    r1 = create_topic(conn, 1, topic_name + "-dry", validate_only=True)
    assert r1.topics[0].error_code is ErrorCode.none and r1.topics[0].error_message is None

    # Metadata v0: an empty list means every topic.
    md = conn.call("metadata", 0, mod("metadata", 0).MetadataRequest(topics=()))
    names = {t.name for t in md.topics}
    assert topic_name in names and topic_name + "-dry" not in names

    # Produce v0 (magic 0), v1 (magic 0, gzip), v2 (magic 1).
    sets = [(0, build_message_set([(b"k", b"a", 1000)], magic=0)),
            (1, build_message_set([(None, b"b", 1001), (None, b"c", 1002)], magic=0,
                                  codec=Compression.GZIP)),
            (2, build_message_set([(b"k", b"d", 1003)], magic=1))]
    bases = []
    for version, data in sets:
        resp = produce(conn, version, topic_name, data)
        part = resp.responses[0].partition_responses[0]
        assert part.error_code is ErrorCode.none
        bases.append(int(part.base_offset))
    assert bases == [0, 1, 3]

    # Fetch v0-v3: down-converted, read with kafka-python's legacy decoder.
    for version in range(4):
        got: list[tuple[int, bytes | None]] = []
        offset = 0
        for _ in range(8):
            resp = fetch(conn, version, topic_name, offset)
            part = resp.responses[0].partitions[0]
            assert part.error_code is ErrorCode.none and part.high_watermark == 4
            mr = MemoryRecords(part.records)
            while (b := mr.next_batch()) is not None:
                assert b.magic == (0 if version <= 1 else 1)
                got.extend((r.offset, r.value) for r in b)
            if got and got[-1][0] == 3:
                break
            offset = got[-1][0] + 1 if got else offset
        assert got == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]

    # ListOffsets v0: latest and earliest as old-style offset lists.
    lo = mod("list_offsets", 0)
    for ts, expect in ((-1, (4,)), (-2, (0,))):
        resp = conn.call("list_offsets", 0, build(lo.ListOffsetsRequest, replica_id=-1, topics=(
            build(lo.ListOffsetsTopic, name=topic_name, partitions=(
                build(lo.ListOffsetsPartition, partition_index=0, timestamp=ts,
                      max_num_offsets=1),)),)))
        part = resp.topics[0].partitions[0]
        assert (part.error_code, tuple(part.old_style_offsets)) == (ErrorCode.none, expect)

    # OffsetForLeaderEpoch v0-v1.
    for version in (0, 1):
        m = mod("offset_for_leader_epoch", version)
        resp = conn.call("offset_for_leader_epoch", version, build(
            m.OffsetForLeaderEpochRequest, topics=(build(m.OffsetForLeaderTopic, topic=topic_name,
                partitions=(build(m.OffsetForLeaderPartition, partition=0,
                                  leader_epoch=0),)),)))
        p = resp.topics[0].partitions[0]
        assert p.error_code is ErrorCode.none and p.end_offset == 4

    # OffsetCommit v0 and v1, read back with OffsetFetch v0.
    group = topic_name + "-g"
    fc = mod("find_coordinator", 0)
    deadline = time.monotonic() + 30
    while True:  # FindCoordinator creates __consumer_offsets, as in Kafka
        found = conn.call("find_coordinator", 0, build(fc.FindCoordinatorRequest, key=group))
        if found.error_code is ErrorCode.none or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert found.error_code is ErrorCode.none
    for version, committed in ((0, 2), (1, 3)):
        m = mod("offset_commit", version)
        req = build(m.OffsetCommitRequest, group_id=group, generation_id_or_member_epoch=-1,
                    member_id="", topics=(build(m.OffsetCommitRequestTopic, name=topic_name,
                        partitions=(build(m.OffsetCommitRequestPartition, partition_index=0,
                                          committed_offset=committed, commit_timestamp=-1,
                                          committed_metadata=""),)),))
        deadline = time.monotonic() + 20
        while True:  # the coordinator may still be loading the offsets partition
            resp = conn.call("offset_commit", version, req)
            code = resp.topics[0].partitions[0].error_code
            if code is ErrorCode.none or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert code is ErrorCode.none
        of = mod("offset_fetch", 0)
        got = conn.call("offset_fetch", 0, build(of.OffsetFetchRequest, group_id=group, topics=(
            build(of.OffsetFetchRequestTopic, name=topic_name, partition_indexes=(0,)),)))
        p = got.topics[0].partitions[0]
        assert (p.error_code, p.committed_offset) == (ErrorCode.none, committed)

    # DescribeConfigs v0: is_default instead of a source.
    dc = mod("describe_configs", 0)
    resp = conn.call("describe_configs", 0, build(dc.DescribeConfigsRequest, resources=(
        build(dc.DescribeConfigsResource, resource_type=2, resource_name=topic_name,
              configuration_keys=("cleanup.policy",)),)))
    (entry,) = resp.results[0].configs
    assert (entry.name, entry.value, entry.is_default) == ("cleanup.policy", "delete", True)

    # DescribeLogDirs v0: the partition and its size.
    dl = mod("describe_log_dirs", 0)
    resp = conn.call("describe_log_dirs", 0, build(dl.DescribeLogDirsRequest, topics=(
        build(dl.DescribableLogDirTopic, topic=topic_name, partitions=(0,)),)))
    sizes = [p.partition_size for r in resp.results for t in r.topics for p in t.partitions]
    assert resp.results[0].error_code is ErrorCode.none and len(sizes) == 1 and sizes[0] > 0

    # DeleteTopics v0.
    dt = mod("delete_topics", 0)
    resp = conn.call("delete_topics", 0, build(dt.DeleteTopicsRequest, topic_names=(topic_name,),
                                                timeout=datetime.timedelta(seconds=10)))
    assert [(r.name, r.error_code) for r in resp.responses] == [(topic_name, ErrorCode.none)]


class Kafka4Node(SkiffNode):
    def command(self) -> list[str]:
        return [*super().command(), "--override", "skiff.min.api.versions=kafka4"]


def test_kafka4_floors_on_a_real_node(tmp_path: Any) -> None:
    node = Kafka4Node(tmp_path / "node")
    node.start()
    try:
        node.wait_ready()
        host, port = node.bootstrap.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=20) as sock:
            sock.sendall(encode_request(api_versions_request(3), 1))
            _, resp = decode_response(18, 3, recv_frame(sock))
            ranges = {int(k.api_key): (int(k.min_version), int(k.max_version))
                      for k in resp.api_keys}
            assert ranges[0][0] == 3 and ranges[1][0] == 4 and ranges[2][0] == 1
            assert ranges[8][0] == 2 and ranges[9][0] == 1 and ranges[3][0] == 0
            # Produce v2 is refused as Kafka 4 refuses it: the connection closes.
            sock.sendall(raw_frame(0, 2, 2, b"\x00\x01\x00\x00\x03\xe8\x00\x00\x00\x00"))
            sock.settimeout(10)
            with contextlib.suppress(ConnectionResetError):
                assert sock.recv(1) == b""
    finally:
        node.close()
