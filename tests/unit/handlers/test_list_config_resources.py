"""ListConfigResources v0-1 (KIP-1142): v0 lists client-metrics resources, v1 the asked
types (every supported one when none is asked); an unsupported type is UNSUPPORTED_VERSION;
DESCRIBE_CONFIGS on the cluster is needed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from broker.handlers import list_config_resources
from broker.metadata import records as rec
from broker.protocol.kio_build import build
from broker.security.authorizer import AclOperation as O
from broker.security.authorizer import ResourceType as R
from tests.unit.handlers.acl_support import AUTHORIZER, allow, dispatch, grant
from tests.unit.handlers.conftest import NODE_ID, TestNode, make_ctx, roundtrip
from tests.unit.handlers.datapath import create, schema_module


def request(v: int, types: tuple[int, ...] = ()) -> Any:
    m = schema_module("list_config_resources", v)
    return build(m.ListConfigResourcesRequest, resource_types=tuple(i8(t) for t in types))


def call(node: TestNode, v: int, req: Any) -> Any:
    resp = asyncio.run(list_config_resources.handle(node, make_ctx(74, v), req))
    assert int(resp.__version__) == v
    assert roundtrip(resp) == resp
    return resp


def listed(resp: Any) -> list[tuple[str, int]]:
    return [(r.resource_name, int(getattr(r, "resource_type", 16)))
            for r in resp.config_resources]


def setup(node: TestNode) -> None:
    asyncio.run(create(node, "orders"))
    asyncio.run(create(node, "clicks"))
    asyncio.run(node.register(2))
    asyncio.run(node.register(3, unfence=False))  # fenced: not among the broker nodes
    # a client-metrics subscription and a group config, as their config records
    asyncio.run(node.controller.append_records([
        rec.config_record(16, "sub-1", "metrics", "org.apache.kafka."),
        rec.config_record(32, "billing", "consumer.session.timeout.ms", "45000"),
    ]))


def test_v0_lists_client_metrics_resources(node: TestNode) -> None:
    setup(node)
    resp = call(node, 0, request(0))
    assert resp.error_code is ErrorCode.none
    assert [r.resource_name for r in resp.config_resources] == ["sub-1"]


def test_v1_every_supported_type_when_none_is_asked(node: TestNode) -> None:
    setup(node)
    resp = call(node, 1, request(1))
    assert resp.error_code is ErrorCode.none
    assert listed(resp) == [
        ("billing", 32), ("sub-1", 16), (str(NODE_ID), 8), ("2", 8), (str(NODE_ID), 4),
        ("2", 4), ("clicks", 2), ("orders", 2)]


@pytest.mark.parametrize(("types", "want"), [
    ((2,), [("clicks", 2), ("orders", 2)]),
    ((4,), [(str(NODE_ID), 4), ("2", 4)]),
    ((32, 16), [("billing", 32), ("sub-1", 16)]),
])
def test_v1_asked_types(node: TestNode, types: tuple[int, ...],
                        want: list[tuple[str, int]]) -> None:
    setup(node)
    assert listed(call(node, 1, request(1, types))) == want


@pytest.mark.parametrize("bad", [1, 64, 0])
def test_v1_unsupported_type_fails_the_request(node: TestNode, bad: int) -> None:
    setup(node)
    resp = call(node, 1, request(1, (2, bad)))
    assert resp.error_code is ErrorCode.unsupported_version
    assert resp.config_resources == ()


@pytest.mark.parametrize("v", [0, 1])
def test_needs_describe_configs_on_the_cluster(node_factory: Any, v: int) -> None:
    node: TestNode = node_factory(AUTHORIZER)
    asyncio.run(create(node, "orders"))
    refused = dispatch(node, 74, v, request(v), principal="User:alice")
    assert refused.error_code is ErrorCode.cluster_authorization_failed
    assert refused.config_resources == ()
    grant(node, allow("User:alice", O.DESCRIBE_CONFIGS, R.CLUSTER, "kafka-cluster"))
    ok = dispatch(node, 74, v, request(v), principal="User:alice")
    assert ok.error_code is ErrorCode.none
    if v == 1:
        assert ("orders", 2) in listed(ok)
