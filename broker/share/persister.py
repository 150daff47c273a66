"""How a share-partition leader (and the group coordinator) reaches a share-partition's
state: Kafka's DefaultStatePersister. The share coordinator of a key is the leader of its
__share_group_state partition; on this broker it is called directly, elsewhere with the
state APIs (Initialize/Read/Write/Delete/ReadSummary ShareGroupState, APIs 83-87) over the
inter-broker listener. Answers a client retries on (NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, a lost connection) are retried
until `timeout_s` passes, as Kafka's persister does.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import structlog
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i16, i32, i64

from broker.coordinator.services import NodeSettings
from broker.errors import KafkaError
from broker.protocol.api import request_schema
from broker.protocol.kio_build import build
from broker.protocol.transport import ConnectionSecurity, KafkaConnection
from broker.share.coordinator import StateResult
from broker.share.coordinator_shell import ShareCoordinatorService
from broker.share.records import SharePartitionKey, StateBatch

log = structlog.get_logger(__name__)

INITIALIZE_SHARE_GROUP_STATE = 83
READ_SHARE_GROUP_STATE = 84
WRITE_SHARE_GROUP_STATE = 85
DELETE_SHARE_GROUP_STATE = 86
READ_SHARE_GROUP_STATE_SUMMARY = 87
REQUEST_TIMEOUT_S = 30.0
RETRY_S = 0.05
RETRY_MAX_S = 0.5

RETRIABLE = frozenset({
    ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress,
    ErrorCode.coordinator_not_available, ErrorCode.request_timed_out,
})


class StateConnection(Protocol):
    async def request(self, api_key: int, version: int, request: Any,
                      timeout_s: float) -> Any: ...

    async def close(self) -> None: ...


class Persister:
    def __init__(self, node: NodeSettings, coordinator: ShareCoordinatorService, *,
                 security: ConnectionSecurity | None = None, listener_name: str | None = None,
                 connect: Callable[[str, int], StateConnection] | None = None,
                 timeout_s: float = 15.0) -> None:
        self.node = node
        self.coordinator = coordinator
        self.security = security
        self.listener_name = listener_name or str(getattr(
            node.config, "inter_broker_listener_name", "PLAINTEXT"))
        self.connect = connect or (lambda h, p: KafkaConnection(
            h, p, client_id="skiff-share-persister", security=security))
        self.timeout_s = timeout_s
        self._connections: dict[tuple[str, int], StateConnection] = {}

    async def close(self) -> None:
        for conn in list(self._connections.values()):
            with contextlib.suppress(Exception):
                await conn.close()
        self._connections.clear()

    # ---- the operations ---------------------------------------------------------------

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> StateResult:
        return await self._route(
            key, lambda: self.coordinator.read(key, leader_epoch),
            READ_SHARE_GROUP_STATE, 0, lambda m: m.ReadShareGroupStateRequest(
                group_id=key.group_id, topics=(m.ReadStateData(
                    topic_id=key.topic_id, partitions=(m.PartitionData(
                        partition=i32(key.partition), leader_epoch=i32(leader_epoch)),)),)))

    async def write(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int,
                    start_offset: int, batches: tuple[StateBatch, ...],
                    delivery_complete_count: int = -1) -> StateResult:
        return await self._route(
            key, lambda: self.coordinator.write(key, state_epoch, leader_epoch, start_offset,
                                                batches, delivery_complete_count),
            WRITE_SHARE_GROUP_STATE, 1, lambda m: m.WriteShareGroupStateRequest(
                group_id=key.group_id, topics=(m.WriteStateData(
                    topic_id=key.topic_id, partitions=(build(
                        m.PartitionData, partition=i32(key.partition),
                        state_epoch=i32(state_epoch), leader_epoch=i32(leader_epoch),
                        start_offset=i64(start_offset),
                        delivery_complete_count=i32(delivery_complete_count),
                        state_batches=tuple(m.StateBatch(
                            first_offset=i64(b.first_offset), last_offset=i64(b.last_offset),
                            delivery_state=i8(b.delivery_state),
                            delivery_count=i16(b.delivery_count)) for b in batches)),)),)))

    async def initialize(self, key: SharePartitionKey, state_epoch: int,
                         start_offset: int) -> StateResult:
        return await self._route(
            key, lambda: self.coordinator.initialize(key, state_epoch, start_offset),
            INITIALIZE_SHARE_GROUP_STATE, 0, lambda m: m.InitializeShareGroupStateRequest(
                group_id=key.group_id, topics=(m.InitializeStateData(
                    topic_id=key.topic_id, partitions=(m.PartitionData(
                        partition=i32(key.partition), state_epoch=i32(state_epoch),
                        start_offset=i64(start_offset)),)),)))

    async def delete(self, key: SharePartitionKey) -> StateResult:
        return await self._route(
            key, lambda: self.coordinator.delete(key),
            DELETE_SHARE_GROUP_STATE, 0, lambda m: m.DeleteShareGroupStateRequest(
                group_id=key.group_id, topics=(m.DeleteStateData(
                    topic_id=key.topic_id, partitions=(m.PartitionData(
                        partition=i32(key.partition)),)),)))

    async def read_summary(self, key: SharePartitionKey) -> StateResult:
        return await self._route(
            key, lambda: self.coordinator.read_summary(key),
            READ_SHARE_GROUP_STATE_SUMMARY, 1, lambda m: m.ReadShareGroupStateSummaryRequest(
                group_id=key.group_id, topics=(m.ReadStateSummaryData(
                    topic_id=key.topic_id, partitions=(m.PartitionData(
                        partition=i32(key.partition), leader_epoch=i32(-1)),)),)))

    # ---- routing ---------------------------------------------------------------------

    async def _route(self, key: SharePartitionKey,
                     local: Callable[[], Awaitable[StateResult]], api_key: int,
                     version: int, make: Callable[[Any], Any]) -> StateResult:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        attempt = 0
        while True:
            result = await self._once(key, local, api_key, version, make)
            if result.error not in RETRIABLE or loop.time() >= deadline:
                return result
            attempt += 1
            await asyncio.sleep(min(RETRY_MAX_S, RETRY_S * attempt))

    async def _once(self, key: SharePartitionKey,
                    local: Callable[[], Awaitable[StateResult]], api_key: int, version: int,
                    make: Callable[[Any], Any]) -> StateResult:
        error, node_id, host, port, message = await self.coordinator.runtime.locate(
            key.coordinator_key(), self.listener_name)
        if error is not ErrorCode.none:
            return StateResult(error, message)
        if node_id == self.node.node_id:
            return await local()
        request_cls = request_schema(api_key, version)
        mod = importlib.import_module(request_cls.__module__)
        conn = self._connections.get((host, port))
        if conn is None:
            conn = self._connections[(host, port)] = self.connect(host, port)
        try:
            response = await conn.request(api_key, version, make(mod), REQUEST_TIMEOUT_S)
        except (TimeoutError, OSError, KafkaError, ConnectionError) as exc:
            log.info("share_persister_request_failed", api_key=api_key,
                     coordinator=f"{host}:{port}", error=repr(exc))
            dropped = self._connections.pop((host, port), None)
            if dropped is not None:
                with contextlib.suppress(Exception):
                    await dropped.close()
            return StateResult(ErrorCode.coordinator_not_available, repr(exc))
        return _result_of(response)


def _result_of(response: Any) -> StateResult:
    """The one partition's result of a state API answer."""
    for topic in response.results:
        for p in topic.partitions:
            return StateResult(
                error=p.error_code, message=p.error_message,
                state_epoch=int(getattr(p, "state_epoch", 0)),
                leader_epoch=int(getattr(p, "leader_epoch", -1)),
                start_offset=int(getattr(p, "start_offset", -1)),
                state_batches=tuple(StateBatch(int(b.first_offset), int(b.last_offset),
                                               int(b.delivery_state), int(b.delivery_count))
                                    for b in getattr(p, "state_batches", ())),
                delivery_complete_count=int(getattr(p, "delivery_complete_count", -1)))
    return StateResult(ErrorCode.unknown_server_error, "The answer holds no partition.")

