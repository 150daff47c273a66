"""Metadata v0-12 against a real controller, publisher and image."""

from __future__ import annotations

import asyncio
import importlib
import uuid
from types import ModuleType
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.static.constants import uuid_zero

from broker.controller.requests import CreatableTopic
from broker.handlers import metadata
from broker.protocol.frames import ResponseChunks
from broker.protocol.kio_build import build
from tests.unit.handlers.conftest import CLUSTER_ID, NODE_ID, TestNode, make_ctx, roundtrip

VERSIONS = range(0, 14)


def req_mod(v: int) -> ModuleType:
    return importlib.import_module(f"kio.schema.metadata.v{v}.request")


def request(v: int, names: list[str] | None, *, auto: bool = True, ids: tuple[uuid.UUID, ...] = (),
            include_ops: bool = False) -> Any:
    m = req_mod(v)
    topics: tuple[Any, ...] | None
    if names is None and not ids:
        topics = None if v >= 1 else ()
    else:
        topics = tuple(build(m.MetadataRequestTopic, name=n, topic_id=uuid_zero)
                       for n in names or ()) + tuple(
            build(m.MetadataRequestTopic, name=None, topic_id=i) for i in ids)
    return build(m.MetadataRequest, topics=topics, allow_auto_topic_creation=auto,
                 include_cluster_authorized_operations=include_ops,
                 include_topic_authorized_operations=include_ops)


def encode_body(response: Any) -> bytes:
    import io

    from kio.serial import entity_writer

    buf = io.BytesIO()
    entity_writer(type(response))(buf, response)
    return buf.getvalue()


def call(node: TestNode, v: int, req: Any, listener: str = "PLAINTEXT") -> Any:
    resp = asyncio.run(metadata.handle(node, make_ctx(3, v, listener), req))
    assert int(resp.__version__) == v
    assert roundtrip(resp) == resp
    return resp


def create(node: TestNode, *topics: CreatableTopic) -> None:
    results = asyncio.run(node.controller.create_topics(list(topics)))
    assert all(r.error is ErrorCode.none for r in results), results


@pytest.mark.parametrize("v", VERSIONS)
def test_brokers_cluster_and_all_topics(node: TestNode, v: int) -> None:
    create(node, CreatableTopic("alpha", 3, 1), CreatableTopic("beta", 1, 1))
    resp = call(node, v, request(v, None))
    assert len(resp.brokers) == 1
    b = resp.brokers[0]
    assert (b.node_id, b.host, b.port) == (NODE_ID, "127.0.0.1", 19092 + 10 * NODE_ID)
    if v >= 1:
        assert resp.controller_id == NODE_ID
        assert b.rack is None
    if v >= 2:
        assert resp.cluster_id == CLUSTER_ID
    if v >= 13:
        assert resp.error_code is ErrorCode.none  # KIP-1102's top-level error
    assert [t.name for t in resp.topics] == ["alpha", "beta"]
    alpha = resp.topics[0]
    assert alpha.error_code is ErrorCode.none
    if v >= 10:
        assert alpha.topic_id == node.topic("alpha").topic_id
    assert [p.partition_index for p in alpha.partitions] == [0, 1, 2]
    for p in alpha.partitions:
        assert p.error_code is ErrorCode.none
        assert p.leader_id == NODE_ID
        assert p.replica_nodes == (NODE_ID,)
        assert p.isr_nodes == (NODE_ID,)
        if v >= 5:
            assert p.offline_replicas == ()
        if v >= 7:
            assert p.leader_epoch == node.topic("alpha").partitions[p.partition_index].leader_epoch
    if v >= 8:
        assert alpha.topic_authorized_operations == metadata.UNSET_OPERATIONS
    if 8 <= v <= 10:
        assert resp.cluster_authorized_operations == metadata.UNSET_OPERATIONS


@pytest.mark.parametrize("v", VERSIONS)
def test_named_topics_unknown_and_invalid(node: TestNode, v: int) -> None:
    create(node, CreatableTopic("alpha", 2, 1))
    resp = call(node, v, request(v, ["alpha", "no-such", "bad name!", "alpha"], auto=False))
    if v < 4:
        # no allow_auto_topic_creation field before v4: the request always allows it
        assert [(t.name, t.error_code) for t in resp.topics] == [
            ("alpha", ErrorCode.none), ("no-such", ErrorCode.none),
            ("bad name!", ErrorCode.invalid_topic_exception)]
        assert node.metadata.topic("no-such") is not None
        return
    assert [(t.name, t.error_code) for t in resp.topics] == [
        ("alpha", ErrorCode.none),
        ("no-such", ErrorCode.unknown_topic_or_partition),
        ("bad name!", ErrorCode.invalid_topic_exception),
    ]
    assert resp.topics[1].partitions == ()
    if v >= 10:
        assert resp.topics[1].topic_id is None  # the zero Uuid on the wire
    assert node.metadata.topic("no-such") is None


@pytest.mark.parametrize("v", VERSIONS)
def test_auto_creation_answers_with_the_created_topic(node: TestNode, v: int) -> None:
    resp = call(node, v, request(v, ["auto-made", "bad name!", "__consumer_offsets"]))
    by_name = {t.name: t for t in resp.topics}
    made = by_name["auto-made"]
    assert made.error_code is ErrorCode.none
    assert len(made.partitions) == node.config["num.partitions"]
    assert made.partitions[0].leader_id == NODE_ID
    assert node.metadata.topic("auto-made") is not None
    assert by_name["bad name!"].error_code is ErrorCode.invalid_topic_exception
    offsets = by_name["__consumer_offsets"]
    assert offsets.error_code is ErrorCode.unknown_topic_or_partition
    if v >= 1:
        assert offsets.is_internal is True
        assert made.is_internal is False
    assert node.metadata.topic("__consumer_offsets") is None


def test_auto_creation_uses_broker_defaults(node_factory: Any) -> None:
    node = node_factory({"num.partitions": "4"})
    resp = call(node, 9, request(9, ["with-defaults"]))
    assert len(resp.topics[0].partitions) == 4


def test_auto_creation_sends_the_brokers_defaults_not_the_controllers(
        node_factory: Any) -> None:
    """Kafka's AutoTopicCreationManager puts the broker's num.partitions and
    default.replication.factor into its CreateTopics; a CreateTopics with -1 (an admin
    client's) takes the controller's. Here the controller's settings differ from this
    broker's config, as on a cluster of separate controllers and brokers."""
    import dataclasses

    from broker.handlers import create_topics

    node = node_factory({"num.partitions": "4"})
    topics = node.controller.controller.replication  # CreateTopics' defaults are its settings
    topics.settings = dataclasses.replace(topics.settings, num_partitions=7)
    resp = call(node, 12, request(12, ["auto-from-broker"]))
    assert len(resp.topics[0].partitions) == 4
    m = importlib.import_module("kio.schema.create_topics.v7.request")
    req = build(m.CreateTopicsRequest, timeout_ms=5000, validate_only=False, topics=(
        build(m.CreatableTopic, name="explicit", num_partitions=-1, replication_factor=-1,
              assignments=(), configs=()),))
    created = asyncio.run(create_topics.handle(node, make_ctx(19, 7), req))
    assert created.topics[0].error_code is ErrorCode.none
    assert created.topics[0].num_partitions == 7
    assert len(node.metadata.topic("explicit").partitions) == 7


def test_auto_creation_disabled_by_config(node_factory: Any) -> None:
    node = node_factory({"auto.create.topics.enable": "false"})
    for v in (1, 4, 12):
        resp = call(node, v, request(v, ["nope"]))
        assert resp.topics[0].error_code is ErrorCode.unknown_topic_or_partition
    assert node.metadata.topic("nope") is None


def test_auto_creation_failure_is_leader_not_available(node_factory: Any) -> None:
    # replication factor 3 with one broker: the controller refuses; Kafka answers
    # LEADER_NOT_AVAILABLE to the Metadata request and logs the reason.
    node = node_factory({"default.replication.factor": "3"})
    resp = call(node, 12, request(12, ["too-wide"]))
    assert resp.topics[0].error_code is ErrorCode.leader_not_available
    assert node.metadata.topic("too-wide") is None


def test_auto_creation_not_committed_in_time_is_leader_not_available(
        node: TestNode, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metadata, "AUTO_CREATE_WAIT_S", 0.05)
    gate = asyncio.Event()
    original = node.quorum.append

    async def slow_append(records: list[bytes]) -> int:
        await gate.wait()
        return await original(records)

    node.quorum.append = slow_append  # type: ignore[method-assign]

    async def scenario() -> tuple[Any, bool]:
        resp = await metadata.handle(node, make_ctx(3, 12), request(12, ["slow"]))
        created_while_waiting = node.metadata.topic("slow") is not None
        gate.set()
        for _ in range(100):  # the creation finishes in the background
            if node.metadata.topic("slow") is not None:
                break
            await asyncio.sleep(0.01)
        return resp, created_while_waiting

    resp, early = asyncio.run(scenario())
    assert early is False
    assert resp.topics[0].error_code is ErrorCode.leader_not_available
    assert node.metadata.topic("slow") is not None


@pytest.mark.parametrize("v", [10, 11, 12])
def test_topic_ids(node: TestNode, v: int) -> None:
    create(node, CreatableTopic("by-id", 1, 1))
    tid = node.topic("by-id").topic_id
    unknown = uuid.UUID(int=12345)
    if v < 12:
        with pytest.raises(Exception) as exc_info:
            asyncio.run(metadata.handle(node, make_ctx(3, v), request(v, [], ids=(tid,))))
        assert getattr(exc_info.value, "error_code", None) is ErrorCode.invalid_request
        err = metadata.error_response(make_ctx(3, v), request(v, [], ids=(tid,)),
                                      ErrorCode.invalid_request)
        assert err.topics[0].error_code is ErrorCode.invalid_request
        assert roundtrip(err) == err
        return
    resp = call(node, v, request(v, [], ids=(tid, unknown)))
    assert [(t.name, t.topic_id, t.error_code) for t in resp.topics] == [
        ("by-id", tid, ErrorCode.none), (None, unknown, ErrorCode.unknown_topic_id)]
    assert node.metadata.topic_by_id(unknown) is None


@pytest.mark.parametrize("v", [8, 9, 10, 11, 12])
def test_authorized_operations_when_asked(node: TestNode, v: int) -> None:
    create(node, CreatableTopic("ops", 1, 1))
    resp = call(node, v, request(v, ["ops"], include_ops=True))
    assert resp.topics[0].topic_authorized_operations == metadata.TOPIC_OPERATIONS
    # READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS
    assert metadata.TOPIC_OPERATIONS == 3576 == sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
    if v <= 10:
        assert resp.cluster_authorized_operations == metadata.CLUSTER_OPERATIONS


@pytest.mark.parametrize("v", VERSIONS)
def test_offline_replicas_and_fenced_broker(node: TestNode, v: int) -> None:
    asyncio.run(node.register(2, rack="r2"))
    resp = call(node, v, request(v, None))
    assert [b.node_id for b in resp.brokers] == [NODE_ID, 2]
    if v >= 1:
        assert resp.brokers[1].rack == "r2"
    create(node, CreatableTopic("pair", assignments={0: [2, NODE_ID], 1: [NODE_ID, 2]}))
    asyncio.run(node.fence(2))
    resp = call(node, v, request(v, ["pair"]))
    assert [b.node_id for b in resp.brokers] == [NODE_ID]
    parts = resp.topics[0].partitions
    image_parts = node.topic("pair").partitions
    for p in parts:
        reg = image_parts[p.partition_index]
        assert p.leader_id == NODE_ID == reg.leader  # leadership moved off the fenced broker
        if v >= 5:
            assert p.offline_replicas == (2,)
        if v == 0:
            # v0 lists only live replicas and reports the cut
            assert p.replica_nodes == (NODE_ID,)
            assert p.error_code is ErrorCode.replica_not_available
        else:
            assert p.replica_nodes == reg.replicas
            assert p.isr_nodes == reg.isr
            assert p.error_code is ErrorCode.none


@pytest.mark.parametrize("v", [1, 5, 12])
def test_leaderless_partition(node: TestNode, v: int) -> None:
    asyncio.run(node.register(2))
    create(node, CreatableTopic("lonely", assignments={0: [2]}))
    asyncio.run(node.fence(2))
    reg = node.metadata.partition("lonely", 0)
    assert reg is not None and not reg.has_leader()
    p = call(node, v, request(v, ["lonely"])).topics[0].partitions[0]
    assert p.error_code is ErrorCode.leader_not_available
    assert p.leader_id == -1
    assert p.replica_nodes == (2,)
    if v >= 5:
        assert p.offline_replicas == (2,)


@pytest.mark.parametrize("v", [0, 1, 9, 12, 13])
def test_every_broker_fenced_still_lists_the_registered_brokers(node: TestNode, v: int) -> None:
    """An image in which every broker is fenced (sessions expired in a partition or a
    stall; a restarted broker that has not applied its peers' unfencing yet) must not give
    an empty broker list: librdkafka drops every broker a Metadata answer leaves out, the
    one it asked included, and then has nobody to ask again (seen in the chaos runs: a
    producer with no broker and no leader for a minute after the heal)."""
    asyncio.run(node.register(2, rack="r2"))
    create(node, CreatableTopic("pair", assignments={0: [2, NODE_ID], 1: [NODE_ID, 2]}))
    asyncio.run(node.fence(2))
    assert [b.node_id for b in call(node, v, request(v, ["pair"])).brokers] == [NODE_ID]
    asyncio.run(node.fence(NODE_ID))
    resp = call(node, v, request(v, ["pair"]))
    assert [b.node_id for b in resp.brokers] == [NODE_ID, 2]
    if v >= 1:
        assert resp.controller_id == NODE_ID
    for p in resp.topics[0].partitions:
        # the leaders are still as the image has them: none while they are fenced
        assert p.leader_id == -1
        assert p.error_code is ErrorCode.leader_not_available


def test_other_listener_sees_only_its_endpoints(node: TestNode) -> None:
    asyncio.run(node.register(3, listeners=("PLAINTEXT", "INTERNAL")))
    resp = call(node, 12, request(12, None), listener="INTERNAL")
    assert [b.node_id for b in resp.brokers] == [3]
    assert resp.controller_id == 3  # this node is not reachable on that listener
    create(node, CreatableTopic("led-by-1", assignments={0: [NODE_ID]}))
    p = call(node, 12, request(12, ["led-by-1"]), listener="INTERNAL").topics[0].partitions[0]
    assert p.error_code is ErrorCode.listener_not_found
    assert p.offline_replicas == (NODE_ID,)
    p5 = call(node, 5, request(5, ["led-by-1"]), listener="INTERNAL").topics[0].partitions[0]
    assert p5.error_code is ErrorCode.leader_not_available


def test_no_live_broker_means_no_controller_id(node_factory: Any) -> None:
    node = node_factory(register=False)
    resp = call(node, 12, request(12, None))
    assert resp.brokers == ()
    assert resp.controller_id == -1


def test_concurrent_requests_share_one_auto_creation(node: TestNode) -> None:
    calls: list[list[str]] = []
    original = node.controller.create_topics

    async def counting(topics: Any, **kw: Any) -> Any:
        calls.append([t.name for t in topics])
        await asyncio.sleep(0.05)  # still in flight when the other requests arrive
        return await original(topics, **kw)

    node.controller.create_topics = counting  # type: ignore[method-assign]

    async def scenario() -> list[Any]:
        return list(await asyncio.gather(*(
            metadata.handle(node, make_ctx(3, 12), request(12, ["shared", f"own-{i}"]))
            for i in range(3))))

    responses = asyncio.run(scenario())
    assert sorted(sorted(c) for c in calls) == [["own-0", "shared"], ["own-1"], ["own-2"]]
    for i, resp in enumerate(responses):
        assert [(t.name, t.error_code) for t in resp.topics] == [
            ("shared", ErrorCode.none), (f"own-{i}", ErrorCode.none)]
    # nothing stays in flight once the creations are done
    assert metadata._in_flight.get(node) == {}


@pytest.mark.parametrize("v", [5, 12, 13])
def test_a_replica_in_an_offline_log_dir_is_offline(node: TestNode, v: int) -> None:
    """KIP-858: Kafka's metadata cache counts a replica whose log dir its broker reported
    offline among the offline replicas, though the broker itself is alive."""
    from broker.controller.requests import (
        AssignReplicasToDirsRequest,
        BrokerHeartbeatRequest,
        BrokerRegistrationRequest,
    )

    dir_a, dir_b = uuid.UUID(int=0xA), uuid.UUID(int=0xB)

    async def setup() -> None:
        reply = await node.controller.register_broker(BrokerRegistrationRequest(
            broker_id=2, cluster_id=CLUSTER_ID, incarnation_id=uuid.UUID(int=3),
            listeners=[("PLAINTEXT", "127.0.0.1", 19112, "PLAINTEXT")], log_dirs=(dir_a, dir_b)))
        await node.controller.broker_heartbeat(BrokerHeartbeatRequest(
            2, reply.broker_epoch, node.metadata.offset))
        [res] = await node.controller.create_topics(
            [CreatableTopic("jbod", assignments={0: (2, NODE_ID), 1: (2, NODE_ID)})])
        assert res.error is ErrorCode.none
        tid = node.topic("jbod").topic_id
        await node.controller.assign_replicas_to_dirs(AssignReplicasToDirsRequest(
            2, reply.broker_epoch, [(dir_a, tid, 0), (dir_b, tid, 1)]))
        await node.controller.broker_heartbeat(BrokerHeartbeatRequest(
            2, reply.broker_epoch, node.metadata.offset, offline_log_dirs=(dir_b,)))

    asyncio.run(setup())
    resp = call(node, v, request(v, ["jbod"]))
    parts = {p.partition_index: p for p in resp.topics[0].partitions}
    assert (parts[0].leader_id, parts[0].offline_replicas) == (2, ())
    assert (parts[1].leader_id, parts[1].offline_replicas) == (NODE_ID, (2,))
    assert parts[1].isr_nodes == (NODE_ID,)


@pytest.mark.parametrize("v", [1, 9, 12])
def test_a_large_all_topics_answer_is_built_off_the_event_loop(
        node: TestNode, v: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over OFFLOAD_PARTITIONS the answer is built and encoded on a worker thread (issue 17:
    seconds of Python for 100,000 partitions held up the broker's heartbeats); its bytes are
    those of the answer built inline, and the event loop keeps running meanwhile."""
    create(node, *(CreatableTopic(f"t{i}", 10, 1) for i in range(30)))
    monkeypatch.setattr(metadata, "OFFLOAD_PARTITIONS", 100_000)
    inline = call(node, v, request(v, None))
    monkeypatch.setattr(metadata, "OFFLOAD_PARTITIONS", 300)

    async def go() -> tuple[Any, int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        try:
            return await metadata.handle(node, make_ctx(3, v, "PLAINTEXT"),
                                         request(v, None)), ticks
        finally:
            task.cancel()

    chunks, ticks = asyncio.run(go())
    assert ticks > 0  # the loop ran while the answer was built
    assert isinstance(chunks, ResponseChunks)
    body = b"".join(bytes(p) for p in chunks._parts)
    assert body == encode_body(inline)
    assert len(inline.topics) == 30 and sum(len(t.partitions) for t in inline.topics) == 300
