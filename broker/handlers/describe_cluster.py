"""DescribeCluster (API 60), versions 0-2: cluster id, controller id and live brokers; v2
adds the fenced brokers too, each with is_fenced, when include_fenced_brokers asks
(KIP-1073).

A broker answers the BROKERS endpoint type (1) only: the brokers are the unfenced ones with
an endpoint on the request's listener and the controller id is a live broker's, as in
Metadata. Asking a broker for the CONTROLLERS endpoint type (v1) is
UNSUPPORTED_ENDPOINT_TYPE, as Kafka answers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.handlers._authz import Op, Res, allowed, operations
from broker.handlers.metadata import UNSET_OPERATIONS, controller_id_for
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 60
ENDPOINT_TYPE_BROKERS = 1


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    endpoint_type = int(getattr(request, "endpoint_type", ENDPOINT_TYPE_BROKERS))
    # Anyone may describe the cluster (Kafka's AuthHelper.computeDescribeClusterResponse); its
    # authorized operations are reported only with DESCRIBE on it, else none (0)
    ops = UNSET_OPERATIONS
    if request.include_cluster_authorized_operations:
        ops = operations(node, ctx, Res.CLUSTER) if allowed(node, ctx, Op.DESCRIBE, Res.CLUSTER) \
            else 0
    if endpoint_type != ENDPOINT_TYPE_BROKERS:
        return build(
            mod.DescribeClusterResponse, throttle_time=NO_THROTTLE,
            error_code=ErrorCode.unsupported_endpoint_type,
            error_message="The broker only handles the BROKER endpoint type",
            endpoint_type=endpoint_type, cluster_id=node.cluster_id, controller_id=-1,
            brokers=(), cluster_authorized_operations=UNSET_OPERATIONS)
    image = node.metadata
    endpoints = image.broker_endpoints(ctx.listener_name)
    listed = image.broker_endpoints(
        ctx.listener_name, include_fenced=bool(getattr(request, "include_fenced_brokers", False)))
    brokers = tuple(
        build(mod.DescribeClusterBroker, broker_id=bid, host=e.host, port=e.port,
              rack=image.brokers[bid].rack, is_fenced=image.brokers[bid].fenced)
        for bid, e in listed.items()
    )
    return build(
        mod.DescribeClusterResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
        error_message=None, endpoint_type=endpoint_type, cluster_id=node.cluster_id,
        controller_id=controller_id_for(node, list(endpoints)), brokers=brokers,
        cluster_authorized_operations=ops)
