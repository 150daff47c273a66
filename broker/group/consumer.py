"""KIP-848 consumer groups: server-side assignment, member epochs, incremental reconciliation.

Group states (derived, as Kafka's ConsumerGroupState):

    Empty        no members
    Assigning    group epoch > assignment epoch: the next target waits for the group's
                 assignment interval (below)
    Reconciling  some member has not reached the assignment epoch with a stable assignment
    Stable       every member is at the assignment epoch with exactly its target
    Dead         deleted or unloaded

Group epoch transitions: a member joins, leaves, is fenced or expires, changes subscription,
rack or assignor, or the subscribed topics' metadata (ids, partition counts) changes: group
epoch + 1. When group epoch > assignment epoch the assignor computes a new target and the
assignment epoch becomes the group epoch, on the coordinator's loop, within the heartbeat.

Assignment batching (Kafka 4.4's consumer.assignment.interval.ms, else
group.consumer.assignment.interval.ms, 1000 ms): a group's first target is computed at once;
a later one only by a heartbeat that comes at least the interval after the last one was
computed (its time is kept as AssignmentTimestamp in TargetAssignmentMetadata). Meanwhile a
heartbeat is answered from the last target: a new member gets the assignment epoch and no
partitions, and gets its partitions on a heartbeat after the interval. As in Kafka no timer
runs for it: the heartbeat that finds the interval passed computes the target.

Member states and every transition (Kafka's CurrentAssignmentBuilder):

    Stable               -> UnrevokedPartitions  target dropped partitions the member owns: it
                                                 keeps target ∩ owned, must revoke the rest,
                                                 epoch unchanged (unless the heartbeat reported
                                                 owned partitions without those: then as below)
    Stable               -> UnreleasedPartitions target adds partitions still owned (assigned or
                                                 pending revocation) by another member: epoch
                                                 moves to the target, those are held back
    Stable               -> Stable               target reachable at once: epoch moves
    UnrevokedPartitions  -> Stable/Unreleased    the member's heartbeat reports owned partitions
                                                 without any pending revocation
    UnrevokedPartitions  -> (removed)            revocation not acknowledged within the
                                                 member's rebalance timeout
    UnreleasedPartitions -> Stable               every held-back partition was released
    any                  -> (removed)            leave (epoch -1), session timeout, or a static
                                                 member's temporary leave (epoch -2) not
                                                 followed by a rejoin within the session timeout

Answers: the assignment goes out on a join, to a heartbeat that reports owned partitions, when
it changed, and (beyond Kafka) on every heartbeat until the member has reported owning exactly
it, so an answer lost on the way (librdkafka times a heartbeat out after one interval and
resends it without owned partitions) is repeated instead of stalling the member.

Persistence: after every heartbeat, leave or expiry the group's state is written to
__consumer_offsets as Kafka's KIP-848 records (records.py: ConsumerGroupMetadata,
PartitionMetadata, MemberMetadata, TargetAssignmentMetadata/Member, CurrentMemberAssignment),
only those whose value changed, tombstones for what is gone. A coordinator that loads the
partition replays them, so members keep their ids, epochs and assignments across a restart or
a move and their session timers start again at load (as Kafka's onLoaded does). Unlike Kafka,
the heartbeat is answered without waiting for that write (the handler is synchronous): after a
crash the stored epoch may lag what a member was told; its next heartbeat then carries a newer
epoch, is FENCED_MEMBER_EPOCH, and the member rejoins with epoch 0. Keys of a write that
failed are marked unwritten and go out again with the next diff that covers them.
"""

from __future__ import annotations

import enum
import functools
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from broker.group import records as rec
from broker.group.types import (
    GroupConfig,
    OffsetsRecord,
    TopicPartition,
    assignment_interval_elapsed,
)

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2

Assignment = dict[uuid.UUID, frozenset[int]]


class MemberState(enum.Enum):
    STABLE = "Stable"
    UNREVOKED_PARTITIONS = "UnrevokedPartitions"
    UNRELEASED_PARTITIONS = "UnreleasedPartitions"


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MetadataView(Protocol):
    def topic(self, name: str) -> Any: ...

    def topic_by_id(self, topic_id: uuid.UUID) -> Any: ...

    @property
    def topics_by_name(self) -> Mapping[str, Any]: ...


# ---- requests and results ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned_partitions: tuple[tuple[uuid.UUID, tuple[int, ...]], ...] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeatResult:
    error: ErrorCode
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: tuple[tuple[uuid.UUID, tuple[int, ...]], ...] | None = None
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class DescribedConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...]
    target_assignment: tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescription:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: tuple[DescribedConsumerMember, ...]


# ---- state ----------------------------------------------------------------------------------


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    subscribed_names: tuple[str, ...] = ()
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    session_deadline: int = 0
    revocation_deadline: int | None = None
    left_temporarily: bool = False
    # the partitions the member last reported owning (TopicPartitions of its last heartbeat
    # that carried them); not persisted: a loaded member is taken to own what it is assigned
    reported_owned: Assignment = field(default_factory=dict)


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    metadata_fingerprint: tuple[tuple[str, uuid.UUID, int], ...] = ()
    assignor: str = "uniform"
    assignment_timestamp: int = 0  # when the target was last computed (0: never)
    state_timestamp: int | None = None
    dead: bool = False
    # committed offsets, as on ClassicGroup
    offsets: dict[TopicPartition, Any] = field(default_factory=dict)
    pending_commits: dict[TopicPartition, int] = field(default_factory=dict)
    # the KIP-848 records last written (or replayed) for this group: key -> value
    persisted: dict[bytes, bytes] = field(default_factory=dict)

    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if (m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
                    or m.assigned != self.target.get(m.member_id, {})):
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def subscribed_topic_names(self, image: MetadataView) -> set[str]:
        out: set[str] = set()
        for m in self.members.values():
            out |= member_topics(m, image)
        return out


MAX_REGEX_LENGTH = 1000  # Python's re backtracks (Kafka uses RE2J): keep patterns short


@functools.lru_cache(maxsize=256)
def compile_subscription(pattern: str) -> re.Pattern[str] | None:
    if len(pattern) > MAX_REGEX_LENGTH:
        return None
    try:
        return re.compile(pattern)
    except re.error:
        return None


def member_topics(m: ConsumerMember, image: MetadataView) -> set[str]:
    names = set(m.subscribed_names)
    if m.subscribed_regex:
        pattern = compile_subscription(m.subscribed_regex)
        if pattern is None:
            return names
        names |= {n for n in image.topics_by_name
                  if not n.startswith("__") and pattern.fullmatch(n)}
    return names


def _minus(a: Assignment, b: Assignment) -> Assignment:
    out = {}
    for t, ps in a.items():
        rest = ps - b.get(t, frozenset())
        if rest:
            out[t] = frozenset(rest)
    return out


def _intersect(a: Assignment, b: Assignment) -> Assignment:
    out = {}
    for t, ps in a.items():
        both = ps & b.get(t, frozenset())
        if both:
            out[t] = frozenset(both)
    return out


def _as_tuples(a: Assignment) -> tuple[tuple[uuid.UUID, tuple[int, ...]], ...]:
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(a.items(), key=lambda kv: str(kv[0])))


def _from_tuples(items: Iterable[tuple[uuid.UUID, Iterable[int]]]) -> Assignment:
    out: dict[uuid.UUID, frozenset[int]] = {}
    for t, ps in items:
        merged = out.get(t, frozenset()) | frozenset(ps)
        if merged:
            out[t] = merged
    return out


# ---- assignors -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AssignorMember:
    member_id: str
    topics: frozenset[uuid.UUID]
    current: Assignment


def range_assign(members: list[AssignorMember], partitions: Mapping[uuid.UUID, int],
                 ) -> dict[str, Assignment]:
    """Per topic, subscribers sorted by member id take contiguous ranges (first ones +1)."""
    out: dict[str, dict[uuid.UUID, frozenset[int]]] = {m.member_id: {} for m in members}
    for topic, count in sorted(partitions.items(), key=lambda kv: str(kv[0])):
        subs = sorted(m.member_id for m in members if topic in m.topics)
        if not subs or count <= 0:
            continue
        base, extra = divmod(count, len(subs))
        start = 0
        for i, mid in enumerate(subs):
            n = base + (1 if i < extra else 0)
            if n:
                out[mid][topic] = frozenset(range(start, start + n))
            start += n
    return out


def uniform_assign(members: list[AssignorMember], partitions: Mapping[uuid.UUID, int],
                   ) -> dict[str, Assignment]:
    """Balanced and sticky: members keep what they had up to their fair share."""
    all_parts = sorted(((t, p) for t, n in partitions.items() for p in range(n)),
                       key=lambda tp: (str(tp[0]), tp[1]))
    subscribers: dict[uuid.UUID, list[str]] = {}
    for m in members:
        for t in m.topics:
            subscribers.setdefault(t, []).append(m.member_id)
    counts = {m.member_id: 0 for m in members}
    result: dict[str, dict[uuid.UUID, set[int]]] = {m.member_id: {} for m in members}
    homogeneous = len({m.topics for m in members}) <= 1
    if homogeneous and members:
        eligible = [tp for tp in all_parts if tp[0] in members[0].topics]
        valid = set(eligible)
        base, extra = divmod(len(eligible), len(members))
        ordered = sorted(members, key=lambda m: m.member_id)
        kept = {m.member_id: sorted(((t, p) for t, ps in m.current.items() for p in ps
                                     if (t, p) in valid), key=lambda tp: (str(tp[0]), tp[1]))
                for m in ordered}
        # the +1 slots go first to members that already hold more than the base share
        by_priority = sorted(ordered, key=lambda m: (len(kept[m.member_id]) <= base,
                                                     m.member_id))
        quota = {m.member_id: base + (1 if i < extra else 0)
                 for i, m in enumerate(by_priority)}
        owner: dict[tuple[uuid.UUID, int], str] = {}
        for m in ordered:
            for tp in kept[m.member_id][:quota[m.member_id]]:
                if tp not in owner:
                    owner[tp] = m.member_id
                    counts[m.member_id] += 1
        for tp in eligible:
            if tp in owner:
                continue
            mid = min((x.member_id for x in ordered if counts[x.member_id] < quota[x.member_id]),
                      key=lambda x: (counts[x], x))
            owner[tp] = mid
            counts[mid] += 1
        for (t, p), mid in owner.items():
            result[mid].setdefault(t, set()).add(p)
    else:
        current_owner = {(t, p): m.member_id for m in members for t, ps in m.current.items()
                         for p in ps}
        ordered_parts = sorted(all_parts, key=lambda tp: (len(subscribers.get(tp[0], [])),
                                                          str(tp[0]), tp[1]))
        for tp in ordered_parts:
            subs = subscribers.get(tp[0], [])
            if not subs:
                continue
            least = min(subs, key=lambda mid: (counts[mid], mid))
            prev = current_owner.get(tp)
            mid = prev if prev in subs and prev is not None \
                and counts[prev] <= counts[least] else least
            result[mid].setdefault(tp[0], set()).add(tp[1])
            counts[mid] += 1
    return {mid: {t: frozenset(ps) for t, ps in a.items()} for mid, a in result.items()}


ASSIGNORS = {"uniform": uniform_assign, "range": range_assign}


# ---- the coordinator part -----------------------------------------------------------------------


class ConsumerGroups:
    """The KIP-848 groups of one coordinator partition (mixed into GroupCoordinator)."""

    consumer_groups: dict[str, ConsumerGroup]
    config: GroupConfig
    consumer_rebalances: int  # target assignments computed, a new group epoch each (metrics)
    # a group's dynamic configs (GROUP config resources, KIP-848): what the metadata image
    # holds for the group, read when a member's session or heartbeat interval is set
    group_configs: Callable[[str], Mapping[str, str]]

    def _group_int(self, group_id: str, key: str, default: int) -> int:
        value = self.group_configs(group_id).get(key)
        try:
            return int(value) if value is not None else default
        except ValueError:  # the controller checked it; an odd record falls back
            return default

    def consumer_session_timeout_ms(self, group_id: str) -> int:
        """The group's consumer.session.timeout.ms, else group.consumer.session.timeout.ms."""
        return self._group_int(group_id, "consumer.session.timeout.ms",
                               self.config.consumer_session_timeout_ms)

    def consumer_heartbeat_interval_ms(self, group_id: str) -> int:
        """The group's consumer.heartbeat.interval.ms, else the broker's."""
        return self._group_int(group_id, "consumer.heartbeat.interval.ms",
                               self.config.consumer_heartbeat_interval_ms)

    def consumer_assignment_interval_ms(self, group_id: str) -> int:
        """The group's consumer.assignment.interval.ms, else the broker's."""
        return self._group_int(group_id, "consumer.assignment.interval.ms",
                               self.config.consumer_assignment_interval_ms)

    def _new_consumer_member_id(self) -> str:
        raise NotImplementedError

    def _adopt_classic_group(self, group_id: str, now_ms: int) -> ConsumerGroup | ErrorCode:
        raise NotImplementedError

    def _write_group_records(self, records: list[OffsetsRecord],
                             group: ConsumerGroup | None = None) -> None:
        raise NotImplementedError

    def consumer_heartbeat(
        self, req: ConsumerHeartbeatRequest, image: MetadataView, now_ms: int,
    ) -> ConsumerHeartbeatResult:
        g = self.consumer_groups.get(req.group_id)
        shape = _shape(g)
        result = self._consumer_heartbeat(req, image, now_ms)
        g = self.consumer_groups.get(req.group_id)
        if g is not None:
            # the common heartbeat changes only its own member's records: encode just those
            # (a full diff costs O(members) per heartbeat)
            same = shape is not None and shape == _shape(g) and result.member_id in g.members
            self._persist(g, only=result.member_id if same else None)
        return result

    def _consumer_heartbeat(
        self, req: ConsumerHeartbeatRequest, image: MetadataView, now_ms: int,
    ) -> ConsumerHeartbeatResult:
        interval = self.consumer_heartbeat_interval_ms(req.group_id)
        if not req.group_id:
            return ConsumerHeartbeatResult(ErrorCode.invalid_request,
                                           error_message="GroupId can't be empty.")
        if req.member_epoch == JOIN_EPOCH and req.subscribed_topic_names is None \
                and req.subscribed_topic_regex is None:
            return ConsumerHeartbeatResult(
                ErrorCode.invalid_request,
                error_message="SubscribedTopicNames or SubscribedTopicRegex must be set in "
                              "first request.")
        if req.member_epoch == JOIN_EPOCH and req.rebalance_timeout_ms < 0:
            return ConsumerHeartbeatResult(ErrorCode.invalid_request,
                                           error_message="RebalanceTimeoutMs must be provided "
                                                         "in first request.")
        if req.server_assignor is not None and req.server_assignor not in ASSIGNORS:
            return ConsumerHeartbeatResult(ErrorCode.unsupported_assignor,
                                           error_message=f"{req.server_assignor}")
        if req.subscribed_topic_regex and compile_subscription(req.subscribed_topic_regex) is None:
            return ConsumerHeartbeatResult(ErrorCode.invalid_regular_expression,
                                           error_message=f"{req.subscribed_topic_regex[:100]}")
        if req.member_epoch < STATIC_LEAVE_EPOCH:
            return ConsumerHeartbeatResult(ErrorCode.invalid_request)
        g = self.consumer_groups.get(req.group_id)
        if g is None:
            if req.member_epoch != JOIN_EPOCH:
                return ConsumerHeartbeatResult(ErrorCode.unknown_member_id,
                                               member_id=req.member_id or None)
            adopted = self._adopt_classic_group(req.group_id, now_ms)
            if isinstance(adopted, ErrorCode):
                return ConsumerHeartbeatResult(adopted, error_message=(
                    f"Group {req.group_id} is not a consumer group."))
            g = adopted
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._consumer_leave(g, req, now_ms)
        epoch_before = g.group_epoch
        member, error = self._member_for_heartbeat(g, req, now_ms)
        if member is None:
            return ConsumerHeartbeatResult(error, member_id=req.member_id or None)
        previous_assigned = dict(member.assigned)
        changed = False
        if req.subscribed_topic_names is not None \
                and tuple(sorted(req.subscribed_topic_names)) != member.subscribed_names:
            member.subscribed_names = tuple(sorted(req.subscribed_topic_names))
            changed = True
        if req.subscribed_topic_regex is not None \
                and (req.subscribed_topic_regex or None) != member.subscribed_regex:
            member.subscribed_regex = req.subscribed_topic_regex or None
            changed = True
        if req.server_assignor is not None and req.server_assignor != member.server_assignor:
            member.server_assignor = req.server_assignor
            changed = True
        if req.rack_id is not None and req.rack_id != member.rack_id:
            member.rack_id = req.rack_id
            changed = True
        if req.rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_deadline = now_ms + self.consumer_session_timeout_ms(g.group_id)
        fingerprint = self._fingerprint(g, image)
        if (changed or fingerprint != g.metadata_fingerprint) and g.group_epoch == epoch_before:
            g.group_epoch += 1
        g.metadata_fingerprint = fingerprint
        if g.group_epoch > g.assignment_epoch:
            self._compute_target(g, image, now_ms)
        owned = None if req.owned_partitions is None else _from_tuples(req.owned_partitions)
        if owned is not None:
            member.reported_owned = owned
        self._reconcile(g, member, owned, now_ms)
        # Kafka answers the assignment to a full request or when it changed. Skiff also repeats
        # it until the member reports owning exactly it: a response that carried a change may
        # have been lost. librdkafka times a heartbeat out after one heartbeat interval and
        # sends it again as it was, without owned partitions (it sends those only to
        # acknowledge an assignment it reconciled), so a member told to revoke whose answer
        # timed out would otherwise never hear of it and keep the partitions until its
        # rebalance timeout. Clients ignore an assignment equal to the one they hold or are
        # reconciling towards.
        send = (req.owned_partitions is not None or req.member_epoch == JOIN_EPOCH
                or member.assigned != previous_assigned
                or member.assigned != member.reported_owned)
        return ConsumerHeartbeatResult(
            ErrorCode.none, member_id=member.member_id, member_epoch=member.member_epoch,
            heartbeat_interval_ms=interval,
            assignment=_as_tuples(member.assigned) if send else None,
        )

    def _member_for_heartbeat(
        self, g: ConsumerGroup, req: ConsumerHeartbeatRequest, now_ms: int,
    ) -> tuple[ConsumerMember | None, ErrorCode]:
        member = g.members.get(req.member_id) if req.member_id else None
        if req.member_epoch == JOIN_EPOCH:
            if req.instance_id is not None:
                known = g.static_members.get(req.instance_id)
                if known is not None and known != req.member_id:
                    old = g.members[known]
                    if not old.left_temporarily:
                        return None, ErrorCode.unreleased_instance_id
                    # a static member coming back takes over its predecessor's assignment
                    new_id = req.member_id or self._new_consumer_member_id()
                    del g.members[known]
                    old.member_id = new_id
                    old.left_temporarily = False
                    old.client_id, old.client_host = req.client_id, req.client_host
                    g.members[new_id] = old
                    g.static_members[req.instance_id] = new_id
                    if known in g.target:
                        g.target[new_id] = g.target.pop(known)
                    return old, ErrorCode.none
            if member is not None:
                # a rejoin with epoch 0 by a known member: it lost its assignment
                member.assigned = {}
                member.pending_revocation = {}
                member.state = MemberState.STABLE
                member.member_epoch = 0
                return member, ErrorCode.none
            if len(g.members) >= self.config.consumer_max_size:
                return None, ErrorCode.group_max_size_reached
            member = ConsumerMember(
                member_id=req.member_id or self._new_consumer_member_id(),
                instance_id=req.instance_id, rack_id=req.rack_id, client_id=req.client_id,
                client_host=req.client_host, rebalance_timeout_ms=req.rebalance_timeout_ms,
                server_assignor=req.server_assignor,
            )
            g.members[member.member_id] = member
            if req.instance_id is not None:
                g.static_members[req.instance_id] = member.member_id
            g.group_epoch += 1
            return member, ErrorCode.none
        if member is None:
            return None, ErrorCode.unknown_member_id
        if req.instance_id is not None and g.static_members.get(req.instance_id) \
                != member.member_id:
            return None, ErrorCode.fenced_instance_id
        if req.member_epoch > member.member_epoch:
            return None, ErrorCode.fenced_member_epoch
        if req.member_epoch < member.member_epoch:
            owned = None if req.owned_partitions is None else _from_tuples(req.owned_partitions)
            if (req.member_epoch != member.previous_member_epoch or owned is None
                    or _minus(owned, member.assigned)):
                return None, ErrorCode.fenced_member_epoch
        return member, ErrorCode.none

    def _consumer_leave(self, g: ConsumerGroup, req: ConsumerHeartbeatRequest, now_ms: int,
                        ) -> ConsumerHeartbeatResult:
        member_id = req.member_id
        if req.instance_id is not None:
            member_id = g.static_members.get(req.instance_id, "")
            if not member_id:
                return ConsumerHeartbeatResult(ErrorCode.unknown_member_id,
                                               member_id=req.member_id or None)
            if req.member_id and member_id != req.member_id:
                return ConsumerHeartbeatResult(ErrorCode.fenced_instance_id,
                                               member_id=req.member_id)
        member = g.members.get(member_id)
        if member is None:
            return ConsumerHeartbeatResult(ErrorCode.unknown_member_id,
                                           member_id=req.member_id or None)
        if req.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            member.left_temporarily = True
            # it has left: no lost epoch bump of this member id is left to tolerate (and the
            # record keeps MemberEpoch -2 with the real epoch in PreviousMemberEpoch)
            member.previous_member_epoch = -1
            member.session_deadline = now_ms + self.consumer_session_timeout_ms(g.group_id)
            return ConsumerHeartbeatResult(ErrorCode.none, member_id=member.member_id,
                                           member_epoch=STATIC_LEAVE_EPOCH)
        self._remove_consumer_member(g, member, now_ms)
        return ConsumerHeartbeatResult(ErrorCode.none, member_id=member.member_id,
                                       member_epoch=LEAVE_EPOCH)

    def _remove_consumer_member(self, g: ConsumerGroup, m: ConsumerMember, now_ms: int) -> None:
        g.members.pop(m.member_id, None)
        g.target.pop(m.member_id, None)
        if m.instance_id is not None and g.static_members.get(m.instance_id) == m.member_id:
            del g.static_members[m.instance_id]
        g.group_epoch += 1
        if not g.members:
            g.state_timestamp = now_ms

    def _fingerprint(self, g: ConsumerGroup, image: MetadataView,
                     ) -> tuple[tuple[str, uuid.UUID, int], ...]:
        out = []
        for name in sorted(g.subscribed_topic_names(image)):
            t = image.topic(name)
            if t is not None:
                out.append((name, t.topic_id, int(t.num_partitions)))
        return tuple(out)

    def _compute_target(self, g: ConsumerGroup, image: MetadataView, now_ms: int) -> None:
        if not assignment_interval_elapsed(g.assignment_timestamp,
                                           self.consumer_assignment_interval_ms(g.group_id),
                                           now_ms):
            return  # batched: members go on towards the last target
        assignor_names = [m.server_assignor for m in g.members.values() if m.server_assignor]
        name = max(set(assignor_names), key=assignor_names.count) if assignor_names \
            else self.config.consumer_assignors[0]
        g.assignor = name
        partitions: dict[uuid.UUID, int] = {}
        members = []
        for m in sorted(g.members.values(), key=lambda x: x.member_id):
            ids = set()
            for topic_name in member_topics(m, image):
                t = image.topic(topic_name)
                if t is not None:
                    ids.add(t.topic_id)
                    partitions[t.topic_id] = int(t.num_partitions)
            members.append(AssignorMember(m.member_id, frozenset(ids),
                                          g.target.get(m.member_id, {})))
        g.target = ASSIGNORS[name](members, partitions)
        g.assignment_epoch = g.group_epoch
        g.assignment_timestamp = now_ms
        self.consumer_rebalances += 1

    def _owned_elsewhere(self, g: ConsumerGroup, member_id: str) -> Assignment:
        out: dict[uuid.UUID, frozenset[int]] = {}
        for other in g.members.values():
            if other.member_id == member_id:
                continue
            for source in (other.assigned, other.pending_revocation):
                for t, ps in source.items():
                    out[t] = out.get(t, frozenset()) | ps
        return out

    def _reconcile(self, g: ConsumerGroup, m: ConsumerMember, owned: Assignment | None,
                   now_ms: int) -> None:
        target = g.target.get(m.member_id, {})
        if m.state is MemberState.UNREVOKED_PARTITIONS:
            if owned is None or _intersect(owned, m.pending_revocation):
                return  # still waiting for the member to give those partitions up
            m.pending_revocation = {}
            m.revocation_deadline = None
            m.state = MemberState.STABLE
        if m.member_epoch == g.assignment_epoch and m.state is MemberState.STABLE \
                and m.assigned == target:
            return
        revoke = _minus(m.assigned, target)
        # a member that reported its owned partitions without those it would revoke has
        # nothing to give up (Kafka's ownsRevokedPartitions on the new revocation)
        if revoke and (owned is None or _intersect(owned, revoke)):
            m.assigned = _intersect(m.assigned, target)
            m.pending_revocation = revoke
            m.state = MemberState.UNREVOKED_PARTITIONS
            m.revocation_deadline = now_ms + max(m.rebalance_timeout_ms, 0)
            return
        kept = _intersect(m.assigned, target)
        unreleased = _intersect(_minus(target, kept), self._owned_elsewhere(g, m.member_id))
        if m.member_epoch != g.assignment_epoch:
            m.previous_member_epoch = m.member_epoch
            m.member_epoch = g.assignment_epoch
        m.assigned = _minus(target, unreleased)
        m.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE

    def consumer_tick(self, now_ms: int) -> None:
        for g in list(self.consumer_groups.values()):
            removed = False
            for m in list(g.members.values()):
                revocation_late = (m.revocation_deadline is not None
                                   and now_ms >= m.revocation_deadline)
                if now_ms >= m.session_deadline or revocation_late:
                    self._remove_consumer_member(g, m, now_ms)
                    removed = True
            if removed:
                self._persist(g)

    # ---- persistence ----------------------------------------------------------------------

    def _persist(self, g: ConsumerGroup, only: str | None = None) -> None:
        """Write the records of `g` that changed since the last write; tombstone the rest.
        With `only`, the group's own records and that member's are compared (nothing else
        may have changed)."""
        if only is not None and not g.dead:
            changed = {k: v for k, v in group_records(g, only).items()
                       if g.persisted.get(k) != v}
            if changed:
                g.persisted.update(changed)
                self._write_group_records([OffsetsRecord(k, v) for k, v in changed.items()], g)
            return
        current = {} if g.dead else group_records(g)
        out: list[OffsetsRecord] = []
        gone = [k for k in g.persisted if k not in current]
        # tombstones member records first (assignment, target, metadata), as Kafka orders them
        gone.sort(key=lambda k: -_record_type(k))
        out += [OffsetsRecord(k, None) for k in gone]
        out += [OffsetsRecord(k, v) for k, v in current.items() if g.persisted.get(k) != v]
        if out:
            g.persisted = current
            self._write_group_records(out, g)

    def replay_consumer_record(self, key: rec.ConsumerGroupKey, value: bytes | None,
                               raw_key: bytes) -> ConsumerGroup | None:
        """Apply one KIP-848 record while loading. Returns the group it touched."""
        g = self.consumer_groups.get(key.group)
        t = key.record_type
        if value is None:
            if g is None:
                return None
            g.persisted.pop(raw_key, None)
            if t == rec.CONSUMER_GROUP_METADATA:
                g.dead = True
                del self.consumer_groups[key.group]
                return g
            if t == rec.CONSUMER_GROUP_MEMBER_METADATA and key.member_id is not None:
                g.members.pop(key.member_id, None)
            elif t == rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER and key.member_id is not None:
                g.target.pop(key.member_id, None)
            elif t == rec.CONSUMER_GROUP_PARTITION_METADATA:
                g.metadata_fingerprint = ()
            return g
        if g is None:
            g = self.consumer_groups[key.group] = ConsumerGroup(key.group)
        g.persisted[raw_key] = value
        if t == rec.CONSUMER_GROUP_METADATA:
            g.group_epoch = rec.decode_consumer_group_metadata_value(value)
        elif t == rec.CONSUMER_GROUP_PARTITION_METADATA:
            topics = rec.decode_consumer_group_partition_metadata_value(value)
            g.metadata_fingerprint = tuple(sorted((x.name, x.topic_id, x.num_partitions)
                                                  for x in topics))
        elif t == rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
            g.assignment_epoch, g.assignment_timestamp = rec.decode_target_assignment_metadata(
                value, "ConsumerGroupTargetAssignmentMetadataValue")
        elif t == rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER and key.member_id is not None:
            # a target is not a member: only member metadata and assignments make one
            g.target[key.member_id] = _from_tuples(
                rec.decode_consumer_group_target_assignment_member_value(value))
        elif key.member_id is not None:
            m = g.members.get(key.member_id)
            if m is None:
                m = g.members[key.member_id] = ConsumerMember(
                    key.member_id, None, None, "", "", -1)
            if t == rec.CONSUMER_GROUP_MEMBER_METADATA:
                mv = rec.decode_consumer_group_member_metadata_value(value)
                m.instance_id, m.rack_id = mv.instance_id, mv.rack_id
                m.client_id, m.client_host = mv.client_id, mv.client_host
                m.subscribed_names = tuple(sorted(mv.subscribed_topic_names))
                m.subscribed_regex = mv.subscribed_topic_regex
                m.rebalance_timeout_ms = mv.rebalance_timeout_ms
                m.server_assignor = mv.server_assignor
            else:
                cv = rec.decode_consumer_group_current_member_assignment_value(value)
                m.left_temporarily = cv.member_epoch == STATIC_LEAVE_EPOCH
                m.member_epoch = cv.previous_member_epoch if m.left_temporarily \
                    else cv.member_epoch
                m.previous_member_epoch = -1 if m.left_temporarily else cv.previous_member_epoch
                m.state = _STATE_BY_VALUE.get(cv.state, MemberState.STABLE)
                m.assigned = _from_tuples(cv.assigned)
                m.pending_revocation = _from_tuples(cv.pending_revocation)
        return g

    def finish_loading_consumer_groups(self, now_ms: int) -> None:
        """After the last replayed record: rebuild indexes, start session and revocation
        timers from now (members get a full session to heartbeat the new coordinator)."""
        for g in self.consumer_groups.values():
            g.static_members = {m.instance_id: mid for mid, m in g.members.items()
                                if m.instance_id is not None}
            for m in g.members.values():
                m.session_deadline = now_ms + self.consumer_session_timeout_ms(g.group_id)
                m.reported_owned = dict(m.assigned)
                m.revocation_deadline = (now_ms + max(m.rebalance_timeout_ms, 0)
                                         if m.state is MemberState.UNREVOKED_PARTITIONS
                                         else None)
            if not g.members:
                g.state_timestamp = now_ms

    def describe_consumer_group(self, group_id: str, image: MetadataView,
                                ) -> ConsumerGroupDescription | None:
        g = self.consumer_groups.get(group_id)
        if g is None or g.dead:
            return None

        def named(a: Assignment) -> tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...]:
            out = []
            for t, ps in _as_tuples(a):
                topic = image.topic_by_id(t)
                out.append((t, topic.name if topic is not None else "", ps))
            return tuple(out)

        members = tuple(
            DescribedConsumerMember(
                member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
                subscribed_topic_names=m.subscribed_names,
                subscribed_topic_regex=m.subscribed_regex, assignment=named(m.assigned),
                target_assignment=named(g.target.get(m.member_id, {})),
            )
            for m in g.members.values()
        )
        return ConsumerGroupDescription(g.group_id, g.state.value, g.group_epoch,
                                        g.assignment_epoch, g.assignor, members)


# ---- records ---------------------------------------------------------------------------------

_STATE_VALUE = {MemberState.STABLE: 0, MemberState.UNREVOKED_PARTITIONS: 1,
                MemberState.UNRELEASED_PARTITIONS: 2}
_STATE_BY_VALUE = {v: k for k, v in _STATE_VALUE.items()}


def _record_type(key: bytes) -> int:
    return int.from_bytes(key[:2], "big", signed=True)


def _shape(g: ConsumerGroup | None) -> tuple[int, int, frozenset[str]] | None:
    return None if g is None else (g.group_epoch, g.assignment_epoch, frozenset(g.members))


def group_records(g: ConsumerGroup, only: str | None = None) -> dict[bytes, bytes]:
    """Every KIP-848 record that describes `g` now, key -> value, in Kafka's write order;
    with `only`, the group's own records and those of that member."""
    gid = g.group_id
    out: dict[bytes, bytes] = {}
    members = sorted((m for m in g.members.values() if only is None or m.member_id == only),
                     key=lambda x: x.member_id)
    for m in members:
        out[rec.encode_consumer_group_key(rec.CONSUMER_GROUP_MEMBER_METADATA, gid,
                                          m.member_id)] = \
            rec.encode_consumer_group_member_metadata_value(rec.ConsumerGroupMemberMetadataValue(
                m.instance_id, m.rack_id, m.client_id, m.client_host, m.subscribed_names,
                m.subscribed_regex, m.rebalance_timeout_ms, m.server_assignor))
    out[rec.encode_consumer_group_key(rec.CONSUMER_GROUP_PARTITION_METADATA, gid)] = \
        rec.encode_consumer_group_partition_metadata_value(tuple(
            rec.ConsumerGroupTopicMetadata(topic_id, name, n)
            for name, topic_id, n in g.metadata_fingerprint))
    out[rec.encode_consumer_group_key(rec.CONSUMER_GROUP_METADATA, gid)] = \
        rec.encode_consumer_group_metadata_value(g.group_epoch)
    for member_id, target in sorted(g.target.items()):
        if only is not None and member_id != only:
            continue
        out[rec.encode_consumer_group_key(rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, gid,
                                          member_id)] = \
            rec.encode_consumer_group_target_assignment_member_value(_as_tuples(target))
    out[rec.encode_consumer_group_key(rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, gid)] = \
        rec.encode_consumer_group_target_assignment_metadata_value(g.assignment_epoch,
                                                                   g.assignment_timestamp)
    for m in members:
        epoch, previous = m.member_epoch, m.previous_member_epoch
        if m.left_temporarily:
            epoch, previous = STATIC_LEAVE_EPOCH, m.member_epoch
        out[rec.encode_consumer_group_key(rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, gid,
                                          m.member_id)] = \
            rec.encode_consumer_group_current_member_assignment_value(
                rec.ConsumerGroupCurrentMemberAssignmentValue(
                    epoch, previous, _STATE_VALUE[m.state], _as_tuples(m.assigned),
                    _as_tuples(m.pending_revocation)))
    return out
