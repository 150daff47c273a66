"""A 3+3 cluster with every listener on mutual TLS: the controller listener (Raft, the
controller channel) and the inter-broker one (replica fetchers) included. Nodes use their
key store's certificate as client certificate. A topic replicated three ways survives the
kill of its leader with nothing acknowledged lost."""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterator
from typing import Any

import pytest

from broker.testing.cluster import Cluster
from broker.testing.tls import Pki, have_openssl, make_pki
from tests.support.requires import tool_mark

pytestmark = [
    pytest.mark.timeout(300),
    tool_mark("openssl", "openssl not installed (tests/run.sh installs it)",
              available=have_openssl()),
]


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, dict[str, Any]]]:
    pki: Pki = make_pki(tmp_path_factory.mktemp("pki"))
    client = {"security.protocol": "ssl", "ssl.ca.location": pki.ca,
              "ssl.certificate.location": pki.path("alice.pem"),
              "ssl.key.location": pki.path("alice.key")}
    harness_tls = ssl.create_default_context(cafile=pki.ca)
    harness_tls.load_cert_chain(pki.path("alice.pem"), pki.path("alice.key"))
    c = Cluster(tmp_path_factory.mktemp("tls-cluster"), controllers=3, brokers=3,
                client_config=client, controller_ssl=harness_tls, overrides={
        "listener.security.protocol.map": "PLAINTEXT:SSL,CONTROLLER:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki.keystore("server"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pki.ca,
        "ssl.client.auth": "required",
    })
    with c:
        c.start()
        yield c, client


def test_replicates_over_tls_and_survives_a_leader_kill(
        secured: tuple[Cluster, dict[str, Any]]) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import NewTopic

    c, client = secured
    first = c.broker_ids[0]
    topic = "secured"
    fut = c.admin(first).create_topics([NewTopic(topic, 1, 3, config={
        "min.insync.replicas": "2"})])[topic]
    fut.result(30)
    bootstrap = c.bootstrap_servers
    acked: list[bytes] = []

    def produce(tag: str, n: int) -> None:
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                      "message.timeout.ms": 30000, "log_level": 0, **client})

        def done(err: Any, msg: Any) -> None:
            if err is None:
                acked.append(msg.value())

        for i in range(n):
            p.produce(topic, f"{tag}-{i:04d}".encode() * 20, on_delivery=done)
            p.poll(0)
        p.flush(60)

    produce("before", 300)
    assert len(acked) == 300

    def isr_full() -> bool:
        t = c.metadata(first).topics[topic].partitions[0]
        return len(t.isrs) == 3
    c.wait_for(isr_full, 30, "all three replicas in sync over TLS")

    leader = c.partition_leaders(topic, via=first)[0]
    c.kill(leader)
    survivor = next(b for b in c.broker_ids if b != leader)

    def moved() -> bool:
        return c.partition_leaders(topic, via=survivor).get(0, -1) not in (-1, leader)
    c.wait_for(moved, 30, "a new leader elected")
    produce("after", 200)
    assert len(acked) == 500

    cons = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify",
                     "enable.auto.commit": False, "fetch.queue.backoff.ms": 1, **client})
    cons.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < len(acked) and time.monotonic() < deadline:
            m = cons.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        cons.close()
    assert set(acked) <= set(got), f"lost {len(set(acked) - set(got))} acknowledged records"
