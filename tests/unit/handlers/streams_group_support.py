"""Helpers for the StreamsGroupHeartbeat / StreamsGroupDescribe handler tests: a node with
streams.version 1 and a word-count topology (input -> repartition -> changelog)."""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from group_node import GroupNode, ctx, encodes, request, request_class

from broker.handlers import streams_group_heartbeat


def enable_streams(node: GroupNode, level: int = 1) -> None:
    image = node.publisher.image
    node.publisher.load_snapshot(replace(image, offset=image.offset + 1, features={
        **image.features, "streams.version": level}))


@pytest.fixture(name="streams_node")
async def streams_node_fixture(tmp_path: Path) -> AsyncIterator[GroupNode]:
    """A node with streams.version 1 and no initial rebalance delay."""
    n = GroupNode(tmp_path, **{"group.streams.initial.rebalance.delay.ms": 0})
    enable_streams(n)
    await n.start()
    try:
        yield n
    finally:
        await n.stop()


IN_MEMORY_PLUGIN = "org.apache.kafka.server.streams.InMemoryTopologyDescriptionPlugin"


@pytest.fixture(name="plugin_node")
async def plugin_node_fixture(tmp_path: Path) -> AsyncIterator[GroupNode]:
    """A streams node with Kafka's in-memory topology description plugin (KIP-1331) and the
    word-count topology's topics."""
    n = GroupNode(tmp_path, **{"group.streams.initial.rebalance.delay.ms": 0,
                               "group.streams.topology.description.plugin.class":
                                   IN_MEMORY_PLUGIN})
    enable_streams(n)
    for name in ("input", "app-rep", "app-changelog"):
        n.add_topic(name, 2)
    await n.start()
    try:
        yield n
    finally:
        await n.stop()


def topology(epoch: int = 1, version: int = 0) -> Any:
    cls = lambda name: request_class("streams_group_heartbeat", version, name)  # noqa: E731
    info = cls("TopicInfo")
    return cls("Topology")(epoch=epoch, subtopologies=(
        cls("Subtopology")(subtopology_id="0", source_topics=("input",),
                           repartition_sink_topics=("app-rep",), state_changelog_topics=(),
                           repartition_source_topics=(), copartition_groups=()),
        cls("Subtopology")(subtopology_id="1", source_topics=(),
                           repartition_source_topics=(info(name="app-rep", partitions=0,
                                                           replication_factor=0,
                                                           topic_configs=()),),
                           state_changelog_topics=(info(
                               name="app-changelog", partitions=0, replication_factor=0,
                               topic_configs=(cls("KeyValue")(key="cleanup.policy",
                                                              value="compact"),)),),
                           copartition_groups=()),
    ))


async def heartbeat(node: GroupNode, member_id: str, epoch: int, *,
                    owned: tuple[tuple[str, tuple[int, ...]], ...] | None = None,
                    group: str = "g", endpoint_epoch: int = 0, version: int = 0) -> Any:
    task_ids = request_class("streams_group_heartbeat", version, "TaskIds")
    joining = epoch == 0
    req = request(
        "streams_group_heartbeat", version, "StreamsGroupHeartbeatRequest", group_id=group,
        member_id=member_id, member_epoch=epoch, endpoint_information_epoch=endpoint_epoch,
        instance_id=None, rack_id=None,
        rebalance_timeout=datetime.timedelta(seconds=30 if joining else -0.001),
        topology=topology(version=version) if joining else None,
        active_tasks=None if owned is None else tuple(
            task_ids(subtopology_id=s, partitions=ps) for s, ps in owned),
        standby_tasks=None if owned is None else (),
        warmup_tasks=None if owned is None else (),
        process_id=f"process-{member_id}" if joining else None, user_endpoint=None,
        client_tags=None, task_offsets=None, task_end_offsets=None,
        shutdown_application=False)
    return encodes(await streams_group_heartbeat.handle(node, ctx(88, version), req))


def active(resp: Any) -> tuple[tuple[str, tuple[int, ...]], ...]:
    return tuple((t.subtopology_id, tuple(t.partitions)) for t in resp.active_tasks)
