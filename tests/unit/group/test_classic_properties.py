"""Random classic-protocol histories: clients that follow the protocol never own a partition
twice, no request waits forever, and the written log reloads into the same state."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from grouphelpers import Driver
from hypothesis import example, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from broker.group.coordinator import EMPTY_CONSUMER_ASSIGNMENT, GroupCoordinator, GroupState
from broker.group.types import (
    HeartbeatRequest,
    JoinGroupResult,
    LeaveMember,
    SyncGroupResult,
)

E = ErrorCode
PARTITIONS = 6
SESSION_MS = 3000
REBALANCE_MS = 6000


@dataclass
class Client:
    """An eager-protocol consumer: gives everything up before rejoining.

    Its session runs from the coordinator's last successful answer to it (a SyncGroup
    assignment or a Heartbeat), timed from when the coordinator sent that answer, not from when
    the model gets round to reading it: a SyncGroup answer read only after a tick longer than
    the session timeout comes from a session the coordinator has since expired. Like
    librdkafka's consumer, a client whose session ran out without a successful answer counts
    its assignment as lost, forgets its member id and rejoins."""

    name: str
    member_id: str = ""
    generation: int = -1
    owned: set[int] = field(default_factory=set)
    join_token: int | None = None
    sync_token: int | None = None
    alive: bool = True
    last_heartbeat: int = 0  # when it last sent a Heartbeat (one a second)
    last_answer: int = 0  # when the coordinator last answered it successfully


def assign(members: list[str]) -> dict[str, bytes]:
    out: dict[str, list[int]] = {m: [] for m in members}
    for p in range(PARTITIONS):
        out[members[p % len(members)]].append(p)
    return {m: bytes(ps) for m, ps in out.items()}


class World:
    def __init__(self, seed: int) -> None:
        self.d = Driver(initial_rebalance_delay_ms=500, min_session_timeout_ms=1000)
        self.clients: list[Client] = []
        self.rng = random.Random(seed)

    def rejoin(self, c: Client) -> None:
        c.owned.clear()  # eager: revoke before rejoining
        c.generation = -1
        c.join_token = self.d.join(c.member_id, session=SESSION_MS, rebalance=REBALANCE_MS,
                                   client=c.name)
        c.sync_token = None

    def step_client(self, c: Client) -> None:
        d = self.d
        if not c.alive:
            return
        if c.join_token is not None and c.join_token in d.replies:
            r = d.replies.pop(c.join_token)
            assert isinstance(r, JoinGroupResult)
            c.join_token = None
            if r.error is E.member_id_required:
                c.member_id = r.member_id
                self.rejoin(c)
            elif r.error is E.none:
                c.member_id, c.generation = r.member_id, r.generation_id
                plan = assign([m.member_id for m in r.members]) if r.members else {}
                c.sync_token = d.sync(c.member_id, c.generation,
                                      assignments=tuple(plan.items()))
            else:
                c.member_id = "" if r.error is E.unknown_member_id else c.member_id
                self.rejoin(c)
        if c.sync_token is not None and c.sync_token in d.replies:
            answered = d.answered_at[c.sync_token]
            r2 = d.replies.pop(c.sync_token)
            assert isinstance(r2, SyncGroupResult)
            c.sync_token = None
            if r2.error is E.none:
                # a member the leader left out gets an empty ConsumerProtocolAssignment,
                # not a list of partition bytes
                c.owned = (set() if r2.assignment == EMPTY_CONSUMER_ASSIGNMENT
                           else set(r2.assignment))
                c.last_heartbeat = c.last_answer = answered
            else:
                self.rejoin(c)
        if c.join_token is None and c.sync_token is None and c.generation >= 0:
            if d.now - c.last_answer >= SESSION_MS:
                # session timed out: the assignment is lost and the member id with it
                c.member_id = ""
                self.rejoin(c)
            elif d.now - c.last_heartbeat >= 1000:
                c.last_heartbeat = d.now
                err = d.coord.heartbeat(HeartbeatRequest("g", c.generation, c.member_id, None),
                                        d.now)
                if err is E.none:
                    c.last_answer = d.now
                else:
                    if err in (E.unknown_member_id, E.illegal_generation):
                        c.member_id = "" if err is E.unknown_member_id else c.member_id
                    self.rejoin(c)

    def check_no_double_ownership(self) -> None:
        seen: dict[int, str] = {}
        for c in self.clients:
            if not c.alive:
                continue
            for p in c.owned:
                assert p not in seen, f"partition {p}: {seen[p]} and {c.name}"
                seen[p] = c.name


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["add", "add", "crash", "leave", "tick", "tick", "tick",
                                 "commit"]), min_size=1, max_size=40),
       st.integers(0, 2**16))
# c0's generation-3 assignment, answered at t=17.2s, is read only after a 3.5s tick in which the
# coordinator expelled c0 (session 3s) and gave c3 every partition
@example(ops=["crash", "crash", "crash", "crash", "crash", "add", "add", "tick", "tick", "commit",
              "tick", "tick", "tick", "add", "tick", "tick", "crash", "tick", "add", "tick"],
         seed=2262)
def test_random_histories(ops: list[str], seed: int) -> None:
    w = World(seed)
    d = w.d
    for op in ops:
        live = [c for c in w.clients if c.alive]
        if op == "add" and len(live) < 5:
            c = Client(f"c{len(w.clients)}")
            w.clients.append(c)
            w.rejoin(c)
        elif op == "crash" and live:
            c = w.rng.choice(live)
            c.alive = False
            c.owned.clear()
        elif op == "leave" and live:
            c = w.rng.choice(live)
            c.alive = False
            c.owned.clear()
            if c.member_id:
                d.leave(LeaveMember(c.member_id))
        elif op == "commit" and live:
            c = w.rng.choice(live)
            if c.owned and c.generation >= 0:
                d.commit(*[("t", p, d.now) for p in sorted(c.owned)], generation=c.generation,
                         member_id=c.member_id)
        else:
            d.advance(w.rng.choice([100, 500, 1000, 3500]))
        for c in w.clients:
            w.step_client(c)
        w.check_no_double_ownership()

    # quiesce: every live client ends up with an answer and a stable group forms
    for _ in range(200):
        d.advance(250)
        for c in w.clients:
            w.step_client(c)
        w.check_no_double_ownership()
    live = [c for c in w.clients if c.alive]
    g = d.coord.groups.get("g")
    if live:
        assert g is not None and g.state is GroupState.STABLE, g and g.state
        assert {c.member_id for c in live} == set(g.members)
        assert all(c.join_token is None and c.sync_token is None for c in live)
        assert sorted(p for c in live for p in c.owned) == list(range(PARTITIONS))
    # nothing the coordinator holds is left unanswered
    assert d.coord.pending_writes() == 0

    # the log reloads into the same offsets and, for a Stable/Empty group, the same group
    fresh = GroupCoordinator(d.config, random.Random(1), d.now)
    for r in d.log:
        fresh.replay(r.key, r.value)
    fresh.finish_loading(d.now)
    if g is not None:
        assert fresh.fetch_offsets("g", None) == d.coord.fetch_offsets("g", None)
        if g.state is GroupState.STABLE:
            h = fresh.groups["g"]
            assert (h.generation_id, h.leader_id, h.protocol_name) == (
                g.generation_id, g.leader_id, g.protocol_name)
            assert {m: x.assignment for m, x in h.members.items()} == {
                m: x.assignment for m, x in g.members.items()}
