"""FindCoordinator (API 10): which broker coordinates a group (key type 0), a transactional
id (key type 1, the leader of its __transaction_state partition) or a share-partition's
state (key type 2, "groupId:topicId:partition", the leader of its __share_group_state
partition; brokers ask it, with CLUSTER_ACTION as Kafka checks); v0-v3 one key, v4+ a
batch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.group.shell import service_of
from broker.handlers._authz import Op, Res, allowed
from broker.handlers._context import CoordinatorsBroker
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module
from broker.share.coordinator_shell import share_coordinator_of
from broker.txn.shell import txn_service_of

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 10


TRANSACTION_KEY_TYPE = 1
SHARE_KEY_TYPE = 2


async def _find(node: CoordinatorsBroker, ctx: RequestContext, key: str, key_type: int,
                listener: str) -> tuple[ErrorCode, int, str, int, str | None]:
    # DESCRIBE on the group (key type 0) or the transactional id (1), as Kafka checks it
    if key_type == TRANSACTION_KEY_TYPE:
        if not allowed(node, ctx, Op.DESCRIBE, Res.TRANSACTIONAL_ID, key):
            return ErrorCode.transactional_id_authorization_failed, -1, "", -1, None
        try:
            txn = txn_service_of(node)
        except KafkaError as exc:
            return exc.error_code, -1, "", -1, exc.message
        return await txn.find_coordinator(key, listener)
    if key_type == SHARE_KEY_TYPE:
        if not allowed(node, ctx, Op.CLUSTER_ACTION, Res.CLUSTER):
            return ErrorCode.cluster_authorization_failed, -1, "", -1, None
        try:
            share = share_coordinator_of(node)
        except KafkaError as exc:
            return exc.error_code, -1, "", -1, exc.message
        return await share.find_coordinator(key, listener)
    if not allowed(node, ctx, Op.DESCRIBE, Res.GROUP, key):
        return ErrorCode.group_authorization_failed, -1, "", -1, None
    try:
        service = service_of(node)
    except KafkaError as exc:
        return exc.error_code, -1, "", -1, exc.message
    return await service.find_coordinator(key, key_type, listener)


async def handle(node: CoordinatorsBroker, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    key_type = int(getattr(request, "key_type", 0))
    if ctx.api_version < 4:
        error, node_id, host, port, message = await _find(
            node, ctx, request.key, key_type, ctx.listener_name)
        return build(mod.FindCoordinatorResponse, throttle_time=NO_THROTTLE, error_code=error,
                     error_message=message, node_id=node_id, host=host, port=port)
    coordinators = []
    for key in request.coordinator_keys:
        error, node_id, host, port, message = await _find(node, ctx, key, key_type,
                                                          ctx.listener_name)
        coordinators.append(build(mod.Coordinator, key=key, node_id=node_id, host=host,
                                  port=port, error_code=error, error_message=message))
    return build(mod.FindCoordinatorResponse, throttle_time=NO_THROTTLE,
                 coordinators=tuple(coordinators))
