"""The IO shell around the pure group coordinators.

One `GroupCoordinator` per __consumer_offsets partition this broker leads. Leadership comes
from the metadata image (the publisher subscription, re-checked on every tick): gaining a
partition starts a load (COORDINATOR_LOAD_IN_PROGRESS until it ends), losing it unloads
(waiting requests get NOT_COORDINATOR, later ones too). Records the coordinators emit are
appended through the replica manager with acks=all; a coordinator hears the outcome only when
the append is replicated to the ISR, so commits are acknowledged only once replicated.
The topic itself is created through the controller the first time FindCoordinator needs it.

Handlers reach the service as `node.group_coordinator`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
from collections.abc import Callable, Iterable
from typing import Any

import structlog
from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.group.consumer import (
    ConsumerGroupDescription,
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResult,
)
from broker.group.coordinator import GroupCoordinator
from broker.group.hashing import OFFSETS_TOPIC, partition_for
from broker.group.types import (
    Effects,
    GroupConfig,
    GroupDescription,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResult,
    LeaveGroupResult,
    LeaveMember,
    ListedGroup,
    OffsetCommitRequest,
    OffsetCommitResult,
    OffsetDeleteResult,
    OffsetFetchResult,
    SyncGroupRequest,
    SyncGroupResult,
    Token,
    TopicPartition,
    TxnOffsetCommitRequest,
    Write,
)
from broker.protocol.records import (
    BatchHeader,
    Record,
    build_batch,
    decode_records,
    iter_batch_headers,
    whole_batches_length,
)
from broker.replication import Role

log = structlog.get_logger(__name__)

GROUP_KEY_TYPE = 0
LOAD_WINDOW = 4096  # offsets read per step while loading, between yields to the event loop
LEADER_WAIT_S = 30.0


CONTROL_COMMIT = 1  # a control record's type (key: int16 version, int16 type)


def read_batches(plog: Any, offset: int, upto: int) -> list[tuple[BatchHeader, list[Record]]]:
    """The batches of a log from `offset` up to `upto` (exclusive), with their records:
    loading needs the batch attributes (transactional, control) that read_records drops."""
    out: list[tuple[BatchHeader, list[Record]]] = []
    while offset < upto:
        data = plog.read(offset, 1 << 20, upto).read_bytes()
        data = data[: whole_batches_length(data)]
        if not data:
            break
        mv = memoryview(data)
        for pos, h in iter_batch_headers(mv, validate_crc=True):
            records = [r for r in decode_records(mv[pos: pos + h.size])
                       if offset <= r.offset < upto]
            if records:
                out.append((h, records))
            offset = max(offset, h.next_offset)
    return out


def replay_batch(coord: GroupCoordinator, h: BatchHeader, records: list[Record]) -> int:
    """One batch of __consumer_offsets into a loading coordinator: plain records apply at
    once; a transactional batch's offsets wait for their producer's marker, and a control
    batch (the marker) commits or drops them. How many records were applied."""
    count = 0
    if h.is_control:
        for r in records:
            if r.key is not None and len(r.key) >= 4:
                committed = int.from_bytes(r.key[2:4], "big", signed=True) == CONTROL_COMMIT
                coord.complete_txn_offsets(h.producer_id, committed)
        return 0
    for r in records:
        if r.key is None:
            continue
        if h.is_transactional:
            coord.replay_txn_offset(h.producer_id, r.key, r.value)
        else:
            coord.replay(r.key, r.value)
        count += 1
    return count


def on_txn_marker_written(node: Any, topic: str, partition: int, producer_id: int,
                          committed: bool) -> None:
    """The hook for WriteTxnMarkers: call it once a marker is appended (and replicated) to
    a partition this broker leads. For a __consumer_offsets partition, the producer's
    transactional offsets there are materialized (commit) or dropped (abort); other topics
    are ignored."""
    if topic != OFFSETS_TOPIC:
        return
    service = getattr(node, "group_coordinator", None)
    if service is not None:
        service.complete_txn_offsets(partition, producer_id, committed)


def service_of(node: Any) -> GroupCoordinatorService:
    service = getattr(node, "group_coordinator", None)
    if service is None:
        raise KafkaError(ErrorCode.coordinator_not_available, "group coordinator not started")
    assert isinstance(service, GroupCoordinatorService)
    return service


class GroupCoordinatorService:
    def __init__(
        self, node: Any, *, rng: random.Random | None = None, tick_interval_s: float = 0.1,
    ) -> None:
        self.node = node
        self.config = GroupConfig.from_node_config(node.config)
        self.rng = rng or random.Random()
        self.tick_interval_s = tick_interval_s
        self.coordinators: dict[int, GroupCoordinator] = {}
        self._loaded_epoch: dict[int, int] = {}
        self._loading: dict[int, tuple[int, asyncio.Task[None]]] = {}
        # transaction markers that reached a partition while it was loading (the load may
        # have read the log before they were appended): applied once it is loaded
        self._deferred_markers: dict[int, list[tuple[int, bool]]] = {}
        self._waiting: dict[Token, asyncio.Future[Any]] = {}
        self._tokens = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()
        self._tick_task: asyncio.Task[None] | None = None
        self._create_lock: asyncio.Lock | None = None
        self._stopped = False

    # ---- lifecycle --------------------------------------------------------------------

    def start(self) -> None:
        """Subscribe to metadata and start the tick loop (inside the running event loop)."""
        self.node.publisher.subscribe(self.on_metadata)
        self._tick_task = asyncio.get_running_loop().create_task(
            self._tick_loop(), name="group_coordinator_tick")
        self.reconcile()

    async def stop(self) -> None:
        self._stopped = True
        tasks = list(self._tasks)
        if self._tick_task is not None:
            tasks.append(self._tick_task)
        tasks += [t for _, t in self._loading.values()]
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        for p in list(self.coordinators):
            self._unload(p)

    def _now(self) -> int:
        return int(self.node.clock())

    def _spawn(self, coro: Any, name: str) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ---- leadership ---------------------------------------------------------------------

    def on_metadata(self, old: Any, new: Any, delta: Any) -> None:
        if not self._stopped:
            self.reconcile()

    def _wanted(self) -> dict[int, int]:
        topic = self.node.metadata.topic(OFFSETS_TOPIC)
        if topic is None:
            return {}
        return {i: reg.leader_epoch for i, reg in topic.partitions.items()
                if reg.leader == self.node.node_id}

    def reconcile(self) -> None:
        """Load the offsets partitions this broker leads; unload the others."""
        wanted = self._wanted()
        for p in list(self.coordinators):
            if wanted.get(p) != self._loaded_epoch.get(p):
                self._unload(p)
        for p, (epoch, task) in list(self._loading.items()):
            if wanted.get(p) != epoch:
                task.cancel()
                del self._loading[p]
                self._deferred_markers.pop(p, None)
        for p, epoch in wanted.items():
            if p not in self.coordinators and p not in self._loading:
                task = asyncio.get_running_loop().create_task(
                    self._load(p, epoch), name=f"group_load_{p}")
                self._loading[p] = (epoch, task)

    def _unload(self, p: int) -> None:
        coord = self.coordinators.pop(p)
        self._loaded_epoch.pop(p, None)
        groups = len(coord.groups) + len(coord.consumer_groups)
        self._dispatch(p, coord, coord.unload(self._now()))
        (log.debug if self._stopped else log.info)("group_coordinator_unloaded", partition=p,
                                                    groups=groups)

    async def _load(self, p: int, epoch: int) -> None:
        loop = asyncio.get_running_loop()
        try:
            started = loop.time()
            while True:
                part = self.node.replicas.get(OFFSETS_TOPIC, p)
                if part is not None and part.role is Role.LEADER and part.leader_epoch >= epoch:
                    break
                if loop.time() - started > LEADER_WAIT_S:
                    log.warning("group_load_gave_up", partition=p, epoch=epoch)
                    return
                await asyncio.sleep(0.02)
            coord = GroupCoordinator(self.config, self.rng, self._now())
            plog = part.log
            offset, end = plog.log_start_offset, plog.log_end_offset
            count = 0
            while offset < end:
                upto = min(end, offset + LOAD_WINDOW)
                for item in read_batches(plog, offset, upto):
                    try:
                        count += replay_batch(coord, *item)
                    except KafkaError as exc:
                        log.warning("group_record_unreadable", partition=p,
                                    offset=item[0].base_offset, error=str(exc))
                offset = upto
                await asyncio.sleep(0)
            coord.finish_loading(self._now())
            if self._loading.get(p, (None,))[0] != epoch:
                return
            for producer_id, committed in self._deferred_markers.pop(p, []):
                coord.complete_txn_offsets(producer_id, committed)
            self.coordinators[p] = coord
            self._loaded_epoch[p] = epoch
            (log.info if coord.groups else log.debug)(
                "group_coordinator_loaded", partition=p, epoch=epoch, records=count,
                groups=len(coord.groups), ms=int((loop.time() - started) * 1000))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("group_load_failed", partition=p)
        finally:
            current = self._loading.get(p)
            if current is not None and current[0] == epoch:
                del self._loading[p]

    # ---- ticking and effects ---------------------------------------------------------------

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(self.tick_interval_s)
            try:
                self.tick()
            except Exception:
                log.exception("group_tick_failed")

    def tick(self) -> None:
        self.reconcile()
        now = self._now()
        for p, coord in list(self.coordinators.items()):
            self._dispatch(p, coord, coord.tick(now))

    def _dispatch(self, p: int, coord: GroupCoordinator, fx: Effects) -> None:
        for reply in fx.replies:
            fut = self._waiting.pop(reply.token, None)
            if fut is not None and not fut.done():
                fut.set_result(reply.result)
        for w in fx.writes:
            self._spawn(self._write(p, coord, w), f"group_write_{p}")

    async def _write(self, p: int, coord: GroupCoordinator, w: Write) -> None:
        now = self._now()
        batch = build_batch([Record(timestamp=now, key=r.key, value=r.value) for r in w.records],
                            producer_id=w.producer_id, producer_epoch=w.producer_epoch,
                            base_sequence=self._next_sequence(p, w),
                            is_transactional=w.producer_id >= 0)
        error = ErrorCode.none
        try:
            results = await self.node.replicas.append(
                {(OFFSETS_TOPIC, p): batch}, required_acks=-1,
                timeout_ms=int(self.node.config["offsets.commit.timeout.ms"]),
            )
            result = results[(OFFSETS_TOPIC, p)]
            if isinstance(result, KafkaError):
                error = result.error_code
        except KafkaError as exc:
            error = exc.error_code
        except asyncio.CancelledError:
            error = ErrorCode.not_coordinator
        except Exception:
            log.exception("group_write_failed", partition=p)
            error = ErrorCode.unknown_server_error
        if error is not ErrorCode.none:
            log.info("group_write_error", partition=p, error=error.name)
        self._dispatch(p, coord, coord.write_completed(w.write_id, error, self._now()))

    def _next_sequence(self, p: int, w: Write) -> int:
        """The base sequence of a TxnOffsetCommit batch (-1 for plain writes). Kafka's
        coordinator writes these batches without one and its log skips the sequence check
        for coordinator appends; Skiff's log checks every producer batch, so the batch goes
        on from the producer's last sequence in this partition (0 in a new epoch). Read
        right before the append, with no await in between, so writes cannot interleave."""
        if w.producer_id < 0:
            return -1
        part = self.node.replicas.get(OFFSETS_TOPIC, p)
        entry = None if part is None else part.producer_state.entry(w.producer_id)
        if entry is None or entry.epoch != w.producer_epoch or entry.last_seq < 0:
            return 0
        return int(entry.last_seq) + 1

    async def _call(self, group_id: str, call: Callable[[GroupCoordinator, Token, int], Effects],
                    ) -> Any:
        p, coord = self.coordinator_for(group_id)
        token = next(self._tokens)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[token] = fut
        fut.add_done_callback(lambda _f: self._waiting.pop(token, None))
        self._dispatch(p, coord, call(coord, token, self._now()))
        return await fut

    # ---- routing --------------------------------------------------------------------------

    def partition_count(self) -> int:
        topic = self.node.metadata.topic(OFFSETS_TOPIC)
        if topic is not None and topic.num_partitions > 0:
            return int(topic.num_partitions)
        return int(self.node.config["offsets.topic.num.partitions"])

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.partition_count())

    def coordinator_for(self, group_id: str) -> tuple[int, GroupCoordinator]:
        p = self.partition_of(group_id)
        coord = self.coordinators.get(p)
        if coord is not None:
            return p, coord
        if p in self._loading:
            raise KafkaError(ErrorCode.coordinator_load_in_progress, f"{OFFSETS_TOPIC}-{p}")
        raise KafkaError(ErrorCode.not_coordinator, f"{OFFSETS_TOPIC}-{p}")

    # ---- FindCoordinator --------------------------------------------------------------------

    async def find_coordinator(
        self, key: str, key_type: int, listener_name: str,
    ) -> tuple[ErrorCode, int, str, int, str | None]:
        """(error, node id, host, port, message) of the coordinator of group `key`
        (transactional ids are broker/txn's: FindCoordinator sends key type 1 there)."""
        if key_type != GROUP_KEY_TYPE:
            return ErrorCode.invalid_request, -1, "", -1, f"key type {key_type}"
        if self.node.metadata.topic(OFFSETS_TOPIC) is None:
            error = await self.ensure_offsets_topic()
            if error is not ErrorCode.none:
                return error, -1, "", -1, None
        image = self.node.metadata
        p = self.partition_of(key)
        leader = image.leader_of(OFFSETS_TOPIC, p)
        broker = image.broker(leader) if leader >= 0 else None
        endpoint = broker.endpoint(listener_name) if broker is not None else None
        if endpoint is None or broker is None or broker.fenced:
            return ErrorCode.coordinator_not_available, -1, "", -1, None
        return ErrorCode.none, leader, endpoint.host, endpoint.port, None

    async def ensure_offsets_topic(self) -> ErrorCode:
        from broker.controller.requests import CreatableTopic

        if self._create_lock is None:
            self._create_lock = asyncio.Lock()
        async with self._create_lock:
            image = self.node.metadata
            if image.topic(OFFSETS_TOPIC) is not None:
                return ErrorCode.none
            cfg = self.node.config
            live = len(image.unfenced_broker_ids)
            wanted_rf = int(cfg["offsets.topic.replication.factor"])
            if live == 0:
                return ErrorCode.coordinator_not_available
            rf = min(wanted_rf, live)
            if rf < wanted_rf:
                log.warning("offsets_topic_replication_factor_lowered", wanted=wanted_rf,
                            used=rf, live_brokers=live)
            try:
                results = await self.node.controller.create_topics([CreatableTopic(
                    name=OFFSETS_TOPIC,
                    num_partitions=int(cfg["offsets.topic.num.partitions"]),
                    replication_factor=rf,
                    configs={
                        "cleanup.policy": "compact",
                        "compression.type": "producer",
                        "segment.bytes": str(cfg["offsets.topic.segment.bytes"]),
                    },
                )])
            except KafkaError as exc:
                log.info("offsets_topic_create_failed", error=str(exc))
                return ErrorCode.coordinator_not_available
            error = results[0].error
            if error not in (ErrorCode.none, ErrorCode.topic_already_exists):
                log.warning("offsets_topic_create_refused", error=error.name,
                            message=results[0].message)
                return ErrorCode.coordinator_not_available
            return ErrorCode.none

    # ---- classic protocol ---------------------------------------------------------------------

    async def join_group(self, req: JoinGroupRequest) -> JoinGroupResult:
        try:
            result: JoinGroupResult = await self._call(
                req.group_id, lambda c, t, now: c.join_group(t, req, now))
        except KafkaError as exc:
            return JoinGroupResult(exc.error_code, member_id=req.member_id)
        return result

    async def sync_group(self, req: SyncGroupRequest) -> SyncGroupResult:
        try:
            result: SyncGroupResult = await self._call(
                req.group_id, lambda c, t, now: c.sync_group(t, req, now))
        except KafkaError as exc:
            return SyncGroupResult(exc.error_code)
        return result

    def heartbeat(self, req: HeartbeatRequest) -> ErrorCode:
        try:
            _, coord = self.coordinator_for(req.group_id)
        except KafkaError as exc:
            return exc.error_code
        return coord.heartbeat(req, self._now())

    def leave_group(self, group_id: str, members: Iterable[LeaveMember]) -> LeaveGroupResult:
        try:
            p, coord = self.coordinator_for(group_id)
        except KafkaError as exc:
            return LeaveGroupResult(exc.error_code)
        result, fx = coord.leave_group(group_id, members, self._now())
        self._dispatch(p, coord, fx)
        return result

    async def commit_offsets(self, req: OffsetCommitRequest) -> OffsetCommitResult:
        try:
            result: OffsetCommitResult = await self._call(
                req.group_id, lambda c, t, now: c.commit_offsets(t, req, now))
        except KafkaError as exc:
            return OffsetCommitResult(tuple(((p.topic, p.partition), exc.error_code)
                                            for p in req.partitions))
        return result

    async def commit_txn_offsets(self, req: TxnOffsetCommitRequest) -> OffsetCommitResult:
        try:
            result: OffsetCommitResult = await self._call(
                req.group_id, lambda c, t, now: c.commit_txn_offsets(t, req, now))
        except KafkaError as exc:
            return OffsetCommitResult(tuple(((p.topic, p.partition), exc.error_code)
                                            for p in req.partitions))
        return result

    def complete_txn_offsets(self, partition: int, producer_id: int, committed: bool) -> int:
        """A transaction marker of `producer_id` reached __consumer_offsets-`partition`:
        its pending offsets there take effect (commit) or are dropped. How many; 0 when the
        partition is not loaded here (a later load replays the marker from the log; one
        loading now applies it when it is done, since it may have read the log before the
        marker was appended)."""
        coord = self.coordinators.get(partition)
        if coord is None:
            if partition in self._loading:
                self._deferred_markers.setdefault(partition, []).append(
                    (producer_id, committed))
            return 0
        n = coord.complete_txn_offsets(producer_id, committed)
        if n:
            log.debug("txn_offsets_completed", partition=partition, producer_id=producer_id,
                      committed=committed, offsets=n)
        return n

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None,
        member_id: str | None = None, member_epoch: int = -1, require_stable: bool = False,
    ) -> OffsetFetchResult:
        try:
            _, coord = self.coordinator_for(group_id)
        except KafkaError as exc:
            return OffsetFetchResult(exc.error_code)
        return coord.fetch_offsets(group_id, partitions, member_id, member_epoch,
                                   require_stable=require_stable)

    async def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition],
    ) -> OffsetDeleteResult:
        parts = list(partitions)
        try:
            result: OffsetDeleteResult = await self._call(
                group_id, lambda c, t, now: c.delete_offsets(t, group_id, parts, now))
        except KafkaError as exc:
            return OffsetDeleteResult(exc.error_code)
        return result

    def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = (),
    ) -> tuple[ErrorCode, list[ListedGroup]]:
        states, types = list(states), list(types)
        out: list[ListedGroup] = []
        for coord in self.coordinators.values():
            out.extend(coord.list_groups(states, types))
        error = ErrorCode.coordinator_load_in_progress if self._loading else ErrorCode.none
        return error, out

    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupDescription | None]:
        try:
            _, coord = self.coordinator_for(group_id)
        except KafkaError as exc:
            return exc.error_code, None
        return ErrorCode.none, coord.describe_group(group_id)

    @staticmethod
    def _deleter(ids: list[str]) -> Callable[[GroupCoordinator, Token, int], Effects]:
        return lambda c, t, now: c.delete_groups(t, ids, now)

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        by_partition: dict[int, list[str]] = {}
        out: dict[str, ErrorCode] = {}
        for gid in group_ids:
            try:
                p, _ = self.coordinator_for(gid)
            except KafkaError as exc:
                out[gid] = exc.error_code
                continue
            by_partition.setdefault(p, []).append(gid)
        calls = [self._call(ids[0], self._deleter(ids)) for ids in by_partition.values()]
        for result in await asyncio.gather(*calls, return_exceptions=True):
            if isinstance(result, KafkaError):
                continue
            if isinstance(result, BaseException):
                raise result
            out.update(dict(result))
        for ids in by_partition.values():
            for gid in ids:
                out.setdefault(gid, ErrorCode.not_coordinator)
        return out

    # ---- KIP-848 -----------------------------------------------------------------------------

    def consumer_group_heartbeat(self, req: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResult:
        try:
            p, coord = self.coordinator_for(req.group_id)
        except KafkaError as exc:
            return ConsumerHeartbeatResult(exc.error_code, member_id=req.member_id or None)
        result = coord.consumer_heartbeat(req, self.node.metadata, self._now())
        self._dispatch(p, coord, coord.take_effects())
        return result

    def consumer_group_describe(
        self, group_id: str,
    ) -> tuple[ErrorCode, ConsumerGroupDescription | None]:
        try:
            _, coord = self.coordinator_for(group_id)
        except KafkaError as exc:
            return exc.error_code, None
        return ErrorCode.none, coord.describe_consumer_group(group_id, self.node.metadata)
