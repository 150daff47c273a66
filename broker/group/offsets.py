"""Offsets of classic and consumer groups (Kafka's OffsetMetadataManager): OffsetCommit,
OffsetFetch, OffsetDelete, mixed into GroupCoordinator; and how a failed write to
__consumer_offsets shows to clients. Nothing here moves a group between states."""

from __future__ import annotations

from collections.abc import Iterable

from kio.schema.errors import ErrorCode

from broker.coordinator.core import CoordinatorCore, WriteDone
from broker.group import records as rec
from broker.group.classic import (
    CONSUMER_PROTOCOL_TYPE,
    ClassicGroup,
    CommittedOffset,
    GroupState,
)
from broker.group.consumer import ConsumerGroup, compile_subscription
from broker.group.streams import StreamsGroup, topology_topics
from broker.group.types import (
    Effects,
    FetchedOffset,
    GroupConfig,
    OffsetCommitRequest,
    OffsetCommitResult,
    OffsetDeleteResult,
    OffsetFetchResult,
    OffsetsRecord,
    Token,
    TopicPartition,
    TxnOffsetCommitRequest,
    Write,
)

_COORDINATOR_UNAVAILABLE = {
    ErrorCode.unknown_topic_or_partition, ErrorCode.not_enough_replicas,
    ErrorCode.not_enough_replicas_after_append, ErrorCode.request_timed_out,
}
_NOT_COORDINATOR = {ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error,
                    ErrorCode.not_coordinator}
_TOO_LARGE = {ErrorCode.message_too_large, ErrorCode.record_list_too_large,
              ErrorCode.invalid_fetch_size}


def map_store_error(error: ErrorCode, *, commit: bool) -> ErrorCode:
    """Kafka's mapping of an append failure on __consumer_offsets to what the client sees."""
    if error in _COORDINATOR_UNAVAILABLE:
        return ErrorCode.coordinator_not_available
    if error in _NOT_COORDINATOR:
        return ErrorCode.not_coordinator
    if error in _TOO_LARGE:
        return ErrorCode.invalid_commit_offset_size if commit else ErrorCode.unknown_server_error
    if commit:
        return error
    return ErrorCode.unknown_server_error


class GroupOffsets(CoordinatorCore[Effects]):
    """Offset commits, fetches and deletes of one coordinator partition (mixed into
    GroupCoordinator, which provides the groups)."""

    config: GroupConfig
    groups: dict[str, ClassicGroup]
    pending_txn_offsets: dict[int, dict[tuple[str, TopicPartition], CommittedOffset]]
    consumer_groups: dict[str, ConsumerGroup]
    streams_groups: dict[str, StreamsGroup]

    def _epoch_group(self, group_id: str) -> ConsumerGroup | StreamsGroup | None:
        """A group whose members commit with member epochs (KIP-848, KIP-1071)."""
        return self.consumer_groups.get(group_id) or self.streams_groups.get(group_id)

    def _write(self, records: Iterable[OffsetsRecord], done: WriteDone,
               producer: tuple[int, int] | None = None) -> None:
        """Appends `records` to this partition (a transactional batch of `producer`, a
        (producer id, epoch), when given); `done` hears the outcome."""
        pid, epoch = producer if producer is not None else (-1, -1)
        self._emit(lambda write_id: Write(write_id, tuple(records), pid, epoch), done)

    def _offsets_holder(self, group_id: str,
                        ) -> ClassicGroup | ConsumerGroup | StreamsGroup | None:
        raise NotImplementedError

    def _validate_member(
        self, g: ClassicGroup | None, member_id: str, instance_id: str | None,
    ) -> ErrorCode | None:
        raise NotImplementedError

    # ---- OffsetCommit ---------------------------------------------------------------------------

    def commit_offsets(self, token: Token, req: OffsetCommitRequest, now_ms: int) -> Effects:
        keys = [(p.topic, p.partition) for p in req.partitions]
        cg = self._epoch_group(req.group_id)
        g: ClassicGroup | ConsumerGroup | StreamsGroup | None = self.groups.get(req.group_id)
        error: ErrorCode | None = None
        if cg is not None:
            g = cg
            error = self._validate_consumer_commit(cg, req)
        elif g is None:
            if req.generation_id < 0:
                g = self.groups[req.group_id] = ClassicGroup(req.group_id, state_timestamp=now_ms)
            else:
                error = ErrorCode.illegal_generation
        else:
            assert isinstance(g, ClassicGroup)
            error = self._validate_commit(g, req, now_ms)
        if error is not None or g is None:
            err = error or ErrorCode.unknown_server_error
            self._reply(token, OffsetCommitResult(tuple((k, err) for k in keys)))
            return self._take()
        results: dict[TopicPartition, ErrorCode] = {}
        accepted: list[tuple[TopicPartition, CommittedOffset]] = []
        for p in req.partitions:
            meta = p.metadata or ""
            if len(meta.encode()) > self.config.offset_metadata_max_bytes:
                results[(p.topic, p.partition)] = ErrorCode.offset_metadata_too_large
                continue
            expire = now_ms + req.retention_time_ms if req.retention_time_ms >= 0 else -1
            committed_at = now_ms if p.commit_timestamp < 0 else p.commit_timestamp
            accepted.append(((p.topic, p.partition),
                             CommittedOffset(p.offset, p.leader_epoch, meta, committed_at,
                                             expire)))
        if not accepted:
            self._reply(token, OffsetCommitResult(tuple((k, results[k]) for k in keys)))
            self._drop_if_unused(g)
            return self._take()
        for tp, _ in accepted:
            g.pending_commits[tp] = g.pending_commits.get(tp, 0) + 1
        group = g

        def stored(error: ErrorCode, now: int) -> None:
            for tp, committed in accepted:
                left = group.pending_commits.get(tp, 1) - 1
                if left:
                    group.pending_commits[tp] = left
                else:
                    group.pending_commits.pop(tp, None)
                if error is ErrorCode.none and not _is_dead(group):
                    group.offsets[tp] = committed
                results[tp] = map_store_error(error, commit=True)
            self._reply(token, OffsetCommitResult(tuple((k, results[k]) for k in keys)))
            if error is not ErrorCode.none:
                self._drop_if_unused(group)

        self._write([self._offset_record(req.group_id, tp, c) for tp, c in accepted], stored)
        return self._take()

    @staticmethod
    def _validate_consumer_commit(cg: ConsumerGroup | StreamsGroup, req: OffsetCommitRequest,
                                  ) -> ErrorCode | None:
        """KIP-848: the commit carries the member epoch; -1 only while the group is empty."""
        if req.generation_id < 0 and not req.member_id:
            return ErrorCode.unknown_member_id if cg.members else None
        member = cg.members.get(req.member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if req.generation_id != member.member_epoch:
            return ErrorCode.stale_member_epoch
        return None

    def _validate_commit(
        self, g: ClassicGroup, req: OffsetCommitRequest, now_ms: int,
    ) -> ErrorCode | None:
        if g.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        if req.generation_id < 0 and g.state is GroupState.EMPTY:
            return None
        error = self._validate_member(g, req.member_id, req.group_instance_id)
        if error is not None:
            return error
        if req.generation_id != g.generation_id:
            return ErrorCode.illegal_generation
        if g.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        member = g.members[req.member_id]
        member.heartbeat_deadline = now_ms + member.session_timeout_ms
        return None

    @staticmethod
    def _offset_record(group_id: str, tp: TopicPartition, c: CommittedOffset) -> OffsetsRecord:
        return OffsetsRecord(
            rec.encode_offset_commit_key(group_id, tp[0], tp[1]),
            rec.encode_offset_commit_value(rec.OffsetCommitValue(
                c.offset, c.leader_epoch, c.metadata, c.commit_timestamp, c.expire_timestamp)),
        )

    def _drop_if_unused(self, g: ClassicGroup | ConsumerGroup | StreamsGroup) -> None:
        if isinstance(g, (ConsumerGroup, StreamsGroup)):
            return
        if (g.state is GroupState.EMPTY and g.generation_id == 0 and not g.members
                and not g.offsets and not g.pending_commits and not g.pending_members
                and g.protocol_type is None and self.groups.get(g.group_id) is g):
            del self.groups[g.group_id]

    # ---- TxnOffsetCommit ------------------------------------------------------------------------
    # Transactional offsets are written as the producer's transactional batch; once replicated
    # they wait in pending_txn_offsets (per producer id) until the transaction's marker reaches
    # this partition: COMMIT makes them the group's offsets, ABORT drops them
    # (complete_txn_offsets, called when the WriteTxnMarkers append ends, and on replay).

    def commit_txn_offsets(self, token: Token, req: TxnOffsetCommitRequest,
                           now_ms: int) -> Effects:
        keys = [(p.topic, p.partition) for p in req.partitions]
        error = self._validate_txn_commit(req, now_ms)
        if error is not None:
            self._reply(token, OffsetCommitResult(tuple((k, error) for k in keys)))
            return self._take()
        results: dict[TopicPartition, ErrorCode] = {}
        accepted: list[tuple[TopicPartition, CommittedOffset]] = []
        for p in req.partitions:
            meta = p.metadata or ""
            if len(meta.encode()) > self.config.offset_metadata_max_bytes:
                results[(p.topic, p.partition)] = ErrorCode.offset_metadata_too_large
                continue
            accepted.append(((p.topic, p.partition),
                             CommittedOffset(p.offset, p.leader_epoch, meta, now_ms, -1)))
        if not accepted:
            self._reply(token, OffsetCommitResult(tuple((k, results[k]) for k in keys)))
            return self._take()

        def stored(error: ErrorCode, now: int) -> None:
            if error is ErrorCode.none:
                pending = self.pending_txn_offsets.setdefault(req.producer_id, {})
                for tp, committed in accepted:
                    pending[(req.group_id, tp)] = committed
            for tp, _ in accepted:
                results[tp] = map_store_error(error, commit=True)
            self._reply(token, OffsetCommitResult(tuple((k, results[k]) for k in keys)))

        self._write([self._offset_record(req.group_id, tp, c) for tp, c in accepted], stored,
                    producer=(req.producer_id, req.producer_epoch))
        return self._take()

    def _validate_txn_commit(self, req: TxnOffsetCommitRequest, now_ms: int,
                             ) -> ErrorCode | None:
        cg = self._epoch_group(req.group_id)
        if cg is not None:
            if not req.member_id or req.generation_id < 0:
                return None
            member = cg.members.get(req.member_id)
            if member is None:
                return ErrorCode.unknown_member_id
            if req.generation_id != member.member_epoch:
                return ErrorCode.illegal_generation
            return None
        g = self.groups.get(req.group_id)
        if g is None:  # as an empty group: no members, generation 0 (Kafka's checks)
            if req.member_id:
                return ErrorCode.unknown_member_id
            if req.generation_id > 0:
                return ErrorCode.illegal_generation
            return None
        if g.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        if req.member_id:
            error = self._validate_member(g, req.member_id, req.group_instance_id)
            if error is not None:
                return error
        if req.generation_id >= 0 and req.generation_id != g.generation_id:
            return ErrorCode.illegal_generation
        return None

    def replay_txn_offset(self, producer_id: int, key: bytes, value: bytes | None) -> None:
        """A record of a transactional batch (loading): pending until its marker."""
        k = rec.decode_key(key)
        if not isinstance(k, rec.OffsetCommitKey) or value is None:
            return
        v = rec.decode_offset_commit_value(value)
        self.pending_txn_offsets.setdefault(producer_id, {})[(k.group, (k.topic, k.partition))] = (
            CommittedOffset(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                            v.expire_timestamp))

    def complete_txn_offsets(self, producer_id: int, committed: bool) -> int:
        """The producer's transaction ended (its marker is in this partition): its pending
        offsets become the groups' offsets (commit) or are dropped (abort). How many."""
        pending = self.pending_txn_offsets.pop(producer_id, None)
        if not pending:
            return 0
        if committed:
            for (group_id, tp), c in pending.items():
                holder = self._offsets_holder(group_id)
                if holder is None:
                    holder = self.groups[group_id] = ClassicGroup(group_id)
                if _is_dead(holder):
                    continue
                holder.offsets[tp] = c
        return len(pending)

    def has_pending_txn_offset(self, group_id: str, tp: TopicPartition) -> bool:
        return any((group_id, tp) in offs for offs in self.pending_txn_offsets.values())

    # ---- OffsetFetch ---------------------------------------------------------------------------

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None,
        member_id: str | None = None, member_epoch: int = -1, require_stable: bool = False,
    ) -> OffsetFetchResult:
        """`require_stable` (OffsetFetch v7+, KIP-447): a partition with a transactional
        offset still pending gets UNSTABLE_OFFSET_COMMIT, which clients retry."""
        result = self._fetch_offsets(group_id, partitions, member_id, member_epoch)
        if not require_stable or not self.pending_txn_offsets or result.error is not ErrorCode.none:
            return result
        return OffsetFetchResult(result.error, tuple(
            FetchedOffset(f.topic, f.partition, -1, -1, "", ErrorCode.unstable_offset_commit)
            if self.has_pending_txn_offset(group_id, (f.topic, f.partition)) else f
            for f in result.partitions))

    def _fetch_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None,
        member_id: str | None = None, member_epoch: int = -1,
    ) -> OffsetFetchResult:
        cg = self._epoch_group(group_id)
        if cg is not None and member_epoch >= 0:
            member = cg.members.get(member_id or "")
            if member is None:
                return OffsetFetchResult(ErrorCode.unknown_member_id)
            if member.member_epoch != member_epoch:
                return OffsetFetchResult(ErrorCode.stale_member_epoch)
        g = self._offsets_holder(group_id)
        offsets = g.offsets if g is not None else {}
        if partitions is None:
            return OffsetFetchResult(ErrorCode.none, tuple(
                FetchedOffset(t, p, c.offset, c.leader_epoch, c.metadata)
                for (t, p), c in sorted(offsets.items())
            ))
        out = []
        for t, p in partitions:
            c = offsets.get((t, p))
            if c is None:
                out.append(FetchedOffset(t, p, -1, -1, ""))
            else:
                out.append(FetchedOffset(t, p, c.offset, c.leader_epoch, c.metadata))
        return OffsetFetchResult(ErrorCode.none, tuple(out))

    # ---- OffsetDelete ---------------------------------------------------------------------------

    def delete_offsets(
        self, token: Token, group_id: str, partitions: Iterable[TopicPartition], now_ms: int,
    ) -> Effects:
        keys = list(partitions)
        cg = self._epoch_group(group_id)
        g: ClassicGroup | ConsumerGroup | StreamsGroup | None = cg or self.groups.get(group_id)
        if g is None or _is_dead(g):
            self._reply(token, OffsetDeleteResult(ErrorCode.group_id_not_found))
            return self._take()
        subscribed: set[str] = set()
        if isinstance(g, ConsumerGroup):
            subscribed = _consumer_subscribed(g)
        elif isinstance(g, StreamsGroup):
            if g.members and g.topology is not None:
                subscribed = set(topology_topics(g.topology))
        elif g.state is not GroupState.EMPTY:
            if g.protocol_type != CONSUMER_PROTOCOL_TYPE:
                self._reply(token, OffsetDeleteResult(ErrorCode.non_empty_group))
                return self._take()
            subscribed = g.subscribed_topics() or set()
        results: dict[TopicPartition, ErrorCode] = {}
        doomed: list[TopicPartition] = []
        for tp in keys:
            if tp[0] in subscribed:
                results[tp] = ErrorCode.group_subscribed_to_topic
            else:
                results[tp] = ErrorCode.none
                if tp in g.offsets:
                    doomed.append(tp)
        if not doomed:
            self._reply(token, OffsetDeleteResult(ErrorCode.none,
                                                  tuple((k, results[k]) for k in keys)))
            return self._take()

        def stored(error: ErrorCode, now: int) -> None:
            if error is not ErrorCode.none:
                mapped = map_store_error(error, commit=False)
                self._reply(token, OffsetDeleteResult(mapped))
                return
            for tp in doomed:
                g.offsets.pop(tp, None)
            self._reply(token, OffsetDeleteResult(ErrorCode.none,
                                                  tuple((k, results[k]) for k in keys)))

        self._write([OffsetsRecord(rec.encode_offset_commit_key(group_id, t, p), None)
                     for t, p in doomed], stored)
        return self._take()


def _is_dead(g: ClassicGroup | ConsumerGroup | StreamsGroup) -> bool:
    return g.dead if isinstance(g, (ConsumerGroup, StreamsGroup)) \
        else g.state is GroupState.DEAD


def _consumer_subscribed(cg: ConsumerGroup) -> set[str]:
    """The topics the group's current members subscribe to, as Kafka's
    ModernGroup.isSubscribedToTopic sees them: each member's names, and the topics its regex
    matched when the group last resolved subscriptions (the metadata fingerprint). The
    fingerprint alone is not enough: it keeps a departed member's topics until the next
    heartbeat recomputes it, and an empty group has no subscriptions at all."""
    names: set[str] = set()
    resolved = [name for name, _, _ in cg.metadata_fingerprint]
    for m in cg.members.values():
        names |= set(m.subscribed_names)
        if m.subscribed_regex:
            pattern = compile_subscription(m.subscribed_regex)
            if pattern is not None:
                names |= {n for n in resolved if pattern.fullmatch(n)}
    return names
