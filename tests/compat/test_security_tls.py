"""TLS listeners with real clients: SSL and mTLS (ssl.client.auth=required).

One combined node whose every listener is TLS, the controller listener and the
inter-broker one included: `PLAINTEXT` (the harness's name, mapped to SSL) with its key
store given inline (ssl.keystore.certificate.chain/key), `MTLS` requiring client
certificates, and `CONTROLLER` with an encrypted key file (ssl.key.password).
confluent-kafka, kcat, kafka-python, aiokafka and kafkajs produce and consume; clients
without a certificate, with an untrusted one or an expired one are refused during the
handshake and write nothing; a replaced key store file is served to new connections
without a restart.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.testing.cluster import Cluster, free_ports
from broker.testing.tls import Pki, have_openssl, make_pki
from tests.support.requires import tool_mark
from tests.support.roundtrip import aiokafka_roundtrip

pytestmark = [
    pytest.mark.timeout(180),
    tool_mark("openssl", "openssl not installed (tests/run.sh installs it)",
              available=have_openssl()),
]

KCAT = shutil.which("kcat")
NODE = shutil.which("node")
JS_DIR = Path(__file__).parent / "js"


def _props_value(text: str) -> str:
    """A multi-line value in a .properties file: newlines as \\n escapes."""
    return text.strip().replace("\n", "\\n")


class TlsNode:
    def __init__(self, cluster: Cluster, pki: Pki, mtls_port: int) -> None:
        self.cluster = cluster
        self.pki = pki
        node = cluster.nodes[1]
        assert node.client_port is not None and node.controller_port is not None
        self.ssl = f"127.0.0.1:{node.client_port}"
        self.mtls = f"127.0.0.1:{mtls_port}"
        self.controller_port = node.controller_port

    def conf(self, user: str | None = None, **extra: Any) -> dict[str, Any]:
        """librdkafka settings for SSL (and a client certificate for mTLS)."""
        c: dict[str, Any] = {"security.protocol": "ssl", "ssl.ca.location": self.pki.ca,
                             "log_level": 0, **extra}
        if user is not None:
            c["ssl.certificate.location"] = self.pki.path(f"{user}.pem")
            c["ssl.key.location"] = self.pki.path(f"{user}.key")
        return c


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_node(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[TlsNode]:
    base = tmp_path_factory.mktemp("tls-node")
    keystore = base / "server-keystore.pem"  # the reload test replaces this file
    shutil.copy(pki.keystore("server"), keystore)
    client = {"security.protocol": "ssl", "ssl.ca.location": pki.ca}
    controller_ssl = ssl.create_default_context(cafile=pki.ca)
    cluster = Cluster(base, controllers=1, brokers=0, combined=True, client_config=client,
                      controller_ssl=controller_ssl, overrides={
        "listener.security.protocol.map": "PLAINTEXT:SSL,MTLS:SSL,CONTROLLER:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pki.ca,
        "listener.name.plaintext.ssl.keystore.certificate.chain":
            _props_value(Path(pki.path("server.pem")).read_text()),
        "listener.name.plaintext.ssl.keystore.key":
            _props_value(Path(pki.path("server.key")).read_text()),
        "listener.name.mtls.ssl.keystore.location": str(keystore),
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.controller.ssl.keystore.location": pki.keystore("server-enc"),
        "listener.name.controller.ssl.key.password": "serverpass",
    })
    node = cluster.nodes[1]
    (mtls_port,) = free_ports(1)
    cluster.node_overrides[1] = {"listeners": (
        f"PLAINTEXT://127.0.0.1:{node.client_port},MTLS://127.0.0.1:{mtls_port},"
        f"CONTROLLER://127.0.0.1:{node.controller_port}")}
    with cluster:
        cluster.start()
        yield TlsNode(cluster, pki, mtls_port)


def _create(tls: TlsNode, topic: str, partitions: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": tls.ssl, **tls.conf()})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def _produce(bootstrap: str, conf: dict[str, Any], topic: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    errors: list[Any] = []
    for v in values:
        p.produce(topic, v, on_delivery=lambda err, _m: errors.append(err) if err else None)
    assert p.flush(30) == 0
    assert errors == []


def _consume(bootstrap: str, conf: dict[str, Any], topic: str, n: int) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}-{time.time_ns()}",
                  "enable.auto.commit": False, "fetch.queue.backoff.ms": 1, **conf})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(out) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                out.append(m.value())
    finally:
        c.close()
    return out


def _end_offset(tls: TlsNode, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": tls.ssl, "group.id": "probe", **tls.conf()})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=20)[1])
    finally:
        c.close()


def _values(tag: str, n: int, size: int = 3000) -> list[bytes]:
    return [f"{tag}-{i:05d}-".encode() + bytes([i % 251]) * size for i in range(n)]


def test_confluent_ssl_produce_mtls_consume(tls_node: TlsNode) -> None:
    """~1.5 MB through Fetch: the answer is file slices, copied through TLS."""
    topic = "tls-confluent"
    _create(tls_node, topic)
    values = _values("c", 500)
    _produce(tls_node.ssl, tls_node.conf(), topic, values)
    assert _consume(tls_node.mtls, tls_node.conf("alice"), topic, len(values)) == values
    assert _consume(tls_node.ssl, tls_node.conf(), topic, len(values)) == values


@tool_mark("kcat", "kcat not installed (tests/run.sh installs it)")
def test_kcat_ssl_and_mtls(tls_node: TlsNode) -> None:
    topic = "tls-kcat"
    _create(tls_node, topic)
    pki = tls_node.pki
    base = [KCAT or "kcat", "-X", "security.protocol=ssl", "-X", f"ssl.ca.location={pki.ca}"]
    mtls = [*base, "-X", f"ssl.certificate.location={pki.path('bob.pem')}",
            "-X", f"ssl.key.location={pki.path('bob.key')}"]
    lines = [f"kcat-{i}" for i in range(50)]
    done = subprocess.run([*mtls, "-b", tls_node.mtls, "-P", "-t", topic],
                          input="\n".join(lines).encode(), capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    out = subprocess.run([*base, "-b", tls_node.ssl, "-C", "-t", topic, "-o", "beginning",
                          "-e", "-q"], capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout.decode().split() == lines


def test_kafka_python_mtls(tls_node: TlsNode) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = "tls-kafka-python"
    _create(tls_node, topic)
    pki = tls_node.pki
    opts = {"security_protocol": "SSL", "ssl_cafile": pki.ca,
            "ssl_certfile": pki.path("alice.pem"), "ssl_keyfile": pki.path("alice.key")}
    values = _values("kp", 100)
    producer = KafkaProducer(bootstrap_servers=tls_node.mtls, **opts)
    for v in values:
        producer.send(topic, v)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=tls_node.mtls, consumer_timeout_ms=10000,
                             enable_auto_commit=False, **opts)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    got = [m.value for _, m in zip(range(len(values)), consumer, strict=False)]
    consumer.close()
    assert got == values


def test_aiokafka_ssl(tls_node: TlsNode) -> None:
    from aiokafka.helpers import create_ssl_context

    topic = "tls-aiokafka"
    _create(tls_node, topic)
    values = _values("ak", 100)
    ctx = create_ssl_context(cafile=tls_node.pki.ca)
    mctx = create_ssl_context(cafile=tls_node.pki.ca, certfile=tls_node.pki.path("bob.pem"),
                              keyfile=tls_node.pki.path("bob.key"))
    producer = {"bootstrap_servers": tls_node.ssl, "security_protocol": "SSL", "ssl_context": ctx}
    consumer = {"bootstrap_servers": tls_node.mtls, "security_protocol": "SSL",
                "ssl_context": mctx}
    assert aiokafka_roundtrip(topic, values, producer, consumer) == values


@tool_mark("node/kafkajs", "node/kafkajs not installed (tests/run.sh runs npm install)",
           available=NODE is not None and (JS_DIR / "node_modules" / "kafkajs").is_dir())
def test_kafkajs_mtls(tls_node: TlsNode, tmp_path: Path) -> None:
    import base64

    topic = "tls-kafkajs"
    _create(tls_node, topic)
    pki = tls_node.pki
    tls = {"ca": pki.ca, "cert": pki.path("alice.pem"), "key": pki.path("alice.key")}
    now = int(time.time() * 1000)
    recs = [{"partition": 0, "key": None, "value": base64.b64encode(f"js-{i}".encode()).decode(),
             "headers": [], "timestamp_ms": now} for i in range(20)]

    def js(op: str, **req: Any) -> Any:
        f = tmp_path / f"{op}.json"
        f.write_text(json.dumps({"op": op, "bootstrap": tls_node.mtls, "ssl": tls, **req}))
        out = subprocess.run([NODE or "node", str(JS_DIR / "compat.js"), str(f)],
                             capture_output=True, timeout=90, cwd=JS_DIR)
        assert out.returncode == 0, out.stderr.decode()
        return json.loads(out.stdout)

    js("produce", topic=topic, codec="none", batches=[recs])
    out = js("fetch", topic=topic, partition=0, offset="earliest", count=21, timeoutMs=1500)
    got = [base64.b64decode(r["value"]).decode() for r in out["records"]]
    assert got == [f"js-{i}" for i in range(20)]


# ---- refusals ---------------------------------------------------------------------------


def _raw_tls(address: str, ctx: ssl.SSLContext) -> bytes:
    """Handshake, send an ApiVersions v0 request, read the answer (or the alert)."""
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname=host) as s:
        s.sendall(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x07\x00\x00")
        return s.recv(4096)


@pytest.mark.parametrize("cert", [None, "mallory", "expired"])
def test_mtls_refuses_missing_untrusted_expired_certificates(tls_node: TlsNode,
                                                             cert: str | None) -> None:
    pki = tls_node.pki
    ctx = ssl.create_default_context(cafile=pki.ca)
    if cert is not None:
        ctx.load_cert_chain(pki.path(f"{cert}.pem"), pki.path(f"{cert}.key"))
    # TLS 1.3: the client's side of the handshake completes before the server checks its
    # certificate; the server then aborts, so the request gets an alert or end of stream.
    try:
        answer = _raw_tls(tls_node.mtls, ctx)
    except (ssl.SSLError, ConnectionError):
        answer = b""
    assert answer == b""
    # A real producer gets nowhere either, and nothing is written.
    topic = f"tls-refused-{cert}"
    _create(tls_node, topic)
    from confluent_kafka import Producer

    conf = tls_node.conf(cert, **{"message.timeout.ms": 3000}) if cert else \
        tls_node.conf(**{"message.timeout.ms": 3000})
    p = Producer({"bootstrap.servers": tls_node.mtls, **conf})
    failed: list[Any] = []
    p.produce(topic, b"must not land", on_delivery=lambda err, _m: failed.append(err))
    p.flush(15)
    assert failed and failed[0] is not None
    assert _end_offset(tls_node, topic) == 0


def test_client_refuses_untrusted_server(tls_node: TlsNode) -> None:
    ctx = ssl.create_default_context(cafile=tls_node.pki.path("rogue-ca.pem"))
    with pytest.raises(ssl.SSLCertVerificationError):
        _raw_tls(tls_node.ssl, ctx)


def test_plaintext_client_gets_no_answer(tls_node: TlsNode) -> None:
    host, _, port = tls_node.ssl.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x07\x00\x00")
        try:
            data = s.recv(4096)
        except ConnectionError:
            data = b""
    # Not an ApiVersions answer (correlation id 7): a TLS alert or nothing.
    assert not data.startswith(b"\x00\x00") or data[4:8] != b"\x00\x00\x00\x07"


def test_keystore_reload_without_restart(tls_node: TlsNode, tmp_path: Path) -> None:
    """A new certificate in the MTLS listener's key store file is served to new
    connections within a couple of seconds; the node keeps running."""
    from broker.testing.tls import _leaf

    pki = tls_node.pki
    shutil.copy(pki.path("ca.pem"), tmp_path / "ca.pem")
    shutil.copy(pki.path("ca.key"), tmp_path / "ca.key")
    _leaf(tmp_path, "renewed", "/CN=localhost/OU=renewed/O=Skiff",
          san="IP:127.0.0.1,DNS:localhost")
    keystore = tls_node.cluster.base / "server-keystore.pem"
    tmp = keystore.with_suffix(".new")
    shutil.copy(tmp_path / "renewed-keystore.pem", tmp)
    tmp.replace(keystore)

    ctx = ssl.create_default_context(cafile=pki.ca)
    ctx.load_cert_chain(pki.path("alice.pem"), pki.path("alice.key"))
    host, _, port = tls_node.mtls.rpartition(":")
    deadline = time.monotonic() + 15
    subject: Any = None
    while time.monotonic() < deadline:
        with socket.create_connection((host, int(port)), timeout=10) as raw, \
                ctx.wrap_socket(raw, server_hostname=host) as s:
            subject = dict(x[0] for x in s.getpeercert()["subject"])
        if subject.get("organizationalUnitName") == "renewed":
            break
        time.sleep(0.3)
    assert subject is not None and subject.get("organizationalUnitName") == "renewed"
    values = _values("after-reload", 10, 100)
    topic = "tls-reload"
    _create(tls_node, topic)
    _produce(tls_node.mtls, tls_node.conf("alice"), topic, values)
    assert _consume(tls_node.mtls, tls_node.conf("alice"), topic, len(values)) == values


def test_mtls_answers_a_trusted_certificate(tls_node: TlsNode) -> None:
    """The contrast to the refusals above: the same raw request with alice's certificate
    gets its ApiVersions answer (correlation id 7)."""
    ctx = ssl.create_default_context(cafile=tls_node.pki.ca)
    ctx.load_cert_chain(tls_node.pki.path("alice.pem"), tls_node.pki.path("alice.key"))
    answer = _raw_tls(tls_node.mtls, ctx)
    assert answer[4:8] == b"\x00\x00\x00\x07"


def test_malformed_tls_input_leaves_the_node_up(tls_node: TlsNode) -> None:
    """Seeded garbage at the TLS listeners: random bytes instead of a ClientHello, a
    ClientHello cut short, a TLS record header announcing more than it sends, and garbage
    Kafka frames after a good handshake. The node stays up with bounded memory and serves
    a real client afterwards."""
    import random

    import psutil

    node = tls_node.cluster.nodes[1]
    proc = psutil.Process(node.pid)
    rss0 = proc.memory_info().rss
    rng = random.Random(21)
    ctx = ssl.create_default_context(cafile=tls_node.pki.ca)
    hello = bytearray()
    # A real ClientHello's first bytes, captured from Python's client through a memory BIO.
    obj = ctx.wrap_bio(ssl.MemoryBIO(), out := ssl.MemoryBIO(), server_hostname="127.0.0.1")
    with contextlib.suppress(ssl.SSLWantReadError):
        obj.do_handshake()
    hello += out.read()
    for i in range(40):
        address = tls_node.ssl if i % 2 else tls_node.mtls
        host, _, port = address.rpartition(":")
        kind = i % 4
        with socket.create_connection((host, int(port)), timeout=5) as raw:
            try:
                if kind == 0:
                    raw.sendall(rng.randbytes(rng.randrange(1, 2000)))
                elif kind == 1:
                    raw.sendall(bytes(hello[:rng.randrange(1, len(hello))]))
                    raw.shutdown(socket.SHUT_WR)
                elif kind == 2:
                    raw.sendall(b"\x16\x03\x01\xff\xff" + rng.randbytes(100))
                    raw.shutdown(socket.SHUT_WR)
                else:
                    ctx2 = ssl.create_default_context(cafile=tls_node.pki.ca)
                    ctx2.load_cert_chain(tls_node.pki.path("alice.pem"),
                                         tls_node.pki.path("alice.key"))
                    with ctx2.wrap_socket(raw, server_hostname=host) as s:
                        s.sendall(rng.randbytes(rng.randrange(1, 500)))
                        while s.recv(65536):
                            pass
                    continue
                raw.settimeout(12)
                while raw.recv(65536):
                    pass
            except OSError:
                pass
    assert node.running
    grown = proc.memory_info().rss - rss0
    assert grown < 64 << 20, f"RSS grew {grown >> 20} MiB"
    _create(tls_node, "tls-after-fuzz")
