"""Real clients get through ApiVersions against the server (smoke tests).

The server advertises the whole broker table here (each API has a handler that fails, closing
the connection), so the clients parse the full ApiVersions answer; nothing after ApiVersions
is expected to work in this layer.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from broker.handlers import api_versions
from broker.protocol.api import BROKER_APIS
from broker.server import Dispatcher, ListenerSpec, RequestContext, Server
from tests.support.requires import require_tool


async def _not_here(node: object, ctx: RequestContext, request: Any) -> Any:
    raise NotImplementedError("only ApiVersions is served in this test")


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    d = Dispatcher.from_modules([api_versions])
    for r in BROKER_APIS:
        if r.api_key != api_versions.API_KEY:
            d.register(r.api_key, _not_here)
    loop = asyncio.new_event_loop()
    server = Server([ListenerSpec("PLAINTEXT", "127.0.0.1", 0, BROKER_APIS, d.bind(None))])
    loop.run_until_complete(server.start())
    assert server.advertised_apis("PLAINTEXT") == BROKER_APIS
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield server.address("PLAINTEXT")[1]
    asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def test_kcat_old_librdkafka_parses_api_versions(port: int) -> None:
    require_tool("kcat", "kcat is not installed (tests/run.sh installs it)")
    out = subprocess.run(
        ["kcat", "-L", "-b", f"127.0.0.1:{port}", "-d", "protocol,broker,feature", "-m", "1"],
        capture_output=True, text=True, timeout=30,
    ).stderr
    assert "Received ApiVersionResponse (v3" in out, out[-3000:]
    assert "APIVERSION_QUERY -> UP" in out
    assert "ApiKey Produce (0) Versions 0..13" in out
    features = next(line for line in out.splitlines() if "Updated enabled protocol features to"
                    in line)
    # The v2 record format and zstd follow from Produce/Fetch ranges. (librdkafka ties its LZ4
    # feature to FindCoordinator, which comes with the group coordinator.)
    for feature in ("MsgVer2", "ZSTD", "OffsetTime"):
        assert feature in features, features


def test_librdkafka_2_x_parses_api_versions(port: int) -> None:
    from confluent_kafka.admin import AdminClient

    records: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    logger = logging.getLogger("skiff.test.librdkafka")
    logger.addHandler(Collect())
    logger.setLevel(logging.DEBUG)
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "debug": "protocol,broker",
                         "logger": logger})
    with pytest.raises(Exception):  # noqa: B017 - Metadata is not served here
        admin.list_topics(timeout=2)
    admin.poll(0.5)  # deliver the logs
    text = "\n".join(records)
    assert "Received ApiVersionResponse (v" in text, text[-3000:]
    assert "APIVERSION_QUERY -> UP" in text


@pytest.mark.parametrize("version", range(5))
def test_kafka_python_parses_api_versions_and_infers_a_modern_broker(port: int,
                                                                     version: int) -> None:
    # kafka-python's own wire parser (what its connections use), over a socket; its network
    # client cannot be used here because it bootstraps with Metadata.
    import socket

    from kafka.protocol.broker_version_data import BrokerVersionData
    from kafka.protocol.metadata.api_versions import ApiVersionsRequest
    from kafka.protocol.parser import KafkaProtocol

    parser = KafkaProtocol(client_id="kafka-python")
    parser.send_request(ApiVersionsRequest(
        version=version, client_software_name="kafka-python", client_software_version="3.0"))
    responses = []
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(parser.send_bytes())
        while not responses:
            data = sock.recv(65536)
            assert data, "connection closed"
            responses = parser.receive_bytes(data)
    ((_corr, response),) = responses
    assert response.error_code == 0
    api_versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert api_versions[0] == (0, 13) and api_versions[48] == (0, 1)
    # Produce v9+ and DescribeClientQuotas make it infer a 2.8+ broker.
    assert BrokerVersionData(api_versions=api_versions).broker_version >= (2, 8)
