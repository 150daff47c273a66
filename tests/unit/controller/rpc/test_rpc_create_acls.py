from kio.schema.errors import ErrorCode

from broker.controller.rpc import create_acls as rpc
from broker.security.authorizer import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from tests.unit.controller.rpc.rpc_support import ControllerNode, call, run

READ = AclBinding(ResourceType.TOPIC, "orders", PatternType.PREFIXED, "User:alice", "*",
                  AclOperation.READ, AclPermissionType.ALLOW)


def test_create_over_the_wire_and_refusals() -> None:
    async def go() -> None:
        node = ControllerNode()
        bad = AclBinding(ResourceType.TOPIC, "", PatternType.LITERAL, "User:a", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
        results = rpc.results_of(await call(rpc, node, rpc.request([READ, bad])))
        assert results[0].error is ErrorCode.none
        assert results[1].error is ErrorCode.invalid_request and results[1].message
        assert list(node.metadata.acls.values()) == [READ]
        node.quorum.is_leader = False
        resp = await call(rpc, node, rpc.request([READ]))
        assert rpc.error_code_of(resp) is ErrorCode.not_controller
    run(go())


def test_parse_inverts_request() -> None:
    assert rpc.parse(rpc.request([READ])) == [READ]
