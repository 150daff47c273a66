"""KIP-1071 streams groups: the broker assigns tasks, members reconcile with epochs. Pure.

Group states (Kafka 4.4's StreamsGroupState):

    Empty        no members
    NotReady     members, but the topology is not configured: a source topic is missing, an
                 internal topic is missing (being created) or topics are wrongly partitioned
    Assigning    group epoch > assignment epoch (only inside one call here: the target is
                 computed synchronously; while the initial rebalance delay runs the
                 target is empty and members are told ASSIGNMENT_DELAYED)
    Reconciling  some member is not at the assignment epoch with exactly its target
    Stable       every member holds exactly its target at the assignment epoch
    Dead         deleted or unloaded

Group epoch + 1 when: a member joins, leaves or expires; a member's process, rack, client
tags or endpoint changes; the topology is (re)initialised; the partition counts of the
topology's topics change (a missing internal topic appears). When group epoch > assignment
epoch (and the first assignment of a group is no longer delayed by
streams.initial.rebalance.delay.ms), the group's assignor (streams.assignor.name among the
node's group.streams.assignors; Kafka 4.4 ships one, sticky) computes a new target, ranking
standby candidates by the task offsets members report, unless the group's last target was
computed less than streams.assignment.interval.ms ago (Kafka 4.4's batching, else
group.streams.assignment.interval.ms, 1000 ms; its time is kept as AssignmentTimestamp in
TargetAssignmentMetadata): then members go on towards the last target and are told
ASSIGNMENT_DELAYED, and a heartbeat after the interval computes it (as in Kafka, no timer
runs for it). As in Kafka 4.4 there are no warm-up tasks (its AssignmentRefiner returns the
target unchanged, whatever streams.num.warmup.replicas says) and
streams.rack.aware.assignment.tags moves no standby (its sticky assignor does not read
them). Heartbeat answers carry the group's streams.task.offset.interval.ms and
streams.acceptable.recovery.lag.

Member states and every transition (Kafka's streams CurrentAssignmentBuilder):

    Stable          -> UnrevokedTasks   the target drops tasks the member holds: it keeps
                                        target ∩ held, must revoke the rest, epoch unchanged
    Stable          -> UnreleasedTasks  the target adds an active task another member still
                                        holds as active (or one another member of the same
                                        process holds at all): epoch moves, the task waits
    Stable          -> Stable           target reachable at once: epoch moves to the target's
    UnrevokedTasks  -> Stable/Unreleased the member reports owned tasks without the revoked
    UnrevokedTasks  -> (removed)        revocation not reported within the rebalance timeout
    UnreleasedTasks -> Stable           every held-back task was released by its holder
    any             -> (removed)        leave (epoch -1), session timeout, a static member's
                                        temporary leave (epoch -2) not followed by a rejoin
                                        within the session timeout

A member heartbeats with epoch 0 and its topology to join; the first topology of a group
(or a higher topology epoch when no other member is left) becomes the group's. A member
with a lower topology epoch is told STALE_TOPOLOGY. Internal topics missing from the
metadata are returned by `streams_heartbeat` for the shell to create (as Kafka 4.4's
coordinator creates them) and the members are told MISSING_INTERNAL_TOPICS until they exist.

Persistence: after every heartbeat, leave, expiry or new target the group's state is
written to __consumer_offsets as Kafka 4.4's streams-group records (records.py:
StreamsGroupMetadata, Topology, MemberMetadata, TargetAssignmentMetadata/Member,
CurrentMemberAssignment), only those whose value changed, tombstones for what is gone, as
consumer groups do (consumer.py). A coordinator that loads the partition replays them, so
the group keeps its epochs, topology, members and assignments across a restart or a move;
session timers start again at load, and the topology is configured against the metadata
at load (`configure_loaded_streams_groups`), so only topics that changed since move the
group epoch. Committed offsets are persisted as for every group.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

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

# StreamsGroupHeartbeatResponse's status codes
STALE_TOPOLOGY = 0
MISSING_SOURCE_TOPICS = 1
INCORRECTLY_PARTITIONED_TOPICS = 2
MISSING_INTERNAL_TOPICS = 3
SHUTDOWN_APPLICATION = 4
ASSIGNMENT_DELAYED = 5

TaskId = tuple[str, int]
# a task offset a member reports: subtopology, partition, offset (its changelogs' sum)
TaskOffset = tuple[str, int, int]
TopicPartitions = tuple[tuple[str, tuple[int, ...]], ...]
# an endpoint (host, port) with the partitions of its active and of its standby tasks
EndpointPartitions = tuple[tuple[str, int], TopicPartitions, TopicPartitions]


class MemberState(enum.Enum):
    STABLE = "Stable"
    UNREVOKED_TASKS = "UnrevokedTasks"
    UNRELEASED_TASKS = "UnreleasedTasks"


class StreamsGroupState(enum.Enum):
    EMPTY = "Empty"
    NOT_READY = "NotReady"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class Tasks:
    active: frozenset[TaskId] = frozenset()
    standby: frozenset[TaskId] = frozenset()
    warmup: frozenset[TaskId] = frozenset()

    def all(self) -> frozenset[TaskId]:
        return self.active | self.standby | self.warmup

    def minus(self, o: Tasks) -> Tasks:
        return Tasks(self.active - o.active, self.standby - o.standby, self.warmup - o.warmup)

    def intersect(self, o: Tasks) -> Tasks:
        return Tasks(self.active & o.active, self.standby & o.standby, self.warmup & o.warmup)

    def __bool__(self) -> bool:
        return bool(self.active or self.standby or self.warmup)


EMPTY_TASKS = Tasks()


def tasks_of(active: Iterable[tuple[str, Iterable[int]]] | None = None,
             standby: Iterable[tuple[str, Iterable[int]]] | None = None,
             warmup: Iterable[tuple[str, Iterable[int]]] | None = None) -> Tasks:
    def flat(items: Iterable[tuple[str, Iterable[int]]] | None) -> frozenset[TaskId]:
        return frozenset((s, int(p)) for s, ps in items or () for p in ps)

    return Tasks(flat(active), flat(standby), flat(warmup))


def grouped(tasks: Iterable[TaskId]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    by: dict[str, list[int]] = {}
    for s, p in tasks:
        by.setdefault(s, []).append(p)
    return tuple((s, tuple(sorted(ps))) for s, ps in sorted(by.items()))


# ---- topology ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    partitions: int = 0
    replication_factor: int = 0
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    source_topic_regex: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    # each group: indexes into source_topics and into repartition_source_topics
    copartition_groups: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class Topology:
    epoch: int
    subtopologies: tuple[Subtopology, ...]


@dataclass(frozen=True, slots=True)
class ConfiguredTopology:
    """What the metadata made of a topology: tasks per subtopology, or why it has none."""

    tasks: Mapping[str, int]
    status: tuple[tuple[int, str], ...] = ()
    to_create: tuple[TopicInfo, ...] = ()  # internal topics with the partitions they need

    @property
    def ready(self) -> bool:
        return not self.status


def validate_topology(t: Topology) -> str | None:
    """Why a joining member's topology is refused (STREAMS_INVALID_TOPOLOGY), or None."""
    seen: set[str] = set()
    for s in t.subtopologies:
        if not s.subtopology_id or s.subtopology_id in seen:
            return f"Subtopology id {s.subtopology_id!r} is empty or repeated."
        seen.add(s.subtopology_id)
        if not s.source_topics and not s.repartition_source_topics and not s.source_topic_regex:
            return f"Subtopology {s.subtopology_id} has no source topics."
        if s.source_topic_regex:
            return "Source topic regular expressions are not supported by Skiff."
        for ts, rs in s.copartition_groups:
            if any(i < 0 or i >= len(s.source_topics) for i in ts) or \
                    any(i < 0 or i >= len(s.repartition_source_topics) for i in rs):
                return f"Subtopology {s.subtopology_id} has a copartition group index out of range."
    sources = {r.name for s in t.subtopologies for r in s.repartition_source_topics}
    for s in t.subtopologies:
        for name in s.repartition_sink_topics:
            if name not in sources and name not in s.source_topics:
                return f"Repartition sink topic {name} is not a repartition source topic."
    return None


def configure(t: Topology, partitions_of: Callable[[str], int | None]) -> ConfiguredTopology:
    """Partition counts of the internal topics, as Kafka's InternalTopicManager infers
    them: a repartition topic without a fixed count gets the largest source topic partition
    count of the subtopologies writing to it, copartitioned repartition topics the count
    of their group, a changelog topic the subtopology's task count."""
    missing = sorted({n for s in t.subtopologies for n in s.source_topics
                      if partitions_of(n) is None})
    if missing:
        return ConfiguredTopology({}, ((MISSING_SOURCE_TOPICS,
                                        f"Source topics {', '.join(missing)} are missing."),))
    repartition: dict[str, int] = {}
    for s in t.subtopologies:
        for r in s.repartition_source_topics:
            if r.partitions > 0:
                repartition[r.name] = r.partitions
    for _ in range(len(t.subtopologies) + 1):
        for s in t.subtopologies:
            counts = [partitions_of(n) or 0 for n in s.source_topics] + \
                     [repartition.get(r.name, 0) for r in s.repartition_source_topics]
            n = max(counts, default=0)
            if n <= 0:
                continue
            for sink in s.repartition_sink_topics:
                if repartition.get(sink, 0) < n and not any(
                        r.name == sink and r.partitions > 0
                        for x in t.subtopologies for r in x.repartition_source_topics):
                    repartition[sink] = n
    unresolved = sorted({r.name for s in t.subtopologies for r in s.repartition_source_topics
                         if r.name not in repartition})
    if unresolved:
        return ConfiguredTopology({}, ((MISSING_SOURCE_TOPICS, "Partition count of repartition "
                                        f"topics {', '.join(unresolved)} cannot be inferred."),))
    wrong: list[str] = []
    for s in t.subtopologies:
        for ts, rs in s.copartition_groups:
            users = {s.source_topics[i]: partitions_of(s.source_topics[i]) or 0 for i in ts}
            want = max(users.values(), default=0)
            if len(set(users.values())) > 1:
                wrong.extend(sorted(users))
                continue
            for i in rs:
                r = s.repartition_source_topics[i]
                if want and r.partitions <= 0:
                    repartition[r.name] = want
                elif want and repartition[r.name] != want:
                    wrong.append(r.name)
    if wrong:
        return ConfiguredTopology({}, ((INCORRECTLY_PARTITIONED_TOPICS,
                                        f"Following topics are not copartitioned: "
                                        f"{', '.join(sorted(set(wrong)))}."),))
    tasks: dict[str, int] = {}
    internal: dict[str, TopicInfo] = {}
    for s in t.subtopologies:
        n = max([partitions_of(x) or 0 for x in s.source_topics]
                + [repartition[r.name] for r in s.repartition_source_topics], default=0)
        tasks[s.subtopology_id] = n
        for r in s.repartition_source_topics:
            internal[r.name] = TopicInfo(r.name, repartition[r.name], r.replication_factor,
                                         r.configs)
        for c in s.state_changelog_topics:
            internal[c.name] = TopicInfo(c.name, n, c.replication_factor, c.configs)
    to_create = tuple(i for name, i in sorted(internal.items()) if partitions_of(name) is None)
    if to_create:
        return ConfiguredTopology(tasks, ((MISSING_INTERNAL_TOPICS, "Internal topics are "
                                           f"missing: {summarize(i.name for i in to_create)}"),),
                                  to_create)
    bad = sorted(name for name, i in internal.items() if partitions_of(name) != i.partitions)
    if bad:
        return ConfiguredTopology({}, ((INCORRECTLY_PARTITIONED_TOPICS, "Internal topics "
                                        f"{', '.join(bad)} have the wrong number of partitions."),))
    return ConfiguredTopology(tasks)


def summarize(names: Iterable[str]) -> str:
    """A status detail's topic list, as Kafka 4.4 shortens it: three names, then a count."""
    items = list(names)
    if len(items) <= 3:
        return ", ".join(items)
    return f"{', '.join(items[:3])} and {len(items) - 3} additional topics"


def topology_topics(t: Topology) -> list[str]:
    return sorted({n for s in t.subtopologies for n in s.source_topics}
                  | {r.name for s in t.subtopologies for r in s.repartition_source_topics}
                  | {c.name for s in t.subtopologies for c in s.state_changelog_topics})


# ---- the assignor --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AssignorMember:
    member_id: str
    process_id: str
    active: frozenset[TaskId]  # the previous target, for stickiness
    standby: frozenset[TaskId]
    # the task offsets the member last reported (its local state of each task)
    task_offsets: Mapping[TaskId, int] = field(default_factory=dict)


def sticky_assign(members: list[AssignorMember], tasks: Mapping[str, int],
                  num_standby: int) -> dict[str, Tasks]:
    """Active tasks balanced over members (a member keeps what it had while it stays within
    its share), then `num_standby` standbys per task on other processes than the active's.
    As Kafka 4.4's StickyTaskAssignor ranks a standby's candidates: the task's previous
    active owner, then its previous standbys, then members that reported an offset for it
    (the highest first), while the member is within its share of all tasks; then the member
    with the fewest standbys."""
    if not members:
        return {}
    ids = sorted(m.member_id for m in members)
    by_id = {m.member_id: m for m in members}
    all_tasks = sorted((s, p) for s, n in tasks.items() for p in range(n))
    floor, extra = divmod(len(all_tasks), len(ids))
    active: dict[str, set[TaskId]] = {i: set() for i in ids}
    owner: dict[TaskId, str] = {}
    prev = {t: m.member_id for m in members for t in m.active}
    for t in all_tasks:
        mid = prev.get(t)
        if mid is None:
            continue
        load = len(active[mid])
        if load < floor or (load == floor and extra > 0):
            if load == floor:
                extra -= 1
            active[mid].add(t)
            owner[t] = mid
    standby_prev = {t: {m.member_id for m in members if t in m.standby} for t in all_tasks}
    for t in all_tasks:
        if t in owner:
            continue
        mid = min(ids, key=lambda i: (len(active[i]), i not in standby_prev[t], i))
        active[mid].add(t)
        owner[t] = mid
    standby: dict[str, set[TaskId]] = {i: set() for i in ids}
    if num_standby > 0:
        share = -(-len(all_tasks) * (1 + num_standby) // len(ids))

        def rank(i: str, t: TaskId) -> tuple[int, int]:
            if len(active[i]) + len(standby[i]) >= share:
                return 3, 0
            if prev.get(t) == i:
                return 0, 0
            if i in standby_prev[t]:
                return 1, 0
            offset = by_id[i].task_offsets.get(t)
            return (2, -offset) if offset is not None else (3, 0)

        for t in all_tasks:
            used = {by_id[owner[t]].process_id}
            for _ in range(num_standby):
                candidates = [i for i in ids if by_id[i].process_id not in used]
                if not candidates:
                    break
                mid = min(candidates, key=lambda i: (*rank(i, t), len(standby[i]), i))
                standby[mid].add(t)
                used.add(by_id[mid].process_id)
    return {i: Tasks(frozenset(active[i]), frozenset(standby[i])) for i in ids}


# Kafka 4.4's built-in task assignors by name (group.streams.assignors, streams.assignor.name)
TASK_ASSIGNORS: dict[str, Callable[[list[AssignorMember], Mapping[str, int], int],
                                   dict[str, Tasks]]] = {"sticky": sticky_assign}


# ---- requests and results ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StreamsHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    endpoint_information_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: Topology | None = None
    owned: Tasks | None = None  # None: unchanged since the last heartbeat
    process_id: str | None = None
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] | None = None
    shutdown_application: bool = False
    client_id: str = ""
    client_host: str = ""
    # None: unchanged since the last heartbeat
    task_offsets: tuple[TaskOffset, ...] | None = None
    task_end_offsets: tuple[TaskOffset, ...] | None = None


@dataclass(frozen=True, slots=True)
class StreamsHeartbeatResult:
    error: ErrorCode
    member_id: str = ""
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    error_message: str | None = None
    status: tuple[tuple[int, str], ...] | None = None
    assignment: Tasks | None = None
    endpoint_information_epoch: int = 0
    # (host, port), active partitions, standby partitions: (topic, partitions) each
    partitions_by_user_endpoint: tuple[EndpointPartitions, ...] | None = None
    to_create: tuple[TopicInfo, ...] = ()
    task_offset_interval_ms: int = 0
    acceptable_recovery_lag: int = 0


@dataclass(frozen=True, slots=True)
class DescribedStreamsMember:
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    topology_epoch: int
    process_id: str
    user_endpoint: tuple[str, int] | None
    client_tags: tuple[tuple[str, str], ...]
    assignment: Tasks
    target_assignment: Tasks


@dataclass(frozen=True, slots=True)
class StreamsGroupDescription:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    topology: Topology | None
    members: tuple[DescribedStreamsMember, ...]
    stored_description_epoch: int = -1  # KIP-1331
    assignor_name: str = "sticky"  # streams.assignor.name, else the node's first assignor


# ---- state ----------------------------------------------------------------------------------


@dataclass(slots=True)
class StreamsMember:
    member_id: str
    process_id: str
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    topology_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Tasks = EMPTY_TASKS
    pending_revocation: Tasks = EMPTY_TASKS
    reported_owned: Tasks = EMPTY_TASKS
    session_deadline: int = 0
    revocation_deadline: int | None = None
    left_temporarily: bool = False
    # what the member last reported (kept in memory only, as Kafka's MemberTaskOffsets)
    task_offsets: dict[TaskId, int] = field(default_factory=dict)
    task_end_offsets: dict[TaskId, int] = field(default_factory=dict)


@dataclass(slots=True)
class StreamsGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    topology: Topology | None = None
    configured: ConfiguredTopology | None = None
    partitions_fingerprint: tuple[tuple[str, int], ...] = ()
    members: dict[str, StreamsMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    target: dict[str, Tasks] = field(default_factory=dict)
    endpoint_information_epoch: int = 0
    assignment_delayed_until: int | None = None
    assignment_timestamp: int = 0  # when the target was last computed (0: never)
    shutdown_requested: bool = False
    dead: bool = False
    # KIP-1331: the topology epoch whose description the topology description plugin holds,
    # and the one whose push it refused for good (-1: none); persisted in StreamsGroupMetadata
    stored_description_epoch: int = -1
    failed_description_epoch: int = -1
    # committed offsets, as on ClassicGroup and ConsumerGroup
    offsets: dict[TopicPartition, Any] = field(default_factory=dict)
    pending_commits: dict[TopicPartition, int] = field(default_factory=dict)
    # the streams-group records last written (or replayed) for this group: key -> value
    persisted: dict[bytes, bytes] = field(default_factory=dict)

    @property
    def state(self) -> StreamsGroupState:
        if self.dead:
            return StreamsGroupState.DEAD
        if not self.members:
            return StreamsGroupState.EMPTY
        if self.configured is None or not self.configured.ready:
            return StreamsGroupState.NOT_READY
        if self.group_epoch > self.assignment_epoch or self.assignment_delayed_until is not None:
            return StreamsGroupState.ASSIGNING
        if any(m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
               or m.assigned != self.target.get(m.member_id, EMPTY_TASKS)
               for m in self.members.values()):
            return StreamsGroupState.RECONCILING
        return StreamsGroupState.STABLE


# ---- the coordinator part -----------------------------------------------------------------------


class StreamsGroups:
    """The KIP-1071 groups of one coordinator partition (mixed into GroupCoordinator)."""

    streams_groups: dict[str, StreamsGroup]
    config: GroupConfig
    group_configs: Callable[[str], Mapping[str, str]]

    def _group_int(self, group_id: str, key: str, default: int) -> int:
        raise NotImplementedError

    def _claim_group_id(self, group_id: str) -> ErrorCode | None:
        """None when a streams group may take this id; the error otherwise."""
        raise NotImplementedError

    def _adopt_offsets(self, g: StreamsGroup) -> None:
        """Take over the offsets of the empty classic group `g` replaces, if any."""
        raise NotImplementedError

    def _write_group_records(self, records: list[OffsetsRecord],
                             group: StreamsGroup | None = None) -> None:
        raise NotImplementedError

    def streams_session_timeout_ms(self, group_id: str) -> int:
        return self._group_int(group_id, "streams.session.timeout.ms",
                               self.config.streams_session_timeout_ms)

    def streams_heartbeat_interval_ms(self, group_id: str) -> int:
        return self._group_int(group_id, "streams.heartbeat.interval.ms",
                               self.config.streams_heartbeat_interval_ms)

    def streams_num_standby_replicas(self, group_id: str) -> int:
        return self._group_int(group_id, "streams.num.standby.replicas",
                               self.config.streams_num_standby_replicas)

    def streams_initial_rebalance_delay_ms(self, group_id: str) -> int:
        return self._group_int(group_id, "streams.initial.rebalance.delay.ms",
                               self.config.streams_initial_rebalance_delay_ms)

    def streams_task_offset_interval_ms(self, group_id: str) -> int:
        return self._group_int(group_id, "streams.task.offset.interval.ms",
                               self.config.streams_task_offset_interval_ms)

    def streams_acceptable_recovery_lag(self, group_id: str) -> int:
        return self._group_int(group_id, "streams.acceptable.recovery.lag",
                               self.config.streams_acceptable_recovery_lag)

    def streams_assignor_name(self, group_id: str) -> str:
        """The group's streams.assignor.name when the node has that assignor (Kafka 4.4 falls
        back to the default, warning, when the node's list no longer has it); else the first
        of group.streams.assignors."""
        name = self.group_configs(group_id).get("streams.assignor.name", "").strip()
        registered = [n for n in self.config.streams_assignors if n in TASK_ASSIGNORS]
        if name in registered:
            return name
        return registered[0] if registered else "sticky"
    def streams_assignment_interval_ms(self, group_id: str) -> int:
        return self._group_int(group_id, "streams.assignment.interval.ms",
                               self.config.streams_assignment_interval_ms)

    def streams_heartbeat(self, req: StreamsHeartbeatRequest,
                          partitions_of: Callable[[str], int | None],
                          now_ms: int) -> StreamsHeartbeatResult:
        result = self._streams_heartbeat(req, partitions_of, now_ms)
        g = self.streams_groups.get(req.group_id)
        if g is not None:
            self._persist_streams(g)
        return result

    def _streams_heartbeat(self, req: StreamsHeartbeatRequest,
                           partitions_of: Callable[[str], int | None],
                           now_ms: int) -> StreamsHeartbeatResult:
        interval = self.streams_heartbeat_interval_ms(req.group_id)
        error = _validate(req)
        if error is not None:
            return StreamsHeartbeatResult(ErrorCode.invalid_request, member_id=req.member_id,
                                          error_message=error)
        if req.topology is not None:
            why = validate_topology(req.topology)
            if why is not None:
                return StreamsHeartbeatResult(ErrorCode.streams_invalid_topology,
                                              member_id=req.member_id, error_message=why)
        g = self.streams_groups.get(req.group_id)
        if g is None:
            if req.member_epoch != JOIN_EPOCH:
                return StreamsHeartbeatResult(
                    ErrorCode.unknown_member_id, member_id=req.member_id,
                    error_message=f"Member {req.member_id} is not a member of group "
                                  f"{req.group_id}.")
            refused = self._claim_group_id(req.group_id)
            if refused is not None:
                return StreamsHeartbeatResult(refused, member_id=req.member_id,
                                              error_message=f"Group {req.group_id} is not a "
                                                            "streams group.")
            g = StreamsGroup(req.group_id)
            self.streams_groups[req.group_id] = g
            self._adopt_offsets(g)
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._streams_leave(g, req, now_ms)
        known = req.member_id in g.members
        was_empty = not g.members
        member, err, message = self._streams_member(g, req, now_ms)
        if member is None:
            return StreamsHeartbeatResult(err, member_id=req.member_id, error_message=message)
        bump = not known
        status: list[tuple[int, str]] = []
        if req.topology is not None:
            member.topology_epoch = req.topology.epoch
            others = [m for m in g.members.values() if m is not member]
            if g.topology is None or (req.topology.epoch > g.topology.epoch and not others):
                g.topology = req.topology
                bump = True
        if g.topology is not None and member.topology_epoch < g.topology.epoch:
            status.append((STALE_TOPOLOGY, f"The member's topology epoch "
                           f"{member.topology_epoch} is behind the group's topology epoch "
                           f"{g.topology.epoch}."))
        if req.process_id is not None and req.process_id != member.process_id:
            member.process_id, bump = req.process_id, True
        if req.rack_id is not None and req.rack_id != member.rack_id:
            member.rack_id, bump = req.rack_id, True
        if req.client_tags is not None and req.client_tags != member.client_tags:
            member.client_tags, bump = req.client_tags, True
        if req.user_endpoint is not None and req.user_endpoint != member.user_endpoint:
            member.user_endpoint, bump = req.user_endpoint, True
        if req.rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.shutdown_application:
            g.shutdown_requested = True
        if req.task_offsets is not None:
            member.task_offsets = {(sub, p): o for sub, p, o in req.task_offsets}
        if req.task_end_offsets is not None:
            member.task_end_offsets = {(sub, p): o for sub, p, o in req.task_end_offsets}
        member.session_deadline = now_ms + self.streams_session_timeout_ms(g.group_id)
        fingerprint = tuple((n, partitions_of(n) or -1) for n in
                            (topology_topics(g.topology) if g.topology else ()))
        if fingerprint != g.partitions_fingerprint or g.configured is None:
            g.partitions_fingerprint = fingerprint
            if g.topology is not None:
                g.configured = configure(g.topology, partitions_of)
            bump = True
        if bump:
            delay = self.streams_initial_rebalance_delay_ms(g.group_id)
            if was_empty and delay > 0 and g.assignment_delayed_until is None:
                g.assignment_delayed_until = now_ms + delay
            g.group_epoch += 1
        delayed = self._maybe_assign(g, now_ms)
        previous = member.assigned
        if req.owned is not None:
            member.reported_owned = req.owned
        self._streams_reconcile(g, member, req.owned, now_ms)
        configured = g.configured
        if delayed:
            status.append((ASSIGNMENT_DELAYED, delayed))
        if configured is not None:
            status.extend(configured.status)
        if g.shutdown_requested:
            status.append((SHUTDOWN_APPLICATION, "A KafkaStreams instance encountered a fatal "
                                                 "error and requested a shutdown for the "
                                                 "entire application."))
        send = (req.member_epoch == JOIN_EPOCH or member.assigned != previous
                or member.assigned != member.reported_owned)
        endpoints = None
        if req.endpoint_information_epoch != g.endpoint_information_epoch:
            endpoints = self._endpoints(g)
        return StreamsHeartbeatResult(
            ErrorCode.none, member_id=member.member_id, member_epoch=member.member_epoch,
            heartbeat_interval_ms=interval, status=tuple(status),
            assignment=member.assigned if send else None,
            endpoint_information_epoch=g.endpoint_information_epoch,
            partitions_by_user_endpoint=endpoints,
            to_create=configured.to_create if configured is not None else (),
            task_offset_interval_ms=self.streams_task_offset_interval_ms(g.group_id),
            acceptable_recovery_lag=self.streams_acceptable_recovery_lag(g.group_id))

    def _streams_member(self, g: StreamsGroup, req: StreamsHeartbeatRequest, now_ms: int,
                        ) -> tuple[StreamsMember | None, ErrorCode, str | None]:
        member = g.members.get(req.member_id)
        if req.member_epoch == JOIN_EPOCH:
            if req.instance_id is not None:
                known = g.static_members.get(req.instance_id)
                if known is not None and known != req.member_id:
                    old = g.members[known]
                    if not old.left_temporarily:
                        return None, ErrorCode.unreleased_instance_id, (
                            f"Static member {req.instance_id} is still in use.")
                    # the static member comes back and takes over its predecessor's tasks
                    del g.members[known]
                    old.member_id, old.left_temporarily = req.member_id, False
                    old.client_id, old.client_host = req.client_id, req.client_host
                    g.members[req.member_id] = old
                    g.static_members[req.instance_id] = req.member_id
                    if known in g.target:
                        g.target[req.member_id] = g.target.pop(known)
                    return old, ErrorCode.none, None
            if len(g.members) >= self.config.streams_max_size and member is None:
                return None, ErrorCode.group_max_size_reached, (
                    f"The streams group has reached its maximum capacity of "
                    f"{self.config.streams_max_size} members.")
            if member is not None:
                # a member that lost its epoch rejoins with nothing held
                self._release(g, member)
                member.member_epoch, member.previous_member_epoch = JOIN_EPOCH, -1
                return member, ErrorCode.none, None
            member = StreamsMember(
                member_id=req.member_id, process_id=req.process_id or "",
                client_id=req.client_id, client_host=req.client_host,
                rebalance_timeout_ms=req.rebalance_timeout_ms, instance_id=req.instance_id)
            g.members[req.member_id] = member
            if req.instance_id is not None:
                g.static_members[req.instance_id] = req.member_id
            return member, ErrorCode.none, None
        if member is None or member.left_temporarily:
            return None, ErrorCode.unknown_member_id, (
                f"Member {req.member_id} is not a member of group {g.group_id}.")
        if req.member_epoch == member.member_epoch:
            return member, ErrorCode.none, None
        if req.member_epoch == member.previous_member_epoch and req.owned is not None \
                and not req.owned.minus(member.assigned):
            return member, ErrorCode.none, None
        which = "smaller" if req.member_epoch < member.member_epoch else "greater"
        return None, ErrorCode.fenced_member_epoch, (
            f"The streams group member has a {which} member epoch ({req.member_epoch}) than "
            f"the one known by the group coordinator ({member.member_epoch}). The member must "
            "abandon all its partitions and rejoin.")

    def _streams_leave(self, g: StreamsGroup, req: StreamsHeartbeatRequest,
                       now_ms: int) -> StreamsHeartbeatResult:
        member = g.members.get(req.member_id)
        if member is None and req.instance_id is not None:
            known = g.static_members.get(req.instance_id)
            member = g.members.get(known) if known else None
        if member is None:
            return StreamsHeartbeatResult(ErrorCode.unknown_member_id, member_id=req.member_id,
                                          error_message=f"Member {req.member_id} is not a "
                                                        f"member of group {g.group_id}.")
        if req.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            member.left_temporarily = True
            member.session_deadline = now_ms + self.streams_session_timeout_ms(g.group_id)
            return StreamsHeartbeatResult(ErrorCode.none, member_id=req.member_id,
                                          member_epoch=STATIC_LEAVE_EPOCH)
        self._remove_streams_member(g, member, now_ms)
        return StreamsHeartbeatResult(ErrorCode.none, member_id=req.member_id,
                                      member_epoch=LEAVE_EPOCH)

    def _remove_streams_member(self, g: StreamsGroup, m: StreamsMember, now_ms: int) -> None:
        del g.members[m.member_id]
        g.target.pop(m.member_id, None)
        if m.instance_id is not None and g.static_members.get(m.instance_id) == m.member_id:
            del g.static_members[m.instance_id]
        g.group_epoch += 1
        if not g.members:
            g.shutdown_requested = False
        self._maybe_assign(g, now_ms)

    @staticmethod
    def _release(g: StreamsGroup, m: StreamsMember) -> None:
        m.assigned = m.pending_revocation = m.reported_owned = EMPTY_TASKS
        m.state, m.revocation_deadline = MemberState.STABLE, None

    def _maybe_assign(self, g: StreamsGroup, now_ms: int) -> str | None:
        """Compute the target when the epoch moved. While the initial rebalance delay runs
        (it starts when the first member joins an empty group) the target is empty at the
        group epoch, so members get an epoch and ASSIGNMENT_DELAYED; when it ends the group
        epoch moves and the real target follows. Within the assignment interval the target
        waits. The ASSIGNMENT_DELAYED detail while delayed, else None."""
        if g.assignment_delayed_until is not None:
            if now_ms < g.assignment_delayed_until:
                if g.group_epoch > g.assignment_epoch:
                    g.target = {m: EMPTY_TASKS for m in g.members}
                    g.assignment_epoch = g.group_epoch
                return "Assignment delayed due to the configured initial rebalance delay."
            g.assignment_delayed_until = None
            g.group_epoch += 1
        if g.group_epoch <= g.assignment_epoch:
            return None
        if not assignment_interval_elapsed(g.assignment_timestamp,
                                           self.streams_assignment_interval_ms(g.group_id),
                                           now_ms):
            return "Assignment delayed due to the configured assignment interval."
        configured = g.configured
        tasks = configured.tasks if configured is not None and configured.ready else {}
        members = [AssignorMember(m.member_id, m.process_id,
                                  g.target.get(m.member_id, EMPTY_TASKS).active,
                                  g.target.get(m.member_id, EMPTY_TASKS).standby,
                                  m.task_offsets)
                   for m in g.members.values()]
        # the target is used as the assignor gives it: no warm-up tasks (module docstring)
        assign = TASK_ASSIGNORS[self.streams_assignor_name(g.group_id)]
        g.target = assign(members, tasks, self.streams_num_standby_replicas(g.group_id))
        g.assignment_epoch = g.group_epoch
        g.assignment_timestamp = now_ms
        g.endpoint_information_epoch += 1
        return None

    def _streams_reconcile(self, g: StreamsGroup, m: StreamsMember, owned: Tasks | None,
                           now_ms: int) -> None:
        if m.state is MemberState.UNREVOKED_TASKS:
            reported = owned if owned is not None else m.reported_owned
            if reported.intersect(m.pending_revocation):
                return
            m.pending_revocation = EMPTY_TASKS
            m.revocation_deadline = None
        target = g.target.get(m.member_id, EMPTY_TASKS)
        revoke = m.assigned.minus(target)
        if revoke:
            m.assigned = m.assigned.intersect(target)
            m.pending_revocation = revoke
            m.state = MemberState.UNREVOKED_TASKS
            m.revocation_deadline = now_ms + max(m.rebalance_timeout_ms, 0)
            return
        wanted = target.minus(m.assigned)
        held = self._held_elsewhere(g, m)
        unreleased = Tasks(
            frozenset(t for t in wanted.active if t in held[0] or t in held[2]),
            frozenset(t for t in wanted.standby if t in held[1]),
            frozenset(t for t in wanted.warmup if t in held[1]))
        if m.member_epoch != g.assignment_epoch:
            m.previous_member_epoch, m.member_epoch = m.member_epoch, g.assignment_epoch
        m.assigned = target.minus(unreleased)
        m.state = MemberState.UNRELEASED_TASKS if unreleased else MemberState.STABLE

    @staticmethod
    def _held_elsewhere(g: StreamsGroup, m: StreamsMember,
                        ) -> tuple[set[TaskId], set[TaskId], set[TaskId]]:
        """Tasks other members hold: active anywhere; any kind on m's process; and
        standby/warmup on m's process (what an active task waits for)."""
        active: set[TaskId] = set()
        same_process: set[TaskId] = set()
        same_process_replicas: set[TaskId] = set()
        for o in g.members.values():
            if o is m:
                continue
            held = Tasks(o.assigned.active | o.pending_revocation.active,
                         o.assigned.standby | o.pending_revocation.standby,
                         o.assigned.warmup | o.pending_revocation.warmup)
            active |= held.active
            if o.process_id == m.process_id:
                same_process |= held.all()
                same_process_replicas |= held.standby | held.warmup
        return active, same_process, same_process_replicas

    def _endpoints(self, g: StreamsGroup) -> tuple[EndpointPartitions, ...]:
        topo = g.topology
        sources: dict[str, list[str]] = {}
        if topo is not None:
            for s in topo.subtopologies:
                sources[s.subtopology_id] = list(s.source_topics) + [
                    r.name for r in s.repartition_source_topics]

        def partitions(tasks: Iterable[TaskId]) -> TopicPartitions:
            by: dict[str, set[int]] = {}
            for s, p in tasks:
                for topic in sources.get(s, ()):
                    by.setdefault(topic, set()).add(p)
            return tuple((t, tuple(sorted(ps))) for t, ps in sorted(by.items()))

        return tuple((m.user_endpoint, partitions(m.assigned.active),
                      partitions(m.assigned.standby | m.assigned.warmup))
                     for m in sorted(g.members.values(), key=lambda m: m.member_id)
                     if m.user_endpoint is not None)

    def streams_tick(self, now_ms: int) -> None:
        for g in list(self.streams_groups.values()):
            before = (g.group_epoch, g.assignment_epoch)
            for m in list(g.members.values()):
                late = m.revocation_deadline is not None and now_ms >= m.revocation_deadline
                if now_ms >= m.session_deadline or late:
                    self._remove_streams_member(g, m, now_ms)
            if g.assignment_delayed_until is not None:
                # the initial rebalance delay's end (Kafka's timer); a target held back by the
                # assignment interval waits for a heartbeat, as in Kafka
                self._maybe_assign(g, now_ms)
            if (g.group_epoch, g.assignment_epoch) != before:
                self._persist_streams(g)

    # ---- persistence ----------------------------------------------------------------------

    def _persist_streams(self, g: StreamsGroup) -> None:
        """Write the records of `g` that changed since the last write; tombstone the rest
        (all of them once the group is dead)."""
        current = {} if g.dead else streams_group_records(g)
        gone = sorted((k for k in g.persisted if k not in current), key=_tombstone_order)
        out = [OffsetsRecord(k, None) for k in gone]
        out += [OffsetsRecord(k, v) for k, v in current.items() if g.persisted.get(k) != v]
        if out:
            g.persisted = current
            self._write_group_records(out, g)

    def replay_streams_record(self, key: rec.StreamsGroupKey, value: bytes | None,
                              raw_key: bytes) -> StreamsGroup | None:
        """Apply one streams-group record while loading. Returns the group it touched."""
        g = self.streams_groups.get(key.group)
        t, mid = key.record_type, key.member_id
        if value is None:
            if g is None:
                return None
            g.persisted.pop(raw_key, None)
            if t == rec.STREAMS_GROUP_METADATA:
                g.dead = True
                del self.streams_groups[key.group]
            elif t == rec.STREAMS_GROUP_MEMBER_METADATA and mid is not None:
                g.members.pop(mid, None)
            elif t == rec.STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER and mid is not None:
                g.target.pop(mid, None)
            elif t == rec.STREAMS_GROUP_TOPOLOGY:
                g.topology = None
            return g
        if g is None:
            g = self.streams_groups[key.group] = StreamsGroup(key.group)
        g.persisted[raw_key] = value
        if t == rec.STREAMS_GROUP_METADATA:
            (g.group_epoch, g.stored_description_epoch,
             g.failed_description_epoch) = rec.decode_streams_group_metadata(value)
        elif t == rec.STREAMS_GROUP_TOPOLOGY:
            g.topology = _topology_of(*rec.decode_streams_group_topology_value(value))
        elif t == rec.STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA:
            g.assignment_epoch, g.assignment_timestamp = rec.decode_target_assignment_metadata(
                value, "StreamsGroupTargetAssignmentMetadataValue")
        elif t == rec.STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER and mid is not None:
            g.target[mid] = _tasks_of(rec.decode_streams_group_target_assignment_member_value(
                value))
        elif mid is not None:
            m = g.members.get(mid)
            if m is None:
                m = g.members[mid] = StreamsMember(mid, "", "", "", -1)
            if t == rec.STREAMS_GROUP_MEMBER_METADATA:
                mv = rec.decode_streams_group_member_metadata_value(value)
                m.instance_id, m.rack_id = mv.instance_id, mv.rack_id
                m.client_id, m.client_host = mv.client_id, mv.client_host
                m.rebalance_timeout_ms, m.topology_epoch = (mv.rebalance_timeout_ms,
                                                            mv.topology_epoch)
                m.process_id, m.user_endpoint = mv.process_id, mv.user_endpoint
                m.client_tags = mv.client_tags
            else:
                cv = rec.decode_streams_group_current_member_assignment_value(value)
                m.left_temporarily = cv.member_epoch == STATIC_LEAVE_EPOCH
                m.member_epoch = cv.previous_member_epoch if m.left_temporarily \
                    else cv.member_epoch
                m.previous_member_epoch = -1 if m.left_temporarily \
                    else cv.previous_member_epoch
                m.state = _STATE_BY_VALUE.get(cv.state, MemberState.STABLE)
                m.assigned = _tasks_of(cv.assigned)
                m.pending_revocation = _tasks_of(cv.pending_revocation)
        return g

    def finish_loading_streams_groups(self, now_ms: int) -> None:
        """After the last replayed record: rebuild indexes, start session and revocation
        timers from now."""
        for g in self.streams_groups.values():
            g.static_members = {m.instance_id: mid for mid, m in g.members.items()
                                if m.instance_id is not None}
            for m in g.members.values():
                m.session_deadline = now_ms + self.streams_session_timeout_ms(g.group_id)
                m.reported_owned = m.assigned
                m.revocation_deadline = (now_ms + max(m.rebalance_timeout_ms, 0)
                                         if m.state is MemberState.UNREVOKED_TASKS else None)

    def configure_loaded_streams_groups(self, partitions_of: Callable[[str], int | None],
                                        ) -> None:
        """After a load: configure each group's topology against the metadata as its last
        heartbeat did, so the next heartbeat moves the epoch only if the topics changed."""
        for g in self.streams_groups.values():
            if g.topology is not None and g.configured is None:
                g.partitions_fingerprint = tuple(
                    (n, partitions_of(n) or -1) for n in topology_topics(g.topology))
                g.configured = configure(g.topology, partitions_of)

    def describe_streams_group(self, group_id: str) -> StreamsGroupDescription | None:
        g = self.streams_groups.get(group_id)
        if g is None or g.dead:
            return None
        members = tuple(DescribedStreamsMember(
            member_id=m.member_id, member_epoch=m.member_epoch, instance_id=m.instance_id,
            rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
            topology_epoch=m.topology_epoch, process_id=m.process_id,
            user_endpoint=m.user_endpoint, client_tags=m.client_tags, assignment=m.assigned,
            target_assignment=g.target.get(m.member_id, EMPTY_TASKS))
            for m in g.members.values())
        return StreamsGroupDescription(group_id, g.state.value, g.group_epoch,
                                       g.assignment_epoch, g.topology, members,
                                       g.stored_description_epoch,
                                       self.streams_assignor_name(group_id))

    # ---- KIP-1331 topology descriptions (streams_topology_description.py) -----------------

    def check_description_push(self, group_id: str, member_id: str,
                               topology_epoch: int) -> tuple[ErrorCode, str | None]:
        """Whether a member may push the description of `topology_epoch`: the group is a
        streams group, the member is in it, the epoch is its topology's."""
        g = self.streams_groups.get(group_id)
        if g is None or g.dead:
            return ErrorCode.group_id_not_found, f"Group {group_id} not found."
        if member_id not in g.members:
            return (ErrorCode.unknown_member_id,
                    f"Member {member_id} is not a member of group {group_id}.")
        current = -1 if g.topology is None else g.topology.epoch
        if topology_epoch != current:
            return (ErrorCode.invalid_request,
                    f"Topology epoch {topology_epoch} is not the group's topology epoch "
                    f"{current}.")
        return ErrorCode.none, None

    def record_description_push(self, group_id: str, topology_epoch: int,
                                stored: bool) -> None:
        """The plugin stored (or refused for good) the description of `topology_epoch`."""
        g = self.streams_groups.get(group_id)
        if g is None or g.dead:
            return
        if stored:
            g.stored_description_epoch = topology_epoch
        else:
            g.failed_description_epoch = topology_epoch
        self._persist_streams(g)


def _validate(req: StreamsHeartbeatRequest) -> str | None:
    """Kafka's throwIfStreamsGroupHeartbeatRequestIsInvalid, as messages."""
    if not req.group_id:
        return "GroupId can't be empty."
    if not req.member_id:
        return "MemberId can't be empty."
    if req.instance_id is not None and not req.instance_id:
        return "InstanceId can't be empty."
    if req.rack_id is not None and not req.rack_id:
        return "RackId can't be empty."
    if req.member_epoch == JOIN_EPOCH:
        if req.rebalance_timeout_ms <= 0:
            return "RebalanceTimeoutMs must be provided in first request."
        if req.owned is not None and req.owned:
            return "ActiveTasks, StandbyTasks and WarmupTasks must be empty when (re-)joining."
        if req.topology is None:
            return "Topology must be non-null when joining."
        if not req.process_id:
            return "ProcessId can't be empty."
    elif req.member_epoch == STATIC_LEAVE_EPOCH and req.instance_id is None:
        return "InstanceId can't be null."
    elif req.member_epoch < STATIC_LEAVE_EPOCH:
        return f"MemberEpoch is {req.member_epoch}, but must be greater than or equal to -2."
    for offsets in (req.task_offsets, req.task_end_offsets):
        seen: set[TaskId] = set()
        for sub, p, _ in offsets or ():
            if (sub, p) in seen:
                return (f"Task offsets contain a duplicate entry for subtopology {sub} and "
                        f"partition {p}.")
            seen.add((sub, p))
    return None



# ---- records ---------------------------------------------------------------------------------

_STATE_VALUE = {MemberState.STABLE: 1, MemberState.UNREVOKED_TASKS: 2,
                MemberState.UNRELEASED_TASKS: 3}  # Kafka's streams MemberState
_STATE_BY_VALUE = {v: k for k, v in _STATE_VALUE.items()}
# tombstones in Kafka's order: member records, then the group's, StreamsGroupMetadata last
_TOMBSTONE_ORDER = {rec.STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT: 0,
                    rec.STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER: 1,
                    rec.STREAMS_GROUP_MEMBER_METADATA: 2,
                    rec.STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA: 3,
                    rec.STREAMS_GROUP_TOPOLOGY: 4,
                    rec.STREAMS_GROUP_METADATA: 5}


def _tombstone_order(key: bytes) -> tuple[int, bytes]:
    return _TOMBSTONE_ORDER.get(int.from_bytes(key[:2], "big", signed=True), 0), key


def _task_lists(t: Tasks) -> rec.StreamsTasks:
    return rec.StreamsTasks(grouped(t.active), grouped(t.standby), grouped(t.warmup))


def _tasks_of(t: rec.StreamsTasks) -> Tasks:
    return tasks_of(t.active, t.standby, t.warmup)


def _topic_record(t: TopicInfo) -> rec.StreamsTopicInfo:
    return rec.StreamsTopicInfo(t.name, t.partitions, t.replication_factor, t.configs)


def _topic_of(t: rec.StreamsTopicInfo) -> TopicInfo:
    return TopicInfo(t.name, t.partitions, t.replication_factor, t.configs)


def _topology_of(epoch: int, subtopologies: tuple[rec.StreamsSubtopology, ...]) -> Topology:
    return Topology(epoch, tuple(
        Subtopology(s.subtopology_id, s.source_topics, s.source_topic_regex,
                    tuple(_topic_of(t) for t in s.state_changelog_topics),
                    s.repartition_sink_topics,
                    tuple(_topic_of(t) for t in s.repartition_source_topics),
                    tuple((sources, repartitions)
                          for sources, _regexes, repartitions in s.copartition_groups))
        for s in subtopologies))


def streams_group_records(g: StreamsGroup) -> dict[bytes, bytes]:
    """Every streams-group record that describes `g` now, key -> value, in Kafka's write
    order."""
    gid = g.group_id
    key = rec.encode_streams_group_key
    out: dict[bytes, bytes] = {}
    members = sorted(g.members.values(), key=lambda x: x.member_id)
    for m in members:
        out[key(rec.STREAMS_GROUP_MEMBER_METADATA, gid, m.member_id)] = \
            rec.encode_streams_group_member_metadata_value(rec.StreamsGroupMemberMetadataValue(
                m.instance_id, m.rack_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                m.topology_epoch, m.process_id, m.user_endpoint, m.client_tags))
    if g.topology is not None:
        out[key(rec.STREAMS_GROUP_TOPOLOGY, gid)] = rec.encode_streams_group_topology_value(
            g.topology.epoch, tuple(
                rec.StreamsSubtopology(
                    s.subtopology_id, s.source_topics, s.source_topic_regex,
                    tuple(_topic_record(t) for t in s.state_changelog_topics),
                    s.repartition_sink_topics,
                    tuple(_topic_record(t) for t in s.repartition_source_topics),
                    tuple((sources, (), repartitions)
                          for sources, repartitions in s.copartition_groups))
                for s in g.topology.subtopologies))
    out[key(rec.STREAMS_GROUP_METADATA, gid)] = rec.encode_streams_group_metadata_value(
        g.group_epoch, stored_description_epoch=g.stored_description_epoch,
        failed_description_epoch=g.failed_description_epoch)
    for member_id, target in sorted(g.target.items()):
        out[key(rec.STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER, gid, member_id)] = \
            rec.encode_streams_group_target_assignment_member_value(_task_lists(target))
    out[key(rec.STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA, gid)] = \
        rec.encode_streams_group_target_assignment_metadata_value(g.assignment_epoch,
                                                                  g.assignment_timestamp)
    for m in members:
        epoch, previous = m.member_epoch, m.previous_member_epoch
        if m.left_temporarily:
            epoch, previous = STATIC_LEAVE_EPOCH, m.member_epoch
        out[key(rec.STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT, gid, m.member_id)] = \
            rec.encode_streams_group_current_member_assignment_value(
                rec.StreamsGroupCurrentMemberAssignmentValue(
                    epoch, previous, _STATE_VALUE[m.state], _task_lists(m.assigned),
                    _task_lists(m.pending_revocation)))
    return out
