"""Replica fetchers: followers pull their partitions' data from the leaders.

One `ReplicaFetcher` per source (leader) broker multiplexes every partition this broker
follows from it (Kafka's num.replica.fetchers = 1). The `ReplicaFetcherManager` moves a
partition between fetchers as the ReplicaManager applies leadership changes, and stops a
fetcher left without partitions.

Each round is one Fetch (v12+, the highest version both sides support, up to
FETCH_MAX_VERSION) with replica_id = this broker, fetch_offset = the log end offset,
last_fetched_epoch = the log's latest epoch and current_leader_epoch = the epoch this
broker knows. Per partition the answer is handled the way Kafka's follower does:

- data: appended as the leader's bytes (PartitionLog.append_as_follower); the high
  watermark becomes min(leader's, own log end); the log start follows the leader's.
- DivergingEpoch(epoch, end): truncate to where the logs agree (`truncation_offset`),
  which may take several rounds when this log holds epochs the leader never had.
- OFFSET_OUT_OF_RANGE with the leader's log start past this log's end: truncate fully
  and start at the leader's log start.
- FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH: the partition
  retries after LEADERSHIP_RETRY_MS (at most replica.fetch.backoff.ms), since leader and
  follower apply a leadership change at slightly different moments; metadata moves it to
  another fetcher if the leader changed. Other errors wait replica.fetch.backoff.ms.

Fetches go in an incremental fetch session with the leader (KIP-227, Kafka's
FetchSessionHandler in broker/replication/fetch_session.py): the first is full and opens the
session; each later one names only the partitions whose fetch state (log end, epochs, log
start) moved since, the ones no longer fetched (backed off, moved away) as forgotten, and
the leader answers only the partitions that changed. A session error, a failed or abandoned
request, or a switch between topic names and ids starts over with a full fetch.

A failed request (connection, timeout) backs off every partition of that fetcher. A
partition added while a fetch is held in the leader's long poll does not wait for it: the
fetcher abandons that fetch and its connection and fetches again at once (a leader change
would otherwise wait up to replica.fetch.wait.max.ms). Nothing here ever truncates to the
high watermark.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol
from uuid import UUID

import structlog
from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.metadata.image import MetadataImage
from broker.protocol.fetch_codec import (
    ForgottenTopic,
    PartitionFetch,
    TopicFetch,
    encode_fetch_request_body,
)
from broker.protocol.transport import ConnectionSecurity
from broker.replication.cluster_view import ClusterView
from broker.replication.fetch_session import FetchSessionHandler, Key, PartitionData
from broker.replication.partition import Partition, Role
from broker.replication.replica_manager import ReplicaManager, ReplicationSettings
from broker.util.tasks import ServiceTasks, TaskHandle

log = structlog.get_logger(__name__)

FETCH = 1
API_VERSIONS = 18
FETCH_MIN_VERSION = 12  # DivergingEpoch
FETCH_MAX_VERSION = 16
FETCH_TOPIC_IDS_VERSION = 13
LEADERSHIP_RETRY_MS = 100
_LEADERSHIP_ERRORS = frozenset({
    ErrorCode.not_leader_or_follower, ErrorCode.unknown_leader_epoch,
    ErrorCode.fenced_leader_epoch,
})
_SESSION_ERRORS = frozenset({
    ErrorCode.fetch_session_id_not_found, ErrorCode.invalid_fetch_session_epoch,
    ErrorCode.fetch_session_topic_id_error,
})
TopicPartition = tuple[str, int]
AddressOf = Callable[[int], "tuple[str, int] | None"]


class FetchConnection(Protocol):
    """What a fetcher needs of a connection: broker/protocol/transport.py's KafkaConnection."""

    async def request(self, api_key: int, version: int, request: Any, timeout_s: float) -> Any: ...

    async def close(self) -> None: ...


ConnectFn = Callable[[str, int], FetchConnection]


def _kafka_connection(host: str, port: int) -> FetchConnection:
    from broker.protocol.transport import KafkaConnection

    return KafkaConnection(host, port, client_id="skiff-replica-fetcher")


def secured_connect(security: ConnectionSecurity) -> ConnectFn:
    """`connect` for a secured inter-broker listener (TLS, SASL)."""
    from broker.protocol.transport import KafkaConnection

    def connect(host: str, port: int) -> FetchConnection:
        return KafkaConnection(host, port, client_id="skiff-replica-fetcher",
                               security=security)

    return connect


def broker_address_resolver(image: Callable[[], MetadataImage], listener_name: str) -> AddressOf:
    """`address_of` from the metadata image (see ClusterView.address_of)."""
    return ClusterView(image, listener_name).address_of


def truncation_offset(part: Partition, epoch: int, end_offset: int) -> int | None:
    """Where a follower truncates on DivergingEpoch(epoch, end_offset) (Kafka's
    getOffsetTruncationState): within the epoch both logs know, the smaller end; when this
    log does not have `epoch`, the end of its largest epoch below it, after which the next
    fetch asks again. None when the leader gave no offset (nothing is truncated)."""
    if end_offset < 0:
        return None
    if epoch < 0:
        return end_offset
    own_epoch, own_end = part.log.end_offset_for_epoch(epoch)
    if own_end < 0:
        return end_offset
    if own_epoch != epoch:
        return own_end
    return min(own_end, end_offset)


@dataclass(eq=False)
class _FetchState:
    part: Partition
    leader_epoch: int
    delayed_until: float = 0.0  # event loop time
    last_divergence: tuple[int, int, int, int] | None = None
    lag: int = 0  # the leader's high watermark minus this log's end, at the last answer


class ReplicaFetcher:
    """The partitions this broker follows from one source broker, and the task fetching them."""

    def __init__(self, manager: ReplicaFetcherManager, source_id: int) -> None:
        self.manager = manager
        self.source_id = source_id
        self.partitions: dict[TopicPartition, _FetchState] = {}
        self.fetch_version = -1
        self._conn: FetchConnection | None = None
        self._conn_address: tuple[str, int] | None = None
        self._wakeup = asyncio.Event()
        self._in_flight: asyncio.Future[Any] | None = None
        self._abandoned = False  # a partition joined while the fetch in flight was held
        self._task: TaskHandle | None = None  # in the manager's task group
        self.session = FetchSessionHandler()
        self._session_by_ids: bool | None = None  # how the session names topics

    @property
    def settings(self) -> ReplicationSettings:
        return self.manager.settings

    def add(self, part: Partition) -> None:
        key = (part.topic, part.index)
        current = self.partitions.get(key)
        if (
            current is not None and current.part is part
            and current.leader_epoch == part.leader_epoch
        ):
            return
        self.partitions[key] = _FetchState(part, part.leader_epoch)
        self._wakeup.set()
        fetching = self._in_flight
        if fetching is not None and not fetching.done():
            self._abandoned = True
            fetching.cancel()

    def remove(self, key: TopicPartition) -> None:
        self.partitions.pop(key, None)

    def start(self) -> None:
        if self._task is None:
            self._task = self.manager.tasks.start_soon(
                self._run, name=f"replica_fetcher_{self.source_id}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await task.wait()
        await self._close_connection()

    async def _close_connection(self) -> None:
        self.session.handle_error()
        conn, self._conn, self._conn_address = self._conn, None, None
        self.fetch_version = -1
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()

    async def _run(self) -> None:
        backoff_s = self.settings.fetch_backoff_ms / 1000
        me = self._task  # start() set it before this task ran
        while self._task is me:  # stop() clears it: a cancel lost inside wait_for still ends
            try:
                await self.fetch_once()
            except asyncio.CancelledError:
                raise
            except (OSError, TimeoutError, ConnectionError, KafkaError, ValueError) as exc:
                log.info("replica_fetch_failed", source=self.source_id, error=repr(exc))
                await self._close_connection()
                await asyncio.sleep(backoff_s)
            except Exception:
                log.exception("replica_fetcher_error", source=self.source_id)
                await self._close_connection()
                await asyncio.sleep(backoff_s)

    async def _connection(self) -> FetchConnection | None:
        address = self.manager.address_of(self.source_id)
        if address is None:
            return None
        if self._conn is not None and address == self._conn_address:
            return self._conn
        await self._close_connection()
        conn = self.manager.connect(*address)
        timeout_s = self.settings.socket_timeout_ms / 1000
        # v2: KafkaConnection reads flexible responses with header v1, which ApiVersions
        # (always header v0) does not use.
        versions = importlib.import_module("kio.schema.api_versions.v2.request")
        try:
            reply = await conn.request(API_VERSIONS, 2, versions.ApiVersionsRequest(),
                                       timeout_s)
        except BaseException:
            with contextlib.suppress(Exception):
                await conn.close()
            raise
        peer_max = next((int(k.max_version) for k in reply.api_keys if k.api_key == FETCH), -1)
        version = min(peer_max, FETCH_MAX_VERSION)
        if version < FETCH_MIN_VERSION:
            await conn.close()
            raise KafkaError(ErrorCode.unsupported_version,
                             f"broker {self.source_id} serves Fetch up to v{peer_max}")
        self._conn, self._conn_address, self.fetch_version = conn, address, version
        return conn

    async def fetch_once(self) -> None:
        """One round: wait for a ready partition, send one Fetch, handle the answer."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        ready = [st for st in self.partitions.values() if st.delayed_until <= now]
        if not ready:
            self._wakeup.clear()
            delays = [st.delayed_until - now for st in self.partitions.values()]
            waiter = loop.create_task(self._wakeup.wait())
            try:
                await asyncio.wait({waiter}, timeout=min(delays, default=None))
            finally:
                waiter.cancel()
            return
        conn = await self._connection()
        if conn is None:
            log.debug("replica_fetch_no_address", source=self.source_id)
            self._delay(ready)
            return
        version = self.fetch_version
        if version >= FETCH_TOPIC_IDS_VERSION and any(st.part.topic_id is None for st in ready):
            version = FETCH_TOPIC_IDS_VERSION - 1  # logs created without a topic id
        sent = {(st.part.topic, st.part.index): (st, st.part.log.log_end_offset) for st in ready}
        by_ids = version >= FETCH_TOPIC_IDS_VERSION
        if self._session_by_ids != by_ids:
            self.session.handle_error()  # the session's keys change form: start over
            self._session_by_ids = by_ids
        request = self._request(version, [st for st, _ in sent.values()])
        s = self.settings
        timeout_s = (s.fetch_wait_max_ms + s.socket_timeout_ms) / 1000
        start = getattr(conn, "start_request", None)
        # No task per round where the connection can write the request at once: a round
        # is a few hundred microseconds of Python, and followers run one per leader batch.
        fetching: asyncio.Future[Any] = (
            start(FETCH, version, request, timeout_s) if start is not None
            else loop.create_task(conn.request(FETCH, version, request, timeout_s)))
        self._in_flight = fetching
        self._abandoned = False
        try:
            response = await fetching
        except asyncio.CancelledError:
            if not self._abandoned:
                raise
            # A partition arrived (a leadership change) while the leader held this fetch in
            # its long poll: rather than wait up to replica.fetch.wait.max.ms, drop the
            # connection (the leader answers requests on one connection in order) and fetch
            # again with the new partition at once. Nothing of the abandoned fetch was used.
            await self._close_connection()
            return
        finally:
            self._in_flight = None
            if not fetching.done():
                fetching.cancel()
        error = ErrorCode(response.error_code)
        self.session.handle_response(error, int(response.session_id))
        if error in _SESSION_ERRORS:
            # The leader lost or never had the session (evicted, restarted): a full fetch
            # now, no backoff.
            log.info("replica_fetch_session_reset", source=self.source_id, error=error.name)
            return
        if error != ErrorCode.none:
            log.info("replica_fetch_error", source=self.source_id, error=error.name)
            self._delay([st for st, _ in sent.values()])
            return
        by_id = {st.part.topic_id: st.part.topic for st, _ in sent.values()}
        for topic in response.responses:
            name = by_id.get(topic.topic_id) if version >= FETCH_TOPIC_IDS_VERSION else topic.topic
            for pd in topic.partitions:
                entry = sent.get((name or "", pd.partition_index))
                if entry is not None:
                    self._handle_partition(entry[0], entry[1], pd)

    def _request(self, version: int, states: list[_FetchState]) -> bytes:
        """The next request of the session: every partition of `states` is wanted; the
        session handler picks what to send of them."""
        s = self.settings
        by_ids = version >= FETCH_TOPIC_IDS_VERSION
        wanted: list[tuple[Key, PartitionData]] = []
        for st in states:
            plog = st.part.log
            key: Key = (st.part.topic_id if by_ids and st.part.topic_id is not None
                        else st.part.topic, st.part.index)
            wanted.append((key, PartitionData(
                plog.log_end_offset, s.fetch_max_bytes, st.leader_epoch, plog.latest_epoch,
                plog.log_start_offset)))
        session_id, epoch, send, forgotten = self.session.build(wanted)
        by_topic: dict[str | UUID, list[PartitionFetch]] = {}
        for (topic, index), d in send:
            by_topic.setdefault(topic, []).append(PartitionFetch(
                index, d.current_leader_epoch, d.fetch_offset, d.last_fetched_epoch,
                d.log_start_offset, d.max_bytes))
        gone: dict[str | UUID, list[int]] = {}
        for topic, index in forgotten:
            gone.setdefault(topic, []).append(index)
        replicas = self.manager.replicas

        return encode_fetch_request_body(
            version, replica_id=replicas.node_id, replica_epoch=replicas.broker_epoch(),
            max_wait_ms=s.fetch_wait_max_ms, min_bytes=s.fetch_min_bytes,
            max_bytes=s.fetch_response_max_bytes,
            topics=[TopicFetch(*self._named(t), parts) for t, parts in by_topic.items()],
            session_id=session_id, session_epoch=epoch,
            forgotten=[ForgottenTopic(*self._named(t), parts) for t, parts in gone.items()])

    @staticmethod
    def _named(topic: str | UUID) -> tuple[str, UUID | None]:
        """(name, id) as the request writes a session key's topic (v12 names, v13+ ids)."""
        return ("", topic) if isinstance(topic, UUID) else (topic, None)

    def _delay(self, states: list[_FetchState], delay_ms: int | None = None) -> None:
        backoff = self.settings.fetch_backoff_ms
        delay = backoff if delay_ms is None else min(delay_ms, backoff)
        until = asyncio.get_running_loop().time() + delay / 1000
        for st in states:
            st.delayed_until = until

    def _handle_partition(self, st: _FetchState, fetch_offset: int, pd: Any) -> None:
        part = st.part
        key = (part.topic, part.index)
        if (
            self.partitions.get(key) is not st or part.role is not Role.FOLLOWER
            or part.leader_epoch != st.leader_epoch or part.log.log_end_offset != fetch_offset
        ):
            return  # moved, re-led or truncated while the fetch was in flight
        error = ErrorCode(pd.error_code)
        try:
            if error is ErrorCode.none:
                diverging = getattr(pd, "diverging_epoch", None)
                if diverging is not None and (diverging.epoch >= 0 or diverging.end_offset >= 0):
                    self._truncate_on_divergence(st, diverging.epoch, diverging.end_offset)
                    return
                if pd.records:
                    part.append_as_follower(pd.records)
                    self.manager.bytes_fetched[self.source_id] = (
                        self.manager.bytes_fetched.get(self.source_id, 0) + len(pd.records))
                    stats = self.manager.replicas.topic_stats
                    if stats is not None:
                        stats.topic(part.topic).replication_bytes_in += len(pd.records)
                part.update_follower_high_watermark(pd.high_watermark)
                st.lag = max(0, pd.high_watermark - part.log.log_end_offset)
                leader_start = min(pd.log_start_offset, part.high_watermark)
                if leader_start > part.log.log_start_offset:
                    part.log.delete_records_before(leader_start)
            elif error is ErrorCode.offset_out_of_range and (
                pd.log_start_offset > part.log.log_end_offset
            ):
                log.info("replica_truncate_fully", topic=part.topic, partition=part.index,
                         log_end_offset=part.log.log_end_offset, start_at=pd.log_start_offset)
                part.truncate_fully_and_start_at(pd.log_start_offset)
            else:
                # Leadership errors are routine around a leader change (and retried every
                # LEADERSHIP_RETRY_MS): debug, not info.
                short = error in _LEADERSHIP_ERRORS
                (log.debug if short else log.info)(
                    "replica_fetch_partition_error", topic=part.topic, partition=part.index,
                    source=self.source_id, error=error.name)
                # The two sides apply a leadership change at slightly different times:
                # retry soon rather than after the full backoff, which would add to the
                # failover time. Metadata moves the partition if the leader really changed.
                self._delay([st], LEADERSHIP_RETRY_MS if short else None)
        except KafkaError as exc:
            log.warning("replica_append_failed", topic=part.topic, partition=part.index,
                        error=exc.error_code.name, reason=exc.message)
            self._delay([st])
        except OSError as exc:  # its log dir failed (KIP-858): the partition goes offline
            self.manager.replicas.storage_failed(part, exc)

    def _truncate_on_divergence(self, st: _FetchState, epoch: int, end_offset: int) -> None:
        part = st.part
        seen = (epoch, end_offset, part.log.log_end_offset, part.log.latest_epoch)
        target = truncation_offset(part, epoch, end_offset)
        if target is None or seen == st.last_divergence:
            # No offset to go by, or the same answer for the same log twice: nothing to
            # gain from asking at once again.
            log.warning("replica_divergence_stuck", topic=part.topic, partition=part.index,
                        diverging_epoch=epoch, diverging_end_offset=end_offset,
                        log_end_offset=part.log.log_end_offset)
            self._delay([st])
            st.last_divergence = None
            return
        st.last_divergence = seen
        log.info("replica_truncate", topic=part.topic, partition=part.index,
                 diverging_epoch=epoch, diverging_end_offset=end_offset,
                 log_end_offset=part.log.log_end_offset, truncate_to=target)
        part.truncate_to(target)


class ReplicaFetcherManager:
    """Keeps one fetcher per source broker, fed by ReplicaManager.apply_partition."""

    def __init__(
        self, replicas: ReplicaManager, *, address_of: AddressOf,
        settings: ReplicationSettings | None = None, connect: ConnectFn = _kafka_connection,
    ) -> None:
        self.replicas = replicas
        self.address_of = address_of
        self.settings = settings or replicas.settings
        self.connect = connect
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._source_of: dict[TopicPartition, int] = {}
        self._started = False
        # the fetchers' tasks and the stops of idle fetchers
        self.tasks = ServiceTasks("replica_fetchers")
        self._closing: set[TaskHandle] = set()
        self.bytes_fetched: dict[int, int] = {}  # source broker -> record bytes (metrics)
        replicas.fetchers = self
        for part in replicas.partitions():
            if part.role is Role.FOLLOWER:
                self.add_partition(part)

    def source_of(self, topic: str, index: int) -> int | None:
        """The broker this one fetches the partition from, if any."""
        return self._source_of.get((topic, index))

    def add_partition(self, part: Partition) -> None:
        key = (part.topic, part.index)
        leader = part.leader_id
        if part.role is not Role.FOLLOWER or leader < 0 or leader == self.replicas.node_id:
            self.remove_partition(*key)
            return
        old = self._source_of.get(key)
        if old is not None and old != leader:
            self.remove_partition(*key)
        fetcher = self.fetchers.get(leader)
        if fetcher is None:
            fetcher = self.fetchers[leader] = ReplicaFetcher(self, leader)
            if self._started:
                fetcher.start()
        fetcher.add(part)
        self._source_of[key] = leader

    def remove_partition(self, topic: str, index: int) -> None:
        source = self._source_of.pop((topic, index), None)
        if source is None:
            return
        fetcher = self.fetchers.get(source)
        if fetcher is None:
            return
        fetcher.remove((topic, index))
        if not fetcher.partitions:
            del self.fetchers[source]
            if self._started:  # an idle fetcher stops (Kafka's shutdownIdleFetcherThreads)
                task = self.tasks.start_soon(fetcher.stop,
                                             name=f"replica_fetcher_{source}_stop")
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)

    def start(self) -> None:
        self._started = True
        for fetcher in self.fetchers.values():
            fetcher.start()

    async def stop(self) -> None:
        self._started = False
        fetchers = list(self.fetchers.values())
        for fetcher in fetchers:
            await fetcher.stop()
        for task in list(self._closing):
            await task.wait()
        await self.tasks.close()
