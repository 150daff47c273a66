"""Share group membership (KIP-932's ShareGroupHeartbeat), pure: members, epochs and the
assignment, given the topics' ids and partition counts and `now_ms`.

A member joins with member epoch 0 (its own member id, a UUID the client made, and its
subscribed topic names), heartbeats with its current epoch and leaves with -1. Every change
of the members or their subscriptions, or of a subscribed topic's partitions, bumps the group
epoch and recomputes the target assignment with Kafka's simple share assignor: each
subscribed partition goes to at least one member subscribed to its topic, and when a topic
has fewer partitions than members, partitions are shared, so every member gets one (share
partitions need no revocation, so a member takes its new assignment and the group epoch at
its next heartbeat). A member not heard from for the session timeout is removed.

Assignment batching (Kafka 4.4's share.assignment.interval.ms, else
group.share.assignment.interval.ms, 1000 ms): a group's first target is computed at once, a
later one only by a heartbeat at least the interval after the last was computed (kept as
AssignmentTimestamp in TargetAssignmentMetadata); until then the group epoch has moved but
members keep the last target, a new member has the assignment epoch and no partitions. No
timer runs for it, as in Kafka: the heartbeat that finds the interval passed computes it.

A group also remembers its initialized share-partitions, those with a state in the share
coordinator (assigned to a member once, or given a start offset by AlterShareGroupOffsets),
which DescribeShareGroupOffsets lists and DeleteGroups / DeleteShareGroupOffsets delete.
Offsets are altered and deleted, and the group deleted, only while it has no members
(NON_EMPTY_GROUP otherwise); an unknown group is GROUP_ID_NOT_FOUND, except that altering
offsets creates it, as for consumer groups.

Persistence: a group's state is Kafka 4.4's share-group records in __consumer_offsets
(broker/group/records.py: ShareGroupMetadata, MemberMetadata, TargetAssignmentMetadata and
Member, CurrentMemberAssignment, StatePartitionMetadata). Every call that changes a group
marks it; `take_records` returns what changed since the last call, tombstones for what is
gone (all of a deleted group's records), and the shell writes them. A coordinator that loads
the partition replays them (`replay`, then `finish_loading`), so the group keeps its epochs,
members, assignments and initialized partitions across a restart or a move; members' session
timers start again at load. The MetadataHash written is Skiff's (`topics_hash`): a group
whose subscribed topics changed while it was not loaded is assigned again. As for consumer
groups, a heartbeat is answered without waiting for the write; keys of a failed write are
written again with the group's next records.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from broker.group import records as rec
from broker.group.types import OffsetsRecord, assignment_interval_elapsed

# topic name -> (topic id, partition count)
TopicsView = Mapping[str, tuple[uuid.UUID, int]]
Assignment = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]

LEAVE_EPOCH = -1


@dataclass(frozen=True, slots=True)
class ShareHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None
    subscribed_topic_names: tuple[str, ...] | None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class ShareHeartbeatResult:
    error: ErrorCode
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None
    error_message: str | None = None


@dataclass(slots=True)
class ShareMember:
    member_id: str
    member_epoch: int
    subscribed: tuple[str, ...]
    rack_id: str | None
    client_id: str
    client_host: str
    last_seen_ms: int
    assignment: Assignment = ()
    sent_epoch: int = -1  # the epoch whose assignment the member was last sent
    previous_member_epoch: int = -1


@dataclass(frozen=True, slots=True)
class ShareMemberDescription:
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    assignment: tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class ShareGroupDescription:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: tuple[ShareMemberDescription, ...]


@dataclass(frozen=True, slots=True)
class ShareGroupSettings:
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = 200
    assignment_interval_ms: int = 1000


ASSIGNOR_NAME = "simple"


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignment_timestamp: int = 0  # when the target was last computed (0: never)
    members: dict[str, ShareMember] = field(default_factory=dict)
    topics_seen: tuple[tuple[str, uuid.UUID, int], ...] = ()
    # the share-partitions with state in the share coordinator (Kafka's initialized
    # partitions of ShareGroupStatePartitionMetadata): assigned once, or altered offsets
    initialized: dict[uuid.UUID, set[int]] = field(default_factory=dict)
    # the share-group records last written (or replayed) for this group: key -> value
    persisted: dict[bytes, bytes] = field(default_factory=dict)
    metadata_hash: int = 0  # of topics_seen, as replayed from ShareGroupMetadata

    @property
    def state(self) -> str:
        return "Empty" if not self.members else "Stable"


def simple_assignment(members: Mapping[str, tuple[str, ...]],
                      topics: TopicsView) -> dict[str, dict[uuid.UUID, list[int]]]:
    """Kafka's simple share assignor (SimpleAssignor), for each topic over the members
    subscribed to it, in member-id order: with at least as many partitions as members,
    partition p goes to member p mod M; with more members than partitions, member m gets
    partition m mod P, so partitions are shared and every member gets one."""
    out: dict[str, dict[uuid.UUID, list[int]]] = {m: {} for m in members}
    for name in sorted({t for subs in members.values() for t in subs}):
        if name not in topics:
            continue
        topic_id, count = topics[name]
        subscribers = sorted(m for m, subs in members.items() if name in subs)
        if not subscribers or count <= 0:
            continue
        if count >= len(subscribers):
            for p in range(count):
                out[subscribers[p % len(subscribers)]].setdefault(topic_id, []).append(p)
        else:
            for i, m in enumerate(subscribers):
                out[m].setdefault(topic_id, []).append(i % count)
    return out


class ShareGroupCoordinator:
    """The share groups of one group coordinator, in memory."""

    def __init__(self, settings: ShareGroupSettings,
                 settings_of: Callable[[str], ShareGroupSettings] | None = None) -> None:
        """`settings_of(group id)`: a group's own settings (its GROUP configs over the
        node's); `settings` for every group without it."""
        self.settings = settings
        self.settings_of = settings_of or (lambda _group_id: settings)
        self.groups: dict[str, ShareGroup] = {}
        self.dirty: set[str] = set()  # groups whose records may have changed
        self.removed: dict[str, dict[bytes, bytes]] = {}  # deleted groups' persisted keys
        # target assignments computed, one per new group epoch (share-group-rebalance-count)
        self.rebalances = 0

    def heartbeat(self, req: ShareHeartbeatRequest, topics: TopicsView,
                  now_ms: int) -> tuple[ShareHeartbeatResult, list[str]]:
        """The answer, and the member ids that left the group by this call (expired or
        leaving), whose acquired records the share-partitions release."""
        left = self.expire(now_ms)
        if not req.member_id:
            return ShareHeartbeatResult(ErrorCode.invalid_request,
                                        error_message="MemberId can't be empty."), left
        group = self.groups.get(req.group_id)
        changed = False  # the group epoch moves once per heartbeat that changes something
        if req.member_epoch == LEAVE_EPOCH:
            if group is None or req.member_id not in group.members:
                return ShareHeartbeatResult(ErrorCode.unknown_member_id,
                                            member_id=req.member_id), left
            self._remove(group, req.member_id)
            self.dirty.add(group.group_id)
            left.append(req.member_id)
            return ShareHeartbeatResult(ErrorCode.none, member_id=req.member_id,
                                        member_epoch=LEAVE_EPOCH), left
        if req.member_epoch == 0:
            if not req.subscribed_topic_names:
                return ShareHeartbeatResult(
                    ErrorCode.invalid_request, member_id=req.member_id,
                    error_message="SubscribedTopicNames must be set in first request."), left
            if group is None:
                group = self.groups[req.group_id] = ShareGroup(req.group_id)
            member = group.members.get(req.member_id)
            if member is None:
                max_size = self.settings_of(req.group_id).max_size
                if len(group.members) >= max_size:
                    return ShareHeartbeatResult(
                        ErrorCode.group_max_size_reached, member_id=req.member_id,
                        error_message=f"The share group has reached its maximum capacity of "
                                      f"{max_size} members."), left
                member = ShareMember(req.member_id, 0, (), req.rack_id, req.client_id,
                                     req.client_host, now_ms)
                group.members[req.member_id] = member
                changed = True
            member.sent_epoch = -1  # a (re)join always gets the full assignment
        else:
            if group is None or req.member_id not in group.members:
                return ShareHeartbeatResult(
                    ErrorCode.unknown_member_id, member_id=req.member_id,
                    error_message=f"Member {req.member_id} is not a member of share group "
                                  f"{req.group_id}."), left
            member = group.members[req.member_id]
            if req.member_epoch != member.member_epoch:
                return ShareHeartbeatResult(
                    ErrorCode.fenced_member_epoch, member_id=req.member_id,
                    error_message=f"The share group member has a mismatched member epoch "
                                  f"{req.member_epoch} (expected {member.member_epoch})."), left
        member.last_seen_ms = now_ms
        if req.rack_id is not None and req.rack_id != member.rack_id:
            member.rack_id = req.rack_id
            self.dirty.add(group.group_id)
        names = req.subscribed_topic_names
        if names is not None and tuple(sorted(set(names))) != member.subscribed:
            member.subscribed = tuple(sorted(set(names)))
            changed = True
        self._maybe_assign(group, topics, changed, now_ms)
        assignment = None
        if (member.member_epoch != group.assignment_epoch
                or member.sent_epoch != member.member_epoch):
            if member.member_epoch != group.assignment_epoch:
                member.previous_member_epoch = member.member_epoch
                self.dirty.add(group.group_id)
            member.member_epoch = group.assignment_epoch
            member.sent_epoch = member.member_epoch
            assignment = member.assignment
        return ShareHeartbeatResult(
            ErrorCode.none, member_id=member.member_id, member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.settings_of(req.group_id).heartbeat_interval_ms,
            assignment=assignment), left

    def expire(self, now_ms: int) -> list[str]:
        """Removes members not heard from for the session timeout; their ids."""
        gone: list[str] = []
        for group in self.groups.values():
            timeout_ms = self.settings_of(group.group_id).session_timeout_ms
            for mid, m in list(group.members.items()):
                if now_ms - m.last_seen_ms >= timeout_ms:
                    self._remove(group, mid)
                    self.dirty.add(group.group_id)
                    gone.append(mid)
        return gone

    def describe(self, group_id: str, names: Mapping[uuid.UUID, str]
                 ) -> ShareGroupDescription | None:
        group = self.groups.get(group_id)
        if group is None:
            return None
        members = tuple(ShareMemberDescription(
            m.member_id, m.rack_id, m.member_epoch, m.client_id, m.client_host, m.subscribed,
            tuple((tid, names.get(tid, ""), ps) for tid, ps in m.assignment))
            for m in sorted(group.members.values(), key=lambda m: m.member_id))
        return ShareGroupDescription(group_id, group.state, group.group_epoch,
                                     group.assignment_epoch, ASSIGNOR_NAME, members)

    def initialized_partitions(self, group_id: str) -> dict[uuid.UUID, tuple[int, ...]]:
        group = self.groups.get(group_id)
        if group is None:
            return {}
        return {tid: tuple(sorted(ps)) for tid, ps in group.initialized.items() if ps}

    def check_empty(self, group_id: str, *, create: bool = False) -> tuple[ErrorCode, str | None]:
        """Whether offsets may be altered or deleted, or the group deleted: it exists
        (or `create`) and has no members."""
        group = self.groups.get(group_id)
        if group is None:
            if create:
                return ErrorCode.none, None
            return ErrorCode.group_id_not_found, f"Group {group_id} not found."
        if group.members:
            return ErrorCode.non_empty_group, f"Share group {group_id} is not empty."
        return ErrorCode.none, None

    def offsets_altered(self, group_id: str, partitions: Mapping[uuid.UUID, Iterable[int]]
                        ) -> None:
        """Start offsets were set for these partitions (the group is made if new)."""
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ShareGroup(group_id)
        for tid, ps in partitions.items():
            group.initialized.setdefault(tid, set()).update(ps)
        self.dirty.add(group_id)

    def offsets_deleted(self, group_id: str, topic_ids: Iterable[uuid.UUID]) -> None:
        group = self.groups.get(group_id)
        if group is not None:
            for tid in topic_ids:
                group.initialized.pop(tid, None)
            self.dirty.add(group_id)

    def delete(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        if group is not None:
            self.removed[group_id] = group.persisted
            self.dirty.add(group_id)

    def listed(self) -> list[tuple[str, str]]:
        """(group id, state) of every share group."""
        return [(g.group_id, g.state) for g in self.groups.values()]

    # ---- persistence ------------------------------------------------------------------------

    def take_records(self, names: Mapping[uuid.UUID, str]) -> dict[str, list[OffsetsRecord]]:
        """The records of each group changed since the last call, by group id: values that
        changed, tombstones for keys that are gone (every key of a deleted group). `names`:
        topic names by id, for ShareGroupStatePartitionMetadata."""
        out: dict[str, list[OffsetsRecord]] = {}
        for gid in sorted(self.dirty):
            group = self.groups.get(gid)
            # a group deleted and made again since the last call: its old keys count too
            old = self.removed.pop(gid, {})
            current: dict[bytes, bytes] = {}
            if group is not None:
                old.update(group.persisted)
                current = share_group_records(group, names)
            gone = sorted((k for k in old if k not in current), key=_tombstone_order)
            records = [OffsetsRecord(k, None) for k in gone]
            records += [OffsetsRecord(k, v) for k, v in current.items() if old.get(k) != v]
            if group is not None:
                group.persisted = current
            if records:
                out[gid] = records
        self.dirty.clear()
        return out

    def write_failed(self, group_id: str, records: Iterable[OffsetsRecord]) -> None:
        """A write of `take_records` did not reach the log: its keys go out again with the
        group's next records (or its tombstones, if the group is gone by then)."""
        group = self.groups.get(group_id)
        persisted = group.persisted if group is not None else self.removed.get(group_id)
        if persisted is None:
            if not any(r.value is None for r in records):
                return
            persisted = self.removed[group_id] = {}
        for r in records:
            persisted[r.key] = _UNWRITTEN
        self.dirty.add(group_id)

    def replay(self, key: rec.ShareGroupKey, value: bytes | None, raw_key: bytes) -> None:
        """Apply one share-group record while loading."""
        group = self.groups.get(key.group)
        t, mid = key.record_type, key.member_id
        if value is None:
            if group is None:
                return
            group.persisted.pop(raw_key, None)
            if t == rec.SHARE_GROUP_METADATA:
                del self.groups[key.group]
            elif t == rec.SHARE_GROUP_MEMBER_METADATA and mid is not None:
                group.members.pop(mid, None)
            elif t == rec.SHARE_GROUP_STATE_PARTITION_METADATA:
                group.initialized = {}
            return
        if group is None:
            group = self.groups[key.group] = ShareGroup(key.group)
        group.persisted[raw_key] = value
        if t == rec.SHARE_GROUP_METADATA:
            group.group_epoch, group.metadata_hash = rec.decode_share_group_metadata_value(value)
        elif t == rec.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA:
            group.assignment_epoch, group.assignment_timestamp = \
                rec.decode_target_assignment_metadata(
                    value, "ShareGroupTargetAssignmentMetadataValue")
        elif t == rec.SHARE_GROUP_STATE_PARTITION_METADATA:
            sv = rec.decode_share_group_state_partition_metadata_value(value)
            group.initialized = {}
            for tid, _name, ps in sv.initializing + sv.initialized:
                group.initialized.setdefault(tid, set()).update(ps)
        elif t == rec.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER:
            # checked, not kept: a member's assignment is its current one (no revocation)
            rec.decode_share_group_target_assignment_member_value(value)
        elif mid is not None:
            member = group.members.get(mid)
            if member is None:
                member = group.members[mid] = ShareMember(mid, 0, (), None, "", "", 0)
            if t == rec.SHARE_GROUP_MEMBER_METADATA:
                mv = rec.decode_share_group_member_metadata_value(value)
                member.rack_id, member.client_id = mv.rack_id, mv.client_id
                member.client_host = mv.client_host
                member.subscribed = tuple(sorted(set(mv.subscribed_topic_names)))
            else:
                cv = rec.decode_share_group_current_member_assignment_value(value)
                member.member_epoch = cv.member_epoch
                member.previous_member_epoch = cv.previous_member_epoch
                member.assignment = tuple(sorted(cv.assigned, key=lambda x: str(x[0])))

    def finish_loading(self, group_ids: Iterable[str], topics: TopicsView, now_ms: int) -> None:
        """After the last replayed record of these groups: members get a full session from
        now to heartbeat this coordinator, and a group whose subscribed topics are as its
        metadata hash says keeps its assignment (otherwise the next heartbeat makes one)."""
        for gid in group_ids:
            group = self.groups.get(gid)
            if group is None:
                continue
            seen = _topics_seen(group, topics)
            if topics_hash(seen) == group.metadata_hash:
                group.topics_seen = seen
            for m in group.members.values():
                m.last_seen_ms = now_ms
                m.sent_epoch = -1

    def unload(self, group_ids: Iterable[str]) -> None:
        """Forget these groups (their coordinator moved): their records stay in the log."""
        for gid in group_ids:
            self.groups.pop(gid, None)
            self.removed.pop(gid, None)
            self.dirty.discard(gid)

    # ---- internals ---------------------------------------------------------------------------

    def _remove(self, group: ShareGroup, member_id: str) -> None:
        if group.members.pop(member_id, None) is not None:
            group.group_epoch += 1

    def _maybe_assign(self, group: ShareGroup, topics: TopicsView, changed: bool,
                      now_ms: int) -> None:
        seen = _topics_seen(group, topics)
        if seen != group.topics_seen:
            group.topics_seen = seen
            changed = True
        if changed:
            group.group_epoch += 1
            self.dirty.add(group.group_id)
        if group.assignment_epoch == group.group_epoch:
            return
        if not assignment_interval_elapsed(
                group.assignment_timestamp,
                self.settings_of(group.group_id).assignment_interval_ms, now_ms):
            return  # batched: members keep the last target
        self.dirty.add(group.group_id)
        target = simple_assignment({m.member_id: m.subscribed for m in group.members.values()},
                                   topics)
        for mid, parts in target.items():
            for tid, ps in parts.items():
                group.initialized.setdefault(tid, set()).update(ps)
            group.members[mid].assignment = tuple(
                (tid, tuple(sorted(ps)))
                for tid, ps in sorted(parts.items(), key=lambda x: str(x[0])))
        group.assignment_epoch = group.group_epoch
        group.assignment_timestamp = now_ms
        self.rebalances += 1


# ---- records ---------------------------------------------------------------------------------

_UNWRITTEN = b""  # a persisted value no encoding equals: the key is written again
# tombstones in Kafka's order: member records, then the group's, ShareGroupMetadata last
_TOMBSTONE_ORDER = {rec.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT: 0,
                    rec.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER: 1,
                    rec.SHARE_GROUP_MEMBER_METADATA: 2,
                    rec.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA: 3,
                    rec.SHARE_GROUP_STATE_PARTITION_METADATA: 4,
                    rec.SHARE_GROUP_METADATA: 5}
_STABLE = 0  # Kafka's MemberState.STABLE: share members never revoke


def _topics_seen(group: ShareGroup, topics: TopicsView) -> tuple[tuple[str, uuid.UUID, int], ...]:
    """(name, id, partition count) of each topic a member subscribes to that exists."""
    subscribed = {t for m in group.members.values() for t in m.subscribed}
    return tuple(sorted((t, *topics[t]) for t in subscribed if t in topics))


def topics_hash(seen: tuple[tuple[str, uuid.UUID, int], ...]) -> int:
    """ShareGroupMetadata's MetadataHash as Skiff computes it: the first 8 bytes of a
    SHA-256 of the subscribed topics (Kafka hashes its own way; a hash that does not match
    only makes the coordinator assign again). Never 0, which means "none"."""
    h = hashlib.sha256()
    for name, topic_id, count in seen:
        h.update(f"{name}\0{topic_id}\0{count}\0".encode())
    return int.from_bytes(h.digest()[:8], "big", signed=True) or 1


def _tombstone_order(key: bytes) -> tuple[int, bytes]:
    return _TOMBSTONE_ORDER.get(int.from_bytes(key[:2], "big", signed=True), 0), key


def share_group_records(group: ShareGroup, names: Mapping[uuid.UUID, str]
                        ) -> dict[bytes, bytes]:
    """Every share-group record that describes `group` now, key -> value, in Kafka's write
    order (member metadata, group metadata, targets, current assignments)."""
    gid = group.group_id
    out: dict[bytes, bytes] = {}
    members = sorted(group.members.values(), key=lambda m: m.member_id)
    for m in members:
        out[rec.encode_share_group_key(rec.SHARE_GROUP_MEMBER_METADATA, gid, m.member_id)] = \
            rec.encode_share_group_member_metadata_value(rec.ShareGroupMemberMetadataValue(
                m.rack_id, m.client_id, m.client_host, m.subscribed))
    out[rec.encode_share_group_key(rec.SHARE_GROUP_METADATA, gid)] = \
        rec.encode_share_group_metadata_value(group.group_epoch, topics_hash(group.topics_seen))
    for m in members:
        out[rec.encode_share_group_key(rec.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, gid,
                                       m.member_id)] = \
            rec.encode_share_group_target_assignment_member_value(m.assignment)
    out[rec.encode_share_group_key(rec.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, gid)] = \
        rec.encode_share_group_target_assignment_metadata_value(group.assignment_epoch,
                                                                group.assignment_timestamp)
    for m in members:
        out[rec.encode_share_group_key(rec.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, gid,
                                       m.member_id)] = \
            rec.encode_share_group_current_member_assignment_value(
                rec.ShareGroupCurrentMemberAssignmentValue(
                    m.member_epoch, m.previous_member_epoch, _STABLE, m.assignment))
    initialized = tuple((tid, names.get(tid, ""), tuple(sorted(ps)))
                        for tid, ps in sorted(group.initialized.items(), key=lambda x: str(x[0]))
                        if ps)
    out[rec.encode_share_group_key(rec.SHARE_GROUP_STATE_PARTITION_METADATA, gid)] = \
        rec.encode_share_group_state_partition_metadata_value(
            rec.ShareGroupStatePartitionMetadataValue((), initialized, ()))
    return out
