"""AclService and `skiff acls`: create (all or nothing), describe with filters, delete; the
CLI's kafka-acls.sh options map to those calls."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from broker.cli.main import main
from broker.security.authorizer import AclOperation as O
from broker.security.authorizer import AclPermissionType as P
from broker.security.authorizer import PatternType as T
from broker.security.authorizer import ResourceType as R
from tests.unit.admin.harness import (
    NODE_ID,
    Admin,
    AdminTestNode,
    ServerThread,
    pb,
    serve,
    status_of,
)

A = pb.acls


def entry(rtype: int, name: str, principal: str, op: int, pattern: int = T.LITERAL,
          permission: int = P.ALLOW, host: str = "*") -> Any:
    return pb.meta.AccessControlEntry(resource_type=rtype, resource_name=name,
                                      pattern_type=pattern, principal=principal, host=host,
                                      operation=op, permission_type=permission)


AUTHORIZER = {"authorizer.class.name":
              "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[AdminTestNode]:
    n = AdminTestNode(tmp_path, AUTHORIZER)
    asyncio.run(n.register(NODE_ID))
    n.ready.set()
    yield n
    n.close()


def test_without_an_authorizer_acls_are_refused(node: AdminTestNode) -> None:
    async def body(a: Admin) -> Any:
        stub = pb.acls_grpc.AclServiceStub(a.channel)
        return await status_of(stub.DescribeAcls(A.DescribeAclsRequest(filter=A.AclFilter())))

    code, details = serve(node, body)
    assert code is grpc.StatusCode.FAILED_PRECONDITION and "authorizer.class.name" in details


def test_create_describe_delete(secured: AdminTestNode) -> None:
    node = secured

    async def body(a: Admin) -> Any:
        stub = pb.acls_grpc.AclServiceStub(a.channel)
        await stub.CreateAcls(A.CreateAclsRequest(acls=[
            entry(R.TOPIC, "orders", "User:alice", O.READ),
            entry(R.GROUP, "app", "User:alice", O.READ, T.PREFIXED)]))
        everything = await stub.DescribeAcls(A.DescribeAclsRequest(filter=A.AclFilter()))
        matching = await stub.DescribeAcls(A.DescribeAclsRequest(filter=A.AclFilter(
            resource_type=R.GROUP, resource_name="app-1", pattern_type=T.MATCH)))
        bad = await status_of(stub.CreateAcls(A.CreateAclsRequest(acls=[
            entry(R.TOPIC, "x", "User:bob", O.READ),
            entry(R.CLUSTER, "wrong", "User:bob", O.ALTER)])))
        deleted = await stub.DeleteAcls(A.DeleteAclsRequest(filters=[A.AclFilter(
            resource_type=R.TOPIC)]))
        return everything, matching, bad, deleted

    everything, matching, bad, deleted = serve(node, body)
    assert sorted(a.resource_name for a in everything.acls) == ["app", "orders"]
    assert all(len(a.id) == 16 for a in everything.acls)
    assert [a.resource_name for a in matching.acls] == ["app"]
    assert bad[0] is grpc.StatusCode.INVALID_ARGUMENT and "kafka-cluster" in bad[1]
    assert [a.resource_name for a in deleted.deleted] == ["orders"]
    assert sorted(b.resource_name for b in node.metadata.acls.values()) == ["app"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    s = ServerThread(Path(tmp_path_factory.mktemp("acl-cli")), overrides=AUTHORIZER)
    try:
        yield s
    finally:
        s.close()


def skiff(server: ServerThread, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    code = main(["acls", *args, "--bootstrap", server.address])
    captured = capsys.readouterr()
    assert code == 0, (code, captured.out, captured.err)
    return captured.out


def test_cli_add_list_remove(server: ServerThread, capsys: pytest.CaptureFixture[str]) -> None:
    out = skiff(server, capsys, "add", "--allow-principal", "User:alice", "--consumer",
                "--topic", "orders", "--group", "app", "--resource-pattern-type", "prefixed")
    assert "Added 3 ACL(s)." in out
    skiff(server, capsys, "add", "--deny-principal", "User:mallory", "--operation", "all",
          "--topic", "orders", "--deny-host", "10.0.0.9")
    acls = {(b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host,
             b.operation, b.permission) for b in server.node.metadata.acls.values()}
    assert acls == {
        (R.TOPIC, "orders", T.PREFIXED, "User:alice", "*", O.READ, P.ALLOW),
        (R.TOPIC, "orders", T.PREFIXED, "User:alice", "*", O.DESCRIBE, P.ALLOW),
        (R.GROUP, "app", T.PREFIXED, "User:alice", "*", O.READ, P.ALLOW),
        (R.TOPIC, "orders", T.LITERAL, "User:mallory", "10.0.0.9", O.ALL, P.DENY)}
    listed = json.loads(skiff(server, capsys, "list", "--topic", "orders-eu",
                              "--resource-pattern-type", "match", "-o", "json"))
    assert sorted(a["operation"] for a in listed) == [O.READ, O.DESCRIBE]
    table = skiff(server, capsys, "list")
    assert "User:mallory" in table and "DENY" in table
    mallory = json.loads(skiff(server, capsys, "list", "--principal", "User:mallory",
                               "-o", "json"))
    assert [(a["principal"], a["permission_type"]) for a in mallory] == [
        ("User:mallory", P.DENY)]
    out = skiff(server, capsys, "remove", "--allow-principal", "User:alice", "--operation",
                "describe", "--topic", "orders", "--resource-pattern-type", "prefixed")
    assert "Removed 1 ACL(s)." in out
    assert len(server.node.metadata.acls) == 3
    skiff(server, capsys, "remove", "--topic", "orders", "--resource-pattern-type", "any")
    assert {b.resource_type for b in server.node.metadata.acls.values()} == {R.GROUP}


def test_cli_refuses_incomplete_adds(server: ServerThread,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["acls", "add", "--topic", "t", "--operation", "read",
                 "--bootstrap", server.address]) == 2
    assert "principal" in capsys.readouterr().err
    assert main(["acls", "add", "--allow-principal", "User:a", "--operation", "read",
                 "--bootstrap", server.address]) == 2
