"""The partitions this broker hosts, and the produce and fetch operations over them.

Fetch long polls wait on the partitions' futures, which are completed the moment the
high watermark (consumers) or log end offset (followers) moves: no sleeping in slices.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from uuid import UUID

import structlog
from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.log import AppendResult, FileSlice, LogConfig, LogManager
from broker.replication.partition import Partition, Role

log = structlog.get_logger(__name__)

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class FetchPartitionRequest:
    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1


@dataclass(slots=True)
class FetchPartitionResult:
    topic: str
    partition: int
    error_code: ErrorCode = ErrorCode.none
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: FileSlice | None = None
    diverging_epoch: tuple[int, int] | None = None
    leader_id: int = -1
    leader_epoch: int = -1

    @property
    def size(self) -> int:
        return self.records.length if self.records is not None else 0


class ReplicaManager:
    def __init__(self, node_id: int, logs: LogManager, clock: Callable[[], int]) -> None:
        self.node_id = node_id
        self.logs = logs
        self.clock = clock
        self._partitions: dict[TopicPartition, Partition] = {}

    # ---- applying metadata -------------------------------------------------------

    def get(self, topic: str, partition: int) -> Partition | None:
        return self._partitions.get((topic, partition))

    def partitions(self) -> Iterable[Partition]:
        return self._partitions.values()

    def leader_partition(
        self, topic: str, partition: int, current_leader_epoch: int = -1,
    ) -> Partition:
        """The partition if this broker leads it (at `current_leader_epoch`, when given);
        otherwise the KafkaError a client should see."""
        part = self._partitions.get((topic, partition))
        if part is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"{topic}-{partition}")
        part.require_leader(current_leader_epoch)
        return part

    def apply_partition(
        self, *, topic: str, topic_id: UUID | None, index: int, leader: int, leader_epoch: int,
        partition_epoch: int, replicas: tuple[int, ...], isr: tuple[int, ...],
        min_insync_replicas: int, log_config: LogConfig,
    ) -> None:
        """Make this broker's replica match the committed partition state."""
        if self.node_id not in replicas:
            self.remove(topic, index, delete_log=True)
            return
        key = (topic, index)
        part = self._partitions.get(key)
        if part is None:
            plog = self.logs.get_or_create(topic, index, log_config, topic_id)
            part = Partition(
                topic=topic, index=index, topic_id=topic_id, log=plog,
                clock=self.clock, node_id=self.node_id,
            )
            self._partitions[key] = part
        else:
            self.logs.update_config(topic, log_config)
        if leader_epoch < part.leader_epoch:
            return
        if leader == self.node_id:
            if (
                part.role is Role.LEADER and part.leader_epoch == leader_epoch
                and part.isr == isr and part.partition_epoch == partition_epoch
            ):
                return
            part.become_leader(
                leader_epoch=leader_epoch, partition_epoch=partition_epoch, replicas=replicas,
                isr=isr, min_insync_replicas=min_insync_replicas,
            )
        else:
            part.become_follower(
                leader_id=leader, leader_epoch=leader_epoch, partition_epoch=partition_epoch,
                replicas=replicas, isr=isr,
            )

    def remove(self, topic: str, index: int, *, delete_log: bool) -> None:
        part = self._partitions.pop((topic, index), None)
        if part is not None:
            part.close()
        if delete_log:
            self.logs.delete(topic, index)

    # ---- produce -----------------------------------------------------------------

    async def append(
        self, entries: dict[TopicPartition, bytes | memoryview], *, required_acks: int,
        timeout_ms: int,
    ) -> dict[TopicPartition, AppendResult | KafkaError]:
        results: dict[TopicPartition, AppendResult | KafkaError] = {}
        for (topic, index), records in entries.items():
            try:
                part = self.leader_partition(topic, index)
                results[(topic, index)] = part.append_as_leader(records, required_acks)
            except KafkaError as exc:
                results[(topic, index)] = exc
        if required_acks == -1:
            await self._wait_replicated(results, timeout_ms)
        return results

    async def _wait_replicated(
        self, results: dict[TopicPartition, AppendResult | KafkaError], timeout_ms: int,
    ) -> None:
        deadline = asyncio.get_running_loop().time() + timeout_ms / 1000
        while True:
            pending: list[asyncio.Future[None]] = []
            for key, result in results.items():
                if isinstance(result, KafkaError):
                    continue
                part = self._partitions.get(key)
                if part is None or part.role is not Role.LEADER:
                    results[key] = KafkaError(ErrorCode.not_leader_or_follower, f"{key}")
                elif part.high_watermark <= result.last_offset:
                    pending.append(part.new_waiter())
            if not pending:
                return
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining > 0:
                await asyncio.wait(pending, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            if asyncio.get_running_loop().time() >= deadline:
                for key, result in results.items():
                    part = self._partitions.get(key)
                    if (
                        not isinstance(result, KafkaError) and part is not None
                        and part.high_watermark <= result.last_offset
                    ):
                        results[key] = KafkaError(
                            ErrorCode.request_timed_out, "not replicated to the ISR in time"
                        )
                return

    # ---- fetch -------------------------------------------------------------------

    def _read_once(
        self, requests: list[FetchPartitionRequest], *, replica_id: int, max_bytes: int,
    ) -> list[FetchPartitionResult]:
        results: list[FetchPartitionResult] = []
        budget = max_bytes
        first_with_data = True
        for req in requests:
            res = FetchPartitionResult(topic=req.topic, partition=req.partition)
            results.append(res)
            part = self._partitions.get((req.topic, req.partition))
            if part is None:
                res.error_code = ErrorCode.unknown_topic_or_partition
                continue
            res.leader_id, res.leader_epoch = part.leader_id, part.leader_epoch
            try:
                part.require_leader(req.current_leader_epoch)
                res.high_watermark = part.high_watermark
                res.last_stable_offset = part.last_stable_offset
                res.log_start_offset = part.log.log_start_offset
                if replica_id >= 0:
                    part.update_follower(replica_id, req.fetch_offset)
                    res.high_watermark = part.high_watermark
                if budget <= 0 and not first_with_data:
                    continue
                records = part.read(
                    req.fetch_offset, min(req.partition_max_bytes, max(budget, 0)),
                    for_replica=replica_id >= 0, min_one_batch=first_with_data,
                )
                res.records = records
                if records.length:
                    budget -= records.length
                    first_with_data = False
            except KafkaError as exc:
                res.error_code = exc.error_code
        return results

    async def fetch(
        self, requests: list[FetchPartitionRequest], *, replica_id: int, max_wait_ms: int,
        min_bytes: int, max_bytes: int,
    ) -> list[FetchPartitionResult]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait_ms / 1000
        while True:
            waiters = [
                p.new_waiter() for r in requests
                if (p := self._partitions.get((r.topic, r.partition))) is not None
            ]
            results = self._read_once(requests, replica_id=replica_id, max_bytes=max_bytes)
            total = sum(r.size for r in results)
            errored = any(r.error_code != ErrorCode.none for r in results)
            remaining = deadline - loop.time()
            if total >= min_bytes or errored or remaining <= 0 or not waiters:
                for w in waiters:
                    w.cancel()
                return results
            await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            for w in waiters:
                w.cancel()
