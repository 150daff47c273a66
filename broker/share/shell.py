"""The share groups' service on a broker: the pure cores (broker/share/group.py,
partition.py, sessions.py) with the node's metadata, logs and clock.

- Membership (ShareGroupHeartbeat, ShareGroupDescribe, ListGroups) is answered by the
  group's coordinator, the broker leading the group's __consumer_offsets partition, as
  Kafka routes it (FindCoordinator key type 0); other brokers answer NOT_COORDINATOR.
- Share-partitions live on the partition's leader (ShareFetch, ShareAcknowledge).

A share-partition's state is kept by the share coordinator (broker/share/coordinator.py,
in __share_group_state) through the persister (persister.py): read when the share-partition
is loaded here (first use, or a new leader epoch of the partition), written after every
acknowledgement before it is answered, and when a share session closes. A restarted broker,
or a new leader, so goes on where the acknowledged records left off; a share-partition
without state starts where share.auto.offset.reset says and writes that start at once.

Membership (broker/share/group.py) is persisted as Kafka's share-group records in
__consumer_offsets, written through the group coordinator of the group's partition after
every change; when that coordinator loads a partition (broker/group/coordinator.py keeps the
share-group records it replays), this service takes the partition's groups into its core on
its next use, and forgets the groups of partitions no longer loaded here. A restarted or new
coordinator so keeps the groups, their members and epochs and their initialized partitions.

Handlers reach it as `share_service_of(node)`, made at first use.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import Records, i16, i32, i32Timedelta

from broker.config.resource_configs import (
    SHARE_ISOLATION_LEVEL,
    SHARE_RENEW_ACKNOWLEDGE_ENABLE,
    group_flag,
)
from broker.coordinator.services import NodeSettings
from broker.errors import KafkaError
from broker.group import records as group_records
from broker.group.coordinator import GroupCoordinator
from broker.group.offsets import map_store_error
from broker.group.shell import GroupNode
from broker.group.types import OffsetsRecord
from broker.metadata.features import SHARE_VERSION
from broker.metadata.records import RESOURCE_GROUP
from broker.metrics.stats import ShareStats
from broker.protocol.records import iter_batch_headers, whole_batches_length
from broker.protocol.transport import ConnectionSecurity, KafkaConnection
from broker.replication import Role
from broker.replication.leader_offsets import latest_offsets
from broker.share.coordinator_shell import ShareCoordinatorNode
from broker.share.dlq import DeadLetterNode, DeadLetterQueue, DeadLetters
from broker.share.group import (
    ShareGroupCoordinator,
    ShareGroupDescription,
    ShareGroupSettings,
    ShareHeartbeatRequest,
    ShareHeartbeatResult,
    TopicsView,
)
from broker.share.partition import (
    AcknowledgeType,
    AcquiredRange,
    ShareLimits,
    SharePartition,
    merged_ranges,
)
from broker.share.persister import Persister
from broker.share.records import SharePartitionKey as StateKey
from broker.share.records import StateBatch
from broker.share.sessions import FINAL_EPOCH, ShareSession, ShareSessionCache

log = structlog.get_logger(__name__)

DISABLED_MESSAGE = ("Share groups (KIP-932) are not enabled: they need share.version 1 or "
                    "higher (skiff features upgrade --feature share.version=1).")
SharePartitionKey = tuple[str, str, int]  # (group id, topic, partition)


class ShareNode(DeadLetterNode, GroupNode, ShareCoordinatorNode, Protocol):
    """What the share groups' service uses of its node; `share_groups` is the service
    itself, made on first use (share_service_of)."""

    share_groups: ShareService | None

    @property
    def inter_broker_security(self) -> ConnectionSecurity | None: ...


def share_enabled(node: NodeSettings) -> bool:
    """share.version >= 1 (Kafka's ShareVersion.supportsShareGroups)."""
    return bool(node.metadata.finalized_level(SHARE_VERSION) >= 1)


def share_service_of(node: ShareNode) -> ShareService:
    service = node.share_groups
    if service is None:
        service = ShareService(node)
        node.share_groups = service
    return service


@dataclass(slots=True)
class PartitionAnswer:
    """One partition of a ShareFetch / ShareAcknowledge answer."""

    topic_id: uuid.UUID
    partition: int
    error: ErrorCode = ErrorCode.none
    error_message: str | None = None
    ack_error: ErrorCode = ErrorCode.none
    ack_error_message: str | None = None
    records: bytes = b""
    acquired: list[AcquiredRange] = field(default_factory=list)
    leader_id: int = -1
    leader_epoch: int = -1


DLQ_WRITE_TIMEOUT_MS = 30000
PRODUCE_API_KEY = 0
RENEW_DISABLED_MESSAGE = "Renewing acquisition locks is not enabled for the group."
# a share fetch reads the log this much at a time (Kafka's max.partition.fetch.bytes default)
SHARE_READ_CHUNK_BYTES = 1 << 20
# what one pass reads of a partition another worker of this broker owns (a copy between
# the processes): a fetch that wants more takes the rest in its next pass
REMOTE_READ_BYTES = 4 << 20
_ACK_TYPE_NAMES = {0: "Gap", 1: "Accept", 2: "Release", 3: "Reject", 4: "Renew"}
# (topic id, partition) -> [(first, last, types)]
Acks = Mapping[tuple[uuid.UUID, int], list[tuple[int, int, tuple[int, ...]]]]


def node_setting(cfg: Any, key: str) -> int:
    """The node's setting, or Kafka's default where a partial config (tests) lacks it."""
    try:
        return int(cfg[key])
    except KeyError:
        from broker.config import BROKER_CONFIGS

        return int(BROKER_CONFIGS[key].default)


def _acquired_slice(data: bytes, spans: list[tuple[int, int, int, int]],
                    acquired: list[AcquiredRange]) -> bytes:
    """The batches from the first holding an acquired record to the last holding one, as
    Kafka slices a share fetch's records: the log read up to max bytes, the acquired records
    up to max records, and the client needs only the batches that hold them."""
    lo = min(a.first_offset for a in acquired)
    hi = max(a.last_offset for a in acquired)
    start = next(s for s, _, _, last in spans if last >= lo)
    end = next(e for _, e, first, _ in reversed(spans) if first <= hi)
    return data[start:end]


class ShareService:
    def __init__(self, node: ShareNode) -> None:
        self.node = node
        cfg = node.config
        self._groups = ShareGroupCoordinator(ShareGroupSettings(
            session_timeout_ms=node_setting(cfg, "group.share.session.timeout.ms"),
            heartbeat_interval_ms=node_setting(cfg, "group.share.heartbeat.interval.ms"),
            max_size=node_setting(cfg, "group.share.max.size"),
            assignment_interval_ms=node_setting(cfg, "group.share.assignment.interval.ms")),
            self.group_settings)
        # the group coordinator (by __consumer_offsets partition) whose replayed share-group
        # records the core holds
        self._adopted: dict[int, GroupCoordinator] = {}
        self.sessions = ShareSessionCache(node_setting(cfg, "group.share.max.share.sessions"))
        self.partitions: dict[SharePartitionKey, SharePartition] = {}
        # (state epoch, leader epoch of the partition) each share-partition was loaded at
        self.loaded_at: dict[SharePartitionKey, tuple[int, int]] = {}
        self._load_locks: dict[SharePartitionKey, asyncio.Lock] = {}
        self._write_locks: dict[SharePartitionKey, asyncio.Lock] = {}
        self._persister: Persister | None = None
        self.stats = ShareStats()
        self.dlq = DeadLetterQueue(node, self._group_config, self._produce_dead_letters,
                                   self.now, self.stats)
        self._dlq_connections: dict[tuple[str, int], KafkaConnection] = {}

    async def close(self) -> None:
        await self.dlq.close()
        for conn in self._dlq_connections.values():
            with contextlib.suppress(Exception):
                await conn.close()
        self._dlq_connections.clear()
        if self._persister is not None:
            await self._persister.close()

    # ---- dead letters (KIP-1191, broker/share/dlq.py) ------------------------------------------

    def _offer_dead_letters(self, group_id: str, topic: str, partition: int,
                            sp: SharePartition) -> None:
        """Hands what REJECTs and the delivery count limit archived on this share-partition
        to the dead-letter queue (which drops it for a group without one)."""
        if sp.dead:
            self.dlq.offer(DeadLetters(group_id, topic, partition, tuple(sp.take_dead())))

    async def _produce_dead_letters(self, topic: str, partition: int, batch: bytes
                                    ) -> ErrorCode:
        """Appends `batch` (acks=all) on the partition's leader: here, or with a Produce
        over the inter-broker listener."""
        replicas = self.node.replicas
        try:
            replicas.leader_partition(topic, partition)
        except KafkaError:
            return await self._produce_remote(topic, partition, batch)
        out = await replicas.append({(topic, partition): batch}, required_acks=-1,
                                    timeout_ms=DLQ_WRITE_TIMEOUT_MS)
        result = out[(topic, partition)]
        return result.error_code if isinstance(result, KafkaError) else ErrorCode.none

    async def _produce_remote(self, topic: str, partition: int, batch: bytes) -> ErrorCode:
        from kio.schema.produce.v9 import request as produce

        image = self.node.metadata
        leader = image.leader_of(topic, partition)
        broker = image.broker(leader) if leader >= 0 else None
        ep = (broker.endpoint(self.node.config.inter_broker_listener_name)
              if broker is not None else None)
        if ep is None:
            return ErrorCode.leader_not_available
        addr = (ep.host, ep.port)
        conn = self._dlq_connections.get(addr)
        if conn is None:
            conn = self._dlq_connections[addr] = KafkaConnection(
                ep.host, ep.port, client_id="skiff-share-dlq",
                security=self.node.inter_broker_security)
        request = produce.ProduceRequest(
            transactional_id=None, acks=i16(-1),
            timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=DLQ_WRITE_TIMEOUT_MS)),
            topic_data=(produce.TopicProduceData(name=TopicName(topic), partition_data=(
                produce.PartitionProduceData(index=i32(partition), records=Records(batch)),)),))
        try:
            response = await conn.request(PRODUCE_API_KEY, 9, request,
                                          DLQ_WRITE_TIMEOUT_MS / 1000 + 5)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.info("dlq_produce_failed", topic=topic, partition=partition, error=repr(exc))
            self._dlq_connections.pop(addr, None)
            with contextlib.suppress(Exception):
                await conn.close()
            return ErrorCode.network_exception
        code: ErrorCode = response.responses[0].partition_responses[0].error_code
        return code

    @property
    def persister(self) -> Persister:
        if self._persister is None:
            from broker.share.coordinator_shell import share_coordinator_of

            self._persister = Persister(
                self.node, share_coordinator_of(self.node),
                security=self.node.inter_broker_security)
        return self._persister

    # ---- time and configs --------------------------------------------------------------------

    def now(self) -> int:
        return int(self.node.replicas.clock())

    def _group_config(self, group_id: str) -> Mapping[str, str]:
        configs: Mapping[str, str] = self.node.metadata.configs.get(
            (RESOURCE_GROUP, group_id), {})
        return configs

    def limits(self, group_id: str) -> ShareLimits:
        cfg, gc = self.node.config, self._group_config(group_id)
        return ShareLimits(
            record_lock_duration_ms=int(gc.get(
                "share.record.lock.duration.ms",
                node_setting(cfg, "group.share.record.lock.duration.ms"))),
            delivery_count_limit=int(gc.get(
                "share.delivery.count.limit",
                node_setting(cfg, "group.share.delivery.count.limit"))),
            max_record_locks=int(gc.get(
                "share.partition.max.record.locks",
                node_setting(cfg, "group.share.partition.max.record.locks"))))

    def group_settings(self, group_id: str) -> ShareGroupSettings:
        """The group's share.session.timeout.ms / share.heartbeat.interval.ms over the
        node's group.share.* settings."""
        cfg, gc = self.node.config, self._group_config(group_id)
        return ShareGroupSettings(
            session_timeout_ms=int(gc.get("share.session.timeout.ms", node_setting(
                cfg, "group.share.session.timeout.ms"))),
            heartbeat_interval_ms=int(gc.get("share.heartbeat.interval.ms", node_setting(
                cfg, "group.share.heartbeat.interval.ms"))),
            max_size=node_setting(cfg, "group.share.max.size"),
            assignment_interval_ms=int(gc.get("share.assignment.interval.ms", node_setting(
                cfg, "group.share.assignment.interval.ms"))))

    def read_committed(self, group_id: str) -> bool:
        """The group's share.isolation.level (Kafka's default: read_uncommitted)."""
        level = self._group_config(group_id).get(SHARE_ISOLATION_LEVEL, "read_uncommitted")
        return level.strip().lower() == "read_committed"

    def renew_enabled(self, group_id: str) -> bool:
        """The group's share.renew.acknowledge.enable (Kafka's default: true)."""
        return group_flag(self._group_config(group_id), SHARE_RENEW_ACKNOWLEDGE_ENABLE)

    def lock_duration_ms(self, group_id: str) -> int:
        return self.limits(group_id).record_lock_duration_ms

    # ---- membership and its records -----------------------------------------------------------

    @property
    def groups(self) -> ShareGroupCoordinator:
        """The share groups of the __consumer_offsets partitions loaded here."""
        self._sync_loaded()
        return self._groups

    def _sync_loaded(self) -> None:
        """Takes the groups of partitions the group coordinator loaded since the last call
        into the core, and drops those of partitions it no longer has."""
        svc = self.node.group_coordinator
        if svc is None:
            return
        loaded = svc.coordinators
        if all(self._adopted.get(p) is c for p, c in loaded.items()) \
                and len(self._adopted) == len(loaded):
            return
        for p, coord in list(self._adopted.items()):
            if loaded.get(p) is not coord:
                del self._adopted[p]
                self._groups.unload([g for g in self._groups.groups
                                     if svc.partition_of(g) == p])
        for p, coord in loaded.items():
            if self._adopted.get(p) is coord:
                continue
            self._groups.unload([g for g in self._groups.groups if svc.partition_of(g) == p])
            taken, coord.share_records = coord.share_records, {}
            replayed: set[str] = set()
            for key, value in taken.items():
                try:
                    k = group_records.decode_share_group_key(key)
                    if k is not None:
                        self._groups.replay(k, value, key)
                        replayed.add(k.group)
                except KafkaError as exc:
                    log.warning("share_group_record_unreadable", partition=p, error=str(exc))
            self._groups.finish_loading(replayed, self._topics(), self.now())
            self._adopted[p] = coord
            if replayed:
                log.info("share_groups_loaded", partition=p, groups=len(replayed))

    def _persist(self) -> dict[str, asyncio.Future[ErrorCode]]:
        """Writes the records of the groups that changed; a future of each write's outcome,
        by group id."""
        core = self._groups
        if not core.dirty:
            return {}
        names = {t.topic_id: name for name, t in self.node.metadata.topics_by_name.items()}
        out: dict[str, asyncio.Future[ErrorCode]] = {}
        svc = self.node.group_coordinator
        for gid, records in core.take_records(names).items():
            if svc is None:
                continue
            fut: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
            out[gid] = fut
            try:
                p, coord = svc.coordinator_for(gid)
            except KafkaError as exc:
                fut.set_result(exc.error_code)
                continue

            def done(error: ErrorCode, now: int, gid: str = gid,
                     records: list[OffsetsRecord] = records,
                     fut: asyncio.Future[ErrorCode] = fut) -> None:
                if error is not ErrorCode.none:
                    log.info("share_group_write_failed", group=gid, error=error.name)
                    self._groups.write_failed(gid, records)
                if not fut.done():
                    fut.set_result(error)

            svc.runtime.dispatch(p, coord, coord.write_share_records(records, done))
        return out

    def _topics(self) -> TopicsView:
        image = self.node.metadata
        return {name: (t.topic_id, t.num_partitions) for name, t in image.topics_by_name.items()}

    def _check_coordinator(self, group_id: str) -> None:
        from broker.group.shell import service_of

        groups = service_of(self.node)
        groups.coordinator_for(group_id)  # NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS
        if groups.is_classic_group(group_id) or self._is_consumer_group(group_id):
            raise KafkaError(ErrorCode.group_id_not_found,
                             f"Group {group_id} is not a share group.")

    def _is_consumer_group(self, group_id: str) -> bool:
        from broker.group.shell import service_of

        try:
            _, coord = service_of(self.node).coordinator_for(group_id)
        except KafkaError:
            return False
        return group_id in getattr(coord, "consumer_groups", {})

    def heartbeat(self, req: ShareHeartbeatRequest) -> ShareHeartbeatResult:
        try:
            self._check_coordinator(req.group_id)
        except KafkaError as exc:
            return ShareHeartbeatResult(exc.error_code, member_id=req.member_id or None,
                                        error_message=exc.message)
        result, left = self.groups.heartbeat(req, self._topics(), self.now())
        for member_id in left:
            self._member_gone(req.group_id, member_id)
        self._persist()
        return result

    def describe(self, group_id: str) -> tuple[ErrorCode, ShareGroupDescription | None, str | None]:
        try:
            self._check_coordinator(group_id)
        except KafkaError as exc:
            return exc.error_code, None, exc.message
        self.tick()
        names = {t.topic_id: name for name, t in self.node.metadata.topics_by_name.items()}
        desc = self.groups.describe(group_id, names)
        if desc is None:
            return ErrorCode.group_id_not_found, None, f"Group {group_id} not found."
        return ErrorCode.none, desc, None

    def listed(self) -> list[tuple[str, str]]:
        from broker.group.shell import service_of

        self.tick()
        out = []
        for gid, state in self.groups.listed():
            try:
                service_of(self.node).coordinator_for(gid)
            except KafkaError:
                continue
            out.append((gid, state))
        return out

    def tick(self) -> None:
        now = self.now()
        for gid, group in list(self.groups.groups.items()):
            before = set(group.members)
            self.groups.expire(now)
            for mid in before - set(group.members):
                self._member_gone(gid, mid)
        self._persist()

    def _member_gone(self, group_id: str, member_id: str) -> None:
        session = self.sessions.remove(group_id, member_id)
        if session is not None:
            self._release(session)

    def _release(self, session: ShareSession) -> list[SharePartitionKey]:
        """Releases the member's records; the share-partitions where it held some."""
        released = []
        for key, sp in list(self.partitions.items()):
            if key[0] == session.group_id and sp.release_member(session.member_id):
                released.append(key)
                self._offer_dead_letters(*key, sp)
        return released

    # ---- share-partitions --------------------------------------------------------------------

    def _state_key(self, group_id: str, topic: str, partition: int) -> StateKey:
        t = self.node.metadata.topic(topic)
        if t is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"{topic}-{partition}")
        return StateKey(group_id, t.topic_id, partition)

    async def _leader_partition(self, topic: str, partition: int, offset: int = -1,
                                max_bytes: int = 0, read_committed: bool = False) -> Any:
        """The partition this broker leads; on a broker of several workers whose other
        process owns it, a view of it from its owner, with up to `max_bytes` of its records
        from `offset` (broker/node/shard_routing.py PartitionView)."""
        replicas = self.node.replicas
        router = replicas.shard_router
        if router is None or router.owns(topic, partition):
            return replicas.leader_partition(topic, partition)
        return await router.partition_view(topic, partition, offset, max_bytes,
                                           read_committed)

    async def share_partition(self, group_id: str, topic: str,
                              partition: int) -> SharePartition:
        """The share-partition, loaded from its persisted state at first use and at each
        new leader epoch of the partition; without a state it starts at the offset
        share.auto.offset.reset says (latest, Kafka's default: the high watermark;
        earliest: the log start), written at once so that a restart keeps it."""
        key = (group_id, topic, partition)
        part = await self._leader_partition(topic, partition)
        sp = self.partitions.get(key)
        if sp is None or self.loaded_at[key][1] != part.leader_epoch:
            lock = self._load_locks.setdefault(key, asyncio.Lock())
            async with lock:
                sp = self.partitions.get(key)
                if sp is None or self.loaded_at[key][1] != part.leader_epoch:
                    started = time.monotonic()
                    sp = await self._load(group_id, topic, partition, part)
                    self.stats.partition_load_time.observe(
                        (time.monotonic() - started) * 1000)
        else:
            sp.limits = self.limits(group_id)
        if part.log.log_start_offset > sp.start_offset:
            sp.reset_start(part.log.log_start_offset)
        return sp

    async def _load(self, group_id: str, topic: str, partition: int,
                    part: Any) -> SharePartition:
        key = (group_id, topic, partition)
        skey = self._state_key(group_id, topic, partition)
        leader_epoch = int(part.leader_epoch)
        state = await self.persister.read(skey, leader_epoch)
        if state.error is not ErrorCode.none:
            raise KafkaError(state.error, state.message or "share-partition state not read")
        limits = self.limits(group_id)
        if state.start_offset >= 0:
            sp = SharePartition.from_state(
                state.start_offset, [(b.first_offset, b.last_offset, b.delivery_state,
                                      b.delivery_count) for b in state.state_batches], limits)
            log.info("share_partition_loaded", group=group_id, topic=topic,
                     partition=partition, start_offset=sp.start_offset,
                     end_offset=sp.end_offset, state_epoch=state.state_epoch)
        else:
            reset = self._group_config(group_id).get("share.auto.offset.reset", "latest")
            start = (part.log.log_start_offset if reset == "earliest"
                     else part.high_watermark)
            sp = SharePartition(start, limits)
            written = await self.persister.write(skey, state.state_epoch, leader_epoch,
                                                 start, ())
            if written.error is not ErrorCode.none:
                raise KafkaError(written.error,
                                 written.message or "share-partition state not written")
            log.info("share_partition_initialized", group=group_id, topic=topic,
                     partition=partition, start_offset=start, reset=reset)
        self._retire(key)
        self.partitions[key] = sp
        self.loaded_at[key] = (state.state_epoch, leader_epoch)
        self.stats.batches_made(key, sp.take_new_batches())
        return sp

    async def persist(self, group_id: str, topic: str, partition: int) -> ErrorCode:
        """Writes the share-partition's state (its SPSO and in-flight states); one write
        at a time per share-partition, each carrying the state as it is when it starts.
        A fenced write (another leader, or offsets altered) drops the share-partition, to
        be loaded again."""
        key = (group_id, topic, partition)
        lock = self._write_locks.setdefault(key, asyncio.Lock())
        async with lock:
            sp = self.partitions.get(key)
            if sp is None:
                return ErrorCode.none
            state_epoch, leader_epoch = self.loaded_at[key]
            batches = tuple(StateBatch(*b) for b in sp.persisted_batches())
            start, upto = sp.persisted_start(), sp.start_offset
            # KIP-1226: offsets past the start whose delivery is complete (for the lag)
            complete = sum(b.last_offset - b.first_offset + 1 for b in batches
                           if b.delivery_state in (2, 4))
            result = await self.persister.write(
                self._state_key(group_id, topic, partition), state_epoch, leader_epoch,
                start, batches, complete)
            if result.error is ErrorCode.none:
                sp.persisted(upto)
            if result.error in (ErrorCode.fenced_state_epoch, ErrorCode.fenced_leader_epoch) \
                    and self.partitions.get(key) is sp:
                log.info("share_partition_fenced", group=group_id, topic=topic,
                         partition=partition, error=result.error.name)
                self._retire(key)
                del self.partitions[key]
                del self.loaded_at[key]
            return result.error

    async def acknowledge(self, group_id: str, member_id: str, acks: Acks
                          ) -> dict[tuple[uuid.UUID, int], tuple[ErrorCode, str | None]]:
        """Applies the acknowledgements, then persists each share-partition they changed
        before answering: an ACCEPT answered is an ACCEPT a restart keeps."""
        out: dict[tuple[uuid.UUID, int], tuple[ErrorCode, str | None]] = {}
        image = self.node.metadata
        now = self.now()
        for (tid, p), batches in acks.items():
            t = image.topic_by_id(tid)
            if t is None:
                out[(tid, p)] = (ErrorCode.unknown_topic_id, None)
                continue
            try:
                sp = await self.share_partition(group_id, t.name, p)
            except KafkaError as exc:
                out[(tid, p)] = (exc.error_code, exc.message)
                continue
            error: ErrorCode = ErrorCode.none
            message = None
            changed = False
            renew_allowed = self.renew_enabled(group_id)
            for first, last, types in batches:
                for kind in types:
                    self.stats.acknowledged(_ACK_TYPE_NAMES.get(kind, "Unknown"))
                if not renew_allowed and AcknowledgeType.RENEW in types:
                    # as Kafka's SharePartition: the records' state is checked first
                    error = ErrorCode.invalid_record_state
                    if sp.held_by(member_id, first, last, now):
                        message = RENEW_DISABLED_MESSAGE
                    continue
                e = sp.acknowledge(member_id, first, last, types, now)
                if e is not ErrorCode.none:
                    error = e
                else:
                    changed = True
            self._offer_dead_letters(group_id, t.name, p, sp)
            if changed:
                written = await self.persist(group_id, t.name, p)
                if written is not ErrorCode.none and error is ErrorCode.none:
                    error, message = written, "The share-partition state was not written."
            out[(tid, p)] = (error, message)
        self._count(((image.topic_by_id(tid), e) for (tid, _p), (e, _m) in out.items()),
                    "share_acknowledgement")
        return out

    def _retire(self, key: SharePartitionKey) -> None:
        """A share-partition about to be dropped or replaced: its lock timeouts are kept
        (the metric counts since the node started, whatever reloads happened)."""
        sp = self.partitions.get(key)
        if sp is not None and sp.lock_timeouts:
            retired = self.stats.lock_timeouts
            retired[key] = retired.get(key, 0) + sp.lock_timeouts
            sp.lock_timeouts = 0

    def lock_timeouts(self) -> dict[SharePartitionKey, int]:
        """Records whose acquisition lock expired, per share-partition, since the start."""
        out = dict(self.stats.lock_timeouts)
        for key, sp in self.partitions.items():
            out[key] = out.get(key, 0) + sp.lock_timeouts
        return out

    def _count(self, results: Iterable[tuple[Any, ErrorCode]], what: str) -> None:
        """BrokerTopicMetrics' Total/Failed Share{Fetch,Acknowledgement}RequestsPerSec: one
        per partition answered, as the Fetch counters count."""
        stats = self.node.replicas.topic_stats
        if stats is None:
            return
        for topic, error in results:
            if topic is None:
                continue
            st = stats.topic(topic.name)
            failed = error is not ErrorCode.none
            if what == "share_fetch":
                st.total_share_fetch += 1
                st.failed_share_fetch += failed
            else:
                st.total_share_acknowledgement += 1
                st.failed_share_acknowledgement += failed

    async def fetch(self, group_id: str, member_id: str, session: ShareSession,
                    max_wait_ms: int, max_records: int, max_bytes: int,
                    refused: Iterable[tuple[uuid.UUID, int]] = (),
                    whole_batches: bool = False) -> list[PartitionAnswer]:
        """Acquires records of the session's partitions for the member, waiting up to
        `max_wait_ms` while there is nothing to acquire; `whole_batches`: the batch-optimized
        acquire mode (SharePartition.acquire_batches).

        TopicPartitionsAcquireTimeMs: once per fetch with partitions, the time from its start
        to the first pass that found a share-partition with room to acquire (Kafka's
        canAcquireRecords; Skiff has no fetch lock to wait for), or to its answer if none
        had room."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = started + max_wait_ms / 1000
        skip = set(refused)
        timed = not any(k not in skip for k in session.partitions)  # nothing to acquire from
        while True:
            answers, acquirable_at = await self._fetch_once(
                group_id, member_id, session, max_records, max_bytes, skip, whole_batches)
            remaining = deadline - loop.time()
            done = any(a.acquired or a.error is not ErrorCode.none for a in answers) \
                or remaining <= 0
            if not timed and (acquirable_at is not None or done):
                timed = True
                until = loop.time() if acquirable_at is None else acquirable_at
                self.stats.acquire_waited(group_id, (until - started) * 1000)
            if done:
                image = self.node.metadata
                self._count(((image.topic_by_id(a.topic_id), a.error) for a in answers),
                            "share_fetch")
                return answers
            keys = []
            image = self.node.metadata
            for tid, p in session.partitions:
                t = image.topic_by_id(tid)
                if t is not None:
                    keys.append((t.name, p))
            # new records wake the wait; a lock expiring is seen within 50 ms
            await self.node.replicas.wait_any(keys, for_log_end=False,
                                              timeout_s=min(remaining, 0.05))

    async def _fetch_once(self, group_id: str, member_id: str, session: ShareSession,
                    max_records: int, max_bytes: int,
                    skip: set[tuple[uuid.UUID, int]],
                    whole_batches: bool = False
                    ) -> tuple[list[PartitionAnswer], float | None]:
        """One pass over the session's partitions: the answers, and the loop time at which
        it found the first share-partition with room to acquire records (None: none had)."""
        image = self.node.metadata
        now = self.now()
        acquirable_at: float | None = None
        answers: list[PartitionAnswer] = []
        budget = max_records
        used: list[tuple[str, int, SharePartition]] = []  # where locks may have expired
        for tid, p in list(session.partitions):
            if (tid, p) in skip:
                continue
            ans = PartitionAnswer(tid, p)
            t = image.topic_by_id(tid)
            if t is None:
                ans.error = ErrorCode.unknown_topic_id
                answers.append(ans)
                continue
            reg = t.partition(p)
            if reg is not None:
                ans.leader_id, ans.leader_epoch = reg.leader, reg.leader_epoch
            if budget <= 0:
                continue
            try:
                sp = await self.share_partition(group_id, t.name, p)
            except KafkaError as exc:
                ans.error, ans.error_message = exc.error_code, exc.message
                answers.append(ans)
                continue
            used.append((t.name, p, sp))
            now = self.now()
            if not sp.can_acquire(now):
                continue
            if acquirable_at is None:
                acquirable_at = asyncio.get_running_loop().time()
            offset = sp.next_fetch_offset(now)
            try:
                read_committed = self.read_committed(group_id)
                part = await self._leader_partition(
                    t.name, p, offset, min(max_bytes, REMOTE_READ_BYTES), read_committed)
                upto = part.last_stable_offset if read_committed else part.high_watermark
                if offset >= upto:
                    continue
                aborted = (part.log.collect_aborted_txns(offset, upto) if read_committed
                           else [])
                pieces, acquired = self._acquire_from_log(
                    sp, part.log, member_id, offset, upto, aborted, budget, max_bytes, now,
                    whole_batches)
            except KafkaError as exc:  # leadership moved, storage failed, a corrupt batch
                ans.error, ans.error_message = exc.error_code, exc.message
                answers.append(ans)
                continue
            if not acquired:
                continue
            budget -= sum(a.last_offset - a.first_offset + 1 for a in acquired)
            ans.records = pieces[0] if len(pieces) == 1 else b"".join(pieces)
            ans.acquired = acquired
            answers.append(ans)
        for topic, partition, used_sp in used:  # a lock that expired at the limit
            self._offer_dead_letters(group_id, topic, partition, used_sp)
            self.stats.batches_made((group_id, topic, partition), used_sp.take_new_batches())
        return answers, acquirable_at

    @staticmethod
    def _acquire_from_log(sp: SharePartition, log: Any, member_id: str, offset: int,
                          upto: int, aborted: list[Any], budget: int, max_bytes: int,
                          now: int, whole_batches: bool,
                          ) -> tuple[list[bytes], list[AcquiredRange]]:
        """Acquires from the log at `offset`, read a chunk at a time (not MaxBytes at once:
        the Java share consumer asks for its fetch.max.bytes, 50 MiB, to take max.poll.records
        records) until the budget is taken, MaxBytes read, the log read to `upto`, or the
        in-flight window full. Answers the batches holding acquired records, per chunk, and
        the acquired ranges."""
        pieces: list[bytes] = []
        acquired: list[AcquiredRange] = []
        read = 0
        while True:
            data = log.read(offset, max(1, min(SHARE_READ_CHUNK_BYTES, max_bytes - read)),
                            upto).read_bytes()
            data = data[: whole_batches_length(data)]
            if not data:
                break
            read += len(data)
            batches: list[tuple[int, int, bool]] = []  # (first, last, deliverable)
            spans: list[tuple[int, int, int, int]] = []  # (start, end) in data, first, last
            for pos, h in iter_batch_headers(memoryview(data), validate_crc=False):
                deliverable = not h.is_control and not (
                    h.is_transactional and any(
                        a.producer_id == h.producer_id
                        and a.first_offset <= h.base_offset <= a.last_offset
                        for a in aborted))
                batches.append((h.base_offset, h.last_offset, deliverable))
                spans.append((pos, pos + h.size, h.base_offset, h.last_offset))
            # in log order: a marker read with its transaction's records is archived only
            # after them (Kafka's SharePartition archives control and, under read_committed,
            # aborted batches: filterAbortedTransactionalAcquiredRecords)
            got = sp.acquire_batches(member_id, batches, budget, now, whole_batches)
            if got:
                pieces.append(_acquired_slice(data, spans, got))
                acquired.extend(got)
                budget -= sum(a.last_offset - a.first_offset + 1 for a in got)
            last = batches[-1][1]
            if (budget <= 0 or read >= max_bytes or last + 1 >= upto
                    or sp.end_offset <= last):
                break
            offset = last + 1
        return pieces, merged_ranges(acquired)

    async def close_session(self, session: ShareSession) -> None:
        """The member's records go back, and the share-partitions it held are persisted
        with their delivery counts."""
        if self.sessions.existing(session.group_id, session.member_id) is session:
            self.sessions.remove(session.group_id, session.member_id)
        for gid, topic, p in self._release(session):
            await self.persist(gid, topic, p)
        self._forget_idle(session.group_id)

    def _forget_idle(self, group_id: str) -> None:
        """No share session of the group is left here: its share-partitions are dropped
        (their state is persisted), to be loaded again by the next fetch, so that offsets
        altered meanwhile (AlterShareGroupOffsets needs an empty group) are seen."""
        if any(gid == group_id for gid, _ in self.sessions.sessions):
            return
        for key in [k for k in self.partitions if k[0] == group_id]:
            if not self.partitions[key].acquired_by_anyone():
                self._retire(key)
                del self.partitions[key]
                self.loaded_at.pop(key, None)

    def session_closed(self, epoch: int) -> bool:
        return epoch == FINAL_EPOCH

    # ---- share group offsets (DescribeShareGroupOffsets, Alter..., Delete..., DeleteGroups)

    def coordinated(self, group_id: str) -> None:
        """KafkaError unless this broker coordinates `group_id` and it is no other kind of
        group."""
        self._check_coordinator(group_id)

    def _latest_offset(self, topic: str, partition: int) -> int | None:
        """The partition's high watermark when it is led here (the lag's end)."""
        part = self.node.replicas.get(topic, partition)
        if part is None or part.role is not Role.LEADER:
            return None
        return int(part.high_watermark)

    async def describe_offsets(self, group_id: str,
                               topics: list[tuple[str, list[int]]] | None,
                               ) -> list[OffsetsTopic]:
        """Each partition's start offset (SPSO), leader epoch and lag (Kafka 4.4's
        describeShareGroupOffsets): `topics` None means every initialized partition of the
        group; a topic not in the metadata answers start offset -1, a partition without
        state -1 with lag -1. Raises KafkaError for the group."""
        self.coordinated(group_id)
        image = self.node.metadata
        wanted: list[tuple[str, uuid.UUID | None, list[int]]] = []
        if topics is None:
            for init_id, init_ps in self.groups.initialized_partitions(group_id).items():
                t = image.topic_by_id(init_id)
                if t is not None:
                    wanted.append((t.name, init_id, list(init_ps)))
        else:
            for name, asked in topics:
                t = image.topic(name)
                wanted.append((name, None if t is None else t.topic_id, list(asked)))
        summaries: dict[tuple[str, int], Any] = {}
        for name, tid, wanted_ps in wanted:
            for p in wanted_ps:
                if tid is not None:
                    summaries[(name, p)] = await self.persister.read_summary(
                        StateKey(group_id, tid, p))
        ends = await self._end_offsets([k for k, r in summaries.items()
                                        if r.error is ErrorCode.none and r.start_offset >= 0])
        out: list[OffsetsTopic] = []
        for name, tid, wanted_ps in wanted:
            parts: list[OffsetsPartition] = []
            for p in wanted_ps:
                r = summaries.get((name, p))
                if r is None:
                    parts.append(OffsetsPartition(p, -1, -1, -1))
                    continue
                if r.error is not ErrorCode.none or r.start_offset < 0:
                    parts.append(OffsetsPartition(p, -1, -1 if r.error is not ErrorCode.none
                                                  else r.leader_epoch, -1))
                    continue
                lag = -1
                end = ends.get((name, p))
                if end is not None and r.delivery_complete_count >= 0:
                    lag = end - r.start_offset - r.delivery_complete_count
                parts.append(OffsetsPartition(p, r.start_offset, r.leader_epoch, lag))
            out.append(OffsetsTopic(name, tid, parts))
        return out

    async def _end_offsets(self, keys: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Each partition's latest offset: the high watermark where it is led here, else
        from its leader (ListOffsets, as Kafka 4.4 asks with its PartitionMetadataClient);
        left out when the leader does not answer (the lag is then unknown, -1)."""
        out: dict[tuple[str, int], int] = {}
        remote: list[tuple[str, int]] = []
        for name, p in keys:
            end = self._latest_offset(name, p)
            if end is None:
                remote.append((name, p))
            else:
                out[(name, p)] = end
        if remote:
            out.update(await latest_offsets(
                self.node.metadata, str(self.node.config.inter_broker_listener_name),
                self.node.inter_broker_security, remote))
        return out

    async def alter_offsets(self, group_id: str, topics: list[tuple[str, list[tuple[int, int]]]]
                            ) -> list[AlteredTopic]:
        """Sets the start offsets of an empty (or new) share group's partitions: each
        partition's state is initialized again at a higher state epoch, which fences the
        share-partition leaders' older state. Raises KafkaError for the whole request."""
        self.coordinated(group_id)
        error, message = self.groups.check_empty(group_id, create=True)
        if error is not ErrorCode.none:
            raise KafkaError(error, message or "")
        image = self.node.metadata
        out: list[AlteredTopic] = []
        done: dict[uuid.UUID, list[int]] = {}
        for name, parts in topics:
            t = image.topic(name)
            results: list[tuple[int, ErrorCode, str | None]] = []
            for p, offset in parts:
                if t is None or t.partition(p) is None:
                    results.append((p, ErrorCode.unknown_topic_or_partition,
                                    "This server does not host this topic-partition."))
                    continue
                key = StateKey(group_id, t.topic_id, p)
                summary = await self.persister.read_summary(key)
                if summary.error is not ErrorCode.none:
                    results.append((p, summary.error, summary.message))
                    continue
                r = await self.persister.initialize(key, summary.state_epoch + 1, offset)
                results.append((p, r.error, r.message))
                if r.error is ErrorCode.none:
                    done.setdefault(t.topic_id, []).append(p)
                    self._drop(group_id, name, p)
            out.append(AlteredTopic(name, None if t is None else t.topic_id, results))
        if done:
            self.groups.offsets_altered(group_id, done)
            await self._written(group_id)
        return out

    async def delete_offsets(self, group_id: str, topic_names: list[str]
                             ) -> list[tuple[str, uuid.UUID | None, ErrorCode, str | None]]:
        """Deletes the state of an empty share group's partitions of these topics; the
        share-partitions start again where share.auto.offset.reset says. Raises KafkaError
        for the whole request."""
        self.coordinated(group_id)
        error, message = self.groups.check_empty(group_id)
        if error is not ErrorCode.none:
            raise KafkaError(error, message or "")
        image = self.node.metadata
        initialized = self.groups.initialized_partitions(group_id)
        out: list[tuple[str, uuid.UUID | None, ErrorCode, str | None]] = []
        for name in topic_names:
            t = image.topic(name)
            if t is None:
                out.append((name, None, ErrorCode.unknown_topic_or_partition,
                            "This server does not host this topic-partition."))
                continue
            error, message = await self._delete_state(group_id, t.topic_id, name,
                                                      initialized.get(t.topic_id, ()))
            if error is ErrorCode.none:
                self.groups.offsets_deleted(group_id, [t.topic_id])
            out.append((name, t.topic_id, error, message))
        await self._written(group_id)
        return out

    async def delete_group(self, group_id: str) -> ErrorCode | None:
        """DeleteGroups of a share group: its partitions' state, then the group, when it
        has no members; None when `group_id` is no share group here."""
        if group_id not in self.groups.groups:
            return None
        error, _ = self.groups.check_empty(group_id)
        if error is not ErrorCode.none:
            return error
        image = self.node.metadata
        for tid, ps in self.groups.initialized_partitions(group_id).items():
            t = image.topic_by_id(tid)
            error, _ = await self._delete_state(group_id, tid, None if t is None else t.name, ps)
            if error is not ErrorCode.none:
                return error
        self.groups.delete(group_id)
        error = await self._written(group_id)
        if error is not ErrorCode.none:
            return map_store_error(error, commit=False)
        return ErrorCode.none

    async def _written(self, group_id: str) -> ErrorCode:
        """Writes what changed and waits for `group_id`'s records to be stored."""
        fut = self._persist().get(group_id)
        return ErrorCode.none if fut is None else await fut

    async def _delete_state(self, group_id: str, tid: uuid.UUID, name: str | None,
                            partitions: Iterable[int]) -> tuple[ErrorCode, str | None]:
        for p in partitions:
            r = await self.persister.delete(StateKey(group_id, tid, p))
            if r.error is not ErrorCode.none:
                return r.error, r.message
            if name is not None:
                self._drop(group_id, name, p)
        return ErrorCode.none, None

    def _drop(self, group_id: str, topic: str, partition: int) -> None:
        """A share-partition loaded here whose state was replaced: loaded again at next use."""
        key = (group_id, topic, partition)
        self._retire(key)
        self.partitions.pop(key, None)
        self.loaded_at.pop(key, None)


@dataclass(frozen=True, slots=True)
class OffsetsPartition:
    partition: int
    start_offset: int
    leader_epoch: int
    lag: int


@dataclass(frozen=True, slots=True)
class OffsetsTopic:
    name: str
    topic_id: uuid.UUID | None
    partitions: list[OffsetsPartition]


@dataclass(frozen=True, slots=True)
class AlteredTopic:
    name: str
    topic_id: uuid.UUID | None
    partitions: list[tuple[int, ErrorCode, str | None]]
