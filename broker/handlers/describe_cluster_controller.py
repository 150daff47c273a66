"""DescribeCluster (API 60), versions 1-2, on the controller listener (KIP-919): what an
admin client bootstrapped with `bootstrap.controllers` (`kafka-metadata-quorum
--bootstrap-controller`, `kafka-features --bootstrap-controller`, ...) asks first.

As Kafka's ControllerApis: the answer lists the registered controllers (their
ControllerRegistration records in the image) that have an endpoint on the listener the
request came in on, and the controller id is the metadata quorum's leader when it is among
them, else -1. Only the CONTROLLERS endpoint type (2) is served here: BROKERS is
MISMATCHED_ENDPOINT_TYPE, an unknown type UNSUPPORTED_ENDPOINT_TYPE (INVALID_REQUEST at v0,
which has no endpoint type). ALTER on the cluster is checked before
(broker/handlers/_authz.py controller_listener_check), as Kafka does on a controller.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers._authz import Res, operations
from broker.handlers._context import ControllerListenerNode
from broker.handlers.metadata import UNSET_OPERATIONS
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

API_KEY = 60
ENDPOINT_TYPE_BROKERS = 1
ENDPOINT_TYPE_CONTROLLERS = 2


def _refused(request: Any, cluster_id: str, code: ErrorCode, message: str) -> Any:
    mod = response_module(request)
    return build(
        mod.DescribeClusterResponse, throttle_time=NO_THROTTLE, error_code=code,
        error_message=message, endpoint_type=ENDPOINT_TYPE_CONTROLLERS, cluster_id=cluster_id,
        controller_id=-1, brokers=(), cluster_authorized_operations=UNSET_OPERATIONS)


def error_response(ctx: Any, request: Any, code: ErrorCode) -> Any:
    return _refused(request, "", code, code.name.upper())


async def handle(node: ControllerListenerNode, ctx: Any, request: Any) -> Any:
    """`node`: the Node (its metadata image, cluster id and metadata quorum)."""
    cluster_id = str(node.cluster_id)
    endpoint_type = int(getattr(request, "endpoint_type", ENDPOINT_TYPE_BROKERS))
    v0 = ctx.api_version == 0
    if endpoint_type not in (ENDPOINT_TYPE_BROKERS, ENDPOINT_TYPE_CONTROLLERS):
        return _refused(request, cluster_id, ErrorCode.invalid_request if v0
                        else ErrorCode.unsupported_endpoint_type,
                        f"Unsupported endpoint type {endpoint_type}")
    if endpoint_type != ENDPOINT_TYPE_CONTROLLERS:
        return _refused(request, cluster_id, ErrorCode.invalid_request if v0
                        else ErrorCode.mismatched_endpoint_type,
                        "The request was sent to an endpoint of type CONTROLLER, but we "
                        "wanted an endpoint of type BROKER")
    mod = response_module(request)
    image = node.metadata
    controllers = []
    for cid in sorted(image.controllers):
        reg = image.controllers[cid]
        ep = next((e for e in reg.endpoints if e.name == ctx.listener_name), None)
        if ep is not None:
            controllers.append(build(mod.DescribeClusterBroker, broker_id=cid, host=ep.host,
                                     port=ep.port, rack=None, is_fenced=False))
    leader = int(node.quorum.driver.leader_and_epoch[0]) if node.quorum is not None else -1
    listed = {int(c.broker_id) for c in controllers}
    ops = operations(node, ctx, Res.CLUSTER) if request.include_cluster_authorized_operations \
        else UNSET_OPERATIONS
    return build(
        mod.DescribeClusterResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
        error_message=None, endpoint_type=ENDPOINT_TYPE_CONTROLLERS, cluster_id=cluster_id,
        controller_id=leader if leader in listed else -1, brokers=tuple(controllers),
        cluster_authorized_operations=ops)
