"""The transaction coordinator's service: the transaction APIs over the pure coordinators
(broker/txn/coordinator.py), and the markers they send.

One `TransactionCoordinator` per __transaction_state partition this broker leads, at that
partition's leader epoch (the coordinator epoch markers carry), run by the coordinator
runtime (broker/coordinator/runtime.py), as the group coordinators are: gaining a partition
replays it (requests get COORDINATOR_LOAD_IN_PROGRESS meanwhile) and then resumes the
transactions found in PrepareCommit/PrepareAbort by sending their markers again; losing it
unloads (waiting requests get NOT_COORDINATOR, marker sends stop). Records are appended with
acks=all, so a transition is applied only once it is replicated to the ISR.

Markers travel as WriteTxnMarkers (API 27) over the inter-broker listener (with its TLS and
SASL settings, as the replica fetchers connect) to each partition's leader, itself included;
partitions are retried until their leader acknowledges the marker, or their topic is gone.

Handlers reach the service as `node.txn_coordinator`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

import structlog
from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId, TopicName
from kio.static.primitive import i16, i32

from broker.coordinator.partitioning import partition_for
from broker.coordinator.runtime import CoordinatorRuntime, internal_partition_count
from broker.coordinator.services import CoordinatorNode
from broker.errors import KafkaError
from broker.group.records import OFFSETS_TOPIC
from broker.protocol.records import Record, build_batch
from broker.protocol.transport import ConnectionSecurity, KafkaConnection
from broker.txn.coordinator import (
    NEED_NEXT_PRODUCER_ID,
    NEED_PRODUCER_ID,
    Effects,
    EndResult,
    InitResult,
    MarkerSend,
    TransactionCoordinator,
    TxnConfig,
    TxnDescription,
    TxnState,
    Write,
)
from broker.txn.records import (
    TRANSACTION_STATE_TOPIC,
    TopicPartition,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from broker.txn.verification import TransactionVerifier

log = structlog.get_logger(__name__)

WRITE_TXN_MARKERS = 27
WRITE_TXN_MARKERS_VERSION = 1
WRITE_TIMEOUT_MS = 5000
MARKER_REQUEST_TIMEOUT_S = 30.0
MARKER_RETRY_S = 0.1
MARKER_RETRY_MAX_S = 1.0

# Marker answers that a later attempt may get past (Kafka's TransactionMarkerRequest
# CompletionHandler retries these; the leader may have moved or be loading).
_MARKER_RETRIABLE = frozenset({
    ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_or_partition,
    ErrorCode.not_enough_replicas, ErrorCode.not_enough_replicas_after_append,
    ErrorCode.request_timed_out, ErrorCode.kafka_storage_error,
    ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator, ErrorCode.unknown_server_error,
})
# The leader knows a newer epoch of this producer or of this coordinator: the transaction
# was completed or taken over by someone else; stop sending.
_MARKER_STALE = frozenset({
    ErrorCode.invalid_producer_epoch, ErrorCode.transaction_coordinator_fenced,
})

GenerateProducerId = Callable[[], Awaitable[int]]


class MarkerConnection(Protocol):
    """What the marker sender needs of a connection: transport.py's KafkaConnection."""

    async def request(self, api_key: int, version: int, request: Any, timeout_s: float) -> Any: ...

    async def close(self) -> None: ...


ConnectFn = Callable[[str, int], MarkerConnection]


class TxnNode(Protocol):
    """A node's transaction coordinator, as the handlers reach it (None until the broker
    runs one)."""

    @property
    def txn_coordinator(self) -> TransactionCoordinatorService | None: ...


def txn_service_of(node: TxnNode) -> TransactionCoordinatorService:
    service = node.txn_coordinator
    if service is None:
        raise KafkaError(ErrorCode.coordinator_not_available, "transaction coordinator not started")
    return service


_END_TXN_REFUSALS_TO_LOG = frozenset({
    ErrorCode.invalid_txn_state, ErrorCode.producer_fenced,
    ErrorCode.invalid_producer_id_mapping,
})


class TransactionCoordinatorService:
    def __init__(
        self, node: CoordinatorNode, generate_producer_id: GenerateProducerId, *,
        security: ConnectionSecurity | None = None, tick_interval_s: float = 0.1,
        connect: ConnectFn | None = None, listener_name: str | None = None,
    ) -> None:
        """`connect(host, port)`: how markers reach a leader (default: a KafkaConnection
        with `security`) at its endpoint on `listener_name` (default: the inter-broker
        listener)."""
        self.node = node
        self.config = TxnConfig.from_node_config(node.config)
        self.generate_producer_id = generate_producer_id
        self.security = security
        self.listener_name = listener_name or node.config.inter_broker_listener_name
        self._connections: dict[tuple[str, int], MarkerConnection] = {}
        self.connect: ConnectFn = connect or self._kafka_connection
        self.runtime: CoordinatorRuntime[TransactionCoordinator] = CoordinatorRuntime(
            node, self, name="txn", topic=TRANSACTION_STATE_TOPIC,
            partitions_key="transaction.state.log.num.partitions",
            topic_log_name="transaction_state_topic", write_timeout_ms=WRITE_TIMEOUT_MS,
            tick_interval_s=tick_interval_s)
        # KIP-890: this broker's transactional appends checked with their coordinators
        self.verifier = TransactionVerifier(node, self.listener_name, self._connection,
                                            self._drop_connection)

    @property
    def coordinators(self) -> dict[int, TransactionCoordinator]:
        """The cores loaded here, by __transaction_state partition."""
        return self.runtime.coordinators

    def start(self) -> None:
        self.runtime.start()

    async def stop(self) -> None:
        await self.runtime.stop()
        for conn in list(self._connections.values()):
            with contextlib.suppress(Exception):
                await conn.close()
        self._connections.clear()

    # ---- the runtime's hooks (CoordinatorShards) -----------------------------------------

    def new_coordinator(self, partition: int, epoch: int,
                        now_ms: int) -> TransactionCoordinator:
        # the partition's leader epoch is the coordinator epoch its markers carry
        return TransactionCoordinator(self.config, epoch, now_ms)

    def replay(self, partition: int, coord: TransactionCoordinator, plog: Any, offset: int,
               upto: int) -> int:
        count = 0
        for r in plog.read_records(offset, upto):
            if r.key is None:
                continue
            try:
                tid = decode_key(r.key)
                coord.replay(tid, None if r.value is None else decode_value(r.value))
                count += 1
            except KafkaError as exc:
                log.warning("txn_record_unreadable", partition=partition, offset=r.offset,
                            error=str(exc))
        return count

    def loaded(self, partition: int, coord: TransactionCoordinator, now_ms: int) -> Effects:
        """Resumes the transactions the previous coordinator left in PrepareCommit or
        PrepareAbort: their markers are sent again."""
        fx = coord.finish_loading(now_ms)
        if fx.markers:
            log.info("txn_markers_resumed", partition=partition, transactions=len(fx.markers))
        return fx

    def load_abandoned(self, partition: int) -> None:
        return None

    def unloaded(self, partition: int, coord: TransactionCoordinator, now_ms: int) -> Effects:
        return coord.unload()

    def log_counts(self, coord: TransactionCoordinator) -> dict[str, int]:
        return {"transactions": len(coord.txns)}

    def record_batch(self, partition: int, write: Write, now_ms: int) -> bytes:
        value = None if write.value is None else encode_value(
            write.value, 1 if (write.value.client_transaction_version
                               or write.value.next_producer_id >= 0) else 0)
        return build_batch([Record(timestamp=now_ms, key=encode_key(write.transactional_id),
                                   value=value)])

    def more_effects(self, partition: int, coord: TransactionCoordinator, fx: Effects) -> None:
        """Markers are sent while the partition stays loaded by this very core."""
        for m in fx.markers:
            if self.runtime.coordinators.get(partition) is coord:
                self.runtime.spawn_for(partition, self._send_markers, partition, coord, m,
                                       name=f"txn_markers_{partition}")

    def new_topic(self, live_brokers: int) -> tuple[int, int, dict[str, str]]:
        """__transaction_state is compacted; its RF and min ISR are capped to the live
        brokers, with a warning, as for __consumer_offsets."""
        cfg = self.node.config
        wanted_rf = int(cfg["transaction.state.log.replication.factor"])
        rf = min(wanted_rf, live_brokers)
        wanted_isr = int(cfg["transaction.state.log.min.isr"])
        min_isr = min(wanted_isr, rf)
        if rf < wanted_rf or min_isr < wanted_isr:
            log.warning("transaction_state_topic_replication_lowered", wanted_rf=wanted_rf,
                        used_rf=rf, wanted_min_isr=wanted_isr, used_min_isr=min_isr,
                        live_brokers=live_brokers)
        return int(cfg["transaction.state.log.num.partitions"]), rf, {
            "cleanup.policy": "compact",
            "compression.type": "uncompressed",
            "min.insync.replicas": str(min_isr),
            "unclean.leader.election.enable": "false",
            "segment.bytes": str(cfg["transaction.state.log.segment.bytes"]),
        }

    async def _call(self, transactional_id: str,
                    call: Callable[[TransactionCoordinator, int, int], Effects]) -> Any:
        return await self.runtime.call(transactional_id, call)

    # ---- markers --------------------------------------------------------------------------

    def _kafka_connection(self, host: str, port: int) -> MarkerConnection:
        return KafkaConnection(host, port, client_id="skiff-txn-marker", security=self.security)

    def _connection(self, host: str, port: int) -> MarkerConnection:
        conn = self._connections.get((host, port))
        if conn is None:
            conn = self._connections[(host, port)] = self.connect(host, port)
        return conn

    async def _drop_connection(self, host: str, port: int) -> None:
        conn = self._connections.pop((host, port), None)
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()

    def _leader_address(self, tp: TopicPartition) -> tuple[str, int] | bool | None:
        """(host, port) of the partition's leader; None while it has none; False when the
        topic or partition is gone (its marker is no longer needed)."""
        image = self.node.metadata
        topic = image.topic(tp[0])
        if topic is None or tp[1] not in topic.partitions:
            return False
        leader = image.leader_of(tp[0], tp[1])
        if leader < 0:
            return None
        broker = image.broker(leader)
        ep = None if broker is None else broker.endpoint(self.listener_name)
        return None if ep is None else (ep.host, ep.port)

    async def _send_markers(self, p: int, coord: TransactionCoordinator, m: MarkerSend) -> None:
        """Sends `m`'s markers until every partition acknowledged them, then completes the
        transaction. Ends early when this coordinator is unloaded (cancelled)."""
        remaining = set(m.partitions)
        attempt = 0
        started = self.runtime.now()
        while remaining:
            try:
                if await self._marker_round(coord, m, remaining):
                    return  # stale: another coordinator or producer epoch took over
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("txn_marker_round_failed", transactional_id=m.transactional_id)
            if not remaining:
                break
            attempt += 1
            if attempt % 50 == 0:
                log.warning("txn_markers_pending", transactional_id=m.transactional_id,
                            partitions=sorted(remaining), attempts=attempt,
                            ms=self.runtime.now() - started)
            await asyncio.sleep(min(MARKER_RETRY_MAX_S, MARKER_RETRY_S * attempt))
        if self.runtime.coordinators.get(p) is coord:
            self.runtime.dispatch(p, coord, coord.markers_completed(
                m.transactional_id, m.producer_id, m.producer_epoch, self.runtime.now()))

    async def _marker_round(self, coord: TransactionCoordinator, m: MarkerSend,
                            remaining: set[TopicPartition]) -> bool:
        """One WriteTxnMarkers per leader for the partitions in `remaining`; acknowledged
        ones leave it. True when a leader said the producer or coordinator epoch is stale."""
        from kio.schema.write_txn_markers.v1 import request as req_v1

        by_leader: dict[tuple[str, int], list[TopicPartition]] = {}
        for tp in list(remaining):
            addr = self._leader_address(tp)
            if addr is False:
                log.info("txn_marker_partition_gone", transactional_id=m.transactional_id,
                         topic=tp[0], partition=tp[1])
                remaining.discard(tp)
            elif isinstance(addr, tuple):
                by_leader.setdefault(addr, []).append(tp)
        sends: list[tuple[tuple[str, int], asyncio.Future[Any]]] = []
        for addr, tps in by_leader.items():
            topics: dict[str, list[int]] = {}
            for topic, i in sorted(tps):
                topics.setdefault(topic, []).append(i)
            request = req_v1.WriteTxnMarkersRequest(markers=(req_v1.WritableTxnMarker(
                producer_id=ProducerId(m.producer_id), producer_epoch=i16(m.producer_epoch),
                transaction_result=m.committed,
                topics=tuple(req_v1.WritableTxnMarkerTopic(
                    name=TopicName(t), partition_indexes=tuple(i32(x) for x in ps))
                    for t, ps in topics.items()),
                coordinator_epoch=i32(coord.coordinator_epoch)),))
            sends.append((addr, asyncio.ensure_future(self._connection(*addr).request(
                WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, request,
                MARKER_REQUEST_TIMEOUT_S))))
        stale = False
        try:
            answers = await asyncio.gather(*(f for _, f in sends), return_exceptions=True)
        finally:
            for _, f in sends:
                f.cancel()
        for (addr, _), response in zip(sends, answers, strict=True):
            if isinstance(response, asyncio.CancelledError):
                raise response
            if isinstance(response, BaseException):
                exc = response
                log.info("txn_marker_send_failed", transactional_id=m.transactional_id,
                         leader=f"{addr[0]}:{addr[1]}", error=repr(exc))
                conn = self._connections.pop(addr, None)
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await conn.close()
                continue
            for marker in response.markers:
                for t in marker.topics:
                    for pr in t.partitions:
                        tp = (str(t.name), int(pr.partition_index))
                        err = pr.error_code
                        if err is ErrorCode.none:
                            remaining.discard(tp)
                        elif err in _MARKER_STALE:
                            log.warning("txn_marker_stale", error=err.name,
                                        transactional_id=m.transactional_id,
                                        topic=tp[0], partition=tp[1])
                            stale = True
                        elif err not in _MARKER_RETRIABLE:
                            log.warning("txn_marker_refused", error=err.name,
                                        transactional_id=m.transactional_id,
                                        topic=tp[0], partition=tp[1])
        return stale

    # ---- routing --------------------------------------------------------------------------

    def partition_count(self) -> int:
        return self.runtime.partition_count()

    def partition_of(self, transactional_id: str) -> int:
        return self.runtime.partition_of(transactional_id)

    def coordinator_for(self, transactional_id: str) -> tuple[int, TransactionCoordinator]:
        return self.runtime.coordinator_for(transactional_id)

    def offsets_partition_of(self, group_id: str) -> int:
        n = internal_partition_count(self.node, OFFSETS_TOPIC, "offsets.topic.num.partitions")
        return partition_for(group_id, n)

    # ---- FindCoordinator --------------------------------------------------------------------

    async def find_coordinator(
        self, key: str, listener_name: str,
    ) -> tuple[ErrorCode, int, str, int, str | None]:
        """(error, node id, host, port, message) of the coordinator of transactional id `key`."""
        if not key:
            return ErrorCode.invalid_request, -1, "", -1, "empty transactional id"
        return await self.runtime.locate(key, listener_name)

    async def ensure_state_topic(self) -> ErrorCode:
        """Creates __transaction_state (see new_topic) unless it exists."""
        return await self.runtime.ensure_topic()

    # ---- the APIs -------------------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               producer_id: int = -1, producer_epoch: int = -1) -> InitResult:
        new_pid: int | None = None
        for _ in range(3):
            try:
                _, coord = self.coordinator_for(transactional_id)
                if new_pid is None and coord.wants_producer_id(transactional_id):
                    new_pid = await self.generate_producer_id()
                result: InitResult = await self._call(
                    transactional_id, self._initializer(transactional_id, timeout_ms,
                                                        producer_id, producer_epoch, new_pid))
            except KafkaError as exc:
                return InitResult(exc.error_code)
            if result is not NEED_PRODUCER_ID:
                return result
            new_pid = None
        return InitResult(ErrorCode.concurrent_transactions)

    @staticmethod
    def _initializer(tid: str, timeout_ms: int, producer_id: int, producer_epoch: int,
                     new_pid: int | None) -> Callable[[TransactionCoordinator, int, int], Effects]:
        return lambda c, t, now: c.init_producer_id(
            t, tid, timeout_ms, now, expected_producer_id=producer_id,
            expected_epoch=producer_epoch, new_producer_id=new_pid)

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[TopicPartition], *,
                             tv2: bool = False) -> ErrorCode:
        parts = list(partitions)
        try:
            result: ErrorCode = await self._call(
                transactional_id, lambda c, t, now: c.add_partitions(
                    t, transactional_id, producer_id, producer_epoch, parts, now, tv2=tv2))
        except KafkaError as exc:
            return exc.error_code
        return result

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition],
                          ) -> dict[TopicPartition, ErrorCode]:
        parts = list(partitions)
        try:
            _, coord = self.coordinator_for(transactional_id)
        except KafkaError as exc:
            return dict.fromkeys(parts, exc.error_code)
        return coord.verify_partitions(transactional_id, producer_id, producer_epoch, parts)

    async def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          group_id: str) -> ErrorCode:
        tp = (OFFSETS_TOPIC, self.offsets_partition_of(group_id))
        return await self.add_partitions(transactional_id, producer_id, producer_epoch, [tp])

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                      committed: bool, *, tv2: bool = False) -> EndResult:
        """`tv2`: EndTxn v5 (transactions V2): the epoch is bumped, and the answer
        carries the producer id and epoch to go on with."""
        next_pid: int | None = None
        for _ in range(3):
            try:
                _, coord = self.coordinator_for(transactional_id)
                if next_pid is None and coord.wants_next_producer_id(transactional_id, tv2):
                    next_pid = await self.generate_producer_id()
                result: EndResult = await self._call(
                    transactional_id, self._ender(transactional_id, producer_id,
                                                  producer_epoch, committed, tv2, next_pid))
            except KafkaError as exc:
                return EndResult(exc.error_code)
            if result is not NEED_NEXT_PRODUCER_ID:
                if result.error in _END_TXN_REFUSALS_TO_LOG:
                    self._log_refused_end(transactional_id, producer_id, producer_epoch,
                                          committed, tv2, result.error)
                return result
            next_pid = None
        return EndResult(ErrorCode.concurrent_transactions)

    def _log_refused_end(self, tid: str, producer_id: int, producer_epoch: int,
                         committed: bool, tv2: bool, error: ErrorCode) -> None:
        """A refused EndTxn ends the producer (a fatal error in every client): the log says
        what the coordinator held, as Kafka logs an invalid state transition."""
        _, held = self.describe(tid)
        log.warning("end_txn_refused", transactional_id=tid, error=error.name,
                    committed=committed, tv2=tv2, producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    state=held.state.name if held else None,
                    held_producer_id=held.producer_id if held else None,
                    held_producer_epoch=held.producer_epoch if held else None,
                    partitions=sorted(held.partitions) if held else None)

    @staticmethod
    def _ender(tid: str, producer_id: int, producer_epoch: int, committed: bool, tv2: bool,
               next_pid: int | None) -> Callable[[TransactionCoordinator, int, int], Effects]:
        return lambda c, t, now: c.end_txn(t, tid, producer_id, producer_epoch, committed, now,
                                           tv2=tv2, next_producer_id=next_pid)

    async def abort(self, transactional_id: str) -> ErrorCode:
        try:
            result: ErrorCode | EndResult = await self._call(
                transactional_id, lambda c, t, now: c.abort(t, transactional_id, now))
        except KafkaError as exc:
            return exc.error_code
        return result.error if isinstance(result, EndResult) else result

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TxnDescription | None]:
        try:
            _, coord = self.coordinator_for(transactional_id)
        except KafkaError as exc:
            return exc.error_code, None
        d = coord.describe(transactional_id)
        if d is None:
            return ErrorCode.transactional_id_not_found, None
        return ErrorCode.none, d

    def list(self, states: Iterable[TxnState] = (), producer_ids: Iterable[int] = (),
             min_duration_ms: int = -1) -> tuple[ErrorCode, list[TxnDescription]]:
        states, producer_ids = list(states), list(producer_ids)
        out: list[TxnDescription] = []
        now = self.runtime.now()
        for coord in self.coordinators.values():
            out.extend(coord.list(states, producer_ids, min_duration_ms, now))
        error = ErrorCode.coordinator_load_in_progress if self.runtime.loading else ErrorCode.none
        return error, out
