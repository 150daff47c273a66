"""The role transition table (raft/core.py TRANSITIONS) and its check on every change."""

from __future__ import annotations

import ast
import pathlib
import re

import pytest
from kio.schema.errors import ErrorCode

from raft.core import TRANSITIONS, IllegalTransition
from raft.leader import LeaderState
from raft.messages import BeginQuorumEpochRequest, FetchRequest, FetchResponse, VoteRequest
from raft.roles import Candidate, Follower, Leader, Unattached
from tests.unit.raft.test_raft_core import elect, make, sends

ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_table_is_the_list_in_the_docstring() -> None:
    doc = ast.get_docstring(ast.parse((ROOT / "raft/core.py").read_text())) or ""
    listed = set()
    for m in re.finditer(r"^  (\w+)\s+-> ([\w/]+)", doc, re.MULTILINE):
        for to in m.group(2).split("/"):
            listed.add((m.group(1), to))
    assert listed == {(a.__name__, b.__name__) for a, b in TRANSITIONS}


def test_an_unlisted_transition_raises_and_changes_nothing() -> None:
    core = make(1)
    before = core.role
    assert isinstance(before, Unattached)
    with pytest.raises(IllegalTransition, match="Unattached -> Leader"):
        core._set_role(Leader(before.epoch + 1, 0, LeaderState((), 0, False)))
    with pytest.raises(IllegalTransition, match="Unattached -> Candidate"):
        core._set_role(Candidate(before.epoch + 1, frozenset({1}), frozenset(), 100))
    assert core.role is before and core.state_store.read().epoch == before.epoch


def test_the_epoch_never_goes_back() -> None:
    core = make(1)
    core.handle_request(2, 1, BeginQuorumEpochRequest(5, 2), 10)
    r = core.role
    assert isinstance(r, Follower) and r.epoch == 5
    with pytest.raises(IllegalTransition, match="goes back from 5 to 4"):
        core._set_role(Follower(4, 2, -1, 100))
    with pytest.raises(IllegalTransition, match="goes back"):
        core._move_deadline(Follower(4, 2, -1, 100))


def test_a_leader_that_sees_a_higher_epoch_follows() -> None:
    """Leader -> Follower and Leader -> Unattached (the simulator's first 400 seeds
    never take these two), and a Fetch parked by the old leader is answered."""
    core = make(1)
    now = elect(core)
    sends(core)
    epoch = core.epoch
    core.handle_request(2, 6, FetchRequest(epoch, 2, 1, epoch, 1 << 20, 500), now)
    sends(core)  # answered at once: it carries the new high watermark
    core.handle_request(2, 7, FetchRequest(epoch, 2, 1, epoch, 1 << 20, 500), now)
    assert not [s for s in sends(core) if s.is_response]  # parked: nothing new
    core.handle_request(3, 9, VoteRequest(epoch + 1, 3, epoch, 1, False), now + 1)
    assert isinstance(core.role, Unattached) and core.epoch == epoch + 1
    answers = {s.rid: s.message for s in sends(core) if s.is_response}
    assert isinstance(answers[7], FetchResponse)
    assert answers[7].error == ErrorCode.fenced_leader_epoch

    core2 = make(1)
    now = elect(core2)
    sends(core2)
    core2.handle_request(3, 1, BeginQuorumEpochRequest(core2.epoch + 1, 3), now)
    assert isinstance(core2.role, Follower) and core2.role.leader_id == 3
