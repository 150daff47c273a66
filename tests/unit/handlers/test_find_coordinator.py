"""FindCoordinator: creates __consumer_offsets on first use, then names the partition leader."""

from __future__ import annotations

import pytest
from group_node import (  # noqa: F401
    GroupNode,
    anyio_backend_fixture,
    ctx,
    encodes,
    find,
    node_fixture,
    request,
)
from kio.schema.errors import ErrorCode

from broker.coordinator.partitioning import partition_for
from broker.group.records import OFFSETS_TOPIC
from broker.handlers import find_coordinator

pytestmark = pytest.mark.anyio


async def test_first_lookup_creates_compacted_offsets_topic_with_lowered_rf(
        node: GroupNode) -> None:
    assert node.metadata.topic(OFFSETS_TOPIC) is None
    resp = await find(node, "g", version=3)
    assert resp.error_code is ErrorCode.none
    assert (resp.node_id, resp.host, resp.port) == (1, "127.0.0.1", 9092)
    [call] = node.controller.calls
    assert call.name == OFFSETS_TOPIC and call.num_partitions == 4
    assert call.replication_factor == 1  # configured 3, one live broker
    assert call.configs["cleanup.policy"] == "compact"
    await find(node, "other", version=3)
    assert len(node.controller.calls) == 1  # created once


@pytest.mark.parametrize("version", [0, 1, 2, 3])
async def test_single_key_versions(node: GroupNode, version: int) -> None:
    resp = await find(node, "grp", version=version)
    assert resp.error_code is ErrorCode.none and resp.node_id == 1


@pytest.mark.parametrize("version", [4, 5, 6])
async def test_batched_keys(node: GroupNode, version: int) -> None:
    req = request("find_coordinator", version, "FindCoordinatorRequest", key_type=0,
                  coordinator_keys=("a", "b"))
    resp = encodes(await find_coordinator.handle(node, ctx(10, version), req))
    assert [(c.key, c.error_code, c.node_id, c.port) for c in resp.coordinators] == [
        ("a", ErrorCode.none, 1, 9092), ("b", ErrorCode.none, 1, 9092)]


async def test_transaction_and_unknown_key_types(node: GroupNode) -> None:
    req = request("find_coordinator", 3, "FindCoordinatorRequest", key="t", key_type=1)
    resp = encodes(await find_coordinator.handle(node, ctx(10, 3), req))
    assert resp.error_code is ErrorCode.coordinator_not_available
    req = request("find_coordinator", 6, "FindCoordinatorRequest", key_type=2,
                  coordinator_keys=("x",))
    resp = encodes(await find_coordinator.handle(node, ctx(10, 6), req))
    assert resp.coordinators[0].error_code is ErrorCode.invalid_request


async def test_partition_led_by_an_unknown_broker_is_not_available(node: GroupNode) -> None:
    node.add_topic(OFFSETS_TOPIC, 4, leader=7)
    resp = await find(node, "g")
    assert resp.error_code is ErrorCode.coordinator_not_available
    assert node.controller.calls == []


async def test_uses_java_hash_partition_of_existing_topic(node: GroupNode) -> None:
    node.add_topic(OFFSETS_TOPIC, 4)
    # only the hashed partition's leader matters: move every other one away
    p = partition_for("my-group", 4)
    topic = node.metadata.topic(OFFSETS_TOPIC)
    assert topic is not None
    node.add_topic(OFFSETS_TOPIC, 4, leader=7)
    import dataclasses
    image = node.metadata
    t = image.topic(OFFSETS_TOPIC)
    assert t is not None
    regs = dict(t.partitions)
    regs[p] = dataclasses.replace(regs[p], leader=1, leader_epoch=1)
    nt = dataclasses.replace(t, partitions=regs)
    node.publisher.load_snapshot(dataclasses.replace(
        image, offset=image.offset + 1, topics_by_id={nt.topic_id: nt},
        topics_by_name={OFFSETS_TOPIC: nt}))
    assert (await find(node, "my-group")).node_id == 1
    other = next(g for g in ("a", "b", "c", "d", "e") if partition_for(g, 4) != p)
    assert (await find(node, other)).error_code is ErrorCode.coordinator_not_available


async def test_offsets_topic_creation_failures_answer_coordinator_not_available(
        node: GroupNode) -> None:
    from broker.errors import KafkaError

    async def not_controller(topics: object) -> object:
        raise KafkaError(ErrorCode.not_controller, "elsewhere")

    node.controller.create_topics = not_controller  # type: ignore[method-assign]
    resp = await find(node, "g")
    assert resp.error_code is ErrorCode.coordinator_not_available
    assert node.metadata.topic(OFFSETS_TOPIC) is None


async def test_no_live_broker_means_no_offsets_topic(node: GroupNode) -> None:
    import dataclasses
    image = node.metadata
    fenced = {b: dataclasses.replace(r, fenced=True) for b, r in image.brokers.items()}
    node.publisher.load_snapshot(dataclasses.replace(image, offset=image.offset + 1,
                                                     brokers=fenced))
    resp = await find(node, "g")
    assert resp.error_code is ErrorCode.coordinator_not_available
    assert node.controller.calls == []


# ---- key type 1: transactional ids --------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2, 3, 4])
async def test_transaction_key_creates_the_state_topic(tmp_path: object, version: int) -> None:
    from pathlib import Path

    from txn_node import TxnNode, find_txn

    from broker.txn.records import TRANSACTION_STATE_TOPIC

    n = TxnNode(Path(str(tmp_path)))
    await n.start()
    try:
        resp = await find_txn(n, "my-txn", version=version)
        [c] = resp.coordinators if version >= 4 else [resp]
        assert c.error_code is ErrorCode.none
        assert (c.node_id, c.host, c.port) == (1, "127.0.0.1", 9092)
        [call] = n.controller.calls
        assert call.name == TRANSACTION_STATE_TOPIC and call.num_partitions == 3
        assert call.replication_factor == 1  # configured 3, one live broker
        assert call.configs["cleanup.policy"] == "compact"
        assert call.configs["min.insync.replicas"] == "1"  # configured 2, capped to the RF
        empty = await find_txn(n, "", version=version)
        [e] = empty.coordinators if version >= 4 else [empty]
        assert e.error_code is ErrorCode.invalid_request
    finally:
        await n.stop()
