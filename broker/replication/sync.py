"""Keeps this broker's replicas in step with committed metadata.

Subscribed to the MetadataPublisher: each new image creates, updates or deletes the
local replicas of partitions whose assignment, leadership or topic configs changed.
"""

from __future__ import annotations

from typing import Any

import structlog

from broker.config import TOPIC_CONFIGS, NodeConfig, effective_topic_configs, format_value
from broker.log import LogConfig
from broker.metadata.delta import MetadataDelta
from broker.metadata.image import MetadataImage, TopicImage
from broker.replication.replica_manager import ReplicaManager

log = structlog.get_logger(__name__)


def log_config_for(config: NodeConfig, overrides: Any) -> LogConfig:
    """The log engine's config for a topic: its overrides over the broker's defaults."""
    return _log_config(effective_topic_configs(config, dict(overrides)))


def _log_config(effective: dict[str, Any]) -> LogConfig:
    as_text = {
        name: text for name, value in effective.items()
        if (text := format_value(TOPIC_CONFIGS[name].type, value)) is not None
    }
    return LogConfig.from_topic_configs(as_text)


class ReplicaSync:
    def __init__(self, config: NodeConfig, replicas: ReplicaManager) -> None:
        self.config = config
        self.replicas = replicas

    def __call__(
        self, old: MetadataImage, new: MetadataImage, delta: MetadataDelta | None,
    ) -> None:
        if delta is None:
            self.sync_all(new)
            return
        for dead in delta.deleted_topics.values():
            for index in dead.partitions:
                self.replicas.remove(dead.name, index, delete_log=True)
        touched = {topic_id for topic_id, _ in delta.changed_partitions}
        touched |= {
            t.topic_id for (_, name) in delta.changed_configs
            if (t := new.topic(name)) is not None
        }
        for topic_id in touched:
            if (topic := new.topics_by_id.get(topic_id)) is not None:
                self.sync_topic(new, topic)

    def sync_all(self, image: MetadataImage) -> None:
        for topic in image.topics_by_id.values():
            self.sync_topic(image, topic)
        for part in list(self.replicas.partitions()):
            current = image.topic(part.topic)
            if current is None or part.index not in current.partitions:
                self.replicas.remove(part.topic, part.index, delete_log=True)

    def sync_topic(self, image: MetadataImage, topic: TopicImage) -> None:
        effective = effective_topic_configs(self.config, dict(image.topic_config(topic.name)))
        log_config = _log_config(effective)
        min_isr = int(effective["min.insync.replicas"])
        for index, reg in topic.partitions.items():
            try:
                self.replicas.apply_partition(
                    topic=topic.name, topic_id=topic.topic_id, index=index, leader=reg.leader,
                    leader_epoch=reg.leader_epoch, partition_epoch=reg.partition_epoch,
                    replicas=reg.replicas, isr=reg.isr, min_insync_replicas=min_isr,
                    log_config=log_config,
                )
            except Exception:
                log.exception("partition_apply_failed", topic=topic.name, partition=index)
