"""AddOffsetsToTxn (API 25): the __consumer_offsets partition of a group joins a producer's
transaction, so TxnOffsetCommit may follow and the EndTxn markers reach that partition."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.handlers import _txn
from broker.handlers._authz import Op, Res, allowed
from broker.handlers._context import TxnBroker
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 25
FENCED_VERSION = 2


async def handle(node: TxnBroker, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    # WRITE on the transactional id, then READ on the group, as Kafka checks them
    if not allowed(node, ctx, Op.WRITE, Res.TRANSACTIONAL_ID, str(request.transactional_id)):
        return build(mod.AddOffsetsToTxnResponse, throttle_time=NO_THROTTLE,
                     error_code=ErrorCode.transactional_id_authorization_failed)
    if not allowed(node, ctx, Op.READ, Res.GROUP, str(request.group_id)):
        return build(mod.AddOffsetsToTxnResponse, throttle_time=NO_THROTTLE,
                     error_code=ErrorCode.group_authorization_failed)
    try:
        error = await _txn.service(node).add_offsets(
            str(request.transactional_id), int(request.producer_id),
            int(request.producer_epoch), str(request.group_id))
    except KafkaError as exc:
        error = exc.error_code
    return build(mod.AddOffsetsToTxnResponse, throttle_time=NO_THROTTLE,
                 error_code=_txn.fenced_for(ctx.api_version, FENCED_VERSION, error))
