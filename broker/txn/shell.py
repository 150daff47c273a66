"""The IO shell around the pure transaction coordinators (broker/txn/coordinator.py).

One `TransactionCoordinator` per __transaction_state partition this broker leads, at that
partition's leader epoch (the coordinator epoch markers carry). Leadership comes from the
metadata image, as for the group coordinator: gaining a partition replays it (requests get
COORDINATOR_LOAD_IN_PROGRESS meanwhile) and then resumes the transactions found in
PrepareCommit/PrepareAbort by sending their markers again; losing it unloads (waiting
requests get NOT_COORDINATOR, marker sends stop). Records are appended through the replica
manager with acks=all, so a transition is applied only once it is replicated to the ISR.

Markers travel as WriteTxnMarkers (API 27) over the inter-broker listener (with its TLS and
SASL settings, as the replica fetchers connect) to each partition's leader, itself included;
partitions are retried until their leader acknowledges the marker, or their topic is gone.
The topic itself is created through the controller the first time FindCoordinator needs it.

Handlers reach the service as `node.txn_coordinator`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

import structlog
from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId, TopicName
from kio.static.primitive import i16, i32

from broker.errors import KafkaError
from broker.group.hashing import OFFSETS_TOPIC, partition_for
from broker.protocol.records import Record, build_batch
from broker.protocol.transport import ConnectionSecurity, KafkaConnection
from broker.replication import Role
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
LOAD_WINDOW = 4096
LEADER_WAIT_S = 30.0
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


def txn_service_of(node: Any) -> TransactionCoordinatorService:
    service = getattr(node, "txn_coordinator", None)
    if service is None:
        raise KafkaError(ErrorCode.coordinator_not_available, "transaction coordinator not started")
    assert isinstance(service, TransactionCoordinatorService)
    return service


class TransactionCoordinatorService:
    def __init__(
        self, node: Any, generate_producer_id: GenerateProducerId, *,
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
        self.tick_interval_s = tick_interval_s
        self.coordinators: dict[int, TransactionCoordinator] = {}
        self._loaded_epoch: dict[int, int] = {}
        self._loading: dict[int, tuple[int, asyncio.Task[None]]] = {}
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._tokens = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()
        self._marker_tasks: dict[int, set[asyncio.Task[None]]] = {}
        self._connections: dict[tuple[str, int], MarkerConnection] = {}
        self.connect: ConnectFn = connect or self._kafka_connection
        self._tick_task: asyncio.Task[None] | None = None
        self._create_lock: asyncio.Lock | None = None
        self._stopped = False
        # KIP-890: this broker's transactional appends checked with their coordinators
        self.verifier = TransactionVerifier(node, self.listener_name, self._connection,
                                            self._drop_connection)

    # ---- lifecycle --------------------------------------------------------------------

    def start(self) -> None:
        self.node.publisher.subscribe(self.on_metadata)
        self._tick_task = asyncio.get_running_loop().create_task(
            self._tick_loop(), name="txn_coordinator_tick")
        self.reconcile()

    async def stop(self) -> None:
        self._stopped = True
        tasks = list(self._tasks)
        if self._tick_task is not None:
            tasks.append(self._tick_task)
        tasks += [t for _, t in self._loading.values()]
        for ts in self._marker_tasks.values():
            tasks += list(ts)
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        for p in list(self.coordinators):
            self._unload(p)
        for conn in list(self._connections.values()):
            with contextlib.suppress(Exception):
                await conn.close()
        self._connections.clear()

    def _now(self) -> int:
        return int(self.node.clock())

    def _spawn(self, coro: Any, name: str) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ---- leadership ---------------------------------------------------------------------

    def on_metadata(self, old: Any, new: Any, delta: Any) -> None:
        if not self._stopped:
            self.reconcile()

    def _wanted(self) -> dict[int, int]:
        topic = self.node.metadata.topic(TRANSACTION_STATE_TOPIC)
        if topic is None:
            return {}
        return {i: reg.leader_epoch for i, reg in topic.partitions.items()
                if reg.leader == self.node.node_id}

    def reconcile(self) -> None:
        wanted = self._wanted()
        for p in list(self.coordinators):
            if wanted.get(p) != self._loaded_epoch.get(p):
                self._unload(p)
        for p, (epoch, task) in list(self._loading.items()):
            if wanted.get(p) != epoch:
                task.cancel()
                del self._loading[p]
        for p, epoch in wanted.items():
            if p not in self.coordinators and p not in self._loading:
                task = asyncio.get_running_loop().create_task(
                    self._load(p, epoch), name=f"txn_load_{p}")
                self._loading[p] = (epoch, task)

    def _unload(self, p: int) -> None:
        coord = self.coordinators.pop(p)
        self._loaded_epoch.pop(p, None)
        for task in self._marker_tasks.pop(p, set()):
            task.cancel()
        self._dispatch(p, coord, coord.unload())
        (log.debug if self._stopped else log.info)(
            "txn_coordinator_unloaded", partition=p, transactions=len(coord.txns))

    async def _load(self, p: int, epoch: int) -> None:
        loop = asyncio.get_running_loop()
        try:
            started = loop.time()
            while True:
                part = self.node.replicas.get(TRANSACTION_STATE_TOPIC, p)
                if part is not None and part.role is Role.LEADER and part.leader_epoch >= epoch:
                    break
                if loop.time() - started > LEADER_WAIT_S:
                    log.warning("txn_load_gave_up", partition=p, epoch=epoch)
                    return
                await asyncio.sleep(0.02)
            coord = TransactionCoordinator(self.config, epoch, self._now())
            plog = part.log
            offset, end = plog.log_start_offset, plog.log_end_offset
            count = 0
            while offset < end:
                upto = min(end, offset + LOAD_WINDOW)
                for r in plog.read_records(offset, upto):
                    if r.key is None:
                        continue
                    try:
                        tid = decode_key(r.key)
                        coord.replay(tid, None if r.value is None else decode_value(r.value))
                        count += 1
                    except KafkaError as exc:
                        log.warning("txn_record_unreadable", partition=p, offset=r.offset,
                                    error=str(exc))
                offset = upto
                await asyncio.sleep(0)
            if self._loading.get(p, (None,))[0] != epoch:
                return
            self.coordinators[p] = coord
            self._loaded_epoch[p] = epoch
            fx = coord.finish_loading(self._now())
            resumed = len(fx.markers)
            self._dispatch(p, coord, fx)
            (log.info if coord.txns else log.debug)(
                "txn_coordinator_loaded", partition=p, epoch=epoch, records=count,
                transactions=len(coord.txns), resumed=resumed,
                ms=int((loop.time() - started) * 1000))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("txn_load_failed", partition=p)
        finally:
            current = self._loading.get(p)
            if current is not None and current[0] == epoch:
                del self._loading[p]

    # ---- ticking and effects ---------------------------------------------------------------

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(self.tick_interval_s)
            try:
                self.tick()
            except Exception:
                log.exception("txn_tick_failed")

    def tick(self) -> None:
        self.reconcile()
        now = self._now()
        for p, coord in list(self.coordinators.items()):
            self._dispatch(p, coord, coord.tick(now))

    def _dispatch(self, p: int, coord: TransactionCoordinator, fx: Effects) -> None:
        for reply in fx.replies:
            fut = self._waiting.pop(reply.token, None)
            if fut is not None and not fut.done():
                fut.set_result(reply.result)
        for w in fx.writes:
            self._spawn(self._write(p, coord, w), f"txn_write_{p}")
        for m in fx.markers:
            if self.coordinators.get(p) is not coord:
                continue
            task = asyncio.get_running_loop().create_task(
                self._send_markers(p, coord, m), name=f"txn_markers_{p}")
            tasks = self._marker_tasks.setdefault(p, set())
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    async def _write(self, p: int, coord: TransactionCoordinator, w: Write) -> None:
        now = self._now()
        value = None if w.value is None else encode_value(
            w.value, 1 if (w.value.client_transaction_version
                           or w.value.next_producer_id >= 0) else 0)
        batch = build_batch([Record(timestamp=now, key=encode_key(w.transactional_id),
                                    value=value)])
        error = ErrorCode.none
        try:
            results = await self.node.replicas.append(
                {(TRANSACTION_STATE_TOPIC, p): batch}, required_acks=-1,
                timeout_ms=WRITE_TIMEOUT_MS)
            result = results[(TRANSACTION_STATE_TOPIC, p)]
            if isinstance(result, KafkaError):
                error = result.error_code
        except KafkaError as exc:
            error = exc.error_code
        except asyncio.CancelledError:
            error = ErrorCode.not_coordinator
        except Exception:
            log.exception("txn_write_failed", partition=p)
            error = ErrorCode.unknown_server_error
        if error is not ErrorCode.none:
            log.info("txn_write_error", partition=p, transactional_id=w.transactional_id,
                     error=error.name)
        self._dispatch(p, coord, coord.write_completed(w.write_id, error, self._now()))

    async def _call(self, transactional_id: str,
                    call: Callable[[TransactionCoordinator, int, int], Effects]) -> Any:
        p, coord = self.coordinator_for(transactional_id)
        token = next(self._tokens)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[token] = fut
        fut.add_done_callback(lambda _f: self._waiting.pop(token, None))
        self._dispatch(p, coord, call(coord, token, self._now()))
        return await fut

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
        started = self._now()
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
                            ms=self._now() - started)
            await asyncio.sleep(min(MARKER_RETRY_MAX_S, MARKER_RETRY_S * attempt))
        if self.coordinators.get(p) is coord:
            self._dispatch(p, coord, coord.markers_completed(
                m.transactional_id, m.producer_id, m.producer_epoch, self._now()))

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
        topic = self.node.metadata.topic(TRANSACTION_STATE_TOPIC)
        if topic is not None and topic.num_partitions > 0:
            return int(topic.num_partitions)
        return int(self.node.config["transaction.state.log.num.partitions"])

    def partition_of(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.partition_count())

    def coordinator_for(self, transactional_id: str) -> tuple[int, TransactionCoordinator]:
        p = self.partition_of(transactional_id)
        coord = self.coordinators.get(p)
        if coord is not None:
            return p, coord
        if p in self._loading:
            raise KafkaError(ErrorCode.coordinator_load_in_progress,
                             f"{TRANSACTION_STATE_TOPIC}-{p}")
        raise KafkaError(ErrorCode.not_coordinator, f"{TRANSACTION_STATE_TOPIC}-{p}")

    def offsets_partition_of(self, group_id: str) -> int:
        topic = self.node.metadata.topic(OFFSETS_TOPIC)
        if topic is not None and topic.num_partitions > 0:
            n = int(topic.num_partitions)
        else:
            n = int(self.node.config["offsets.topic.num.partitions"])
        return partition_for(group_id, n)

    # ---- FindCoordinator --------------------------------------------------------------------

    async def find_coordinator(
        self, key: str, listener_name: str,
    ) -> tuple[ErrorCode, int, str, int, str | None]:
        """(error, node id, host, port, message) of the coordinator of transactional id `key`."""
        if not key:
            return ErrorCode.invalid_request, -1, "", -1, "empty transactional id"
        if self.node.metadata.topic(TRANSACTION_STATE_TOPIC) is None:
            error = await self.ensure_state_topic()
            if error is not ErrorCode.none:
                return error, -1, "", -1, None
        image = self.node.metadata
        p = self.partition_of(key)
        leader = image.leader_of(TRANSACTION_STATE_TOPIC, p)
        broker = image.broker(leader) if leader >= 0 else None
        endpoint = broker.endpoint(listener_name) if broker is not None else None
        if endpoint is None or broker is None or broker.fenced:
            return ErrorCode.coordinator_not_available, -1, "", -1, None
        return ErrorCode.none, leader, endpoint.host, endpoint.port, None

    async def ensure_state_topic(self) -> ErrorCode:
        """Creates __transaction_state (compacted; RF and min ISR capped to the live
        brokers, with a warning, as for __consumer_offsets)."""
        from broker.controller.requests import CreatableTopic

        if self._create_lock is None:
            self._create_lock = asyncio.Lock()
        async with self._create_lock:
            image = self.node.metadata
            if image.topic(TRANSACTION_STATE_TOPIC) is not None:
                return ErrorCode.none
            cfg = self.node.config
            live = len(image.unfenced_broker_ids)
            if live == 0:
                return ErrorCode.coordinator_not_available
            wanted_rf = int(cfg["transaction.state.log.replication.factor"])
            rf = min(wanted_rf, live)
            wanted_isr = int(cfg["transaction.state.log.min.isr"])
            min_isr = min(wanted_isr, rf)
            if rf < wanted_rf or min_isr < wanted_isr:
                log.warning("transaction_state_topic_replication_lowered", wanted_rf=wanted_rf,
                            used_rf=rf, wanted_min_isr=wanted_isr, used_min_isr=min_isr,
                            live_brokers=live)
            try:
                results = await self.node.controller.create_topics([CreatableTopic(
                    name=TRANSACTION_STATE_TOPIC,
                    num_partitions=int(cfg["transaction.state.log.num.partitions"]),
                    replication_factor=rf,
                    configs={
                        "cleanup.policy": "compact",
                        "compression.type": "uncompressed",
                        "min.insync.replicas": str(min_isr),
                        "unclean.leader.election.enable": "false",
                        "segment.bytes": str(cfg["transaction.state.log.segment.bytes"]),
                    },
                )])
            except KafkaError as exc:
                log.info("transaction_state_topic_create_failed", error=str(exc))
                return ErrorCode.coordinator_not_available
            error = results[0].error
            if error not in (ErrorCode.none, ErrorCode.topic_already_exists):
                log.warning("transaction_state_topic_create_refused", error=error.name,
                            message=results[0].message)
                return ErrorCode.coordinator_not_available
            return ErrorCode.none

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
                return result
            next_pid = None
        return EndResult(ErrorCode.concurrent_transactions)

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
        now = self._now()
        for coord in self.coordinators.values():
            out.extend(coord.list(states, producer_ids, min_duration_ms, now))
        error = ErrorCode.coordinator_load_in_progress if self._loading else ErrorCode.none
        return error, out
