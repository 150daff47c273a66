"""ACL refusals with Kafka 4.4's Java clients: Skiff raises in the client what Kafka 4.4 raises.

One Skiff node (combined) and one Kafka 4.4 node, configured alike: the StandardAuthorizer
(`authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer`), super
users, and a SASL_PLAINTEXT listener with PLAIN users admin and alice from its JAAS config
(`listener.name.<l>.plain.sasl.jaas.config`). The super users are admin and the node's own
principal: Skiff's controller listener authenticates the node as `node` (SASL, as in
tests/compat/test_security_acls.py), Kafka's node talks to itself over PLAINTEXT listeners as
User:ANONYMOUS; clients only use the SASL listener.

skiff.compat.admin.AclParity (tests/java/src) creates two topics and ACLs as admin (alice may
READ one topic, nothing else), compares createAcls/describeAcls/deleteAcls, and then, as
alice, tries what she may not: produce, an idempotent producer, a transactional id, consume a
topic, consume in a group, commit, create/delete/alter/describe topics and configs, cluster
operations (ACLs, log dirs, leader election, SCRAM users, quotas), group and transaction
admin. Every attempt must end with the same status (the exception class) on both, and the
calls that work must give the same normalised result.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import broker.testing.cluster as cluster_module
from broker.testing.cluster import Cluster
from tests.compat.kafka.admin_differences import ACL_DIFFERENCES
from tests.support.kafka_ref import KafkaNode, java_program_classpath, run_program
from tests.support.node import free_port

pytestmark = [pytest.mark.timeout(600)]

PROGRAM = "skiff.compat.admin.AclParity"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
USERS = 'user_admin="admin-secret" user_alice="alice-secret"'
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
Record = dict[str, Any]


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


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The two nodes, started together; yields their SASL bootstrap addresses."""
    from tests.compat.test_security_acls import _describe_quorum_as_node

    skiff = _skiff(tmp_path_factory.mktemp("acl-skiff"))
    kafka = _kafka(tmp_path_factory.mktemp("acl-kafka"))
    original = cluster_module._describe_quorum_leader
    cluster_module._describe_quorum_leader = _describe_quorum_as_node  # type: ignore[assignment]
    try:
        with ThreadPoolExecutor(3) as pool:
            compiled = pool.submit(java_program_classpath)
            skiff_ready = pool.submit(skiff.start, 180.0)
            kafka.start()
            kafka_ready = pool.submit(kafka.wait_ready)
            compiled.result()
            skiff_ready.result()
            kafka_ready.result()
        sasl_port = kafka.extra_listeners["SASL"][1]
        yield {"skiff": skiff.bootstrap_servers, "kafka": f"127.0.0.1:{sasl_port}"}
    finally:
        cluster_module._describe_quorum_leader = original  # type: ignore[assignment]
        skiff.stop()
        kafka.close()


def _run(bootstrap: str, prefix: str) -> list[Record]:
    proc = run_program(PROGRAM, bootstrap, prefix, timeout=420)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and lines, (
        f"AclParity against {bootstrap} exited {proc.returncode}\n{proc.stdout[-3000:]}\n"
        f"{proc.stderr[-3000:]}")
    return lines


@pytest.fixture(scope="module")
def runs(secured: dict[str, str]) -> dict[str, dict[str, Record]]:
    prefix = f"jacl-{uuid.uuid4().hex[:8]}"
    with ThreadPoolExecutor(2) as pool:
        futures = {name: pool.submit(_run, b, prefix) for name, b in secured.items()}
        return {name: {r["method"]: r for r in f.result()} for name, f in futures.items()}


def test_admin_sets_up_the_same_acls(runs: dict[str, dict[str, Record]]) -> None:
    """As admin (a super user): topics, CreateAcls (one invalid principal), DescribeAcls,
    DeleteAcls answer alike."""
    kafka, skiff = runs["kafka"], runs["skiff"]
    admin = [m for m in kafka if m.startswith("admin:")]
    assert len(admin) == 7
    assert all(kafka[m]["status"] == "ok" for m in admin if m != "admin:createAcls(invalid)")
    for m in admin:
        assert (skiff[m]["status"], skiff[m]["result"]) == \
            (kafka[m]["status"], kafka[m]["result"]), (m, kafka[m], skiff[m])
    assert len(kafka["admin:describeAcls"]["result"]) == 3


def test_a_non_super_user_is_refused_with_kafkas_exceptions(
        runs: dict[str, dict[str, Record]]) -> None:
    kafka, skiff = runs["kafka"], runs["skiff"]
    assert list(skiff) == list(kafka)
    refused = [m for m in kafka if "AuthorizationException" in kafka[m]["status"]]
    assert len(refused) >= 20, "Kafka refused too little: the program or its setup is wrong"
    for m in ("produce", "produce(idempotent)", "initTransactions", "consume(topic)",
              "consume(group)", "createTopics", "describeConfigs(topic)",
              "incrementalAlterConfigs(topic)", "deleteTopics", "describeAcls"):
        assert "AuthorizationException" in kafka[m]["status"], (m, kafka[m])
    unexplained = {m: {"kafka": kafka[m], "skiff": skiff[m]} for m in kafka
                   if (kafka[m]["status"], kafka[m]["result"]) !=
                   (skiff[m]["status"], skiff[m]["result"]) and m not in ACL_DIFFERENCES}
    assert not unexplained, json.dumps(unexplained, indent=1)
    stale = [m for m in ACL_DIFFERENCES
             if (kafka[m]["status"], kafka[m]["result"]) == (skiff[m]["status"],
                                                             skiff[m]["result"])]
    assert not stale, f"listed in ACL_DIFFERENCES but answered as Kafka does: {stale}"
