"""ConfigService: describe with sources, set/delete (atomic), and error statuses."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from tests.unit.admin.harness import Admin, AdminTestNode, pb, serve, status_of

S = grpc.StatusCode
C = pb.configs
TOPIC, BROKER = C.RESOURCE_TYPE_TOPIC, C.RESOURCE_TYPE_BROKER


def change(rtype: int, rname: str, name: str, value: str | None = None) -> Any:
    c = pb.meta.Config(resource_type=rtype, resource_name=rname, name=name)
    if value is not None:
        c.value = value
    return c


def describe(a: Admin, rtype: int, name: str, *names: str, synonyms: bool = False,
             dynamic_only: bool = False) -> Any:
    return a.configs.DescribeConfigs(C.DescribeConfigsRequest(
        resource=C.ConfigResource(type=rtype, name=name), names=list(names),
        include_synonyms=synonyms, dynamic_only=dynamic_only))


def entries(resp: Any) -> dict[str, Any]:
    return {e.name: e for e in resp.entries}


def test_topic_config_set_shows_dynamic_source_and_delete_restores_default(
        node: AdminTestNode) -> None:
    asyncio.run(node.create_topic("t"))

    async def body(a: Admin) -> Any:
        before = entries(await describe(a, TOPIC, "t", "retention.ms", "cleanup.policy"))
        await a.configs.AlterConfigs(C.AlterConfigsRequest(changes=[
            change(TOPIC, "t", "retention.ms", "1000")]))
        after_set = entries(await describe(a, TOPIC, "t", "retention.ms", synonyms=True))
        dynamic = await describe(a, TOPIC, "t", dynamic_only=True)
        await a.configs.AlterConfigs(C.AlterConfigsRequest(changes=[
            change(TOPIC, "t", "retention.ms")]))
        after_delete = entries(await describe(a, TOPIC, "t", "retention.ms"))
        return before, after_set, dynamic, after_delete

    before, after_set, dynamic, after_delete = serve(node, body)
    assert before["retention.ms"].source == C.CONFIG_SOURCE_DEFAULT_CONFIG
    assert before["retention.ms"].value == "604800000"
    assert before["cleanup.policy"].value == "delete"
    e = after_set["retention.ms"]
    assert (e.value, e.source, e.type) == ("1000", C.CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG, "LONG")
    assert e.synonyms[0].source == C.CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG
    # as Kafka 4.4: no broker synonym until log.retention.ms itself is set at broker level
    assert [s.name for s in e.synonyms[1:]] == []
    assert [x.name for x in dynamic.entries] == ["retention.ms"]
    assert after_delete["retention.ms"].source == C.CONFIG_SOURCE_DEFAULT_CONFIG
    assert dict(node.metadata.topic_config("t")) == {}


def test_alter_is_atomic_one_bad_change_changes_nothing(node: AdminTestNode) -> None:
    asyncio.run(node.create_topic("t"))
    asyncio.run(node.create_topic("u"))

    async def body(a: Admin) -> tuple[Any, str]:
        return await status_of(a.configs.AlterConfigs(C.AlterConfigsRequest(changes=[
            change(TOPIC, "t", "retention.ms", "5000"),
            change(TOPIC, "u", "cleanup.policy", "sometimes")])))

    code, details = serve(node, body)
    assert code is S.INVALID_ARGUMENT
    assert "topic 'u'" in details and "cleanup.policy" in details
    assert dict(node.metadata.topic_config("t")) == {}
    assert dict(node.metadata.topic_config("u")) == {}


def test_validate_only_changes_nothing(node: AdminTestNode) -> None:
    asyncio.run(node.create_topic("t"))

    async def body(a: Admin) -> Any:
        return await a.configs.AlterConfigs(C.AlterConfigsRequest(
            changes=[change(TOPIC, "t", "retention.ms", "5000")], validate_only=True))

    resp = serve(node, body)
    assert [(r.type, r.name) for r in resp.resources] == [(TOPIC, "t")]
    assert dict(node.metadata.topic_config("t")) == {}


def test_broker_configs_with_sources(tmp_path: Any) -> None:
    n = AdminTestNode(tmp_path, {"num.partitions": "4"})
    asyncio.run(n.register(1))
    n.ready.set()
    try:
        async def body(a: Admin) -> Any:
            own = entries(await describe(a, BROKER, "1", "num.partitions",
                                         "default.replication.factor", "node.id",
                                         "log.retention.ms"))
            await a.configs.AlterConfigs(C.AlterConfigsRequest(changes=[
                change(BROKER, "", "log.retention.ms", "7200000"),
                change(BROKER, "1", "log.cleaner.threads", "2")]))
            default = await describe(a, BROKER, "")
            own_after = entries(await describe(a, BROKER, "1", "log.retention.ms",
                                               "log.cleaner.threads"))
            return own, default, own_after

        own, default, own_after = serve(n, body)
    finally:
        n.close()
    assert (own["num.partitions"].value, own["num.partitions"].source) == (
        "4", C.CONFIG_SOURCE_STATIC_BROKER_CONFIG)
    assert own["default.replication.factor"].source == C.CONFIG_SOURCE_DEFAULT_CONFIG
    assert own["node.id"].read_only and not own["log.retention.ms"].read_only
    assert [(e.name, e.value, e.source) for e in default.entries] == [
        ("log.retention.ms", "7200000", C.CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG)]
    assert own_after["log.retention.ms"].source == C.CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG
    assert (own_after["log.cleaner.threads"].value,
            own_after["log.cleaner.threads"].source) == (
        "2", C.CONFIG_SOURCE_DYNAMIC_BROKER_CONFIG)


def test_config_errors(node: AdminTestNode) -> None:
    asyncio.run(node.register(2))
    asyncio.run(node.create_topic("t"))

    async def body(a: Admin) -> list[tuple[Any, str]]:
        alter = a.configs.AlterConfigs
        req = C.AlterConfigsRequest
        return [
            await status_of(describe(a, TOPIC, "nope")),                       # 0
            await status_of(describe(a, TOPIC, "t", "retention.mss")),         # 1
            await status_of(describe(a, BROKER, "2")),                         # 2
            await status_of(describe(a, BROKER, "9")),                         # 3
            await status_of(describe(a, BROKER, "one")),                       # 4
            await status_of(describe(a, C.RESOURCE_TYPE_UNSPECIFIED, "t")),    # 5
            await status_of(alter(req())),                                     # 6
            await status_of(alter(req(changes=[change(TOPIC, "nope", "retention.ms", "1")]))),
            await status_of(alter(req(changes=[change(TOPIC, "t", "no.such.key", "1")]))),
            await status_of(alter(req(changes=[change(BROKER, "1", "node.id", "5")]))),
            await status_of(alter(req(changes=[change(TOPIC, "t", "", "1")]))),  # 10
            await status_of(alter(req(changes=[change(TOPIC, "t", "retention.ms", "1"),
                                               change(TOPIC, "t", "retention.ms", "2")]))),
        ]

    r = serve(node, body)
    assert [c for c, _ in r] == [
        S.NOT_FOUND, S.INVALID_ARGUMENT, S.FAILED_PRECONDITION, S.NOT_FOUND,
        S.INVALID_ARGUMENT, S.INVALID_ARGUMENT, S.INVALID_ARGUMENT, S.NOT_FOUND,
        S.INVALID_ARGUMENT, S.INVALID_ARGUMENT, S.INVALID_ARGUMENT, S.INVALID_ARGUMENT]
    assert "retention.mss" in r[1][1]
    assert "broker 2's admin listener" in r[2][1]
    assert "node.id" in r[9][1]
    assert dict(node.metadata.topic_config("t")) == {}
