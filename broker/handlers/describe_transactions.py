"""DescribeTransactions (API 65): the state of transactional ids this broker coordinates
(TRANSACTIONAL_ID_NOT_FOUND for ids it does not know, NOT_COORDINATOR for ids another
broker coordinates)."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.handlers import _txn
from broker.handlers._authz import Op, Res, allowed
from broker.handlers._context import TxnBroker
from broker.protocol.durations import NO_THROTTLE, duration
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 65


def _time(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)


async def handle(node: TxnBroker, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    try:
        svc = _txn.service(node)
    except KafkaError as exc:
        svc, unavailable = None, exc.error_code
    out = []
    for tid in request.transactional_ids:
        if not allowed(node, ctx, Op.DESCRIBE, Res.TRANSACTIONAL_ID, str(tid)):
            error, d = ErrorCode.transactional_id_authorization_failed, None
        else:
            error, d = (unavailable, None) if svc is None else svc.describe(str(tid))
        if d is None:
            out.append(build(mod.TransactionState, error_code=error, transactional_id=tid,
                             transaction_state="", transaction_timeout=duration(0),
                             transaction_start_time=_time(-1), producer_id=-1,
                             producer_epoch=-1, topics=()))
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(d.partitions):
            by_topic.setdefault(topic, []).append(p)
        out.append(build(
            mod.TransactionState, error_code=ErrorCode.none, transactional_id=tid,
            transaction_state=d.state.kafka_name, transaction_timeout=duration(d.timeout_ms),
            transaction_start_time=_time(d.start_ms), producer_id=d.producer_id,
            producer_epoch=d.producer_epoch,
            topics=tuple(build(mod.TopicData, topic=t, partitions=tuple(ps))
                         for t, ps in by_topic.items())))
    return build(mod.DescribeTransactionsResponse, throttle_time=NO_THROTTLE,
                 transaction_states=tuple(out))
