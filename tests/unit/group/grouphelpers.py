"""A driver for the pure GroupCoordinator: fake time, tokens, and a log that writes complete."""

from __future__ import annotations

import itertools
import random
import struct
from dataclasses import replace
from typing import Any

from kio.schema.errors import ErrorCode

from broker.group.coordinator import ClassicGroup, GroupCoordinator, GroupState
from broker.group.types import (
    CommitPartition,
    Effects,
    GroupConfig,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveMember,
    OffsetCommitRequest,
    OffsetsRecord,
    SyncGroupRequest,
    Write,
)

START_MS = 1_700_000_000_000


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


class Driver:
    def __init__(self, **config: Any) -> None:
        config.setdefault("initial_rebalance_delay_ms", 0)
        self.config = replace(GroupConfig(), **config)
        self.now = START_MS
        self.coord = GroupCoordinator(self.config, random.Random(7), self.now)
        self.replies: dict[int, Any] = {}
        self.answered_at: dict[int, int] = {}  # token -> when the coordinator answered it
        self.log: list[OffsetsRecord] = []
        self.held: list[Write] = []
        self.auto_complete = True
        self.fail_with: ErrorCode | None = None
        self._tokens = itertools.count(1)

    # ---- plumbing ---------------------------------------------------------------------------

    def run(self, fx: Effects) -> None:
        for r in fx.replies:
            assert r.token not in self.replies, f"token {r.token} answered twice"
            self.replies[r.token] = r.result
            self.answered_at[r.token] = self.now
        for w in fx.writes:
            if self.auto_complete:
                self.complete(w)
            else:
                self.held.append(w)

    def complete(self, w: Write, error: ErrorCode | None = None) -> None:
        err = error or self.fail_with or ErrorCode.none
        if err is ErrorCode.none:
            self.log.extend(w.records)
        self.run(self.coord.write_completed(w.write_id, err, self.now))

    def release(self, error: ErrorCode | None = None) -> None:
        held, self.held = self.held, []
        for w in held:
            self.complete(w, error)

    def advance(self, ms: int) -> None:
        self.now += ms
        self.run(self.coord.tick(self.now))

    def token(self) -> int:
        return next(self._tokens)

    def group(self, group_id: str = "g") -> ClassicGroup:
        return self.coord.groups[group_id]

    def state(self, group_id: str = "g") -> GroupState | None:
        g = self.coord.groups.get(group_id)
        return None if g is None else g.state

    # ---- requests ---------------------------------------------------------------------------

    def join(self, member_id: str = "", *, group: str = "g", instance: str | None = None,
             protocols: tuple[tuple[str, bytes], ...] = (("range", b"r"),),
             protocol_type: str = "consumer", session: int = 10_000, rebalance: int = 30_000,
             require_known: bool = True, client: str = "cli",
             supports_skip: bool = False) -> int:
        tok = self.token()
        self.run(self.coord.join_group(tok, JoinGroupRequest(
            group_id=group, member_id=member_id, group_instance_id=instance, client_id=client,
            client_host="/127.0.0.1", session_timeout_ms=session,
            rebalance_timeout_ms=rebalance, protocol_type=protocol_type, protocols=protocols,
            require_known_member_id=require_known, supports_skip_assignment=supports_skip,
        ), self.now))
        return tok

    def join_new(self, **kw: Any) -> tuple[str, int]:
        """Join with the MEMBER_ID_REQUIRED round trip; returns (member id, pending token)."""
        first = self.join(**kw)
        res = self.replies[first]
        if kw.get("instance") is None:
            assert res.error is ErrorCode.member_id_required, res
            return res.member_id, self.join(res.member_id, **kw)
        return "", first

    def sync(self, member_id: str, generation: int, *, group: str = "g",
             assignments: tuple[tuple[str, bytes], ...] = (), instance: str | None = None,
             protocol_type: str | None = None, protocol_name: str | None = None) -> int:
        tok = self.token()
        self.run(self.coord.sync_group(tok, SyncGroupRequest(
            group_id=group, generation_id=generation, member_id=member_id,
            group_instance_id=instance, protocol_type=protocol_type,
            protocol_name=protocol_name, assignments=assignments,
        ), self.now))
        return tok

    def heartbeat(self, member_id: str, generation: int, *, group: str = "g",
                  instance: str | None = None) -> ErrorCode:
        return self.coord.heartbeat(HeartbeatRequest(group, generation, member_id, instance),
                                    self.now)

    def leave(self, *members: LeaveMember, group: str = "g") -> Any:
        result, fx = self.coord.leave_group(group, members, self.now)
        self.run(fx)
        return result

    def commit(self, *parts: tuple[str, int, int], group: str = "g", generation: int = -1,
               member_id: str = "", instance: str | None = None, metadata: str = "",
               retention: int = -1) -> int:
        tok = self.token()
        self.run(self.coord.commit_offsets(tok, OffsetCommitRequest(
            group_id=group, generation_id=generation, member_id=member_id,
            group_instance_id=instance,
            partitions=tuple(CommitPartition(t, p, o, 5, metadata) for t, p, o in parts),
            retention_time_ms=retention,
        ), self.now))
        return tok

    def stable_group(self, n: int, **kw: Any) -> tuple[list[str], int]:
        """n dynamic members joined and synced; returns (member ids, generation)."""
        ids: list[str] = []
        for _ in range(n):
            mid, _tok = self.join_new(**kw)
            ids.append(mid)
        g = self.group(kw.get("group", "g"))
        if g.state is GroupState.PREPARING_REBALANCE:
            for mid in ids:
                if not g.members[mid].awaiting_join:
                    self.join(mid, **kw)
        g = self.group(kw.get("group", "g"))
        assert g.state is GroupState.COMPLETING_REBALANCE, g.state
        gen = g.generation_id
        leader = g.leader_id
        assert leader is not None
        self.sync(leader, gen, group=g.group_id,
                  assignments=tuple((m, f"a-{m}".encode()) for m in ids))
        for mid in ids:
            if mid != leader:
                self.sync(mid, gen, group=g.group_id)
        assert g.state is GroupState.STABLE
        return ids, gen
