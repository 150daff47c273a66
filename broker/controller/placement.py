"""Replica placement: round-robin over brokers, rack-aware, first replica preferred leader.

The algorithm is Kafka's rack-aware assignment (AdminUtils.assignReplicasToBrokers):
brokers are listed so that racks alternate; partition p's first replica is
broker[(p + start) % n], the others follow with a shift that grows every n
partitions; a replica goes to a rack that has none of this partition's replicas
until every rack has one. Brokers without a rack form one rack of their own.
With one rack it reduces to plain round-robin. First replicas (the preferred
leaders) cycle over all brokers, so leaders are balanced. The random start and
shift come from an injected RNG, never from global randomness.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence


class PlacementError(ValueError):
    pass


def rack_alternated(brokers: Mapping[int, str | None]) -> list[int]:
    """Broker ids ordered so that consecutive brokers sit on different racks when possible."""
    by_rack: dict[str, list[int]] = {}
    for b in sorted(brokers):
        by_rack.setdefault(brokers[b] or "", []).append(b)
    racks = sorted(by_rack)
    out: list[int] = []
    depth = max((len(v) for v in by_rack.values()), default=0)
    for i in range(depth):
        for r in racks:
            if i < len(by_rack[r]):
                out.append(by_rack[r][i])
    return out


def place_replicas(
    brokers: Mapping[int, str | None],
    num_partitions: int,
    replication_factor: int,
    rng: random.Random,
    start_partition: int = 0,
) -> list[list[int]]:
    """Replica lists for partitions start_partition .. start_partition+num_partitions-1.

    `brokers` maps each usable (unfenced) broker id to its rack or None.
    """
    if replication_factor <= 0:
        raise PlacementError("Replication factor must be larger than 0.")
    if num_partitions < 0:
        raise PlacementError("Number of partitions must be non-negative.")
    n = len(brokers)
    if n == 0:  # Kafka's StripedReplicaPlacer checks this before the count
        raise PlacementError(
            f"Unable to replicate the partition {replication_factor} time(s): All brokers are "
            "currently fenced, or have all their log directories cordoned.")
    if replication_factor > n:
        raise PlacementError(
            f"Unable to replicate the partition {replication_factor} time(s): The target "
            f"replication factor of {replication_factor} cannot be reached because only {n} "
            "broker(s) are registered or some brokers have all their log directories cordoned.")
    arranged = rack_alternated(brokers)
    rack_of = {b: brokers[b] or "" for b in arranged}
    num_racks = len(set(rack_of.values()))
    start = rng.randrange(n)
    shift = rng.randrange(n)
    out: list[list[int]] = []
    pid = max(0, start_partition)
    for _ in range(num_partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start) % n
        leader = arranged[first]
        replicas = [leader]
        racks_used = {rack_of[leader]}
        used = {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                if k > 2 * n:  # cannot happen while replication_factor <= n; never spin
                    raise PlacementError("no broker left for a replica")
                b = arranged[_replica_index(first, shift * num_racks, k, n)]
                k += 1
                if ((rack_of[b] not in racks_used or len(racks_used) == num_racks)
                        and (b not in used or len(used) == n)):
                    replicas.append(b)
                    racks_used.add(rack_of[b])
                    used.add(b)
                    break
        out.append(replicas)
        pid += 1
    return out


def _replica_index(first: int, shift: int, index: int, n: int) -> int:
    return (first + 1 + (shift + index) % (n - 1)) % n


def validate_assignment(replicas: Sequence[int], placeable: Mapping[int, bool],
                        replication_factor: int | None = None) -> str | None:
    """A problem with one manual replica list, or None: Kafka's
    ReplicationControlManager.validateManualPartitionAssignment, in its order (the brokers
    sorted, so the first problem is the one Kafka names). `placeable` maps each registered
    broker to whether it has a log directory that is not cordoned (KIP-1066)."""
    if not replicas:
        return "The manual partition assignment includes an empty replica list."
    previous: int | None = None
    for b in sorted(replicas):
        if b not in placeable:
            return (f"The manual partition assignment includes broker {b}, but no such broker "
                    "is registered.")
        if not placeable[b]:
            return (f"The manual partition assignment includes broker {b}, but all its log "
                    "directories are cordoned.")
        if b == previous:
            return f"The manual partition assignment includes the broker {b} more than once."
        previous = b
    if replication_factor is not None and len(replicas) != replication_factor:
        return (f"The manual partition assignment includes a partition with {len(replicas)} "
                f"replica(s), but this is not consistent with previous partitions, which have "
                f"{replication_factor} replica(s).")
    return None
