"""Seeded fault schedules for the network-partition runs (pure: no IO, no cluster).

`generate(seed, count, first=0)` gives schedules `first .. first+count-1`; schedule i
depends on (seed, i) only, so any one of them can be replayed alone. Each has a kind (what
is cut), an extra fault (nothing, kill -9 or SIGSTOP of a node during the cut), a duration
and the random choices it needs; choices that depend on the cluster's state at that moment
(who leads the quorum, who leads a partition) are named by role here and resolved by the
runner when the schedule starts.

Kinds:
- raft_leader: the active controller is cut off from every other node.
- partition_leader_from_followers: the leader of one partition is cut off from the other
  brokers only (it still reaches the controllers, so it stays registered and leader).
- partition_leader_alone: the leader of one partition is cut off from every node (it still
  reaches the clients: a zombie leader the producers keep writing to).
- minority: one controller and 0..2 brokers on one side, the rest on the other (the
  minority side has the Raft leader or not, by the seed).
- bridge: two sides that cannot reach each other, and one node that reaches both.
- flapping: one of the cuts above switched on and off every few hundred milliseconds.
The kinds cycle with i, and the extras cycle against them so that the first 18 schedules
hold every (kind, extra) pair once.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

KINDS = ("raft_leader", "partition_leader_from_followers", "partition_leader_alone",
         "minority", "bridge", "flapping")
EXTRAS = ("none", "kill", "pause")
FLAP_TARGETS = ("raft_leader", "partition_leader_from_followers", "partition_leader_alone",
                "minority")
VICTIMS = ("raft_leader", "partition_leader", "any")


@dataclass(frozen=True)
class Schedule:
    seed: int
    index: int
    kind: str
    extra: str
    duration_s: float
    partition: int                 # whose leader the partition kinds (and victims) target
    minority_brokers: int          # minority: brokers on the controller's side
    minority_has_raft_leader: bool
    bridge_is_controller: bool     # bridge: the node that sees both sides
    flap_target: str
    flap_phases: tuple[float, ...]  # flapping: alternating cut / open durations, cut first
    extra_at_s: float              # when the kill or pause happens, from the cut's start
    extra_victim: str
    pause_s: float
    pick_seed: int                 # seeds the runner's choices among concrete nodes

    @property
    def name(self) -> str:
        return f"#{self.index} {self.kind}+{self.extra}"

    def describe(self) -> str:
        detail = {"partition_leader_from_followers": f" p{self.partition}",
                  "partition_leader_alone": f" p{self.partition}",
                  "minority": f" brokers={self.minority_brokers} "
                              f"raft_leader_inside={self.minority_has_raft_leader}",
                  "bridge": f" bridge_is_controller={self.bridge_is_controller}",
                  "flapping": f" target={self.flap_target} phases={len(self.flap_phases)}",
                  }.get(self.kind, "")
        extra = ("" if self.extra == "none" else
                 f" {self.extra} {self.extra_victim} at {self.extra_at_s:.1f}s"
                 + (f" for {self.pause_s:.1f}s" if self.extra == "pause" else ""))
        return f"{self.name}{detail} for {self.duration_s:.1f}s{extra}"


def generate(seed: int, count: int, first: int = 0, partitions: int = 3,
             min_s: float = 2.5, max_s: float = 5.0) -> list[Schedule]:
    return [one(seed, i, partitions, min_s, max_s) for i in range(first, first + count)]


def one(seed: int, index: int, partitions: int = 3, min_s: float = 2.5,
        max_s: float = 5.0) -> Schedule:
    rng = random.Random(f"{seed}:{index}")
    kind = KINDS[index % len(KINDS)]
    extra = EXTRAS[(index // len(KINDS) + index) % len(EXTRAS)]
    duration = round(rng.uniform(min_s, max_s), 2)
    phases: list[float] = []
    while sum(phases) < duration:
        phases.append(round(rng.uniform(0.2, 1.0), 2))
    return Schedule(
        seed=seed, index=index, kind=kind, extra=extra, duration_s=duration,
        partition=rng.randrange(partitions),
        minority_brokers=rng.randrange(3),
        minority_has_raft_leader=rng.random() < 0.5,
        bridge_is_controller=rng.random() < 0.5,
        flap_target=rng.choice(FLAP_TARGETS),
        flap_phases=tuple(phases),
        extra_at_s=round(rng.uniform(0.0, duration / 2), 2),
        extra_victim=rng.choice(VICTIMS),
        pause_s=round(rng.uniform(1.0, 4.0), 2),
        pick_seed=rng.randrange(2**31),
    )
