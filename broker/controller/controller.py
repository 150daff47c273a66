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
Controller holds
one of each as a field, over one ControllerSettings (settings.py) and one seeded random
source; the brokers' sessions belong to ClusterControlManager.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker.controller.acl_control import AclControlManager
from broker.controller.client_quota_control import ClientQuotaControlManager
from broker.controller.cluster_control import ClusterControlManager
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
from broker.controller.settings import ControllerSettings as ControllerSettings
from broker.metadata import features
from broker.metadata import records as rec
from broker.metadata.image import (
    MetadataImage,
)
from broker.metadata.records import pb

if TYPE_CHECKING:
    import uuid
    from collections.abc import Sequence

    from kio.schema.errors import ErrorCode

    from broker.controller.acl_control import AclDeletionResult
    from broker.controller.client_quota_control import QuotaAlteration, QuotaAlterResult
    from broker.controller.feature_control import FeatureUpdate, FeatureUpdateOutcome
    from broker.controller.requests import (
        AllocateProducerIdsReply,
        AlterConfigsResource,
        AlterConfigsResult,
        AlterPartitionReply,
        AlterPartitionRequest,
        ApiError,
        AssignReplicasToDirsReply,
        AssignReplicasToDirsRequest,
        BrokerHeartbeatReply,
        BrokerHeartbeatRequest,
        BrokerRegistrationReply,
        BrokerRegistrationRequest,
        ControllerRegistrationRequest,
        ControllerResult,
        CreatableTopic,
        CreatePartitionsResult,
        CreatePartitionsTopic,
        CreateTopicResult,
        DeleteTopicResult,
        ElectionType,
        ElectLeadersResult,
        IncrementalAlterConfigsResource,
        OngoingReassignment,
        ReassignmentResult,
    )
    from broker.security.authorizer import AclBinding, AclFilter

METADATA_VERSION_FEATURE = "metadata.version"


def _lifted(record: Any) -> Any:
    """A bootstrap record, with a pre-feature-levels metadata.version lifted to 3.9-IV0."""
    if (rec.kind(record) == "feature_level"
            and record.feature_level.name == features.METADATA_VERSION
            and 0 < record.feature_level.feature_level < features.MINIMUM_METADATA_VERSION):
        return rec.feature_level_record(features.METADATA_VERSION,
                                        features.MINIMUM_METADATA_VERSION)
    return record


@dataclass
class Controller:
    """The control managers as fields, each built once over the settings and the seeded
    random source, and one method per controller operation, which hands it to the manager
    that owns it (as Kafka's QuorumController does)."""

    settings: ControllerSettings
    # Required: the shell seeds it (random.Random(os.urandom(16)) in production, a fixed
    # seed in tests); a default would give every controller the same topic ids.
    rng: random.Random
    _last_no_op_ms: int = -1
    cluster: ClusterControlManager = field(init=False)
    replication: ReplicationControlManager = field(init=False)
    configuration: ConfigurationControlManager = field(init=False)
    producer_ids: ProducerIdControlManager = field(init=False)
    acls: AclControlManager = field(init=False)
    client_quotas: ClientQuotaControlManager = field(init=False)
    features: FeatureControlManager = field(init=False)

    def __post_init__(self) -> None:
        self.cluster = ClusterControlManager(self.settings, self.rng)
        self.replication = ReplicationControlManager(self.settings, self.rng)
        self.configuration = ConfigurationControlManager(self.settings, self.rng)
        self.producer_ids = ProducerIdControlManager(self.settings, self.rng)
        self.acls = AclControlManager(self.settings, self.rng)
        self.client_quotas = ClientQuotaControlManager()
        self.features = FeatureControlManager()

    @property
    def fence_causes(self) -> dict[int, str]:
        """Broker id -> why tick fenced it (the shell logs and clears them)."""
        return self.cluster.fence_causes

    # -- ClusterControlManager (cluster_control.py) ---------------------

    def register_controller(self, image: MetadataImage,
                            req: ControllerRegistrationRequest) -> ControllerResult[ApiError]:
        return self.cluster.register_controller(image, req)

    def register_broker(self, image: MetadataImage, req: BrokerRegistrationRequest,
                        now_ms: int) -> ControllerResult[BrokerRegistrationReply]:
        return self.cluster.register_broker(image, req, now_ms)

    def broker_heartbeat(self, image: MetadataImage, req: BrokerHeartbeatRequest,
                         now_ms: int) -> ControllerResult[BrokerHeartbeatReply]:
        return self.cluster.broker_heartbeat(image, req, now_ms)

    def directories_offline(self, image: MetadataImage, broker_id: int, broker_epoch: int,
                            offline: Any) -> list[Any]:
        return self.cluster.directories_offline(image, broker_id, broker_epoch, offline)

    @staticmethod
    def directories_cordoned(image: MetadataImage, broker_id: int,
                             cordoned: Any) -> list[Any]:
        return ClusterControlManager.directories_cordoned(image, broker_id, cordoned)

    def heartbeat_received(self, image: MetadataImage, broker_id: int, broker_epoch: int,
                           now_ms: int, want_shut_down: bool = False) -> None:
        return self.cluster.heartbeat_received(image, broker_id, broker_epoch, now_ms,
                                               want_shut_down)

    def broker_disconnected(self, broker_id: int, now_ms: int) -> None:
        return self.cluster.broker_disconnected(broker_id, now_ms)

    def heartbeat_arrived(self, broker_id: int) -> None:
        return self.cluster.heartbeat_arrived(broker_id)

    def heartbeat_left(self, broker_id: int) -> None:
        return self.cluster.heartbeat_left(broker_id)

    def activation_grace_ms(self) -> int:
        return self.cluster.activation_grace_ms()

    def awaiting_first_heartbeat(self, image: MetadataImage) -> set[int]:
        return self.cluster.awaiting_first_heartbeat(image)

    def reset_sessions(self, now_ms: int = -1, deposed: int = -1) -> None:
        return self.cluster.reset_sessions(now_ms, deposed)

    def tick(self, image: MetadataImage, now_ms: int) -> list[Any]:
        return self.cluster.tick(image, now_ms)

    def unregister_broker(self, image: MetadataImage,
                          broker_id: int) -> ControllerResult[tuple[ErrorCode, str | None]]:
        return self.cluster.unregister_broker(image, broker_id)

    # -- ReplicationControlManager (replication_control.py) -------------

    def create_topics(self, image: MetadataImage, topics: Sequence[CreatableTopic],
                      validate_only: bool = False) -> ControllerResult[list[CreateTopicResult]]:
        return self.replication.create_topics(image, topics, validate_only)

    def delete_topics(
        self, image: MetadataImage, names: Sequence[str] = (),
        topic_ids: Sequence[uuid.UUID] = (),
    ) -> ControllerResult[list[DeleteTopicResult]]:
        return self.replication.delete_topics(image, names, topic_ids)

    def create_partitions(
        self, image: MetadataImage, topics: Sequence[CreatePartitionsTopic],
        validate_only: bool = False,
    ) -> ControllerResult[list[CreatePartitionsResult]]:
        return self.replication.create_partitions(image, topics, validate_only)

    def assign_replicas_to_dirs(self, image: MetadataImage, req: AssignReplicasToDirsRequest
                                ) -> ControllerResult[AssignReplicasToDirsReply]:
        return self.replication.assign_replicas_to_dirs(image, req)

    def alter_partition(self, image: MetadataImage,
                        req: AlterPartitionRequest) -> ControllerResult[AlterPartitionReply]:
        return self.replication.alter_partition(image, req)

    def alter_partition_reassignments(
        self, image: MetadataImage,
        reassignments: Sequence[tuple[str, int, Sequence[int] | None]],
    ) -> ControllerResult[list[ReassignmentResult]]:
        return self.replication.alter_partition_reassignments(image, reassignments)

    @staticmethod
    def list_partition_reassignments(
        image: MetadataImage, partitions: Sequence[tuple[str, int]] | None = None,
    ) -> list[OngoingReassignment]:
        return ReplicationControlManager.list_partition_reassignments(image, partitions)

    def elect_leaders(
        self, image: MetadataImage, election_type: ElectionType,
        partitions: Sequence[tuple[str, int]] | None = None,
    ) -> ControllerResult[list[ElectLeadersResult]]:
        return self.replication.elect_leaders(image, election_type, partitions)

    def rebalance_leaders(self, image: MetadataImage, imbalance_percentage: int = 10) -> list[Any]:
        return self.replication.rebalance_leaders(image, imbalance_percentage)

    # -- ConfigurationControlManager (configuration_control.py) ---------

    def alter_configs(
        self, image: MetadataImage, resources: Sequence[AlterConfigsResource],
        validate_only: bool = False,
    ) -> ControllerResult[list[AlterConfigsResult]]:
        return self.configuration.alter_configs(image, resources, validate_only)

    def incremental_alter_configs(
        self, image: MetadataImage, resources: Sequence[IncrementalAlterConfigsResource],
        validate_only: bool = False,
    ) -> ControllerResult[list[AlterConfigsResult]]:
        return self.configuration.incremental_alter_configs(image, resources, validate_only)

    # -- ProducerIdControlManager (producer_id_control.py) --------------

    def allocate_producer_ids(self, image: MetadataImage, broker_id: int,
                              broker_epoch: int) -> ControllerResult[AllocateProducerIdsReply]:
        return self.producer_ids.allocate_producer_ids(image, broker_id, broker_epoch)

    # -- AclControlManager (acl_control.py) -----------------------------

    def create_acls(self, image: MetadataImage,
                    bindings: Sequence[AclBinding]) -> ControllerResult[list[ApiError]]:
        return self.acls.create_acls(image, bindings)

    def delete_acls(self, image: MetadataImage, filters: Sequence[AclFilter]
                    ) -> ControllerResult[list[AclDeletionResult]]:
        return self.acls.delete_acls(image, filters)

    # -- ClientQuotaControlManager (client_quota_control.py) ------------

    def alter_client_quotas(self, image: MetadataImage,
                            alterations: Sequence[QuotaAlteration],
                            validate_only: bool = False
                            ) -> ControllerResult[list[QuotaAlterResult]]:
        return self.client_quotas.alter_client_quotas(image, alterations, validate_only)

    # -- FeatureControlManager (feature_control.py) ---------------------

    def update_features(self, image: MetadataImage, updates: Sequence[FeatureUpdate],
                        validate_only: bool = False, kraft_version: int = 0,
                        local_node_id: int = -1) -> ControllerResult[FeatureUpdateOutcome]:
        return self.features.update_features(image, updates, validate_only, kraft_version,
                                             local_node_id)


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
