"""ListTransactions (API 66): the transactions this broker coordinates, filtered by state
names (unknown names come back in unknown_state_filters), producer ids, and (v1+) how long
they have been ongoing, and (v2+, KIP-1152) a regular expression the whole transactional id
must match (null or empty: every id; one that does not compile: INVALID_REGULAR_EXPRESSION).
COORDINATOR_LOAD_IN_PROGRESS while a partition is still loading."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.handlers import _txn
from broker.handlers._authz import Op, Res, allowed
from broker.handlers._context import TxnBroker
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module
from broker.txn.coordinator import TxnState

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 66


async def handle(node: TxnBroker, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    states: list[TxnState] = []
    unknown: list[str] = []
    listed: list[Any]
    for name in request.state_filters:
        state = TxnState.from_kafka_name(str(name))
        if state is None:
            unknown.append(name)
        else:
            states.append(state)
    pattern: re.Pattern[str] | None = None
    if text := getattr(request, "transactional_id_pattern", None):
        try:
            pattern = re.compile(text)
        except re.error:
            return build(mod.ListTransactionsResponse, throttle_time=NO_THROTTLE,
                         error_code=ErrorCode.invalid_regular_expression,
                         unknown_state_filters=tuple(unknown), transaction_states=())
    try:
        svc = _txn.service(node)
    except KafkaError as exc:
        return build(mod.ListTransactionsResponse, throttle_time=NO_THROTTLE,
                     error_code=exc.error_code, unknown_state_filters=tuple(unknown),
                     transaction_states=())
    if unknown and not states:
        error, listed = ErrorCode.none, []  # only unknown states asked for: nothing matches
    else:
        error, listed = svc.list(states, [int(p) for p in request.producer_id_filters],
                                 int(getattr(request, "duration_filter", -1)))
    return build(
        mod.ListTransactionsResponse, throttle_time=NO_THROTTLE, error_code=error,
        unknown_state_filters=tuple(unknown),
        transaction_states=tuple(build(mod.TransactionState, transactional_id=d.transactional_id,
                                       producer_id=d.producer_id,
                                       transaction_state=d.state.kafka_name) for d in listed
                                 # only those the principal may DESCRIBE (Kafka filters so)
                                 if (pattern is None
                                     or pattern.fullmatch(d.transactional_id) is not None)
                                 and allowed(node, ctx, Op.DESCRIBE, Res.TRANSACTIONAL_ID,
                                             d.transactional_id)))
