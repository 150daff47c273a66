"""Kafka 4.4's Java client on the versions kio 0.6.5 lacks and Skiff serves from the classes
broker/protocol/kio_next_gen.py generates: ApiVersions v5 (KIP-1242), TxnOffsetCommit v6
(KIP-1319, topics by id) and DeleteGroups v3 (a per-group ErrorMessage).

One JVM (tests/java/src/skiff/compat/versions/NewVersions.java, "e2e") against the session
`skiff_node`: raw ApiVersions v5 exchanges built and parsed by Kafka's own request classes
(this node's ClusterId/NodeId, none, a wrong ClusterId, a wrong NodeId, a NodeId without a
ClusterId), the advertised maxima (the client negotiates min(its latest, the broker's max),
so v5/v6/v3 are what it uses), a transactional producer's sendOffsetsToTransaction read back
with Admin.listConsumerGroupOffsets, a TxnOffsetCommit v6 naming an unknown topic id, and
Admin.deleteConsumerGroups of an existing and a missing group. A second JVM ("ref") prints
Kafka's encoding of the samples tests/unit/protocol/test_kio_next.py decodes: its constants
must be what Kafka's classes write.
"""

from __future__ import annotations

import pytest

from tests.support.kafka_ref import run_program
from tests.support.node import SkiffNode
from tests.unit.protocol.test_kio_next import REFERENCE

pytestmark = [pytest.mark.timeout(300)]

PROGRAM = "skiff.compat.versions.NewVersions"
REBOOTSTRAP_REQUIRED = 129
INVALID_REQUEST = 42
UNKNOWN_TOPIC_ID = 100


def _lines(stdout: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in stdout.splitlines():
        key, _, value = line.partition(" ")
        out[key] = value
    return out


def test_reference_bytes_are_kafkas() -> None:
    proc = run_program(PROGRAM, "ref", timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = _lines(proc.stdout)
    assert got == {name: ref[3] for name, ref in REFERENCE.items()}


def test_java_client_on_the_new_versions(skiff_node: SkiffNode) -> None:
    proc = run_program(PROGRAM, "e2e", skiff_node.bootstrap, timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    got = _lines(proc.stdout)
    assert (got["max_18"], got["max_28"], got["max_42"]) == ("5", "6", "3")
    assert got["av5_ok_error"] == "0"
    assert got["av5_no_ids_error"] == "0"
    assert got["av5_wrong_cluster_error"] == f"{REBOOTSTRAP_REQUIRED} keys 0"
    assert got["av5_wrong_node_error"] == str(REBOOTSTRAP_REQUIRED)
    assert got["av5_node_without_cluster_error"] == str(INVALID_REQUEST)
    assert got["txn_committed"] == "17:meta"
    assert got["txn_v6_unknown_id_error"] == str(UNKNOWN_TOPIC_ID)
    assert got["delete_group"] == "ok"
    assert got["delete_missing"] == (
        "GroupIdNotFoundException: The group id does not exist.")
