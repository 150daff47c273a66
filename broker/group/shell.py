"""The group coordinator's service: the Kafka group APIs over the pure group coordinators.

One `GroupCoordinator` per __consumer_offsets partition this broker leads, run by the
coordinator runtime (broker/coordinator/runtime.py: loading on leadership, with
COORDINATOR_LOAD_IN_PROGRESS until the load ends, unloading with NOT_COORDINATOR, the tick
loop, acks=all writes, so commits are acknowledged only once replicated, routing, and
creating the topic the first time FindCoordinator needs it). What is the group
coordinator's own stays here: its APIs, how __consumer_offsets batches replay (transactional
offsets waiting for their marker) and how its writes are batched (TxnOffsetCommit's
producer fields), and the markers that reach a partition while it loads.

Handlers reach the service as `node.group_coordinator`.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

import structlog
from kio.schema.errors import ErrorCode

from broker.coordinator.runtime import CoordinatorRuntime
from broker.coordinator.services import CoordinatorNode
from broker.errors import KafkaError
from broker.group.consumer import (
    ConsumerGroupDescription,
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResult,
)
from broker.group.coordinator import GroupCoordinator
from broker.group.records import OFFSETS_TOPIC
from broker.group.streams import (
    STALE_TOPOLOGY,
    StreamsGroupDescription,
    StreamsHeartbeatRequest,
    StreamsHeartbeatResult,
)
from broker.group.streams_topology_description import (
    AVAILABLE,
    NOT_STORED,
    InMemoryTopologyDescriptionPlugin,
    InvalidDescription,
    SolicitationBackoff,
    TopologyDescription,
    should_solicit,
)
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
from broker.metadata.records import RESOURCE_GROUP
from broker.protocol.records import (
    BatchHeader,
    Record,
    build_batch,
    decode_records,
    iter_batch_headers,
    whole_batches_length,
)

log = structlog.get_logger(__name__)

GROUP_KEY_TYPE = 0
SHARE_KEY_TYPE = 2  # KIP-932's share coordinator ("group:topicId:partition")


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


class GroupNode(Protocol):
    """A node's group coordinator, as the handlers reach it (None until the broker runs
    one)."""

    @property
    def group_coordinator(self) -> GroupCoordinatorService | None: ...


def on_txn_marker_written(node: GroupNode, topic: str, partition: int, producer_id: int,
                          committed: bool) -> None:
    """The hook for WriteTxnMarkers: call it once a marker is appended (and replicated) to
    a partition this broker leads. For a __consumer_offsets partition, the producer's
    transactional offsets there are materialized (commit) or dropped (abort); other topics
    are ignored."""
    if topic != OFFSETS_TOPIC:
        return
    service = node.group_coordinator
    if service is not None:
        service.complete_txn_offsets(partition, producer_id, committed)


def service_of(node: GroupNode) -> GroupCoordinatorService:
    service = node.group_coordinator
    if service is None:
        raise KafkaError(ErrorCode.coordinator_not_available, "group coordinator not started")
    return service


class GroupCoordinatorService:
    """The group coordinator's service: the Kafka group APIs over the cores that
    broker/coordinator/runtime.py runs, one per __consumer_offsets partition led here."""

    def __init__(
        self, node: CoordinatorNode, *, rng: random.Random | None = None,
        tick_interval_s: float = 0.1,
        share_records_loaded: Callable[[], object] | None = None,
    ) -> None:
        """`share_records_loaded`: called when a loaded partition held share-group records,
        which the node's share service takes (broker/share/shell.py)."""
        self.node = node
        self._share_records_loaded = share_records_loaded
        self.config = GroupConfig.from_node_config(node.config)
        self.rng = rng or random.Random()
        # KIP-1331: the topology description plugin, when configured (only Kafka's in-memory
        # one can be: broker/config/definitions.py), and its per-group solicitation back-off
        self.topology_descriptions = (
            InMemoryTopologyDescriptionPlugin()
            if node.config.get("group.streams.topology.description.plugin.class") else None)
        self.description_backoff = SolicitationBackoff(self.rng)
        # transaction markers that reached a partition while it was loading (the load may
        # have read the log before they were appended): applied once it is loaded
        self._deferred_markers: dict[int, list[tuple[int, bool]]] = {}
        self.runtime: CoordinatorRuntime[GroupCoordinator] = CoordinatorRuntime(
            node, self, name="group", topic=OFFSETS_TOPIC,
            partitions_key="offsets.topic.num.partitions", topic_log_name="offsets_topic",
            write_timeout_ms=int(node.config["offsets.commit.timeout.ms"]),
            tick_interval_s=tick_interval_s)

    @property
    def coordinators(self) -> dict[int, GroupCoordinator]:
        """The cores loaded here, by __consumer_offsets partition."""
        return self.runtime.coordinators

    def start(self) -> None:
        """Subscribe to metadata and start the tick loop (inside the running event loop)."""
        self.runtime.start()

    async def stop(self) -> None:
        await self.runtime.stop()

    # ---- the runtime's hooks (CoordinatorShards) -----------------------------------------

    def new_coordinator(self, partition: int, epoch: int, now_ms: int) -> GroupCoordinator:
        return GroupCoordinator(self.config, self.rng, now_ms, self.group_configs)

    def group_configs(self, group_id: str) -> Mapping[str, str]:
        """A group's dynamic configs (GROUP config resources) in this node's metadata image."""
        configs: Mapping[str, str] = self.node.metadata.configs.get((RESOURCE_GROUP, group_id),
                                                                    {})
        return configs

    def replay(self, partition: int, coord: GroupCoordinator, plog: Any, offset: int,
               upto: int) -> int:
        count = 0
        for item in read_batches(plog, offset, upto):
            try:
                count += replay_batch(coord, *item)
            except KafkaError as exc:
                log.warning("group_record_unreadable", partition=partition,
                            offset=item[0].base_offset, error=str(exc))
        return count

    def loaded(self, partition: int, coord: GroupCoordinator, now_ms: int) -> None:
        coord.finish_loading(now_ms)
        image = self.node.metadata

        def partitions_of(name: str) -> int | None:
            t = image.topic(name)
            return None if t is None else int(t.num_partitions)

        coord.configure_loaded_streams_groups(partitions_of)
        if coord.share_records and self._share_records_loaded is not None:
            # share groups were loaded: the share service (made on first use) takes them,
            # so that ListGroups and DescribeShareGroupOffsets see them before any heartbeat
            self._share_records_loaded()
        for producer_id, committed in self._deferred_markers.pop(partition, []):
            coord.complete_txn_offsets(producer_id, committed)

    def load_abandoned(self, partition: int) -> None:
        self._deferred_markers.pop(partition, None)

    def unloaded(self, partition: int, coord: GroupCoordinator, now_ms: int) -> Effects:
        return coord.unload(now_ms)

    def log_counts(self, coord: GroupCoordinator) -> dict[str, int]:
        return {"groups": len(coord.groups) + len(coord.consumer_groups)
                + len(coord.streams_groups)}

    def record_batch(self, partition: int, write: Write, now_ms: int) -> bytes:
        return build_batch(
            [Record(timestamp=now_ms, key=r.key, value=r.value) for r in write.records],
            producer_id=write.producer_id, producer_epoch=write.producer_epoch,
            base_sequence=self._next_sequence(partition, write),
            is_transactional=write.producer_id >= 0)

    def more_effects(self, partition: int, coord: GroupCoordinator, fx: Effects) -> None:
        return None

    def new_topic(self, live_brokers: int) -> tuple[int, int, dict[str, str]]:
        cfg = self.node.config
        wanted_rf = int(cfg["offsets.topic.replication.factor"])
        rf = min(wanted_rf, live_brokers)
        if rf < wanted_rf:
            log.warning("offsets_topic_replication_factor_lowered", wanted=wanted_rf,
                        used=rf, live_brokers=live_brokers)
        return int(cfg["offsets.topic.num.partitions"]), rf, {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": str(cfg["offsets.topic.segment.bytes"]),
        }

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
        return await self.runtime.call(group_id, call)

    # ---- routing --------------------------------------------------------------------------

    def partition_count(self) -> int:
        return self.runtime.partition_count()

    def partition_of(self, group_id: str) -> int:
        return self.runtime.partition_of(group_id)

    def coordinator_for(self, group_id: str) -> tuple[int, GroupCoordinator]:
        return self.runtime.coordinator_for(group_id)

    # ---- FindCoordinator --------------------------------------------------------------------

    async def find_coordinator(
        self, key: str, key_type: int, listener_name: str,
    ) -> tuple[ErrorCode, int, str, int, str | None]:
        """(error, node id, host, port, message) of the coordinator of group `key`
        (transactional ids are broker/txn's, share-partition keys broker/share's: FindCoordinator
        sends key types 1 and 2 there)."""
        if key_type != GROUP_KEY_TYPE:
            return ErrorCode.invalid_request, -1, "", -1, f"key type {key_type}"
        return await self.runtime.locate(key, listener_name)

    async def ensure_offsets_topic(self) -> ErrorCode:
        return await self.runtime.ensure_topic()

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
        return coord.heartbeat(req, self.runtime.now())

    def leave_group(self, group_id: str, members: Iterable[LeaveMember]) -> LeaveGroupResult:
        try:
            p, coord = self.coordinator_for(group_id)
        except KafkaError as exc:
            return LeaveGroupResult(exc.error_code)
        result, fx = coord.leave_group(group_id, members, self.runtime.now())
        self.runtime.dispatch(p, coord, fx)
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
            if partition in self.runtime.loading:
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
        error = ErrorCode.coordinator_load_in_progress if self.runtime.loading else ErrorCode.none
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
        for gid, error in out.items():
            # as Kafka's DeleteGroups: the plugin's description of a deleted group goes too
            if error is ErrorCode.none and self.topology_descriptions is not None:
                self.topology_descriptions.delete_topology(gid)
                self.description_backoff.clear_group(gid)
        return out

    # ---- KIP-848 -----------------------------------------------------------------------------

    def consumer_group_heartbeat(self, req: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResult:
        try:
            p, coord = self.coordinator_for(req.group_id)
        except KafkaError as exc:
            return ConsumerHeartbeatResult(exc.error_code, member_id=req.member_id or None)
        result = coord.consumer_heartbeat(req, self.node.metadata, self.runtime.now())
        self.runtime.dispatch(p, coord, coord.take_effects())
        return result

    def consumer_group_describe(
        self, group_id: str,
    ) -> tuple[ErrorCode, ConsumerGroupDescription | None]:
        try:
            _, coord = self.coordinator_for(group_id)
        except KafkaError as exc:
            return exc.error_code, None
        return ErrorCode.none, coord.describe_consumer_group(group_id, self.node.metadata)

    # ---- KIP-1071 ----------------------------------------------------------------------------

    def streams_group_heartbeat(self, req: StreamsHeartbeatRequest) -> StreamsHeartbeatResult:
        try:
            p, coord = self.coordinator_for(req.group_id)
        except KafkaError as exc:
            return StreamsHeartbeatResult(exc.error_code, member_id=req.member_id)
        image = self.node.metadata

        def partitions_of(name: str) -> int | None:
            t = image.topic(name)
            return None if t is None else int(t.num_partitions)

        result = coord.streams_heartbeat(req, partitions_of, self.runtime.now())
        self.runtime.dispatch(p, coord, coord.take_effects())
        return result

    def streams_group_describe(
        self, group_id: str,
    ) -> tuple[ErrorCode, StreamsGroupDescription | None]:
        try:
            _, coord = self.coordinator_for(group_id)
        except KafkaError as exc:
            return exc.error_code, None
        return ErrorCode.none, coord.describe_streams_group(group_id)

    # ---- KIP-1331 topology descriptions ---------------------------------------------------

    def streams_topology_description_required(self, group_id: str, member_epoch: int,
                                              result: StreamsHeartbeatResult) -> bool:
        """Whether a v1 heartbeat's answer asks this member for the group's topology
        description (Kafka's maybeSetTopologyDescriptionRequired); asking opens the group's
        back-off window."""
        if (self.topology_descriptions is None or member_epoch < 0
                or result.error is not ErrorCode.none):
            return False
        try:
            _, coord = self.coordinator_for(group_id)
        except KafkaError:
            return False
        g = coord.streams_groups.get(group_id)
        if g is None or not should_solicit(
                topology_epoch=None if g.topology is None else g.topology.epoch,
                stored_epoch=g.stored_description_epoch,
                failed_epoch=g.failed_description_epoch,
                stale_topology=any(c == STALE_TOPOLOGY for c, _ in result.status or ())):
            return False
        assert g.topology is not None
        return self.description_backoff.arm_if_not_active(group_id, g.topology.epoch,
                                                          self.runtime.now())

    def streams_group_topology_description_update(
        self, group_id: str, member_id: str, topology_epoch: int,
        description: Callable[[], TopologyDescription],
    ) -> tuple[ErrorCode, str | None]:
        """StreamsGroupTopologyDescriptionUpdate: check the member and epoch, convert the
        description (INVALID_REQUEST when malformed), store it in the plugin and record the
        stored epoch in the group's metadata record."""
        plugin = self.topology_descriptions
        if plugin is None:
            return (ErrorCode.unsupported_version,
                    "The broker has no streams group topology description plugin configured.")
        if not member_id:
            return ErrorCode.invalid_request, "MemberId can't be empty."
        if not group_id:
            return ErrorCode.invalid_request, "GroupId can't be empty."
        try:
            p, coord = self.coordinator_for(group_id)
        except KafkaError as exc:
            return exc.error_code, None
        error, message = coord.check_description_push(group_id, member_id, topology_epoch)
        if error is not ErrorCode.none:
            return error, message
        try:
            converted = description()
        except InvalidDescription as exc:
            return ErrorCode.invalid_request, str(exc)
        plugin.set_topology(group_id, topology_epoch, converted)
        coord.record_description_push(group_id, topology_epoch, stored=True)
        self.runtime.dispatch(p, coord, coord.take_effects())
        self.description_backoff.clear(group_id, topology_epoch)
        return ErrorCode.none, None

    def streams_topology_description(
        self, desc: StreamsGroupDescription,
    ) -> tuple[int, TopologyDescription | None]:
        """StreamsGroupDescribe v1's (TopologyDescriptionStatus, TopologyDescription) of a
        described group whose client asked for it."""
        plugin = self.topology_descriptions
        if (plugin is None or desc.topology is None
                or desc.stored_description_epoch != desc.topology.epoch):
            return NOT_STORED, None
        stored = plugin.get_topology(desc.group_id, desc.topology.epoch)
        return (NOT_STORED, None) if stored is None else (AVAILABLE, stored)

    def is_classic_group(self, group_id: str) -> bool:
        """A classic group of that id lives here (ConsumerGroupDescribe says 'is not a
        consumer group' for it, and 'not found' for an unknown id, as Kafka does)."""
        try:
            _, coord = self.coordinator_for(group_id)
        except KafkaError:
            return False
        return group_id in coord.groups
