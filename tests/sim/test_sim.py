"""Deterministic simulation of the quorum: the fixed seeds 0-1999 on every run, and
EXTRA_SEEDS fresh ones from SIM_SEED_BASE (tests/conftest.py picks it from the clock
when unset and prints it in the session header), so each CI run explores seeds none ran
before. A failing seed is named with its replay command.

More seeds: python -m tests.sim.run --seeds N --start S
"""

from __future__ import annotations

import os
from random import Random

import pytest

from raft.core import RaftCore
from raft.messages import VoteRequest
from tests.sim import cluster as sim_cluster
from tests.sim.cluster import Cluster, InvariantError
from tests.sim.scenarios import SCENARIOS, run_seed, shape

SEEDS_PER_CHUNK = 125
CHUNKS = 16  # 2000 seeds


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_seeds(chunk: int) -> None:
    start = chunk * SEEDS_PER_CHUNK
    for seed in range(start, start + SEEDS_PER_CHUNK):
        run_seed(seed)  # raises InvariantError naming the seed and the replay command


EXTRA_CHUNKS = 2  # 250 fresh seeds a run


def fresh_seed_base() -> int:
    return int(os.environ["SIM_SEED_BASE"])


@pytest.mark.parametrize("chunk", range(EXTRA_CHUNKS))
def test_fresh_seeds(chunk: int) -> None:
    base = fresh_seed_base()
    assert base >= CHUNKS * SEEDS_PER_CHUNK, "fresh seeds start above the fixed ones"
    start = base + chunk * SEEDS_PER_CHUNK
    for seed in range(start, start + SEEDS_PER_CHUNK):
        try:
            run_seed(seed)  # an InvariantError names the seed and the replay command
        except InvariantError:
            raise
        except Exception as e:
            raise AssertionError(f"seed {seed} (SIM_SEED_BASE={base}) raised {e!r}; "
                                 f"replay: python -m tests.sim.run --seeds 1 --start {seed}"
                                 ) from e


def test_every_scenario_and_shape_is_covered() -> None:
    names = {shape(s)[0] for s in range(1000)}
    assert names == {n for n, _ in SCENARIOS}
    sizes = {(shape(s)[1], shape(s)[2]) for s in range(1000)}
    assert {v for v, _ in sizes} == {1, 3, 5}
    assert {o for _, o in sizes} == {0, 1, 2, 3}


def test_same_seed_same_trace() -> None:
    for seed in (3, 6, 7, 12, 1234):
        a = run_seed(seed)
        b = run_seed(seed)
        assert a.trace_hash == b.trace_hash
        assert a.events == b.events
    assert run_seed(7).trace_hash != run_seed(15).trace_hash


class _VotesForAnyLog(RaftCore):
    """A broken voter that ignores the log check (KIP-595 "Vote")."""

    def _log_up_to_date(self, last_epoch: int, last_offset: int) -> bool:
        return True


class _ForgetfulVoter(RaftCore):
    """A broken voter that votes again in the same epoch for anyone."""

    def _on_vote(self, src: int, rid: int, req: VoteRequest) -> None:
        r = self.role
        if not req.pre_vote and req.epoch == r.epoch and hasattr(r, "voted_for"):
            object.__setattr__(r, "voted_for", -1)
        super()._on_vote(src, rid, req)


class _IgnoresLostLog(RaftCore):
    """A broken voter that votes and runs although its log lost committed records."""

    def wants_snapshot(self) -> bool:
        return False

    def lost_committed_state(self) -> bool:
        return False


class _ConcurrentVoterChanges(RaftCore):
    """A broken leader that takes a voter change while another is uncommitted (KIP-853)."""

    def pending_voter_change(self) -> int:
        return -1


@pytest.mark.parametrize("broken", [_VotesForAnyLog, _ForgetfulVoter, _IgnoresLostLog,
                                    _ConcurrentVoterChanges])
def test_simulator_catches_broken_cores(
    monkeypatch: pytest.MonkeyPatch, broken: type[RaftCore]
) -> None:
    """The invariants are not vacuous: a core with a broken vote rule is caught."""
    monkeypatch.setattr(sim_cluster, "RaftCore", broken)
    caught = 0
    for seed in range(400):
        name, voters, observers, drop, dup, snap = shape(seed)
        if broken is _ConcurrentVoterChanges:
            if name != "membership":
                continue
        elif voters < 3 or (broken is _IgnoresLostLog and name != "restart_storm"):
            continue
        c = Cluster(seed, voters, observers, drop=drop, duplicate=dup, snapshot_every=snap,
                    dynamic=name == "membership")
        try:
            dict(SCENARIOS)[name](c, Random(seed))
            c.final_check()
        except InvariantError:
            caught += 1
        if caught >= 1:
            break
    assert caught >= 1
