"""broker.testing.container.SkiffContainer through testcontainers (podman's Docker API)."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from broker.cli.health import check
from tests.deploy.test_image import consume_all, produce

pytestmark = pytest.mark.timeout(300)


def test_skiff_container_serves_a_client(skiff_image: str, docker_host: str) -> None:
    from broker.testing.container import SkiffContainer

    with SkiffContainer(skiff_image) as skiff:
        bootstrap = skiff.get_bootstrap_server()
        assert check(skiff.get_admin_address())[0]
        topic = f"tc-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the future
        futures = admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
        futures[topic].result(30)
        acked = produce(bootstrap, topic, 100)
        assert sorted(consume_all(bootstrap, topic, 100)) == sorted(acked)
