"""KIP-1331 topology descriptions of streams groups, as Kafka 4.4 keeps them. Pure.

A Kafka Streams 4.4 client that heartbeats at StreamsGroupHeartbeat v1 is told
TopologyDescriptionRequired when the broker wants its topology's description (the nodes,
stores and successors of each subtopology, and the global stores); it then sends one with
StreamsGroupTopologyDescriptionUpdate (API 93), and StreamsGroupDescribe v1 returns it to
the clients that ask (IncludeTopologyDescription).

Kafka stores descriptions through the plugin `group.streams.topology.description.plugin.class`
names. Without one (the default) the broker never asks, refuses a push with
UNSUPPORTED_VERSION and describes every group's description as NOT_STORED. Skiff cannot load
a JVM class: it builds in the one plugin Kafka ships, InMemoryTopologyDescriptionPlugin (the
latest description of each group, in memory: lost when the node stops, as in Kafka), and
refuses other class names at start.

What persists is the group's StoredDescriptionTopologyEpoch and
FailedDescriptionTopologyEpoch (StreamsGroupMetadataValue's tags 2 and 3, streams.py): the
broker asks while the plugin holds no description of the group's current topology epoch and
has not refused that epoch for good, at most once per back-off window (SolicitationBackoff,
Kafka's StreamsGroupTopologyDescriptionBackoff: 30 s, doubling to 1 h, jitter 0.2).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

IN_MEMORY_PLUGIN_CLASS = "org.apache.kafka.server.streams.InMemoryTopologyDescriptionPlugin"

# TopologyDescriptionNode's NodeType
NODE_SOURCE = 1
NODE_PROCESSOR = 2
NODE_SINK = 3

# StreamsGroupDescribeResponse v1's TopologyDescriptionStatus
NOT_REQUESTED = 0
NOT_STORED = 1
ERROR = 2
AVAILABLE = 3


@dataclass(frozen=True, slots=True)
class DescriptionNode:
    """A source keeps its topics, a processor its stores, a sink its topic (Kafka's
    Source/Processor/Sink); each keeps its successors."""
    name: str
    node_type: int
    source_topics: tuple[str, ...] = ()
    sink_topic: str | None = None
    stores: tuple[str, ...] = ()
    successors: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DescriptionSubtopology:
    subtopology_id: str
    nodes: tuple[DescriptionNode, ...]


@dataclass(frozen=True, slots=True)
class GlobalStore:
    source: DescriptionNode
    processor: DescriptionNode


@dataclass(frozen=True, slots=True)
class TopologyDescription:
    subtopologies: tuple[DescriptionSubtopology, ...]
    global_stores: tuple[GlobalStore, ...]


class InvalidDescription(ValueError):
    """A pushed description Kafka refuses with INVALID_REQUEST (the message is Kafka's)."""


def _first_of_each(items: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))  # Kafka's LinkedHashSet: wire order, no repeats


def node_of(name: str, node_type: int, source_topics: tuple[str, ...], sink_topic: str | None,
            stores: tuple[str, ...], successors: tuple[str, ...]) -> DescriptionNode:
    """A pushed node as Kafka's converter keeps it: only the fields of its type."""
    following = _first_of_each(successors)
    if node_type == NODE_SOURCE:
        return DescriptionNode(name, node_type, source_topics=_first_of_each(source_topics),
                               successors=following)
    if node_type == NODE_PROCESSOR:
        return DescriptionNode(name, node_type, stores=_first_of_each(stores),
                               successors=following)
    if node_type == NODE_SINK:
        return DescriptionNode(name, node_type, sink_topic=sink_topic, successors=following)
    raise InvalidDescription(f"Unknown topology node type: {node_type}")


def global_store_of(source: DescriptionNode, processor: DescriptionNode) -> GlobalStore:
    if source.node_type != NODE_SOURCE or processor.node_type != NODE_PROCESSOR:
        raise InvalidDescription(
            "Global store must be composed of a source and a processor node.")
    return GlobalStore(source, processor)


class InMemoryTopologyDescriptionPlugin:
    """Kafka's InMemoryTopologyDescriptionPlugin: the latest description of each group with
    the topology epoch it was pushed at; a read at another epoch finds none."""

    def __init__(self) -> None:
        self._stored: dict[str, tuple[int, TopologyDescription]] = {}

    def set_topology(self, group_id: str, topology_epoch: int,
                     description: TopologyDescription) -> None:
        self._stored[group_id] = (topology_epoch, description)

    def get_topology(self, group_id: str, topology_epoch: int) -> TopologyDescription | None:
        entry = self._stored.get(group_id)
        if entry is None or entry[0] != topology_epoch:
            return None
        return entry[1]

    def delete_topology(self, group_id: str) -> None:
        self._stored.pop(group_id, None)


@dataclass(slots=True)
class _Window:
    topology_epoch: int
    attempts: int
    next_attempt_ms: int


@dataclass(slots=True)
class SolicitationBackoff:
    """Per group: after the broker asks a member for the description of a topology epoch it
    asks no one again for that epoch until the window ends; each ask at the same epoch
    doubles the window (Kafka's ExponentialBackoff: 30 s * 2^attempts, at most 1 h, times a
    random factor in [0.8, 1.2])."""

    rng: random.Random = field(default_factory=random.Random)
    initial_ms: int = 30_000
    max_ms: int = 3_600_000
    multiplier: int = 2
    jitter: float = 0.2
    _windows: dict[str, _Window] = field(default_factory=dict)

    def _delay_ms(self, attempts: int) -> int:
        exp_max = math.log(self.max_ms / self.initial_ms) / math.log(self.multiplier)
        term = self.initial_ms * self.multiplier ** min(attempts, exp_max)
        return int(term * self.rng.uniform(1 - self.jitter, 1 + self.jitter))

    def _next(self, group_id: str, topology_epoch: int, now_ms: int) -> None:
        old = self._windows.get(group_id)
        attempts = old.attempts + 1 if old is not None and old.topology_epoch == \
            topology_epoch else 0
        self._windows[group_id] = _Window(topology_epoch, attempts,
                                          now_ms + self._delay_ms(attempts))

    def arm_if_not_active(self, group_id: str, topology_epoch: int, now_ms: int) -> bool:
        """Opens a window unless one is open for this epoch; True when it opened one (the
        broker asks this member)."""
        w = self._windows.get(group_id)
        if w is not None and w.topology_epoch == topology_epoch and now_ms < w.next_attempt_ms:
            return False
        self._next(group_id, topology_epoch, now_ms)
        return True

    def arm_or_extend(self, group_id: str, topology_epoch: int, now_ms: int) -> None:
        w = self._windows.get(group_id)
        if w is not None and w.topology_epoch > topology_epoch:
            return
        self._next(group_id, topology_epoch, now_ms)

    def clear(self, group_id: str, topology_epoch: int) -> None:
        w = self._windows.get(group_id)
        if w is not None and w.topology_epoch == topology_epoch:
            del self._windows[group_id]

    def clear_group(self, group_id: str) -> None:
        self._windows.pop(group_id, None)


def should_solicit(*, topology_epoch: int | None, stored_epoch: int, failed_epoch: int,
                   stale_topology: bool) -> bool:
    """Kafka's conditions for TopologyDescriptionRequired, before the back-off: the group
    has a topology whose description the plugin neither holds nor refused, and the member is
    not told STALE_TOPOLOGY."""
    return (topology_epoch is not None and topology_epoch >= 0
            and stored_epoch != topology_epoch and failed_epoch != topology_epoch
            and not stale_topology)
