"""PartitionService: reassignments (start, cancel, list) and leader elections."""

from __future__ import annotations

from typing import Any

import grpc
from kio.schema.errors import ErrorCode

from broker.admin.controller_ops import ControllerOps
from broker.admin.convert import reassignment_status
from broker.admin.errors import AdminError, S, rpc_errors
from broker.admin.forward import Forwarder, forwards_writes
from broker.admin.pb import partitions, partitions_grpc
from broker.controller.controller import Controller
from broker.controller.requests import ElectionType
from broker.errors import KafkaError
from broker.metadata.image import PartitionRegistration


def require_partition(node: Any, topic: str, index: int) -> PartitionRegistration:
    t = node.metadata.topic(topic)
    if t is None:
        raise AdminError(S.NOT_FOUND, f"topic '{topic}' does not exist")
    p = t.partitions.get(index)
    if p is None:
        raise AdminError(S.NOT_FOUND, f"partition {topic}-{index} does not exist (the topic "
                                      f"has partitions 0..{t.num_partitions - 1})")
    return p  # type: ignore[no-any-return]


def _targets(node: Any, items: Any) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for tp in items:
        require_partition(node, tp.topic, tp.partition)
        key = (tp.topic, tp.partition)
        if key in out:
            raise AdminError(S.INVALID_ARGUMENT, f"partition {tp.topic}-{tp.partition} is "
                                                 "named twice")
        out.append(key)
    return out


_SERVICE = partitions.DESCRIPTOR.services_by_name["PartitionService"]
_OUTCOME = {
    ErrorCode.none: partitions.ELECTION_OUTCOME_ELECTED,
    ErrorCode.election_not_needed: partitions.ELECTION_OUTCOME_NOT_NEEDED,
}


class PartitionService(partitions_grpc.PartitionServiceServicer):  # type: ignore[misc]
    def __init__(self, node: Any, forwarder: Forwarder | None = None) -> None:
        self.node = node
        self.ops = ControllerOps(node.controller)
        self.forwarder = forwarder

    @rpc_errors
    @forwards_writes(_SERVICE)
    async def AlterPartitionReassignments(self, request: Any,
                                          context: grpc.aio.ServicerContext) -> Any:
        if not request.reassignments:
            raise AdminError(S.INVALID_ARGUMENT, "no reassignments given")
        _targets(self.node, request.reassignments)
        items: list[tuple[str, int, list[int] | None]] = []
        for r in request.reassignments:
            if r.cancel:
                items.append((r.topic, r.partition, None))
            elif not r.replicas:
                raise AdminError(S.INVALID_ARGUMENT,
                                 f"{r.topic}-{r.partition}: give the target replicas, or cancel")
            else:
                items.append((r.topic, r.partition, list(r.replicas)))
        results = await self.ops.alter_partition_reassignments(items)
        for res in results:
            if res.error is not ErrorCode.none:
                raise KafkaError(res.error, f"{res.topic}-{res.partition}: "
                                            f"{res.message or res.error.name}")
        image = self.node.metadata
        return partitions.AlterPartitionReassignmentsResponse(partitions=[
            reassignment_status(self.node, t, i, image.partition(t, i))
            for t, i, _ in items if image.partition(t, i) is not None])

    @rpc_errors
    async def ListPartitionReassignments(self, request: Any,
                                         context: grpc.aio.ServicerContext) -> Any:
        wanted = _targets(self.node, request.partitions) or None
        image = self.node.metadata
        ongoing = Controller.list_partition_reassignments(image, wanted)
        return partitions.ListPartitionReassignmentsResponse(reassignments=[
            reassignment_status(self.node, o.topic, o.partition,
                                image.partition(o.topic, o.partition))
            for o in sorted(ongoing, key=lambda o: (o.topic, o.partition))])

    @rpc_errors
    @forwards_writes(_SERVICE)
    async def ElectLeaders(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        etype = (ElectionType.UNCLEAN
                 if request.election_type == partitions.ELECTION_TYPE_UNCLEAN
                 else ElectionType.PREFERRED)
        wanted = _targets(self.node, request.partitions) or None
        results = await self.ops.elect_leaders(etype, wanted)
        image = self.node.metadata
        return partitions.ElectLeadersResponse(results=[
            partitions.ElectionResult(
                topic=r.topic, partition=r.partition,
                outcome=_OUTCOME.get(r.error, partitions.ELECTION_OUTCOME_FAILED),
                message=r.message or ("" if r.error is ErrorCode.none else r.error.name),
                leader=image.leader_of(r.topic, r.partition))
            for r in results])
