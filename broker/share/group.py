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

A group also remembers its initialized share-partitions, those with a state in the share
coordinator (assigned to a member once, or given a start offset by AlterShareGroupOffsets),
which DescribeShareGroupOffsets lists and DeleteGroups / DeleteShareGroupOffsets delete.
Offsets are altered and deleted, and the group deleted, only while it has no members
(NON_EMPTY_GROUP otherwise); an unknown group is GROUP_ID_NOT_FOUND, except that altering
offsets creates it, as for consumer groups.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

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


ASSIGNOR_NAME = "simple"


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    topics_seen: tuple[tuple[str, uuid.UUID, int], ...] = ()
    # the share-partitions with state in the share coordinator (Kafka's initialized
    # partitions of ShareGroupStatePartitionMetadata): assigned once, or altered offsets
    initialized: dict[uuid.UUID, set[int]] = field(default_factory=dict)

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
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        names = req.subscribed_topic_names
        if names is not None and tuple(sorted(set(names))) != member.subscribed:
            member.subscribed = tuple(sorted(set(names)))
            changed = True
        self._maybe_assign(group, topics, changed)
        assignment = None
        if (member.member_epoch != group.assignment_epoch
                or member.sent_epoch != member.member_epoch):
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

    def offsets_deleted(self, group_id: str, topic_ids: Iterable[uuid.UUID]) -> None:
        group = self.groups.get(group_id)
        if group is not None:
            for tid in topic_ids:
                group.initialized.pop(tid, None)

    def delete(self, group_id: str) -> None:
        self.groups.pop(group_id, None)

    def listed(self) -> list[tuple[str, str]]:
        """(group id, state) of every share group."""
        return [(g.group_id, g.state) for g in self.groups.values()]

    # ---- internals ---------------------------------------------------------------------------

    def _remove(self, group: ShareGroup, member_id: str) -> None:
        if group.members.pop(member_id, None) is not None:
            group.group_epoch += 1

    def _maybe_assign(self, group: ShareGroup, topics: TopicsView, changed: bool) -> None:
        subscribed = {t for m in group.members.values() for t in m.subscribed}
        seen = tuple(sorted((t, *topics[t]) for t in subscribed if t in topics))
        if seen != group.topics_seen:
            group.topics_seen = seen
            changed = True
        if changed:
            group.group_epoch += 1
        if group.assignment_epoch == group.group_epoch:
            return
        target = simple_assignment({m.member_id: m.subscribed for m in group.members.values()},
                                   topics)
        for mid, parts in target.items():
            for tid, ps in parts.items():
                group.initialized.setdefault(tid, set()).update(ps)
            group.members[mid].assignment = tuple(
                (tid, tuple(sorted(ps)))
                for tid, ps in sorted(parts.items(), key=lambda x: str(x[0])))
        group.assignment_epoch = group.group_epoch
