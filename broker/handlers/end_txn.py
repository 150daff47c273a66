"""EndTxn (API 26): commit or abort a producer's transaction. The answer comes once
PrepareCommit/PrepareAbort is in __transaction_state; the markers follow (WriteTxnMarkers to
every partition's leader), and until they are all acknowledged the producer's next
InitProducerId/AddPartitionsToTxn gets CONCURRENT_TRANSACTIONS, which clients retry.

v5 is transactions V2 (KIP-890 part 2): the coordinator bumps the producer's epoch at the
end of the transaction (a new producer id at epoch 0 once the epoch is exhausted), the
markers carry the bumped epoch, and the answer returns the producer id and epoch the
producer goes on with. It needs the finalized `transaction.version` >= 2 (else
UNSUPPORTED_VERSION, see broker/txn/version.py). v4 may answer TRANSACTION_ABORTABLE."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.handlers import _txn
from broker.handlers._authz import Op, Res, allowed
from broker.handlers._context import TxnBroker
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module
from broker.txn.coordinator import EndResult
from broker.txn.version import transactions_v2

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 26
FENCED_VERSION = 2
TV2_VERSION = 5


async def handle(node: TxnBroker, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    tv2 = ctx.api_version >= TV2_VERSION

    def answer(result: EndResult) -> Any:
        fields: dict[str, Any] = {}
        if tv2:
            fields = {"producer_id": result.producer_id,
                      "producer_epoch": result.producer_epoch}
        return build(mod.EndTxnResponse, throttle_time=NO_THROTTLE,
                     error_code=_txn.fenced_for(ctx.api_version, FENCED_VERSION, result.error),
                     **fields)

    if not allowed(node, ctx, Op.WRITE, Res.TRANSACTIONAL_ID, str(request.transactional_id)):
        return answer(EndResult(ErrorCode.transactional_id_authorization_failed))
    if tv2 and not transactions_v2(node.metadata):
        return answer(EndResult(ErrorCode.unsupported_version))
    try:
        result = await _txn.service(node).end_txn(
            str(request.transactional_id), int(request.producer_id),
            int(request.producer_epoch), bool(request.committed), tv2=tv2)
    except KafkaError as exc:
        result = EndResult(exc.error_code)
    return answer(result)
