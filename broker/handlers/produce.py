"""Produce (API 0): append record batches to partition leaders.

Versions 3-10 are served; 0-2 are advertised and answered UNSUPPORTED_VERSION by the
server (librdkafka disables compression unless it sees them). v10+ answers
NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH with the current leader and its endpoint
(KIP-951), so the producer switches without a metadata round trip.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

import structlog
from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.handlers._build import build, response_module
from broker.handlers._leader_hints import (
    LEADER_HINT_ERRORS,
    current_leader,
    leader_endpoints,
    not_hosted_error,
)
from broker.log import AppendResult

if TYPE_CHECKING:
    from broker.node import Node
    from broker.server import RequestContext

API_KEY = 0
log = structlog.get_logger(__name__)
_NO_THROTTLE = datetime.timedelta(0)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _append_time(ms: int) -> datetime.datetime | None:
    return None if ms < 0 else _EPOCH + datetime.timedelta(milliseconds=ms)


async def handle(node: Node, ctx: RequestContext, request: Any) -> Any:
    acks = request.acks
    entries: dict[tuple[str, int], bytes | memoryview] = {}
    errors: dict[tuple[str, int], KafkaError] = {}
    for topic in request.topic_data:
        for part in topic.partition_data:
            key = (topic.name, part.index)
            if acks not in (0, 1, -1):
                errors[key] = KafkaError(ErrorCode.invalid_required_acks, f"acks={acks}")
            elif request.transactional_id is not None:
                errors[key] = KafkaError(
                    ErrorCode.transactional_id_authorization_failed,
                    "transactions are not supported yet",
                )
            elif part.records is None:
                errors[key] = KafkaError(ErrorCode.corrupt_message, "null record set")
            elif node.metadata.topic(topic.name) is None:
                errors[key] = KafkaError(ErrorCode.unknown_topic_or_partition, topic.name)
            else:
                entries[key] = part.records
    results: dict[tuple[str, int], AppendResult | KafkaError] = dict(errors)
    if entries:
        results.update(
            await node.replicas.append(
                entries, required_acks=acks, timeout_ms=int(request.timeout.total_seconds() * 1000)
            )
        )
    for key, result in results.items():
        if isinstance(result, KafkaError) and result.error_code not in (
            ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_or_partition,
        ):
            log.info("produce_rejected", topic=key[0], partition=key[1],
                     error=result.error_code.name, reason=result.message, client=ctx.client_id)
    if acks == 0:
        return None

    mod = response_module(request)
    hints = hasattr(mod, "LeaderIdAndEpoch")
    image = node.metadata
    leaders: list[int] = []
    topics = []
    for topic in request.topic_data:
        partitions = []
        for part in topic.partition_data:
            result = results[(topic.name, part.index)]
            if isinstance(result, KafkaError):
                if result.error_code is ErrorCode.unknown_topic_or_partition:
                    result = KafkaError(not_hosted_error(image, topic.name, part.index),
                                        result.message)
                extra: dict[str, Any] = {}
                if hints and result.error_code in LEADER_HINT_ERRORS:
                    leader, epoch = current_leader(image, topic.name, part.index)
                    if leader >= 0:
                        leaders.append(leader)
                        extra["current_leader"] = mod.LeaderIdAndEpoch(
                            leader_id=leader, leader_epoch=epoch)
                partitions.append(build(
                    mod.PartitionProduceResponse, index=part.index, error_code=result.error_code,
                    base_offset=-1, log_append_time=None, log_start_offset=-1, record_errors=(),
                    error_message=result.message or None, **extra,
                ))
            else:
                partitions.append(build(
                    mod.PartitionProduceResponse, index=part.index, error_code=ErrorCode.none,
                    base_offset=result.base_offset,
                    log_append_time=_append_time(result.log_append_time_ms),
                    log_start_offset=result.log_start_offset, record_errors=(),
                ))
        topics.append(build(
            mod.TopicProduceResponse, name=topic.name, partition_responses=tuple(partitions)
        ))
    endpoints = tuple(
        mod.NodeEndpoint(node_id=b, host=host, port=port, rack=rack)
        for b, host, port, rack in leader_endpoints(image, ctx.listener_name, leaders)
    ) if leaders else ()
    return build(mod.ProduceResponse, responses=tuple(topics), throttle_time=_NO_THROTTLE,
                 node_endpoints=endpoints)
