"""Topic administration through librdkafka (confluent-kafka), for tests whose client has none
(kcat) and for waiting on metadata. Every wait is bounded."""

from __future__ import annotations

import contextlib
import time
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourceType,
)

TIMEOUT_S = 20.0


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})


def topic_partitions(bootstrap: str, name: str, timeout: float = 5.0) -> dict[int, int] | None:
    """partition -> leader for `name`, or None when the broker says the topic does not exist."""
    # all topics: asking for one by name may auto-create it (auto.create.topics.enable)
    md = admin(bootstrap).list_topics(timeout=timeout)
    t = md.topics.get(name)
    if t is None or t.error is not None:
        return None
    return {p.id: p.leader for p in t.partitions.values()}


def wait_topic_ready(bootstrap: str, name: str, partitions: int,
                     timeout: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    seen: dict[int, int] | None = None
    while time.monotonic() < deadline:
        seen = topic_partitions(bootstrap, name)
        if seen is not None and len(seen) == partitions and all(x >= 0 for x in seen.values()):
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {name} not ready with {partitions} led partitions: {seen}")


def wait_topic_absent(bootstrap: str, name: str, timeout: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        md = admin(bootstrap).list_topics(timeout=5)
        if name not in md.topics:
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {name} still listed {timeout:.0f}s after deletion")


def create_topic(bootstrap: str, name: str, partitions: int = 1,
                 config: dict[str, str] | None = None, timeout: float = TIMEOUT_S) -> None:
    a = admin(bootstrap)  # must outlive the future, or librdkafka destroys the request
    futures = a.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
        operation_timeout=timeout, request_timeout=timeout)
    futures[name].result(timeout=timeout)
    wait_topic_ready(bootstrap, name, partitions, timeout)


def delete_topic(bootstrap: str, name: str, timeout: float = TIMEOUT_S) -> None:
    a = admin(bootstrap)
    futures = a.delete_topics([name], operation_timeout=timeout, request_timeout=timeout)
    futures[name].result(timeout=timeout)


def describe_topic_config(bootstrap: str, name: str, timeout: float = TIMEOUT_S) -> dict[str, Any]:
    res = ConfigResource(ResourceType.TOPIC, name)
    a = admin(bootstrap)
    futures = a.describe_configs([res], request_timeout=timeout)
    result: dict[str, Any] = futures[res].result(timeout=timeout)
    return result


def try_delete_topic(bootstrap: str, name: str) -> None:
    """Teardown helper: delete if it exists. A failure here (unknown topic, broker gone) must
    not mask the test's own result, so it is ignored."""
    with contextlib.suppress(KafkaException, TimeoutError):
        delete_topic(bootstrap, name, timeout=10)
