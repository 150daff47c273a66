"""How a worker of a broker with several (broker/node/shards.py) serves a request whose
partitions another worker owns.

Produce and Fetch stay with the worker the client's connection reached: its handler does
the checks (ACLs, quotas, the fetch answer's encoding) and calls its ReplicaManager, whose
`shard_router` (ShardRoutes here) appends and reads the partitions of the other workers
through the channel (broker/node/shard_channel.py): the other worker appends or reads them
with its own ReplicaManager (ShardOps), so a partition's log, producer state and high
watermark live in one process. A partition's appends keep the order its client's
connection sent them: the channel sends a call the moment it is made and the owner starts
its calls in arrival order. Fetch answers carry no records across: the owner answers where
the records lie (its process, descriptor and the file's identity, position and length), and
this worker opens the same file through /proc and sends it to the client with sendfile;
a file that is no longer the one named (a segment deleted meanwhile) is answered without
records, and the client fetches again.

A long poll over several workers' partitions reads each once; with less than min_bytes,
it waits on each worker's partitions at once, and when the first has something it reads
the others again without waiting, until min_bytes or the deadline.

ListOffsets, OffsetForLeaderEpoch, DeleteRecords, DescribeProducers and
AlterReplicaLogDirs are split: each worker answers its partitions with its own handler, and
the answers are merged (the first four answer an unreachable owner's partitions
NOT_LEADER_OR_FOLLOWER, as appends to it are answered; AlterReplicaLogDirs answers them
KAFKA_STORAGE_ERROR, as Kafka answers a replica that is offline);
DescribeLogDirs is asked of every worker, each answering for the partitions it holds. Every
other request a worker receives goes whole to worker 0, the node process, which runs the
coordinators, the controller channel and the admin APIs (`forward_to_node`).

A transactional Produce goes whole to worker 0 (`transactional_to_node`), which asks the
transaction coordinator. With KIP-890's verification, each partition's owner takes the
producer's verification guard before worker 0 asks, and names it by a token; the append
carries the token back and is checked against the guard it names, so a transaction marker
written meanwhile (which drops the guard) fails the late append as it does in one process.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import contextlib
import dataclasses
import itertools
import os
import pickle
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import structlog
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from broker.errors import KafkaError
from broker.log import AppendResult
from broker.log.segment import FileSlice
from broker.log.txn_index import AbortedTxn
from broker.metrics.stats import mark_remote_wait
from broker.node.shard_channel import (
    ChannelClosed,
    ShardCallFailed,
    ShardChannelClient,
    ShardPeer,
)
from broker.node.shards import ShardLayout
from broker.protocol.api import ApiTable, response_schema
from broker.protocol.frames import ResponseChunks, is_file_slice
from broker.protocol.headers import encode_body, encode_request, parse_request
from broker.protocol.records import iter_batch_headers
from broker.replication.producer_state import (
    Guard,
    RemoteVerificationGuard,
    VerificationGuard,
)
from broker.replication.replica_manager import (
    FetchPartitionRequest,
    FetchPartitionResult,
    ProducerRow,
    ReplicaManager,
    TopicPartition,
)
from broker.server.context import RequestContext
from broker.server.dispatch import BoundDispatcher, BoundEntry, NoResponse

log = structlog.get_logger(__name__)

ChannelOf = Callable[[int], ShardChannelClient | None]
LIST_OFFSETS, DELETE_RECORDS, OFFSET_FOR_LEADER_EPOCH = 2, 21, 23
ALTER_REPLICA_LOG_DIRS, DESCRIBE_LOG_DIRS, DESCRIBE_PRODUCERS = 34, 35, 61
# answered per owner of the partitions they name, the answers merged
SPLIT_APIS = frozenset({LIST_OFFSETS, DELETE_RECORDS, OFFSET_FOR_LEADER_EPOCH,
                        DESCRIBE_PRODUCERS})
# answered by every worker for the partitions it holds, the answers merged
BROADCAST_APIS = frozenset({DESCRIBE_LOG_DIRS})
# what the owner keeps alive after answering a fetch, so the descriptors it named stay
# open (and cannot be reused for another file) while the reader opens them
_KEPT_ANSWERS = 1024
# verification guards named to other workers whose append has not come (yet)
_KEPT_GUARDS = 100_000


def _unreachable(owner: int, why: object) -> KafkaError:
    return KafkaError(ErrorCode.not_leader_or_follower,
                      f"worker {owner} of this broker, which owns the partition, is not "
                      f"reachable: {why}")


class _ViewLog:
    """The part of another worker's log a PartitionView carries: `read` and
    `collect_aborted_txns` as the log answers them, within what was read."""

    def __init__(self, log_start_offset: int, base: int, data: bytes,
                 aborted: list[AbortedTxn]) -> None:
        self.log_start_offset = log_start_offset
        self._data, self._aborted = data, aborted
        # (last offset, position) of each batch, to answer a read from inside the data
        self._batches = [(h.last_offset, pos) for pos, h in
                         iter_batch_headers(memoryview(data), validate_crc=False)]
        self._base = base

    def read(self, offset: int, max_bytes: int, upto: int) -> _Bytes:
        i = bisect.bisect_left(self._batches, (offset, -1))
        if offset < self._base or i >= len(self._batches):
            return _Bytes(b"")
        pos = self._batches[i][1]
        return _Bytes(self._data[pos:pos + max_bytes])

    def collect_aborted_txns(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        return [a for a in self._aborted
                if a.last_offset >= fetch_offset and a.first_offset < upper_bound]


class _Bytes:
    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def read_bytes(self) -> bytes:
        return self.data


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionView:
    """A partition another worker of this broker leads, as a share-partition reads it."""

    topic: str
    index: int
    leader_epoch: int
    high_watermark: int
    last_stable_offset: int
    log: _ViewLog


# ---- values that cross the channel: plain tuples ---------------------------------------

def _token_for(guard: Guard | None, owner: int) -> int | None:
    if isinstance(guard, RemoteVerificationGuard) and guard.owner == owner:
        return guard.token
    return None


def _append_out(result: AppendResult | KafkaError) -> tuple[Any, ...]:
    if isinstance(result, KafkaError):
        return (False, int(result.error_code), result.message)
    return (True, result.base_offset, result.last_offset, result.log_append_time_ms,
            result.log_start_offset, result.records_count, result.max_timestamp)


def _append_in(t: tuple[Any, ...]) -> AppendResult | KafkaError:
    if not t[0]:
        return KafkaError(ErrorCode(t[1]), t[2])
    return AppendResult(t[1], t[2], t[3], t[4], t[5], t[6])


def _request_out(r: FetchPartitionRequest) -> tuple[Any, ...]:
    return (r.topic, r.partition, r.fetch_offset, r.partition_max_bytes,
            r.current_leader_epoch, r.last_fetched_epoch)


def _result_out(r: FetchPartitionResult, pid: int) -> tuple[Any, ...]:
    records: tuple[int, int, int, int, int, int] | None = None
    sl = r.records
    if sl is not None and sl.length > 0 and sl.file is not None:
        fd = sl.file if isinstance(sl.file, int) else sl.file.fileno()
        st = os.fstat(fd)
        records = (pid, fd, st.st_dev, st.st_ino, sl.position, sl.length)
    return (r.topic, r.partition, int(r.error_code), r.high_watermark, r.last_stable_offset,
            r.log_start_offset, records, r.aborted_transactions, r.diverging_epoch,
            r.preferred_read_replica, r.leader_id, r.leader_epoch, sl is not None)


def _open_slice(where: tuple[int, int, int, int, int, int]) -> FileSlice | None:
    """The owner's file, opened here; None when it is no longer the file the owner named."""
    pid, fd, dev, ino, position, length = where
    try:
        mine = os.open(f"/proc/{pid}/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    st = os.fstat(mine)
    if (st.st_dev, st.st_ino) != (dev, ino):
        os.close(mine)
        return None
    return FileSlice(os.fdopen(mine, "rb", buffering=0), position, length)


def _result_in(t: tuple[Any, ...]) -> FetchPartitionResult:
    records = None
    if t[6] is not None:
        records = _open_slice(t[6])
    elif t[12]:
        records = FileSlice(None, 0, 0)
    return FetchPartitionResult(
        t[0], t[1], ErrorCode(t[2]), t[3], t[4], t[5], records, t[7], t[8], t[9], t[10], t[11])


def _ctx_out(ctx: RequestContext) -> tuple[Any, ...]:
    return (ctx.api_key, ctx.api_version, ctx.correlation_id, ctx.client_id, ctx.listener_name,
            ctx.peer_host, ctx.peer_port, ctx.received_ms, ctx.connection_id, ctx.principal,
            ctx.security_protocol, ctx.token_authenticated)


def _ctx_in(t: tuple[Any, ...], apis: ApiTable) -> RequestContext:
    return RequestContext(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], apis,
                          connection_id=t[8], principal=t[9], security_protocol=t[10],
                          token_authenticated=t[11])


# ---- the side that received the request -------------------------------------------------

class ShardRoutes:
    """ReplicaManager.shard_router of one worker."""

    def __init__(self, layout: ShardLayout, replicas: ReplicaManager,
                 channel_of: ChannelOf) -> None:
        self.layout, self.replicas, self.channel_of = layout, replicas, channel_of

    def owns(self, topic: str, partition: int) -> bool:
        return self.layout.owns(topic, partition)

    def _by_owner(self, keys: Iterable[TopicPartition]) -> dict[int, list[TopicPartition]]:
        by_owner: dict[int, list[TopicPartition]] = {}
        for key in keys:
            by_owner.setdefault(self.layout.owner(*key), []).append(key)
        return by_owner

    async def _ask(self, calls: Mapping[int, tuple[Any, ...]]
                   ) -> list[tuple[int, Any | ConnectionError | ShardCallFailed]]:
        """Each owner's call (name and arguments), all made at once: (owner, its answer, or
        the ChannelClosed/ShardCallFailed its call failed with), in the order given."""
        futures = [(owner, self._call(owner, *call)) for owner, call in calls.items()]
        out: list[tuple[int, Any]] = []
        for owner, future in futures:
            try:
                out.append((owner, await future))
            except (ConnectionError, ShardCallFailed) as exc:
                out.append((owner, exc))
        return out

    def _call(self, owner: int, name: str, *args: Any) -> asyncio.Future[Any]:
        channel = self.channel_of(owner)
        if channel is None:
            future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            future.set_exception(ChannelClosed(f"worker {owner} is not connected"))
            return future
        return channel.call(name, *args)

    async def append(
        self, entries: dict[TopicPartition, bytes | memoryview], required_acks: int,
        timeout_ms: int, verification: Mapping[TopicPartition, Guard | None] | None,
    ) -> dict[TopicPartition, AppendResult | KafkaError]:
        layout, own = self.layout, self.layout.index
        local: dict[TopicPartition, bytes | memoryview] = {}
        remote: dict[int, list[tuple[str, int, pickle.PickleBuffer]]] = {}
        results: dict[TopicPartition, AppendResult | KafkaError] = {}
        for key, records in entries.items():
            owner = layout.owner(*key)
            if owner == own:
                local[key] = records
            else:
                # out of band: the channel writes the records from the request's buffer
                remote.setdefault(owner, []).append((key[0], key[1], pickle.PickleBuffer(records)))
        calls: list[tuple[int, list[tuple[str, int, pickle.PickleBuffer]],
                          asyncio.Future[Any]]] = []
        for owner, items in remote.items():
            tokens: list[int | None] | None = None
            if verification is not None:
                tokens = [_token_for(verification.get((topic, index)), owner)
                          for topic, index, _ in items]
            try:
                calls.append((owner, items, self._call(owner, "append", items, required_acks,
                                                       timeout_ms, tokens)))
            except (ConnectionError, ValueError) as exc:
                for topic, index, _ in items:
                    results[(topic, index)] = _unreachable(owner, exc)
        if local:
            results.update(await self.replicas.append_local(
                local, required_acks=required_acks, timeout_ms=timeout_ms,
                verification=verification))
        for owner, items, future in calls:
            try:
                answers = await future
            except (ConnectionError, ShardCallFailed) as exc:
                for topic, index, _ in items:
                    results[(topic, index)] = _unreachable(owner, exc)
                continue
            for topic, index, answer in answers:
                results[(topic, index)] = _append_in(answer)
        return results

    async def start_verifications(
        self, producer_id: int, epoch: int, sequences: Mapping[TopicPartition, int],
        supports_epoch_bump: bool,
    ) -> dict[TopicPartition, Guard | None]:
        by_owner = self._by_owner(sequences)
        guards: dict[TopicPartition, Guard | None] = dict.fromkeys(sequences)
        guards.update(self.replicas.start_verifications_local(
            producer_id, epoch, {k: sequences[k] for k in by_owner.pop(self.layout.index, [])},
            supports_epoch_bump=supports_epoch_bump))
        asked = await self._ask({
            owner: ("start_verification", [(t, p, sequences[(t, p)]) for t, p in keys],
                    producer_id, epoch, supports_epoch_bump)
            for owner, keys in by_owner.items()})
        for owner, answers in asked:
            if isinstance(answers, Exception):
                # the append to it answers the partitions (not reachable)
                log.warning("verification_not_started", worker=owner, error=str(answers))
                continue
            for topic, index, token in answers:
                guards[(topic, index)] = (None if token is None
                                          else RemoteVerificationGuard(owner, token))
        return guards

    async def partition_view(self, topic: str, partition: int, offset: int, max_bytes: int,
                             read_committed: bool) -> PartitionView:
        """What a share-partition reads of a partition another worker owns (broker/share):
        its leader epoch and offsets, and up to `max_bytes` of its records from `offset`
        (below its high watermark, or its last stable offset with `read_committed`, with the
        aborted transactions in them). Raises KafkaError as the owner's partition does."""
        owner = self.layout.owner(topic, partition)
        try:
            answer = await self._call(owner, "partition_view", topic, partition, offset,
                                      max_bytes, read_committed)
        except (ConnectionError, ShardCallFailed) as exc:
            raise _unreachable(owner, exc) from None
        if answer[0] == "error":
            raise KafkaError(ErrorCode(answer[1]), answer[2])
        _, epoch, start, hw, lso, aborted, base, data = answer
        return PartitionView(topic, partition, epoch, hw, lso,
                             _ViewLog(start, base, data, [AbortedTxn(*a) for a in aborted]))

    async def producers(self, keys: list[TopicPartition] | None
                        ) -> dict[TopicPartition, list[ProducerRow]]:
        """The producers of the partitions their owners lead (`keys`; None: every partition
        of every worker). A worker that cannot be reached fails the call: the answer
        would be partial."""
        by_owner: dict[int, list[TopicPartition] | None] = (
            dict.fromkeys(range(self.layout.count)) if keys is None
            else dict(self._by_owner(keys)))
        out = self.replicas.producers_local(by_owner.pop(self.layout.index, []))
        for owner, answers in await self._ask(
                {owner: ("producers", ks) for owner, ks in by_owner.items()}):
            if isinstance(answers, Exception):
                raise _unreachable(owner, answers)
            for topic, index, rows in answers:
                out[(topic, index)] = [tuple(r) for r in rows]
        return out

    async def _from_owners(self, keys: list[TopicPartition],
                           local: Callable[[list[TopicPartition]], dict[TopicPartition, Any]],
                           call: str) -> dict[TopicPartition, Any]:
        """`local` of this worker's partitions and `call` of each other owner's, which
        answers (topic, index, value) per partition; an owner that cannot be reached leaves
        its partitions out."""
        by_owner = self._by_owner(keys)
        out = local(by_owner.pop(self.layout.index, []))
        for owner, answers in await self._ask(
                {owner: (call, ks) for owner, ks in by_owner.items()}):
            if isinstance(answers, Exception):
                log.warning(f"{call}_missing", worker=owner, error=str(answers))
                continue
            out.update(((topic, index), value) for topic, index, value in answers)
        return out

    async def partition_offsets(self, keys: list[TopicPartition]
                                ) -> dict[TopicPartition, tuple[int, int, int]]:
        """(log start, high watermark, log end) of the partitions their owners lead."""
        return await self._from_owners(keys, self.replicas.offsets_local, "partition_offsets")

    async def replica_progress(self, keys: list[TopicPartition]
                               ) -> dict[TopicPartition, tuple[int, dict[int, int]]]:
        """A reassignment's copy progress of the partitions their owners lead: (log end,
        each follower's log end)."""
        return await self._from_owners(keys, self.replicas.progress_local, "replica_progress")

    async def write_txn_marker(self, topic: str, partition: int, producer_id: int,
                               producer_epoch: int, coordinator_epoch: int, committed: bool,
                               timeout_ms: int) -> ErrorCode:
        owner = self.layout.owner(topic, partition)
        try:
            code = await self._call(owner, "write_txn_marker", topic, partition, producer_id,
                                    producer_epoch, coordinator_epoch, committed, timeout_ms)
        except (ConnectionError, ShardCallFailed) as exc:
            log.warning("txn_marker_not_forwarded", topic=topic, partition=partition,
                        worker=owner, error=str(exc))
            return ErrorCode.not_leader_or_follower
        return ErrorCode(code)

    async def wait_any(self, keys: list[TopicPartition], for_log_end: bool,
                       timeout_s: float) -> bool:
        by_owner = self._by_owner(keys)
        own = self.layout.index
        if set(by_owner) <= {own}:
            return await self.replicas.wait_any_local(keys, for_log_end=for_log_end,
                                                      timeout_s=timeout_s)
        waits: list[asyncio.Future[Any]] = []
        for owner, ks in by_owner.items():
            if owner == own:
                waits.append(asyncio.ensure_future(self.replicas.wait_any_local(
                    ks, for_log_end=for_log_end, timeout_s=timeout_s)))
            else:
                waits.append(self._call(owner, "wait_any", ks, for_log_end, timeout_s))
        try:
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            return any(not f.cancelled() and f.exception() is None and f.result()
                       for f in done) or any(f.exception() is not None for f in done)
        finally:
            for f in waits:
                if not f.done():
                    f.cancel()

    async def fetch(
        self, requests: list[FetchPartitionRequest], replica_id: int, max_wait_ms: int,
        min_bytes: int, max_bytes: int, replica_epoch: int, client_rack: str | None,
        isolation_level: int,
    ) -> list[FetchPartitionResult]:
        own = self.layout.index
        groups: dict[int, list[int]] = {}
        for i, req in enumerate(requests):
            groups.setdefault(self.layout.owner(req.topic, req.partition), []).append(i)
        read = _GroupRead(self, requests, replica_id, max_bytes, replica_epoch, client_rack,
                          isolation_level)
        if set(groups) <= {own}:
            return await read.local(requests, max_wait_ms, min_bytes)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait_ms / 1000
        results = await read.all(groups, 0)
        while True:
            total = sum(r.size for r in results if r is not None)
            errored = any(
                r is None or r.error_code != ErrorCode.none or r.diverging_epoch is not None
                or r.preferred_read_replica >= 0 for r in results)
            remaining = deadline - loop.time()
            if total >= min_bytes or errored or remaining <= 0:
                return _within(results, max_bytes)
            mark_remote_wait()  # the request's RemoteTimeMs starts (metrics)
            results = await read.first_news(groups, int(remaining * 1000))


def _within(results: list[FetchPartitionResult | None],
            max_bytes: int) -> list[FetchPartitionResult]:
    """The answers in request order, records held to `max_bytes` over all workers (the first
    records always go, as one worker's read does)."""
    out: list[FetchPartitionResult] = []
    total = 0
    for r in results:
        assert r is not None
        size = r.size
        if size and total and total + size > max_bytes:
            r.records = FileSlice(None, 0, 0)
            size = 0
        total += size
        out.append(r)
    return out


class _GroupRead:
    """One Fetch's reads, per worker owning some of its partitions."""

    def __init__(self, routes: ShardRoutes, requests: list[FetchPartitionRequest],
                 replica_id: int, max_bytes: int, replica_epoch: int, client_rack: str | None,
                 isolation_level: int) -> None:
        self.routes, self.requests = routes, requests
        self.replica_id, self.max_bytes, self.replica_epoch = replica_id, max_bytes, replica_epoch
        self.client_rack, self.isolation_level = client_rack, isolation_level

    async def local(self, requests: list[FetchPartitionRequest], max_wait_ms: int,
                    min_bytes: int) -> list[FetchPartitionResult]:
        return await self.routes.replicas.fetch_local(
            requests, replica_id=self.replica_id, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
            max_bytes=self.max_bytes, replica_epoch=self.replica_epoch,
            client_rack=self.client_rack, isolation_level=self.isolation_level)

    def start(self, owner: int, indexes: list[int], max_wait_ms: int,
              min_bytes: int) -> asyncio.Future[list[FetchPartitionResult]]:
        reqs = [self.requests[i] for i in indexes]
        if owner == self.routes.layout.index:
            return asyncio.ensure_future(self.local(reqs, max_wait_ms, min_bytes))
        return asyncio.ensure_future(self._remote(owner, reqs, max_wait_ms, min_bytes))

    async def _remote(self, owner: int, reqs: list[FetchPartitionRequest], max_wait_ms: int,
                      min_bytes: int) -> list[FetchPartitionResult]:
        future = self.routes._call(owner, "fetch", [_request_out(r) for r in reqs],
                                   self.replica_id, max_wait_ms, min_bytes, self.max_bytes,
                                   self.replica_epoch, self.client_rack, self.isolation_level)
        try:
            answers = await future
        except (ConnectionError, ShardCallFailed) as exc:
            log.warning("fetch_not_forwarded", worker=owner, error=str(exc))
            code = _unreachable(owner, exc).error_code
            return [FetchPartitionResult(r.topic, r.partition, code) for r in reqs]
        except asyncio.CancelledError:
            channel = self.routes.channel_of(owner)
            if channel is not None:
                channel.forget(future)
            raise
        return [_result_in(a) for a in answers]

    def _place(self, into: list[FetchPartitionResult | None], indexes: list[int],
               got: list[FetchPartitionResult]) -> None:
        for i, r in zip(indexes, got, strict=True):
            into[i] = r

    async def all(self, groups: dict[int, list[int]],
                  max_wait_ms: int) -> list[FetchPartitionResult | None]:
        results: list[FetchPartitionResult | None] = [None] * len(self.requests)
        running = [(ix, self.start(owner, ix, max_wait_ms, 0)) for owner, ix in groups.items()]
        for ix, future in running:
            self._place(results, ix, await future)
        return results

    async def first_news(self, groups: dict[int, list[int]],
                         max_wait_ms: int) -> list[FetchPartitionResult | None]:
        """Long polls every worker's partitions until one has something, then reads the
        others once more without waiting."""
        results: list[FetchPartitionResult | None] = [None] * len(self.requests)
        polls = {self.start(owner, ix, max_wait_ms, 1): (owner, ix)
                 for owner, ix in groups.items()}
        try:
            done, _ = await asyncio.wait(polls, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            for f in polls:
                f.cancel()
            raise
        rest: list[tuple[list[int], asyncio.Future[list[FetchPartitionResult]]]] = []
        for future, (owner, ix) in polls.items():
            if future in done:
                self._place(results, ix, future.result())
            else:
                future.cancel()
                rest.append((ix, self.start(owner, ix, 0, 0)))
        for ix, future in rest:
            self._place(results, ix, await future)
        return results


# ---- the side that owns the partitions ---------------------------------------------------

class ShardOps:
    """What a worker answers on its channel for the others: appends, reads and waits on its
    partitions, and requests (`handle`) run by its own handlers: `listener_of` gives the
    handlers unwrapped (a part of a split request, or one asked of every worker, is
    answered here, not split or asked again)."""

    def __init__(self, replicas: ReplicaManager,
                 listener_of: Callable[[str], tuple[BoundDispatcher, ApiTable] | None]) -> None:
        self.replicas = replicas
        self.listener_of = listener_of
        self._pid = os.getpid()
        self._kept: collections.deque[list[FetchPartitionResult]] = collections.deque(
            maxlen=_KEPT_ANSWERS)
        # the verification guards named to other workers, until the append that carries
        # the token back (a guard dropped meanwhile, by a marker, is no longer the
        # producer's and fails that append); the oldest are forgotten past the bound
        self._guards: collections.OrderedDict[int, VerificationGuard] = (
            collections.OrderedDict())
        self._tokens = itertools.count(1)

    def ops(self) -> dict[str, Callable[..., Awaitable[Any]]]:
        return {"append": self.append, "fetch": self.fetch, "wait_any": self.wait_any,
                "write_txn_marker": self.write_txn_marker, "handle": self.handle,
                "start_verification": self.start_verification,
                "partition_offsets": self.partition_offsets,
                "replica_progress": self.replica_progress,
                "partition_view": self.partition_view, "producers": self.producers}

    async def producers(self, peer: ShardPeer, keys: list[TopicPartition] | None
                        ) -> list[tuple[str, int, list[ProducerRow]]]:
        return [(t, p, rows) for (t, p), rows in self.replicas.producers_local(keys).items()]

    async def partition_view(self, peer: ShardPeer, topic: str, partition: int, offset: int,
                             max_bytes: int, read_committed: bool) -> tuple[Any, ...]:
        try:
            part = self.replicas.leader_partition(topic, partition)
            plog = part.log
            upto = part.last_stable_offset if read_committed else part.high_watermark
            data, aborted = b"", []
            if max_bytes > 0 and plog.log_start_offset <= offset < upto:
                data = plog.read(offset, max_bytes, upto).read_bytes()
                if read_committed:
                    aborted = [(a.producer_id, a.first_offset, a.last_offset,
                                a.last_stable_offset)
                               for a in plog.collect_aborted_txns(offset, upto)]
            return ("ok", int(part.leader_epoch), int(plog.log_start_offset),
                    int(part.high_watermark), int(part.last_stable_offset), aborted,
                    offset, data)
        except KafkaError as exc:
            return ("error", int(exc.error_code), exc.message)

    async def partition_offsets(self, peer: ShardPeer, keys: list[TopicPartition]
                                ) -> list[tuple[str, int, tuple[int, int, int]]]:
        return [(t, p, offsets) for (t, p), offsets in self.replicas.offsets_local(keys).items()]

    async def replica_progress(self, peer: ShardPeer, keys: list[TopicPartition]
                               ) -> list[tuple[str, int, tuple[int, dict[int, int]]]]:
        return [(t, p, progress)
                for (t, p), progress in self.replicas.progress_local(keys).items()]

    async def start_verification(self, peer: ShardPeer, items: list[tuple[str, int, int]],
                                 producer_id: int, epoch: int, supports_epoch_bump: bool,
                                 ) -> list[tuple[str, int, int | None]]:
        guards = self.replicas.start_verifications_local(
            producer_id, epoch, {(t, p): s for t, p, s in items},
            supports_epoch_bump=supports_epoch_bump)
        answers: list[tuple[str, int, int | None]] = []
        for (topic, index), guard in guards.items():
            token = None
            if guard is not None:
                token = next(self._tokens)
                self._guards[token] = guard
                if len(self._guards) > _KEPT_GUARDS:
                    self._guards.popitem(last=False)
            answers.append((topic, index, token))
        return answers

    async def append(self, peer: ShardPeer, items: list[tuple[str, int, memoryview]],
                     required_acks: int, timeout_ms: int,
                     tokens: list[int | None] | None = None) -> list[tuple[str, int, Any]]:
        entries: dict[TopicPartition, bytes | memoryview] = {(t, p): r for t, p, r in items}
        verification: dict[TopicPartition, Guard | None] | None = None
        if tokens is not None:
            guards = self._guards
            verification = {(t, p): None if token is None else guards.pop(token, None)
                            for (t, p, _), token in zip(items, tokens, strict=True)}
        results = await self.replicas.append_local(entries, required_acks=required_acks,
                                                   timeout_ms=timeout_ms,
                                                   verification=verification)
        return [(t, p, _append_out(results[(t, p)])) for t, p, _ in items]

    async def fetch(self, peer: ShardPeer, reqs: list[tuple[Any, ...]], replica_id: int,
                    max_wait_ms: int, min_bytes: int, max_bytes: int, replica_epoch: int,
                    client_rack: str | None, isolation_level: int) -> list[tuple[Any, ...]]:
        results = await self.replicas.fetch_local(
            [FetchPartitionRequest(*r) for r in reqs], replica_id=replica_id,
            max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
            replica_epoch=replica_epoch, client_rack=client_rack,
            isolation_level=isolation_level)
        self._kept.append(results)
        return [_result_out(r, self._pid) for r in results]

    async def wait_any(self, peer: ShardPeer, keys: list[TopicPartition], for_log_end: bool,
                       timeout_s: float) -> bool:
        return await self.replicas.wait_any_local(keys, for_log_end=for_log_end,
                                                  timeout_s=timeout_s)

    async def write_txn_marker(self, peer: ShardPeer, topic: str, partition: int,
                               producer_id: int, producer_epoch: int, coordinator_epoch: int,
                               committed: bool, timeout_ms: int) -> int:
        return int(await self.replicas.write_txn_marker(
            topic, partition, producer_id=producer_id, producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch, committed=committed, timeout_ms=timeout_ms))

    async def handle(self, peer: ShardPeer, ctx_fields: tuple[Any, ...],
                     frame: bytes) -> tuple[Any, ...]:
        """A request another worker received, run by this worker's handler for its
        listener: ("body", encoded answer, throttle ms), ("none",), ("mute", throttle ms)
        or ("close", why)."""
        listener = self.listener_of(ctx_fields[4])
        if listener is None:
            return ("close", f"no listener {ctx_fields[4]} on worker")
        dispatcher, apis = listener
        parsed = parse_request(memoryview(frame)[4:])
        ctx = _ctx_in(ctx_fields, apis)
        entry = dispatcher.get(ctx.api_key)
        if entry is None:
            return ("close", f"no handler for api {ctx.api_key}")
        try:
            result = await entry.handle(ctx, parsed.body)
        except KafkaError as exc:
            if entry.error_response is None:
                return ("close", str(exc))
            result = entry.error_response(ctx, parsed.body, exc.error_code)
        if result is None:
            return ("none",)
        if isinstance(result, NoResponse):
            return ("mute", result.throttle_ms)
        if isinstance(result, ResponseChunks):
            body = b"".join(p.read_bytes() if is_file_slice(p) else bytes(p)  # type: ignore[union-attr,arg-type]
                            for p in result)
            return ("body", body, result.throttle_ms)
        return ("body", encode_body(result), 0)


def _frame_of(ctx: RequestContext, request: Any) -> bytes:
    return encode_request(ctx.api_key, ctx.api_version, ctx.correlation_id,
                          ctx.client_id or "", request)


class _OwnerGone(KafkaError):
    """The channel to the worker closed before it answered (it stopped or died)."""


async def _handled_by(channel_of: ChannelOf, owner: int, ctx: RequestContext,
                      request: Any) -> tuple[Any, ...]:
    channel = channel_of(owner)
    if channel is None:
        raise KafkaError(ErrorCode.not_coordinator if owner == 0 else
                         ErrorCode.not_leader_or_follower,
                         f"worker {owner} of this broker is not connected")
    try:
        answer: tuple[Any, ...] = await channel.call("handle", _ctx_out(ctx),
                                                     _frame_of(ctx, request))
    except ConnectionError as exc:
        raise _OwnerGone(ErrorCode.unknown_server_error,
                         f"worker {owner} did not answer: {exc}") from None
    except ShardCallFailed as exc:
        raise KafkaError(ErrorCode.unknown_server_error,
                         f"worker {owner} did not answer: {exc}") from None
    if answer[0] == "close":
        raise KafkaError(ErrorCode.unknown_server_error, answer[1])
    return answer


def forward_to_node(channel_of: ChannelOf, api_key: int) -> BoundEntry:
    """A worker's handler for an API the node process serves: the whole request goes to
    worker 0 and its answer comes back as it encoded it."""

    async def handle(ctx: RequestContext, request: Any) -> Any:
        answer = await _handled_by(channel_of, 0, ctx, request)
        if answer[0] == "none":
            return None
        if answer[0] == "mute":
            return NoResponse(answer[1])
        return ResponseChunks.of_bytes(answer[1], answer[2])

    return BoundEntry(api_key, handle)


def _topic_field(entity: Any) -> str:
    return "name" if hasattr(entity, "name") else "topic"


def _partition_field(entity: Any) -> str:
    return "partition_index" if hasattr(entity, "partition_index") else "partition"


def _partitions_field(topic: Any) -> str:
    """Where a request's topic lists its partitions: entities, or (DescribeProducers)
    their indexes."""
    return "partition_indexes" if hasattr(topic, "partition_indexes") else "partitions"


def _index_of(p: Any) -> int:
    return p if isinstance(p, int) else int(getattr(p, _partition_field(p)))


def split_by_owner(layout: ShardLayout, channel_of: ChannelOf, local: BoundEntry) -> BoundEntry:
    """ListOffsets and OffsetForLeaderEpoch over several workers: each answers its own
    partitions with its handler; the answers' topics are merged in the request's order."""

    async def handle(ctx: RequestContext, request: Any) -> Any:
        topics = request.topics
        if not topics:
            return await local.handle(ctx, request)
        tf, psf = _topic_field(topics[0]), _partitions_field(topics[0])
        parts: dict[int, list[Any]] = {}
        for topic in topics:
            name = getattr(topic, tf)
            by_owner: dict[int, list[Any]] = {}
            for p in getattr(topic, psf):
                by_owner.setdefault(layout.owner(name, _index_of(p)), []).append(p)
            for owner, ps in by_owner.items():
                parts.setdefault(owner, []).append(
                    dataclasses.replace(topic, **{psf: tuple(ps)}))
        if set(parts) <= {layout.index}:
            return await local.handle(ctx, request)
        reader = entity_reader(response_schema(ctx.api_key, ctx.api_version))
        pending: list[Awaitable[Any]] = []
        for owner, ts in parts.items():
            sub = dataclasses.replace(request, topics=tuple(ts))
            if owner == layout.index:
                pending.append(local.handle(ctx, sub))
            else:
                pending.append(_owner_or_local(channel_of, owner, ctx, sub, reader, local))
        answers = await asyncio.gather(*pending)
        return _merged(answers, request, tf)

    return BoundEntry(local.api_key, handle, local.error_response)


async def _owner_or_none(channel_of: ChannelOf, owner: int, ctx: RequestContext, request: Any,
                         reader: Callable[[Any, int], Any]) -> Any | None:
    """The worker's answer, or None while it is not connected (being restarted)."""
    if channel_of(owner) is not None:
        try:
            return await _remote_entity(channel_of, owner, ctx, request, reader)
        except _OwnerGone:
            pass
    log.warning("worker_unreachable", worker=owner, api=ctx.api_key,
                correlation_id=ctx.correlation_id)
    return None


async def _owner_or_local(channel_of: ChannelOf, owner: int, ctx: RequestContext, sub: Any,
                          reader: Callable[[Any, int], Any], local: BoundEntry) -> Any:
    """The owner's answer to its part of a split request; while the owner is not connected,
    this worker's own answer: it holds none of those partitions, so its handler answers
    each NOT_LEADER_OR_FOLLOWER, as an append to an unreachable owner is answered, and the
    client retries after a metadata refresh instead of losing its connection."""
    answer = await _owner_or_none(channel_of, owner, ctx, sub, reader)
    return answer if answer is not None else await local.handle(ctx, sub)


async def _remote_entity(channel_of: ChannelOf, owner: int, ctx: RequestContext, sub: Any,
                         reader: Callable[[Any, int], Any]) -> Any:
    answer = await _handled_by(channel_of, owner, ctx, sub)
    if answer[0] != "body":
        raise KafkaError(ErrorCode.unknown_server_error, f"worker {owner} answered {answer[0]}")
    entity, _ = reader(memoryview(answer[1]), 0)
    return entity


def _merged(answers: list[Any], request: Any, tf: str) -> Any:
    """One answer from the workers' answers: each topic's partitions together, topics in
    the request's order, the longest throttle."""
    by_name: dict[str, Any] = {}
    for answer in answers:
        for t in answer.topics:
            name = getattr(t, tf)
            seen = by_name.get(name)
            by_name[name] = t if seen is None else dataclasses.replace(
                seen, partitions=(*seen.partitions, *t.partitions))
    order = [getattr(t, tf) for t in request.topics]
    topics = tuple(by_name[n] for n in dict.fromkeys(order) if n in by_name)
    first = answers[0]
    changes: dict[str, Any] = {"topics": topics}
    if hasattr(first, "throttle_time"):
        changes["throttle_time"] = max(a.throttle_time for a in answers)
    return dataclasses.replace(first, **changes)


def split_log_dir_moves(layout: ShardLayout, channel_of: ChannelOf,
                        local: BoundEntry) -> BoundEntry:
    """AlterReplicaLogDirs over several workers: each moves the replicas it holds; the
    answers' topics are merged."""

    async def handle(ctx: RequestContext, request: Any) -> Any:
        by_owner: dict[int, list[Any]] = {}
        for d in request.dirs:
            dir_topics: dict[int, list[Any]] = {}
            for t in d.topics:
                parts: dict[int, list[Any]] = {}
                for p in t.partitions:
                    parts.setdefault(layout.owner(t.name, int(p)), []).append(p)
                for owner, ps in parts.items():
                    dir_topics.setdefault(owner, []).append(
                        dataclasses.replace(t, partitions=tuple(ps)))
            for owner, ts in dir_topics.items():
                by_owner.setdefault(owner, []).append(dataclasses.replace(d, topics=tuple(ts)))
        if set(by_owner) <= {layout.index}:
            return await local.handle(ctx, request)
        reader = entity_reader(response_schema(ctx.api_key, ctx.api_version))

        async def moved_by(owner: int, sub: Any) -> Any:
            if owner == layout.index:
                return await local.handle(ctx, sub)
            answer = await _owner_or_none(channel_of, owner, ctx, sub, reader)
            return answer if answer is not None else await offline(sub)

        async def offline(sub: Any) -> Any:
            # The owner is being restarted: its replicas are offline meanwhile
            # (KAFKA_STORAGE_ERROR, Kafka's answer for an offline replica), unless ALTER on
            # the cluster is denied. This worker's handler tells which without moving
            # anything: asked for no directory, it answers CLUSTER_AUTHORIZATION_FAILED or
            # LOG_DIR_NOT_FOUND.
            probe: Any = await local.handle(ctx, dataclasses.replace(sub, dirs=tuple(
                dataclasses.replace(d, path="") for d in sub.dirs)))
            return dataclasses.replace(probe, results=tuple(
                dataclasses.replace(t, partitions=tuple(
                    p if p.error_code == ErrorCode.cluster_authorization_failed
                    else dataclasses.replace(p, error_code=ErrorCode.kafka_storage_error)
                    for p in t.partitions))
                for t in probe.results))

        answers = await asyncio.gather(*(
            moved_by(owner, dataclasses.replace(request, dirs=tuple(dirs)))
            for owner, dirs in by_owner.items()))
        results = _merged_topics(tuple(a.results for a in answers), "topic_name")
        return dataclasses.replace(answers[0], results=results, throttle_time=max(
            a.throttle_time for a in answers))

    return BoundEntry(local.api_key, handle, local.error_response)


def ask_every_worker(layout: ShardLayout, channel_of: ChannelOf,
                     local: BoundEntry) -> BoundEntry:
    """DescribeLogDirs over several workers: each answers for the partitions it holds in
    each log dir; the answers are merged dir by dir. A worker that is gone (being
    restarted) holds no replicas meanwhile: its partitions are left out, as Kafka leaves
    out replicas a broker does not host."""

    async def handle(ctx: RequestContext, request: Any) -> Any:
        reader = entity_reader(response_schema(ctx.api_key, ctx.api_version))
        pending: list[Awaitable[Any]] = [local.handle(ctx, request)]
        pending += [_owner_or_none(channel_of, other, ctx, request, reader)
                    for other in range(layout.count) if other != layout.index]
        answers = [a for a in await asyncio.gather(*pending) if a is not None]
        first = answers[0]
        by_dir: dict[str, Any] = {}
        for answer in answers:
            for result in answer.results:
                seen = by_dir.get(result.log_dir)
                by_dir[result.log_dir] = result if seen is None else dataclasses.replace(
                    seen, error_code=seen.error_code or result.error_code,
                    topics=_merged_topics((seen.topics, result.topics), "name"))
        changes: dict[str, Any] = {"results": tuple(by_dir.values())}
        if hasattr(first, "throttle_time"):
            changes["throttle_time"] = max(a.throttle_time for a in answers)
        return dataclasses.replace(first, **changes)

    return BoundEntry(local.api_key, handle, local.error_response)


def _merged_topics(lists: tuple[Any, ...], tf: str) -> tuple[Any, ...]:
    by_name: dict[str, Any] = {}
    for topics in lists:
        for t in topics:
            name = getattr(t, tf)
            seen = by_name.get(name)
            by_name[name] = t if seen is None else dataclasses.replace(
                seen, partitions=(*seen.partitions, *t.partitions))
    return tuple(by_name.values())


def sharded_dispatcher(layout: ShardLayout, channel_of: ChannelOf, local: BoundDispatcher,
                       served_here: frozenset[int]) -> BoundDispatcher:
    """The handlers of one worker's client listener: the APIs in `served_here` by its own
    handlers, ListOffsets and OffsetForLeaderEpoch split by owner, and on workers other
    than 0 every other API forwarded to worker 0."""
    entries: dict[int, BoundEntry] = {}
    for key in local.api_keys():
        entry = local.get(key)
        assert entry is not None
        if key in SPLIT_APIS:
            entries[key] = split_by_owner(layout, channel_of, entry)
        elif key in BROADCAST_APIS:
            entries[key] = ask_every_worker(layout, channel_of, entry)
        elif key == ALTER_REPLICA_LOG_DIRS:
            entries[key] = split_log_dir_moves(layout, channel_of, entry)
        elif layout.index == 0 or key in served_here:
            entries[key] = entry
        else:
            entries[key] = forward_to_node(channel_of, key)
    return BoundDispatcher(entries)


def transactional_to_node(channel_of: ChannelOf, local: BoundEntry) -> BoundEntry:
    """Produce on a worker: a transactional request goes whole to worker 0, whose
    transaction coordinator verifies it (KIP-890)."""
    forward = forward_to_node(channel_of, local.api_key)

    async def handle(ctx: RequestContext, request: Any) -> Any:
        if getattr(request, "transactional_id", None):
            return await forward.handle(ctx, request)
        return await local.handle(ctx, request)

    return BoundEntry(local.api_key, handle, local.error_response)


async def close_quietly(channel: ShardChannelClient | None) -> None:
    if channel is not None:
        with contextlib.suppress(Exception):
            await channel.close()
