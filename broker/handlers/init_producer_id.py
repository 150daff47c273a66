"""InitProducerId (API 22), versions 0-6: producer ids for idempotent and transactional
producers. v5 may answer TRANSACTION_ABORTABLE (KIP-890). v6 carries KIP-939's two-phase
commit fields; Skiff does not take part in two-phase commits, and answers as Kafka 4.1 does
with `transaction.two.phase.commit.enable` off (its default): Enable2Pc is refused with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, KeepPreparedTxn with UNSUPPORTED_VERSION (Kafka 4.1
has not implemented it), and OngoingTxnProducerId/Epoch are always -1.

A null transactional id gets a fresh producer id with epoch 0, as Kafka's
TransactionCoordinator treats it. A producer id and epoch passed at v3+ (KIP-360) are not
bumped for a null transactional id: Kafka "blindly accepts" the request and returns a new id,
and idempotent clients bump their epoch themselves (Java) or take whatever id and epoch come
back (librdkafka, kafka-python). Passing only one of the two is INVALID_REQUEST, as in Kafka.

A transactional id goes to the transaction coordinator (broker/txn): its producer id and a
bumped epoch, which fences older producers of the same id (an empty id is INVALID_REQUEST,
a timeout above transaction.max.timeout.ms INVALID_TRANSACTION_TIMEOUT). Clients before v4
get INVALID_PRODUCER_EPOCH where Kafka says PRODUCER_FENCED (KIP-588).

Producer ids come from `ProducerIdManager`, which takes blocks of
PRODUCER_ID_BLOCK_SIZE ids from the controller through the metadata log (Kafka's
RPCProducerIdManager), so ids are unique across brokers and restarts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import structlog
from kio.schema.errors import ErrorCode

from broker.controller.requests import AllocateProducerIdsReply
from broker.errors import KafkaError
from broker.handlers import _txn
from broker.handlers._authz import Op, Res, allowed, allowed_on_any
from broker.handlers._context import TxnBrokerServices
from broker.protocol.durations import NO_THROTTLE, to_ms
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.controller.api import ControllerApi
    from broker.server import RequestContext

API_KEY = 22
log = structlog.get_logger(__name__)
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
FENCED_VERSION = 4  # PRODUCER_FENCED (KIP-588); older clients get INVALID_PRODUCER_EPOCH

# Errors of the controller round trip that a later attempt can get past (another node is
# the controller, the metadata commit timed out, this broker is re-registering). Kafka's
# broker answers COORDINATOR_LOAD_IN_PROGRESS while it has no block, and clients retry it.
_RETRIABLE = frozenset({
    ErrorCode.not_controller,
    ErrorCode.request_timed_out,
    ErrorCode.stale_broker_epoch,
    ErrorCode.broker_id_not_registered,
    ErrorCode.coordinator_load_in_progress,
})


class ProducerIdManager:
    """Hands out producer ids from blocks the controller commits to the metadata log.

    One block is fetched at a time, when the current one is used up; callers that arrive
    meanwhile wait for it instead of fetching blocks of their own."""

    def __init__(self, allocate: Callable[[], Awaitable[AllocateProducerIdsReply]]) -> None:
        self._allocate = allocate
        self._next = 0
        self._end = 0  # exclusive
        self._lock = asyncio.Lock()

    @property
    def remaining(self) -> int:
        return self._end - self._next

    async def generate(self) -> int:
        """The next producer id; raises KafkaError (COORDINATOR_LOAD_IN_PROGRESS when no
        block could be had now, which clients retry)."""
        if self._next >= self._end:
            async with self._lock:
                if self._next >= self._end:
                    await self._fetch_block()
        pid = self._next
        self._next += 1
        return pid

    async def _fetch_block(self) -> None:
        try:
            reply = await self._allocate()
        except KafkaError as exc:
            code = exc.error_code
            if code in _RETRIABLE:
                code = ErrorCode.coordinator_load_in_progress
            raise KafkaError(code, f"no producer id block: {exc.message}") from exc
        if reply.error is not ErrorCode.none:
            code = (
                ErrorCode.coordinator_load_in_progress if reply.error in _RETRIABLE
                else reply.error
            )
            raise KafkaError(code, f"no producer id block: the controller said {reply.error.name}")
        if reply.producer_id_start < 0 or reply.producer_id_len <= 0:
            raise KafkaError(
                ErrorCode.unknown_server_error,
                f"bad producer id block {reply.producer_id_start}+{reply.producer_id_len}",
            )
        if reply.producer_id_start < self._end:
            raise KafkaError(
                ErrorCode.unknown_server_error,
                f"producer id block {reply.producer_id_start} goes back from {self._end}",
            )
        self._next = reply.producer_id_start
        self._end = reply.producer_id_start + reply.producer_id_len
        log.info("producer_id_block", start=self._next, end=self._end)


class ProducerIdSource(Protocol):
    """Where a broker's producer ids come from: blocks the controller allocates to this
    broker under its current epoch, handed out by the node's one manager (made on first
    use)."""

    producer_ids: ProducerIdManager | None

    @property
    def node_id(self) -> int: ...

    @property
    def broker_epoch(self) -> int: ...

    @property
    def controller(self) -> ControllerApi: ...


class InitProducerIdNode(TxnBrokerServices, ProducerIdSource, Protocol):
    """InitProducerId's node: a transactional producer's id from its coordinator, any
    other from this broker's blocks."""


def node_producer_ids(node: ProducerIdSource) -> ProducerIdManager:
    """The node's manager (`node.producer_ids`), made on first use if the node has none."""
    manager = node.producer_ids
    if manager is None:
        manager = ProducerIdManager(lambda: allocate_for_node(node))
        node.producer_ids = manager
    return manager


async def allocate_for_node(node: ProducerIdSource) -> AllocateProducerIdsReply:
    """One block for this broker from the controller, under its current broker epoch."""
    epoch = node.broker_epoch
    if epoch < 0:
        raise KafkaError(ErrorCode.coordinator_load_in_progress, "broker not registered yet")
    return await node.controller.allocate_producer_ids(node.node_id, epoch)


def _response(request: Any, error: ErrorCode, producer_id: int = NO_PRODUCER_ID,
              producer_epoch: int = NO_PRODUCER_EPOCH) -> Any:
    mod = response_module(request)
    return build(
        mod.InitProducerIdResponse, throttle_time=NO_THROTTLE, error_code=error,
        producer_id=producer_id, producer_epoch=producer_epoch,
    )


async def _transactional(node: InitProducerIdNode, ctx: RequestContext, request: Any,
                         pid: int, epoch: int) -> Any:
    tid = str(request.transactional_id)
    if tid == "":
        return _response(request, ErrorCode.invalid_request)
    try:
        service = _txn.service(node)
    except KafkaError as exc:
        return _response(request, exc.error_code)
    result = await service.init_producer_id(
        tid, to_ms(request.transaction_timeout), pid, epoch)
    error = result.error
    if error is ErrorCode.producer_fenced and ctx.api_version < FENCED_VERSION:
        error = ErrorCode.invalid_producer_epoch
    if error is not ErrorCode.none:
        log.info("init_producer_id_transactional_failed", client=ctx.client_id,
                 transactional_id=tid, error=error.name)
        return _response(request, error)
    log.debug("transactional_producer_id", transactional_id=tid,
              producer_id=result.producer_id, producer_epoch=result.producer_epoch)
    return _response(request, ErrorCode.none, result.producer_id, result.producer_epoch)


async def handle(node: InitProducerIdNode, ctx: RequestContext, request: Any) -> Any:
    tid = request.transactional_id
    if tid and not allowed(node, ctx, Op.WRITE, Res.TRANSACTIONAL_ID, tid):
        # a transactional producer needs WRITE on its transactional id (Kafka)
        return _response(request, ErrorCode.transactional_id_authorization_failed)
    if getattr(request, "enable2_pc", False) or getattr(request, "keep_prepared_txn", False):
        # KIP-939: no two-phase commit here (Kafka with transaction.two.phase.commit.enable
        # false, which checks these before anything else for a transactional id)
        log.info("init_producer_id_2pc_refused", client=ctx.client_id, transactional_id=tid,
                 enable_2pc=getattr(request, "enable2_pc", False),
                 keep_prepared_txn=getattr(request, "keep_prepared_txn", False))
        if tid is None or tid == "":
            return _response(request, ErrorCode.invalid_request)
        if getattr(request, "enable2_pc", False):
            return _response(request, ErrorCode.transactional_id_authorization_failed)
        return _response(request, ErrorCode.unsupported_version)
    # An idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic
    # (Kafka's KIP-679 rule); a transactional one WRITE on its transactional id (above).
    if tid is None and not (allowed(node, ctx, Op.IDEMPOTENT_WRITE, Res.CLUSTER)
                            or allowed_on_any(node, ctx, Op.WRITE, Res.TOPIC)):
        return _response(request, ErrorCode.cluster_authorization_failed)
    pid = getattr(request, "producer_id", NO_PRODUCER_ID)
    epoch = getattr(request, "producer_epoch", NO_PRODUCER_EPOCH)
    if (pid == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_EPOCH):
        return _response(request, ErrorCode.invalid_request)
    if request.transactional_id is not None:
        return await _transactional(node, ctx, request, int(pid), int(epoch))
    try:
        new_pid = await node_producer_ids(node).generate()
    except KafkaError as exc:
        log.info("init_producer_id_failed", client=ctx.client_id, error=exc.error_code.name,
                 reason=exc.message)
        return _response(request, exc.error_code)
    log.debug("producer_id_assigned", producer_id=new_pid, client=ctx.client_id,
             version=ctx.api_version)
    return _response(request, ErrorCode.none, new_pid, 0)
