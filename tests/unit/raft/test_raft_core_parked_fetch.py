"""Every Fetch the leader parks gets an answer, even when a newer Fetch from the same node
replaces it or the leader stops leading.

Found by the network-partition harness (tests/chaos/test_partitions.py, seed 222036): a
follower's Fetches held up by a partition reach the leader together after the heal; the
leader kept only the newest and never answered the others. Each unanswered request holds
one of the connection's 100 in-flight slots on the controller listener for good; after
enough partitions the listener stopped reading that connection, and the follower (whose
timed-out requests do not close the connection) lost the leader every fetch timeout,
forever: brokers fell behind the metadata, were fenced, and writes stopped.
"""

from __future__ import annotations

from random import Random

from raft.core import CoreConfig, RaftCore
from raft.messages import FetchRequest, FetchResponse
from raft.roles import Leader
from raft.store import MemoryLogStore, MemoryQuorumStateStore

OBSERVER = 9


def single_voter_leader() -> tuple[RaftCore, int]:
    core = RaftCore(1, frozenset({1}), MemoryLogStore(), MemoryQuorumStateStore(), Random(0),
                    0, CoreConfig())
    now = 0
    while not isinstance(core.role, Leader) and now < 10_000:
        now += 10
        core.tick(now)
    assert isinstance(core.role, Leader)
    core.handle_request(OBSERVER, 1, caught_up_fetch(core), now)  # learns the high watermark
    assert set(answers(core)) == {1}
    return core, now


def caught_up_fetch(core: RaftCore) -> FetchRequest:
    return FetchRequest(core.epoch, OBSERVER, core.log.end_offset, core.log.last_epoch(),
                        1 << 20, 500)


def answers(core: RaftCore) -> dict[int, FetchResponse]:
    return {s.rid: s.message for s in core.take_output().sends
            if s.is_response and isinstance(s.message, FetchResponse)}


def test_a_newer_fetch_from_the_same_node_answers_the_parked_one() -> None:
    core, now = single_voter_leader()
    core.handle_request(OBSERVER, 101, caught_up_fetch(core), now)
    assert answers(core) == {}  # parked: nothing new to send yet
    core.handle_request(OBSERVER, 102, caught_up_fetch(core), now + 1)
    assert set(answers(core)) == {101}  # the replaced one is answered, the new one parked
    core.tick(now + 600)
    assert set(answers(core)) == {102}


def test_parked_fetches_are_answered_when_the_leader_stops_leading() -> None:
    core, now = single_voter_leader()
    core.handle_request(OBSERVER, 201, caught_up_fetch(core), now)
    assert answers(core) == {}
    core.resign(now + 1)
    (answer,) = answers(core).values()
    assert answer.error.name != "none" and answer.epoch == core.epoch
