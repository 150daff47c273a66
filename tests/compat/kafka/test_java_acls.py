"""ACL refusals with Kafka 4.4's Java clients: Skiff raises in the client what Kafka 4.4 raises.

One Skiff node (combined) and one Kafka 4.4 node, configured alike (tests/compat/kafka/
secured.py): the StandardAuthorizer, super user admin, and a SASL_PLAINTEXT listener with
PLAIN users admin and alice.

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
from typing import Any

import pytest

from tests.compat.kafka.admin_differences import ACL_DIFFERENCES
from tests.compat.kafka.secured import secured_pair
from tests.support.kafka_ref import run_program

pytestmark = [pytest.mark.timeout(600)]

PROGRAM = "skiff.compat.admin.AclParity"
Record = dict[str, Any]


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The two nodes, started together; yields their SASL bootstrap addresses."""
    with secured_pair(tmp_path_factory.mktemp("acl-skiff"), tmp_path_factory.mktemp("acl-kafka"),
                      compile_programs=True) as addresses:
        yield addresses


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
