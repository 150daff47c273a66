"""What the share coordinator's handler tests share: a GroupNode (group_node.py) whose
__share_group_state exists and is loaded, and requests of the state APIs (83-87) for one
share-partition, in kio's classes at a given version."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from group_node import GroupNode, ctx, encodes, request, request_class

from broker.share.records import SHARE_GROUP_STATE_TOPIC

_TOPIC_DATA = {
    "initialize_share_group_state": ("InitializeShareGroupStateRequest", "InitializeStateData"),
    "read_share_group_state": ("ReadShareGroupStateRequest", "ReadStateData"),
    "write_share_group_state": ("WriteShareGroupStateRequest", "WriteStateData"),
    "delete_share_group_state": ("DeleteShareGroupStateRequest", "DeleteStateData"),
    "read_share_group_state_summary": ("ReadShareGroupStateSummaryRequest",
                                       "ReadStateSummaryData"),
}
API_KEYS = {"initialize_share_group_state": 83, "read_share_group_state": 84,
            "write_share_group_state": 85, "delete_share_group_state": 86,
            "read_share_group_state_summary": 87}


async def state_topic_loaded(node: GroupNode, timeout_s: float = 10.0) -> None:
    """Creates __share_group_state (as FindCoordinator key type 2 does) and waits until
    every partition of it is loaded here."""
    svc = node.share_coordinator
    assert await svc.ensure_topic() == 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        topic = node.metadata.topic(SHARE_GROUP_STATE_TOPIC)
        if topic is not None and all(i in svc.coordinators for i in topic.partitions):
            return
        assert loop.time() < deadline, "__share_group_state not loaded"
        await asyncio.sleep(0.01)


def state_request(api: str, version: int, group_id: str, topic_id: uuid.UUID | None,
                  partition: int, **fields: Any) -> Any:
    top, data = _TOPIC_DATA[api]
    if "state_batches" in fields:
        batch = request_class(api, version, "StateBatch")
        fields["state_batches"] = tuple(
            batch(first_offset=f, last_offset=last, delivery_state=s, delivery_count=c)
            for f, last, s, c in fields["state_batches"])
    part = request(api, version, "PartitionData", partition=partition, **fields)
    topic = request(api, version, data, topic_id=topic_id, partitions=(part,))
    return request(api, version, top, group_id=group_id, topics=(topic,))


async def call(node: GroupNode, module: Any, version: int, req: Any) -> Any:
    """The handler's answer, which must encode at its version."""
    api = module.__name__.rsplit(".", 1)[1]
    return encodes(await module.handle(node, ctx(API_KEYS[api], version), req))


def only(response: Any) -> Any:
    """The one partition's result of a state API answer."""
    [topic] = response.results
    [p] = topic.partitions
    return p
