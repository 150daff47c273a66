"""kafka-acls (Kafka 4.4's AclCommand) against Skiff and against Kafka 4.4, step by step.

Both brokers run the StandardAuthorizer (`authorizer.class.name`) on PLAINTEXT, where every
client, the broker's own inter-broker and controller connections included, is
User:ANONYMOUS; `super.users=User:ANONYMOUS` lets the tool (and the nodes) do anything, as
Kafka's docs ask of a broker's own principal. Each module starts its own Kafka node and Skiff
node with that setting; the outputs are compared as in test_tools_admin.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.compat.kafka.tool_differences import ACLS
from tests.support.kafka_ref import KafkaNode, started_kafka
from tests.support.kafka_tools import BrokerPair
from tests.support.node import SkiffNode, started_node

pytestmark = [pytest.mark.timeout(600)]

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTHZ = {"authorizer.class.name": STANDARD, "super.users": "User:ANONYMOUS"}
B = "--bootstrap-server"


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerPair]:
    kafka: KafkaNode = started_kafka(tmp_path_factory.mktemp("acl-kafka"), overrides=AUTHZ)
    try:
        env = {f"SKIFF_{k.upper().replace('.', '_')}": v for k, v in AUTHZ.items()}
        skiff: SkiffNode = started_node(tmp_path_factory.mktemp("acl-skiff"), config_env=env)
        try:
            yield BrokerPair(kafka=kafka.bootstrap, skiff=skiff.bootstrap, differences=ACLS)
        finally:
            skiff.close()
    finally:
        kafka.close()


def sorted_acl_lines(text: str) -> str:
    """The ACLs of one resource in a stable order (both brokers list a set)."""
    out: list[str] = []
    run: list[str] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("(principal="):
            run.append(line)
            continue
        out.extend(sorted(run))
        run = []
        out.append(line)
    return "\n".join(out).strip()


def sorted_blocks(text: str) -> str:
    """A whole listing: its resource blocks ('Current ACLs for resource ...' and the ACL
    lines under it) sorted too, whatever precedes the first one kept in place."""
    head: list[str] = []
    blocks: list[list[str]] = []
    for line in sorted_acl_lines(text).splitlines():
        if line.startswith("Current ACLs for resource") or \
                line.startswith("Adding ACLs for resource"):
            blocks.append([line])
        elif blocks:
            if line.strip():
                blocks[-1].append(line)
        else:
            head.append(line)
    return "\n".join([*head, *("\n".join(b) for b in sorted(blocks))]).strip()


def test_kafka_acls(pair: BrokerPair) -> None:
    t, g = "acl-orders", "acl-app"
    acls = ("kafka-acls", B, "{bootstrap}")
    pair.same("acls.list.empty", *acls, "--list")
    pair.same("acls.add.topic", *acls, "--add", "--allow-principal", "User:alice",
              "--operation", "Read", "--operation", "Describe", "--topic", t,
              normalise=sorted_acl_lines)
    pair.same("acls.add.group", *acls, "--add", "--allow-principal", "User:alice",
              "--operation", "Read", "--group", g, normalise=sorted_acl_lines)
    pair.same("acls.add.prefixed", *acls, "--add", "--allow-principal", "User:bob",
              "--operation", "Write", "--topic", "acl-", "--resource-pattern-type", "prefixed",
              normalise=sorted_acl_lines)
    pair.same("acls.add.deny_host", *acls, "--add", "--deny-principal", "User:mallory",
              "--deny-host", "10.0.0.1", "--operation", "All", "--topic", t,
              normalise=sorted_acl_lines)
    pair.same("acls.add.producer", *acls, "--add", "--allow-principal", "User:carol",
              "--producer", "--topic", t, "--transactional-id", "acl-tx", "--idempotent",
              normalise=sorted_blocks)
    pair.same("acls.add.consumer", *acls, "--add", "--allow-principal", "User:dave",
              "--consumer", "--topic", t, "--group", g, normalise=sorted_blocks)
    pair.same("acls.add.cluster", *acls, "--add", "--allow-principal", "User:erin",
              "--operation", "Alter", "--cluster", normalise=sorted_acl_lines)
    pair.same("acls.list.topic", *acls, "--list", "--topic", t, normalise=sorted_blocks)
    pair.same("acls.list.principal", *acls, "--list", "--principal", "User:alice",
              normalise=sorted_blocks)
    pair.same("acls.list.match", *acls, "--list", "--topic", t,
              "--resource-pattern-type", "match", normalise=sorted_blocks)
    pair.same("acls.list.all", *acls, "--list", normalise=sorted_blocks)
    pair.same("acls.remove.one", *acls, "--remove", "--allow-principal", "User:alice",
              "--operation", "Read", "--topic", t, "--force", normalise=sorted_blocks)
    pair.same("acls.list.after_remove", *acls, "--list", "--topic", t, normalise=sorted_blocks)
    pair.same("acls.remove.resource", *acls, "--remove", "--topic", t, "--force",
              normalise=sorted_blocks)
    pair.same("acls.remove.prefixed", *acls, "--remove", "--topic", "acl-",
              "--resource-pattern-type", "prefixed", "--force", normalise=sorted_blocks)
    pair.same("acls.list.after_removes", *acls, "--list", normalise=sorted_blocks)
    # the tool's own checks, before it asks the broker
    pair.same("acls.add.no_principal", *acls, "--add", "--operation", "Read", "--topic", t)
    pair.same("acls.add.bad_principal", *acls, "--add", "--allow-principal", "alice",
              "--operation", "Read", "--topic", t)


def test_kafka_acls_cidr_hosts(pair: BrokerPair) -> None:
    """CIDR host patterns (KIP-1276) side by side, both at metadata.version 4.4-IV2 (Kafka
    4.4's node is formatted there; Skiff's is upgraded to it with kafka-features): ACLs whose
    hosts are IPv4 and IPv6 blocks are added, listed and removed, and invalid blocks are
    refused, with the same output. The refusal below 4.4-IV1 is compared in
    test_tools_gates.py (a Kafka node and a Skiff node both formatted at 4.2-IV1)."""
    up = pair.run("kafka-features", B, "{bootstrap}", "upgrade", "--metadata", "4.4-IV2")[1]
    assert up.returncode == 0, up.text()
    t = "acl-cidr"
    acls = ("kafka-acls", B, "{bootstrap}")
    pair.same("acls.cidr.add", *acls, "--add", "--allow-principal", "User:alice",
              "--allow-host", "10.0.0.0/8", "--allow-host", "2001:db8::/32",
              "--operation", "Read", "--topic", t, normalise=sorted_acl_lines)
    pair.same("acls.cidr.add.deny", *acls, "--add", "--deny-principal", "User:alice",
              "--deny-host", "10.1.0.0/16", "--operation", "Read", "--topic", t,
              normalise=sorted_acl_lines)
    for step, host in (("prefix", "10.0.0.0/33"), ("address", "300.0.0.0/8"),
                       ("ipv6", "2001:db8::/129")):
        out = pair.same(f"acls.cidr.invalid.{step}", *acls, "--add", "--allow-principal",
                        "User:bob", "--allow-host", host, "--operation", "Read", "--topic", t)
        assert "Invalid CIDR notation" in out.stdout + out.stderr, out.text()
    listed = pair.same("acls.cidr.list", *acls, "--list", "--topic", t, normalise=sorted_blocks)
    assert "host=10.0.0.0/8" in listed.stdout and "host=2001:db8::/32" in listed.stdout, \
        listed.text()
    pair.same("acls.cidr.remove", *acls, "--remove", "--allow-principal", "User:alice",
              "--allow-host", "10.0.0.0/8", "--operation", "Read", "--topic", t, "--force",
              normalise=sorted_blocks)
    pair.same("acls.cidr.list.after_remove", *acls, "--list", "--topic", t,
              normalise=sorted_blocks)
