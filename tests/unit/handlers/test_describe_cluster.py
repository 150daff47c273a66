"""DescribeCluster v0-1."""

from __future__ import annotations

import asyncio
import importlib
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.handlers import describe_cluster, metadata
from broker.protocol.kio_build import build
from tests.unit.handlers.conftest import CLUSTER_ID, NODE_ID, TestNode, make_ctx, roundtrip


def request(v: int, include_ops: bool = False, endpoint_type: int = 1,
            include_fenced: bool = False) -> Any:
    m = importlib.import_module(f"kio.schema.describe_cluster.v{v}.request")
    return build(m.DescribeClusterRequest, include_cluster_authorized_operations=include_ops,
                 endpoint_type=endpoint_type, include_fenced_brokers=include_fenced)


def call(node: TestNode, v: int, req: Any, listener: str = "PLAINTEXT") -> Any:
    resp = asyncio.run(describe_cluster.handle(node, make_ctx(60, v, listener), req))
    assert int(resp.__version__) == v
    assert roundtrip(resp) == resp
    return resp


@pytest.mark.parametrize("v", [0, 1, 2])
def test_brokers_controller_cluster(node: TestNode, v: int) -> None:
    asyncio.run(node.register(2, rack="east"))
    asyncio.run(node.register(3, unfence=False))
    resp = call(node, v, request(v))
    assert resp.error_code is ErrorCode.none
    assert resp.error_message is None
    assert resp.cluster_id == CLUSTER_ID
    assert resp.controller_id == NODE_ID
    assert [(b.broker_id, b.host, b.port, b.rack) for b in resp.brokers] == [
        (NODE_ID, "127.0.0.1", 19092 + 10 * NODE_ID, None), (2, "127.0.0.1", 19112, "east")]
    assert resp.cluster_authorized_operations == metadata.UNSET_OPERATIONS
    if v >= 1:
        assert resp.endpoint_type == 1
    asked = call(node, v, request(v, include_ops=True))
    assert asked.cluster_authorized_operations == metadata.CLUSTER_OPERATIONS
    # CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE
    assert sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12)) == metadata.CLUSTER_OPERATIONS


def test_v2_lists_fenced_brokers_when_asked(node: TestNode) -> None:
    asyncio.run(node.register(2))
    asyncio.run(node.register(3, unfence=False))
    resp = call(node, 2, request(2))
    assert [(b.broker_id, b.is_fenced) for b in resp.brokers] == [(NODE_ID, False), (2, False)]
    resp = call(node, 2, request(2, include_fenced=True))
    assert [(b.broker_id, b.is_fenced) for b in resp.brokers] == [
        (NODE_ID, False), (2, False), (3, True)]
    assert resp.controller_id == NODE_ID  # a live broker's, fenced ones aside


def test_controller_endpoint_type_is_refused_by_a_broker(node: TestNode) -> None:
    resp = call(node, 1, request(1, endpoint_type=2))
    assert resp.error_code is ErrorCode.unsupported_endpoint_type
    assert resp.brokers == ()


def test_listener_without_this_node(node: TestNode) -> None:
    asyncio.run(node.register(4, listeners=("INTERNAL",)))
    resp = call(node, 1, request(1), listener="INTERNAL")
    assert [b.broker_id for b in resp.brokers] == [4]
    assert resp.controller_id == 4
