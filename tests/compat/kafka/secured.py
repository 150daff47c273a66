"""A Kafka 4.4 node and a Skiff node configured alike for authorization: the
StandardAuthorizer (`authorizer.class.name=org.apache.kafka.metadata.authorizer.
StandardAuthorizer`), super users, and a SASL_PLAINTEXT listener with PLAIN users admin and
alice from its JAAS config (`listener.name.<l>.plain.sasl.jaas.config`). The super users are
admin and the node's own principal: Skiff's controller listener authenticates the node as
`node` (SASL, as in tests/compat/test_security_acls.py), Kafka's node talks to itself over
PLAINTEXT listeners as User:ANONYMOUS; clients only use the SASL listener.

Used by test_java_acls.py (the Java clients) and test_differential.py (the unauthorized
error path, request by request).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import broker.testing.cluster as cluster_module
from broker.testing.cluster import Cluster
from tests.support.kafka_ref import KafkaNode, java_program_classpath
from tests.support.node import free_port

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
USERS = 'user_admin="admin-secret" user_alice="alice-secret"'
CREDENTIALS = {"admin": "admin-secret", "alice": "alice-secret"}
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def _skiff(base: Path) -> Cluster:
    return Cluster(base, controllers=1, brokers=0, combined=True, client_config={
        "security.protocol": "sasl_plaintext", "sasl.mechanisms": "PLAIN",
        "sasl.username": "admin", "sasl.password": "admin-secret", "log_level": 0,
    }, overrides={
        "listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.plaintext.plain.sasl.jaas.config":
            f'{PLAIN} required username="admin" password="admin-secret" {USERS};',
        "listener.name.controller.plain.sasl.jaas.config":
            f'{PLAIN} required username="node" password="node-secret" user_node="node-secret";',
        "authorizer.class.name": STANDARD,
        "super.users": "User:admin;User:node",
    })


def _kafka(base: Path) -> KafkaNode:
    return KafkaNode(base, listeners={"SASL": ("SASL_PLAINTEXT", free_port())}, overrides={
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl.plain.sasl.jaas.config": f"{PLAIN} required {USERS};",
        "authorizer.class.name": STANDARD,
        "super.users": "User:admin;User:ANONYMOUS",
    })


@contextlib.contextmanager
def secured_pair(skiff_dir: Path, kafka_dir: Path,
                 compile_programs: bool = False) -> Iterator[dict[str, str]]:
    """The two nodes, started together; yields their SASL bootstrap addresses
    ({"kafka": ..., "skiff": ...}); both are stopped on exit."""
    from tests.compat.test_security_acls import _describe_quorum_as_node

    skiff = _skiff(skiff_dir)
    kafka = _kafka(kafka_dir)
    original = cluster_module._describe_quorum_leader
    cluster_module._describe_quorum_leader = _describe_quorum_as_node  # type: ignore[assignment]
    try:
        with ThreadPoolExecutor(3) as pool:
            compiled = pool.submit(java_program_classpath) if compile_programs else None
            skiff_ready = pool.submit(skiff.start, 180.0)
            kafka.start()
            kafka_ready = pool.submit(kafka.wait_ready, 240.0)  # one JVM at a load of ~29
            if compiled is not None:
                compiled.result()
            skiff_ready.result()
            kafka_ready.result()
        sasl_port = kafka.extra_listeners["SASL"][1]
        yield {"kafka": f"127.0.0.1:{sasl_port}", "skiff": skiff.bootstrap_servers}
    finally:
        cluster_module._describe_quorum_leader = original  # type: ignore[assignment]
        skiff.stop()
        kafka.close()
