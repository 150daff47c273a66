"""A node-like object for group handler tests, built from real pieces: MetadataPublisher,
LogManager and ReplicaManager in tmp_path, the GroupCoordinatorService, and a controller
stand-in whose create_topics publishes the topic the way the real controller's records would."""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from broker.controller.requests import CreatableTopic, CreateTopicResult
from broker.group.records import OFFSETS_TOPIC
from broker.group.shell import GroupCoordinatorService
from broker.log import LogConfig, LogManager
from broker.metadata.features import bootstrap_levels
from broker.metadata.image import (
    BrokerRegistration,
    Endpoint,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)
from broker.metadata.publisher import MetadataPublisher
from broker.metadata.records import RESOURCE_TOPIC
from broker.protocol.api import BROKER_APIS
from broker.protocol.headers import encode_body
from broker.replication import ReplicaManager
from broker.server.context import RequestContext
from broker.share.coordinator_shell import ShareCoordinatorService
from broker.util.tasks import ServiceTasks

if TYPE_CHECKING:
    from broker.protocol.transport import ConnectionSecurity
    from broker.share.shell import ShareService
    from broker.txn.shell import TransactionCoordinatorService

NODE_ID = 1
CONFIG: dict[str, Any] = {
    "offsets.topic.num.partitions": 4,
    "offsets.topic.replication.factor": 3,
    "offsets.topic.segment.bytes": 1 << 20,
    "offsets.commit.timeout.ms": 2000,
    "offsets.retention.minutes": 7 * 24 * 60,
    "offsets.retention.check.interval.ms": 600000,
    "offset.metadata.max.bytes": 4096,
    "group.initial.rebalance.delay.ms": 0,
    # assignment batching off, as Kafka runs its request tests; test_consumer_group_heartbeat
    # runs with Kafka's default too
    "group.consumer.assignment.interval.ms": 0,
    "group.share.assignment.interval.ms": 0,
    "group.streams.assignment.interval.ms": 0,
    "group.min.session.timeout.ms": 10,
    "group.max.session.timeout.ms": 600000,
    "group.max.size": 100,
    "share.coordinator.state.topic.num.partitions": 3,
    "share.coordinator.state.topic.replication.factor": 1,
    "share.coordinator.state.topic.min.isr": 1,
    "share.coordinator.write.timeout.ms": 2000,
}


@dataclass
class FakeController:
    node: GroupNode
    calls: list[CreatableTopic] = field(default_factory=list)

    async def create_topics(self, topics: list[CreatableTopic]) -> list[CreateTopicResult]:
        out = []
        for t in topics:
            self.calls.append(t)
            # -1: the controller's num.partitions (1 here)
            partitions = t.num_partitions if t.num_partitions > 0 else 1
            self.node.add_topic(t.name, partitions, leader=NODE_ID)
            if t.configs:
                image = self.node.publisher.image
                self.node.publisher.load_snapshot(replace(
                    image, offset=image.offset + 1, configs={
                        **image.configs, (RESOURCE_TOPIC, t.name): {
                            k: v for k, v in t.configs.items() if v is not None}}))
            out.append(CreateTopicResult(t.name, num_partitions=partitions,
                                         replication_factor=t.replication_factor))
        return out


class GroupNode:
    def __init__(self, tmp_path: Path, **config: Any) -> None:
        self.node_id = NODE_ID
        self.tasks = ServiceTasks("group_node")  # the node's task group, as broker/node's
        self.config = {**CONFIG, **config}
        self.clock = lambda: int(time.time() * 1000)
        self.logs = LogManager([tmp_path], LogConfig(), self.clock)
        self.logs.load()
        self.replicas = ReplicaManager(NODE_ID, self.logs, self.clock)
        self.publisher = MetadataPublisher("cluster")
        self.publisher.subscribe(self._apply)
        self.controller = FakeController(self)
        broker = BrokerRegistration(
            broker_id=NODE_ID, epoch=1, incarnation_id=uuid.uuid4(),
            endpoints=(Endpoint("PLAINTEXT", "127.0.0.1", 9092),), fenced=False)
        # the feature levels a new cluster gets (group.version 1: KIP-848 enabled)
        self.publisher.load_snapshot(replace(self.publisher.image, offset=0,
                                             brokers={NODE_ID: broker},
                                             features=bootstrap_levels()))
        self.group_coordinator = GroupCoordinatorService(self, rng=random.Random(3),
                                                         tick_interval_s=0.02)
        self.share_coordinator = ShareCoordinatorService(self, tick_interval_s=0.02)
        # members a real Node declares (broker/node) and this one runs none of
        self.share_groups: ShareService | None = None
        self.txn_coordinator: TransactionCoordinatorService | None = None
        self.inter_broker_security: ConnectionSecurity | None = None

    @property
    def metadata(self) -> MetadataImage:
        return self.publisher.image

    def add_topic(self, name: str, partitions: int, leader: int = NODE_ID,
                  epoch: int = 0) -> None:
        image = self.publisher.image
        old = image.topic(name)
        tid = old.topic_id if old is not None else uuid.uuid4()
        regs = {i: PartitionRegistration(replicas=(NODE_ID,), isr=(NODE_ID,), leader=leader,
                                         leader_epoch=epoch) for i in range(partitions)}
        topic = TopicImage(name, tid, regs)
        by_id = {k: v for k, v in image.topics_by_id.items() if v.name != name}
        by_id[tid] = topic
        by_name = {**image.topics_by_name, name: topic}
        self.publisher.load_snapshot(replace(image, offset=image.offset + 1,
                                             topics_by_id=by_id, topics_by_name=by_name))

    def remove_topic(self, name: str) -> None:
        image = self.publisher.image
        by_id = {k: v for k, v in image.topics_by_id.items() if v.name != name}
        by_name = {k: v for k, v in image.topics_by_name.items() if k != name}
        self.publisher.load_snapshot(replace(image, offset=image.offset + 1,
                                             topics_by_id=by_id, topics_by_name=by_name))

    def _apply(self, old: MetadataImage, new: MetadataImage, delta: Any) -> None:
        for topic in new.topics_by_id.values():
            for index, reg in topic.partitions.items():
                self.replicas.apply_partition(
                    topic=topic.name, topic_id=topic.topic_id, index=index, leader=reg.leader,
                    leader_epoch=reg.leader_epoch, partition_epoch=reg.partition_epoch,
                    replicas=reg.replicas, isr=reg.isr, min_insync_replicas=1,
                    log_config=LogConfig())

    async def start(self) -> None:
        self.group_coordinator.start()
        self.share_coordinator.start()

    async def stop(self) -> None:
        await self.tasks.close()
        share_groups = getattr(self, "share_groups", None)
        if share_groups is not None:
            await share_groups.close()
        await self.share_coordinator.stop()
        await self.group_coordinator.stop()
        for part in list(self.replicas.partitions()):
            part.close()
        self.logs.shutdown()

    async def wait_loaded(self, timeout_s: float = 5.0) -> None:
        """Until every offsets partition this node leads is loaded."""
        svc = self.group_coordinator
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            topic = self.metadata.topic(OFFSETS_TOPIC)
            if topic is not None and all(
                    i in svc.coordinators for i, r in topic.partitions.items()
                    if r.leader == NODE_ID):
                return
            assert asyncio.get_running_loop().time() < deadline, "offsets partitions not loaded"
            await asyncio.sleep(0.01)


@pytest.fixture(name="anyio_backend")
def anyio_backend_fixture() -> str:
    return "asyncio"


@pytest.fixture(name="node")
async def node_fixture(tmp_path: Path) -> AsyncIterator[GroupNode]:
    n = GroupNode(tmp_path)
    await n.start()
    try:
        yield n
    finally:
        await n.stop()


def ctx(api_key: int, version: int, client_id: str = "client") -> RequestContext:
    return RequestContext(api_key=api_key, api_version=version, correlation_id=1,
                          client_id=client_id, listener_name="PLAINTEXT", peer_host="127.0.0.1",
                          peer_port=5555, received_ms=0, apis=BROKER_APIS)


def encodes(response: Any) -> Any:
    """The response must serialize at its version (catches fields the version lacks)."""
    encode_body(response)
    return response


def request(api: str, version: int, cls: str, **fields: Any) -> Any:
    """A kio request entity of `api` at `version`; fields the version lacks are dropped."""

    from broker.protocol.kio_build import build

    return build(request_class(api, version, cls), **fields)


def request_class(api: str, version: int, cls: str) -> Any:
    """kio's class, or kio 0.5.0's (broker/protocol/_kio_legacy) for versions Kafka 4 removed,
    or the generated one (broker/protocol/_kio_next) for Kafka 4.4 versions kio lacks."""
    import importlib

    for package in ("kio.schema", "broker.protocol._kio_legacy", "broker.protocol._kio_next"):
        try:
            mod = importlib.import_module(f"{package}.{api}.v{version}.request")
        except ModuleNotFoundError:
            continue
        return getattr(mod, cls)
    raise ModuleNotFoundError(f"no request class for {api} v{version}")


async def find(node: GroupNode, group: str, version: int = 3) -> Any:
    from broker.handlers import find_coordinator

    req = request("find_coordinator", version, "FindCoordinatorRequest", key=group, key_type=0,
                  coordinator_keys=(group,))
    return encodes(await find_coordinator.handle(node, ctx(10, version), req))


async def ready(node: GroupNode, group: str = "g") -> None:
    """FindCoordinator until the group's partition is loaded."""
    for _ in range(200):
        resp = await find(node, group)
        if resp.error_code.value == 0:
            await node.wait_loaded()
            return
        await asyncio.sleep(0.01)
    raise AssertionError("coordinator never became available")


async def join(node: GroupNode, group: str = "g", member_id: str = "", *, version: int = 9,
               instance: str | None = None, protocols: tuple[tuple[str, bytes], ...] = (
                   ("range", b"meta"),), session_ms: int = 10_000, rebalance_ms: int = 10_000,
               protocol_type: str = "consumer") -> Any:
    import datetime

    from broker.handlers import join_group

    proto = request_class("join_group", version, "JoinGroupRequestProtocol")
    req = request("join_group", version, "JoinGroupRequest", group_id=group,
                  session_timeout=datetime.timedelta(milliseconds=session_ms),
                  rebalance_timeout=datetime.timedelta(milliseconds=rebalance_ms),
                  member_id=member_id, group_instance_id=instance, protocol_type=protocol_type,
                  protocols=tuple(proto(name=n, metadata=m) for n, m in protocols), reason=None)
    return encodes(await join_group.handle(node, ctx(11, version), req))


async def join_fully(node: GroupNode, group: str = "g", **kw: Any) -> Any:
    """JoinGroup with the MEMBER_ID_REQUIRED round trip (v4+)."""
    first = await join(node, group, **kw)
    if first.error_code.value == 79:
        return await join(node, group, first.member_id, **kw)
    return first


async def sync(node: GroupNode, group: str, member_id: str, generation: int, *,
               version: int = 5, assignments: tuple[tuple[str, bytes], ...] = (),
               instance: str | None = None) -> Any:
    from broker.handlers import sync_group

    asg = request_class("sync_group", version, "SyncGroupRequestAssignment")
    req = request("sync_group", version, "SyncGroupRequest", group_id=group,
                  generation_id=generation, member_id=member_id, group_instance_id=instance,
                  protocol_type="consumer", protocol_name="range",
                  assignments=tuple(asg(member_id=m, assignment=a) for m, a in assignments))
    return encodes(await sync_group.handle(node, ctx(14, version), req))


async def commit(node: GroupNode, group: str, offsets: dict[tuple[str, int], int], *,
                 version: int = 8, generation: int = -1, member_id: str = "",
                 metadata: str | None = "", retention_ms: int = -1) -> Any:
    import datetime

    from broker.handlers import offset_commit

    part_cls = request_class("offset_commit", version, "OffsetCommitRequestPartition")
    topic_cls = request_class("offset_commit", version, "OffsetCommitRequestTopic")
    from broker.protocol.kio_build import build
    topics: dict[str, list[Any]] = {}
    for (t, p), off in offsets.items():
        topics.setdefault(t, []).append(build(
            part_cls, partition_index=p, committed_offset=off, committed_leader_epoch=3,
            committed_metadata=metadata))
    req = request("offset_commit", version, "OffsetCommitRequest", group_id=group,
                  generation_id_or_member_epoch=generation, member_id=member_id,
                  group_instance_id=None,
                  retention_time=datetime.timedelta(milliseconds=retention_ms),
                  topics=tuple(build(topic_cls, name=t, topic_id=topic_id_of(node, t),
                                     partitions=tuple(ps))
                               for t, ps in topics.items()))
    return encodes(await offset_commit.handle(node, ctx(8, version), req))


def topic_id_of(node: GroupNode, name: str) -> uuid.UUID:
    """The topic's id (OffsetCommit/OffsetFetch v10 name topics by id); for a topic the
    cluster does not have, a made-up id derived from the name."""
    t = node.metadata.topic(name)
    return t.topic_id if t is not None else uuid.uuid5(uuid.NAMESPACE_OID, name)


def topic_label(node: GroupNode, t: Any) -> str:
    """A response topic's name, from its id in v10 answers."""
    name = getattr(t, "name", None)
    if name is not None:
        return str(name)
    found = node.metadata.topic_by_id(t.topic_id)
    return found.name if found is not None else str(t.topic_id)


def commit_errors(resp: Any, node: GroupNode | None = None) -> dict[tuple[str, int], int]:
    return {(topic_label(node, t) if node is not None else t.name, p.partition_index):
            p.error_code.value for t in resp.topics for p in t.partitions}


async def fetch(node: GroupNode, group: str, partitions: list[tuple[str, int]] | None, *,
                version: int = 7) -> Any:
    from broker.handlers import offset_fetch

    topic_cls = request_class("offset_fetch", version,
                              "OffsetFetchRequestTopics" if version >= 8
                              else "OffsetFetchRequestTopic")
    topics = None
    if partitions is not None:
        by: dict[str, list[int]] = {}
        for t, p in partitions:
            by.setdefault(t, []).append(p)
        from broker.protocol.kio_build import build as build_
        topics = tuple(build_(topic_cls, name=t, topic_id=topic_id_of(node, t),
                              partition_indexes=tuple(ps)) for t, ps in by.items())
    if version >= 8:
        from broker.protocol.kio_build import build
        group_cls = request_class("offset_fetch", version, "OffsetFetchRequestGroup")
        req = request("offset_fetch", version, "OffsetFetchRequest", require_stable=False,
                      groups=(build(group_cls, group_id=group, member_id=None, member_epoch=-1,
                                    topics=topics),))
    else:
        req = request("offset_fetch", version, "OffsetFetchRequest", group_id=group,
                      topics=topics, require_stable=False)
    return encodes(await offset_fetch.handle(node, ctx(9, version), req))


def fetched(topics: Any, node: GroupNode | None = None) -> dict[tuple[str, int], int]:
    return {(topic_label(node, t) if node is not None else t.name, p.partition_index):
            p.committed_offset for t in topics for p in t.partitions}


def offsets_log_records(node: GroupNode) -> list[Any]:
    out = []
    for part in node.replicas.partitions():
        if part.topic == OFFSETS_TOPIC:
            out.extend(part.log.read_records(part.log.log_start_offset))
    return out
