"""Finishing other processes' transactions: the Kafka requests the exactly-once sink sends to
the transaction coordinator itself (kio entities on Skiff's client connection).

librdkafka can only end the transaction of the producer that began it. The exactly-once
sink begins a transaction in each Spark task and ends it on the driver, in another process,
so the driver speaks to the coordinator directly, as Flink's Kafka sink does through the
Java client's internals:

    FindCoordinator(TRANSACTION, id) v4  -> the coordinator of a transactional id
    DescribeTransactions v0              -> state, producer id and epoch of an id (the task
                                            learns the id/epoch librdkafka does not expose)
    EndTxn v3                            -> commit or abort the transaction of a producer id
                                            and epoch; the coordinator checks only the id,
                                            the producer id and the epoch, not the connection

Retriable answers (COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
CONCURRENT_TRANSACTIONS, a lost connection) are retried until a deadline; any other error is
the answer. Security: PLAINTEXT only (the sink refuses other `security.protocol`s for
exactly-once delivery when the query is planned).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from kio.schema.describe_transactions.v0 import request as describe_req
from kio.schema.end_txn.v3 import request as end_req
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4 import request as find_req
from kio.schema.types import ProducerId, TransactionalId
from kio.static.primitive import i8, i16

from pipeline._broker import KafkaConnection

FIND_COORDINATOR, END_TXN, DESCRIBE_TRANSACTIONS = 10, 26, 65
_KEY_TYPE_TRANSACTION = 1
_REQUEST_TIMEOUT_S = 10.0
_RETRIABLE = frozenset({
    ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator,
    ErrorCode.coordinator_not_available, ErrorCode.concurrent_transactions,
    ErrorCode.request_timed_out,
})
_REFIND = frozenset({ErrorCode.not_coordinator, ErrorCode.coordinator_not_available})
T = TypeVar("T")


class TxnError(RuntimeError):
    """The coordinator's final answer was an error (or no answer before the deadline)."""

    def __init__(self, message: str, error: ErrorCode | None = None) -> None:
        super().__init__(message)
        self.error = error


@dataclass(frozen=True)
class TxnState:
    transactional_id: str
    state: str  # Kafka's name: Empty, Ongoing, PrepareCommit, CompleteCommit, ...
    producer_id: int
    producer_epoch: int
    partitions: frozenset[tuple[str, int]]


@dataclass(frozen=True)
class EndResult:
    transactional_id: str
    error: ErrorCode


def _hosts(bootstrap: str) -> list[tuple[str, int]]:
    out = []
    for item in bootstrap.split(","):
        item = item.strip()
        if "://" in item:
            item = item.split("://", 1)[1]
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"bootstrap server {item!r} is not host:port")
        out.append((host.strip("[]"), int(port)))
    return out


class CoordinatorClient:
    """Requests to transaction coordinators, one connection per broker, on one event loop
    (use it inside `asyncio.run`, or through the blocking helpers below)."""

    def __init__(self, bootstrap: str, deadline_s: float = 60.0) -> None:
        self.bootstrap = _hosts(bootstrap)
        self.deadline_s = deadline_s
        self._conns: dict[tuple[str, int], KafkaConnection] = {}
        self._coordinators: dict[str, tuple[str, int]] = {}

    def _conn(self, addr: tuple[str, int]) -> KafkaConnection:
        conn = self._conns.get(addr)
        if conn is None:
            conn = KafkaConnection(addr[0], addr[1], "skiff-spark-sink", close_on_timeout=True)
            self._conns[addr] = conn
        return conn

    async def close(self) -> None:
        for conn in self._conns.values():
            await conn.close()
        self._conns.clear()

    async def _retry(self, what: str, attempt: Callable[[], Awaitable[tuple[ErrorCode, T]]]
                     ) -> tuple[ErrorCode, T]:
        deadline = time.monotonic() + self.deadline_s
        backoff = 0.02
        while True:
            try:
                error, value = await attempt()
            except (OSError, TimeoutError, asyncio.IncompleteReadError) as e:
                error = ErrorCode.request_timed_out
                last = f"{type(e).__name__}: {e}"
            else:
                if error not in _RETRIABLE:
                    return error, value
                last = error.name
            if time.monotonic() + backoff > deadline:
                raise TxnError(f"{what}: no final answer within {self.deadline_s:.0f} s "
                               f"(last: {last})", error)
            await asyncio.sleep(backoff * (0.5 + random.random()))
            backoff = min(backoff * 2, 1.0)

    async def coordinator(self, transactional_id: str, *, refresh: bool = False
                          ) -> tuple[str, int]:
        if not refresh and transactional_id in self._coordinators:
            return self._coordinators[transactional_id]
        start = random.randrange(len(self.bootstrap))

        async def attempt() -> tuple[ErrorCode, tuple[str, int]]:
            nonlocal start
            addr = self.bootstrap[start % len(self.bootstrap)]
            start += 1
            resp = await self._conn(addr).request(
                FIND_COORDINATOR, 4, find_req.FindCoordinatorRequest(
                    key_type=i8(_KEY_TYPE_TRANSACTION),
                    coordinator_keys=(transactional_id,)), _REQUEST_TIMEOUT_S)
            c = resp.coordinators[0]
            return c.error_code, (str(c.host), int(c.port))

        error, addr = await self._retry(f"FindCoordinator({transactional_id})", attempt)
        if error is not ErrorCode.none:
            raise TxnError(f"FindCoordinator({transactional_id}): {error.name}", error)
        self._coordinators[transactional_id] = addr
        return addr

    async def _at_coordinator(self, what: str, transactional_id: str,
                              send: Callable[[KafkaConnection], Awaitable[tuple[ErrorCode, T]]]
                              ) -> tuple[ErrorCode, T]:
        async def attempt() -> tuple[ErrorCode, T]:
            addr = await self.coordinator(transactional_id)
            error, value = await send(self._conn(addr))
            if error in _REFIND:
                self._coordinators.pop(transactional_id, None)
            return error, value

        async def guarded() -> tuple[ErrorCode, T]:
            try:
                return await attempt()
            except (OSError, TimeoutError, asyncio.IncompleteReadError):
                self._coordinators.pop(transactional_id, None)
                raise

        return await self._retry(what, guarded)

    async def describe(self, transactional_id: str) -> TxnState:
        async def send(conn: KafkaConnection) -> tuple[ErrorCode, Any]:
            resp = await conn.request(DESCRIBE_TRANSACTIONS, 0,
                                      describe_req.DescribeTransactionsRequest(
                                          transactional_ids=(TransactionalId(transactional_id),)),
                                      _REQUEST_TIMEOUT_S)
            s = resp.transaction_states[0]
            return s.error_code, s

        error, s = await self._at_coordinator(
            f"DescribeTransactions({transactional_id})", transactional_id, send)
        if error is not ErrorCode.none:
            raise TxnError(f"DescribeTransactions({transactional_id}): {error.name}", error)
        return TxnState(transactional_id, str(s.transaction_state), int(s.producer_id),
                        int(s.producer_epoch),
                        frozenset((str(t.topic), int(p)) for t in s.topics for p in t.partitions))

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                      committed: bool) -> EndResult:
        """EndTxn until a final answer: NONE once PrepareCommit/PrepareAbort is written (or
        the transaction had already ended that way: a retry after a lost answer)."""
        async def send(conn: KafkaConnection) -> tuple[ErrorCode, None]:
            resp = await conn.request(END_TXN, 3, end_req.EndTxnRequest(
                transactional_id=TransactionalId(transactional_id),
                producer_id=ProducerId(producer_id), producer_epoch=i16(producer_epoch),
                committed=committed),
                _REQUEST_TIMEOUT_S)
            return resp.error_code, None

        verb = "commit" if committed else "abort"
        error, _ = await self._at_coordinator(
            f"EndTxn({verb} {transactional_id} producer {producer_id} epoch {producer_epoch})",
            transactional_id, send)
        return EndResult(transactional_id, error)


def describe(bootstrap: str, transactional_id: str) -> TxnState:
    async def go() -> TxnState:
        client = CoordinatorClient(bootstrap)
        try:
            return await client.describe(transactional_id)
        finally:
            await client.close()

    return asyncio.run(go())


def end_transactions(bootstrap: str, txns: Sequence[tuple[str, int, int]], committed: bool,
                     deadline_s: float = 60.0) -> list[EndResult | TxnError]:
    """EndTxn for every (transactional id, producer id, epoch), concurrently; one result per
    transaction, in order (a TxnError when no final answer came)."""
    async def go() -> list[EndResult | TxnError]:
        client = CoordinatorClient(bootstrap, deadline_s)
        try:
            results = await asyncio.gather(
                *(client.end_txn(t, p, e, committed) for t, p, e in txns),
                return_exceptions=True)
        finally:
            await client.close()
        out: list[EndResult | TxnError] = []
        for r in results:
            if isinstance(r, EndResult | TxnError):
                out.append(r)
            elif isinstance(r, BaseException):
                raise r
        return out

    return asyncio.run(go())
