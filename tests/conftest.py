"""Shared fixtures: a real broker for integration and compat tests.

`skiff_node` (session) starts one `skiff dev` process on free loopback ports and yields it;
with SKIFF_TEST_BOOTSTRAP=host:port set it yields that external broker instead (tests that
stop, kill or restart it then skip). `own_skiff_node` gives a test its own node in its own
data dir, for tests that stop and restart it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.kafka_ref import KafkaCluster, KafkaNode, started_kafka
from tests.support.node import ExternalBroker, SkiffNode, external_bootstrap, started_node
from tests.support.records import unique_topic

Broker = SkiffNode | ExternalBroker


def _start(data_dir: Path) -> Broker:
    ext = external_bootstrap()
    if ext is not None:
        ext_broker = ExternalBroker(ext)
        ext_broker.wait_ready()
        return ext_broker
    return started_node(data_dir)


@pytest.fixture(scope="session")
def skiff_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    node = _start(tmp_path_factory.mktemp("skiff-node"))
    try:
        yield node
    finally:
        node.close()


@pytest.fixture
def own_skiff_node(tmp_path: Path) -> Iterator[Broker]:
    node = _start(tmp_path / "node")
    try:
        yield node
    finally:
        node.close()


@pytest.fixture(scope="session")
def kafka_ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaNode]:
    """The reference: one Apache Kafka 4.4 KRaft node (broker and controller), started once."""
    node = started_kafka(tmp_path_factory.mktemp("kafka-ref"))
    try:
        yield node
    finally:
        node.close()


@pytest.fixture(scope="session")
def kafka_ref_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """The reference: three combined Apache Kafka 4.4 nodes, started once."""
    cluster = KafkaCluster(tmp_path_factory.mktemp("kafka-ref-cluster"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def bootstrap(skiff_node: Broker) -> str:
    return skiff_node.bootstrap


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    return unique_topic(request.node.name)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    report = yield
    if report.failed:
        funcargs = getattr(item, "funcargs", {})
        for name in ("own_skiff_node", "skiff_node", "kafka_ref"):
            node = funcargs.get(name)
            if isinstance(node, SkiffNode | KafkaNode):
                report.sections.append((f"{name} log", node.log_tail(80)))
    return report
