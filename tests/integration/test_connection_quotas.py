"""Connection quotas on a real node (broker/quotas/connections.py): max.connections.per.ip
overrides close connections over the count at once; a connection_creation_rate quota on an
ip entity (set by AlterClientQuotas) closes over-rate connections after their throttle time
(Kafka's delayed close) while the ones within the rate are served.

Connections come from other loopback addresses (127.0.0.2, 127.0.0.3) than the test's own
admin traffic (127.0.0.1), so the limits hold only the connections under test."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.alter_client_quotas.v1 import request as alter_req
from kio.schema.describe_client_quotas.v1 import request as describe_req
from kio.schema.errors import ErrorCode

from broker.protocol.transport import KafkaConnection
from tests.support.node import SkiffNode

pytestmark = pytest.mark.timeout(120)
A: Any = alter_req
D: Any = describe_req
RATE_IP = "127.0.0.2"
COUNT_IP = "127.0.0.3"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SkiffNode]:
    n = SkiffNode(Path(tmp_path_factory.mktemp("connquota")),
                  config_env={"SKIFF_MAX_CONNECTIONS_PER_IP_OVERRIDES": f"{COUNT_IP}:3"})
    n.start()
    try:
        n.wait_ready()
        yield n
    finally:
        n.close()


def _call(bootstrap: str, api_key: int, version: int, request: Any) -> Any:
    host, port = bootstrap.rsplit(":", 1)

    async def go() -> Any:
        conn = KafkaConnection(host, int(port), "connquota-test")
        try:
            return await conn.request(api_key, version, request, 10.0)
        finally:
            await conn.close()

    return asyncio.run(go())


def _api_versions_frame(correlation: int) -> bytes:
    cid = b"connquota"
    body = struct.pack(">hhih", 18, 0, correlation, len(cid)) + cid
    return struct.pack(">i", len(body)) + body


def _open(node: SkiffNode, source: str, n: int) -> list[socket.socket]:
    socks = []
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", node.port), timeout=10,
                                     source_address=(source, 0))
        s.sendall(_api_versions_frame(i))
        socks.append(s)
    return socks


def _answered(s: socket.socket) -> tuple[bool, float]:
    """(whether an answer came, seconds until it or EOF)."""
    t0 = time.monotonic()
    try:
        head = s.recv(4)
    except (ConnectionResetError, TimeoutError):
        head = b""
    return len(head) == 4, time.monotonic() - t0


def test_per_ip_override_closes_connections_over_the_count(node: SkiffNode) -> None:
    socks = _open(node, COUNT_IP, 5)
    try:
        results = [_answered(s) for s in socks]
    finally:
        for s in socks:
            s.close()
    assert [ok for ok, _ in results] == [True, True, True, False, False]
    # closed at once, not after a delay
    assert all(t < 5 for ok, t in results if not ok)
    # the count frees as the server sees the connections close
    deadline = time.monotonic() + 10
    while True:
        (s,) = _open(node, COUNT_IP, 1)
        try:
            if _answered(s)[0]:
                break
        finally:
            s.close()
        assert time.monotonic() < deadline, "the closed connections were never uncounted"
        time.sleep(0.2)


def test_ip_connection_creation_rate_closes_over_rate_connections_late(
        node: SkiffNode) -> None:
    resp = _call(node.bootstrap, 49, 1, A.AlterClientQuotasRequest(validate_only=False, entries=(
        A.EntryData(entity=(A.EntityData(entity_type="ip", entity_name=RATE_IP),),
                    ops=(A.OpData(key="connection_creation_rate", value=1.0,
                                  remove=False),)),)))
    assert [e.error_code for e in resp.entries] == [ErrorCode.none], resp
    deadline = time.monotonic() + 20
    while True:  # until the broker's metadata image has it
        d = _call(node.bootstrap, 48, 1, D.DescribeClientQuotasRequest(strict=True, components=(
            D.ComponentData(entity_type="ip", match_type=0, match=RATE_IP),)))
        if any(v.key == "connection_creation_rate" for e in d.entries for v in e.values):
            break
        assert time.monotonic() < deadline, "quota not visible"
        time.sleep(0.2)
    # 1/s over at least 10 windows of 1 s (quota.window.num 11): about 10 connections
    # are let in at once, the rest are over the rate
    socks = _open(node, RATE_IP, 16)
    opened = time.monotonic()
    try:
        results = [_answered(s) for s in socks]
        ended = time.monotonic()
    finally:
        for s in socks:
            s.close()
    served = [ok for ok, _ in results]
    assert 10 <= served.count(True) <= 11, served
    assert served == sorted(served, reverse=True), served  # the first ones are served
    # the refused ones are closed after their throttle time (about 1 s here), not at once:
    # the first of them (read in order, the others are already closed by then) took long
    first_refused = served.index(False)
    waited = sum(t for _, t in results[:first_refused + 1])
    assert waited > 0.3 and ended - opened > 0.3, results


def test_alter_configs_changes_the_per_ip_overrides_on_a_running_node(
        node: SkiffNode) -> None:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": node.bootstrap, "log_level": 3})
    broker_id = admin.describe_cluster().result(timeout=20).nodes[0].id
    source = "127.0.0.4"
    res = ConfigResource(ResourceType.BROKER, str(broker_id), incremental_configs=[
        ConfigEntry("max.connections.per.ip.overrides", f"{COUNT_IP}:3,{source}:1",
                    incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(timeout=20)
    deadline = time.monotonic() + 20
    while True:  # until the broker's image has it: the second connection is refused
        socks = _open(node, source, 2)
        try:
            served = [_answered(s)[0] for s in socks]
        finally:
            for s in socks:
                s.close()
        # [True, False] only under the dynamic override (127.0.0.4 has no static limit);
        # anything else: not applied yet, or the last round's closes not yet counted
        if served == [True, False]:
            break
        assert time.monotonic() < deadline, f"the dynamic override never applied: {served}"
        time.sleep(0.3)


class _RateLimitedNode(SkiffNode):
    """The client listener (PLAINTEXT) at 5 new connections/s, windows of 2 x 1 s."""

    def command(self) -> list[str]:
        return [*super().command(),
                "--override", "listener.name.plaintext.max.connection.creation.rate=5",
                "--override", "quota.window.num=2"]


def test_listener_creation_rate_delays_reading_new_connections(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """Over listener.name.<l>.max.connection.creation.rate a connection is served, but only
    after Kafka's throttle time (the acceptor's wait): answers come later and later."""
    n = _RateLimitedNode(Path(tmp_path_factory.mktemp("connrate")))
    n.start()
    try:
        n.wait_ready()
        time.sleep(2.5)  # let the readiness checks' connections leave the rate's windows
        socks = _open(n, "127.0.0.5", 12)
        opened = time.monotonic()
        try:
            answered = []
            for s in socks:
                ok, _ = _answered(s)
                answered.append((ok, time.monotonic() - opened))
        finally:
            for s in socks:
                s.close()
    finally:
        n.close()
    assert all(ok for ok, _ in answered), answered  # delayed, never refused
    # 5/s over one window: the first few at once, the last ones throttled: 12 in ~0 s
    # against 5/s is (12 - 5) / 5 x 1 s = 1.4 s for the last
    assert answered[0][1] < 0.5, answered
    assert answered[-1][1] > 0.8, answered
