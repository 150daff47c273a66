"""The classic group model: a group's state, members and committed offsets, and the states it
may move between (TRANSITIONS, guarded by ClassicGroup.transition). What triggers each
transition is listed at the top of broker/group/coordinator.py, where all of them happen."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field

from broker.group.types import (
    Token,
    TopicPartition,
)

CONSUMER_PROTOCOL_TYPE = "consumer"
UNWRITTEN = b""  # ConsumerGroup.persisted value of a key whose last write failed
# ConsumerProtocolAssignment v0 with no partitions and null user data: what a consumer-protocol
# member gets when the leader left it out, so every client can parse its SyncGroup answer
EMPTY_CONSUMER_ASSIGNMENT = b"\x00\x00" + b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff"


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_S = GroupState
TRANSITIONS: dict[GroupState, frozenset[GroupState]] = {
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE, _S.DEAD}),
    _S.PREPARING_REBALANCE: frozenset({_S.COMPLETING_REBALANCE, _S.EMPTY, _S.DEAD}),
    _S.COMPLETING_REBALANCE: frozenset({_S.STABLE, _S.PREPARING_REBALANCE, _S.DEAD}),
    _S.STABLE: frozenset({_S.PREPARING_REBALANCE, _S.DEAD}),
    _S.DEAD: frozenset(),
}


class IllegalTransition(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1  # set only by OffsetCommit v2-v4 retention_time_ms


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    join_token: Token | None = None
    sync_token: Token | None = None
    heartbeat_deadline: int = 0
    is_new: bool = False

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    @property
    def awaiting_join(self) -> bool:
        return self.join_token is not None


@dataclass(slots=True)
class ClassicGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp: int | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation_id: int = 0
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: dict[str, int] = field(default_factory=dict)  # member id -> deadline
    pending_sync: set[str] = field(default_factory=set)
    join_deadline: int | None = None
    initial_join: bool = False
    initial_remaining_ms: int = 0
    new_member_added: bool = False
    sync_deadline: int | None = None
    offsets: dict[TopicPartition, CommittedOffset] = field(default_factory=dict)
    pending_commits: dict[TopicPartition, int] = field(default_factory=dict)  # in-flight count

    def transition(self, to: GroupState, now_ms: int) -> None:
        if to not in TRANSITIONS[self.state]:
            raise IllegalTransition(f"group {self.group_id}: {self.state.value} -> {to.value}")
        self.state = to
        self.state_timestamp = now_ms

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def has_all_members_joined(self) -> bool:
        return (all(m.awaiting_join for m in self.members.values())
                and not self.pending_members)

    def supports_protocols(self, protocol_type: str, names: Iterable[str],
                           excluding: str | None = None) -> bool:
        wanted = set(names)
        others = [m for mid, m in self.members.items() if mid != excluding]
        if not others:
            return bool(protocol_type) and bool(wanted)
        if protocol_type != self.protocol_type:
            return False
        common = set(others[0].protocol_names())
        for m in others[1:]:
            common &= set(m.protocol_names())
        return bool(common & wanted)

    def select_protocol(self) -> str:
        members = list(self.members.values())
        candidates = set(members[0].protocol_names())
        for m in members[1:]:
            candidates &= set(m.protocol_names())
        if not candidates:
            raise IllegalTransition(f"group {self.group_id}: no protocol common to all members")
        votes: dict[str, int] = {}
        for m in members:
            choice = next(n for n in m.protocol_names() if n in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        leader = self.members.get(self.leader_id or "", members[0])
        order = {n: i for i, n in enumerate(leader.protocol_names())}
        return min(votes, key=lambda n: (-votes[n], order.get(n, len(order)), n))

    def subscribed_topics(self) -> set[str] | None:
        """Topics of the consumer-protocol subscriptions, None when unknown."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            parsed = parse_subscription_topics(m.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return topics

    def is_static_fenced(self, member_id: str, instance_id: str | None) -> bool:
        if instance_id is None:
            return False
        known = self.static_members.get(instance_id)
        return known is not None and known != member_id


def parse_subscription_topics(data: bytes) -> set[str] | None:
    """The topic list of a ConsumerProtocolSubscription (any version), None if malformed."""
    try:
        if len(data) < 6:
            return None
        pos = 2
        n = int.from_bytes(data[pos:pos + 4], "big", signed=True)
        pos += 4
        if n < 0 or n > len(data):
            return None
        topics = set()
        for _ in range(n):
            if pos + 2 > len(data):
                return None
            ln = int.from_bytes(data[pos:pos + 2], "big", signed=True)
            pos += 2
            if ln < 0 or pos + ln > len(data):
                return None
            topics.add(data[pos:pos + ln].decode())
            pos += ln
        return topics
    except UnicodeDecodeError:
        return None
