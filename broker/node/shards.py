"""Which of a broker's worker processes owns a partition (`skiff.broker.workers`).

A broker with N workers runs N processes: the node process (worker 0), which also runs the
metadata quorum, the controller, the coordinators and the admin plane, and N-1 worker
processes. Each owns the logs, producer state and replication of a share of the
partitions; the node accepts the client connections and hands them to the processes in
turn (broker/node/workers.py), and each process hands a request's partitions that another
worker owns to that worker (broker/node/shard_routing.py). The split is fixed by the
topic's name and the partition's index, so it needs no coordination and survives
restarts: the internal topics (every name starting with "__": the group, transaction and
share-state logs the node's coordinators write) stay with worker 0, and a topic's
partitions take the workers in turn from a point its name picks, so its load is spread
evenly whatever its partition count.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

WORKERS_KEY = "skiff.broker.workers"


def owner_of(topic: str, partition: int, count: int) -> int:
    """The index (0..count-1) of the worker that owns `topic`'s `partition`."""
    if count <= 1 or topic.startswith("__"):
        return 0
    return (zlib.crc32(topic.encode()) + partition) % count


@dataclass(frozen=True, slots=True)
class ShardLayout:
    """This process's place among its broker's `count` workers."""

    count: int = 1
    index: int = 0

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ValueError(f"worker {self.index} of {self.count}")

    @property
    def sharded(self) -> bool:
        return self.count > 1

    def owner(self, topic: str, partition: int) -> int:
        return owner_of(topic, partition, self.count)

    def owns(self, topic: str, partition: int) -> bool:
        return owner_of(topic, partition, self.count) == self.index

    @property
    def file_suffix(self) -> str:
        """What this worker's per-log-dir files (checkpoints, the clean-shutdown marker) add
        to Kafka's names: nothing for worker 0, so a broker of one worker keeps Kafka's."""
        return "" if self.index == 0 else f".worker-{self.index}"
