"""Leader-epoch checks for partition runs: was there ever a second leader in one epoch?

Kafka's replication is safe only if each leader epoch of a partition (and each epoch of
the Raft metadata quorum) has at most one leader: followers truncate to "the end of epoch
E on the leader", so two leaders writing different records under the same epoch leave
replicas that disagree below their high watermark, for good, and acknowledged records that
a later leader does not have. Three independent witnesses, none trusting Skiff's own code:

- `LeaderClaims`: what the nodes said during the run. Each DescribeQuorum answer gives
  (Raft epoch, leader) and each broker's Metadata gives (partition, leader epoch, leader);
  one epoch named with two different leaders is a violation.
- `check_acked_positions`: what the log holds at each acknowledged offset. A produce
  acknowledgement carries the offset the leader assigned; the record there at the end
  must be that record. A leader that acknowledged a write, then lost the log position to
  another leader's write (two leaders, or a truncation below the high watermark), shows up
  here. It also returns the leader epoch each acknowledged write ended up with, and
  `check_epochs_monotonic` requires epochs to never go down along a partition's offsets.
- `compare_replicas`: the segment files of every replica, parsed here from Kafka's record
  batch format (no broker code): where two replicas both hold offsets, the batches must be
  the same (same offsets, epoch and CRC). A batch that differs under the same epoch is the
  footprint of two leaders in one epoch; under different epochs, of an unrepaired
  divergence. Their leader-epoch-checkpoint files must agree on where each epoch starts.
"""

from __future__ import annotations

import struct
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.chaos.checker import RecordId, decode_value

# ---- what the nodes said ---------------------------------------------------------------------


@dataclass
class LeaderClaims:
    """(scope, epoch) -> {leader: first (observer, time) that named it}; scope is "raft" or
    a partition number."""

    seen: dict[tuple[str, int], dict[int, tuple[int, float]]] = field(
        default_factory=lambda: defaultdict(dict))
    samples: int = 0

    def observe(self, scope: str, epoch: int, leader: int, observer: int, at: float) -> None:
        self.samples += 1
        if leader < 0 or epoch < 0:
            return
        self.seen[(scope, epoch)].setdefault(leader, (observer, at))

    def violations(self) -> list[str]:
        out = []
        for (scope, epoch), leaders in sorted(self.seen.items()):
            if len(leaders) > 1:
                named = ", ".join(f"{leader} (said by node {obs} at t={at:.2f})"
                                  for leader, (obs, at) in sorted(leaders.items()))
                out.append(f"{scope} epoch {epoch} had leaders {named}")
        return out


# ---- what the log holds at acknowledged offsets ---------------------------------------------


@dataclass
class PositionReport:
    checked: int = 0
    misplaced: list[tuple[int, RecordId, int, str]] = field(default_factory=list)
    epoch_of_ack: dict[tuple[int, RecordId], int] = field(default_factory=dict)

    def summary(self) -> str:
        return (f"acknowledged offsets checked={self.checked} misplaced={len(self.misplaced)}"
                + (f" first_misplaced={self.misplaced[:5]}" if self.misplaced else ""))


def check_acked_positions(
    acked_offsets: Mapping[int, Mapping[RecordId, int]],
    records: Mapping[int, Sequence[tuple[int, int, bytes]]],
) -> PositionReport:
    """`acked_offsets`: per partition, each acknowledged record's offset from its
    acknowledgement; `records`: per partition, (offset, leader epoch, value) as read back.
    Offsets below the first one read (deleted by retention) are not checked."""
    report = PositionReport()
    for partition, acks in acked_offsets.items():
        at = {offset: (epoch, value) for offset, epoch, value in records.get(partition, ())}
        first = min(at) if at else None
        for rid, offset in acks.items():
            if first is None or offset < first:
                report.misplaced.append((partition, rid, offset, "no record there"))
                continue
            report.checked += 1
            found = at.get(offset)
            if found is None:
                report.misplaced.append((partition, rid, offset, "no record there"))
                continue
            epoch, value = found
            try:
                there = decode_value(value)
            except ValueError:
                there = ("?", -1)
            if there != rid:
                report.misplaced.append((partition, rid, offset, f"holds {there}"))
            else:
                report.epoch_of_ack[(partition, rid)] = epoch
    return report


def check_epochs_monotonic(records: Mapping[int, Sequence[tuple[int, int, bytes]]]
                           ) -> list[str]:
    """Leader epochs never decrease along a partition's offsets."""
    out = []
    for partition, recs in sorted(records.items()):
        last = -1
        for offset, epoch, _value in recs:
            if epoch < last:
                out.append(f"partition {partition}: offset {offset} has epoch {epoch} after "
                           f"epoch {last}")
                break
            last = epoch
    return out


# ---- what each replica holds on disk --------------------------------------------------------

# baseOffset, length, leaderEpoch, magic, crc, attributes, lastOffsetDelta, baseTimestamp,
# maxTimestamp, producerId, producerEpoch, baseSequence (Kafka's record batch v2 header)
_HEADER = struct.Struct(">qiiBIhiqqqhi")


@dataclass(frozen=True)
class Batch:
    base: int
    last: int
    epoch: int
    crc: int
    # the idempotent producer's id, epoch and first sequence (-1: none), to tell a batch
    # the producer sent twice (another sequence or producer epoch) from one the broker
    # appended twice (the same)
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1


def read_batches(partition_dir: Path) -> list[Batch]:
    """Every complete record batch in the directory's `.log` segments, in offset order (a
    torn tail, as a kill -9 leaves before recovery, is ignored)."""
    batches = []
    for seg in sorted(partition_dir.glob("*.log")):
        data = seg.read_bytes()
        pos = 0
        while pos + _HEADER.size <= len(data):
            (base, length, epoch, magic, crc, _attrs, last_delta, _ts, _max_ts, pid,
             producer_epoch, base_sequence) = _HEADER.unpack_from(data, pos)
            if length <= 0 or pos + 12 + length > len(data) or magic != 2:
                break
            batches.append(Batch(base, base + last_delta, epoch, crc, pid, producer_epoch,
                                 base_sequence))
            pos += 12 + length
    return batches


def renumbered_by_client(copies: Sequence[Batch]) -> bool:
    """Whether the batches holding the copies of one record were sent under different
    producer ids or producer epochs, all of them: the client sent the record again after
    bumping its epoch or taking a new id (librdkafka does, for every partition, after an
    OUT_OF_ORDER_SEQUENCE_NUMBER on any one: issue #4953), which no broker can deduplicate.
    Two copies under one producer id and epoch are the broker's: it appended a retry of a
    batch whose sequence it already held."""
    producers = [(b.producer_id, b.producer_epoch) for b in copies]
    return all(pid >= 0 for pid, _ in producers) and len(set(producers)) == len(producers)


def read_epoch_checkpoint(partition_dir: Path) -> list[tuple[int, int]]:
    path = partition_dir / "leader-epoch-checkpoint"
    try:
        lines = path.read_text().split("\n")
    except OSError:
        return []
    count = int(lines[1])
    return [(int(e), int(o)) for e, o in (line.split() for line in lines[2:2 + count])]


def compare_replicas(replicas: Mapping[int, Sequence[Batch]]) -> list[str]:
    """Conflicts between replicas where both hold the offsets: a batch of one replica that
    the other holds with another epoch or CRC, or with other boundaries."""
    out = []
    ids = sorted(replicas)
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            out.extend(_compare_pair(a, replicas[a], b, replicas[b]))
    return out


def _compare_pair(a: int, ra: Sequence[Batch], b: int, rb: Sequence[Batch]) -> list[str]:
    if not ra or not rb:
        return []
    lo = max(ra[0].base, rb[0].base)
    hi = min(ra[-1].last, rb[-1].last)
    by_base = {x.base: x for x in rb}
    out = []
    for x in ra:
        if x.base < lo or x.last > hi:
            continue
        y = by_base.get(x.base)
        if y is None:
            out.append(f"replica {a} has batch {x} whose offsets replica {b} holds in "
                       f"other batches")
        elif (y.last, y.epoch, y.crc) != (x.last, x.epoch, x.crc):
            what = ("the same epoch: two leaders wrote in one epoch" if x.epoch == y.epoch
                    else "different epochs: a divergence that was not repaired")
            out.append(f"offset {x.base}: replica {a} has {x}, replica {b} has {y} "
                       f"({what})")
        if len(out) >= 10:
            break
    return out


def compare_epoch_checkpoints(checkpoints: Mapping[int, Iterable[tuple[int, int]]],
                              log_starts: Mapping[int, int]) -> list[str]:
    """Where two replicas both know an epoch that starts after both logs' start offsets,
    they agree on its start offset."""
    out = []
    ids = sorted(checkpoints)
    maps = {r: dict(checkpoints[r]) for r in ids}
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            floor = max(log_starts.get(a, 0), log_starts.get(b, 0))
            for epoch in sorted(maps[a].keys() & maps[b].keys()):
                sa, sb = maps[a][epoch], maps[b][epoch]
                if sa != sb and min(sa, sb) > floor:
                    out.append(f"epoch {epoch} starts at {sa} on replica {a} but at {sb} "
                               f"on replica {b}")
    return out
