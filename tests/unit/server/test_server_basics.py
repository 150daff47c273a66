"""Framing, ApiVersions over a real socket, bad versions, unknown APIs, size cap, idle timeout."""

from __future__ import annotations

import asyncio
import shutil
import socket
import struct
import sys
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest

from broker.protocol.api import BROKER_APIS
from broker.server import ServerConfig
from broker.testing.wire import (
    api_versions_request,
    arecv_frame,
    decode_response,
    encode_request,
    raw_frame,
)
from tests.unit.server.harness import run, running_server


async def _open(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port)


async def _closed(reader: asyncio.StreamReader, wait_s: float = 5) -> bool:
    try:
        data = await asyncio.wait_for(reader.read(1), wait_s)
    except ConnectionResetError:
        return True
    return data == b""


def test_api_versions_every_version_over_the_socket() -> None:
    async def main() -> None:
        async with running_server() as (_server, port):
            reader, writer = await _open(port)
            for version in range(6):
                writer.write(encode_request(api_versions_request(version), 100 + version))
                corr, resp = decode_response(18, version, await arecv_frame(reader))
                assert corr == 100 + version
                assert resp.error_code == ErrorCode.none
                # Only APIs with a handler are advertised: here ApiVersions alone.
                assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [
                    (18, 0, 5)
                ]
            writer.close()

    run(main)


def test_too_high_api_versions_gets_v0_unsupported_version_and_connection_stays() -> None:
    async def main() -> None:
        async with running_server() as (_server, port):
            reader, writer = await _open(port)
            # v9 does not exist; the body is whatever a future client would send.
            writer.write(raw_frame(18, 9, 7, b"\x01\x02\x03garbage", flexible=True))
            corr, resp = decode_response(18, 0, await arecv_frame(reader))
            assert corr == 7
            assert resp.error_code == ErrorCode.unsupported_version
            assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [
                (18, 0, 5)
            ]
            # The client retries with a version we support, on the same connection.
            writer.write(encode_request(api_versions_request(3), 8))
            corr, resp = decode_response(18, 3, await arecv_frame(reader))
            assert (corr, resp.error_code) == (8, ErrorCode.none)
            writer.close()

    run(main)


def test_unknown_api_key_closes_connection_after_earlier_answers() -> None:
    async def main() -> None:
        async with running_server() as (server, port):
            reader, writer = await _open(port)
            # Pipelined: a good request, then an unknown key (999), then another good one.
            writer.write(encode_request(api_versions_request(2), 1))
            writer.write(raw_frame(999, 0, 2, b""))
            writer.write(encode_request(api_versions_request(2), 3))
            corr, _ = decode_response(18, 2, await arecv_frame(reader))
            assert corr == 1
            assert await _closed(reader)
            # The server is still there for a new connection.
            r2, w2 = await _open(port)
            w2.write(encode_request(api_versions_request(0), 4))
            assert decode_response(18, 0, await arecv_frame(r2))[0] == 4
            w2.close()
            writer.close()
            assert server.connection_count <= 1

    run(main)


def test_api_without_handler_or_unsupported_version_closes() -> None:
    async def main() -> None:
        async with running_server() as (_server, port):
            # Metadata is in BROKER_APIS but has no handler here, so it is not advertised.
            reader, writer = await _open(port)
            req = MetadataRequest(topics=None, allow_auto_topic_creation=True,
                                  include_topic_authorized_operations=False)
            writer.write(encode_request(req, 1))
            assert await _closed(reader)
            writer.close()
            # Known API, version below our minimum (Fetch v0).
            reader, writer = await _open(port)
            writer.write(raw_frame(1, 0, 1, b""))
            assert await _closed(reader)
            writer.close()

    run(main)


def test_unparseable_body_and_short_header_close() -> None:
    async def main() -> None:
        async with running_server() as (_server, port):
            reader, writer = await _open(port)
            # ApiVersions v3 with a truncated compact string.
            writer.write(raw_frame(18, 3, 1, b"\x09ab", flexible=True))
            assert await _closed(reader)
            writer.close()
            reader, writer = await _open(port)
            writer.write(struct.pack(">i", 8) + b"\x00\x12\x00\x00\x00\x00\x00")  # 7 of 8
            writer.write_eof()
            assert await _closed(reader)
            writer.close()
            reader, writer = await _open(port)
            # Header claims a client id longer than the frame.
            writer.write(struct.pack(">i", 10) + b"\x00\x12\x00\x00\x00\x00\x00\x01\x7f\xff")
            assert await _closed(reader)
            writer.close()

    run(main)


def test_invalid_client_software_name_gets_invalid_request() -> None:
    async def main() -> None:
        from kio.schema.api_versions.v3.request import ApiVersionsRequest

        async with running_server() as (_server, port):
            reader, writer = await _open(port)
            req = ApiVersionsRequest(client_software_name="-bad name", client_software_version="1")
            writer.write(encode_request(req, 5))
            corr, resp = decode_response(18, 3, await arecv_frame(reader))
            assert (corr, resp.error_code, resp.api_keys) == (5, ErrorCode.invalid_request, ())
            writer.close()

    run(main)


def test_frame_size_cap_is_checked_before_reading() -> None:
    async def main() -> None:
        config = ServerConfig(socket_request_max_bytes=1000)
        async with running_server(config=config) as (_server, port):
            reader, writer = await _open(port)
            # Announce 1001 bytes and send none: refused on the size alone.
            writer.write(struct.pack(">i", 1001))
            assert await _closed(reader)
            writer.close()
            for bad in (-1, 0, 7, 2**31 - 1):
                reader, writer = await _open(port)
                writer.write(struct.pack(">i", bad))
                assert await _closed(reader), bad
                writer.close()
            # Exactly at the cap is accepted (an ApiVersions v0 padded with trailing bytes).
            reader, writer = await _open(port)
            frame = raw_frame(18, 0, 9, b"")
            pad = 1000 - (len(frame) - 4)
            writer.write(struct.pack(">i", 1000) + frame[4:] + b"\x00" * pad)
            assert decode_response(18, 0, await arecv_frame(reader))[0] == 9
            writer.close()

    run(main)


def test_idle_connection_is_closed_but_busy_one_is_not() -> None:
    async def main() -> None:
        # 800 ms against a request every 100 ms: a busy CI machine can delay a request by
        # a few hundred ms (with 300 ms, the busy connection was closed once)
        config = ServerConfig(connections_max_idle_ms=800)
        async with running_server(config=config) as (server, port):
            reader, writer = await _open(port)
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            assert await _closed(reader, wait_s=5)
            assert 0.75 <= loop.time() - t0 < 4
            writer.close()
            # Activity keeps it open past the idle time.
            reader, writer = await _open(port)
            for i in range(12):
                await asyncio.sleep(0.1)
                writer.write(encode_request(api_versions_request(1), i))
                assert decode_response(18, 1, await arecv_frame(reader))[0] == i
            writer.close()
            await asyncio.sleep(0.05)
            assert server.connection_count <= 1

    run(main)


def test_broker_apis_table_is_the_issue_list() -> None:
    assert [(r.api_key, r.min_version, r.max_version) for r in BROKER_APIS] == [
        # every API from v0, as Kafka 3.9 (issue 23), up to the newest versions whose
        # semantics are implemented (docs/compatibility.md)
        (0, 0, 13), (1, 0, 18), (2, 0, 11), (3, 0, 13), (8, 0, 10), (9, 0, 10), (10, 0, 6),
        (11, 0, 9), (12, 0, 4), (13, 0, 5), (14, 0, 5), (15, 0, 6), (16, 0, 5), (18, 0, 5),
        (19, 0, 7), (20, 0, 6), (21, 0, 2), (22, 0, 6), (23, 0, 4),
        (24, 0, 5), (25, 0, 4), (26, 0, 5),  # transactions (issue 22; V2: KIP-890)
        # WriteTxnMarkers: inter-broker; v0 (dropped by Kafka 4.0) from _kio_legacy (issue 22)
        (27, 0, 2),
        (28, 0, 6),  # TxnOffsetCommit (v6: topic ids, class from _kio_next)
        (29, 0, 3), (30, 0, 3), (31, 0, 3),  # ACLs: v0 (Kafka 4.0 dropped it) from _kio_legacy
        (32, 0, 4), (33, 0, 2),
        (34, 0, 2),  # AlterReplicaLogDirs: v0 (Kafka 4.0 dropped it) from _kio_legacy
        (35, 0, 5), (37, 0, 3),
        # delegation tokens: from v1 (kio has no v0; Kafka 4.0 dropped it, KIP-896)
        (38, 1, 3), (39, 1, 2), (40, 1, 2), (41, 1, 3),
        (42, 0, 3), (43, 0, 2), (44, 0, 1), (45, 0, 1), (46, 0, 0),
        (47, 0, 0), (48, 0, 1), (49, 0, 1), (50, 0, 0), (51, 0, 0),
        (55, 0, 2),  # DescribeQuorum, sent on to the quorum leader
        (57, 0, 2),  # UpdateFeatures (KIP-584)
        (60, 0, 2),
        (61, 0, 0),  # DescribeProducers (issue 22)
        (64, 0, 0),  # UnregisterBroker (KIP-631), sent on to the controller
        (65, 0, 0), (66, 0, 2),  # DescribeTransactions, ListTransactions
        (68, 0, 1), (69, 0, 1),
        (71, 0, 0), (72, 0, 0),  # client telemetry (KIP-714)
        (74, 0, 1),  # ListConfigResources (KIP-1142)
        (75, 0, 0),  # DescribeTopicPartitions (KIP-966)
        # share groups (KIP-932): Kafka 4.4's versions
        (76, 1, 1), (77, 1, 1), (78, 1, 2), (79, 1, 2),
        (80, 0, 1), (81, 0, 0),  # Add/RemoveRaftVoter (KIP-853), sent on to the quorum leader
        # the share coordinator's state APIs (Initialize, Read, Write, Delete,
        # ReadSummary ShareGroupState) and the share-group offsets APIs (Describe, Alter,
        # Delete ShareGroupOffsets), Kafka 4.4's versions
        (83, 0, 0), (84, 0, 0), (85, 0, 1), (86, 0, 0), (87, 0, 1),
        # streams groups (KIP-1071); v1 and StreamsGroupTopologyDescriptionUpdate (93): KIP-1331,
        # classes from _kio_next
        (88, 0, 1), (89, 0, 1),
        (90, 0, 1), (91, 0, 0), (92, 0, 0),
        (93, 0, 0),
    ]


def test_on_connection_closed_runs_once_per_connection_whatever_ended_it() -> None:
    closed: list[str] = []

    def on_closed(connection_id: str) -> None:
        closed.append(connection_id)
        raise RuntimeError("a failing callback is logged, the server goes on")

    async def main() -> None:
        async with running_server(on_connection_closed=on_closed) as (_server, port):
            # the peer closes
            _reader, writer = await _open(port)
            writer.write(encode_request(api_versions_request(3), 1))
            await writer.drain()
            writer.close()
            # the server closes (a bad frame)
            reader2, writer2 = await _open(port)
            writer2.write(struct.pack(">i", 3) + b"\x00\x01\x02")  # shorter than a header
            assert await _closed(reader2)
            writer2.close()
            for _ in range(200):
                if len(closed) == 2:
                    break
                await asyncio.sleep(0.01)
            # the server still answers
            reader3, writer3 = await _open(port)
            writer3.write(encode_request(api_versions_request(3), 2))
            assert await arecv_frame(reader3)
            writer3.close()
        assert len(closed) == 3 and len(set(closed)) == 3, closed

    run(main)


def test_kafka4_floors_advertise_and_refuse_like_kafka_4() -> None:
    """skiff.min.api.versions=kafka4: KIP-896's removed versions are neither advertised nor
    served (the connection closes, as Kafka 4 does)."""
    from broker.handlers import api_versions, produce
    from broker.protocol.api import floors_table
    from broker.server import Dispatcher

    async def main() -> None:
        dispatcher = Dispatcher.from_modules([api_versions, produce])
        async with running_server(dispatcher, apis=floors_table(BROKER_APIS, "kafka4")) as (
                _server, port):
            reader, writer = await _open(port)
            writer.write(encode_request(api_versions_request(3), 1))
            _, resp = decode_response(18, 3, await arecv_frame(reader))
            ranges = {int(k.api_key): (int(k.min_version), int(k.max_version))
                      for k in resp.api_keys}
            assert ranges[0] == (3, 13)
            writer.write(raw_frame(0, 2, 2, b"\x00\x01\x00\x00\x03\xe8\x00\x00\x00\x00"))
            assert await _closed(reader)
            writer.close()
        async with running_server(dispatcher) as (_server, port):
            reader, writer = await _open(port)
            writer.write(encode_request(api_versions_request(3), 1))
            _, resp = decode_response(18, 3, await arecv_frame(reader))
            ranges = {int(k.api_key): (int(k.min_version), int(k.max_version))
                      for k in resp.api_keys}
            assert ranges[0] == (0, 13)
            writer.close()

    run(main)


def test_old_versions_are_logged_once_per_client() -> None:
    from broker.server.old_versions import OldVersionLog, is_removed_in_kafka4

    assert is_removed_in_kafka4(0, 2) and not is_removed_in_kafka4(0, 3)
    assert is_removed_in_kafka4(1, 3) and not is_removed_in_kafka4(3, 0)  # Metadata v0 stays
    log = OldVersionLog(limit=3)
    assert log.first_time("a", "127.0.0.1", 0, 2)
    assert not log.first_time("a", "127.0.0.1", 0, 2)
    assert not log.first_time("a", "127.0.0.1", 0, 3)  # not an old version
    assert log.first_time("a", "127.0.0.2", 0, 2)      # another address
    assert log.first_time("b", "127.0.0.1", 1, 0)
    assert not log.first_time("c", "127.0.0.1", 1, 0)  # past the bound: nothing more


def _server_side_socket(server: Any) -> Any:
    (conn,) = server._connections
    return conn.transport.get_extra_info("socket")


async def _answered(port: int) -> asyncio.StreamWriter:
    reader, writer = await _open(port)
    writer.write(encode_request(api_versions_request(3), 1))
    await arecv_frame(reader)  # accepted and served
    return writer


def test_socket_options_are_set_on_accepted_connections() -> None:
    # Kafka's socket.send.buffer.bytes / socket.receive.buffer.bytes; Linux reports twice the
    # size set (its bookkeeping overhead)
    async def main() -> None:
        config = ServerConfig(send_buffer_bytes=65536, receive_buffer_bytes=32768)
        async with running_server(config=config) as (server, port):
            writer = await _answered(port)
            sock = _server_side_socket(server)
            factor = 2 if sys.platform.startswith("linux") else 1
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == 65536 * factor
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) == 32768 * factor
            # and, as Kafka's Acceptor sets them, keepalive and no Nagle delay
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
            writer.close()

    run(main)


def test_socket_buffer_size_minus_one_leaves_the_os_sizing() -> None:
    async def main() -> None:
        fresh = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            os_send = fresh.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
            os_receive = fresh.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        finally:
            fresh.close()
        config = ServerConfig(send_buffer_bytes=-1, receive_buffer_bytes=-1)
        async with running_server(config=config) as (server, port):
            writer = await _answered(port)
            sock = _server_side_socket(server)
            # unlocked sizes: the kernel may have grown them since, never shrunk them
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) >= os_send
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) >= os_receive
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) != 4096 * 2
            writer.close()

    run(main)


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2; CI installs it)")
def test_listen_backlog_is_socket_listen_backlog_size() -> None:
    async def main() -> None:
        async with running_server(config=ServerConfig(listen_backlog=7)) as (_server, port):
            ss = await asyncio.create_subprocess_exec(
                "ss", "-ltnH", f"sport = :{port}", stdout=asyncio.subprocess.PIPE)
            out = (await ss.communicate())[0].decode().split()
            assert out[0] == "LISTEN" and out[2] == "7", out  # Send-Q of a listener: backlog

    run(main)


def test_bad_socket_settings_are_refused() -> None:
    with pytest.raises(ValueError, match=r"socket\.send\.buffer\.bytes"):
        ServerConfig(send_buffer_bytes=0)
    with pytest.raises(ValueError, match=r"socket\.receive\.buffer\.bytes"):
        ServerConfig(receive_buffer_bytes=-2)
    with pytest.raises(ValueError, match=r"socket\.listen\.backlog\.size"):
        ServerConfig(listen_backlog=0)


def test_per_request_debug_lines_are_built_only_when_debug_is_on() -> None:
    import logging

    import structlog

    from broker.server.server import _debug_enabled

    def at(level: int) -> Any:
        return structlog.wrap_logger(structlog.ReturnLogger(),
                                     wrapper_class=structlog.make_filtering_bound_logger(level))

    assert not _debug_enabled(at(logging.INFO).bind(connection="c"))
    assert _debug_enabled(at(logging.DEBUG).bind(connection="c"))
    assert _debug_enabled(logging.getLogger("any"))  # a logger that cannot say: asked
