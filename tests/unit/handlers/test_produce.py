"""Produce v3-10: appends, acks, per-partition errors, and the response at every version."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from broker.protocol.records import decode_records
from tests.unit.handlers.conftest import TestNode, roundtrip, run
from tests.unit.handlers.datapath import create, produce_answer, produce_request, records

VERSIONS = range(3, 11)


@pytest.mark.parametrize("version", VERSIONS)
def test_append_assigns_offsets_at_every_version(node: TestNode, version: int) -> None:
    async def go() -> None:
        await create(node, "t")
        for expected_base in (0, 2):
            resp = await produce_answer(node, version,
                                        produce_request(version, "t", 0, records(b"a", b"b")))
            roundtrip(resp)
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
