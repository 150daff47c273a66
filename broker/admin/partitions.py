"""PartitionService: reassignments (start, cancel, list) and leader elections.

Copy progress (the leader's log end offset and each replica's, as the leader saw it at its
last fetch) is known only on the partition's leader. A node that does not lead a listed
partition asks the leader's admin listener (advertised as the ADMIN endpoint of its broker
registration) for it, one call per leader, bounded by PROGRESS_TIMEOUT_S; a leader that does
not answer leaves the progress unset rather than failing the listing.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
from kio.schema.errors import ErrorCode

from broker.admin.convert import reassignment_status, set_progress
from broker.admin.errors import AdminError, S, rpc_errors
from broker.admin.forward import Forwarder, admin_endpoint_of, forwards_writes
from broker.admin.pb import partitions, partitions_grpc
from broker.admin.services import AdminServices
from broker.controller.controller import Controller
from broker.controller.requests import ElectionType
from broker.errors import KafkaError
from broker.metadata.image import PartitionRegistration


def require_partition(node: AdminServices, topic: str, index: int) -> PartitionRegistration:
    t = node.metadata.topic(topic)
    if t is None:
        raise AdminError(S.NOT_FOUND, f"topic '{topic}' does not exist")
    p = t.partitions.get(index)
    if p is None:
        raise AdminError(S.NOT_FOUND, f"partition {topic}-{index} does not exist (the topic "
                                      f"has partitions 0..{t.num_partitions - 1})")
    return p


def _targets(node: AdminServices, items: Any) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for tp in items:
        require_partition(node, tp.topic, tp.partition)
        key = (tp.topic, tp.partition)
        if key in out:
            raise AdminError(S.INVALID_ARGUMENT, f"partition {tp.topic}-{tp.partition} is "
                                                 "named twice")
        out.append(key)
    return out


PROGRESS_TIMEOUT_S = 3.0
IMAGE_CATCH_UP_S = 3.0
_SERVICE = partitions.DESCRIPTOR.services_by_name["PartitionService"]
_LIST = _SERVICE.methods_by_name["ListPartitionReassignments"]
_OUTCOME = {
    ErrorCode.none: partitions.ELECTION_OUTCOME_ELECTED,
    ErrorCode.election_not_needed: partitions.ELECTION_OUTCOME_NOT_NEEDED,
}


class PartitionService(partitions_grpc.PartitionServiceServicer):  # type: ignore[misc]
    def __init__(self, node: AdminServices, forwarder: Forwarder | None = None) -> None:
        self.node = node
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
        results = await self.node.controller.alter_partition_reassignments(
            items, all_or_nothing=True)
        for res in results:
            if res.error is not ErrorCode.none:
                raise KafkaError(res.error, f"{res.topic}-{res.partition}: "
                                            f"{res.message or res.error.name}")
        await self._image_shows(items)
        image = self.node.metadata
        statuses = [reassignment_status(self.node, t, i, p) for t, i, _ in items
                    if (p := image.partition(t, i)) is not None]
        await self._other_workers_progress(statuses)
        await self._leader_progress(statuses, context)
        return partitions.AlterPartitionReassignmentsResponse(partitions=statuses)

    async def _image_shows(self, items: list[tuple[str, int, list[int] | None]]) -> None:
        """When the change was made by a remote controller, wait (bounded) until this node's
        metadata has it, so that the answer shows the reassignment just started."""
        def applied(t: str, i: int, target: list[int] | None) -> bool:
            p = self.node.metadata.partition(t, i)
            if p is None:
                return True
            if target is None:
                return not p.adding_replicas and not p.removing_replicas
            return set(target) <= set(p.replicas)

        for _ in range(int(IMAGE_CATCH_UP_S / 0.02)):
            if all(applied(*item) for item in items):
                return
            await asyncio.sleep(0.02)

    async def _image_shows_leaders(self, elected: list[tuple[str, int]],
                                   before: dict[tuple[str, int], int]) -> None:
        """Wait (bounded) until this node's metadata has the leaders a remote controller
        just elected (a new leader epoch), so that the answer names them."""
        def applied(t: str, i: int) -> bool:
            p = self.node.metadata.partition(t, i)
            return p is None or p.leader_epoch > before.get((t, i), -1)

        for _ in range(int(IMAGE_CATCH_UP_S / 0.02)):
            if all(applied(t, i) for t, i in elected):
                return
            await asyncio.sleep(0.02)

    async def _other_workers_progress(self, statuses: list[Any]) -> None:
        """A broker of several workers (skiff.broker.workers): the copy progress of the
        partitions this broker leads in its other processes, asked of their owners."""
        router = self.node.replicas.shard_router
        if router is None:
            return
        wanted = {(s.topic, s.partition): s for s in statuses
                  if not s.HasField("leader_log_end_offset") and s.leader == self.node.node_id}
        if not wanted:
            return
        for key, (end, followers) in (await router.replica_progress(list(wanted))).items():
            set_progress(wanted[key], self.node.node_id, end, followers)

    async def _leader_progress(self, statuses: list[Any],
                               context: grpc.aio.ServicerContext) -> None:
        """Fill in the copy progress of partitions led elsewhere, from their leaders."""
        if self.forwarder is None or self.forwarder.is_forwarded(context):
            return
        address_of = admin_endpoint_of(self.node)
        by_leader: dict[int, list[Any]] = {}
        for s in statuses:
            if not s.HasField("leader_log_end_offset") and s.leader >= 0 \
                    and s.leader != self.node.node_id:
                by_leader.setdefault(s.leader, []).append(s)

        async def ask(leader: int, wanted: list[Any]) -> None:
            address = address_of(leader)
            if address is None or self.forwarder is None:
                return
            request = partitions.ListPartitionReassignmentsRequest(
                include_completed=True, partitions=[
                    partitions.TopicPartition(topic=s.topic, partition=s.partition)
                    for s in wanted])
            try:
                resp = await self.forwarder.call(address, _LIST, request, PROGRESS_TIMEOUT_S)
            except AdminError:
                return
            theirs = {(r.topic, r.partition): r for r in resp.reassignments}
            for s in wanted:
                r = theirs.get((s.topic, s.partition))
                if r is not None and r.HasField("leader_log_end_offset"):
                    s.leader_log_end_offset = r.leader_log_end_offset
                    del s.progress[:]
                    s.progress.extend(r.progress)

        await asyncio.gather(*(ask(b, w) for b, w in by_leader.items()))

    @rpc_errors
    async def ListPartitionReassignments(self, request: Any,
                                         context: grpc.aio.ServicerContext) -> Any:
        wanted = _targets(self.node, request.partitions) or None
        image = self.node.metadata
        if request.include_completed and wanted is not None:
            keys = wanted
        else:
            ongoing = Controller.list_partition_reassignments(image, wanted)
            keys = sorted((o.topic, o.partition) for o in ongoing)
        statuses = [reassignment_status(self.node, t, i, p) for t, i in keys
                    if (p := image.partition(t, i)) is not None]
        await self._other_workers_progress(statuses)
        await self._leader_progress(statuses, context)
        return partitions.ListPartitionReassignmentsResponse(reassignments=statuses)

    @rpc_errors
    @forwards_writes(_SERVICE)
    async def ElectLeaders(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        etype = (ElectionType.UNCLEAN
                 if request.election_type == partitions.ELECTION_TYPE_UNCLEAN
                 else ElectionType.PREFERRED)
        wanted = _targets(self.node, request.partitions) or None
        before = {(t.name, i): p.leader_epoch
                  for t, i, p in self.node.metadata.iter_partitions()}
        results = await self.node.controller.elect_leaders(etype, wanted)
        elected = [(r.topic, r.partition) for r in results if r.error is ErrorCode.none]
        await self._image_shows_leaders(elected, before)
        image = self.node.metadata
        return partitions.ElectLeadersResponse(results=[
            partitions.ElectionResult(
                topic=r.topic, partition=r.partition,
                outcome=_OUTCOME.get(r.error, partitions.ELECTION_OUTCOME_FAILED),
                message=r.message or ("" if r.error is ErrorCode.none else r.error.name),
                leader=image.leader_of(r.topic, r.partition))
            for r in results])
