"""Offset ranges: turning (start, end) offsets into Spark tasks. Pure.

- `offsets_to_json` / `offsets_from_json`: Spark's offset document `{"topic":{"0":42}}`, the
  same shape Spark's Kafka source writes into a query's checkpoint.
- `split_ranges`: Spark's KafkaOffsetRangeCalculator. With `minPartitions` unset, or not
  more than the number of topic partitions, one task per topic partition; otherwise each
  range is cut into pieces in proportion to its size, so at least `minPartitions` tasks.
- `rate_limit`: Spark's maxOffsetsPerTrigger, spread over partitions in proportion to
  each one's backlog.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, int]


@dataclass(frozen=True, order=True)
class OffsetRange:
    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


class RangePartition(InputPartition):
    """One Spark task: read [from_offset, until_offset) of one or more topic partitions
    (never two ranges of the same partition), with one consumer."""

    def __init__(self, ranges: tuple[OffsetRange, ...]) -> None:
        super().__init__(ranges)
        self.ranges = ranges


def group_ranges(ranges: list[OffsetRange], per_task: int) -> list[tuple[OffsetRange, ...]]:
    """Ranges packed into tasks of up to `per_task`, no partition twice in a task."""
    groups: list[list[OffsetRange]] = []
    for r in ranges:
        for g in groups:
            if len(g) < per_task and all(
                    (x.topic, x.partition) != (r.topic, r.partition) for x in g):
                g.append(r)
                break
        else:
            groups.append([r])
    return [tuple(g) for g in groups]


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (t, p), off in sorted(offsets.items()):
        out.setdefault(t, {})[str(p)] = int(off)
    return out


def offsets_from_json(doc: Mapping[str, Mapping[str, int]]) -> Offsets:
    return {(t, int(p)): int(off) for t, parts in doc.items() for p, off in parts.items()}


def ranges_between(start: Offsets, end: Offsets) -> list[OffsetRange]:
    """One range per partition of `end` that has records; the caller has put every
    partition of `end` into `start` (new partitions at their earliest offset)."""
    out = []
    for (t, p), until in sorted(end.items()):
        frm = start[(t, p)]
        if until > frm:
            out.append(OffsetRange(t, p, frm, until))
    return out


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    if min_partitions is None or min_partitions <= len(ranges):
        return list(ranges)
    total = sum(r.size for r in ranges)
    if total == 0:
        return list(ranges)
    out: list[OffsetRange] = []
    for r in ranges:
        parts = max(math.ceil(r.size / total * min_partitions), 1)
        for i in range(parts):
            frm = r.from_offset + r.size * i // parts
            until = r.from_offset + r.size * (i + 1) // parts
            if until > frm:
                out.append(OffsetRange(r.topic, r.partition, frm, until))
    return out


def rate_limit(start: Offsets, latest: Offsets, limit: int) -> Offsets:
    """The end offsets of a micro-batch reading at most about `limit` records."""
    sizes = {tp: max(0, end - start.get(tp, end)) for tp, end in latest.items()}
    total = sum(sizes.values())
    if total <= limit:
        return dict(latest)
    out: Offsets = {}
    for tp, end in latest.items():
        begin = start.get(tp)
        if begin is None:
            out[tp] = end
            continue
        share = limit * sizes[tp] / total
        step = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(end, begin + step)
    return out
