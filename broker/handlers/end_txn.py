"""EndTxn (API 26): commit or abort a producer's transaction. The answer comes once
PrepareCommit/PrepareAbort is in __transaction_state; the markers follow (WriteTxnMarkers to
every partition's leader), and until they are all acknowledged the producer's next
InitProducerId/AddPartitionsToTxn gets CONCURRENT_TRANSACTIONS, which clients retry."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.handlers import _txn
from broker.handlers._authz import Op, Res, allowed
from broker.handlers._build import build, response_module
from broker.protocol.durations import NO_THROTTLE

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 26
FENCED_VERSION = 2


async def handle(node: Any, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    if not allowed(node, ctx, Op.WRITE, Res.TRANSACTIONAL_ID, str(request.transactional_id)):
        return build(mod.EndTxnResponse, throttle_time=NO_THROTTLE,
                     error_code=ErrorCode.transactional_id_authorization_failed)
    try:
        error = await _txn.service(node).end_txn(
            str(request.transactional_id), int(request.producer_id),
            int(request.producer_epoch), bool(request.committed))
    except KafkaError as exc:
        error = exc.error_code
    return build(mod.EndTxnResponse, throttle_time=NO_THROTTLE,
                 error_code=_txn.fenced_for(ctx.api_version, FENCED_VERSION, error))
