"""DescribeCluster (API 60) on the controller listener (KIP-919): what an admin client
bootstrapped with bootstrap.controllers asks first. The registered controllers with an
endpoint on the request's listener, the quorum leader as controller id when it is among
them; the BROKERS endpoint type is MISMATCHED_ENDPOINT_TYPE, an unknown one
UNSUPPORTED_ENDPOINT_TYPE. With Kafka's own tools: tests/compat/kafka/test_tools_quorum.py."""

from __future__ import annotations

import asyncio
import importlib
import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.handlers import describe_cluster_controller as dcc
from broker.handlers._authz import controller_listener_check
from broker.handlers.metadata import UNSET_OPERATIONS
from broker.metadata.image import ControllerRegistration, Endpoint
from broker.node.quorum import controller_api_table
from broker.protocol.kio_build import build
from tests.unit.handlers.conftest import make_ctx, roundtrip


def request(v: int, endpoint_type: int = 2) -> Any:
    m = importlib.import_module(f"kio.schema.describe_cluster.v{v}.request")
    return build(m.DescribeClusterRequest, include_cluster_authorized_operations=False,
                 endpoint_type=endpoint_type, include_fenced_brokers=False)


def node(leader: int) -> Any:
    def reg(cid: int, *eps: Endpoint) -> ControllerRegistration:
        return ControllerRegistration(cid, uuid.uuid4(), eps)

    controllers = {
        1: reg(1, Endpoint("CONTROLLER", "127.0.0.1", 9001)),
        2: reg(2, Endpoint("CONTROLLER", "127.0.0.1", 9002), Endpoint("OTHER", "h", 1)),
        3: reg(3, Endpoint("OTHER", "h", 3)),  # nothing on the request's listener
    }
    driver = SimpleNamespace(leader_and_epoch=(leader, 4))
    return SimpleNamespace(cluster_id="cid", metadata=SimpleNamespace(controllers=controllers),
                           quorum=SimpleNamespace(driver=driver), config=None)


def call(n: Any, v: int, req: Any) -> Any:
    resp = asyncio.run(dcc.handle(n, make_ctx(60, v, "CONTROLLER"), req))
    assert int(resp.__version__) == v and roundtrip(resp) == resp
    return resp


def test_advertised_on_the_controller_listener_behind_alter() -> None:
    r = controller_api_table().get(60)
    assert r is not None and (r.min_version, r.max_version) == (0, 2)
    assert controller_listener_check(60) is not None
    assert controller_listener_check(60).name == "ALTER"  # type: ignore[union-attr]


@pytest.mark.parametrize("v", [1, 2])
def test_controllers_on_the_listener_and_the_leader(v: int) -> None:
    resp = call(node(leader=2), v, request(v))
    assert resp.error_code is ErrorCode.none and resp.error_message is None
    assert resp.endpoint_type == 2 and resp.cluster_id == "cid"
    assert [(b.broker_id, b.host, b.port, b.rack) for b in resp.brokers] == [
        (1, "127.0.0.1", 9001, None), (2, "127.0.0.1", 9002, None)]
    assert resp.controller_id == 2
    assert resp.cluster_authorized_operations == UNSET_OPERATIONS


def test_a_leader_not_listed_is_minus_one() -> None:
    assert call(node(leader=3), 1, request(1)).controller_id == -1
    assert call(node(leader=-1), 1, request(1)).controller_id == -1


@pytest.mark.parametrize("v", [0, 1, 2])
def test_the_brokers_endpoint_type_is_refused(v: int) -> None:
    resp = call(node(leader=1), v, request(v, endpoint_type=1))
    want = ErrorCode.invalid_request if v == 0 else ErrorCode.mismatched_endpoint_type
    assert resp.error_code is want and resp.brokers == ()


def test_an_unknown_endpoint_type_is_refused() -> None:
    resp = call(node(leader=1), 1, request(1, endpoint_type=7))
    assert resp.error_code is ErrorCode.unsupported_endpoint_type
    assert resp.error_message == "Unsupported endpoint type 7"
