"""Scenarios for the Raft simulator; `run_seed(seed)` picks one and its shape
(voters, observers, loss, duplication) from the seed alone."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from random import Random

from kio.schema.errors import ErrorCode

from raft.roles import Leader
from tests.sim.cluster import SIM_CONFIG, Cluster, InvariantError

# A leader must exist this soon after the network heals: 20 election timeouts
# of the simulator's 100 ms.
LIVENESS_MS = 2000


def first_election(c: Cluster, rng: Random) -> None:
    c.wait_for_leader(LIVENESS_MS)
    c.run_with_load(300)
    c.wait_converged(LIVENESS_MS)


def leader_restart(c: Cluster, rng: Random) -> None:
    lid = c.wait_for_leader(LIVENESS_MS)
    c.run_with_load(150)
    c.crash(lid)
    c.run_with_load(rng.randint(20, 300))
    if len(c.voter_ids) > 1:
        c.wait_for_leader(LIVENESS_MS)
    c.start(lid)
    c.run_with_load(150)
    c.wait_converged(LIVENESS_MS)


def all_crash(c: Cluster, rng: Random) -> None:
    c.wait_for_leader(LIVENESS_MS)
    c.run_with_load(150)
    ids = list(c.nodes)
    rng.shuffle(ids)
    for i in ids:
        c.crash(i)
        c.run_with_load(rng.randint(0, 20))
    c.run_for(rng.randint(0, 200))
    rng.shuffle(ids)
    for i in ids:
        c.start(i)
        c.run_for(rng.randint(0, 50))
    c.wait_for_leader(LIVENESS_MS)
    c.run_with_load(150)
    c.wait_converged(LIVENESS_MS)


def leader_partitioned(c: Cluster, rng: Random) -> None:
    lid = c.wait_for_leader(LIVENESS_MS)
    c.run_with_load(150)
    old_epoch = c.nodes[lid].core.epoch  # type: ignore[union-attr]
    rest = set(c.nodes) - {lid}
    c.partition({lid}, rest)
    c.run_with_load(400)
    if len(c.voter_ids) >= 3:
        new = c.wait_for_leader(LIVENESS_MS)
        assert new != lid
        core = c.nodes[lid].core
        assert core is not None
        # check-quorum: the isolated leader resigned
        if isinstance(core.role, Leader) and core.epoch == old_epoch:
            raise InvariantError(f"isolated leader {lid} still leads epoch {old_epoch}")
    c.heal()
    c.wait_for_leader(LIVENESS_MS)
    c.run_with_load(150)
    c.wait_converged(LIVENESS_MS)


def minority_partition(c: Cluster, rng: Random) -> None:
    c.wait_for_leader(LIVENESS_MS)
    c.run_with_load(150)
    voters = sorted(c.voter_ids)
    minority = set(rng.sample(voters, (len(voters) - 1) // 2))
    observers = [i for i in c.nodes if i not in c.voter_ids]
    minority |= {o for o in observers if rng.random() < 0.5}
    majority = set(c.nodes) - minority
    c.partition(minority, majority)
    before = {
        i: (c.nodes[i].core.epoch, c.nodes[i].core.hw)  # type: ignore[union-attr]
        for i in minority if c.nodes[i].alive
    }
    committed = c.committed_end
    # records a minority leader appends from now on can never commit; what was
    # already acknowledged by majority-side voters still may
    ceiling = max(n.log.end_offset for n in c.nodes.values() if n.alive)
    c.run_with_load(500)
    c.wait_for_leader(LIVENESS_MS)
    c.run_with_load(100)
    if c.committed_end <= committed:
        raise InvariantError("the majority made no progress")
    for i, (epoch, hw) in before.items():
        core = c.nodes[i].core
        assert core is not None
        if i in c.voter_ids and core.epoch != epoch:
            raise InvariantError(f"minority voter {i} moved epoch {epoch} -> {core.epoch}")
        if core.hw > max(hw, ceiling):
            raise InvariantError(f"minority node {i} committed new records: HW {hw} -> "
                                 f"{core.hw}, log end at the partition {ceiling}")
    c.heal()
    c.wait_for_leader(LIVENESS_MS)
    c.run_with_load(150)
    c.wait_converged(LIVENESS_MS)


def back_to_back(c: Cluster, rng: Random) -> None:
    dead: list[int] = []
    for _ in range(3):
        lid = c.wait_for_leader(LIVENESS_MS)
        c.run_with_load(rng.randint(10, 120))
        c.crash(lid)
        dead.append(lid)
        alive_voters = [v for v in c.voter_ids if c.nodes[v].alive]
        while len(alive_voters) < len(c.voter_ids) // 2 + 1:
            back = dead.pop(0)
            c.run_for(rng.randint(0, 100))
            c.start(back)
            alive_voters.append(back)
    for d in dead:
        c.start(d)
    c.wait_for_leader(LIVENESS_MS)
    c.run_with_load(150)
    c.wait_converged(LIVENESS_MS)


def snapshot_catchup(c: Cluster, rng: Random) -> None:
    lid = c.wait_for_leader(LIVENESS_MS)
    c.run_with_load(100)
    laggard = rng.choice(sorted(i for i in c.nodes if i != lid))
    c.crash(laggard)
    c.run_with_load(700, (5, 15))
    c.start(laggard)
    c.wait_for_leader(LIVENESS_MS)
    c.run_with_load(100)
    c.wait_converged(LIVENESS_MS)
    n = c.nodes[laggard]
    if n.snapshots_loaded == 0:
        raise InvariantError(f"laggard {laggard} never loaded a snapshot from the leader")


def restart_storm(c: Cluster, rng: Random) -> None:
    """Issue 17: every node killed and restarted from its disk several times in quick
    succession; a minority of voters (and any observer) may come back with the head of
    its log gone and no snapshot covering it.  Such a node must neither vote nor stand
    (checked after every event), must apply nothing, and must come back by loading the
    leader's snapshot -- never by spinning on a DivergingEpoch below its log start."""
    c.wait_for_leader(LIVENESS_MS)
    c.run_with_load(150)
    voters = sorted(c.voter_ids)
    may_lose = set(rng.sample(voters, (len(voters) - 1) // 2))
    may_lose |= {i for i in c.nodes if i not in c.voter_ids}
    for _round in range(rng.randint(2, 5)):
        ids = list(c.nodes)
        rng.shuffle(ids)
        for i in ids:
            if i in may_lose and rng.random() < 0.5:
                c.lose_head(i)
            else:
                c.crash(i)
            c.run_with_load(rng.randint(0, 30))
            c.start(i)
            c.run_with_load(rng.randint(0, 60))
    c.wait_for_leader(LIVENESS_MS)
    c.run_with_load(150)
    c.wait_converged(LIVENESS_MS)
    for n in c.nodes.values():
        if n.core is not None and n.core.wants_snapshot():
            raise InvariantError(f"node {n.node_id} still lacks the state its log lost")


def chaos(c: Cluster, rng: Random) -> None:
    c.wait_for_leader(LIVENESS_MS)
    ids = sorted(c.nodes)
    for _ in range(rng.randint(3, 8)):
        action = rng.random()
        if action < 0.35:
            c.crash(rng.choice(ids))
        elif action < 0.6:
            for i in ids:
                if not c.nodes[i].alive and rng.random() < 0.7:
                    c.start(i)
        elif action < 0.85:
            k = rng.randint(1, len(ids))
            side = set(rng.sample(ids, k))
            c.partition(side, set(ids) - side)
        else:
            c.heal()
        c.run_with_load(rng.randint(20, 250))
    c.heal()
    for i in ids:
        if not c.nodes[i].alive:
            c.start(i)
    c.wait_for_leader(LIVENESS_MS)
    c.run_with_load(150)
    c.wait_converged(LIVENESS_MS)


def membership(c: Cluster, rng: Random) -> None:
    """KIP-853 under faults: observers are added as voters and voters (the leader too)
    removed, one change at a time, while nodes crash and restart, the network partitions
    and messages are lost.  Every change goes through the live leader; refused ones
    (another change in progress, an observer not caught up, no leader) are retried."""
    c.wait_for_leader(LIVENESS_MS)
    c.run_with_load(100)
    ids = sorted(c.nodes)
    for _ in range(rng.randint(3, 8)):
        voters = c.voters_now()
        addable = [i for i in ids if i not in voters and c.nodes[i].alive]
        op = rng.random()
        if addable and (op < 0.55 or len(voters) == 1):
            target = rng.choice(addable)
            for _try in range(30):
                if c.change_voters(add=target) == ErrorCode.none:
                    if rng.random() < 0.3:
                        # at once another change: refused while the first is uncommitted
                        c.change_voters(remove=rng.choice(sorted(c.voters_now())))
                    break
                c.run_with_load(rng.randint(10, 40))
        elif len(voters) > 1:
            target = rng.choice(sorted(voters))
            for _try in range(30):
                if target not in c.voters_now() or c.change_voters(remove=target) == \
                        ErrorCode.none:
                    break
                c.run_with_load(rng.randint(10, 40))
        fault = rng.random()
        if fault < 0.25:
            victim = rng.choice(ids)
            c.crash(victim)
            c.run_with_load(rng.randint(0, 150))
            c.start(victim)
        elif fault < 0.4:
            side = set(rng.sample(ids, rng.randint(1, max(1, len(ids) // 2))))
            c.partition(side, set(ids) - side)
            c.run_with_load(rng.randint(50, 250))
            c.heal()
        c.run_with_load(rng.randint(0, 120))
    c.heal()
    for i in ids:
        if not c.nodes[i].alive:
            c.start(i)
    c.wait_for_leader(LIVENESS_MS)
    c.run_with_load(150)
    c.wait_converged(LIVENESS_MS)


Scenario = Callable[[Cluster, Random], None]
SCENARIOS: list[tuple[str, Scenario]] = [
    ("first_election", first_election),
    ("leader_restart", leader_restart),
    ("all_crash", all_crash),
    ("leader_partitioned", leader_partitioned),
    ("minority_partition", minority_partition),
    ("back_to_back", back_to_back),
    ("snapshot_catchup", snapshot_catchup),
    ("chaos", chaos),
    ("restart_storm", restart_storm),
    ("membership", membership),
]


@dataclass(frozen=True)
class SeedResult:
    seed: int
    scenario: str
    voters: int
    observers: int
    trace_hash: str
    events: int
    committed: int
    sim_ms: int


def shape(seed: int) -> tuple[str, int, int, float, float, int]:
    """(scenario, voters, observers, drop, duplicate, snapshot every N records)"""
    rng = Random(seed * 7919 + 17)
    name, _fn = SCENARIOS[seed % len(SCENARIOS)]
    voters = rng.choice([1, 3, 3, 5])
    if name in ("leader_partitioned", "minority_partition", "back_to_back"):
        voters = rng.choice([3, 5])
    observers = rng.randint(0, 3)
    if voters == 1 and observers == 0 and name == "snapshot_catchup":
        observers = 1
    if name == "membership":
        observers = rng.randint(1, 3)
    drop = rng.choice([0.0, 0.0, 0.01, 0.05])
    dup = rng.choice([0.0, 0.02])
    snapshot_every = 15 if name == "snapshot_catchup" else rng.choice([0, 0, 40])
    return name, voters, observers, drop, dup, snapshot_every


def run_seed(seed: int) -> SeedResult:
    name, voters, observers, drop, dup, snapshot_every = shape(seed)
    fn = dict(SCENARIOS)[name]
    # half the seeds let a bare high-watermark update wait for records (as the driver
    # does), half answer at once
    cfg = replace(SIM_CONFIG, hw_notify_delay_ms=5) if (seed // 8) % 2 else SIM_CONFIG
    # KIP-853 voters (bootstrapped from a formatted voter set, written into the log by
    # the first leader) for the membership scenario and half of the others
    dynamic = name == "membership" or (seed // 16) % 2 == 1
    c = Cluster(seed, voters, observers, drop=drop, duplicate=dup,
                snapshot_every=snapshot_every, config=cfg, dynamic=dynamic)
    try:
        fn(c, Random(seed))
        c.final_check()
    except InvariantError as e:
        raise InvariantError(
            f"seed {seed} ({name}, {voters} voters, {observers} observers, drop {drop}, "
            f"dup {dup}) at {c.now} ms: {e}\nreplay: python -m tests.sim.run --seeds 1 "
            f"--start {seed}"
        ) from e
    return SeedResult(seed, name, voters, observers, c.trace_hash, c.events,
                      c.committed_end, c.now)
