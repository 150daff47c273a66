"""Cluster metadata: the immutable MetadataImage, MetadataDelta, records and snapshots."""

from broker.metadata.delta import (
    LocalPartition,
    LocalReplicaChanges,
    MetadataDelta,
    apply_records,
)
from broker.metadata.image import (
    BrokerRegistration,
    Endpoint,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)
from broker.metadata.records import (
    NO_LEADER,
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    InvalidRecordError,
    MetadataRecord,
)

__all__ = [
    "NO_LEADER",
    "RESOURCE_BROKER",
    "RESOURCE_TOPIC",
    "BrokerRegistration",
    "Endpoint",
    "InvalidRecordError",
    "LocalPartition",
    "LocalReplicaChanges",
    "MetadataDelta",
    "MetadataImage",
    "MetadataRecord",
    "PartitionRegistration",
    "TopicImage",
    "apply_records",
]
