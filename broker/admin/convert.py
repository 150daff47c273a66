"""MetadataImage parts -> the admin API's messages (which embed the metadata-log records)."""

from __future__ import annotations

from typing import Any

from broker.admin.pb import cluster, meta, partitions, topics
from broker.admin.services import AdminServices
from broker.controller.validation import INTERNAL_TOPICS
from broker.metadata.image import (
    BrokerRegistration,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
    dir_online,
)
from broker.metadata.records import NO_LEADER
from broker.replication.partition import Role


def broker_state(reg: BrokerRegistration) -> int:
    if reg.fenced:
        return int(cluster.BROKER_STATE_FENCED)
    if reg.in_controlled_shutdown:
        return int(cluster.BROKER_STATE_SHUTTING_DOWN)
    return int(cluster.BROKER_STATE_UNFENCED)


def registration(reg: BrokerRegistration) -> Any:
    msg = meta.RegisterBroker(
        broker_id=reg.broker_id, incarnation_id=reg.incarnation_id.bytes,
        broker_epoch=reg.epoch,
        endpoints=[meta.Endpoint(name=e.name, host=e.host, port=e.port,
                                 security_protocol=e.security_protocol) for e in reg.endpoints],
        features=[meta.FeatureRange(name=n, min_supported_version=lo, max_supported_version=hi)
                  for n, lo, hi in reg.features],
        fenced=reg.fenced, in_controlled_shutdown=reg.in_controlled_shutdown,
        log_dirs=[d.bytes for d in reg.log_dirs],
    )
    if reg.rack is not None:
        msg.rack = reg.rack
    return msg


def topic_record(t: TopicImage) -> Any:
    return meta.Topic(name=t.name, topic_id=t.topic_id.bytes)


def partition_record(t: TopicImage, index: int, p: PartitionRegistration) -> Any:
    return meta.Partition(
        partition_id=index, topic_id=t.topic_id.bytes, replicas=p.replicas, isr=p.isr,
        removing_replicas=p.removing_replicas, adding_replicas=p.adding_replicas,
        leader=p.leader, leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch,
        elr=p.elr, last_known_elr=p.last_known_elr,
        leader_recovery_state=p.leader_recovery_state,
    )


def offline_replicas(image: MetadataImage, p: PartitionRegistration) -> list[int]:
    """Fenced or gone brokers, and replicas in an offline log dir (KIP-858)."""
    return [b for b in p.replicas if not image.is_alive(b)
            or not dir_online(p.directory_of(b), image.brokers[b].log_dirs)]


def is_offline(image: MetadataImage, p: PartitionRegistration) -> bool:
    return p.leader == NO_LEADER or not image.is_alive(p.leader)


def partition_description(node: AdminServices, t: TopicImage, index: int,
                          p: PartitionRegistration) -> Any:
    msg = topics.PartitionDescription(
        partition=partition_record(t, index, p),
        offline_replicas=offline_replicas(node.metadata, p),
    )
    local = node.replicas.get(t.name, index)
    if local is not None and local.role is Role.LEADER:
        msg.high_watermark = local.high_watermark
        msg.log_start_offset = local.log.log_start_offset
        msg.log_end_offset = local.log.log_end_offset
    return msg


def topic_description(node: AdminServices, t: TopicImage) -> Any:
    image: MetadataImage = node.metadata
    return topics.TopicDescription(
        topic=topic_record(t),
        partitions=[partition_description(node, t, i, t.partitions[i])
                    for i in sorted(t.partitions)],
        configs=dict(image.topic_config(t.name)), internal=t.name in INTERNAL_TOPICS,
    )


def topic_summary(image: MetadataImage, t: TopicImage) -> Any:
    parts = list(t.partitions.values())
    return topics.TopicSummary(
        topic=topic_record(t), num_partitions=len(parts),
        replication_factor=max((len(p.replicas) for p in parts), default=0),
        internal=t.name in INTERNAL_TOPICS,
        under_replicated_partitions=sum(1 for p in parts if len(p.isr) < len(p.replicas)),
        offline_partitions=sum(1 for p in parts if is_offline(image, p)),
    )


def reassignment_status(node: AdminServices, topic: str, index: int,
                        p: PartitionRegistration) -> Any:
    msg = partitions.ReassignmentStatus(
        topic=topic, partition=index, replicas=p.replicas, adding_replicas=p.adding_replicas,
        removing_replicas=p.removing_replicas, isr=p.isr,
        in_progress=bool(p.adding_replicas or p.removing_replicas), leader=p.leader,
    )
    local = node.replicas.progress_local([(topic, index)]).get((topic, index))
    if local is not None:
        set_progress(msg, node.node_id, *local)
    return msg


def set_progress(msg: Any, node_id: int, leader_end: int, follower_ends: dict[int, int]) -> None:
    """A ReassignmentStatus's copy progress as its leader `node_id` sees it: its log end,
    and each replica's (a follower not heard from yet: -1)."""
    msg.leader_log_end_offset = leader_end
    del msg.progress[:]
    msg.progress.extend(partitions.ReplicaProgress(
        replica_id=r, in_isr=r in msg.isr,
        log_end_offset=leader_end if r == node_id else follower_ends.get(r, -1))
        for r in msg.replicas)
