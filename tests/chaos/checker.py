"""What a chaos run must prove: no acknowledged record lost, duplicated or reordered.

Producers write values `<producer>:<seq>` (seq rising from 0 per producer and partition)
and note which ones were acknowledged. After the faults, a reader consumes each partition
from its start to its high watermark. The checker compares the two:

- lost: acknowledged, but not in the log;
- duplicated: in the log more than once (with idempotence on, any is an error; without
  it, a retry after a lost acknowledgement may write twice, so duplicates are counted);
- reordered: within one partition, a producer's records appear out of seq order (first
  occurrences only, so a duplicate is not also counted as a reordering).

Records the log holds that were never acknowledged are fine (the ack was lost, or the
producer gave up), and are counted as `unacknowledged_present`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

RecordId = tuple[str, int]  # (producer, seq)


def encode_value(producer: str, seq: int) -> bytes:
    return f"{producer}:{seq}".encode()


def decode_value(value: bytes) -> RecordId:
    producer, _, seq = value.decode().rpartition(":")
    if not producer:
        raise ValueError(f"not a checker record: {value!r}")
    return producer, int(seq)


@dataclass
class Report:
    acknowledged: int = 0
    read: int = 0
    lost: list[tuple[int, RecordId]] = field(default_factory=list)
    duplicated: list[tuple[int, RecordId]] = field(default_factory=list)
    reordered: list[tuple[int, RecordId, RecordId]] = field(default_factory=list)
    unacknowledged_present: int = 0

    def summary(self) -> str:
        return (
            f"acknowledged={self.acknowledged} read={self.read} lost={len(self.lost)} "
            f"duplicated={len(self.duplicated)} reordered={len(self.reordered)} "
            f"unacknowledged_present={self.unacknowledged_present}"
            + (f" first_lost={self.lost[:5]}" if self.lost else "")
            + (f" first_duplicated={self.duplicated[:5]}" if self.duplicated else "")
            + (f" first_reordered={self.reordered[:5]}" if self.reordered else "")
        )


def check(
    acknowledged: Mapping[int, Iterable[RecordId]],
    log: Mapping[int, Sequence[bytes]],
) -> Report:
    """`acknowledged`: per partition, the records whose produce was acknowledged;
    `log`: per partition, every value read back in offset order."""
    report = Report()
    for partition in sorted(set(acknowledged) | set(log)):
        acked = set(acknowledged.get(partition, ()))
        report.acknowledged += len(acked)
        values = log.get(partition, ())
        report.read += len(values)
        ids = [decode_value(v) for v in values]
        counts = Counter(ids)
        for rid, n in counts.items():
            if n > 1:
                report.duplicated.extend([(partition, rid)] * (n - 1))
        for rid in sorted(acked - counts.keys()):
            report.lost.append((partition, rid))
        report.unacknowledged_present += sum(1 for rid in counts if rid not in acked)
        last_seq: dict[str, RecordId] = {}
        seen: set[RecordId] = set()
        for rid in ids:
            if rid in seen:
                continue
            seen.add(rid)
            prev = last_seq.get(rid[0])
            if prev is not None and rid[1] < prev[1]:
                report.reordered.append((partition, prev, rid))
            else:
                last_seq[rid[0]] = rid
    return report
