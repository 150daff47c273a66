"""CreateTopics v2-5 through the real controller service."""

from __future__ import annotations

import asyncio
import datetime
import importlib
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.config import ConfigSource, describe_topic_configs
from broker.controller.deadline import within
from broker.errors import KafkaError
from broker.handlers import create_topics
from broker.protocol.kio_build import build
from tests.unit.handlers.conftest import NODE_ID, TestNode, make_ctx, roundtrip
from tests.unit.handlers.datapath import schema_module

VERSIONS = range(2, 8)


def topic(v: int, name: str, partitions: int = -1, rf: int = -1,
          assignments: dict[int, list[int]] | None = None,
          configs: dict[str, str | None] | None = None) -> Any:
    m = schema_module("create_topics", v)
    return build(
        m.CreatableTopic, name=name, num_partitions=partitions, replication_factor=rf,
        assignments=tuple(
            build(m.CreatableReplicaAssignment, partition_index=i, broker_ids=tuple(b))
            for i, b in (assignments or {}).items()),
        configs=tuple(build(m.CreatableTopicConfig, name=k, value=val)
                      for k, val in (configs or {}).items()),
    )


def request(v: int, *topics: Any, validate_only: bool = False, timeout_ms: int = 5000) -> Any:
    m = schema_module("create_topics", v)
    return build(m.CreateTopicsRequest, topics=tuple(topics),
                 timeout=datetime.timedelta(milliseconds=timeout_ms), validate_only=validate_only)


def call(node: Any, v: int, req: Any) -> Any:
    resp = asyncio.run(create_topics.handle(node, make_ctx(19, v), req))
    assert int(resp.__version__) == v
    assert roundtrip(resp) == resp
    return resp


@pytest.mark.parametrize("v", VERSIONS)
def test_create_with_counts_and_configs(node: TestNode, v: int) -> None:
    resp = call(node, v, request(v, topic(v, "orders", 3, 1, configs={
        "retention.ms": "1000", "cleanup.policy": "compact"})))
    (r,) = resp.topics
    assert (r.name, r.error_code, r.error_message) == ("orders", ErrorCode.none, None)
    t = node.metadata.topic("orders")
    assert t is not None and t.num_partitions == 3
    assert all(p.leader == NODE_ID and p.replicas == (NODE_ID,) for p in t.partitions.values())
    assert dict(node.metadata.topic_config("orders")) == {
        "retention.ms": "1000", "cleanup.policy": "compact"}
    if v >= 7:
        assert r.topic_id == t.topic_id
    if v >= 5:
        assert (r.num_partitions, r.replication_factor) == (3, 1)
        assert r.topic_config_error_code is ErrorCode.none
        entries = {c.name: c for c in r.configs}
        expected = describe_topic_configs(node.config, {"retention.ms": "1000",
                                                         "cleanup.policy": "compact"})
        assert [c.name for c in r.configs] == [e.name for e in expected]
        assert entries["retention.ms"].value == "1000"
        assert entries["retention.ms"].config_source == ConfigSource.DYNAMIC_TOPIC_CONFIG
        assert entries["cleanup.policy"].value == "compact"
        assert entries["segment.bytes"].value == str(1024 ** 3)
        assert entries["segment.bytes"].config_source == ConfigSource.DEFAULT_CONFIG
        assert entries["segment.bytes"].read_only is False
        assert entries["segment.bytes"].is_sensitive is False


@pytest.mark.parametrize("v", VERSIONS)
def test_defaults_and_manual_assignment(node: TestNode, v: int) -> None:
    asyncio.run(node.register(2))
    resp = call(node, v, request(
        v, topic(v, "defaults"),
        topic(v, "manual", assignments={0: [2, NODE_ID], 1: [NODE_ID, 2]})))
    assert [(r.name, r.error_code) for r in resp.topics] == [
        ("defaults", ErrorCode.none), ("manual", ErrorCode.none)]
    assert node.topic("defaults").num_partitions == node.config["num.partitions"]
    manual = node.topic("manual")
    assert [manual.partitions[i].replicas for i in (0, 1)] == [(2, NODE_ID), (NODE_ID, 2)]
    assert manual.partitions[0].leader == 2
    if v >= 5:
        assert (resp.topics[1].num_partitions, resp.topics[1].replication_factor) == (2, 2)


@pytest.mark.parametrize("v", VERSIONS)
def test_validate_only_creates_nothing(node: TestNode, v: int) -> None:
    before = node.metadata.offset
    resp = call(node, v, request(v, topic(v, "dry", 2, 1), validate_only=True))
    assert resp.topics[0].error_code is ErrorCode.none
    assert node.metadata.topic("dry") is None
    assert node.metadata.offset == before
    if v >= 5:
        assert (resp.topics[0].num_partitions, resp.topics[0].replication_factor) == (2, 1)
        assert len(resp.topics[0].configs) == len(describe_topic_configs(node.config, {}))


@pytest.mark.parametrize("v", VERSIONS)
def test_errors(node: TestNode, v: int) -> None:
    call(node, v, request(v, topic(v, "exists", 1, 1)))
    resp = call(node, v, request(
        v,
        topic(v, "exists", 1, 1),
        topic(v, "bad/name", 1, 1),
        topic(v, "dup", 1, 1),
        topic(v, "wide", 1, 3),
        topic(v, "zero", 0, 1),
        topic(v, "badcfg", 1, 1, configs={"retention.ms": "soon"}),
        topic(v, "unknowncfg", 1, 1, configs={"no.such.config": "1"}),
        topic(v, "both", 2, 1, assignments={0: [NODE_ID]}),
        topic(v, "ghost-broker", assignments={0: [99]}),
        topic(v, "dup", 1, 1),
    ))
    got = {r.name: r for r in resp.topics}
    assert [r.name for r in resp.topics] == [
        "exists", "bad/name", "dup", "wide", "zero", "badcfg", "unknowncfg", "both",
        "ghost-broker"]
    assert {n: r.error_code for n, r in got.items()} == {
        "exists": ErrorCode.topic_already_exists,
        "bad/name": ErrorCode.invalid_topic_exception,
        "dup": ErrorCode.invalid_request,
        "wide": ErrorCode.invalid_replication_factor,
        "zero": ErrorCode.invalid_partitions,
        "badcfg": ErrorCode.invalid_config,
        "unknowncfg": ErrorCode.invalid_config,
        "both": ErrorCode.invalid_request,
        "ghost-broker": ErrorCode.invalid_replica_assignment,
    }
    for r in resp.topics:
        assert r.error_message
        if v >= 5:
            assert (r.num_partitions, r.replication_factor, r.configs) == (-1, -1, ())
    for n in ("bad/name", "dup", "wide", "zero", "badcfg", "unknowncfg", "both", "ghost-broker"):
        assert node.metadata.topic(n) is None


def test_duplicate_partition_in_assignment(node: TestNode) -> None:
    m = importlib.import_module("kio.schema.create_topics.v5.request")
    t = build(m.CreatableTopic, name="twice", num_partitions=-1, replication_factor=-1,
              assignments=(build(m.CreatableReplicaAssignment, partition_index=0,
                                 broker_ids=(NODE_ID,)),) * 2, configs=())
    r = call(node, 5, request(5, t)).topics[0]
    assert r.error_code is ErrorCode.invalid_replica_assignment
    assert node.metadata.topic("twice") is None


def test_controller_error_applies_to_every_topic(node: TestNode) -> None:
    node.quorum.is_leader = False
    resp = call(node, 5, request(5, topic(5, "a", 1, 1), topic(5, "b", 1, 1)))
    assert [(r.name, r.error_code) for r in resp.topics] == [
        ("a", ErrorCode.not_controller), ("b", ErrorCode.not_controller)]


def test_request_timeout(node: TestNode) -> None:
    gate = asyncio.Event()
    original = node.quorum.append

    async def slow_append(records: list[bytes]) -> int:
        await gate.wait()
        return await original(records)

    node.quorum.append = slow_append  # type: ignore[method-assign]

    async def scenario() -> Any:
        resp = await create_topics.handle(node, make_ctx(19, 4),
                                          request(4, topic(4, "late", 1, 1), timeout_ms=50))
        gate.set()
        for _ in range(100):
            if node.metadata.topic("late") is not None:
                break
            await asyncio.sleep(0.01)
        return resp

    resp = asyncio.run(scenario())
    assert resp.topics[0].error_code is ErrorCode.request_timed_out
    # the creation was not abandoned half-way: it completes in the background
    assert node.metadata.topic("late") is not None


def test_controller_wait_passes_errors_through() -> None:
    async def fail() -> None:
        raise KafkaError(ErrorCode.not_controller, "x")

    with pytest.raises(KafkaError) as exc:
        asyncio.run(within(fail, 1000))
    assert exc.value.error_code is ErrorCode.not_controller


@pytest.mark.parametrize("v", [0, 1])
def test_legacy_versions(node: TestNode, v: int) -> None:
    """v0 always creates (no validate_only) and answers name and error only; v1 adds
    validate_only and error_message (Kafka 3.9 served both; KIP-896 removed them)."""
    resp = call(node, v, request(v, topic(v, "old", 2, 1), topic(v, "bad/name", 1, 1)))
    got = {r.name: r for r in resp.topics}
    assert got["old"].error_code is ErrorCode.none
    assert got["bad/name"].error_code is ErrorCode.invalid_topic_exception
    assert hasattr(got["old"], "error_message") == (v == 1)
    assert not hasattr(resp, "throttle_time")
    t = node.metadata.topic("old")
    assert t is not None and t.num_partitions == 2
    if v == 1:
        call(node, v, request(v, topic(v, "dry", 1, 1), validate_only=True))
        assert node.metadata.topic("dry") is None
