"""Records the compat tests produce, and the checks every client's consumed records must pass.

One `Rec` is what a producer sent and what a consumer must get back, field for field:
key, value, headers (ordered, duplicates allowed), CreateTime timestamp, partition and offset.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

CODECS: tuple[str, ...] = ("none", "gzip", "snappy", "lz4", "zstd")

Header = tuple[str, bytes | None]


@dataclass
class Rec:
    key: bytes | None
    value: bytes | None
    headers: list[Header] = field(default_factory=list)
    timestamp_ms: int = 0
    partition: int = 0
    offset: int | None = None  # filled from the produce acknowledgement, or expected

    def brief(self) -> str:
        def b(x: bytes | None) -> str:
            if x is None:
                return "None"
            return repr(x[:24]) + (f"...({len(x)}B)" if len(x) > 24 else "")
        return (f"p{self.partition}@{self.offset} ts={self.timestamp_ms} key={b(self.key)} "
                f"value={b(self.value)} headers={[(k, b(v)) for k, v in self.headers]}")


def unique_topic(label: str) -> str:
    """A topic name no other test uses: legal Kafka characters only, under 249 chars."""
    clean = re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-.")[:80] or "t"
    return f"compat-{clean}-{uuid.uuid4().hex[:10]}"


def now_ms() -> int:
    return int(time.time() * 1000)


def make_records(tag: str, count: int, *, base_ts: int, partitions: Sequence[int] = (0,),
                 null_values: bool = True, null_header_values: bool = True,
                 headers: bool = True, empty_keys: bool = True) -> list[Rec]:
    """`count` varied records: null/empty/binary/unicode/large keys and values, headers with
    duplicate names and empty values, strictly increasing CreateTime timestamps from `base_ts`,
    spread round-robin over `partitions`. Flags switch off what a client cannot express."""
    out: list[Rec] = []
    for i in range(count):
        key: bytes | None = f"key-{tag}-{i:04d}".encode()
        value: bytes | None = f"value-{tag}-{i:04d}|".encode() * (1 + i % 7)
        hdrs: list[Header] = [("i", str(i).encode()), ("tag", tag.encode())]
        kind = i % 8
        if kind == 1:
            key = None
        elif kind == 2:
            value = bytes(range(256)) * 3  # every byte value
        elif kind == 3:
            key = "ключ-鍵-🔑".encode() + str(i).encode()
            value = "значение-値-✓".encode() * 5
        elif kind == 4:
            hdrs += [("dup", b"first"), ("dup", b"second"), ("empty", b"")]
        elif kind == 5:
            value = (f"{tag}-{i}-compressible-".encode()) * 1500  # ~30 KB, squeezes well
        elif kind == 6:
            value = None if null_values else b""
            if null_header_values:
                hdrs.append(("null", None))
        elif kind == 7 and empty_keys:
            key = b""
            value = b""
        out.append(Rec(key=key, value=value, headers=hdrs if headers else [],
                       timestamp_ms=base_ts + i, partition=partitions[i % len(partitions)]))
    return out


def assign_expected_offsets(records: Iterable[Rec], start: dict[int, int] | None = None) -> None:
    """Offsets a broker must give records produced in this order (per-partition sequence)."""
    nxt = dict(start or {})
    for r in records:
        r.offset = nxt.get(r.partition, 0)
        nxt[r.partition] = r.offset + 1


def assert_same_records(expected: Sequence[Rec], got: Sequence[Rec], *,
                        check_headers: bool = True, check_timestamps: bool = True) -> None:
    """Every partition's records in order with every field equal; no extra, none missing."""
    by_part_exp: dict[int, list[Rec]] = {}
    by_part_got: dict[int, list[Rec]] = {}
    for r in expected:
        by_part_exp.setdefault(r.partition, []).append(r)
    for r in got:
        by_part_got.setdefault(r.partition, []).append(r)
    assert sorted(by_part_got) == sorted(by_part_exp), (
        f"partitions with records: got {sorted(by_part_got)}, expected {sorted(by_part_exp)}")
    for p, exp in by_part_exp.items():
        g = by_part_got[p]
        assert len(g) == len(exp), (
            f"partition {p}: got {len(g)} records, expected {len(exp)}; "
            f"got offsets {[r.offset for r in g][:50]}")
        for i, (e, r) in enumerate(zip(exp, g, strict=True)):
            where = f"partition {p} record #{i}\n expected {e.brief()}\n got      {r.brief()}"
            assert r.offset == e.offset, "offset differs: " + where
            assert r.key == e.key, "key differs: " + where
            assert r.value == e.value, "value differs: " + where
            if check_headers:
                assert r.headers == e.headers, "headers differ: " + where
            if check_timestamps:
                assert r.timestamp_ms == e.timestamp_ms, "timestamp differs: " + where


def end_offset(consumer: Any, topic: str, partition: int, timeout_s: float = 30.0) -> int:
    """A partition's high watermark through librdkafka's watermark query. A new leader
    answers OFFSET_NOT_AVAILABLE until its high watermark reaches the start of its epoch
    (KIP-207), and a query that reached a former leader (the client's metadata older than
    a leader change) is answered NOT_LEADER_OR_FOLLOWER or LEADER_NOT_AVAILABLE; a query in
    flight to a broker whose handle librdkafka decommissioned (newer metadata no longer
    listed it) fails locally with _DESTROY_BROKER. librdkafka returns these
    retriable answers to the caller instead of retrying them: they are retried here, for at
    most `timeout_s`."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    retriable = (KafkaError.OFFSET_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION,
                 KafkaError.LEADER_NOT_AVAILABLE, KafkaError._DESTROY_BROKER)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return int(consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                      timeout=10)[1])
        except KafkaException as e:
            if e.args[0].code() not in retriable or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
