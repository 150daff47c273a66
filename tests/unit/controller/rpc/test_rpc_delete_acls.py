from kio.schema.errors import ErrorCode

from broker.controller.rpc import create_acls, delete_acls
from broker.security.authorizer import (
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from tests.unit.controller.rpc.rpc_support import ControllerNode, call, run

WRITE = AclBinding(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*",
                   AclOperation.WRITE, AclPermissionType.ALLOW)


def test_delete_over_the_wire() -> None:
    async def go() -> None:
        node = ControllerNode()
        await call(create_acls, node, create_acls.request([WRITE]))
        assert len(node.metadata.acls) == 1
        results = delete_acls.results_of(await call(delete_acls, node, delete_acls.request([
            AclFilter(ResourceType.TOPIC, "orders", PatternType.MATCH),
            AclFilter(ResourceType.TOPIC, pattern_type=PatternType.UNKNOWN)])))
        assert results[0].error is ErrorCode.none and results[0].matching == (WRITE,)
        assert results[1].error is ErrorCode.invalid_request
        assert node.metadata.acls == {}
    run(go())


def test_parse_inverts_request() -> None:
    f = AclFilter(ResourceType.GROUP, None, PatternType.ANY, "User:x", None,
                  AclOperation.READ, AclPermissionType.ANY)
    assert delete_acls.parse(delete_acls.request([f])) == [f]
