"""DescribeConfigs v1-4: topic and broker configs, sources, synonyms, filters, errors."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.config import ConfigSource, ConfigType, describe_broker_configs
from broker.controller.requests import (
    AlterConfigOp,
    ConfigResource,
    CreatableTopic,
    IncrementalAlterConfigsResource,
)
from broker.handlers import describe_configs
from broker.metadata.records import RESOURCE_BROKER, RESOURCE_TOPIC
from broker.protocol.kio_build import build
from tests.unit.handlers.conftest import NODE_ID, TestNode, make_ctx, roundtrip
from tests.unit.handlers.datapath import schema_module

VERSIONS = range(1, 5)


def resource(v: int, rtype: int, name: str, keys: list[str] | None = None) -> Any:
    m = schema_module("describe_configs", v)
    return build(m.DescribeConfigsResource, resource_type=rtype, resource_name=name,
                 configuration_keys=None if keys is None else tuple(keys))


def request(v: int, *resources: Any, synonyms: bool = False, docs: bool = False) -> Any:
    m = schema_module("describe_configs", v)
    return build(m.DescribeConfigsRequest, resources=tuple(resources), include_synonyms=synonyms,
                 include_documentation=docs)


def call(node: TestNode, v: int, req: Any) -> Any:
    resp = asyncio.run(describe_configs.handle(node, make_ctx(32, v), req))
    assert int(resp.__version__) == v
    assert roundtrip(resp) == resp
    return resp


def set_dynamic(node: TestNode, rtype: int, name: str, **configs: str) -> None:
    results = asyncio.run(node.controller.incremental_alter_configs([
        IncrementalAlterConfigsResource(ConfigResource(rtype, name), [
            (k.replace("_", "."), AlterConfigOp.SET, val) for k, val in configs.items()])]))
    assert results[0].error is ErrorCode.none, results


@pytest.mark.parametrize("v", VERSIONS)
def test_topic_configs_sources_and_synonyms(node_factory: Any, v: int) -> None:
    node = node_factory({"log.retention.hours": "48"})
    asyncio.run(node.controller.create_topics([CreatableTopic(
        "t", 1, 1, configs={"cleanup.policy": "compact"})]))
    set_dynamic(node, RESOURCE_BROKER, "", log_segment_bytes="5000000")
    resp = call(node, v, request(v, resource(v, RESOURCE_TOPIC, "t"), synonyms=True))
    (res,) = resp.results
    assert (res.error_code, res.resource_type, res.resource_name) == (
        ErrorCode.none, RESOURCE_TOPIC, "t")
    entries = {c.name: c for c in res.configs}
    policy = entries["cleanup.policy"]
    assert (policy.value, policy.config_source, policy.read_only, policy.is_sensitive) == (
        "compact", ConfigSource.DYNAMIC_TOPIC_CONFIG, False, False)
    assert [(s.name, s.value, s.source) for s in policy.synonyms] == [
        ("cleanup.policy", "compact", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("log.cleanup.policy", "delete", ConfigSource.DEFAULT_CONFIG)]
    retention = entries["retention.ms"]
    # Kafka 4.4 (ConfigHelper.configSynonyms' dropWhile): the value follows
    # log.retention.hours, but no synonym is listed before log.retention.ms is set
    # somewhere, and the source is then DEFAULT_CONFIG
    assert (retention.value, retention.config_source) == (
        str(48 * 3600 * 1000), ConfigSource.DEFAULT_CONFIG)
    assert list(retention.synonyms) == []
    segment = entries["segment.bytes"]
    assert (segment.value, segment.config_source) == (
        "5000000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    if v >= 3:
        assert policy.config_type == ConfigType.LIST
        assert retention.config_type == ConfigType.LONG
        assert policy.documentation is None


@pytest.mark.parametrize("v", VERSIONS)
def test_keys_filter_and_no_synonyms(node: TestNode, v: int) -> None:
    asyncio.run(node.controller.create_topics([CreatableTopic("t", 1, 1)]))
    resp = call(node, v, request(v, resource(v, RESOURCE_TOPIC, "t",
                                              ["retention.ms", "no.such.key", "segment.ms"])))
    configs = resp.results[0].configs
    assert [c.name for c in configs] == ["retention.ms", "segment.ms"]
    assert all(c.synonyms == () for c in configs)
    assert configs[0].value == str(7 * 24 * 3600 * 1000)
    assert configs[0].config_source == ConfigSource.DEFAULT_CONFIG
    # an empty key list means every config, as for null
    every = call(node, v, request(v, resource(v, RESOURCE_TOPIC, "t", [])))
    assert len(every.results[0].configs) > 20


@pytest.mark.parametrize("v", VERSIONS)
def test_broker_configs(node: TestNode, v: int) -> None:
    set_dynamic(node, RESOURCE_BROKER, str(NODE_ID), log_retention_ms="1234")
    resp = call(node, v, request(v, resource(v, RESOURCE_BROKER, str(NODE_ID)), synonyms=True,
                                 docs=True))
    (res,) = resp.results
    assert res.error_code is ErrorCode.none
    entries = {c.name: c for c in res.configs}
    expected = describe_broker_configs(node.config, include_synonyms=True,
                                       dynamic_broker={"log.retention.ms": "1234"})
    assert list(entries) == [e.name for e in expected]
    node_id = entries["node.id"]
    assert (node_id.value, node_id.config_source, node_id.read_only) == (
        str(NODE_ID), ConfigSource.STATIC_BROKER_CONFIG, True)
    parts = entries["num.partitions"]
    # not dynamically alterable (the controller refuses it), so read-only as in Kafka
    assert (parts.value, parts.config_source, parts.read_only) == (
        "1", ConfigSource.DEFAULT_CONFIG, True)
    ret = entries["log.retention.ms"]
    assert (ret.value, ret.config_source, ret.read_only) == (
        "1234", ConfigSource.DYNAMIC_BROKER_CONFIG, False)
    assert ret.synonyms[0].source == ConfigSource.DYNAMIC_BROKER_CONFIG
    if v >= 3:
        assert parts.config_type == ConfigType.INT


@pytest.mark.parametrize("v", VERSIONS)
def test_cluster_default_resource(node: TestNode, v: int) -> None:
    empty = call(node, v, request(v, resource(v, RESOURCE_BROKER, "")))
    assert empty.results[0].error_code is ErrorCode.none
    assert empty.results[0].configs == ()
    set_dynamic(node, RESOURCE_BROKER, "", log_retention_bytes="999")
    resp = call(node, v, request(v, resource(v, RESOURCE_BROKER, "")))
    assert [(c.name, c.value, c.config_source) for c in resp.results[0].configs] == [
        ("log.retention.bytes", "999", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)]


@pytest.mark.parametrize("v", VERSIONS)
def test_errors_per_resource(node: TestNode, v: int) -> None:
    asyncio.run(node.controller.create_topics([CreatableTopic("ok", 1, 1)]))
    resp = call(node, v, request(
        v,
        resource(v, RESOURCE_TOPIC, "missing"),
        resource(v, RESOURCE_TOPIC, "bad name"),
        resource(v, RESOURCE_BROKER, "42"),
        resource(v, RESOURCE_BROKER, "abc"),
        resource(v, 8, str(NODE_ID)),
        resource(v, 8, ""),
        resource(v, 99, "x"),
        resource(v, RESOURCE_TOPIC, "ok", ["retention.ms"]),
    ))
    assert [(r.resource_name, r.error_code) for r in resp.results] == [
        ("missing", ErrorCode.unknown_topic_or_partition),
        ("bad name", ErrorCode.invalid_topic_exception),
        ("42", ErrorCode.invalid_request),
        ("abc", ErrorCode.invalid_request),
        (str(NODE_ID), ErrorCode.none),
        ("", ErrorCode.invalid_request),
        ("x", ErrorCode.invalid_request),
        ("ok", ErrorCode.none),
    ]
    for r in resp.results:
        if r.error_code is not ErrorCode.none:
            assert r.error_message
            assert r.configs == ()
    assert resp.results[4].configs == ()  # no log4j loggers to report
    assert len(resp.results[7].configs) == 1


def test_read_only_matches_what_alter_configs_accepts(node: TestNode) -> None:
    resp = call(node, 4, request(4, resource(4, RESOURCE_BROKER, str(NODE_ID))))
    entries = [c for c in resp.results[0].configs if c.value is not None]

    async def try_each() -> list[Any]:
        out = []
        for c in entries:  # one request per key: a resource may appear once per request
            (r,) = await node.controller.incremental_alter_configs([
                IncrementalAlterConfigsResource(ConfigResource(RESOURCE_BROKER, str(NODE_ID)),
                                                [(c.name, AlterConfigOp.SET, c.value)])],
                validate_only=True)
            out.append(r)
        return out

    results = asyncio.run(try_each())
    mismatched = [(c.name, c.read_only, r.error.name) for c, r in zip(entries, results, strict=True)
                  if c.read_only != (r.error is not ErrorCode.none)]
    assert mismatched == []
    assert any(not c.read_only for c in entries) and any(c.read_only for c in entries)


def test_v0_answers_is_default_instead_of_sources(node_factory: Any) -> None:
    node = node_factory({"log.retention.hours": "48"})
    asyncio.run(node.controller.create_topics([CreatableTopic(
        "t", 1, 1, configs={"cleanup.policy": "compact"})]))
    resp = call(node, 0, request(0, resource(0, RESOURCE_TOPIC, "t")))
    (res,) = resp.results
    assert res.error_code is ErrorCode.none
    entries = {c.name: c for c in res.configs}
    assert not hasattr(entries["cleanup.policy"], "config_source")
    # a topic override and a static broker value are not defaults; Kafka's default is
    assert (entries["cleanup.policy"].value, entries["cleanup.policy"].is_default) == (
        "compact", False)
    # ... but retention.ms from log.retention.hours alone is reported as a default, as
    # Kafka 4.4 does (no synonym left once the ones before log.retention.ms are dropped)
    assert (entries["retention.ms"].value, entries["retention.ms"].is_default) == (
        str(48 * 3600 * 1000), True)
    assert entries["segment.bytes"].is_default is True


def test_streams_group_configs_as_kafka_describes_them(node_factory: Any) -> None:
    """What Kafka 4.4 lists for a GROUP resource's streams configs (seen with kafka-configs
    against a reference node): the assignor name (the first of group.streams.assignors) and
    the rack-aware tags always; its internal task-offset interval, warm-up replicas and
    recovery lag only when the group sets them, each with its broker synonym. The broker
    lists group.streams.assignors and the tags, not those internal keys."""
    from broker.config.resource_configs import RESOURCE_GROUP

    node = node_factory({"group.streams.task.offset.interval.ms": "30000"})
    v = 4

    def group() -> dict[str, Any]:
        (res,) = call(node, v, request(v, resource(v, RESOURCE_GROUP, "g"),
                                       synonyms=True)).results
        assert res.error_code is ErrorCode.none
        return {c.name: c for c in res.configs if c.name.startswith("streams.")}

    def shown(c: Any) -> tuple[Any, ...]:
        return (c.value, c.config_source, c.config_type,
                [(s.name, s.value, s.source) for s in c.synonyms])

    default = ConfigSource.DEFAULT_CONFIG
    entries = group()
    assert shown(entries["streams.assignor.name"]) == (
        "sticky", default, ConfigType.STRING, [("group.streams.assignors", "sticky", default)])
    assert shown(entries["streams.rack.aware.assignment.tags"]) == (
        "", default, ConfigType.LIST, [("group.streams.rack.aware.assignment.tags", "",
                                        default)])
    hidden = {"streams.task.offset.interval.ms", "streams.num.warmup.replicas",
              "streams.acceptable.recovery.lag"}
    assert not hidden & set(entries)
    set_dynamic(node, RESOURCE_GROUP, "g", **{
        "streams.task.offset.interval.ms": "20000", "streams.num.warmup.replicas": "3",
        "streams.acceptable.recovery.lag": "500", "streams.assignor.name": "sticky",
        "streams.rack.aware.assignment.tags": "zone,rack"})
    entries = group()
    dynamic = ConfigSource.DYNAMIC_GROUP_CONFIG
    assert shown(entries["streams.task.offset.interval.ms"]) == (
        "20000", dynamic, ConfigType.INT,
        [("streams.task.offset.interval.ms", "20000", dynamic),
         ("group.streams.task.offset.interval.ms", "30000", default)])
    assert shown(entries["streams.num.warmup.replicas"])[:3] == ("3", dynamic, ConfigType.INT)
    assert shown(entries["streams.acceptable.recovery.lag"]) == (
        "500", dynamic, ConfigType.LONG,
        [("streams.acceptable.recovery.lag", "500", dynamic),
         ("group.streams.acceptable.recovery.lag", "10000", default)])
    assert shown(entries["streams.rack.aware.assignment.tags"])[:2] == ("zone,rack", dynamic)
    broker = {c.name for c in describe_broker_configs(node.config)}
    assert {"group.streams.assignors", "group.streams.rack.aware.assignment.tags"} <= broker
    assert not {"group.streams.task.offset.interval.ms", "group.streams.num.warmup.replicas",
                "group.streams.max.warmup.replicas", "group.streams.acceptable.recovery.lag",
                "group.streams.min.task.offset.interval.ms"} & broker
