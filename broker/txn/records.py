"""Kafka's record formats in __transaction_state, encoded by hand (kio has no schemas for them).

TransactionLogKey (version 0): int16 version, then the transactional id (string).

TransactionLogValue: int16 version, then
    v0 (Kafka 0.11+): ProducerId int64, ProducerEpoch int16, TransactionTimeoutMs int32,
        TransactionStatus int8, TransactionPartitions (nullable array of {Topic string,
        PartitionIds [int32]}), TransactionLastUpdateTimestampMs int64,
        TransactionStartTimestampMs int64;
    v1 (flexible, KIP-890): the same fields with compact strings and arrays, and tagged
        fields PreviousProducerId (tag 0, default -1), NextProducerId (tag 1, default -1),
        ClientTransactionVersion (tag 2, default 0), NextProducerEpoch (tag 3, default -1).

A null value is a tombstone: the transactional id expired. Skiff writes v0 for transactions
of version 1 and v1 for those of transactions V2 (ClientTransactionVersion 2, and the
NextProducerId taken when an EndTxn v5 exhausted the epoch), and reads both.
TransactionStatus holds the state's id (coordinator.TxnState). The partitions are written as
null in Empty, as Kafka does. Every length read is checked against the bytes
present before anything is sliced.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.group.records import _Reader, _Writer

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 0

TopicPartition = tuple[str, int]

_TAG_PREVIOUS_PRODUCER_ID = 0
_TAG_NEXT_PRODUCER_ID = 1
_TAG_CLIENT_TRANSACTION_VERSION = 2
_TAG_NEXT_PRODUCER_EPOCH = 3


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int  # TxnState's id
    partitions: frozenset[TopicPartition]
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    next_producer_epoch: int = -1
    client_transaction_version: int = 0


def _corrupt(msg: str) -> KafkaError:
    return KafkaError(ErrorCode.corrupt_message, f"{TRANSACTION_STATE_TOPIC} record: {msg}")


def encode_key(transactional_id: str) -> bytes:
    w = _Writer()
    w.int16(KEY_VERSION)
    w.string(transactional_id)
    return bytes(w.out)


def decode_key(buf: bytes) -> str:
    r = _Reader(bytes(buf))
    version = r.int16()
    if version != KEY_VERSION:
        raise _corrupt(f"unknown key version {version}")
    tid = r.str_()
    if r.pos != len(r.buf):
        raise _corrupt(f"{len(r.buf) - r.pos} trailing bytes after key")
    return tid


def _group_partitions(partitions: frozenset[TopicPartition]) -> list[tuple[str, list[int]]]:
    by_topic: dict[str, list[int]] = {}
    for topic, p in sorted(partitions):
        by_topic.setdefault(topic, []).append(p)
    return list(by_topic.items())


def encode_value(v: TransactionLogValue, version: int = VALUE_VERSION) -> bytes:
    if version not in (0, 1):
        raise ValueError(f"TransactionLogValue version {version}")
    flexible = version >= 1
    w = _Writer(flexible=flexible)
    w.int16(version)
    w.int64(v.producer_id)
    w.int16(v.producer_epoch)
    w.int32(v.timeout_ms)
    w.out += struct.pack(">b", v.state)
    # Empty: null partitions (Kafka writes none for a transaction that has not started)
    if not v.partitions and v.state == 0:
        w.array_len(-1)
    else:
        groups = _group_partitions(v.partitions)
        w.array_len(len(groups))
        for topic, ids in groups:
            w.string(topic)
            w.array_len(len(ids))
            for i in ids:
                w.int32(i)
            w.tags()
    w.int64(v.last_update_ms)
    w.int64(v.start_ms)
    if flexible:
        tags: list[tuple[int, bytes]] = []
        if v.previous_producer_id != -1:
            tags.append((_TAG_PREVIOUS_PRODUCER_ID, struct.pack(">q", v.previous_producer_id)))
        if v.next_producer_id != -1:
            tags.append((_TAG_NEXT_PRODUCER_ID, struct.pack(">q", v.next_producer_id)))
        if v.client_transaction_version != 0:
            tags.append((_TAG_CLIENT_TRANSACTION_VERSION,
                         struct.pack(">h", v.client_transaction_version)))
        if v.next_producer_epoch != -1:
            tags.append((_TAG_NEXT_PRODUCER_EPOCH, struct.pack(">h", v.next_producer_epoch)))
        w.uvarint(len(tags))
        for tag, data in tags:
            w.uvarint(tag)
            w.uvarint(len(data))
            w.out += data
    return bytes(w.out)


def decode_value(buf: bytes) -> TransactionLogValue:
    r = _Reader(bytes(buf))
    version = r.int16()
    if version not in (0, 1):
        raise _corrupt(f"unknown value version {version}")
    r.flexible = version >= 1
    producer_id = r.int64()
    producer_epoch = r.int16()
    timeout_ms = r.int32()
    state = struct.unpack(">b", r._take(1))[0]
    partitions: set[TopicPartition] = set()
    n = r.uvarint() - 1 if r.flexible else r.int32()
    if n > len(r.buf) - r.pos:
        raise _corrupt(f"bad array length {n}")
    for _ in range(max(n, 0)):
        topic = r.str_()
        for _ in range(r.array_len()):
            partitions.add((topic, r.int32()))
        r.skip_tags()
    last_update_ms = r.int64()
    start_ms = r.int64()
    tagged = {"previous_producer_id": -1, "next_producer_id": -1, "next_producer_epoch": -1,
              "client_transaction_version": 0}
    if r.flexible:
        for _ in range(r.uvarint()):
            tag = r.uvarint()
            data = r._take(r.uvarint())
            try:
                if tag == _TAG_PREVIOUS_PRODUCER_ID:
                    tagged["previous_producer_id"] = struct.unpack(">q", data)[0]
                elif tag == _TAG_NEXT_PRODUCER_ID:
                    tagged["next_producer_id"] = struct.unpack(">q", data)[0]
                elif tag == _TAG_CLIENT_TRANSACTION_VERSION:
                    tagged["client_transaction_version"] = struct.unpack(">h", data)[0]
                elif tag == _TAG_NEXT_PRODUCER_EPOCH:
                    tagged["next_producer_epoch"] = struct.unpack(">h", data)[0]
            except struct.error as exc:
                raise _corrupt(f"tagged field {tag} of {len(data)} bytes") from exc
    if r.pos != len(r.buf):
        raise _corrupt(f"{len(r.buf) - r.pos} trailing bytes after value")
    return TransactionLogValue(
        producer_id=producer_id, producer_epoch=producer_epoch, timeout_ms=timeout_ms,
        state=state, partitions=frozenset(partitions), last_update_ms=last_update_ms,
        start_ms=start_ms, **tagged,
    )
