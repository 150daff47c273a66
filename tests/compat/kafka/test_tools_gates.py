"""The metadata.version gates side by side: a Kafka 4.4 node and a Skiff node, both formatted
at 4.2-IV1 (`kafka-storage format --release-version 4.2-IV1`, the newest level below both
gates), run the same kafka-acls, kafka-configs and kafka-features steps, whose outputs must
agree (tests/support/kafka_tools.py):

- `cordoned.log.dirs` (KIP-1066) refused below 4.3-IV0, taken from it;
- CIDR host patterns in ACLs (KIP-1276) refused below 4.4-IV1 (a malformed block included:
  the gate comes first), taken from it, a malformed block then refused as malformed;
- `kafka-features upgrade --metadata` to each gate's level in turn.

Both nodes run the StandardAuthorizer with `super.users=User:ANONYMOUS` on PLAINTEXT (as
test_tools_acls.py) and have two log dirs each (`<a>`, `<b>` in the outputs). The steps past
the gates are test_tools_acls.py's and test_log_dirs_kafka_python.py's.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from broker.testing.cluster import Cluster
from tests.compat.kafka.tool_differences import GATES
from tests.support.kafka_ref import KafkaNode
from tests.support.kafka_tools import BrokerPair

MODULE = "tests/compat/kafka/test_tools_gates.py"
pytestmark = [pytest.mark.timeout(600), pytest.mark.xdist_group(f"kafka-ref:{MODULE}")]

RELEASE = "4.2-IV1"  # below CORDONED (4.3-IV0) and CIDR (4.4-IV1)
CORDONED = "4.3-IV0"
CIDR = "4.4-IV1"
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTHZ = {"authorizer.class.name": STANDARD, "super.users": "User:ANONYMOUS"}
B = "--bootstrap-server"
READY_S = 120.0


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerPair]:
    kdir = tmp_path_factory.mktemp("gates-kafka")
    ka, kb = (kdir / "logs" / "a").resolve(), (kdir / "logs" / "b").resolve()
    kafka = KafkaNode(kdir / "node", overrides={**AUTHZ, "log.dirs": f"{ka},{kb}"},
                      release_version=RELEASE)
    sdir = tmp_path_factory.mktemp("gates-skiff")
    sa, sb = (sdir / "logs" / "a").resolve(), (sdir / "logs" / "b").resolve()
    skiff = Cluster(sdir / "cluster", controllers=1, combined=True, overrides=AUTHZ,
                    node_overrides={1: {"log.dirs": f"{sa},{sb}"}}, release_version=RELEASE)

    def start_kafka() -> None:
        kafka.start()
        kafka.wait_ready()

    try:
        with ThreadPoolExecutor(2) as pool:
            started = [pool.submit(start_kafka), pool.submit(skiff.start, READY_S)]
            for f in started:
                f.result()
        yield BrokerPair(kafka=kafka.bootstrap, skiff=skiff.bootstrap_servers,
                         kafka_names={"a": str(ka), "b": str(kb)},
                         skiff_names={"a": str(sa), "b": str(sb)}, differences=GATES)
    finally:
        skiff.stop()
        kafka.close()


def finalized_metadata_version(text: str) -> str:
    """kafka-features describe: metadata.version's finalized level alone (the supported
    ranges differ: Kafka 4.4 supports 3.3-IV3 up, Skiff 3.9-IV0 up)."""
    found = re.search(r"Feature: metadata\.version .*FinalizedVersionLevel: (\S+)", text)
    return f"metadata.version {found.group(1)}" if found else text


def sorted_acl_lines(text: str) -> str:
    """ACL lines of a resource in a stable order (both brokers list a set)."""
    lines = text.splitlines()
    acls = iter(sorted(line for line in lines if line.startswith("(principal=")))
    return "\n".join(next(acls) if line.startswith("(principal=") else line for line in lines)


def metadata_version(pair: BrokerPair, level: str) -> None:
    """Both brokers report `level` finalized (DescribeFeatures answers from a broker's
    metadata image, which follows the controller's)."""
    deadline = time.monotonic() + 60
    while True:
        kafka, skiff = pair.run("kafka-features", B, "{bootstrap}", "describe",
                                normalise=finalized_metadata_version)
        if kafka.stdout == skiff.stdout == f"metadata.version {level}":
            return
        assert time.monotonic() < deadline, (level, kafka.text(), skiff.text())
        time.sleep(0.5)


def upgrade(pair: BrokerPair, level: str) -> None:
    up = pair.same(f"gates.upgrade.{level}", "kafka-features", B, "{bootstrap}", "upgrade",
                   "--metadata", level)
    assert up.returncode == 0 and "metadata.version was upgraded" in up.stdout, up.text()
    metadata_version(pair, level)


def acl(pair: BrokerPair, step: str, host: str) -> str:
    out = pair.same(step, "kafka-acls", B, "{bootstrap}", "--add", "--allow-principal",
                    "User:alice", "--allow-host", host, "--operation", "Read", "--topic",
                    "gated", normalise=sorted_acl_lines)
    return out.stdout + out.stderr if out.returncode else ""


def cordon(pair: BrokerPair, step: str, value: str, *entity: str) -> str:
    out = pair.same(step, "kafka-configs", B, "{bootstrap}", "--entity-type", "brokers",
                    *(entity or ("--entity-name", "1")), "--alter", "--add-config",
                    f"cordoned.log.dirs={value}")
    return out.stdout + out.stderr if out.returncode else ""


def test_gates_as_kafka(pair: BrokerPair) -> None:
    metadata_version(pair, RELEASE)
    gated = ("The cordoned.log.dirs configuration value cannot be set because it requires "
             f"metadata.version >= {CORDONED}")
    assert gated in cordon(pair, "gates.cordon.below", "{a}")
    cordon(pair, "gates.cordon.below.unknown_dir", "/nowhere")
    cordon(pair, "gates.cordon.below.all", "*")
    cordon(pair, "gates.cordon.below.default", "{a}", "--entity-default")
    cidr_gated = f"CIDR-based ACL host patterns require metadata version {CIDR} or higher."
    for step, host in (("ipv4", "10.0.0.0/8"), ("ipv6", "2001:db8::/32"),
                       ("malformed", "10.0.0.0/33")):
        assert cidr_gated in acl(pair, f"gates.cidr.below.{step}", host)
    assert acl(pair, "gates.cidr.below.address", "127.0.0.1") == ""

    upgrade(pair, CORDONED)
    assert cordon(pair, "gates.cordon.at", "{a}") == ""
    described = pair.same("gates.cordon.at.describe", "kafka-configs", B, "{bootstrap}",
                          "--entity-type", "brokers", "--entity-name", "1", "--describe")
    assert "cordoned.log.dirs=<a> sensitive=false" in described.stdout, described.text()
    assert cidr_gated in acl(pair, "gates.cidr.between", "10.0.0.0/8")

    upgrade(pair, CIDR)
    assert acl(pair, "gates.cidr.at", "10.0.0.0/8") == ""
    assert "Invalid CIDR notation '10.0.0.0/33'" in acl(pair, "gates.cidr.at.malformed",
                                                       "10.0.0.0/33")
    listed = pair.same("gates.cidr.at.list", "kafka-acls", B, "{bootstrap}", "--list",
                       "--topic", "gated", normalise=sorted_acl_lines)
    assert "host=10.0.0.0/8" in listed.stdout and "host=127.0.0.1" in listed.stdout, \
        listed.text()
