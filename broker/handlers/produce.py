"""Produce (API 0): append record batches to partition leaders.

Versions 0-10 are served. v0-v2 (Kafka 3.9 served them; 4.0 dropped them, KIP-896) carry
legacy message sets (magic 0 on v0-v1, magic 1 on v2), which the log converts to v2 batches on
append (broker/protocol/legacy.py); they have no transactional_id, v0 no throttle time, v0-v1
no log_append_time in the answer. v10+ answers
NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH with the current leader and its endpoint
(KIP-951), so the producer switches without a metadata round trip. The answer is written
by the narrow encoder in broker/protocol/produce_encoder.py.

Transactional batches (v3+) are taken when the request names a transactional_id, as Kafka
requires (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED); the log then tracks the producer's
open transaction until the coordinator's marker (WriteTxnMarkers) ends it. Control batches
from clients are refused (INVALID_RECORD). KIP-890's verification of the partition with
the transaction coordinator is not done. Authorizing WRITE on the transactional id is the
ACL layer's.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

import structlog
from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.handlers._leader_hints import (
    LEADER_HINT_ERRORS,
    current_leader,
    leader_endpoints,
    not_hosted_error,
)
from broker.log import AppendResult
from broker.protocol.frames import ResponseChunks
from broker.protocol.produce_encoder import (
    ProducePartition,
    ProduceTopic,
    encode_produce_response,
)
from broker.protocol.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MIN_BATCH_LENGTH,
    TRANSACTIONAL_MASK,
)
from broker.protocol.wire import NodeEndpoint

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 0
log = structlog.get_logger(__name__)
_ATTRIBUTES_OFFSET = 21
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def has_transactional_batch(records: bytes | memoryview) -> bool:
    """Whether any v2 batch of `records` has the transactional attribute, read at fixed
    header positions (no parsing; malformed input is left to the log's checks)."""
    mv = memoryview(records)
    pos, end = 0, len(mv)
    while end - pos >= HEADER_SIZE:
        if mv[pos + MAGIC_OFFSET] != 2:
            return False
        if _I16.unpack_from(mv, pos + _ATTRIBUTES_OFFSET)[0] & TRANSACTIONAL_MASK:
            return True
        (length,) = _I32.unpack_from(mv, pos + 8)
        if length < MIN_BATCH_LENGTH:
            return False
        pos += length + LOG_OVERHEAD
    return False


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> ResponseChunks | None:
    acks = request.acks
    transactional_id = getattr(request, "transactional_id", None)
    entries: dict[tuple[str, int], bytes | memoryview] = {}
    errors: dict[tuple[str, int], KafkaError] = {}
    for topic in request.topic_data:
        for part in topic.partition_data:
            key = (topic.name, part.index)
            if acks not in (0, 1, -1):
                errors[key] = KafkaError(ErrorCode.invalid_required_acks, f"acks={acks}")
            elif part.records is None:
                errors[key] = KafkaError(ErrorCode.corrupt_message, "null record set")
            elif transactional_id is None and has_transactional_batch(part.records):
                errors[key] = KafkaError(
                    ErrorCode.transactional_id_authorization_failed,
                    "transactional batches need the request's transactional_id",
                )
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

    version = ctx.api_version
    hints = version >= 10
    image = node.metadata
    leaders: list[int] = []
    topics = []
    for topic in request.topic_data:
        partitions = []
        for part in topic.partition_data:
            result = results[(topic.name, part.index)]
            if isinstance(result, KafkaError):
                code = result.error_code
                if code is ErrorCode.unknown_topic_or_partition:
                    code = not_hosted_error(image, topic.name, part.index)
                leader_and_epoch = (-1, -1)
                if hints and code in LEADER_HINT_ERRORS:
                    leader_and_epoch = current_leader(image, topic.name, part.index)
                    if leader_and_epoch[0] >= 0:
                        leaders.append(leader_and_epoch[0])
                    else:
                        leader_and_epoch = (-1, -1)
                partitions.append(ProducePartition(
                    part.index, code.value, error_message=result.message or None,
                    current_leader=leader_and_epoch))
            else:
                partitions.append(ProducePartition(
                    part.index, 0, result.base_offset, result.log_append_time_ms,
                    result.log_start_offset))
        topics.append(ProduceTopic(topic.name, partitions))
    endpoints = [
        NodeEndpoint(b, host, port, rack)
        for b, host, port, rack in leader_endpoints(image, ctx.listener_name, leaders)
    ] if leaders else []
    return ResponseChunks([encode_produce_response(version, topics, 0, endpoints)])
