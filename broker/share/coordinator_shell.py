"""The share coordinator's service (KIP-932): the pure cores of broker/share/coordinator.py,
one per __share_group_state partition this broker leads, on the coordinator runtime that
groups and transactions share (broker/coordinator/runtime.py).

A share-partition's key "groupId:topicId:partition" hashes to a partition of
__share_group_state (Kafka's partitionFor); FindCoordinator key type 2 names its leader. The
share-partition leaders (broker/share/shell.py) reach it through `persister.py`, on this
broker directly and elsewhere with the state APIs (Initialize/Read/Write/Delete/
ReadSummary ShareGroupState, APIs 83-87), which the handlers serve from here.

Handlers and the persister reach the service as `share_coordinator_of(node)`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, Protocol

import structlog
from kio.schema.errors import ErrorCode

from broker.coordinator.runtime import CoordinatorRuntime
from broker.coordinator.services import CoordinatorNode
from broker.errors import KafkaError
from broker.metrics.stats import ShareCoordinatorStats
from broker.protocol.records import Record, build_batch
from broker.share.coordinator import (
    Effects,
    ShareCoordinator,
    ShareCoordinatorConfig,
    StateResult,
    Write,
)
from broker.share.records import (
    SHARE_GROUP_STATE_TOPIC,
    SharePartitionKey,
    StateBatch,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

log = structlog.get_logger(__name__)


class ShareCoordinatorNode(Protocol):
    """A node's share coordinator (__share_group_state), as its callers reach it (None
    until the broker runs one)."""

    @property
    def share_coordinator(self) -> ShareCoordinatorService | None: ...


def share_coordinator_of(node: ShareCoordinatorNode) -> ShareCoordinatorService:
    service = node.share_coordinator
    if service is None:
        raise KafkaError(ErrorCode.coordinator_not_available, "share coordinator not started")
    return service


def _setting(cfg: Any, key: str) -> int:
    try:
        return int(cfg[key])
    except KeyError:
        from broker.config import BROKER_CONFIGS

        return int(BROKER_CONFIGS[key].default)


class ShareCoordinatorService:
    def __init__(self, node: CoordinatorNode, *, tick_interval_s: float = 0.1) -> None:
        self.node = node
        self.config = ShareCoordinatorConfig(_setting(
            node.config, "share.coordinator.snapshot.update.records.per.snapshot"))
        self.runtime: CoordinatorRuntime[ShareCoordinator] = CoordinatorRuntime(
            node, self, name="share", topic=SHARE_GROUP_STATE_TOPIC,
            partitions_key="share.coordinator.state.topic.num.partitions",
            topic_log_name="share_group_state_topic",
            write_timeout_ms=_setting(node.config, "share.coordinator.write.timeout.ms"),
            tick_interval_s=tick_interval_s)
        self.stats = ShareCoordinatorStats()

    @property
    def coordinators(self) -> dict[int, ShareCoordinator]:
        return self.runtime.coordinators

    def start(self) -> None:
        self.runtime.start()

    async def stop(self) -> None:
        await self.runtime.stop()

    # ---- the runtime's hooks (CoordinatorShards) -----------------------------------------

    def new_coordinator(self, partition: int, epoch: int, now_ms: int) -> ShareCoordinator:
        return ShareCoordinator(self.config, now_ms)

    def replay(self, partition: int, coord: ShareCoordinator, plog: Any, offset: int,
               upto: int) -> int:
        count = 0
        for r in plog.read_records(offset, upto):
            if r.key is None:
                continue
            try:
                record_type, key = decode_key(r.key)
                coord.replay(record_type, key,
                             None if r.value is None else decode_value(record_type, r.value))
                count += 1
            except KafkaError as exc:
                log.warning("share_state_record_unreadable", partition=partition,
                            offset=r.offset, error=str(exc))
        return count

    def loaded(self, partition: int, coord: ShareCoordinator, now_ms: int) -> None:
        return None

    def load_abandoned(self, partition: int) -> None:
        return None

    def unloaded(self, partition: int, coord: ShareCoordinator, now_ms: int) -> Effects:
        return coord.unload()

    def log_counts(self, coord: ShareCoordinator) -> dict[str, int]:
        return {"share_partitions": len(coord.states)}

    def record_batch(self, partition: int, write: Write, now_ms: int) -> bytes:
        value = None if write.value is None else encode_value(write.value)
        return build_batch([Record(timestamp=now_ms,
                                   key=encode_key(write.record_type, write.key), value=value)])

    def more_effects(self, partition: int, coord: ShareCoordinator, fx: Effects) -> None:
        return None

    def new_topic(self, live_brokers: int) -> tuple[int, int, dict[str, str]]:
        """__share_group_state is compacted; RF and min ISR are capped to the live brokers,
        with a warning, as for the other internal topics."""
        cfg = self.node.config
        wanted_rf = _setting(cfg, "share.coordinator.state.topic.replication.factor")
        rf = min(wanted_rf, live_brokers)
        wanted_isr = _setting(cfg, "share.coordinator.state.topic.min.isr")
        min_isr = min(wanted_isr, rf)
        if rf < wanted_rf or min_isr < wanted_isr:
            log.warning("share_group_state_topic_replication_lowered", wanted_rf=wanted_rf,
                        used_rf=rf, wanted_min_isr=wanted_isr, used_min_isr=min_isr,
                        live_brokers=live_brokers)
        return _setting(cfg, "share.coordinator.state.topic.num.partitions"), rf, {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "min.insync.replicas": str(min_isr),
            "segment.bytes": str(_setting(cfg, "share.coordinator.state.topic.segment.bytes")),
        }

    # ---- routing ------------------------------------------------------------------------

    def partition_of(self, key: SharePartitionKey) -> int:
        return self.runtime.partition_of(key.coordinator_key())

    async def find_coordinator(self, key: str, listener_name: str,
                               ) -> tuple[ErrorCode, int, str, int, str | None]:
        """FindCoordinator key type 2: "groupId:topicId:partition"."""
        parts = key.rsplit(":", 2)
        if len(parts) != 3 or not parts[0] or not parts[2].lstrip("-").isdigit():
            return (ErrorCode.invalid_request, -1, "", -1,
                    "A share coordinator key is groupId:topicId:partition.")
        return await self.runtime.locate(key, listener_name)

    def _unknown_partition(self, key: SharePartitionKey) -> StateResult | None:
        topic = self.node.metadata.topic_by_id(key.topic_id)
        if key.partition < 0:
            return StateResult(ErrorCode.invalid_request, "The partition index is negative.")
        if topic is None or topic.partition(key.partition) is None:
            return StateResult(ErrorCode.unknown_topic_or_partition,
                               "Topic/TopicPartition not found in metadata image.")
        return None

    async def _call(self, key: SharePartitionKey, call: Any) -> StateResult:
        try:
            result: StateResult = await self.runtime.call(key.coordinator_key(), call)
        except KafkaError as exc:
            return StateResult(exc.error_code, exc.message)
        return result

    # ---- the APIs -------------------------------------------------------------------------

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> StateResult:
        unknown = self._unknown_partition(key)
        if unknown is not None:
            return unknown
        return await self._call(key, lambda c, t, now: c.read(t, key, leader_epoch))

    async def read_summary(self, key: SharePartitionKey) -> StateResult:
        unknown = self._unknown_partition(key)
        if unknown is not None:
            return unknown
        return await self._call(key, lambda c, t, now: c.read_summary(t, key))

    async def write(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int,
                    start_offset: int, batches: Iterable[StateBatch],
                    delivery_complete_count: int = -1) -> StateResult:
        """One share-partition's state write; counted and timed as Kafka's
        share-coordinator-metrics count every write the coordinator is asked for (refused
        ones included) and time it to its answer."""
        self.stats.writes += 1
        started = time.monotonic()
        try:
            unknown = self._unknown_partition(key)
            if unknown is not None:
                return unknown
            new = tuple(batches)
            return await self._call(key, lambda c, t, now: c.write(
                t, key, state_epoch, leader_epoch, start_offset, new, now,
                delivery_complete_count))
        finally:
            self.stats.write_answered(time.monotonic() - started)

    async def initialize(self, key: SharePartitionKey, state_epoch: int,
                         start_offset: int) -> StateResult:
        unknown = self._unknown_partition(key)
        if unknown is not None:
            return unknown
        return await self._call(key, lambda c, t, now: c.initialize(
            t, key, state_epoch, start_offset, now))

    async def delete(self, key: SharePartitionKey) -> StateResult:
        return await self._call(key, lambda c, t, now: c.delete(t, key, now))

    async def ensure_topic(self) -> ErrorCode:
        return await self.runtime.ensure_topic()
