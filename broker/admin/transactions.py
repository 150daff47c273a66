"""TransactionService: transactions through this node's transaction coordinator (what
kafka-transactions.sh lists, describes and aborts).

A call about one transactional id is answered by its coordinator, the broker leading the
id's __transaction_state partition; any other node forwards it there once (as GroupService
does). ListTransactions asks every unfenced broker and merges their listings. Abort fences
the producer and aborts its ongoing transaction, as the coordinator does on a timeout.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
from kio.schema.errors import ErrorCode

from broker.admin.errors import AdminError, S, from_kafka, rpc_errors
from broker.admin.forward import Forwarder, admin_endpoint_of
from broker.admin.pb import partitions, transactions, transactions_grpc
from broker.admin.services import AdminServices
from broker.coordinator.partitioning import partition_for
from broker.errors import KafkaError
from broker.replication.replica_manager import ProducerRow
from broker.txn.coordinator import TxnState
from broker.txn.records import TRANSACTION_STATE_TOPIC
from broker.txn.shell import TransactionCoordinatorService

PEER_TIMEOUT_S = 5.0
_TXNS = transactions.DESCRIPTOR.services_by_name["TransactionService"]


def _status(error: ErrorCode, tid: str) -> AdminError:
    if error is ErrorCode.transactional_id_not_found:
        return AdminError(S.NOT_FOUND, f"no transactional id {tid}")
    if error is ErrorCode.invalid_txn_state:
        return AdminError(S.FAILED_PRECONDITION,
                          f"transactional id {tid} has no ongoing transaction to abort")
    if error in (ErrorCode.coordinator_load_in_progress, ErrorCode.concurrent_transactions):
        return AdminError(S.UNAVAILABLE, f"transactional id {tid}: {error.name}; retry")
    return from_kafka(KafkaError(error, f"transactional id {tid}"))


class TransactionService(transactions_grpc.TransactionServiceServicer):  # type: ignore[misc]
    def __init__(self, node: AdminServices, forwarder: Forwarder | None = None) -> None:
        self.node = node
        self.forwarder = forwarder

    def _service(self) -> TransactionCoordinatorService | None:
        svc = self.node.txn_coordinator
        return svc if isinstance(svc, TransactionCoordinatorService) else None

    def _coordinator_id(self, tid: str) -> int:
        image = self.node.metadata
        topic = image.topic(TRANSACTION_STATE_TOPIC)
        if topic is None or not topic.partitions:
            return -1
        return int(image.leader_of(TRANSACTION_STATE_TOPIC,
                                   partition_for(tid, len(topic.partitions))))

    async def _at_coordinator(self, request: Any, context: grpc.aio.ServicerContext,
                              name: str) -> Any | None:
        tid = request.transactional_id
        if not tid:
            raise AdminError(S.INVALID_ARGUMENT, "a transactional id is required")
        target = self._coordinator_id(tid)
        if target < 0:
            raise AdminError(S.NOT_FOUND, f"no transactional id {tid} (no "
                                          f"{TRANSACTION_STATE_TOPIC} yet)")
        if target == self.node.node_id:
            return None
        if self.forwarder is None or self.forwarder.is_forwarded(context):
            raise AdminError(S.FAILED_PRECONDITION,
                             f"transactional id {tid} is coordinated by broker {target}")
        address = admin_endpoint_of(self.node)(target)
        if address is None:
            raise AdminError(S.UNAVAILABLE, f"transactional id {tid} is coordinated by broker "
                                            f"{target}, whose admin address is unknown here")
        return await self.forwarder.call(address, _TXNS.methods_by_name[name], request,
                                         context.time_remaining())

    def _local(self) -> TransactionCoordinatorService:
        svc = self._service()
        if svc is None:
            raise AdminError(S.UNAVAILABLE, f"node {self.node.node_id} has no transaction "
                                            "coordinator (not a broker); ask a broker")
        return svc

    @rpc_errors
    async def ListTransactions(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._list(request, context)

    async def _list(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        states = []
        for name in request.states:
            state = TxnState.from_kafka_name(name)
            if state is None:
                raise AdminError(S.INVALID_ARGUMENT, f"unknown transaction state {name!r}; "
                                 f"one of {', '.join(s.kafka_name for s in TxnState)}")
            states.append(state)
        found: dict[str, Any] = {}
        svc = self._service()
        if svc is not None:
            error, listed = svc.list(states, list(request.producer_ids),
                                     int(request.min_duration_ms) or -1)
            if error is not ErrorCode.none:
                raise _status(error, "(listing)")
            for d in listed:
                found[d.transactional_id] = transactions.TransactionListing(
                    transactional_id=d.transactional_id, producer_id=d.producer_id,
                    state=d.state.kafka_name, coordinator_id=self.node.node_id)
        elif self.forwarder is None or self.forwarder.is_forwarded(context):
            self._local()
        if self.forwarder is not None and not self.forwarder.is_forwarded(context):
            for t in await self._from_peers("ListTransactions", request, context, "listing"):
                found.setdefault(t.transactional_id, t)
        return transactions.ListTransactionsResponse(
            transactions=[found[k] for k in sorted(found)])

    @rpc_errors
    async def DescribeTransaction(self, request: Any,
                                  context: grpc.aio.ServicerContext) -> Any:
        return await self._describe(request, context)

    async def _describe(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        remote = await self._at_coordinator(request, context, "DescribeTransaction")
        if remote is not None:
            return remote
        tid = request.transactional_id
        error, d = self._local().describe(tid)
        if d is None:
            raise _status(error, tid)
        return transactions.DescribeTransactionResponse(
            transactional_id=tid, coordinator_id=self.node.node_id, state=d.state.kafka_name,
            producer_id=d.producer_id, producer_epoch=d.producer_epoch, timeout_ms=d.timeout_ms,
            start_time_ms=d.start_ms, last_update_time_ms=d.last_update_ms,
            partitions=[partitions.TopicPartition(topic=t, partition=p)
                        for t, p in sorted(d.partitions)])

    @rpc_errors
    async def AbortTransaction(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        remote = await self._at_coordinator(request, context, "AbortTransaction")
        if remote is not None:
            return remote
        tid = request.transactional_id
        svc = self._local()
        error = await svc.abort(tid)
        if error is not ErrorCode.none:
            raise _status(error, tid)
        _, d = svc.describe(tid)
        return transactions.AbortTransactionResponse(
            transactional_id=tid, producer_id=d.producer_id if d else -1,
            producer_epoch=d.producer_epoch if d else -1)

    # ---- producers and hanging transactions (the partition side) -------------------------

    @rpc_errors
    async def DescribeProducers(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        image = self.node.metadata
        if image.partition(request.topic, request.partition) is None:
            raise AdminError(S.NOT_FOUND, f"no partition {request.topic}-{request.partition}")
        leader = int(image.leader_of(request.topic, request.partition))
        if leader != self.node.node_id:
            if leader < 0:
                raise AdminError(S.UNAVAILABLE, f"{request.topic}-{request.partition} has no "
                                                "leader now; retry")
            if self.forwarder is None or self.forwarder.is_forwarded(context):
                raise AdminError(S.FAILED_PRECONDITION, f"{request.topic}-{request.partition} "
                                                        f"is led by broker {leader}")
            address = admin_endpoint_of(self.node)(leader)
            if address is None:
                raise AdminError(S.UNAVAILABLE, f"broker {leader}'s admin address is unknown")
            return await self.forwarder.call(address, _TXNS.methods_by_name["DescribeProducers"],
                                             request, context.time_remaining())
        key = (request.topic, request.partition)
        try:
            rows = (await self._producers([key])).get(key)
        except KafkaError as exc:
            raise from_kafka(exc) from None
        if rows is None:
            raise from_kafka(KafkaError(ErrorCode.not_leader_or_follower,
                                        f"{request.topic}-{request.partition}"))
        return transactions.DescribeProducersResponse(
            topic=request.topic, partition=request.partition, leader_id=self.node.node_id,
            producers=[transactions.ProducerState(
                producer_id=pid, producer_epoch=epoch, last_sequence=last_seq,
                last_timestamp_ms=last_ts, coordinator_epoch=coordinator_epoch,
                current_txn_start_offset=txn_start)
                for pid, epoch, last_seq, last_ts, coordinator_epoch, txn_start in rows])

    async def _producers(self, keys: list[tuple[str, int]] | None
                         ) -> dict[tuple[str, int], list[ProducerRow]]:
        """The producers of the partitions this broker leads (`keys`; None: all of them),
        asked of every worker process of a broker of several (skiff.broker.workers)."""
        replicas = self.node.replicas
        router = replicas.shard_router
        if router is not None:
            return await router.producers(keys)
        return replicas.producers_local(keys)

    async def _open_here(self, max_age_ms: int) -> list[Any]:
        """Open transactions older than `max_age_ms` in the partitions this broker leads."""
        now = int(self.node.clock())
        out = []
        for (topic, index), rows in sorted((await self._producers(None)).items()):
            for pid, epoch, _seq, last_ts, _coordinator_epoch, txn_start in rows:
                if txn_start >= 0 and now - last_ts > max_age_ms:
                    out.append(transactions.HangingTransaction(
                        topic=topic, partition=index, producer_id=pid,
                        producer_epoch=epoch, start_offset=txn_start,
                        last_timestamp_ms=last_ts, leader_id=self.node.node_id))
        return out

    async def _from_peers(self, method_name: str, request: Any,
                          context: grpc.aio.ServicerContext, what: str) -> list[Any]:
        """`request` to every other unfenced broker's admin listener at once: the
        `transactions` of their answers, in broker order. A broker whose admin address is
        unknown here fails the call (the `what` would be partial)."""
        assert self.forwarder is not None
        forwarder = self.forwarder
        address_of = admin_endpoint_of(self.node)
        method = _TXNS.methods_by_name[method_name]

        async def ask(broker: int) -> list[Any]:
            address = address_of(broker)
            if address is None:
                raise AdminError(S.UNAVAILABLE, f"broker {broker}'s admin address is unknown "
                                                f"here; the {what} would be partial")
            resp = await forwarder.call(address, method, request,
                                        min(PEER_TIMEOUT_S, context.time_remaining() or 1e9))
            return list(resp.transactions)

        peers = [b for b, reg in sorted(self.node.metadata.brokers.items())
                 if not reg.fenced and b != self.node.node_id]
        return [t for listing in await asyncio.gather(*(ask(b) for b in peers))
                for t in listing]

    @rpc_errors
    async def FindHangingTransactions(self, request: Any,
                                      context: grpc.aio.ServicerContext) -> Any:
        max_age = int(request.max_transaction_timeout_ms) or int(
            self.node.config["transaction.max.timeout.ms"])
        found = await self._open_here(max_age)
        if request.local_only or self.forwarder is None or self.forwarder.is_forwarded(context):
            return transactions.FindHangingTransactionsResponse(transactions=found)
        local = transactions.FindHangingTransactionsRequest(
            max_transaction_timeout_ms=max_age, local_only=True)
        found.extend(await self._from_peers("FindHangingTransactions", local, context,
                                            "search"))
        if not found:
            return transactions.FindHangingTransactionsResponse()
        # the coordinators' view: a producer whose transaction is Ongoing with that
        # partition is only slow, not hanging
        listed = await self._list(transactions.ListTransactionsRequest(
            producer_ids=sorted({h.producer_id for h in found})), context)
        by_pid = {t.producer_id: t.transactional_id for t in listed.transactions}
        described: dict[str, Any] = {}
        for tid in sorted(set(by_pid.values())):
            try:
                described[tid] = await self._describe(
                    transactions.DescribeTransactionRequest(transactional_id=tid), context)
            except AdminError:
                continue
        hanging = []
        for h in found:
            tid = by_pid.get(h.producer_id, "")
            d = described.get(tid)
            if d is not None and d.state == "Ongoing" and any(
                    p.topic == h.topic and p.partition == h.partition for p in d.partitions):
                continue
            h.transactional_id = tid
            h.coordinator_state = d.state if d is not None else ""
            hanging.append(h)
        return transactions.FindHangingTransactionsResponse(transactions=hanging)
