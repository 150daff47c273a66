"""The admin server: listeners config, health, reflection, error mapping."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)
from kio.schema.errors import ErrorCode

from broker.admin import AdminServer, admin_listeners, parse_admin_listeners
from broker.admin.errors import status_of as kafka_status
from broker.admin.pb import SERVICE_NAMES
from broker.config import build_config
from broker.errors import KafkaError
from tests.unit.admin.harness import Admin, AdminTestNode, pb, serve, status_of

S = grpc.StatusCode


def test_parse_admin_listeners() -> None:
    assert parse_admin_listeners(None) == ["127.0.0.1:9094"]
    assert parse_admin_listeners("") == []
    assert parse_admin_listeners("ADMIN://10.0.0.1:7000, :7001") == [
        "10.0.0.1:7000", "0.0.0.0:7001"]
    assert parse_admin_listeners(["[::1]:7002"]) == ["[::1]:7002"]
    for bad in ("nohost", "h:port", "h:70000"):
        with pytest.raises(ValueError, match=r"admin\.listeners"):
            parse_admin_listeners(bad)


def test_admin_listeners_from_a_node_config() -> None:
    base = {"process.roles": "broker,controller", "node.id": "1",
            "controller.quorum.voters": "1@127.0.0.1:19093",
            "listeners": "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093",
            "controller.listener.names": "CONTROLLER", "log.dirs": "/tmp/x"}
    assert admin_listeners(build_config(base, warn=lambda m: None)) == ["127.0.0.1:9094"]
    cfg = build_config({**base, "admin.listeners": "127.0.0.1:9194"}, warn=lambda m: None)
    assert admin_listeners(cfg) == ["127.0.0.1:9194"]


def test_kafka_errors_map_to_status_codes_with_hints() -> None:
    cases = {
        ErrorCode.unknown_topic_or_partition: S.NOT_FOUND,
        ErrorCode.topic_already_exists: S.ALREADY_EXISTS,
        ErrorCode.invalid_config: S.INVALID_ARGUMENT,
        ErrorCode.not_controller: S.UNAVAILABLE,
        ErrorCode.request_timed_out: S.DEADLINE_EXCEEDED,
        ErrorCode.no_reassignment_in_progress: S.FAILED_PRECONDITION,
        ErrorCode.unknown_server_error: S.INTERNAL,
    }
    for err, code in cases.items():
        got, message = kafka_status(KafkaError(err, "why"))
        assert got is code, err
        assert message.startswith("why (" + err.name.upper() + ")")
    assert "min.insync.replicas" in kafka_status(KafkaError(ErrorCode.not_enough_replicas))[1]


def test_failures_inside_an_rpc_become_statuses(node: AdminTestNode,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    calls = iter([RuntimeError("boom"), TimeoutError(),
                  KafkaError(ErrorCode.request_timed_out, "not committed")])

    async def failing(*args: Any, **kwargs: Any) -> Any:
        raise next(calls)

    monkeypatch.setattr(node.controller, "create_topics", failing)

    async def body(a: Admin) -> list[tuple[Any, str]]:
        req = pb.topics.CreateTopicRequest(name="t")
        return [await status_of(a.topics.CreateTopic(req)) for _ in range(3)]

    r = serve(node, body)
    assert r[0] == (S.INTERNAL, "CreateTopic failed unexpectedly: RuntimeError: boom")
    assert r[1][0] is S.DEADLINE_EXCEEDED
    assert r[2][0] is S.DEADLINE_EXCEEDED and "not committed" in r[2][1]


def test_health_serves_every_service_and_reflection_lists_them(node: AdminTestNode) -> None:
    async def body(a: Admin) -> Any:
        health = health_pb2_grpc.HealthStub(a.channel)
        statuses = {}
        for name in ("", *SERVICE_NAMES):
            for _ in range(500):
                resp = await health.Check(health_pb2.HealthCheckRequest(service=name))
                if resp.status == health_pb2.HealthCheckResponse.SERVING:
                    break
                await asyncio.sleep(0.01)
            statuses[name] = resp.status
        code, _ = await status_of(health.Check(health_pb2.HealthCheckRequest(service="nope")))
        return statuses, code

    statuses, unknown = serve(node, body)
    assert set(statuses.values()) == {health_pb2.HealthCheckResponse.SERVING}
    assert unknown is S.NOT_FOUND
    assert set(SERVICE_NAMES) == {
        f"skiff.admin.v1.{n}" for n in ("ClusterService", "QuorumService", "TopicService",
                                         "PartitionService", "GroupService", "ConfigService",
                                         "RecordService", "TransactionService",
                                         "AclService", "QuotaService", "FeatureService")}

    # reflection, with grpc's own (synchronous) reflection client in a thread
    async def reflect(a: Admin) -> Any:
        def query() -> Any:
            with grpc.insecure_channel(a.server.addresses[0]) as ch:
                db = ProtoReflectionDescriptorDatabase(ch)
                services = set(db.get_services())
                desc = db.FindFileContainingSymbol("skiff.admin.v1.TopicService")
                return services, desc.name, list(desc.dependency)
        return await asyncio.to_thread(query)

    services, file_name, deps = serve(node, reflect)
    assert set(SERVICE_NAMES) | {"grpc.health.v1.Health"} <= services
    assert file_name == "skiff/admin/v1/topics.proto"
    assert deps == ["skiff/metadata/v1/records.proto"]


def test_a_busy_admin_port_fails_start(node: AdminTestNode) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]

        async def main() -> None:
            server = AdminServer(node, [f"127.0.0.1:{port}"])
            with pytest.raises(Exception, match=str(port)):
                await server.start()
            await server.stop()

        asyncio.run(main())


def test_empty_admin_listeners_disables_the_server(node: AdminTestNode) -> None:
    async def main() -> None:
        server = AdminServer(node, [])
        await server.start()
        assert server.ports == []
        await server.stop()

    asyncio.run(main())


def test_admin_listeners_when_config_declares_the_key() -> None:
    from types import SimpleNamespace

    declared = SimpleNamespace(values={"admin.listeners": ["127.0.0.1:9300"]}, originals={},
                               get=lambda k: ["127.0.0.1:9300"])
    assert admin_listeners(declared) == ["127.0.0.1:9300"]
    off = SimpleNamespace(values={"admin.listeners": []}, originals={}, get=lambda k: [])
    assert admin_listeners(off) == []


def test_advertised_admin_endpoints_skip_wildcards(node: AdminTestNode) -> None:
    async def main() -> None:
        server = AdminServer(node, ["127.0.0.1:0", "0.0.0.0:0"], grace_s=0)
        await server.start()
        try:
            assert server.advertised_endpoints() == [
                ("ADMIN", "127.0.0.1", server.ports[0], "PLAINTEXT")]
        finally:
            await server.stop()

    asyncio.run(main())


def test_a_taken_admin_port_fails_the_start_with_a_clear_message() -> None:
    """Issue 17: gRPC binds with SO_REUSEPORT by default, so several nodes on one host all
    "listened" on 127.0.0.1:9094. The second server on a port must fail to start."""

    from types import SimpleNamespace

    def bare() -> Any:  # what the services look at while constructed
        return SimpleNamespace(controller=None, ready=asyncio.Event(), config={},
                               node_id=1)

    async def go() -> None:
        first = AdminServer(bare(), ["127.0.0.1:0"], grace_s=0)
        await first.start()
        try:
            taken = f"127.0.0.1:{first.ports[0]}"
            second = AdminServer(bare(), [taken], grace_s=0)
            with pytest.raises(OSError, match=r"admin\.listeners: cannot bind .*in use"):
                await second.start()
        finally:
            await first.stop()
        # a port held by a plain socket (another program) too
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", 0))
            s.listen()
            third = AdminServer(bare(), [f"127.0.0.1:{s.getsockname()[1]}"], grace_s=0)
            with pytest.raises(OSError, match=r"admin\.listeners"):
                await third.start()

    asyncio.run(asyncio.wait_for(go(), 20))


def test_readiness_service_follows_the_nodes_readiness_the_overall_status_does_not(
        node: AdminTestNode) -> None:
    """skiff.readiness is computed on each Check from the node's readiness; "" (liveness)
    stays SERVING; a readiness that raises answers NOT_SERVING, not an error status."""
    from broker.admin.readiness import READINESS_SERVICE, READY, Readiness

    now: list[Readiness] = [Readiness(False, "2 replica(s) of broker 1 not yet in the ISR")]

    def readiness() -> Readiness:
        if not now:
            raise RuntimeError("no image")
        return now[0]

    async def body() -> list[tuple[int, int]]:
        server = AdminServer(node, ["127.0.0.1:0"], grace_s=0, readiness=readiness)
        await server.start()
        seen = []
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{server.ports[0]}") as ch:
                stub = health_pb2_grpc.HealthStub(ch)

                async def both() -> tuple[int, int]:
                    overall = await stub.Check(health_pb2.HealthCheckRequest(service=""))
                    ready = await stub.Check(
                        health_pb2.HealthCheckRequest(service=READINESS_SERVICE))
                    return overall.status, ready.status

                for _ in range(500):  # the overall status flips once node.ready is seen
                    if (await both())[0] == health_pb2.HealthCheckResponse.SERVING:
                        break
                    await asyncio.sleep(0.01)
                seen.append(await both())
                now[0] = READY
                seen.append(await both())
                now.clear()
                seen.append(await both())
        finally:
            await server.stop()
        return seen

    node.ready.set()
    serving, not_serving = (health_pb2.HealthCheckResponse.SERVING,
                            health_pb2.HealthCheckResponse.NOT_SERVING)
    assert asyncio.run(body()) == [(serving, not_serving), (serving, serving),
                                   (serving, not_serving)]
