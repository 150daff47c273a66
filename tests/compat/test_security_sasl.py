"""SASL/PLAIN on a SASL_PLAINTEXT listener with real clients, and its refusals.

One combined node: the client listener (`PLAINTEXT`, the harness's name, mapped to
SASL_PLAINTEXT) enables PLAIN with users from its JAAS config, and connections.max.reauth.ms
makes clients re-authenticate during the test. confluent-kafka, kcat, kafka-python,
aiokafka and kafkajs produce and consume; a wrong password and an unknown user get
SASL_AUTHENTICATION_FAILED and write nothing.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.testing.cluster import Cluster
from tests.support.requires import tool_mark
from tests.support.roundtrip import aiokafka_roundtrip

pytestmark = [pytest.mark.timeout(180)]

KCAT = shutil.which("kcat")
NODE = shutil.which("node")
JS_DIR = Path(__file__).parent / "js"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" '
        'user_admin="admin-secret" user_alice="alice-secret";')


def conf(user: str = "alice", password: str = "alice-secret") -> dict[str, Any]:
    return {"security.protocol": "sasl_plaintext", "sasl.mechanisms": "PLAIN",
            "sasl.username": user, "sasl.password": password, "log_level": 0}


@pytest.fixture(scope="module")
def sasl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("sasl-node"), controllers=1, brokers=0, combined=True,
                client_config=conf("admin", "admin-secret"), overrides={
        "listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.plaintext.plain.sasl.jaas.config": JAAS,
        "connections.max.reauth.ms": "3000",
    })
    with c:
        c.start()
        yield c


@pytest.fixture(scope="module")
def sasl_node(sasl_cluster: Cluster) -> str:
    return sasl_cluster.nodes[1].bootstrap


def _create(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, **conf()})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)


def _end_offset(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe", **conf()})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=20)[1])
    finally:
        c.close()


def test_confluent_plain_across_reauthentication(sasl_node: str) -> None:
    """Produce and consume for longer than the 3 s session: librdkafka re-authenticates
    (KIP-368) on the same connection and nothing is interrupted."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = "sasl-confluent"
    _create(sasl_node, topic)
    p = Producer({"bootstrap.servers": sasl_node, "linger.ms": 5, **conf()})
    errors: list[Any] = []
    sent: list[bytes] = []
    deadline = time.monotonic() + 7
    i = 0
    while time.monotonic() < deadline:
        v = f"v-{i}".encode()
        p.produce(topic, v, on_delivery=lambda e, _m: errors.append(e) if e else None)
        sent.append(v)
        i += 1
        p.poll(0.05)
    assert p.flush(30) == 0 and errors == []
    c = Consumer({"bootstrap.servers": sasl_node, "group.id": "g1", "enable.auto.commit": False,
                  "fetch.queue.backoff.ms": 1, **conf()})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    end = time.monotonic() + 30
    while len(got) < len(sent) and time.monotonic() < end:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    assert got == sent


@tool_mark("kcat", "kcat not installed (tests/run.sh installs it)")
def test_kcat_plain(sasl_node: str) -> None:
    topic = "sasl-kcat"
    _create(sasl_node, topic)
    x = ["-X", "security.protocol=sasl_plaintext", "-X", "sasl.mechanisms=PLAIN",
         "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret"]
    lines = [f"k-{i}" for i in range(30)]
    done = subprocess.run([KCAT or "kcat", *x, "-b", sasl_node, "-P", "-t", topic],
                          input="\n".join(lines).encode(), capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    out = subprocess.run([KCAT or "kcat", *x, "-b", sasl_node, "-C", "-t", topic, "-o",
                          "beginning", "-e", "-q"], capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout.decode().split() == lines


def test_kafka_python_plain(sasl_node: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = "sasl-kafka-python"
    _create(sasl_node, topic)
    opts = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
            "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"}
    producer = KafkaProducer(bootstrap_servers=sasl_node, **opts)
    values = [f"kp-{i}".encode() for i in range(50)]
    for v in values:
        producer.send(topic, v)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=sasl_node, consumer_timeout_ms=10000,
                             enable_auto_commit=False, **opts)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    got = [m.value for _, m in zip(range(len(values)), consumer, strict=False)]
    consumer.close()
    assert got == values


def test_aiokafka_plain(sasl_node: str) -> None:
    topic = "sasl-aiokafka"
    _create(sasl_node, topic)
    opts: dict[str, Any] = {"bootstrap_servers": sasl_node,
                            "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
                            "sasl_plain_username": "alice",
                            "sasl_plain_password": "alice-secret"}
    values = [f"ak-{i}".encode() for i in range(50)]
    assert aiokafka_roundtrip(topic, values, opts, opts) == values


@tool_mark("node/kafkajs", "node/kafkajs not installed (tests/run.sh runs npm install)",
           available=NODE is not None and (JS_DIR / "node_modules" / "kafkajs").is_dir())
def test_kafkajs_plain(sasl_node: str, tmp_path: Path) -> None:
    topic = "sasl-kafkajs"
    _create(sasl_node, topic)
    sasl = {"mechanism": "plain", "username": "alice", "password": "alice-secret"}
    now = int(time.time() * 1000)
    recs = [{"partition": 0, "key": None, "value": base64.b64encode(f"js-{i}".encode()).decode(),
             "headers": [], "timestamp_ms": now} for i in range(20)]

    def js(op: str, **req: Any) -> Any:
        f = tmp_path / f"{op}.json"
        f.write_text(json.dumps({"op": op, "bootstrap": sasl_node, "sasl": sasl, **req}))
        out = subprocess.run([NODE or "node", str(JS_DIR / "compat.js"), str(f)],
                             capture_output=True, timeout=90, cwd=JS_DIR)
        assert out.returncode == 0, out.stderr.decode()
        return json.loads(out.stdout)

    js("produce", topic=topic, codec="none", batches=[recs])
    out = js("fetch", topic=topic, partition=0, offset="earliest", count=21, timeoutMs=1500)
    assert [base64.b64decode(r["value"]).decode() for r in out["records"]] == [
        f"js-{i}" for i in range(20)]


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("nobody", "x")])
def test_wrong_password_or_unknown_user_is_refused(sasl_node: str, user: str,
                                                   password: str) -> None:
    from confluent_kafka import KafkaError, Producer

    topic = f"sasl-refused-{user}"
    _create(sasl_node, topic)
    errors: list[Any] = []
    p = Producer({"bootstrap.servers": sasl_node, "message.timeout.ms": 4000,
                  **conf(user, password), "error_cb": errors.append})
    failed: list[Any] = []
    p.produce(topic, b"must not land", on_delivery=lambda e, _m: failed.append(e))
    p.flush(15)
    assert failed and failed[0] is not None
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    assert any("Invalid username or password" in e.str() for e in errors), errors
    assert _end_offset(sasl_node, topic) == 0


def test_raw_wrong_password_gets_sasl_authentication_failed(sasl_node: str) -> None:
    """The error code on the wire is Kafka's SASL_AUTHENTICATION_FAILED (58)."""
    from kio.schema.sasl_authenticate.v2 import request as ar
    from kio.schema.sasl_handshake.v1 import request as hr

    from broker.protocol.transport import KafkaConnection

    async def run() -> tuple[int, int, str | None]:
        host, _, port = sasl_node.rpartition(":")
        conn = KafkaConnection(host, int(port), "raw")
        try:
            hs = await conn.request(17, 1, hr.SaslHandshakeRequest(mechanism="PLAIN"), 10)
            au = await conn.request(36, 2, ar.SaslAuthenticateRequest(
                auth_bytes=b"\0alice\0bad"), 10)
            return int(hs.error_code), int(au.error_code), au.error_message
        finally:
            await conn.close()

    hs, au, msg = asyncio.run(run())
    assert (hs, au) == (0, 58)
    assert msg == "Authentication failed: Invalid username or password"


def test_malformed_sasl_input_leaves_the_node_up(sasl_cluster: Cluster) -> None:
    """Seeded garbage before and during authentication: bad frames, oversized frames,
    malformed PLAIN and SCRAM tokens, requests before authenticating. Each connection is
    closed or refused; the node stays up, its memory bounded, and a real client still
    authenticates afterwards."""
    import random
    import socket
    import struct

    import psutil


    node = sasl_cluster.nodes[1]
    host, _, port = node.bootstrap.rpartition(":")
    proc = psutil.Process(node.pid)
    rss0 = proc.memory_info().rss
    rng = random.Random(21)

    def frame(api_key: int, version: int, body: bytes) -> bytes:
        header = struct.pack(">hhi", api_key, version, 7) + struct.pack(">h", 4) + b"fuzz"
        payload = header + body
        return struct.pack(">i", len(payload)) + payload

    def handshake(mech: bytes) -> bytes:
        return frame(17, 1, struct.pack(">h", len(mech)) + mech)

    def authenticate(token: bytes) -> bytes:
        return frame(36, 0, struct.pack(">i", len(token)) + token)

    cases = []
    for _ in range(60):
        junk = rng.randbytes(rng.randrange(1, 300))
        kind = rng.randrange(7)
        if kind == 0:
            cases.append(junk)                                    # not a frame at all
        elif kind == 1:
            cases.append(struct.pack(">i", 100_000_000) + junk)   # huge before auth
        elif kind == 2:
            cases.append(frame(3, 0, junk))                       # Metadata before auth
        elif kind == 3:
            cases.append(handshake(b"PLAIN") + authenticate(junk))
        elif kind == 4:
            cases.append(handshake(b"SCRAM-SHA-512") + authenticate(junk))
        elif kind == 5:
            cases.append(handshake(junk[:50]))                    # unknown mechanism
        else:
            cases.append(authenticate(b"\0alice\0alice-secret"))  # no handshake
    for data in cases:
        with socket.create_connection((host, int(port)), timeout=5) as s:
            try:
                s.sendall(data)
                s.settimeout(5)
                while s.recv(65536):
                    pass
            except OSError:
                pass
    assert node.running
    grown = proc.memory_info().rss - rss0
    assert grown < 64 << 20, f"RSS grew {grown >> 20} MiB"
    _create(node.bootstrap, "sasl-after-fuzz")
