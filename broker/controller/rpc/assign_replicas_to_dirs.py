# mypy: disable-error-code="no-any-return"
"""AssignReplicasToDirs (API 73, v0, KIP-858) on the controller listener: a broker tells the
active controller in which of its log directories it keeps each replica. The answer carries
an error per partition (UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER)
or a top-level one (STALE_BROKER_EPOCH, BROKER_ID_NOT_REGISTERED, NOT_CONTROLLER)."""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.assign_replicas_to_dirs.v0 import request as kreq
from kio.schema.assign_replicas_to_dirs.v0 import response as kresp
from kio.schema.errors import ErrorCode

from broker.controller.requests import AssignReplicasToDirsReply, AssignReplicasToDirsRequest
from broker.controller.rpc._common import ControllerNode, active_service
from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE

Q: Any = kreq
P: Any = kresp

API_KEY = 73
VERSION = 0

_Key = tuple[uuid.UUID, uuid.UUID]  # (directory, topic id)


def _grouped(items: Any) -> dict[_Key, list[Any]]:
    out: dict[_Key, list[Any]] = {}
    for item in items:
        out.setdefault((item[0], item[1]), []).append(item)
    return out


def _nested(items: Any, mod: Any, partition: Any) -> tuple[Any, ...]:
    by_dir: dict[uuid.UUID, list[Any]] = {}
    for (d, tid), group in _grouped(items).items():
        by_dir.setdefault(d, []).append(mod.TopicData(
            topic_id=tid, partitions=tuple(partition(x) for x in group)))
    return tuple(mod.DirectoryData(id_=d, topics=tuple(ts)) for d, ts in by_dir.items())


def request(req: AssignReplicasToDirsRequest) -> kreq.AssignReplicasToDirsRequest:
    return Q.AssignReplicasToDirsRequest(
        broker_id=req.broker_id, broker_epoch=req.broker_epoch,
        directories=_nested(req.assignments, Q,
                            lambda x: Q.PartitionData(partition_index=x[2])))


def parse(r: kreq.AssignReplicasToDirsRequest) -> AssignReplicasToDirsRequest:
    zero = uuid.UUID(int=0)
    return AssignReplicasToDirsRequest(
        broker_id=int(r.broker_id), broker_epoch=int(r.broker_epoch),
        assignments=[(d.id_ or zero, t.topic_id or zero, int(p.partition_index))
                     for d in r.directories for t in d.topics for p in t.partitions])


def response(reply: AssignReplicasToDirsReply) -> kresp.AssignReplicasToDirsResponse:
    return P.AssignReplicasToDirsResponse(
        throttle_time=NO_THROTTLE, error_code=reply.error,
        directories=_nested(reply.results, P, lambda x: P.PartitionData(
            partition_index=x[2], error_code=x[3])))


def reply_of(r: kresp.AssignReplicasToDirsResponse) -> AssignReplicasToDirsReply:
    zero = uuid.UUID(int=0)
    return AssignReplicasToDirsReply(error=r.error_code, results=[
        (d.id_ or zero, t.topic_id or zero, int(p.partition_index), p.error_code)
        for d in r.directories for t in d.topics for p in t.partitions])


def error_code_of(r: kresp.AssignReplicasToDirsResponse) -> ErrorCode:
    return r.error_code


def error_response(ctx: Any, request: Any, code: ErrorCode
                   ) -> kresp.AssignReplicasToDirsResponse:
    return response(AssignReplicasToDirsReply(error=code))


async def handle(node: ControllerNode, ctx: Any, r: kreq.AssignReplicasToDirsRequest
                 ) -> kresp.AssignReplicasToDirsResponse:
    try:
        return response(await active_service(node).assign_replicas_to_dirs(parse(r)))
    except KafkaError as exc:
        return response(AssignReplicasToDirsReply(error=exc.error_code))
