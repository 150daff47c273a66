# mypy: disable-error-code="no-any-return"
"""AlterPartition (API 56, KIP-497/KIP-903) on the controller listener: a partition
leader's ISR change, checked by the controller against the partition epoch."""

from __future__ import annotations

from typing import Any

from kio.schema.alter_partition.v3 import request as kreq
from kio.schema.alter_partition.v3 import response as kresp
from kio.schema.errors import ErrorCode

from broker.controller.requests import (
    AlterPartitionItem,
    AlterPartitionItemResult,
    AlterPartitionReply,
    AlterPartitionRequest,
)
from broker.controller.rpc._common import ControllerNode, active_service
from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE

# kio's fields are NewTypes (i32, BrokerId, ...); plain ints are what they hold.
Q: Any = kreq
P: Any = kresp

API_KEY = 56
VERSION = 3


def request(req: AlterPartitionRequest) -> kreq.AlterPartitionRequest:
    return Q.AlterPartitionRequest(
        broker_id=req.broker_id, broker_epoch=req.broker_epoch,
        topics=tuple(
            Q.TopicData(topic_id=tid, partitions=tuple(
                Q.PartitionData(
                    partition_index=i.partition_index, leader_epoch=i.leader_epoch,
                    new_isr_with_epochs=tuple(Q.BrokerState(broker_id=b, broker_epoch=e)
                                              for b, e in i.new_isr),
                    leader_recovery_state=i.leader_recovery_state,
                    partition_epoch=i.partition_epoch)
                for i in items))
            for tid, items in req.topics))


def parse(r: kreq.AlterPartitionRequest) -> AlterPartitionRequest:
    topics = []
    for t in r.topics:
        if t.topic_id is None:
            raise KafkaError(ErrorCode.invalid_request, "AlterPartition needs topic ids")
        topics.append((t.topic_id, [
            AlterPartitionItem(
                partition_index=int(p.partition_index), leader_epoch=int(p.leader_epoch),
                partition_epoch=int(p.partition_epoch),
                new_isr=[(int(b.broker_id), int(b.broker_epoch)) for b in p.new_isr_with_epochs],
                leader_recovery_state=int(p.leader_recovery_state))
            for p in t.partitions]))
    return AlterPartitionRequest(int(r.broker_id), int(r.broker_epoch), topics)


def response(reply: AlterPartitionReply) -> kresp.AlterPartitionResponse:
    return P.AlterPartitionResponse(
        throttle_time=NO_THROTTLE, error_code=reply.error,
        topics=tuple(
            P.TopicData(topic_id=tid, partitions=tuple(
                P.PartitionData(
                    partition_index=x.partition_index, error_code=x.error,
                    leader_id=x.leader_id, leader_epoch=x.leader_epoch, isr=tuple(x.isr),
                    leader_recovery_state=x.leader_recovery_state,
                    partition_epoch=x.partition_epoch)
                for x in results))
            for tid, results in reply.topics))


def reply_of(r: kresp.AlterPartitionResponse) -> AlterPartitionReply:
    topics = []
    for t in r.topics:
        if t.topic_id is None:
            continue
        topics.append((t.topic_id, [
            AlterPartitionItemResult(
                partition_index=int(p.partition_index), error=p.error_code,
                leader_id=int(p.leader_id), leader_epoch=int(p.leader_epoch),
                isr=tuple(int(b) for b in p.isr), partition_epoch=int(p.partition_epoch),
                leader_recovery_state=int(p.leader_recovery_state))
            for p in t.partitions]))
    return AlterPartitionReply(r.error_code, topics)


def error_code_of(r: kresp.AlterPartitionResponse) -> ErrorCode:
    return r.error_code


def error_response(ctx: Any, request: Any, code: ErrorCode) -> kresp.AlterPartitionResponse:
    return response(AlterPartitionReply(error=code))


async def handle(node: ControllerNode, ctx: Any, r: kreq.AlterPartitionRequest
                 ) -> kresp.AlterPartitionResponse:
    try:
        return response(await active_service(node).alter_partition(parse(r)))
    except KafkaError as exc:
        return response(AlterPartitionReply(error=exc.error_code))
