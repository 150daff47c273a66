"""Keeps this broker's replicas in step with committed metadata.

Subscribed to the MetadataPublisher: each new image creates, updates or deletes the
local replicas of partitions whose assignment, leadership or topic configs changed. Big
changes are applied in slices that yield to the event loop (APPLY_INLINE_MAX).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import structlog

from broker.config import TOPIC_CONFIGS, NodeConfig, effective_topic_configs, format_value
from broker.log import LogConfig
from broker.metadata.delta import MetadataDelta
from broker.metadata.image import MetadataImage, TopicImage
from broker.metadata.records import RESOURCE_BROKER
from broker.replication.replica_manager import ReplicaManager
from broker.util.tasks import ServiceTasks, TaskHandle

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


# A delta touching at most this many partitions is applied at once, inside the publish;
# a bigger one (a CreateTopics of thousands of partitions, a snapshot of 100,000) is applied
# in slices of SLICE_S, yielding to the event loop between slices, so the broker keeps
# heartbeating and serving while it creates its logs (issue 17: brokers were fenced for
# missed heartbeats while applying one big delta).
APPLY_INLINE_MAX = 256
SLICE_S = 0.01


class ReplicaSync:
    def __init__(self, config: NodeConfig, replicas: ReplicaManager,
                 owns: Callable[[str, int], bool] | None = None) -> None:
        """`owns`: on a broker of several workers (broker/node/shards.py), the partitions
        this worker hosts; the others' metadata is not its to apply."""
        self.config = config
        self.replicas = replicas
        self.owns = owns
        # work of earlier images still to do, in order; a later image's work queues
        # behind it so replicas never see an older state after a newer one
        self._backlog: deque[Callable[[], None]] = deque()
        self._tasks = ServiceTasks("replica_sync")
        self._drainer: TaskHandle | None = None
        self.slices = 0

    @property
    def pending(self) -> int:
        return len(self._backlog)

    def __call__(
        self, old: MetadataImage, new: MetadataImage, delta: MetadataDelta | None,
    ) -> None:
        ops = self._ops(new, delta)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None or (not self._backlog and len(ops) <= APPLY_INLINE_MAX):
            for op in [*self._backlog, *ops]:
                op()
            self._backlog.clear()
            return
        self._backlog.extend(ops)
        if self._drainer is None or self._drainer.done():
            self._drainer = self._tasks.start_soon(self._drain, name="replica_sync")

    async def _drain(self) -> None:
        while self._backlog:
            started = time.monotonic()
            while self._backlog and time.monotonic() - started < SLICE_S:
                op = self._backlog.popleft()
                try:
                    op()
                except Exception:
                    log.exception("replica_sync_failed")
            self.slices += 1
            await asyncio.sleep(0)

    async def wait_applied(self) -> None:
        """Until every queued change reached the replicas (tests, benchmarks)."""
        while self._drainer is not None and not self._drainer.done():
            await self._drainer.wait()

    async def close(self) -> None:
        self._backlog.clear()
        await self._tasks.close()

    def _ops(self, new: MetadataImage, delta: MetadataDelta | None) -> list[Callable[[], None]]:
        if delta is None:
            return self._sync_all_ops(new)
        ops: list[Callable[[], None]] = []
        for dead in delta.deleted_topics.values():
            for index in dead.partitions:
                ops.append(functools.partial(self.replicas.remove, dead.name, index,
                                             delete_log=True))
        if any(rtype == RESOURCE_BROKER and name in ("", str(self.config.node_id))
               for rtype, name in delta.changed_configs):
            # a dynamic log.* default of this broker or the cluster changed: every topic
            # that does not override it takes it, as Kafka's DynamicLogConfig does
            return [*ops, *self._sync_all_ops(new)]
        touched = {topic_id for topic_id, _ in delta.changed_partitions}
        touched |= {
            t.topic_id for (_, name) in delta.changed_configs
            if (t := new.topic(name)) is not None
        }
        for topic_id in touched:
            if (topic := new.topics_by_id.get(topic_id)) is not None:
                ops.extend(self._topic_ops(new, topic))
        return ops

    def _sync_all_ops(self, image: MetadataImage) -> list[Callable[[], None]]:
        ops: list[Callable[[], None]] = []
        for topic in image.topics_by_id.values():
            ops.extend(self._topic_ops(image, topic))
        ops.append(functools.partial(self._remove_strays, image))
        return ops

    def _remove_strays(self, image: MetadataImage) -> None:
        for part in list(self.replicas.partitions()):
            current = image.topic(part.topic)
            if current is None or part.index not in current.partitions:
                self.replicas.remove(part.topic, part.index, delete_log=True)

    def sync_all(self, image: MetadataImage) -> None:
        for op in self._sync_all_ops(image):
            op()

    def sync_topic(self, image: MetadataImage, topic: TopicImage) -> None:
        for op in self._topic_ops(image, topic):
            op()

    def _topic_ops(self, image: MetadataImage, topic: TopicImage) -> list[Callable[[], None]]:
        effective = effective_topic_configs(self.config, dict(image.topic_config(topic.name)),
                                            image.broker_config(),
                                            image.broker_config(self.config.node_id))
        log_config = _log_config(effective)
        min_isr = int(effective["min.insync.replicas"])
        owns = self.owns
        return [functools.partial(self._apply_one, topic, index, reg, min_isr, log_config)
                for index, reg in topic.partitions.items()
                if owns is None or owns(topic.name, index)]

    def _apply_one(self, topic: TopicImage, index: int, reg: Any, min_isr: int,
                   log_config: LogConfig) -> None:
        try:
            self.replicas.apply_partition(
                topic=topic.name, topic_id=topic.topic_id, index=index, leader=reg.leader,
                leader_epoch=reg.leader_epoch, partition_epoch=reg.partition_epoch,
                replicas=reg.replicas, isr=reg.isr, min_insync_replicas=min_isr,
                log_config=log_config, directory=reg.directory_of(self.config.node_id),
            )
        except Exception:
            log.exception("partition_apply_failed", topic=topic.name, partition=index)
