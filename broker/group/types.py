"""Inputs and outputs of the pure group coordinator (no kio here: handlers translate)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from broker.coordinator.core import Reply as Reply
from broker.coordinator.core import Token as Token

TopicPartition = tuple[str, int]

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's ClassicGroupNewMemberJoinTimeoutMs


@dataclass(frozen=True, slots=True)
class GroupConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS
    # KIP-848
    consumer_session_timeout_ms: int = 45000
    consumer_heartbeat_interval_ms: int = 5000
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    consumer_max_size: int = 2**31 - 1
    # the least time between two target assignments of a group (Kafka 4.4's batching)
    consumer_assignment_interval_ms: int = 1000
    # KIP-1071
    streams_session_timeout_ms: int = 45000
    streams_heartbeat_interval_ms: int = 5000
    streams_max_size: int = 2**31 - 1
    streams_num_standby_replicas: int = 0
    streams_initial_rebalance_delay_ms: int = 3000
    streams_task_offset_interval_ms: int = 60000
    streams_acceptable_recovery_lag: int = 10000
    streams_assignors: tuple[str, ...] = ("sticky",)
    streams_assignment_interval_ms: int = 1000

    @classmethod
    def from_node_config(cls, cfg: Any) -> GroupConfig:
        def get(key: str, default: int) -> int:
            try:
                return int(cfg[key])
            except KeyError:  # a partial config (tests) falls back to Kafka's default
                return default

        def names(key: str, default: tuple[str, ...]) -> tuple[str, ...]:
            try:
                return tuple(str(x) for x in cfg[key])
            except KeyError:
                return default

        return cls(
            min_session_timeout_ms=get("group.min.session.timeout.ms", 6000),
            max_session_timeout_ms=get("group.max.session.timeout.ms", 1800000),
            initial_rebalance_delay_ms=get("group.initial.rebalance.delay.ms", 3000),
            max_size=get("group.max.size", 2**31 - 1),
            offsets_retention_ms=get("offsets.retention.minutes", 7 * 24 * 60) * 60000,
            offsets_retention_check_interval_ms=get("offsets.retention.check.interval.ms",
                                                    600000),
            offset_metadata_max_bytes=get("offset.metadata.max.bytes", 4096),
            consumer_session_timeout_ms=get("group.consumer.session.timeout.ms", 45000),
            consumer_heartbeat_interval_ms=get("group.consumer.heartbeat.interval.ms", 5000),
            consumer_max_size=get("group.consumer.max.size", 2**31 - 1),
            consumer_assignment_interval_ms=get("group.consumer.assignment.interval.ms", 1000),
            streams_session_timeout_ms=get("group.streams.session.timeout.ms", 45000),
            streams_heartbeat_interval_ms=get("group.streams.heartbeat.interval.ms", 5000),
            streams_max_size=get("group.streams.max.size", 2**31 - 1),
            streams_num_standby_replicas=get("group.streams.num.standby.replicas", 0),
            streams_initial_rebalance_delay_ms=get("group.streams.initial.rebalance.delay.ms",
                                                   3000),
            streams_task_offset_interval_ms=get("group.streams.task.offset.interval.ms", 60000),
            streams_acceptable_recovery_lag=get("group.streams.acceptable.recovery.lag", 10000),
            streams_assignors=names("group.streams.assignors", ("sticky",)),
            streams_assignment_interval_ms=get("group.streams.assignment.interval.ms", 1000),
        )


# ---- outputs ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetsRecord:
    """One record for __consumer_offsets; value None is a tombstone."""

    key: bytes
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Write:
    """Records to append with acks=all; the shell reports the outcome via write_completed."""

    write_id: int
    records: tuple[OffsetsRecord, ...]
    producer_id: int = -1  # >= 0: a transactional batch of this producer (TxnOffsetCommit)
    producer_epoch: int = -1


@dataclass(slots=True)
class Effects:
    replies: list[Reply] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)

    def extend(self, other: Effects) -> None:
        self.replies.extend(other.replies)
        self.writes.extend(other.writes)


# ---- classic protocol requests and results -----------------------------------------------


@dataclass(frozen=True, slots=True)
class JoinGroupRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    require_known_member_id: bool = True  # JoinGroup v4+
    # JoinGroup v9+ (KIP-814): a static leader that rejoins can be told to skip the assignment.
    # Older requests cannot carry that, and Kafka answers such a leader as a follower.
    supports_skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResult:
    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[JoinedMember, ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class SyncGroupResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None


@dataclass(frozen=True, slots=True)
class LeaveMember:
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveGroupResult:
    error: ErrorCode
    members: tuple[tuple[LeaveMember, ErrorCode], ...] = ()


@dataclass(frozen=True, slots=True)
class CommitPartition:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""
    commit_timestamp: int = -1
    """OffsetCommit v1's per-partition commit time; -1 (every other version) means now."""


@dataclass(frozen=True, slots=True)
class OffsetCommitRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    partitions: tuple[CommitPartition, ...]
    retention_time_ms: int = -1


@dataclass(frozen=True, slots=True)
class TxnOffsetCommitRequest:
    """TxnOffsetCommit: offsets that take effect when the producer's transaction commits.
    generation_id -1 / member_id "" (before v3, or from a client outside the group) skip
    the member check (KIP-447)."""

    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[CommitPartition, ...]
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class OffsetCommitResult:
    partitions: tuple[tuple[TopicPartition, ErrorCode], ...]

    def errors(self) -> dict[TopicPartition, ErrorCode]:
        return dict(self.partitions)


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    error: ErrorCode = ErrorCode.none


@dataclass(frozen=True, slots=True)
class OffsetFetchResult:
    error: ErrorCode
    partitions: tuple[FetchedOffset, ...] = ()


@dataclass(frozen=True, slots=True)
class OffsetDeleteResult:
    error: ErrorCode
    partitions: tuple[tuple[TopicPartition, ErrorCode], ...] = ()


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str  # "classic", "consumer" or "streams"


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol_data: str
    members: tuple[DescribedMember, ...]


def assignment_interval_elapsed(last_assignment_ms: int, interval_ms: int, now_ms: int) -> bool:
    """Whether a group may compute a new target assignment now (Kafka 4.4's batching,
    {consumer,share,streams}.assignment.interval.ms): always for its first one (no timestamp
    yet, 0) and with interval 0, else once the interval has passed since the last one."""
    return last_assignment_ms == 0 or interval_ms == 0 \
        or now_ms >= last_assignment_ms + interval_ms
