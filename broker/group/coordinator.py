"""The group coordinator of one __consumer_offsets partition: a pure state machine.

Classic-protocol group states and every transition (Kafka's ClassicGroupState):

    Empty               -> PreparingRebalance   a member joins
    Empty               -> Dead                 DeleteGroups; all offsets expired; unload
    PreparingRebalance  -> CompletingRebalance  every member rejoined, or the join timer fired
                                                with at least one member joined
    PreparingRebalance  -> Empty                the join completed with no members left
    PreparingRebalance  -> Dead                 unload
    CompletingRebalance -> Stable               the leader's SyncGroup assignment was written
    CompletingRebalance -> PreparingRebalance   a member joins, leaves, changes its protocols,
                                                expires, or misses the sync deadline; the
                                                assignment write failed
    CompletingRebalance -> Dead                 unload
    Stable              -> PreparingRebalance   a member joins, leaves, expires, the leader
                                                rejoins, a member's protocols change, a member
                                                misses the sync deadline, a static member
                                                rejoins with a different selected protocol
    Stable              -> Dead                 unload
    Dead                -> (none)

A group loaded from its GroupMetadataValue starts in Stable (members present) or Empty.

Timers (all fired by `tick(now_ms)`):
    member heartbeat     session.timeout.ms since the last heartbeat (members awaiting a join or
                         sync response are kept alive, except new members, who get 5 minutes;
                         a SyncGroup answer, assignment or error, restarts it)
    pending member       a MEMBER_ID_REQUIRED member id is forgotten after its session timeout
    join                 rebalance timeout (max over members); the first rebalance of an Empty
                         group waits group.initial.rebalance.delay.ms, extended while members
                         keep arriving, up to the rebalance timeout
    sync                 members that do not SyncGroup within the rebalance timeout after the
                         join completes are removed
    offsets cleanup      every offsets.retention.check.interval.ms, expired offsets are deleted
                         and Empty groups without offsets become Dead

Inputs are method calls with `now_ms`; outputs are `Effects`: replies to complete (by token)
and record writes. A write's outcome comes back through `write_completed`, which is when
offset commits are applied and SyncGroup/commit replies are released (acks=all).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from kio.schema.errors import ErrorCode

from broker.coordinator.core import WriteDone
from broker.group import records as rec
from broker.group.classic import CONSUMER_PROTOCOL_TYPE as CONSUMER_PROTOCOL_TYPE
from broker.group.classic import EMPTY_CONSUMER_ASSIGNMENT as EMPTY_CONSUMER_ASSIGNMENT
from broker.group.classic import TRANSITIONS as TRANSITIONS
from broker.group.classic import UNWRITTEN as UNWRITTEN
from broker.group.classic import ClassicGroup as ClassicGroup
from broker.group.classic import CommittedOffset as CommittedOffset
from broker.group.classic import GroupState as GroupState
from broker.group.classic import IllegalTransition as IllegalTransition
from broker.group.classic import Member as Member
from broker.group.classic import parse_subscription_topics as parse_subscription_topics
from broker.group.consumer import ConsumerGroup, ConsumerGroups, ConsumerGroupState
from broker.group.offsets import GroupOffsets, _consumer_subscribed
from broker.group.offsets import map_store_error as map_store_error
from broker.group.streams import StreamsGroup, StreamsGroups
from broker.group.types import (
    DescribedMember,
    Effects,
    GroupConfig,
    GroupDescription,
    HeartbeatRequest,
    JoinedMember,
    JoinGroupRequest,
    JoinGroupResult,
    LeaveGroupResult,
    LeaveMember,
    ListedGroup,
    OffsetsRecord,
    SyncGroupRequest,
    SyncGroupResult,
    Token,
    TopicPartition,
)


def _no_group_configs(group_id: str) -> Mapping[str, str]:
    return {}


class GroupCoordinator(GroupOffsets, ConsumerGroups, StreamsGroups):
    """Groups (classic, KIP-848 and KIP-1071) and committed offsets of one __consumer_offsets
    partition."""

    def __init__(self, config: GroupConfig, rng: random.Random, now_ms: int,
                 group_configs: Callable[[str], Mapping[str, str]] | None = None) -> None:
        """`group_configs(group_id)`: the group's dynamic configs (GROUP config resources
        from the metadata image; none when not given)."""
        super().__init__(Effects)
        self.config = config
        self.group_configs = group_configs or _no_group_configs
        self.rng = rng
        self.groups: dict[str, ClassicGroup] = {}
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.streams_groups: dict[str, StreamsGroup] = {}
        # KIP-932 share-group records replayed at load, key -> latest value: the share
        # groups' service (broker/share/shell.py) takes them into its core once loaded
        self.share_records: dict[bytes, bytes] = {}
        self.pending_txn_offsets: dict[int, dict[tuple[str, TopicPartition], CommittedOffset]] = {}
        self.next_cleanup_ms = now_ms + config.offsets_retention_check_interval_ms
        self.rebalances = 0  # classic generations completed (metrics)
        self.consumer_rebalances = 0  # KIP-848 target assignments computed (metrics)

    # ---- plumbing ------------------------------------------------------------------------

    def _write_group_records(self, records: list[OffsetsRecord],
                             group: ConsumerGroup | StreamsGroup | None = None) -> None:
        # KIP-848 and KIP-1071 state: nobody waits on it (see consumer.py's note on
        # persistence)
        def stored(error: ErrorCode, now: int) -> None:
            if error is ErrorCode.none or group is None or group.dead:
                return
            # not in the log after all: a value no encoding equals makes the next diff write
            # each of these keys again (or its tombstone, if the key is gone by then)
            for r in records:
                group.persisted[r.key] = UNWRITTEN

        self._write(records, stored)

    def write_share_records(self, records: list[OffsetsRecord], done: WriteDone) -> Effects:
        """Append a share group's records (broker/share/group.py makes them)."""
        self._write(records, done)
        return self._take()

    def take_effects(self) -> Effects:
        """What calls that answer directly (ConsumerGroupHeartbeat) left to write."""
        return self._take()

    def _new_member_id(self, client_id: str) -> str:
        return f"{client_id}-{uuid.UUID(int=self.rng.getrandbits(128), version=4)}"

    def _new_consumer_member_id(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def _adopt_classic_group(self, group_id: str, now_ms: int) -> ConsumerGroup | ErrorCode:
        """A KIP-848 heartbeat for a group id: a new consumer group, or an Empty classic
        group (offsets only) converted to one. A classic group with members is not ours."""
        if group_id in self.streams_groups:
            return ErrorCode.group_id_not_found
        classic = self.groups.get(group_id)
        cg = ConsumerGroup(group_id, state_timestamp=now_ms)
        if classic is not None:
            if classic.state is not GroupState.EMPTY or classic.pending_members:
                return ErrorCode.group_id_not_found
            cg.offsets, cg.pending_commits = classic.offsets, classic.pending_commits
            del self.groups[group_id]
            if classic.protocol_type is not None or classic.generation_id:
                # the classic group had a GroupMetadataValue: tombstone it, as Kafka does
                self._write_group_records(
                    [OffsetsRecord(rec.encode_group_metadata_key(group_id), None)])
        self.consumer_groups[group_id] = cg
        return cg

    def _offsets_holder(self, group_id: str,
                        ) -> ClassicGroup | ConsumerGroup | StreamsGroup | None:
        return (self.consumer_groups.get(group_id) or self.streams_groups.get(group_id)
                or self.groups.get(group_id))

    def _claim_group_id(self, group_id: str) -> ErrorCode | None:
        """A new streams group takes an unknown id, or an empty classic group's (its
        offsets move along); a consumer group's or a classic group with members is not ours."""
        if group_id in self.consumer_groups:
            return ErrorCode.group_id_not_found
        classic = self.groups.get(group_id)
        if classic is None:
            return None
        if classic.state is not GroupState.EMPTY or classic.pending_members:
            return ErrorCode.group_id_not_found
        return None

    def _adopt_offsets(self, sg: StreamsGroup) -> None:
        classic = self.groups.pop(sg.group_id, None)
        if classic is None:
            return
        sg.offsets, sg.pending_commits = classic.offsets, classic.pending_commits
        if classic.protocol_type is not None or classic.generation_id:
            self._write_group_records(
                [OffsetsRecord(rec.encode_group_metadata_key(sg.group_id), None)])

    def _group_record(self, g: ClassicGroup) -> OffsetsRecord:
        members = tuple(
            rec.MemberMetadata(
                member_id=m.member_id, group_instance_id=m.group_instance_id,
                client_id=m.client_id, client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms, session_timeout=m.session_timeout_ms,
                subscription=m.metadata(g.protocol_name), assignment=m.assignment,
            )
            for m in g.members.values()
        )
        value = rec.GroupMetadataValue(
            protocol_type=g.protocol_type or "", generation=g.generation_id,
            protocol=g.protocol_name, leader=g.leader_id,
            current_state_timestamp=g.state_timestamp if g.state_timestamp is not None else -1,
            members=members,
        )
        return OffsetsRecord(rec.encode_group_metadata_key(g.group_id),
                             rec.encode_group_metadata_value(value))

    # ---- JoinGroup ---------------------------------------------------------------------------

    def join_group(self, token: Token, req: JoinGroupRequest, now_ms: int) -> Effects:
        error = self._validate_join(req)
        if error is not None:
            self._reply(token, JoinGroupResult(error, member_id=req.member_id))
            return self._take()
        sg = self.streams_groups.get(req.group_id)
        if sg is not None:
            if sg.members:
                self._reply(token, JoinGroupResult(ErrorCode.inconsistent_group_protocol,
                                                   member_id=req.member_id))
                return self._take()
            # an empty streams group gives its offsets to a classic group; its records are
            # tombstoned so a reload does not bring it back
            del self.streams_groups[req.group_id]
            sg.dead = True
            self._persist_streams(sg)
            self.groups[req.group_id] = ClassicGroup(
                req.group_id, state_timestamp=now_ms, offsets=sg.offsets,
                pending_commits=sg.pending_commits)
        cg = self.consumer_groups.get(req.group_id)
        if cg is not None:
            if cg.members:
                self._reply(token, JoinGroupResult(ErrorCode.inconsistent_group_protocol,
                                                   member_id=req.member_id))
                return self._take()
            # an empty consumer group goes back to the classic protocol, offsets and all; its
            # KIP-848 records are tombstoned so a reload does not bring it back
            del self.consumer_groups[req.group_id]
            cg.dead = True
            self._persist(cg)
            self.groups[req.group_id] = ClassicGroup(
                req.group_id, state_timestamp=now_ms, offsets=cg.offsets,
                pending_commits=cg.pending_commits)
        g = self.groups.get(req.group_id)
        if g is None:
            if req.member_id:
                self._reply(token, JoinGroupResult(ErrorCode.unknown_member_id,
                                                   member_id=req.member_id))
                return self._take()
            g = self.groups[req.group_id] = ClassicGroup(req.group_id, state_timestamp=now_ms)
        if g.state is GroupState.DEAD:
            self._reply(token, JoinGroupResult(ErrorCode.coordinator_not_available,
                                               member_id=req.member_id))
        elif not g.supports_protocols(
                req.protocol_type, (n for n, _ in req.protocols),
                excluding=req.member_id or g.static_members.get(req.group_instance_id or "")):
            self._reply(token, JoinGroupResult(ErrorCode.inconsistent_group_protocol,
                                               member_id=req.member_id))
        elif not req.member_id:
            self._join_unknown_member(g, token, req, now_ms)
        else:
            self._join_known_member(g, token, req, now_ms)
        self._drop_if_unused(g)  # a rejected first join leaves no trace
        return self._take()

    def _validate_join(self, req: JoinGroupRequest) -> ErrorCode | None:
        if not req.group_id:
            return ErrorCode.invalid_group_id
        if not (self.config.min_session_timeout_ms <= req.session_timeout_ms
                <= self.config.max_session_timeout_ms):
            return ErrorCode.invalid_session_timeout
        return None

    def _at_capacity(self, g: ClassicGroup) -> bool:
        return len(g.members) + len(g.pending_members) >= self.config.max_size

    def _join_unknown_member(
        self, g: ClassicGroup, token: Token, req: JoinGroupRequest, now_ms: int,
    ) -> None:
        instance = req.group_instance_id
        if instance is not None and instance in g.static_members:
            self._replace_static_member(g, token, req, now_ms)
            return
        if self._at_capacity(g):
            self._reply(token, JoinGroupResult(ErrorCode.group_max_size_reached))
            return
        member_id = self._new_member_id(req.client_id)
        if instance is None and req.require_known_member_id:
            g.pending_members[member_id] = now_ms + req.session_timeout_ms
            self._reply(token, JoinGroupResult(ErrorCode.member_id_required, member_id=member_id))
            return
        self._add_member_and_rebalance(g, token, req, member_id, now_ms)

    def _join_known_member(
        self, g: ClassicGroup, token: Token, req: JoinGroupRequest, now_ms: int,
    ) -> None:
        member_id = req.member_id
        if member_id in g.pending_members:
            del g.pending_members[member_id]
            if len(g.members) + len(g.pending_members) >= self.config.max_size:
                self._reply(token, JoinGroupResult(ErrorCode.group_max_size_reached,
                                                   member_id=member_id))
                self._maybe_complete_join(g, now_ms)
                return
            self._add_member_and_rebalance(g, token, req, member_id, now_ms)
            return
        if req.group_instance_id is not None:
            known = g.static_members.get(req.group_instance_id)
            if known is None:
                self._reply(token, JoinGroupResult(ErrorCode.unknown_member_id,
                                                   member_id=member_id))
                return
            if known != member_id:
                self._reply(token, JoinGroupResult(ErrorCode.fenced_instance_id,
                                                   member_id=member_id))
                return
        member = g.members.get(member_id)
        if member is None or g.state in (GroupState.EMPTY, GroupState.DEAD):
            self._reply(token, JoinGroupResult(ErrorCode.unknown_member_id, member_id=member_id))
            return
        same = (member.protocols == req.protocols
                and member.protocol_type == req.protocol_type)
        if g.state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(g, member, token, req, now_ms)
        elif g.state is GroupState.COMPLETING_REBALANCE:
            if same:
                # a retried join: hand back the current generation
                member.heartbeat_deadline = now_ms + member.session_timeout_ms
                self._reply(token, self._join_result(g, member))
            else:
                self._update_member_and_rebalance(g, member, token, req, now_ms)
        else:  # Stable
            if member_id == g.leader_id or not same:
                self._update_member_and_rebalance(g, member, token, req, now_ms)
            else:
                member.heartbeat_deadline = now_ms + member.session_timeout_ms
                self._reply(token, self._join_result(g, member))

    def _join_result(
        self, g: ClassicGroup, member: Member, *, skip: bool = False,
    ) -> JoinGroupResult:
        is_leader = member.member_id == g.leader_id
        members = tuple(
            JoinedMember(m.member_id, m.group_instance_id, m.metadata(g.protocol_name))
            for m in g.members.values()
        ) if is_leader else ()
        return JoinGroupResult(
            ErrorCode.none, member_id=member.member_id, generation_id=g.generation_id,
            protocol_type=g.protocol_type, protocol_name=g.protocol_name,
            leader=g.leader_id or "", members=members, skip_assignment=skip and is_leader,
        )

    def _add_member_and_rebalance(
        self, g: ClassicGroup, token: Token, req: JoinGroupRequest, member_id: str,
        now_ms: int,
    ) -> None:
        member = Member(
            member_id=member_id, group_instance_id=req.group_instance_id,
            client_id=req.client_id, client_host=req.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms, protocol_type=req.protocol_type,
            protocols=req.protocols, join_token=token, is_new=True,
            heartbeat_deadline=now_ms + self.config.new_member_join_timeout_ms,
        )
        if not g.members:
            g.protocol_type = req.protocol_type
        g.members[member_id] = member
        if req.group_instance_id is not None:
            g.static_members[req.group_instance_id] = member_id
        if g.leader_id is None:
            g.leader_id = member_id
        if g.state is GroupState.PREPARING_REBALANCE and g.initial_join:
            g.new_member_added = True
        self._maybe_prepare_rebalance(g, now_ms)
        self._maybe_complete_join(g, now_ms)

    def _update_member_and_rebalance(
        self, g: ClassicGroup, member: Member, token: Token, req: JoinGroupRequest, now_ms: int,
    ) -> None:
        if member.join_token is not None and member.join_token != token:
            self._reply(member.join_token, JoinGroupResult(ErrorCode.rebalance_in_progress,
                                                           member_id=member.member_id))
        member.protocols = req.protocols
        member.protocol_type = req.protocol_type
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        member.client_id = req.client_id
        member.client_host = req.client_host
        member.join_token = token
        self._maybe_prepare_rebalance(g, now_ms)
        self._maybe_complete_join(g, now_ms)

    def _replace_static_member(
        self, g: ClassicGroup, token: Token, req: JoinGroupRequest, now_ms: int,
    ) -> None:
        assert req.group_instance_id is not None
        old_id = g.static_members[req.group_instance_id]
        old = g.members[old_id]
        self._reply(old.join_token, JoinGroupResult(ErrorCode.fenced_instance_id, member_id=old_id))
        self._reply(old.sync_token, SyncGroupResult(ErrorCode.fenced_instance_id))
        new_id = self._new_member_id(req.client_id)
        old_protocols, old_sessions = old.protocols, (old.session_timeout_ms,
                                                      old.rebalance_timeout_ms)
        member = Member(
            member_id=new_id, group_instance_id=req.group_instance_id, client_id=req.client_id,
            client_host=req.client_host, rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms, protocol_type=req.protocol_type,
            protocols=req.protocols, assignment=old.assignment,
            heartbeat_deadline=now_ms + req.session_timeout_ms,
        )
        self._rename_member(g, old_id, member)
        if g.state is GroupState.STABLE:
            if g.select_protocol() == g.protocol_name:
                generation = g.generation_id

                def stored(error: ErrorCode, now: int) -> None:
                    if error is ErrorCode.none:
                        found = g.members.get(new_id)
                        if found is not None:
                            found.heartbeat_deadline = now + found.session_timeout_ms
                            if req.supports_skip_assignment:
                                result = self._join_result(g, found, skip=True)
                            else:
                                # before JoinGroup v9 a leader cannot be told to skip the
                                # assignment; as Kafka does, it is answered as a follower (no
                                # members, the leader id it replaced), so it does not reassign
                                result = replace(
                                    self._join_result(g, found), members=(),
                                    leader=old_id if g.leader_id == new_id
                                    else (g.leader_id or ""))
                            self._reply(token, result)
                        else:
                            self._reply(token, JoinGroupResult(ErrorCode.unknown_member_id,
                                                               member_id=new_id))
                        return
                    # revert to the old member id so its owner keeps working
                    current = g.members.get(new_id)
                    if current is not None and g.generation_id == generation:
                        current.protocols = old_protocols
                        current.session_timeout_ms, current.rebalance_timeout_ms = old_sessions
                        current.member_id = old_id
                        self._rename_member(g, new_id, current)
                    self._reply(token, JoinGroupResult(map_store_error(error, commit=False),
                                                       member_id=new_id))

                self._write([self._group_record(g)], stored)
            else:
                member.join_token = token
                self._maybe_prepare_rebalance(g, now_ms)
        elif g.state is GroupState.COMPLETING_REBALANCE:
            member.join_token = token
            self._maybe_prepare_rebalance(g, now_ms)
        else:  # PreparingRebalance
            member.join_token = token
            self._maybe_complete_join(g, now_ms)

    @staticmethod
    def _rename_member(g: ClassicGroup, old_id: str, member: Member) -> None:
        del g.members[old_id]
        g.members[member.member_id] = member
        if member.group_instance_id is not None:
            g.static_members[member.group_instance_id] = member.member_id
        if g.leader_id == old_id:
            g.leader_id = member.member_id
        if old_id in g.pending_sync:
            g.pending_sync.discard(old_id)
            g.pending_sync.add(member.member_id)

    # ---- rebalance ---------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, g: ClassicGroup, now_ms: int) -> None:
        if g.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(g, now_ms)

    def _prepare_rebalance(self, g: ClassicGroup, now_ms: int) -> None:
        if g.state is GroupState.COMPLETING_REBALANCE:
            for m in g.members.values():
                m.assignment = b""
                self._answer_sync(m, SyncGroupResult(ErrorCode.rebalance_in_progress), now_ms)
        g.pending_sync.clear()
        g.sync_deadline = None
        timeout = g.rebalance_timeout_ms()
        delay = self.config.initial_rebalance_delay_ms
        if g.state is GroupState.EMPTY and delay > 0:
            g.initial_join = True
            g.new_member_added = False
            first = min(delay, timeout)
            g.join_deadline = now_ms + first
            g.initial_remaining_ms = max(timeout - delay, 0)
        else:
            g.initial_join = False
            g.join_deadline = now_ms + timeout
        g.transition(GroupState.PREPARING_REBALANCE, now_ms)
        self._maybe_complete_join(g, now_ms)

    def _maybe_complete_join(self, g: ClassicGroup, now_ms: int) -> None:
        if (g.state is GroupState.PREPARING_REBALANCE and not g.initial_join
                and g.has_all_members_joined()):
            self._complete_join(g, now_ms)

    def _join_timer_fired(self, g: ClassicGroup, now_ms: int) -> None:
        if g.initial_join and g.new_member_added and g.initial_remaining_ms > 0:
            g.new_member_added = False
            step = min(self.config.initial_rebalance_delay_ms, g.initial_remaining_ms)
            g.initial_remaining_ms = max(g.initial_remaining_ms - step, 0)
            g.join_deadline = now_ms + step
            return
        self._complete_join(g, now_ms)

    def _complete_join(self, g: ClassicGroup, now_ms: int) -> None:
        g.join_deadline = None
        g.initial_join = False
        for m in list(g.members.values()):
            if not m.awaiting_join and m.group_instance_id is None:
                self._remove_member(g, m)
        joined = [m for m in g.members.values() if m.awaiting_join]
        if g.members and not joined:
            # only static members that have not rejoined: wait for them or their expiry
            g.join_deadline = now_ms + g.rebalance_timeout_ms()
            return
        if g.leader_id is None or not g.members[g.leader_id].awaiting_join:
            g.leader_id = joined[0].member_id if joined else None
        g.generation_id += 1
        self.rebalances += 1
        if not g.members:
            g.protocol_name = None
            g.transition(GroupState.EMPTY, now_ms)
            self._write([self._group_record(g)], lambda error, now: None)
            return
        g.protocol_name = g.select_protocol()
        g.transition(GroupState.COMPLETING_REBALANCE, now_ms)
        for m in g.members.values():
            if m.join_token is not None:
                self._reply(m.join_token, self._join_result(g, m))
                m.join_token = None
            m.is_new = False
            m.heartbeat_deadline = now_ms + m.session_timeout_ms
        g.pending_sync = set(g.members)
        g.sync_deadline = now_ms + g.rebalance_timeout_ms()

    def _remove_member(self, g: ClassicGroup, m: Member) -> None:
        self._reply(m.join_token, JoinGroupResult(ErrorCode.unknown_member_id,
                                                  member_id=m.member_id))
        self._reply(m.sync_token, SyncGroupResult(ErrorCode.unknown_member_id))
        m.join_token = m.sync_token = None
        del g.members[m.member_id]
        if m.group_instance_id is not None \
                and g.static_members.get(m.group_instance_id) == m.member_id:
            del g.static_members[m.group_instance_id]
        g.pending_sync.discard(m.member_id)
        if g.leader_id == m.member_id:
            g.leader_id = next(iter(g.members), None)

    def _remove_member_and_update_group(self, g: ClassicGroup, m: Member, now_ms: int) -> None:
        self._remove_member(g, m)
        if g.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(g, now_ms)
        elif g.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(g, now_ms)

    # ---- SyncGroup ---------------------------------------------------------------------------

    def sync_group(self, token: Token, req: SyncGroupRequest, now_ms: int) -> Effects:
        g = self.groups.get(req.group_id)
        error = self._validate_member(g, req.member_id, req.group_instance_id)
        if error is None and g is not None:
            if req.generation_id != g.generation_id:
                error = ErrorCode.illegal_generation
            elif (req.protocol_type is not None and req.protocol_type != g.protocol_type) or (
                    req.protocol_name is not None and req.protocol_name != g.protocol_name):
                error = ErrorCode.inconsistent_group_protocol
            elif g.state is GroupState.PREPARING_REBALANCE:
                error = ErrorCode.rebalance_in_progress
        if error is not None or g is None:
            self._reply(token, SyncGroupResult(error or ErrorCode.unknown_member_id))
            return self._take()
        member = g.members[req.member_id]
        member.heartbeat_deadline = now_ms + member.session_timeout_ms
        g.pending_sync.discard(member.member_id)
        if g.state is GroupState.STABLE:
            self._reply(token, SyncGroupResult(ErrorCode.none, g.protocol_type, g.protocol_name,
                                               member.assignment))
            return self._take()
        # CompletingRebalance
        if member.sync_token is not None and member.sync_token != token:
            self._reply(member.sync_token, SyncGroupResult(ErrorCode.rebalance_in_progress))
        member.sync_token = token
        if member.member_id == g.leader_id:
            assignments = dict(req.assignments)
            generation = g.generation_id
            for m in g.members.values():
                m.assignment = assignments.get(m.member_id) or (
                    EMPTY_CONSUMER_ASSIGNMENT if g.protocol_type == CONSUMER_PROTOCOL_TYPE
                    else b"")

            def stored(error: ErrorCode, now: int) -> None:
                if g.state is not GroupState.COMPLETING_REBALANCE \
                        or g.generation_id != generation:
                    return
                if error is not ErrorCode.none:
                    mapped = map_store_error(error, commit=False)
                    for m in g.members.values():
                        m.assignment = b""
                        self._answer_sync(m, SyncGroupResult(mapped), now)
                    self._prepare_rebalance(g, now)
                    return
                g.transition(GroupState.STABLE, now)
                for m in g.members.values():
                    self._answer_sync(m, SyncGroupResult(
                        ErrorCode.none, g.protocol_type, g.protocol_name, m.assignment), now)

            self._write([self._group_record(g)], stored)
        return self._take()

    def _answer_sync(self, m: Member, result: SyncGroupResult, now_ms: int) -> None:
        """Answer the member's waiting SyncGroup, if any, and restart its session, as Kafka's
        propagateAssignment does: while it waited it was alive by definition, however long
        the leader or the write took, so its session runs from this answer, not from its
        request (else a follower that waited longer than its session timeout would be
        expelled at the next tick, just after getting its assignment)."""
        if m.sync_token is None:
            return
        self._reply(m.sync_token, result)
        m.sync_token = None
        m.heartbeat_deadline = now_ms + m.session_timeout_ms

    def _validate_member(
        self, g: ClassicGroup | None, member_id: str, instance_id: str | None,
    ) -> ErrorCode | None:
        if g is None:
            return ErrorCode.unknown_member_id
        if g.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        if g.is_static_fenced(member_id, instance_id):
            return ErrorCode.fenced_instance_id
        if member_id not in g.members:
            return ErrorCode.unknown_member_id
        return None

    # ---- Heartbeat ---------------------------------------------------------------------------

    def heartbeat(self, req: HeartbeatRequest, now_ms: int) -> ErrorCode:
        g = self.groups.get(req.group_id)
        error = self._validate_member(g, req.member_id, req.group_instance_id)
        if error is not None or g is None:
            return error or ErrorCode.unknown_member_id
        if req.generation_id != g.generation_id:
            return ErrorCode.illegal_generation
        member = g.members[req.member_id]
        member.heartbeat_deadline = now_ms + member.session_timeout_ms
        if g.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    # ---- LeaveGroup ---------------------------------------------------------------------------

    def leave_group(
        self, group_id: str, members: Iterable[LeaveMember], now_ms: int,
    ) -> tuple[LeaveGroupResult, Effects]:
        g = self.groups.get(group_id)
        if g is None:
            return LeaveGroupResult(ErrorCode.unknown_member_id), self._take()
        if g.state is GroupState.DEAD:
            return LeaveGroupResult(ErrorCode.coordinator_not_available), self._take()
        out: list[tuple[LeaveMember, ErrorCode]] = []
        for lm in members:
            member_id = lm.member_id
            if lm.group_instance_id is not None:
                known = g.static_members.get(lm.group_instance_id)
                if known is None:
                    out.append((lm, ErrorCode.unknown_member_id))
                    continue
                if member_id and member_id != known:
                    out.append((lm, ErrorCode.fenced_instance_id))
                    continue
                member_id = known
            if member_id in g.pending_members:
                del g.pending_members[member_id]
                out.append((lm, ErrorCode.none))
                self._maybe_complete_join(g, now_ms)
                continue
            m = g.members.get(member_id)
            if m is None:
                out.append((lm, ErrorCode.unknown_member_id))
                continue
            self._remove_member_and_update_group(g, m, now_ms)
            out.append((lm, ErrorCode.none))
        return LeaveGroupResult(ErrorCode.none, tuple(out)), self._take()

    # ---- ListGroups / DescribeGroups / DeleteGroups ------------------------------------------

    def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = (),
    ) -> list[ListedGroup]:
        want_states = {s.lower() for s in states}
        want_types = {t.lower() for t in types}
        out = []
        for g in self.groups.values():
            if g.state is GroupState.DEAD:
                continue
            if want_states and g.state.value.lower() not in want_states:
                continue
            if want_types and "classic" not in want_types:
                continue
            out.append(ListedGroup(g.group_id, g.protocol_type or "", g.state.value, "classic"))
        for cg in self.consumer_groups.values():
            state = cg.state
            if state is ConsumerGroupState.DEAD:
                continue
            if want_states and state.value.lower() not in want_states:
                continue
            if want_types and "consumer" not in want_types:
                continue
            out.append(ListedGroup(cg.group_id, CONSUMER_PROTOCOL_TYPE, state.value, "consumer"))
        for sg in self.streams_groups.values():
            sstate = sg.state
            if sg.dead:
                continue
            if want_states and sstate.value.lower() not in want_states:
                continue
            if want_types and "streams" not in want_types:
                continue
            out.append(ListedGroup(sg.group_id, "streams", sstate.value, "streams"))
        return out

    def describe_group(self, group_id: str) -> GroupDescription | None:
        g = self.groups.get(group_id)
        if g is None or g.state is GroupState.DEAD:
            return None
        stable = g.state is GroupState.STABLE
        members = tuple(
            DescribedMember(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                m.metadata(g.protocol_name) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in g.members.values()
        )
        return GroupDescription(g.group_id, g.state.value, g.protocol_type or "",
                                (g.protocol_name or "") if stable else "", members)

    def delete_groups(
        self, token: Token, group_ids: Iterable[str], now_ms: int,
    ) -> Effects:
        results: dict[str, ErrorCode] = {}
        doomed: list[ClassicGroup] = []
        consumer_records: list[OffsetsRecord] = []
        ids = list(group_ids)
        for gid in ids:
            sg = self.streams_groups.get(gid)
            if sg is not None:
                if sg.members:
                    results[gid] = ErrorCode.non_empty_group
                else:
                    results[gid] = ErrorCode.none
                    sg.dead = True
                    del self.streams_groups[gid]
                    consumer_records.extend(self._tombstones_of(gid, sg.offsets))
                    consumer_records.extend(self._group_tombstones(sg.persisted))
                    sg.persisted = {}
                continue
            cg = self.consumer_groups.get(gid)
            if cg is not None:
                if cg.members:
                    results[gid] = ErrorCode.non_empty_group
                else:
                    results[gid] = ErrorCode.none
                    records_cg = self._tombstones_of(gid, cg.offsets)
                    records_cg += self._group_tombstones(cg.persisted)
                    cg.persisted = {}
                    cg.dead = True
                    del self.consumer_groups[gid]
                    consumer_records.extend(records_cg)
                continue
            g = self.groups.get(gid)
            if g is None or g.state is GroupState.DEAD:
                results[gid] = ErrorCode.group_id_not_found
            elif g.state is not GroupState.EMPTY:
                results[gid] = ErrorCode.non_empty_group
            else:
                results[gid] = ErrorCode.none
                doomed.append(g)
        deleted = [gid for gid in ids if results[gid] is ErrorCode.none]
        if not doomed and not consumer_records:
            self._reply(token, tuple((gid, results[gid]) for gid in ids))
            return self._take()
        records: list[OffsetsRecord] = list(consumer_records)
        for g in doomed:
            records.extend(self._tombstones(g))
            g.transition(GroupState.DEAD, now_ms)
            del self.groups[g.group_id]

        def stored(error: ErrorCode, now: int) -> None:
            mapped = map_store_error(error, commit=False) if error is not ErrorCode.none \
                else ErrorCode.none
            for gid in deleted:
                results[gid] = mapped
            self._reply(token, tuple((gid, results[gid]) for gid in ids))

        self._write(records, stored)
        return self._take()

    @staticmethod
    def _group_tombstones(persisted: Iterable[bytes]) -> list[OffsetsRecord]:
        """Tombstones of a KIP-848 or KIP-1071 group's records, member records first and
        the group's metadata last, as Kafka orders them."""
        def order(key: bytes) -> int:
            t = int.from_bytes(key[:2], "big")
            if t in (rec.STREAMS_GROUP_METADATA, rec.CONSUMER_GROUP_METADATA):
                return -1  # after everything else
            return t
        return [OffsetsRecord(k, None) for k in sorted(persisted, key=order, reverse=True)]

    @staticmethod
    def _tombstones_of(group_id: str, offsets: Iterable[TopicPartition]) -> list[OffsetsRecord]:
        out = [OffsetsRecord(rec.encode_offset_commit_key(group_id, t, p), None)
               for t, p in offsets]
        out.append(OffsetsRecord(rec.encode_group_metadata_key(group_id), None))
        return out

    def _tombstones(self, g: ClassicGroup) -> list[OffsetsRecord]:
        return self._tombstones_of(g.group_id, g.offsets)

    # ---- timers ---------------------------------------------------------------------------

    def tick(self, now_ms: int) -> Effects:
        for g in list(self.groups.values()):
            if g.state is GroupState.DEAD:
                continue
            for member_id, deadline in list(g.pending_members.items()):
                if now_ms >= deadline:
                    del g.pending_members[member_id]
                    self._maybe_complete_join(g, now_ms)
            for m in list(g.members.values()):
                if m.member_id not in g.members or now_ms < m.heartbeat_deadline:
                    continue
                if not m.is_new and (m.awaiting_join or m.sync_token is not None):
                    continue  # waiting on the coordinator: alive by definition
                self._remove_member_and_update_group(g, m, now_ms)
            if g.join_deadline is not None and now_ms >= g.join_deadline \
                    and g.state is GroupState.PREPARING_REBALANCE:
                self._join_timer_fired(g, now_ms)
            if g.sync_deadline is not None and now_ms >= g.sync_deadline:
                g.sync_deadline = None
                if g.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE) \
                        and g.pending_sync:
                    for member_id in list(g.pending_sync):
                        late = g.members.get(member_id)
                        if late is not None:
                            self._remove_member(g, late)
                    g.pending_sync.clear()
                    self._prepare_rebalance(g, now_ms)
        self.consumer_tick(now_ms)
        self.streams_tick(now_ms)
        if now_ms >= self.next_cleanup_ms:
            self.next_cleanup_ms = now_ms + self.config.offsets_retention_check_interval_ms
            self._cleanup_offsets(now_ms)
        return self._take()

    def _expired_offsets(self, g: ClassicGroup, now_ms: int) -> list[TopicPartition]:
        retention = self.config.offsets_retention_ms

        def expired(base: Callable[[CommittedOffset], int], keep: set[str]) -> list[TopicPartition]:
            out = []
            for tp, c in g.offsets.items():
                if tp[0] in keep or tp in g.pending_commits:
                    continue
                if c.expire_timestamp >= 0:
                    if now_ms >= c.expire_timestamp:
                        out.append(tp)
                elif now_ms - base(c) >= retention:
                    out.append(tp)
            return out

        if g.protocol_type is None:
            return expired(lambda c: c.commit_timestamp, set())
        if g.state is GroupState.EMPTY:
            ts = g.state_timestamp
            return expired(lambda c: ts if ts is not None else c.commit_timestamp, set())
        if g.protocol_type == CONSUMER_PROTOCOL_TYPE and g.state is GroupState.STABLE:
            subscribed = g.subscribed_topics()
            if subscribed is not None:
                return expired(lambda c: c.commit_timestamp, subscribed)
        return []

    def _cleanup_offsets(self, now_ms: int) -> None:
        records: list[OffsetsRecord] = []
        for g in list(self.groups.values()):
            doomed = self._expired_offsets(g, now_ms)
            for tp in doomed:
                del g.offsets[tp]
                records.append(OffsetsRecord(
                    rec.encode_offset_commit_key(g.group_id, tp[0], tp[1]), None))
            if (g.state is GroupState.EMPTY and not g.offsets and not g.pending_commits
                    and not g.pending_members):
                g.transition(GroupState.DEAD, now_ms)
                del self.groups[g.group_id]
                records.append(OffsetsRecord(rec.encode_group_metadata_key(g.group_id), None))
        for sg in list(self.streams_groups.values()):
            if sg.members:
                continue
            for tp, c in list(sg.offsets.items()):
                expired = (now_ms >= c.expire_timestamp if c.expire_timestamp >= 0
                           else now_ms - c.commit_timestamp >= self.config.offsets_retention_ms)
                if expired and tp not in sg.pending_commits:
                    del sg.offsets[tp]
                    records.append(OffsetsRecord(
                        rec.encode_offset_commit_key(sg.group_id, tp[0], tp[1]), None))
            if not sg.offsets and not sg.pending_commits:
                sg.dead = True
                del self.streams_groups[sg.group_id]
                records += self._group_tombstones(sg.persisted)
                sg.persisted = {}
        for cg in list(self.consumer_groups.values()):
            keep = _consumer_subscribed(cg) if cg.members else set()
            for tp, c in list(cg.offsets.items()):
                if tp[0] in keep or tp in cg.pending_commits:
                    continue
                base = c.commit_timestamp
                if not cg.members and cg.state_timestamp is not None:
                    base = cg.state_timestamp
                expired = (now_ms >= c.expire_timestamp if c.expire_timestamp >= 0
                           else now_ms - base >= self.config.offsets_retention_ms)
                if expired:
                    del cg.offsets[tp]
                    records.append(OffsetsRecord(
                        rec.encode_offset_commit_key(cg.group_id, tp[0], tp[1]), None))
            if not cg.members and not cg.offsets and not cg.pending_commits:
                cg.dead = True
                del self.consumer_groups[cg.group_id]
                records += self._group_tombstones(cg.persisted)
                cg.persisted = {}
        if records:
            self._write(records, lambda error, now: None)

    # ---- loading ------------------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one record of the partition, in offset order (loading)."""
        k = rec.decode_key(key)
        if isinstance(k, rec.OffsetCommitKey):
            tp = (k.topic, k.partition)
            holder = self._offsets_holder(k.group)
            if value is None:
                if holder is not None:
                    holder.offsets.pop(tp, None)
                return
            v = rec.decode_offset_commit_value(value)
            if holder is None:
                holder = self.groups[k.group] = ClassicGroup(k.group)
            holder.offsets[tp] = CommittedOffset(v.offset, v.leader_epoch, v.metadata,
                                                 v.commit_timestamp, v.expire_timestamp)
        elif isinstance(k, rec.GroupMetadataKey):
            old = self.groups.get(k.group)
            offsets = old.offsets if old is not None else {}
            if value is None:
                if old is not None:
                    self.groups[k.group] = ClassicGroup(k.group, offsets=offsets)
                return
            gv = rec.decode_group_metadata_value(value)
            g = ClassicGroup(
                k.group, state_timestamp=gv.current_state_timestamp
                if gv.current_state_timestamp >= 0 else None,
                protocol_type=gv.protocol_type or None, protocol_name=gv.protocol,
                generation_id=gv.generation, leader_id=gv.leader, offsets=offsets,
            )
            for mm in gv.members:
                g.members[mm.member_id] = Member(
                    member_id=mm.member_id, group_instance_id=mm.group_instance_id,
                    client_id=mm.client_id, client_host=mm.client_host,
                    rebalance_timeout_ms=mm.rebalance_timeout,
                    session_timeout_ms=mm.session_timeout, protocol_type=gv.protocol_type,
                    protocols=((gv.protocol or "", mm.subscription),),
                    assignment=mm.assignment,
                )
                if mm.group_instance_id is not None:
                    g.static_members[mm.group_instance_id] = mm.member_id
            g.state = GroupState.STABLE if g.members else GroupState.EMPTY
            self.groups[k.group] = g
        else:
            ck = rec.decode_consumer_group_key(key)
            sk = None if ck is not None else rec.decode_streams_group_key(key)
            if ck is None and sk is None:
                if rec.decode_share_group_key(key) is not None:
                    if value is None:
                        self.share_records.pop(bytes(key), None)
                    else:
                        self.share_records[bytes(key)] = bytes(value)
                return  # other record types are not ours to load
            grp: ConsumerGroup | StreamsGroup | None
            if ck is not None:
                group_id = ck.group
                had = group_id in self.consumer_groups
                grp = self.replay_consumer_record(ck, value, bytes(key))
            else:
                assert sk is not None
                group_id = sk.group
                had = group_id in self.streams_groups
                grp = self.replay_streams_record(sk, value, bytes(key))
            if grp is None:
                return
            if not had and not grp.dead:
                # offsets replayed before the group's first record: they are the group's
                classic = self.groups.get(group_id)
                if classic is not None and not classic.members:
                    grp.offsets = classic.offsets
                    del self.groups[group_id]
            elif grp.dead and grp.offsets:
                self.groups[group_id] = ClassicGroup(group_id, offsets=grp.offsets)

    def finish_loading(self, now_ms: int) -> None:
        """After the last replayed record: start the members' session timers."""
        for g in list(self.groups.values()):
            if g.state is GroupState.EMPTY and not g.offsets and g.protocol_type is None \
                    and g.generation_id == 0:
                del self.groups[g.group_id]
                continue
            for m in g.members.values():
                m.heartbeat_deadline = now_ms + m.session_timeout_ms
        self.finish_loading_consumer_groups(now_ms)
        self.finish_loading_streams_groups(now_ms)
        self.next_cleanup_ms = now_ms + self.config.offsets_retention_check_interval_ms

    def unload(self, now_ms: int) -> Effects:
        """Leadership lost: every waiting request is answered NOT_COORDINATOR."""
        for g in self.groups.values():
            for m in g.members.values():
                self._reply(m.join_token, JoinGroupResult(ErrorCode.not_coordinator,
                                                          member_id=m.member_id))
                self._reply(m.sync_token, SyncGroupResult(ErrorCode.not_coordinator))
                m.join_token = m.sync_token = None
            if g.state is not GroupState.DEAD:
                g.transition(GroupState.DEAD, now_ms)
        self.groups.clear()
        for cg in self.consumer_groups.values():
            cg.dead = True
        self.consumer_groups.clear()
        for sg in self.streams_groups.values():
            sg.dead = True
        self.streams_groups.clear()
        self._fail_writes(ErrorCode.not_coordinator, now_ms)
        return self._take()
