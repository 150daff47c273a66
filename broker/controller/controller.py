"""The pure controller: requests + the current image + now_ms -> records and results.

Nothing here does IO, reads a clock or uses global randomness. The caller (the
controller driver on the Raft leader) owns:
  * the image: pass the latest image *including records this controller returned
    that are not yet committed* (apply each returned batch to a working image at
    once), so consecutive requests see each other's effects. After losing and
    regaining leadership, rebuild the working image from committed records.
  * atomicity: append each ControllerResult's records as one batch, and send its
    response only once that batch is committed. validate_only results carry no records.
  * time: `now_ms` is an argument; call `tick(image, now_ms)` about every
    broker.heartbeat.interval.ms to fence brokers whose session expired, and
    `reset_sessions(now_ms)` when this controller becomes active.

The work is split along Kafka's control managers (QuorumController's seams), each in its
own module: ClusterControlManager (broker registration, heartbeats, liveness and fencing;
cluster_control.py), ReplicationControlManager (topics, partitions, ISR changes,
reassignments, elections; replication_control.py), ConfigurationControlManager
(AlterConfigs, IncrementalAlterConfigs; configuration_control.py),
ProducerIdControlManager (producer id blocks; producer_id_control.py), AclControlManager
(CreateAcls, DeleteAcls; acl_control.py), ClientQuotaControlManager (AlterClientQuotas;
client_quota_control.py) and FeatureControlManager (UpdateFeatures; feature_control.py).
Controller is their
composition over one ControllerSettings, one seeded random source and the brokers' sessions.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from broker.config import NodeConfig
from broker.controller.acl_control import AclControlManager
from broker.controller.client_quota_control import ClientQuotaControlManager
from broker.controller.cluster_control import ClusterControlManager, _BrokerSession
from broker.controller.configuration_control import DYNAMIC_BROKER_KEYS as DYNAMIC_BROKER_KEYS
from broker.controller.configuration_control import ConfigurationControlManager
from broker.controller.feature_control import FeatureControlManager
from broker.controller.producer_id_control import PRODUCER_ID_BLOCK_SIZE as PRODUCER_ID_BLOCK_SIZE
from broker.controller.producer_id_control import ProducerIdControlManager
from broker.controller.replication_control import (
    MAX_PARTITIONS_PER_REQUEST as MAX_PARTITIONS_PER_REQUEST,
)
from broker.controller.replication_control import ReplicationControlManager
from broker.controller.replication_control import random_topic_id as random_topic_id
from broker.metadata import features
from broker.metadata import records as rec
from broker.metadata.image import (
    MetadataImage,
)
from broker.metadata.records import pb

METADATA_VERSION_FEATURE = "metadata.version"


def _lifted(record: Any) -> Any:
    """A bootstrap record, with a pre-feature-levels metadata.version lifted to 3.9-IV0."""
    if (rec.kind(record) == "feature_level"
            and record.feature_level.name == features.METADATA_VERSION
            and 0 < record.feature_level.feature_level < features.MINIMUM_METADATA_VERSION):
        return rec.feature_level_record(features.METADATA_VERSION,
                                        features.MINIMUM_METADATA_VERSION)
    return record


@dataclass(frozen=True)
class ControllerSettings:
    cluster_id: str = ""
    num_partitions: int = 1
    default_replication_factor: int = 1
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    delete_topic_enable: bool = True
    broker_session_timeout_ms: int = 9000
    # a newly active controller fences an unfenced broker that has not heartbeated to it
    # within twice this of its activation (cluster_control.py)
    broker_heartbeat_interval_ms: int = 2000
    # Skiff's: -1 waits for the session timeout after a disconnect, as Kafka does.
    broker_session_disconnect_timeout_ms: int = -1
    # KIP-835: the active controller appends a NoOp record this often (0: never), so that
    # every node can tell an idle quorum from a lagging one
    metadata_max_idle_interval_ms: int = 500
    node_config: NodeConfig | None = None  # for broker-level fallbacks in validation

    @staticmethod
    def from_config(cfg: NodeConfig, cluster_id: str) -> ControllerSettings:
        return ControllerSettings(
            cluster_id=cluster_id,
            num_partitions=cfg["num.partitions"],
            default_replication_factor=cfg["default.replication.factor"],
            min_insync_replicas=cfg["min.insync.replicas"],
            unclean_leader_election_enable=cfg["unclean.leader.election.enable"],
            delete_topic_enable=cfg["delete.topic.enable"],
            broker_session_timeout_ms=cfg["broker.session.timeout.ms"],
            broker_heartbeat_interval_ms=cfg["broker.heartbeat.interval.ms"],
            broker_session_disconnect_timeout_ms=cfg["broker.session.disconnect.timeout.ms"],
            metadata_max_idle_interval_ms=cfg["metadata.max.idle.interval.ms"],
            node_config=cfg,
        )


@dataclass
class Controller(ClusterControlManager, ReplicationControlManager,
                 ConfigurationControlManager, ProducerIdControlManager, AclControlManager,
                 ClientQuotaControlManager, FeatureControlManager):
    settings: ControllerSettings
    # Required: the shell seeds it (random.Random(os.urandom(16)) in production, a fixed
    # seed in tests); a default would give every controller the same topic ids.
    rng: random.Random
    _sessions: dict[int, _BrokerSession] = field(default_factory=dict)
    # broker id -> why tick fenced it (the shell logs and clears them)
    fence_causes: dict[int, str] = field(default_factory=dict)
    _activated_ms: int = -1
    _last_no_op_ms: int = -1

    # -- KIP-835 -----------------------------------------------------------------------

    def no_op_records(self, now_ms: int) -> list[Any]:
        """A NoOp record when `metadata.max.idle.interval.ms` has passed since the last one
        this controller wrote (the first at its first tick as the active controller), else
        nothing."""
        interval = self.settings.metadata_max_idle_interval_ms
        if interval <= 0 or (self._last_no_op_ms >= 0
                             and now_ms - self._last_no_op_ms < interval):
            return []
        self._last_no_op_ms = now_ms
        return [rec.wrap(pb.NoOp())]

    # -- bootstrap ---------------------------------------------------------------------

    @staticmethod
    def bootstrap_records(image: MetadataImage, bootstrap: Iterable[Any]) -> list[Any]:
        """Records to write when the first active controller starts: the bootstrap records
        (feature levels from `skiff storage format`), unless the log already carries
        finalized features. Offsets are no guide: Raft's LeaderChange control record
        comes first, so the image of a fresh log is already at offset 0.

        A log (or a bootstrap file) written by a Skiff from before feature levels carries
        Skiff's own metadata.version 1, which no node of this release supports: it moves to
        the lowest level this release serves (3.9-IV0). Skiff's metadata records are the same
        at every level, so the records already written read the same."""
        legacy = image.features.get(features.METADATA_VERSION, 0)
        if image.features:
            if 0 < legacy < features.MINIMUM_METADATA_VERSION:
                return [rec.feature_level_record(features.METADATA_VERSION,
                                                 features.MINIMUM_METADATA_VERSION)]
            return []
        return [_lifted(r) for r in bootstrap]
