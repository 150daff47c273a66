"""The immutable MetadataImage every part of a node reads.

An image is never changed in place: MetadataDelta (delta.py) applies records to
one image and produces the next. Unchanged parts (a topic's partition map, a
broker registration) are shared between consecutive images, so an update costs
the size of what changed plus one shallow copy of the top-level maps.

Memory: a partition is one slotted object with small int tuples; equal replica
and ISR tuples are shared. Derived indexes (endpoints per listener, partitions
led per broker) are computed on first use and cached on the image.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType

from broker.metadata.features import FinalizedFeatures
from broker.metadata.records import NO_LEADER, RESOURCE_BROKER, RESOURCE_TOPIC
from broker.quotas.core import QuotaMap
from broker.security.authorizer import AclBinding, AclIndex
from broker.security.delegation_token import TokenInformation
from broker.security.scram import ScramCredential

LEADER_RECOVERED = 0
LEADER_RECOVERING = 1

_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    epoch: int
    incarnation_id: uuid.UUID
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    features: tuple[tuple[str, int, int], ...] = ()  # (name, min, max) supported
    log_dirs: tuple[uuid.UUID, ...] = ()
    # KIP-1066: the directories the broker reports cordoned (heartbeats, metadata.version
    # 4.3-IV0 and later); a broker whose every directory is cordoned gets no new replicas
    cordoned_log_dirs: frozenset[uuid.UUID] = frozenset()

    @property
    def has_uncordoned_dirs(self) -> bool:
        """Kafka's BrokerRegistration.hasUncordonedDirs: no directories (a broker before
        directory assignment) counts as uncordoned."""
        return not self.log_dirs or any(d not in self.cordoned_log_dirs for d in self.log_dirs)

    def endpoint(self, listener_name: str) -> Endpoint | None:
        for e in self.endpoints:
            if e.name == listener_name:
                return e
        return None


# Kafka's DirectoryId: UNASSIGNED (no directory known yet), LOST (its directory is gone),
# MIGRATING (a broker that predates directory assignment).
UNASSIGNED_DIR = uuid.UUID(int=0)
LOST_DIR = uuid.UUID(int=1)
MIGRATING_DIR = uuid.UUID(int=2)


def dir_online(directory: uuid.UUID, online: tuple[uuid.UUID, ...]) -> bool:
    """Kafka's DirectoryId.isOnline: is a replica in `directory` on a broker whose online
    log dirs are `online` readable? Unknown placements count as online; a broker that
    registered no directories (it does not report them) has every replica online."""
    if directory in (UNASSIGNED_DIR, MIGRATING_DIR):
        return True
    if directory == LOST_DIR:
        return False
    return not online or directory in online


@dataclass(frozen=True, slots=True)
class ControllerRegistration:
    """A controller's registration (KIP-919): its listeners and supported features."""

    controller_id: int
    incarnation_id: uuid.UUID
    endpoints: tuple[Endpoint, ...] = ()
    features: tuple[tuple[str, int, int], ...] = ()  # (name, min, max) supported


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int = NO_LEADER
    leader_epoch: int = 0
    partition_epoch: int = 0
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = 0  # LEADER_RECOVERED / LEADER_RECOVERING
    # KIP-858: each replica's log directory, in replica order (empty: none assigned yet)
    directories: tuple[uuid.UUID, ...] = ()

    @property
    def preferred_leader(self) -> int:
        return self.replicas[0] if self.replicas else NO_LEADER

    def directory_of(self, broker_id: int) -> uuid.UUID:
        """The log directory of `broker_id`'s replica; UNASSIGNED_DIR when none is known."""
        for r, d in zip(self.replicas, self.directories, strict=False):
            if r == broker_id:
                return d
        return UNASSIGNED_DIR

    def has_leader(self) -> bool:
        return self.leader != NO_LEADER


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionRegistration]

    def partition(self, index: int) -> PartitionRegistration | None:
        return self.partitions.get(index)

    @property
    def num_partitions(self) -> int:
        return len(self.partitions)


@dataclass(frozen=True)
class MetadataImage:
    """Cluster metadata as of the record at (offset, epoch); offset -1 means empty."""

    cluster_id: str = ""
    offset: int = -1
    epoch: int = 0
    controller_id: int = -1
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=dict)
    topics_by_id: Mapping[uuid.UUID, TopicImage] = field(default_factory=dict)
    topics_by_name: Mapping[str, TopicImage] = field(default_factory=dict)
    # (resource type, resource name) -> {key: value}; see records.RESOURCE_*
    configs: Mapping[tuple[int, str], Mapping[str, str]] = field(default_factory=dict)
    features: Mapping[str, int] = field(default_factory=dict)
    next_producer_id: int = 0
    last_broker_epoch: int = 0  # the highest broker epoch ever handed out
    # (mechanism name, user) -> credential: Kafka's UserScramCredentialRecord
    scram_credentials: Mapping[tuple[str, str], ScramCredential] = field(default_factory=dict)
    # ACL id -> ACL: Kafka's AccessControlEntryRecord
    acls: Mapping[uuid.UUID, AclBinding] = field(default_factory=dict)
    # client quota entity -> {key: value}: Kafka's ClientQuotaRecord (broker/quotas/core.py)
    client_quotas: QuotaMap = field(default_factory=dict)
    # controller id -> its registration: Kafka's RegisterControllerRecord (KIP-919)
    controllers: Mapping[int, ControllerRegistration] = field(default_factory=dict)
    # token id -> token: Kafka's DelegationTokenRecord (broker/security/delegation_token.py)
    delegation_tokens: Mapping[str, TokenInformation] = field(default_factory=dict)

    @staticmethod
    def empty(cluster_id: str = "") -> MetadataImage:
        return MetadataImage(cluster_id=cluster_id)

    # -- features ------------------------------------------------------------

    @cached_property
    def finalized(self) -> FinalizedFeatures:
        """The finalized feature levels (FeatureLevel records) and their epoch, the image's
        offset (Kafka's FinalizedFeaturesEpoch). kraft.version is Raft's, not here."""
        return FinalizedFeatures(self.features, self.offset)

    def finalized_level(self, name: str) -> int:
        """A feature's finalized level, 0 when it is not finalized."""
        return self.features.get(name, 0)

    @property
    def finalized_features_epoch(self) -> int:
        return self.offset

    # -- topics and partitions ---------------------------------------------

    def topic(self, name: str) -> TopicImage | None:
        return self.topics_by_name.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicImage | None:
        return self.topics_by_id.get(topic_id)

    def partition(self, topic: str, index: int) -> PartitionRegistration | None:
        t = self.topics_by_name.get(topic)
        return None if t is None else t.partitions.get(index)

    def leader_of(self, topic: str, index: int) -> int:
        """The leader's broker id, or -1 when the partition is unknown or leaderless."""
        p = self.partition(topic, index)
        return NO_LEADER if p is None else p.leader

    def iter_partitions(self) -> Iterator[tuple[TopicImage, int, PartitionRegistration]]:
        for t in self.topics_by_id.values():
            for i, p in t.partitions.items():
                yield t, i, p

    @property
    def partition_count(self) -> int:
        return sum(len(t.partitions) for t in self.topics_by_id.values())

    # -- configs -------------------------------------------------------------

    def topic_config(self, name: str) -> Mapping[str, str]:
        """The dynamic (DYNAMIC_TOPIC_CONFIG) overrides of one topic."""
        return self.configs.get((RESOURCE_TOPIC, name), _EMPTY)

    def broker_config(self, broker_id: int | None = None) -> Mapping[str, str]:
        """Dynamic broker configs: per broker, or the cluster default when broker_id is None."""
        key = "" if broker_id is None else str(broker_id)
        return self.configs.get((RESOURCE_BROKER, key), _EMPTY)

    # -- ACLs ----------------------------------------------------------------

    @cached_property
    def acl_index(self) -> AclIndex:
        """The ACLs indexed for authorization decisions (built once per image)."""
        return AclIndex(self.acls.values())

    # -- brokers -------------------------------------------------------------

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        return self.brokers.get(broker_id)

    def is_alive(self, broker_id: int) -> bool:
        b = self.brokers.get(broker_id)
        return b is not None and not b.fenced

    @cached_property
    def unfenced_broker_ids(self) -> tuple[int, ...]:
        return tuple(sorted(b for b, r in self.brokers.items() if not r.fenced))

    @cached_property
    def _endpoints_by_listener(self) -> dict[str, dict[int, Endpoint]]:
        out: dict[str, dict[int, Endpoint]] = {}
        for bid in sorted(self.brokers):
            reg = self.brokers[bid]
            for e in reg.endpoints:
                out.setdefault(e.name, {})[bid] = e
        return out

    def broker_endpoints(self, listener_name: str,
                         include_fenced: bool = False) -> dict[int, Endpoint]:
        """Broker id -> endpoint on one listener, for the brokers that have it (unfenced only
        unless include_fenced), ordered by broker id."""
        eps = self._endpoints_by_listener.get(listener_name, {})
        if include_fenced:
            return dict(eps)
        return {b: e for b, e in eps.items() if not self.brokers[b].fenced}

    @cached_property
    def leaderships(self) -> Mapping[int, tuple[tuple[uuid.UUID, int], ...]]:
        """Broker id -> (topic id, partition) pairs it leads."""
        acc: dict[int, list[tuple[uuid.UUID, int]]] = {}
        for t in self.topics_by_id.values():
            for i, p in t.partitions.items():
                if p.leader != NO_LEADER:
                    acc.setdefault(p.leader, []).append((t.topic_id, i))
        return {b: tuple(v) for b, v in acc.items()}
