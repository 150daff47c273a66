"""Produce v0-v2: parsed via kio's v3 reader, answered UNSUPPORTED_VERSION per partition."""

from __future__ import annotations

import asyncio
import io
import struct
from datetime import timedelta

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.produce.v3.request import PartitionProduceData, TopicProduceData
from kio.schema.produce.v3.request import ProduceRequest as ProduceRequestV3
from kio.schema.produce.v3.response import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from kio.serial import entity_writer
from kio.static.primitive import Records, i16, i32, i32Timedelta, i64

from broker.server import legacy_produce
from tests.unit.server.harness import run, running_server
from tests.unit.server.wire import arecv_frame, raw_frame

TOPICS = (
    TopicProduceData(name="t1", partition_data=(
        PartitionProduceData(index=i32(0), records=Records(b"abc")),
        PartitionProduceData(index=i32(5), records=None),
    )),
    TopicProduceData(name="other", partition_data=(
        PartitionProduceData(index=i32(2), records=Records(b"")),
    )),
)


def _legacy_body(acks: int) -> bytes:
    """A v0-v2 request body: v3's encoding without the leading transactional_id."""
    req = ProduceRequestV3(transactional_id=None, acks=i16(acks),
                           timeout=i32Timedelta.parse(timedelta(seconds=1)), topic_data=TOPICS)
    buf = io.BytesIO()
    entity_writer(ProduceRequestV3)(buf, req)
    encoded = buf.getvalue()
    assert encoded[:2] == b"\xff\xff"
    return encoded[2:]


def test_parse() -> None:
    req = legacy_produce.parse_request(_legacy_body(-1))
    assert req.acks == -1 and req.topic_data == TOPICS


def test_v2_response_is_byte_identical_to_kio_v3() -> None:
    req = legacy_produce.parse_request(_legacy_body(1))
    expected = ProduceResponse(
        responses=tuple(
            TopicProduceResponse(name=t.name, partition_responses=tuple(
                PartitionProduceResponse(index=p.index, error_code=ErrorCode.unsupported_version,
                                         base_offset=i64(-1), log_append_time=None)
                for p in t.partition_data))
            for t in TOPICS),
        throttle_time=i32Timedelta.parse(timedelta(0)),
    )
    buf = io.BytesIO()
    entity_writer(ProduceResponse)(buf, expected)
    assert legacy_produce.encode_unsupported_response(2, req) == buf.getvalue()


def test_v0_v1_response_bytes() -> None:
    req = legacy_produce.parse_request(_legacy_body(1))
    v0 = (struct.pack(">i", 2)
          + b"\x00\x02t1" + struct.pack(">i", 2) + struct.pack(">ihq", 0, 35, -1)
          + struct.pack(">ihq", 5, 35, -1)
          + b"\x00\x05other" + struct.pack(">i", 1) + struct.pack(">ihq", 2, 35, -1))
    assert legacy_produce.encode_unsupported_response(0, req) == v0
    assert legacy_produce.encode_unsupported_response(1, req) == v0 + b"\x00\x00\x00\x00"
    with pytest.raises(ValueError):
        legacy_produce.encode_unsupported_response(3, req)


def test_over_the_socket_acks0_gets_nothing_acks1_gets_errors() -> None:
    async def main() -> None:
        # The Produce handler is never called for v0-v2, but Produce must be registered
        # to be advertised.
        from broker.handlers import api_versions
        from broker.server import Dispatcher

        async def produce(node: object, ctx: object, request: object) -> object:
            raise AssertionError("not for v0-v2")

        d = Dispatcher.from_modules([api_versions])
        d.register(0, produce)
        async with running_server(d) as (_s, port):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            for version in (0, 1, 2):
                writer.write(raw_frame(0, version, 10 + version, _legacy_body(0)))
                writer.write(raw_frame(0, version, 20 + version, _legacy_body(-1)))
                frame = await arecv_frame(reader)
                assert struct.unpack_from(">i", frame)[0] == 20 + version
                req = legacy_produce.parse_request(_legacy_body(-1))
                assert frame[4:] == legacy_produce.encode_unsupported_response(version, req)
            # Truncated legacy body: connection closes.
            writer.write(raw_frame(0, 1, 99, _legacy_body(1)[:-3]))
            assert await asyncio.wait_for(reader.read(1), 5) == b""
            writer.close()

    run(main)
