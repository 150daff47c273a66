"""KIP-951 leader hints: the current leader of a partition and the endpoints of such
leaders, from the metadata image, for Produce v10+ and Fetch v16+ answers carrying
NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH."""

from __future__ import annotations

from collections.abc import Iterable

from kio.schema.errors import ErrorCode

from broker.metadata.image import MetadataImage

LEADER_HINT_ERRORS = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch})


def not_hosted_error(image: MetadataImage, topic: str, index: int) -> ErrorCode:
    """Kafka's answer for a partition this broker has no replica of: NOT_LEADER_OR_FOLLOWER
    when the cluster has it (the client's metadata is stale), else UNKNOWN_TOPIC_OR_PARTITION."""
    if image.partition(topic, index) is not None:
        return ErrorCode.not_leader_or_follower
    return ErrorCode.unknown_topic_or_partition


def current_leader(image: MetadataImage, topic: str, index: int) -> tuple[int, int]:
    """(leader id, leader epoch) as the metadata image has them; (-1, -1) if unknown."""
    p = image.partition(topic, index)
    if p is None:
        return -1, -1
    return p.leader, p.leader_epoch


def leader_endpoints(
    image: MetadataImage, listener: str, leaders: Iterable[int],
) -> list[tuple[int, str, int, str | None]]:
    """(node id, host, port, rack) on `listener` for each known leader, by node id."""
    endpoints = image.broker_endpoints(listener)
    out = []
    for b in sorted({b for b in leaders if b >= 0}):
        ep = endpoints.get(b)
        reg = image.broker(b)
        if ep is not None and reg is not None:
            out.append((b, ep.host, ep.port, reg.rack))
    return out
