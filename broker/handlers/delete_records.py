"""DeleteRecords (API 21), versions 0-2: advance a partition's log start offset."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.handlers._authz import Op, Res, allowed
from broker.handlers._leader_hints import not_hosted_error
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 21


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    topics = []
    for topic in request.topics:
        partitions = []
        may = allowed(node, ctx, Op.DELETE, Res.TOPIC, topic.name)
        for p in topic.partitions:
            try:
                if not may:
                    raise KafkaError(ErrorCode.topic_authorization_failed, topic.name)
                part = node.replicas.leader_partition(topic.name, p.partition_index)
                low_watermark = part.delete_records_on_leader(p.offset)
                partitions.append(build(
                    mod.DeleteRecordsPartitionResult, partition_index=p.partition_index,
                    low_watermark=low_watermark, error_code=ErrorCode.none,
                ))
            except KafkaError as exc:
                code = exc.error_code
                if code is ErrorCode.unknown_topic_or_partition:
                    code = not_hosted_error(node.metadata, topic.name, p.partition_index)
                partitions.append(build(
                    mod.DeleteRecordsPartitionResult, partition_index=p.partition_index,
                    low_watermark=-1, error_code=code,
                ))
        topics.append(build(mod.DeleteRecordsTopicResult, name=topic.name,
                            partitions=tuple(partitions)))
    return build(mod.DeleteRecordsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
