"""SASL_SSL with SCRAM-SHA-512, credentials in the metadata log, on a 3+3 cluster.

Every listener is SASL_SSL: clients and the inter-broker listener (`PLAINTEXT`, the
harness's name) use SCRAM-SHA-512 with users written at `storage format --add-scram` time
(UserScramCredential records in the bootstrap metadata), the controller listener uses
PLAIN from its JAAS config; nodes authenticate to each other with the JAAS
username/password of their listener. confluent-kafka, kcat, kafka-python, aiokafka and
kafkajs produce and consume; a wrong password and an unknown user are refused with
SASL_AUTHENTICATION_FAILED and write nothing; DescribeUserScramCredentials lists the users.
"""

from __future__ import annotations

import base64
import json
import shutil
import ssl
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from broker.testing.cluster import Cluster
from broker.testing.tls import Pki, have_openssl, make_pki
from tests.support.requires import tool_mark
from tests.support.roundtrip import aiokafka_roundtrip

pytestmark = [
    pytest.mark.timeout(300),
    tool_mark("openssl", "openssl not installed (tests/run.sh installs it)",
              available=have_openssl()),
]

KCAT = shutil.which("kcat")
NODE = shutil.which("node")
JS_DIR = Path(__file__).parent / "js"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


@dataclass
class Secured:
    cluster: Cluster
    pki: Pki

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap_servers

    def conf(self, user: str = "alice", password: str = "alice-secret") -> dict[str, Any]:
        return {"security.protocol": "sasl_ssl", "sasl.mechanisms": "SCRAM-SHA-512",
                "sasl.username": user, "sasl.password": password,
                "ssl.ca.location": self.pki.ca, "log_level": 0}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    pki = make_pki(tmp_path_factory.mktemp("pki"))
    admin = {"security.protocol": "sasl_ssl", "sasl.mechanisms": "SCRAM-SHA-512",
             "sasl.username": "admin", "sasl.password": "admin-secret",
             "ssl.ca.location": pki.ca}
    # The harness's DescribeQuorum goes to controller listeners: TLS + PLAIN as a node.
    from broker.protocol.transport import ConnectionSecurity
    from broker.security.sasl_config import make_authenticator

    c = Cluster(tmp_path_factory.mktemp("scram-cluster"), controllers=3, brokers=3,
                client_config=admin, add_scram=[
                    "SCRAM-SHA-512=[name=admin,password=admin-secret]",
                    "SCRAM-SHA-512=[name=alice,password=alice-secret]",
                    "SCRAM-SHA-256=[name=bob,password=bob-secret,iterations=8192]",
                ], overrides={
        "listener.security.protocol.map": "PLAINTEXT:SASL_SSL,CONTROLLER:SASL_SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki.keystore("server"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pki.ca,
        "listener.name.plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.plaintext.scram-sha-512.sasl.jaas.config":
            f'{SCRAM} required username="admin" password="admin-secret";',
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config":
            f'{PLAIN} required username="node" password="node-secret" '
            'user_node="node-secret" user_ops="ops-secret";',
    })
    harness = ssl.create_default_context(cafile=pki.ca)
    c.controller_ssl = harness
    import broker.testing.cluster as cluster_module

    original = cluster_module._describe_quorum_leader

    async def describe(host: str, port: int, timeout_s: float, tls: Any = None) -> int:
        return await _describe_with_sasl(host, port, timeout_s, ConnectionSecurity(
            ssl=harness, authenticate=make_authenticator("PLAIN", "ops", "ops-secret")))

    cluster_module._describe_quorum_leader = describe  # type: ignore[assignment]
    try:
        with c:
            c.start()
            yield Secured(c, pki)
    finally:
        cluster_module._describe_quorum_leader = original  # type: ignore[assignment]


async def _describe_with_sasl(host: str, port: int, timeout_s: float, security: Any) -> int:
    from kio.schema.describe_quorum.v0 import request as dq

    from broker.protocol.transport import KafkaConnection

    q: Any = dq
    conn = KafkaConnection(host, port, "skiff-test", security=security)
    try:
        resp = await conn.request(55, 0, q.DescribeQuorumRequest(topics=(
            q.TopicData(topic_name="__cluster_metadata",
                        partitions=(q.PartitionData(partition_index=0),)),)), timeout_s)
    finally:
        await conn.close()
    part = resp.topics[0].partitions[0]
    return int(part.leader_id) if int(part.error_code) == 0 else -1


def _create(s: Secured, topic: str, rf: int = 3) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": s.bootstrap, **s.conf()})
    admin.create_topics([NewTopic(topic, 1, rf)])[topic].result(30)


def _end_offset(s: Secured, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "probe", **s.conf()})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=20)[1])
    finally:
        c.close()


def test_confluent_scram_sha512_replicated(secured: Secured) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = "scram-confluent"
    _create(secured, topic)
    p = Producer({"bootstrap.servers": secured.bootstrap, "acks": "all", **secured.conf()})
    values = [f"c-{i}".encode() * 30 for i in range(300)]
    errors: list[Any] = []
    for v in values:
        p.produce(topic, v, on_delivery=lambda e, _m: errors.append(e) if e else None)
    assert p.flush(30) == 0 and errors == []
    c = Consumer({"bootstrap.servers": secured.bootstrap, "group.id": "g",
                  "enable.auto.commit": False, "fetch.queue.backoff.ms": 1, **secured.conf()})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    end = time.monotonic() + 30
    while len(got) < len(values) and time.monotonic() < end:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    assert got == values

    def in_sync() -> bool:  # the followers fetched over SASL_SSL with SCRAM
        t = secured.cluster.metadata(secured.cluster.broker_ids[0]).topics[topic]
        return len(t.partitions[0].isrs) == 3
    secured.cluster.wait_for(in_sync, 30, "three in-sync replicas")


def test_scram_sha256_user_too(secured: Secured) -> None:
    from confluent_kafka.admin import AdminClient

    conf = {**secured.conf("bob", "bob-secret"), "sasl.mechanisms": "SCRAM-SHA-256"}
    md = AdminClient({"bootstrap.servers": secured.bootstrap, **conf}).list_topics(timeout=20)
    assert len(md.brokers) == 3


@tool_mark("kcat", "kcat not installed (tests/run.sh installs it)")
def test_kcat_scram(secured: Secured) -> None:
    topic = "scram-kcat"
    _create(secured, topic)
    x = [f"-X{k}={v}" for k, v in secured.conf().items() if k != "log_level"]
    lines = [f"k-{i}" for i in range(30)]
    done = subprocess.run([KCAT or "kcat", *x, "-b", secured.bootstrap, "-P", "-t", topic],
                          input="\n".join(lines).encode(), capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    out = subprocess.run([KCAT or "kcat", *x, "-b", secured.bootstrap, "-C", "-t", topic,
                          "-o", "beginning", "-e", "-q"], capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout.decode().split() == lines


def test_kafka_python_scram(secured: Secured) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = "scram-kafka-python"
    _create(secured, topic)
    opts = {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret",
            "ssl_cafile": secured.pki.ca}
    producer = KafkaProducer(bootstrap_servers=secured.bootstrap, **opts)
    values = [f"kp-{i}".encode() for i in range(50)]
    for v in values:
        producer.send(topic, v)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=secured.bootstrap, consumer_timeout_ms=10000,
                             enable_auto_commit=False, **opts)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    got = [m.value for _, m in zip(range(len(values)), consumer, strict=False)]
    consumer.close()
    assert got == values


def test_aiokafka_scram(secured: Secured) -> None:
    from aiokafka.helpers import create_ssl_context

    topic = "scram-aiokafka"
    _create(secured, topic)
    values = [f"ak-{i}".encode() for i in range(50)]
    opts: dict[str, Any] = {
        "bootstrap_servers": secured.bootstrap,
        "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret",
        "ssl_context": create_ssl_context(cafile=secured.pki.ca)}
    assert aiokafka_roundtrip(topic, values, opts, opts) == values


@tool_mark("node/kafkajs", "node/kafkajs not installed (tests/run.sh runs npm install)",
           available=NODE is not None and (JS_DIR / "node_modules" / "kafkajs").is_dir())
def test_kafkajs_scram(secured: Secured, tmp_path: Path) -> None:
    topic = "scram-kafkajs"
    _create(secured, topic)
    now = int(time.time() * 1000)
    recs = [{"partition": 0, "key": None, "value": base64.b64encode(f"js-{i}".encode()).decode(),
             "headers": [], "timestamp_ms": now} for i in range(20)]
    common = {"ssl": {"ca": secured.pki.ca},
              "sasl": {"mechanism": "scram-sha-512", "username": "alice",
                       "password": "alice-secret"}}

    def js(op: str, **req: Any) -> Any:
        f = tmp_path / f"{op}.json"
        f.write_text(json.dumps({"op": op, "bootstrap": secured.bootstrap.split(",")[0],
                                 **common, **req}))
        out = subprocess.run([NODE or "node", str(JS_DIR / "compat.js"), str(f)],
                             capture_output=True, timeout=90, cwd=JS_DIR)
        assert out.returncode == 0, out.stderr.decode()
        return json.loads(out.stdout)

    js("produce", topic=topic, codec="none", batches=[recs])
    out = js("fetch", topic=topic, partition=0, offset="earliest", count=21, timeoutMs=1500)
    assert [base64.b64decode(r["value"]).decode() for r in out["records"]] == [
        f"js-{i}" for i in range(20)]


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("nobody", "x")])
def test_wrong_password_or_unknown_user_is_refused(secured: Secured, user: str,
                                                   password: str) -> None:
    from confluent_kafka import KafkaError, Producer

    topic = f"scram-refused-{user}"
    _create(secured, topic)
    errors: list[Any] = []
    p = Producer({"bootstrap.servers": secured.bootstrap, "message.timeout.ms": 4000,
                  **secured.conf(user, password), "error_cb": errors.append})
    failed: list[Any] = []
    p.produce(topic, b"must not land", on_delivery=lambda e, _m: failed.append(e))
    p.flush(15)
    assert failed and failed[0] is not None
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    assert any("invalid credentials with SASL mechanism SCRAM-SHA-512" in e.str()
               for e in errors), errors
    assert _end_offset(secured, topic) == 0


def test_alter_and_describe_scram_users_at_runtime(secured: Secured) -> None:
    """librdkafka's AdminClient: a user created at runtime can authenticate at once on
    every broker (UserScramCredential records through the controller), is listed by
    DescribeUserScramCredentials, and is refused once deleted."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": secured.bootstrap, **secured.conf()})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("carol", info, b"carol-secret")])["carol"].result(30)
    described = admin.describe_user_scram_credentials(["carol", "alice"])
    carol = described["carol"].result(30).scram_credential_infos
    assert [(c.mechanism, c.iterations) for c in carol] == [(ScramMechanism.SCRAM_SHA_512, 8192)]
    everyone = admin.describe_user_scram_credentials().result(30)
    assert {"admin", "alice", "bob", "carol"} <= set(everyone)

    def lists_topics(user: str, password: str) -> bool:
        c = AdminClient({"bootstrap.servers": secured.bootstrap,
                         **secured.conf(user, password)})
        try:
            c.list_topics(timeout=8)
            return True
        except KafkaException:
            return False

    for node_id in secured.cluster.broker_ids:  # every broker knows carol now
        one = secured.cluster.nodes[node_id].bootstrap
        c = AdminClient({"bootstrap.servers": one, **secured.conf("carol", "carol-secret")})
        assert len(c.list_topics(timeout=20).brokers) == 3
    with pytest.raises(KafkaException) as err:
        admin.alter_user_scram_credentials([UserScramCredentialDeletion(
            "nobody", ScramMechanism.SCRAM_SHA_512)])["nobody"].result(30)
    assert err.value.args[0].code() == 91  # RESOURCE_NOT_FOUND
    with pytest.raises(KafkaException):
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 100),
            b"x")])["dave"].result(30)  # too few iterations: UNACCEPTABLE_CREDENTIAL
    admin.alter_user_scram_credentials([UserScramCredentialDeletion(
        "carol", ScramMechanism.SCRAM_SHA_512)])["carol"].result(30)
    deadline = time.monotonic() + 20
    while lists_topics("carol", "carol-secret") and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not lists_topics("carol", "carol-secret")


def test_skiff_users_cli(secured: Secured, tmp_path: Path) -> None:
    """`skiff users` over SASL_SSL/SCRAM with a Kafka client properties file: add a user,
    list it, authenticate as it with librdkafka, delete it."""
    import sys

    from confluent_kafka.admin import AdminClient

    from tests.support.node import REPO_ROOT

    props = tmp_path / "client.properties"
    props.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        f"sasl.jaas.config={SCRAM} required username=\"admin\" password=\"admin-secret\";\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={secured.pki.ca}\n")
    first = secured.bootstrap.split(",")[0]

    def users(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "broker.cli.main", "users", "-b", first,
                               "--command-config", str(props), *args], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=60)

    done = users("add", "--user", "erin", "--password", "erin-secret", "--iterations", "8192")
    assert done.returncode == 0, done.stderr
    listed = users("list", "--user", "erin")
    assert listed.returncode == 0 and "erin: SCRAM-SHA-512 (iterations 8192)" in listed.stdout
    c = AdminClient({"bootstrap.servers": secured.bootstrap, **secured.conf("erin", "erin-secret")})
    assert len(c.list_topics(timeout=20).brokers) == 3
    assert users("delete", "--user", "erin").returncode == 0
    missing = users("list", "--user", "erin")
    assert missing.returncode == 1 and "RESOURCE_NOT_FOUND" in missing.stderr.upper()
