"""Produce v0-13: appends, acks, per-partition errors, and the response at every version
(v13: topics by id, UNKNOWN_TOPIC_ID)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from broker.handlers import produce
from broker.log.control import encode_marker_batch
from broker.protocol.compression import Compression
from broker.protocol.legacy import build_message_set
from broker.protocol.records import Record, build_batch, decode_records
from tests.unit.handlers.conftest import TestNode, roundtrip, run
from tests.unit.handlers.datapath import (
    BASE_TS,
    create,
    produce_answer,
    produce_request,
    produce_txn,
    records,
    txn_records,
)

VERSIONS = range(3, 14)


@pytest.mark.parametrize("version", VERSIONS)
def test_append_assigns_offsets_at_every_version(node: TestNode, version: int) -> None:
    async def go() -> None:
        await create(node, "t")
        topic_id = node.metadata.topic("t").topic_id
        for expected_base in (0, 2):
            resp = await produce_answer(node, version, produce_request(
                version, "t", 0, records(b"a", b"b"), topic_id=topic_id))
            roundtrip(resp)
            if version >= 13:
                assert resp.responses[0].topic_id == topic_id
            part = resp.responses[0].partition_responses[0]
            assert (part.error_code, part.base_offset) == (ErrorCode.none, expected_base)
            if version >= 5:
                assert part.log_start_offset == 0
        stored = node.replicas.get("t", 0).log.read_records(0)
        assert [r.value for r in stored] == [b"a", b"b", b"a", b"b"]
        assert [r.offset for r in stored] == [0, 1, 2, 3]
    run(go())


def test_unknown_topic_and_partition(node: TestNode) -> None:
    async def go() -> None:
        await create(node, "t")
        for topic, partition in (("missing", 0), ("t", 7)):
            resp = await produce_answer(node, 9,
                                        produce_request(9, topic, partition, records(b"x")))
            code = resp.responses[0].partition_responses[0].error_code
            assert code is ErrorCode.unknown_topic_or_partition
    run(go())


def test_v13_unknown_topic_id(node: TestNode) -> None:
    import uuid

    async def go() -> None:
        await create(node, "t")
        topic_id = node.metadata.topic("t").topic_id
        unknown = uuid.uuid4()
        resp = await produce_answer(node, 13, produce_request(
            13, "", 0, records(b"x"), topic_id=unknown))
        roundtrip(resp)
        assert resp.responses[0].topic_id == unknown
        assert resp.responses[0].partition_responses[0].error_code is ErrorCode.unknown_topic_id
        # a partition the topic does not have is still UNKNOWN_TOPIC_OR_PARTITION
        resp = await produce_answer(node, 13, produce_request(
            13, "", 7, records(b"x"), topic_id=topic_id))
        assert resp.responses[0].partition_responses[0].error_code is (
            ErrorCode.unknown_topic_or_partition)
        assert node.replicas.get("t", 0).log.log_end_offset == 0
    run(go())


def test_invalid_acks_and_null_records(node: TestNode) -> None:
    async def go() -> None:
        await create(node, "t")
        resp = await produce_answer(node, 9,
                                    produce_request(9, "t", 0, records(b"x"), acks=2))
        code = resp.responses[0].partition_responses[0].error_code
        assert code is ErrorCode.invalid_required_acks
        resp = await produce_answer(node, 9, produce_request(9, "t", 0, None))
        assert resp.responses[0].partition_responses[0].error_code is ErrorCode.corrupt_message
        assert node.replicas.get("t", 0).log.log_end_offset == 0
    run(go())


def test_corrupt_batch_is_rejected_and_nothing_is_written(node: TestNode) -> None:
    async def go() -> None:
        await create(node, "t")
        data = bytearray(records(b"payload"))
        data[-1] ^= 0xFF  # breaks the CRC
        resp = await produce_answer(node, 9,
                                    produce_request(9, "t", 0, bytes(data)))
        assert resp.responses[0].partition_responses[0].error_code is ErrorCode.corrupt_message
        assert node.replicas.get("t", 0).log.log_end_offset == 0
    run(go())


def test_message_too_large_per_topic_config(node: TestNode) -> None:
    async def go() -> None:
        await create(node, "small", **{"max.message.bytes": "200"})
        resp = await produce_answer(node, 9,
                                    produce_request(9, "small", 0, records(b"x" * 500)))
        assert resp.responses[0].partition_responses[0].error_code is ErrorCode.message_too_large
    run(go())


def test_acks_zero_sends_no_response_but_appends(node: TestNode) -> None:
    async def go() -> None:
        await create(node, "t")
        resp = await produce_answer(node, 9,
                                    produce_request(9, "t", 0, records(b"quiet"), acks=0))
        assert resp is None
        [stored] = decode_records(node.replicas.get("t", 0).log.read(0, 1 << 20, 10).read_bytes())
        assert stored.value == b"quiet"
    run(go())


def test_log_append_time_is_returned(node: TestNode) -> None:
    async def go() -> None:
        await create(node, "lat", **{"message.timestamp.type": "LogAppendTime"})
        before = node.clock()
        resp = await produce_answer(node, 9,
                                    produce_request(9, "lat", 0, records(b"x")))
        part = resp.responses[0].partition_responses[0]
        assert part.log_append_time is not None
        assert part.log_append_time.timestamp() * 1000 >= before - 1
    run(go())


# ---- v0-v2 (Kafka 3.9 served them; 4.0 dropped them: KIP-896) ------------------------------

LEGACY_MAGIC = {0: 0, 1: 0, 2: 1}  # the message format each version's clients send


@pytest.mark.parametrize("version", [0, 1, 2])
@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP])
def test_legacy_versions_append_message_sets(node: TestNode, version: int,
                                             codec: Compression) -> None:
    async def go() -> None:
        await create(node, "t")
        magic = LEGACY_MAGIC[version]
        for expected_base in (0, 2):
            data = build_message_set([(b"k", b"a", BASE_TS), (None, b"b", BASE_TS + 1)],
                                     magic=magic, codec=codec)
            resp = await produce_answer(node, version, produce_request(version, "t", 0, data))
            roundtrip(resp)
            part = resp.responses[0].partition_responses[0]
            assert (part.error_code, part.base_offset) == (ErrorCode.none, expected_base)
            assert hasattr(part, "log_append_time") == (version >= 2)
            assert hasattr(resp, "throttle_time") == (version >= 1)
            if version >= 2:
                assert part.log_append_time is None  # CreateTime topic: -1
        stored = node.replicas.get("t", 0).log.read_records(0)
        assert [r.value for r in stored] == [b"a", b"b", b"a", b"b"]
        assert [r.key for r in stored] == [b"k", None, b"k", None]
        assert [r.offset for r in stored] == [0, 1, 2, 3]
        # magic 0 has no timestamps; magic 1 keeps them
        expect_ts = [-1] * 4 if magic == 0 else [BASE_TS, BASE_TS + 1] * 2
        assert [r.timestamp for r in stored] == expect_ts
    run(go())


def test_legacy_v2_answers_log_append_time(node: TestNode) -> None:
    async def go() -> None:
        await create(node, "t", **{"message.timestamp.type": "LogAppendTime"})
        data = build_message_set([(None, b"a", BASE_TS)], magic=1)
        resp = await produce_answer(node, 2, produce_request(2, "t", 0, data))
        part = resp.responses[0].partition_responses[0]
        assert part.error_code is ErrorCode.none and part.log_append_time is not None
        assert part.log_append_time.timestamp() > BASE_TS / 1000
    run(go())


@pytest.mark.parametrize("version", [0, 1, 2])
def test_legacy_versions_unknown_topic_and_acks_zero(node: TestNode, version: int) -> None:
    async def go() -> None:
        data = build_message_set([(None, b"a", BASE_TS)], magic=LEGACY_MAGIC[version])
        resp = await produce_answer(node, version, produce_request(version, "nope", 0, data))
        assert resp.responses[0].partition_responses[0].error_code is (
            ErrorCode.unknown_topic_or_partition)
        await create(node, "t")
        assert await produce_answer(node, version,
                                    produce_request(version, "t", 0, data, acks=0)) is None
        assert [r.value for r in node.replicas.get("t", 0).log.read_records(0)] == [b"a"]
    run(go())


@pytest.mark.parametrize("version", [3, 9, 10, 11])
def test_transactional_batches_need_the_transactional_id(node: TestNode, version: int) -> None:
    async def go() -> None:
        await create(node, "t")
        resp = await produce_answer(node, version, produce_request(
            version, "t", 0, txn_records(5, 0, 0, b"x")))
        assert resp.responses[0].partition_responses[0].error_code \
            is ErrorCode.transactional_id_authorization_failed
        part = await produce_txn(node, "t", txn_records(5, 0, 0, b"x"), version=version)
        assert part.error_code is ErrorCode.none and part.base_offset == 0
        replica = node.replicas.get("t", 0)
        assert replica.producer_state.ongoing_txns == {5: 0}
        assert replica.last_stable_offset == 0 and replica.high_watermark == 1
        # a plain batch of the same producer while its transaction is open
        plain = build_batch([Record(timestamp=BASE_TS, key=b"k", value=b"y")],
                            producer_id=5, producer_epoch=0, base_sequence=1)
        part = await produce_txn(node, "t", plain, version=version)
        assert part.error_code is ErrorCode.invalid_txn_state
    run(go())


def test_clients_control_batches_are_invalid_record(node: TestNode) -> None:
    async def go() -> None:
        await create(node, "t")
        marker = encode_marker_batch(producer_id=5, producer_epoch=0, committed=True,
                                     coordinator_epoch=0, timestamp_ms=BASE_TS)
        part = await produce_txn(node, "t", marker)
        assert part.error_code is ErrorCode.invalid_record
        assert node.replicas.get("t", 0).log.log_end_offset == 0
    run(go())


def test_verification_refuses_what_it_cannot_verify(node_factory: Any) -> None:
    """With transaction.partition.verification.enable (Kafka's default) a transactional
    batch that would open a transaction waits for the coordinator's word; this node has
    no coordinator, so the answer is NOT_ENOUGH_REPLICAS (retriable, as Kafka maps
    COORDINATOR_NOT_AVAILABLE) and nothing is written; a non-transactional batch goes in."""
    node = node_factory({"transaction.partition.verification.enable": "true"})

    async def go() -> None:
        await create(node, "t")
        part = await produce_txn(node, "t", txn_records(5, 0, 0, b"x"))
        assert part.error_code is ErrorCode.not_enough_replicas
        assert "Unable to verify" in (part.error_message or "")
        assert node.replicas.get("t", 0).log.log_end_offset == 0
        assert not node.replicas.get("t", 0).producer_state.ongoing_txns
        plain = await produce_txn(node, "t", records(b"y"))
        assert plain.error_code is ErrorCode.none
    run(go())


def test_v12_in_a_transaction_needs_transactions_v2(node: TestNode) -> None:
    """Produce v12 with a transactional id is transactions V2: refused while the finalized
    transaction.version is below 2 (this node's image has none); v12 without one is an
    ordinary produce."""
    from broker.txn.version import transaction_version

    async def go() -> None:
        await create(node, "t")
        assert transaction_version(node.metadata) < 2
        part = await produce_txn(node, "t", txn_records(5, 0, 0, b"x"), version=12)
        assert part.error_code is ErrorCode.unsupported_version
        assert node.replicas.get("t", 0).log.log_end_offset == 0
        resp = await produce_answer(node, 12, produce_request(12, "t", 0, records(b"y")))
        assert resp.responses[0].partition_responses[0].error_code is ErrorCode.none
    run(go())


@settings(max_examples=200, deadline=None)
@given(kinds=st.lists(st.booleans(), max_size=4), cut=st.integers(0, 80),
       length=st.sampled_from([None, -5, 3, 10**6]))
def test_transactional_batches_are_found_in_bytes_and_in_views(
        kinds: list[bool], cut: int, length: int | None) -> None:
    """has_transactional_batch reads bytes (as kio parses a request) and other buffers
    alike: the first transactional batch is found, a malformed tail is left to the log."""
    batches = [build_batch([Record(timestamp=1, value=b"v%d" % i)], producer_id=3,
                           producer_epoch=0, base_sequence=i, is_transactional=t)
               for i, t in enumerate(kinds)]
    data = b"".join(batches)
    if cut:
        data = data[: max(0, len(data) - cut)]
    if length is not None and data:
        data = data[:8] + length.to_bytes(4, "big", signed=True) + data[12:]
    if length is not None and data:  # the first batch's length broken: read no further
        expected = len(data) >= 61 and kinds[0]
    else:  # every batch whose 61-byte header is there is read, up to the first one found
        starts = [sum(len(b) for b in batches[:i]) for i in range(len(batches))]
        expected = any(t for start, t in zip(starts, kinds, strict=True)
                       if start + 61 <= len(data))
    assert produce.has_transactional_batch(data) is expected
    assert produce.has_transactional_batch(memoryview(bytearray(data))) is expected
