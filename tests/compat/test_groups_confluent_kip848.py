"""Consumer groups with librdkafka `group.protocol=consumer` (KIP-848: ConsumerGroupHeartbeat,
server-side uniform assignor, incremental reconciliation): a group of 3 on a 6-partition
topic, members in their own processes, ownership checked from librdkafka's own incremental
assign/revoke callbacks (groupsupport.py).

The member session timeout of this protocol is the broker's group.consumer.session.timeout.ms
(the node under test runs with 6 s); clients do not choose it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.compat import groupsupport as gs
from tests.support.kafka_ref import KafkaNode
from tests.support.node import SkiffNode

pytestmark = pytest.mark.timeout(150)
CLIENT = gs.Client(gs.python_member, {"client": "confluent", "protocol": "consumer"},
                   eager=False, classic=False)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SkiffNode]:
    yield from gs.node_fixture(tmp_path_factory)


def test_join_leave_kill(node: SkiffNode) -> None:
    topic = gs.unique("members")
    gs.create_topic(node.bootstrap, topic)
    took = gs.run_membership(CLIENT, node.bootstrap, topic, gs.unique("members"))
    print(took)


def test_static_member_returns_without_rebalance(node: SkiffNode) -> None:
    # KIP-848: a static member that closes leaves with epoch -2 and keeps its assignment for
    # its session; one killed without that leave is still a member, so its successor gets
    # UNRELEASED_INSTANCE_ID until the session expires (Kafka's rule too)
    topic = gs.unique("static")
    gs.create_topic(node.bootstrap, topic)
    gs.run_static(CLIENT, node.bootstrap, topic, gs.unique("static"), kill=False)


def test_resume_at_committed_after_restart(node: SkiffNode) -> None:
    topic = gs.unique("restart")
    gs.create_topic(node.bootstrap, topic)
    gs.run_restart(CLIENT, node, topic, gs.unique("restart"))


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "kill-9"])
def test_membership_survives_node_restart(node: SkiffNode, kill: bool) -> None:
    # KIP-848 membership is written to __consumer_offsets and replayed on load (as Kafka
    # does): members keep their epochs and partitions through a restart instead of rejoining
    topic = gs.unique("survive")
    gs.create_topic(node.bootstrap, topic)
    gs.run_membership_survives_restart(CLIENT, node, topic, gs.unique("survive"), kill=kill)


def test_regex_subscription_follows_new_topics(node: SkiffNode) -> None:
    took = gs.run_regex_subscription(CLIENT, node.bootstrap, gs.unique("rx"), gs.unique("rx"))
    print(f"new matching topic assigned after {took:.2f}s")


def test_killed_static_member_successor_is_refused_until_session_expiry(node: SkiffNode) -> None:
    topic = gs.unique("static-kill")
    gs.create_topic(node.bootstrap, topic)
    gs.run_static_killed_kip848(CLIENT, node.bootstrap, topic, gs.unique("static-kill"))


def test_client_chosen_range_assignor(node: SkiffNode) -> None:
    # group.remote.assignor=range: the coordinator's range assignor gives each member a
    # contiguous block, and ConsumerGroupDescribe names it
    topic, group = gs.unique("range"), gs.unique("range")
    gs.create_topic(node.bootstrap, topic)
    run = gs.GroupRun(CLIENT.command, {**CLIENT.base, "remote_assignor": "range",
                                       "bootstrap": node.bootstrap, "group": group,
                                       "topic": topic, "session_ms": gs.SESSION_MS,
                                       "heartbeat_ms": gs.HEARTBEAT_MS})
    try:
        for name in ("a", "b", "c"):
            run.start(name)
        run.wait_balanced(["a", "b", "c"])
        blocks = sorted(sorted(ps) for ps in run.owned().values())
        assert blocks == [[0, 1], [2, 3], [4, 5]], blocks
        assert gs.describe(node.bootstrap, group).partition_assignor == "range"
        for name in ("a", "b", "c"):
            run.stop(name)
        gs.check_exclusive(run.snapshot(), eager=False)
    finally:
        run.close()


def _offset_delete_steps(bootstrap: str, topic: str, group: str) -> tuple[str, str, list[int]]:
    """A librdkafka consumer-protocol member consumes and commits; kafka-consumer-groups
    --delete-offsets while it is in the group, and again once it has left; then the group's
    committed offsets. Returns the two outputs (names replaced) and the offsets left."""
    import time

    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer
    from confluent_kafka.admin import AdminClient

    from tests.support.kafka_ref import tool

    gs.create_topic(bootstrap, topic)
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(gs.PARTITIONS):
        p.produce(topic, b"v", partition=i)
    assert p.flush(10) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "group.protocol": "consumer", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})

    def delete_offsets() -> str:
        out = tool("kafka-consumer-groups", "--bootstrap-server", bootstrap,
                   "--delete-offsets", "--group", group, "--topic", topic, timeout=90)
        text = out.stdout + out.stderr
        return " ".join(text.replace(topic, "<topic>").replace(group, "<group>").split())

    try:
        c.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 30
        while got < gs.PARTITIONS:
            assert time.monotonic() < deadline, f"consumed only {got}"
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got += 1
        c.commit(asynchronous=False)
        refused = delete_offsets()
    finally:
        c.close()  # leaves the group (member epoch -1): the group is empty now
    done = delete_offsets()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [fut] = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)]).values()
    left = [tp.partition for tp in fut.result(20).topic_partitions if tp.offset >= 0]
    return refused, done, left


def test_offset_delete_after_the_last_member_left(node: SkiffNode, kafka_ref: KafkaNode) -> None:
    """Issue 36: OffsetDelete on a `group.protocol=consumer` group answers
    GROUP_SUBSCRIBED_TO_TOPIC only while a member subscribes to the topic. A librdkafka
    member consumes and commits, Kafka's kafka-consumer-groups --delete-offsets is refused
    while it is in the group, and succeeds once it has left: the same steps against Skiff
    and Kafka 4.4 side by side print the same."""
    from concurrent.futures import ThreadPoolExecutor

    topic, group = gs.unique("odel"), gs.unique("odel")
    with ThreadPoolExecutor(2) as pool:
        skiff, ref = pool.map(lambda b: _offset_delete_steps(b, topic, group),
                              (node.bootstrap, kafka_ref.bootstrap))
    assert skiff == ref, (skiff, ref)
    refused, done, left = skiff
    assert "subscribed" in refused.lower(), refused
    assert done.count("Successful") == gs.PARTITIONS, done
    assert left == []
