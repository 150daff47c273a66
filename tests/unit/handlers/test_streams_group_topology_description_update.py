"""StreamsGroupTopologyDescriptionUpdate (API 93, KIP-1331): a member pushes its topology's
description; StreamsGroupDescribe v1 returns it. Without a topology description plugin every
push is UNSUPPORTED_VERSION, as in Kafka 4.4; with Kafka's in-memory one (the one Skiff builds
in) the push of a member of the group at the group's topology epoch is stored."""

from __future__ import annotations

from typing import Any

import pytest
from group_node import (  # noqa: F401
    GroupNode,
    anyio_backend_fixture,
    ctx,
    encodes,
    node_fixture,
    ready,
    request,
    request_class,
)
from kio.schema.errors import ErrorCode
from streams_group_support import (  # noqa: F401
    active,
    enable_streams,
    heartbeat,
    plugin_node_fixture,
    streams_node_fixture,
)

from broker.group import records as rec
from broker.group.streams_topology_description import (
    AVAILABLE,
    NODE_PROCESSOR,
    NODE_SINK,
    NODE_SOURCE,
    NOT_REQUESTED,
    NOT_STORED,
)
from broker.handlers import streams_group_describe, streams_group_topology_description_update

pytestmark = pytest.mark.anyio
API = "streams_group_topology_description_update"


def node_(name: str, node_type: int, **fields: Any) -> Any:
    cls = request_class(API, 0, "TopologyDescriptionNode")
    return cls(**{"name": name, "node_type": node_type, "source_topics": (),
                  "sink_topic": None, "stores": (), "successors": (), **fields})


def description(bad_type: int | None = None) -> Any:
    """Subtopology 0: a source (that also names a store and a sink topic, which a source
    does not keep), a processor with a store named twice, a sink; one global store."""
    cls = lambda name: request_class(API, 0, name)  # noqa: E731
    nodes = (
        node_("KSTREAM-SOURCE-0000000000", NODE_SOURCE if bad_type is None else bad_type,
              source_topics=("input",), stores=("ignored",), sink_topic="ignored",
              successors=("KSTREAM-AGGREGATE-0000000001",)),
        node_("KSTREAM-AGGREGATE-0000000001", NODE_PROCESSOR,
              stores=("counts", "counts"), successors=("KSTREAM-SINK-0000000002",)),
        node_("KSTREAM-SINK-0000000002", NODE_SINK, sink_topic="output"),
    )
    return cls("TopologyDescription")(
        subtopologies=(cls("TopologyDescriptionSubtopology")(subtopology_id="0", nodes=nodes),),
        global_stores=(cls("TopologyDescriptionGlobalStore")(
            source=node_("KSTREAM-SOURCE-0000000003", NODE_SOURCE, source_topics=("global",),
                         successors=("KTABLE-SOURCE-0000000004",)),
            processor=node_("KTABLE-SOURCE-0000000004", NODE_PROCESSOR,
                            stores=("global-store",))),))


async def push(node: GroupNode, member_id: str, epoch: int = 1, group: str = "g",
               desc: Any = None) -> Any:
    req = request(API, 0, "StreamsGroupTopologyDescriptionUpdateRequest", group_id=group,
                  member_id=member_id, topology_epoch=epoch,
                  topology_description=desc if desc is not None else description())
    return encodes(await streams_group_topology_description_update.handle(
        node, ctx(93, 0), req))


async def describe(node: GroupNode, include: bool, version: int = 1) -> Any:
    req = request("streams_group_describe", version, "StreamsGroupDescribeRequest",
                  group_ids=("g",), include_authorized_operations=False,
                  include_topology_description=include)
    r = encodes(await streams_group_describe.handle(node, ctx(89, version), req))
    [g] = r.groups
    return g


async def test_without_a_plugin_a_push_is_unsupported(streams_node: GroupNode) -> None:
    await ready(streams_node)
    r = await push(streams_node, "a")
    assert r.error_code is ErrorCode.unsupported_version
    assert r.error_message == ("The broker has no streams group topology description plugin "
                               "configured.")


async def test_streams_version_0_refuses(node: GroupNode) -> None:
    enable_streams(node, 0)
    await ready(node)
    r = await push(node, "a")
    assert r.error_code is ErrorCode.unsupported_version and "streams.version" in r.error_message


async def test_push_is_checked_against_the_group(plugin_node: GroupNode) -> None:
    node = plugin_node
    await ready(node)
    assert (await push(node, "a", group="nope")).error_code is ErrorCode.group_id_not_found
    a = await heartbeat(node, "a", 0, version=1)
    assert a.error_code is ErrorCode.none
    r = await push(node, "zed")
    assert r.error_code is ErrorCode.unknown_member_id
    r = await push(node, "a", epoch=2)
    assert r.error_code is ErrorCode.invalid_request and "epoch" in r.error_message
    r = await push(node, "", epoch=1)
    assert (r.error_code, r.error_message) == (ErrorCode.invalid_request,
                                               "MemberId can't be empty.")
    r = await push(node, "a", desc=description(bad_type=7))
    assert (r.error_code, r.error_message) == (ErrorCode.invalid_request,
                                               "Unknown topology node type: 7")
    assert (await describe(node, True)).topology_description_status == NOT_STORED


async def test_a_push_is_stored_described_and_persisted(plugin_node: GroupNode) -> None:
    node = plugin_node
    await ready(node)
    a = await heartbeat(node, "a", 0, version=1)
    assert a.topology_description_required is True
    assert (await describe(node, False)).topology_description_status == NOT_REQUESTED
    r = await push(node, "a")
    assert (r.error_code, r.error_message) == (ErrorCode.none, None)

    g = await describe(node, True)
    assert g.topology_description_status == AVAILABLE and g.assignor_name == "sticky"
    [sub] = g.topology_description.subtopologies
    source, proc, sink = sub.nodes
    # each node keeps only its type's fields, repeated names once (Kafka's converter)
    assert (source.source_topics, source.stores, source.sink_topic, source.successors) == (
        ("input",), (), None, ("KSTREAM-AGGREGATE-0000000001",))
    assert (proc.node_type, proc.stores, proc.source_topics) == (NODE_PROCESSOR, ("counts",), ())
    assert (sink.sink_topic, sink.successors) == ("output", ())
    [store] = g.topology_description.global_stores
    assert (store.source.source_topics, store.processor.stores) == (("global",),
                                                                    ("global-store",))
    # v0 describes as before
    assert not hasattr(await describe(node, True, version=0), "topology_description_status")

    # the plugin holds the group's topology epoch: no member is asked again
    a = await heartbeat(node, "a", a.member_epoch, owned=active(a), version=1)
    assert a.topology_description_required is False
    b = await heartbeat(node, "b", 0, version=1)
    assert b.topology_description_required is False

    # StoredDescriptionTopologyEpoch is in the group's StreamsGroupMetadata record
    _, coord = node.group_coordinator.coordinator_for("g")
    [value] = [v for k, v in coord.streams_groups["g"].persisted.items()
               if rec.decode_streams_group_key(k).record_type == rec.STREAMS_GROUP_METADATA]
    assert rec.decode_streams_group_metadata(value)[1:] == (1, -1)



async def test_delete_groups_deletes_the_description(plugin_node: GroupNode) -> None:
    node = plugin_node
    await ready(node)
    a = await heartbeat(node, "a", 0, version=1)
    assert (await push(node, "a")).error_code is ErrorCode.none
    await heartbeat(node, "a", -1, version=1)
    plugin = node.group_coordinator.topology_descriptions
    assert plugin is not None and plugin.get_topology("g", 1) is not None
    assert await node.group_coordinator.delete_groups(["g"]) == {"g": ErrorCode.none}
    assert plugin.get_topology("g", 1) is None
    # the same id again: a new group, asked again
    a = await heartbeat(node, "a", 0, version=1)
    assert a.topology_description_required is True
