"""Authorization with the StandardAuthorizer and ACLs, with real clients on a real node.

One controller and two brokers with `authorizer.class.name` set. Every listener
authenticates with SASL/PLAIN: the client and inter-broker listener (`PLAINTEXT`, the
harness's name, mapped to SASL_PLAINTEXT) knows admin, producer, alice and mallory, and the
brokers replicate as admin; the controller listener knows the nodes' own principal, `node`
(registration, heartbeats, AlterPartition, forwarded admin requests). `super.users` is
User:admin;User:node: the inter-broker and controller principals must be super users (or
hold CLUSTER_ACTION), as in Kafka. Topics have two replicas, so replication runs under the
authorizer too.

ACLs are created with confluent-kafka's AdminClient (CreateAcls) as admin. The producer may
WRITE `orders`; alice may READ `orders` and READ groups prefixed `app`: exactly what a
consumer group needs. confluent-kafka and aiokafka consumer groups read everything under
those ACLs. Every refusal gets Kafka's client-visible error and writes nothing: a topic
without WRITE, a group without READ, a follower Fetch (replica_id set) from a principal
without CLUSTER_ACTION, Metadata hiding a topic, CreateAcls without ALTER on the cluster.
"""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Iterator
from typing import Any

import pytest

import broker.testing.cluster as cluster_module
from broker.testing.cluster import Cluster

pytestmark = [pytest.mark.timeout(240)]

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
CLIENT_JAAS = (f'{PLAIN} required username="admin" password="admin-secret" '
               'user_admin="admin-secret" user_producer="producer-secret" '
               'user_alice="alice-secret" user_mallory="mallory-secret";')
CONTROLLER_JAAS = (f'{PLAIN} required username="node" password="node-secret" '
                   'user_node="node-secret";')
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def conf(user: str) -> dict[str, Any]:
    return {"security.protocol": "sasl_plaintext", "sasl.mechanisms": "PLAIN",
            "sasl.username": user, "sasl.password": f"{user}-secret", "log_level": 0}


def security(user: str) -> Any:
    from broker.protocol.transport import ConnectionSecurity
    from broker.security.sasl_config import make_authenticator

    return ConnectionSecurity(authenticate=make_authenticator("PLAIN", user, f"{user}-secret"))


async def _describe_quorum_as_node(host: str, port: int, timeout_s: float,
                                   tls: Any = None) -> int:
    """The harness's DescribeQuorum on the controller listener, authenticated as `node`."""
    from kio.schema.describe_quorum.v0 import request as dq

    from broker.protocol.transport import KafkaConnection

    q: Any = dq
    conn = KafkaConnection(host, port, "skiff-test", security=security("node"))
    try:
        resp = await conn.request(55, 0, q.DescribeQuorumRequest(topics=(
            q.TopicData(topic_name="__cluster_metadata",
                        partitions=(q.PartitionData(partition_index=0),)),)), timeout_s)
    finally:
        await conn.close()
    part = resp.topics[0].partitions[0]
    return int(part.leader_id) if int(part.error_code) == 0 else -1


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("acl-cluster"), controllers=1, brokers=2,
                client_config=conf("admin"), overrides={
        "listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.plaintext.plain.sasl.jaas.config": CLIENT_JAAS,
        "listener.name.controller.plain.sasl.jaas.config": CONTROLLER_JAAS,
        "authorizer.class.name": STANDARD,
        "super.users": "User:admin;User:node",
    }, release_version="4.1")  # below 4.4-IV1, for the CIDR gate
    original = cluster_module._describe_quorum_leader
    cluster_module._describe_quorum_leader = _describe_quorum_as_node  # type: ignore[assignment]
    try:
        with c:
            c.start()
            _setup(c.bootstrap_servers)
            yield c
    finally:
        cluster_module._describe_quorum_leader = original  # type: ignore[assignment]


@pytest.fixture(scope="module")
def acl_node(acl_cluster: Cluster) -> str:
    return acl_cluster.bootstrap_servers


def _setup(bootstrap: str) -> None:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap, **conf("admin")})
    for f in admin.create_topics([NewTopic(t, 1, 2) for t in ("orders", "secret")]).values():
        f.result(30)
    allow = AclPermissionType.ALLOW
    bindings = [
        AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:producer",
                   "*", AclOperation.WRITE, allow),
        AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice",
                   "*", AclOperation.READ, allow),
        AclBinding(ResourceType.GROUP, "app", ResourcePatternType.PREFIXED, "User:alice",
                   "*", AclOperation.READ, allow),
    ]
    for f in admin.create_acls(bindings).values():
        f.result(30)


def _end_offset(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe", **conf("admin")})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=20)[1])
    finally:
        c.close()


def _produce(bootstrap: str, user: str, topic: str, values: list[bytes]) -> list[Any]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10000,
                  "linger.ms": 5, **conf(user)})
    errors: list[Any] = []
    for v in values:
        p.produce(topic, v, on_delivery=lambda e, _m: errors.append(e))
    p.flush(30)
    return errors


def test_describe_acls_lists_what_was_granted(acl_node: str) -> None:
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": acl_node, **conf("admin")})
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    got = admin.describe_acls(everything).result(30)
    assert sorted((b.restype.name, b.name, b.principal, b.operation.name) for b in got) == [
        ("GROUP", "app", "User:alice", "READ"),
        ("TOPIC", "orders", "User:alice", "READ"),
        ("TOPIC", "orders", "User:producer", "WRITE")]


def test_consumer_groups_work_with_exactly_the_needed_acls(acl_cluster: Cluster,
                                                           acl_node: str) -> None:
    """confluent-kafka and aiokafka consumer groups (alice: READ on the topic, READ on the
    groups) read what the producer (WRITE on the topic) wrote, and commit; the follower
    replicated it (as admin, a super user)."""
    from aiokafka import AIOKafkaConsumer
    from confluent_kafka import Consumer

    values = [f"order-{i}".encode() for i in range(20)]
    assert _produce(acl_node, "producer", "orders", values) == [None] * len(values)

    def replicated() -> bool:
        sizes = [sum(f.stat().st_size for f in (acl_cluster.nodes[b].directory / "logs" /
                                                "orders-0").glob("*.log"))
                 for b in acl_cluster.broker_ids]
        return all(s > 0 for s in sizes)

    acl_cluster.wait_for(replicated, 20, "both replicas of orders-0 to hold the records")

    c = Consumer({"bootstrap.servers": acl_node, "group.id": "app-confluent",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  **conf("alice")})
    c.subscribe(["orders"])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < len(values) and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None:
            assert m.error() is None, m.error()
            got.append(m.value())
    c.commit(asynchronous=False)
    c.close()
    assert got == values

    async def aio() -> list[bytes]:
        consumer = AIOKafkaConsumer(
            "orders", bootstrap_servers=acl_node, group_id="app-aiokafka",
            auto_offset_reset="earliest", enable_auto_commit=False,
            security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
            sasl_plain_username="alice", sasl_plain_password="alice-secret")
        await consumer.start()
        try:
            out: list[bytes] = []
            async with asyncio.timeout(60):
                while len(out) < len(values):
                    batches = await consumer.getmany(timeout_ms=1000)
                    out += [m.value for ms in batches.values() for m in ms
                            if m.value is not None]
            await consumer.commit()
            return out
        finally:
            await consumer.stop()

    assert asyncio.run(aio()) == values


def test_produce_without_write_is_refused_and_writes_nothing(acl_node: str) -> None:
    from confluent_kafka import KafkaError

    before = _end_offset(acl_node, "orders")
    errors = _produce(acl_node, "alice", "orders", [b"forged"])
    assert [e.code() if e else None for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert _end_offset(acl_node, "orders") == before


def test_group_without_read_is_refused(acl_node: str) -> None:
    from confluent_kafka import Consumer, KafkaError

    c = Consumer({"bootstrap.servers": acl_node, "group.id": "other-group",
                  "auto.offset.reset": "earliest", **conf("alice")})
    c.subscribe(["orders"])
    codes: set[int] = set()
    deadline = time.monotonic() + 30
    try:
        while KafkaError.GROUP_AUTHORIZATION_FAILED not in codes \
                and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is not None:
                codes.add(m.error().code())
            elif m is not None:
                pytest.fail("a group without READ read a message")
    finally:
        c.close()
    assert KafkaError.GROUP_AUTHORIZATION_FAILED in codes


def test_metadata_hides_topics_that_may_not_be_described(acl_node: str) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    alice = AdminClient({"bootstrap.servers": acl_node, **conf("alice")})
    assert set(alice.list_topics(timeout=20).topics) == {"orders"}
    named = alice.list_topics(topic="secret", timeout=20).topics["secret"]
    assert named.error is not None
    assert named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    admin = AdminClient({"bootstrap.servers": acl_node, **conf("admin")})
    assert {"orders", "secret"} <= set(admin.list_topics(timeout=20).topics)


def test_follower_fetch_without_cluster_action_is_refused(acl_node: str) -> None:
    """A raw Fetch with replica_id set, from alice (no CLUSTER_ACTION): every partition is
    TOPIC_AUTHORIZATION_FAILED and no record comes back, as Kafka answers a follower
    that may not replicate."""
    from kio.schema.errors import ErrorCode
    from kio.schema.fetch.v12 import request as fetch_v12

    from broker.protocol.transport import KafkaConnection

    m: Any = fetch_v12
    host, _, port = acl_node.split(",")[0].rpartition(":")

    async def fetch_as(user: str) -> Any:
        conn = KafkaConnection(host, int(port), "rogue-follower", security=security(user))
        try:
            return await conn.request(1, 12, m.FetchRequest(
                replica_id=2, max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20,
                isolation_level=0, session_id=0, session_epoch=-1, topics=(m.FetchTopic(
                    topic="orders", partitions=(m.FetchPartition(
                        partition=0, current_leader_epoch=-1, fetch_offset=0,
                        last_fetched_epoch=-1, log_start_offset=-1,
                        partition_max_bytes=1 << 20),)),),
                forgotten_topics_data=(), rack_id=""), 10.0)
        finally:
            await conn.close()

    resp = asyncio.run(fetch_as("alice"))
    [part] = resp.responses[0].partitions
    assert part.error_code is ErrorCode.topic_authorization_failed
    assert not part.records


def test_create_acls_needs_alter_on_the_cluster(acl_node: str) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    mallory = AdminClient({"bootstrap.servers": acl_node, **conf("mallory")})
    grab = AclBinding(ResourceType.TOPIC, "*", ResourcePatternType.LITERAL, "User:mallory",
                      "*", AclOperation.ALL, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as refused:
        mallory.create_acls([grab])[grab].result(30)
    assert "CLUSTER_AUTHORIZATION_FAILED" in str(refused.value) or \
        "Cluster authorization failed" in str(refused.value)
    errors = _produce(acl_node, "mallory", "secret", [b"x"])
    assert errors[0] is not None


def test_cidr_host_patterns_with_kafka_acls(acl_cluster: Cluster, tmp_path: Any) -> None:
    """KIP-1276 with Kafka 4.4's kafka-acls and kafka-features: at metadata.version
    4.1-IV1 (this module's cluster is formatted at 4.1) a CIDR host is refused with Kafka's
    UNSUPPORTED_VERSION message; after `kafka-features upgrade --metadata 4.4-IV1` an
    invalid block is refused with Kafka's INVALID_REQUEST message, and mallory, writing
    from 127.0.0.1, may write where 127.0.0.0/8 is allowed and not where 10.0.0.0/8 is."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.support.kafka_ref import tool

    bootstrap = acl_cluster.bootstrap_servers
    admin_props = tmp_path / "admin.properties"
    admin_props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
        f'{PLAIN} required username="admin" password="admin-secret";\n')
    common = ["--bootstrap-server", bootstrap, "--command-config", str(admin_props)]

    def acls(topic: str, host: str) -> Any:
        return tool("kafka-acls", *common, "--add", "--allow-principal", "User:mallory",
                    "--allow-host", host, "--operation", "Write", "--topic", topic)

    admin = AdminClient({"bootstrap.servers": bootstrap, **conf("admin")})
    for f in admin.create_topics([NewTopic(t, 1, 2) for t in ("cidr-in", "cidr-out")]).values():
        f.result(30)
    gated = acls("cidr-in", "127.0.0.0/8")
    assert "CIDR-based ACL host patterns require metadata version 4.4-IV1 or higher." in \
        gated.stdout + gated.stderr
    up = tool("kafka-features", *common, "upgrade", "--metadata", "4.4-IV1")
    assert up.returncode == 0, up.stdout + up.stderr
    assert "metadata.version was upgraded" in up.stdout, up.stdout
    invalid = acls("cidr-in", "127.0.0.0/33")
    assert "Invalid CIDR notation '127.0.0.0/33': Value [33] not in range [0,32]" in \
        invalid.stdout + invalid.stderr
    for topic, host in (("cidr-in", "127.0.0.0/8"), ("cidr-out", "10.0.0.0/8")):
        added = acls(topic, host)
        assert added.returncode == 0 and f"host={host}" in added.stdout, added.stdout
    listed = tool("kafka-acls", *common, "--list", "--topic", "cidr-out")
    assert "(principal=User:mallory, host=10.0.0.0/8, operation=WRITE, " \
           "permissionType=ALLOW)" in listed.stdout
    assert _produce(bootstrap, "mallory", "cidr-in", [b"inside"]) == [None]
    refused = _produce(bootstrap, "mallory", "cidr-out", [b"outside"])
    assert refused[0] is not None and "TOPIC_AUTHORIZATION_FAILED" in str(refused[0])
