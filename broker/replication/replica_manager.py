"""The partitions this broker hosts, and the produce and fetch operations over them.

Fetch long polls wait on the partitions' futures, which are completed the moment the
high watermark (consumers) or log end offset (followers) moves: no sleeping in slices.

Leaders answer follower fetches (replica_id >= 0): a follower whose last fetched epoch
disagrees with this leader's epoch cache gets a DivergingEpoch instead of data; otherwise
its fetch offset is its log end offset, which moves the high watermark and may add it to
the ISR. ISR changes go to the controller through the injected `alter_partition`, one in
flight per partition; a periodic check (`check_isr`, every min(lag / 2, 1 s))
removes replicas that stopped catching up. Followers are fed by the replica fetchers
(broker/replication/fetcher.py), which this manager tells about role changes.

Transactions: `write_txn_marker` is the transaction coordinator's way in (through
WriteTxnMarkers): it appends an end-transaction marker as leader and answers once the ISR
holds it (acks=all), then tells `txn_marker_listener` (the group coordinator, for
__consumer_offsets partitions: its pending transactional offsets become visible or are
dropped). Consumer fetches at READ_COMMITTED (isolation_level 1) stop at the last stable
offset and carry the aborted transactions of the range they read.

Log dirs (KIP-858): an I/O error while appending, reading or checkpointing takes the log
dir offline (LogManager.fail_dir); its partitions leave this manager for `offline`, where
produce and fetch answer KAFKA_STORAGE_ERROR and metadata no longer revives them. The high
watermarks go to each online dir's `replication-offset-checkpoint` every
replica.high.watermark.checkpoint.interval.ms, as Kafka writes them, which is also how a
directory that vanished under an idle broker is found. Where each replica lives is told to
the controller: `pending_assignments` holds (topic id, directory id) for every replica
whose directory differs from the one the metadata records (the node sends them with
AssignReplicasToDirs), also for replicas in a failed directory, so the controller moves
their leadership even if it never learnt where they were.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol
from uuid import UUID

import structlog
from kio.schema.errors import ErrorCode

from broker.controller.requests import AlterPartitionReply, AlterPartitionRequest
from broker.errors import KafkaError
from broker.log import AppendResult, FileSlice, LogConfig, LogManager
from broker.log.move import FutureLog
from broker.metrics.stats import BrokerTopicStats, TopicStats, mark_remote_wait
from broker.replication.fetch_session import FetchSessionCache, SessionPartition
from broker.replication.partition import Partition, PendingIsrChange, Role
from broker.replication.producer_state import Guard, VerificationGuard
from broker.util.tasks import ServiceTasks, TaskHandle

log = structlog.get_logger(__name__)

TopicPartition = tuple[str, int]
READ_UNCOMMITTED: Final = 0
READ_COMMITTED: Final = 1
# (topic, partition, producer id, committed): a marker was written and replicated.
TxnMarkerListener = Callable[[str, int, int, bool], None]
AlterPartitionFn = Callable[[AlterPartitionRequest], Awaitable[AlterPartitionReply]]

REPLICATION_OFFSET_CHECKPOINT: Final = "replication-offset-checkpoint"
# one producer of a partition, as the admin plane lists it (ReplicaManager.producers_local)
ProducerRow = tuple[int, int, int, int, int, int]


class ShardRouter(Protocol):
    """A broker of several workers (broker/node/shard_routing.py): produce and fetch over
    partitions some of which another worker owns. It calls this manager's `*_local`
    methods for the partitions this worker owns."""

    async def append(
        self, entries: dict[TopicPartition, bytes | memoryview], required_acks: int,
        timeout_ms: int, verification: Mapping[TopicPartition, Guard | None] | None,
    ) -> dict[TopicPartition, AppendResult | KafkaError]: ...

    async def fetch(
        self, requests: list[FetchPartitionRequest], replica_id: int, max_wait_ms: int,
        min_bytes: int, max_bytes: int, replica_epoch: int, client_rack: str | None,
        isolation_level: int,
    ) -> list[FetchPartitionResult]: ...

    async def wait_any(self, keys: list[TopicPartition], for_log_end: bool,
                       timeout_s: float) -> bool: ...

    def owns(self, topic: str, partition: int) -> bool: ...

    async def write_txn_marker(self, topic: str, partition: int, producer_id: int,
                               producer_epoch: int, coordinator_epoch: int, committed: bool,
                               timeout_ms: int) -> ErrorCode: ...

    async def start_verifications(
        self, producer_id: int, epoch: int, sequences: Mapping[TopicPartition, int],
        supports_epoch_bump: bool,
    ) -> dict[TopicPartition, Guard | None]: ...

    async def partition_offsets(self, keys: list[TopicPartition]
                                ) -> dict[TopicPartition, tuple[int, int, int]]: ...

    async def replica_progress(self, keys: list[TopicPartition]
                               ) -> dict[TopicPartition, tuple[int, dict[int, int]]]: ...

    async def partition_view(self, topic: str, partition: int, offset: int, max_bytes: int,
                             read_committed: bool) -> Any: ...

    async def producers(self, keys: list[TopicPartition] | None
                        ) -> dict[TopicPartition, list[ProducerRow]]: ...


# a replica move's copy passes: at most this many before the last one, which runs on the
# event loop once a pass copied no more than this
MOVE_MAX_PASSES: Final = 20
MOVE_FINAL_PASS_BYTES: Final = 1 << 20
UNASSIGNED: Final = UUID(int=0)  # Kafka's DirectoryId.UNASSIGNED

# Kafka's replica.lag.time.max.ms is 30 s. Skiff's default (see ReplicationSettings) is
# shorter: a follower that fetches every replica.fetch.wait.max.ms (500 ms) while caught up
# has twenty fetches of slack, and a paused follower stalls acks=all producers for a third
# of the time.
DEFAULT_REPLICA_LAG_TIME_MAX_MS: Final = 10_000


@dataclass(frozen=True, slots=True)
class ReplicationSettings:
    """The replica.* broker configs the replication layer uses, and producer.id.expiration.ms,
    which each of its partitions applies."""

    lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS
    fetch_max_bytes: int = 1024 * 1024
    fetch_response_max_bytes: int = 10 * 1024 * 1024
    fetch_min_bytes: int = 1
    fetch_wait_max_ms: int = 500
    fetch_backoff_ms: int = 1000
    socket_timeout_ms: int = 30_000
    alter_partition_backoff_ms: int = 500
    rack: str | None = None
    fetch_session_cache_slots: int = 1000  # max.incremental.fetch.session.cache.slots
    high_watermark_checkpoint_interval_ms: int = 5000
    # producer.id.expiration.ms: a partition forgets a producer idle for longer than this
    producer_id_expiration_ms: int = 86_400_000

    @classmethod
    def from_config(cls, config: Any) -> ReplicationSettings:
        """From a NodeConfig (anything indexable by Kafka's config keys)."""
        return cls(
            lag_time_max_ms=int(config["replica.lag.time.max.ms"]),
            fetch_max_bytes=int(config["replica.fetch.max.bytes"]),
            fetch_response_max_bytes=int(config["replica.fetch.response.max.bytes"]),
            fetch_min_bytes=int(config["replica.fetch.min.bytes"]),
            fetch_wait_max_ms=int(config["replica.fetch.wait.max.ms"]),
            fetch_backoff_ms=int(config["replica.fetch.backoff.ms"]),
            socket_timeout_ms=int(config["replica.socket.timeout.ms"]),
            rack=config["broker.rack"],
            fetch_session_cache_slots=int(config["max.incremental.fetch.session.cache.slots"]),
            high_watermark_checkpoint_interval_ms=int(
                config["replica.high.watermark.checkpoint.interval.ms"]),
            producer_id_expiration_ms=int(config["producer.id.expiration.ms"]),
        )


class FetcherHook(Protocol):
    """What the ReplicaManager tells the replica fetchers (ReplicaFetcherManager)."""

    def add_partition(self, part: Partition) -> None: ...

    def remove_partition(self, topic: str, index: int) -> None: ...


@dataclass(slots=True)  # not frozen: one per partition per Fetch, see fetch_encoder
class FetchPartitionRequest:
    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1

    # written out: mypyc compiles it, where dataclass's own runs interpreted (broker/native.py)
    def __init__(
        self, topic: str, partition: int, fetch_offset: int, partition_max_bytes: int,
        current_leader_epoch: int = -1, last_fetched_epoch: int = -1,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.fetch_offset = fetch_offset
        self.partition_max_bytes = partition_max_bytes
        self.current_leader_epoch = current_leader_epoch
        self.last_fetched_epoch = last_fetched_epoch


@dataclass(slots=True)
class FetchPartitionResult:
    topic: str
    partition: int
    error_code: ErrorCode = ErrorCode.none
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: FileSlice | None = None
    # READ_COMMITTED only: (producer id, first offset) of the aborted transactions in
    # the range read; None for READ_UNCOMMITTED (the answer's null array).
    aborted_transactions: list[tuple[int, int]] | None = None
    diverging_epoch: tuple[int, int] | None = None
    preferred_read_replica: int = -1
    leader_id: int = -1
    leader_epoch: int = -1

    # written out: mypyc compiles it, where dataclass's own runs interpreted (broker/native.py)
    def __init__(
        self, topic: str, partition: int, error_code: ErrorCode = ErrorCode.none,
        high_watermark: int = -1, last_stable_offset: int = -1, log_start_offset: int = -1,
        records: FileSlice | None = None,
        aborted_transactions: list[tuple[int, int]] | None = None,
        diverging_epoch: tuple[int, int] | None = None, preferred_read_replica: int = -1,
        leader_id: int = -1, leader_epoch: int = -1,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.error_code = error_code
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset
        self.log_start_offset = log_start_offset
        self.records = records
        self.aborted_transactions = aborted_transactions
        self.diverging_epoch = diverging_epoch
        self.preferred_read_replica = preferred_read_replica
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch

    @property
    def size(self) -> int:
        return self.records.length if self.records is not None else 0


class ReplicaManager:
    def __init__(
        self, node_id: int, logs: LogManager, clock: Callable[[], int], *,
        settings: ReplicationSettings | None = None,
        alter_partition: AlterPartitionFn | None = None,
        broker_epoch: Callable[[], int] = lambda: -1,
        rack_of: Callable[[int], str | None] = lambda broker_id: None,
        isr_eligible: Callable[[int, int], bool] = lambda broker_id, broker_epoch: True,
    ) -> None:
        """Without `alter_partition` (a single node) the ISR never changes. `rack_of` names
        other brokers' racks (broker.rack of their registrations) for KIP-392;
        `isr_eligible(broker_id, broker_epoch)` says whether a caught-up follower may be
        proposed for the ISR (ClusterView provides all three from the metadata image)."""
        self.node_id = node_id
        self.logs = logs
        self.clock = clock
        self.settings = settings or ReplicationSettings()
        self.alter_partition = alter_partition
        self.broker_epoch = broker_epoch
        self.rack_of = rack_of
        self.isr_eligible = isr_eligible
        self.fetchers: FetcherHook | None = None
        # set on a broker of several workers: produce and fetch go through it
        self.shard_router: ShardRouter | None = None
        # Called after each marker write_txn_marker got replicated; the node wires the
        # group coordinator here (transactional offset commits on __consumer_offsets).
        self.txn_marker_listener: TxnMarkerListener | None = None
        # KIP-227: the incremental fetch sessions of this broker's consumers and followers.
        self.fetch_sessions = FetchSessionCache(self.settings.fetch_session_cache_slots)
        self._partitions: dict[TopicPartition, Partition] = {}
        # the ISR check, the high watermark checkpoints, AlterPartition sends, replica moves
        self._tasks = ServiceTasks("replica_manager")
        self._moving: dict[tuple[str, int], TaskHandle] = {}  # replica moves running
        self._isr_task: TaskHandle | None = None
        # Metrics (broker/metrics): plain counters, None when metrics are off.
        self.topic_stats: BrokerTopicStats | None = None
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.failed_isr_updates = 0
        # KIP-858: partitions whose log dir failed, and where replicas live
        self.offline: set[TopicPartition] = set()
        self.assigned_dirs: dict[TopicPartition, UUID | None] = {}
        self.pending_assignments: dict[TopicPartition, tuple[UUID, UUID]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._hw_task: TaskHandle | None = None
        logs.dir_failure_listeners.append(self._dir_failed_threadsafe)

    # ---- lifecycle (the periodic ISR check) ------------------------------------------

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self._isr_task is None:
            self._isr_task = self._tasks.start_soon(self._isr_loop, name="isr_check")
        if self._hw_task is None:
            self._hw_task = self._tasks.start_soon(self._hw_checkpoint_loop,
                                                   name="hw_checkpoint")

    async def stop(self) -> None:
        self._isr_task = None
        self._hw_task = None
        await self._tasks.close()

    async def _isr_loop(self) -> None:
        # Kafka checks every lag/2; at most every second here, so a stuck follower leaves
        # the ISR within a second of replica.lag.time.max.ms rather than half of it.
        interval_s = min(max(self.settings.lag_time_max_ms / 2, 10), 1000) / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                self.check_isr()
            except Exception:
                log.exception("isr_check_failed")

    # ---- log dirs (KIP-858) --------------------------------------------------------

    async def _hw_checkpoint_loop(self) -> None:
        interval_s = max(self.settings.high_watermark_checkpoint_interval_ms, 10) / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                # gathered here, written (and fsynced) beside the loop
                await asyncio.to_thread(self._write_hw_checkpoints, self._hw_offsets())
            except Exception:
                log.exception("hw_checkpoint_failed")

    def checkpoint_high_watermarks(self) -> None:
        """Kafka's `replication-offset-checkpoint` in every online log dir."""
        self._write_hw_checkpoints(self._hw_offsets())

    def _hw_offsets(self) -> dict[Any, dict[TopicPartition, int]]:
        per_dir: dict[Any, dict[TopicPartition, int]] = {d: {} for d in self.logs.online_dirs}
        for key, part in list(self._partitions.items()):
            d = self.logs.log_dir_of(*key)
            if d in per_dir:
                per_dir[d][key] = part.high_watermark
        return per_dir

    def _write_hw_checkpoints(self, per_dir: dict[Any, dict[TopicPartition, int]]) -> None:
        for d, offsets in per_dir.items():
            self.logs.write_dir_checkpoint(d, REPLICATION_OFFSET_CHECKPOINT, offsets)

    def storage_failed(self, part: Partition, exc: BaseException) -> KafkaError:
        """An I/O error on `part`'s log: its log dir goes offline. The client's error."""
        self.logs.fail_log(part.log, exc)
        return KafkaError(ErrorCode.kafka_storage_error,
                          f"{part.topic}-{part.index}: log dir failed: {exc}")

    def _dir_failed_threadsafe(self, d: Any) -> None:
        loop = self._loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop or loop.is_closed():
            self.on_dir_failed(d)
        else:
            loop.call_soon_threadsafe(self.on_dir_failed, d)

    def on_dir_failed(self, d: Any) -> None:
        """The partitions of failed log dir `d` go offline on this broker."""
        dir_id = self.logs.dir_id(d)
        for key, where in list(self.logs.offline_logs.items()):
            if where != d:
                continue
            part = self._partitions.pop(key, None)
            if part is None:
                continue
            if self.fetchers is not None:
                self.fetchers.remove_partition(*key)
            part.role = Role.OFFLINE
            part._wake_waiters()
            self.offline.add(key)
            if part.topic_id is not None and self.assigned_dirs.get(key) != dir_id:
                self.pending_assignments[key] = (part.topic_id, dir_id)
            log.warning("partition_offline", topic=key[0], partition=key[1], log_dir=str(d))

    def alter_log_dir(self, topic: str, index: int, dest: Path) -> ErrorCode:
        """AlterReplicaLogDirs for one replica (Kafka's ReplicaManager.alterReplicaLogDirs):
        start moving it to log dir `dest` (the copy goes on in the background), or cancel a
        move when `dest` is where it already is. For a replica not here yet, `dest` is where
        it will be created. KAFKA_STORAGE_ERROR for an offline `dest` or partition, or while
        any log dir is offline (no future replica is made then, as in Kafka),
        REPLICA_NOT_AVAILABLE when this broker has no replica; `dest` must be one of
        log.dirs (the caller answers LOG_DIR_NOT_FOUND otherwise)."""
        key = (topic, index)
        if dest in self.logs.offline_dirs:
            return ErrorCode.kafka_storage_error
        if key in self.offline:
            return ErrorCode.kafka_storage_error
        part = self._partitions.get(key)
        if part is None:
            self.logs.preferred_dirs[key] = dest
            return ErrorCode.replica_not_available
        current = self.logs.log_dir_of(topic, index)
        fut = self.logs.future_of(topic, index)
        if fut is not None and fut.log_dir != dest:
            self.logs.abort_future(topic, index)
        if current == dest:
            return ErrorCode.none
        if self.logs.offline_dirs:
            return ErrorCode.kafka_storage_error
        if fut is not None and fut.log_dir == dest:
            return ErrorCode.none  # already on its way there
        try:
            fut = self.logs.create_future(topic, index, dest)
        except KafkaError as exc:
            return exc.error_code
        self._start_move(part, fut)
        return ErrorCode.none

    def _start_move(self, part: Partition, fut: FutureLog) -> None:
        key = (part.topic, part.index)
        task = self._tasks.start_soon(self._move, part, fut, name=f"move-{key[0]}-{key[1]}")
        self._moving[key] = task

        def done(t: TaskHandle) -> None:
            if self._moving.get(key) is t:
                del self._moving[key]

        task.add_done_callback(done)

    async def _move(self, part: Partition, fut: FutureLog) -> None:
        """Copy passes off the loop until one has little left, then the last pass and the
        swap on the loop, where nothing appends meanwhile."""
        key = (part.topic, part.index)
        done = False
        try:
            for _ in range(MOVE_MAX_PASSES):
                if fut.aborted or self._partitions.get(key) is not part:
                    return
                plog = part.log
                generation, end = plog.truncation_generation, plog.log_end_offset
                fut.current_end_offset = end
                copied = await asyncio.to_thread(fut.copy_pass, end)
                if plog.truncation_generation != generation:
                    fut.restart_logs()
                    continue
                if copied <= MOVE_FINAL_PASS_BYTES:
                    break
            if fut.aborted or self._partitions.get(key) is not part:
                return
            if part.log.truncation_generation != generation:
                fut.restart_logs()
            new = self.logs.complete_future(fut)
            part.replace_log(new)
            done = True
            d = self.logs.log_dir_of(*key)
            if d is not None and part.topic_id is not None:
                dir_id = self.logs.dir_id(d)
                if self.assigned_dirs.get(key) != dir_id:
                    self.pending_assignments[key] = (part.topic_id, dir_id)
        except OSError as exc:
            if fut.aborted:
                return  # its directory was removed under the copy
            where = Path(exc.filename) if isinstance(exc.filename, str) else None
            failed = self.logs.dir_of_path(where) if where is not None else None
            log.warning("replica_move_failed", topic=key[0], partition=key[1],
                        to_dir=str(fut.log_dir), error=str(exc))
            self.logs.fail_dir(failed or fut.log_dir, exc)
        except KafkaError as exc:
            log.info("replica_move_abandoned", topic=key[0], partition=key[1],
                     reason=exc.message)
        finally:
            if not done:
                self.logs.abort_future(*key)

    def assignments_sent(self, sent: dict[TopicPartition, tuple[UUID, UUID]]) -> None:
        """The controller took these assignments: forget them unless they changed since."""
        for key, value in sent.items():
            if self.pending_assignments.get(key) == value:
                del self.pending_assignments[key]

    def _note_directory(self, key: TopicPartition, topic_id: UUID | None,
                        assigned: UUID | None) -> None:
        self.assigned_dirs[key] = assigned
        d = self.logs.log_dir_of(*key)
        if d is None or topic_id is None or assigned is None:
            return
        if assigned == UNASSIGNED and len(self.logs.log_dirs) == 1:
            return  # one log dir: nothing to choose, nothing to tell (Kafka's default dir)
        actual = self.logs.dir_id(d)
        if actual != assigned:
            self.pending_assignments[key] = (topic_id, actual)
        else:
            self.pending_assignments.pop(key, None)

    # ---- applying metadata -------------------------------------------------------

    def get(self, topic: str, partition: int) -> Partition | None:
        return self._partitions.get((topic, partition))

    def partitions(self) -> Iterable[Partition]:
        return self._partitions.values()

    def leader_partition(
        self, topic: str, partition: int, current_leader_epoch: int = -1,
    ) -> Partition:
        """The partition if this broker leads it (at `current_leader_epoch`, when given);
        otherwise the KafkaError a client should see."""
        part = self._partitions.get((topic, partition))
        if part is None:
            if (topic, partition) in self.offline:
                raise KafkaError(ErrorCode.kafka_storage_error,
                                 f"{topic}-{partition} is in an offline log dir")
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"{topic}-{partition}")
        part.require_leader(current_leader_epoch)
        return part

    def apply_partition(
        self, *, topic: str, topic_id: UUID | None, index: int, leader: int, leader_epoch: int,
        partition_epoch: int, replicas: tuple[int, ...], isr: tuple[int, ...],
        min_insync_replicas: int, log_config: LogConfig, directory: UUID | None = None,
    ) -> None:
        """Make this broker's replica match the committed partition state. `directory`: the
        log dir the metadata records for this replica (None: not known to the caller)."""
        key = (topic, index)
        if key in self.offline:
            # its log dir failed: nothing here serves it again (KIP-858)
            if self.node_id not in replicas:
                self.offline.discard(key)
                self.logs.offline_logs.pop(key, None)
                self.pending_assignments.pop(key, None)
            return
        if self.node_id not in replicas:
            self.remove(topic, index, delete_log=True)
            return
        part = self._partitions.get(key)
        if part is None:
            plog = self.logs.get_or_create(topic, index, log_config, topic_id)
            part = Partition(
                topic=topic, index=index, topic_id=topic_id, log=plog,
                clock=self.clock, node_id=self.node_id,
                producer_id_expiration_ms=self.settings.producer_id_expiration_ms,
            )
            self._partitions[key] = part
        elif part.log.config != log_config:
            # this partition's log only: a sync of a topic visits each of its partitions
            part.log.update_config(log_config)
        self._note_directory(key, topic_id, directory)
        if leader_epoch < part.leader_epoch:
            return
        if leader == self.node_id:
            if (
                part.role is Role.LEADER and part.leader_epoch == leader_epoch
                and part.isr == isr and part.partition_epoch == partition_epoch
            ):
                return
            part.become_leader(
                leader_epoch=leader_epoch, partition_epoch=partition_epoch, replicas=replicas,
                isr=isr, min_insync_replicas=min_insync_replicas,
            )
            if self.fetchers is not None:
                self.fetchers.remove_partition(topic, index)
        else:
            part.become_follower(
                leader_id=leader, leader_epoch=leader_epoch, partition_epoch=partition_epoch,
                replicas=replicas, isr=isr,
            )
            if self.fetchers is not None:
                self.fetchers.add_partition(part)
        self._resume_move(part)

    def _resume_move(self, part: Partition) -> None:
        """A move a restart cut short (LogManager kept its future copy) goes on once the
        partition is served here again, as Kafka restarts its alter-log-dirs fetcher."""
        key = (part.topic, part.index)
        fut = self.logs.future_of(*key)
        if fut is None or key in self._moving:
            return
        log.info("replica_move_resuming", topic=key[0], partition=key[1],
                 to_dir=str(fut.log_dir))
        self._start_move(part, fut)

    def remove(self, topic: str, index: int, *, delete_log: bool) -> None:
        if self.fetchers is not None:
            self.fetchers.remove_partition(topic, index)
        part = self._partitions.pop((topic, index), None)
        if part is not None:
            part.close()
        self.assigned_dirs.pop((topic, index), None)
        self.pending_assignments.pop((topic, index), None)
        if delete_log:
            self.logs.delete(topic, index)

    # ---- ISR changes ---------------------------------------------------------------

    def check_isr(self) -> None:
        """Propose removing the replicas that stopped catching up (the periodic check)."""
        if self.alter_partition is None or self.broker_epoch() < 0:
            return  # single node, or not registered yet (the controller would refuse)
        now = self.clock()
        for part in list(self._partitions.values()):
            if part.role is Role.LEADER:
                pending = part.maybe_shrink_isr(now, self.settings.lag_time_max_ms)
                if pending is not None:
                    self._send_isr_change(part, pending)

    def _maybe_expand_isr(self, part: Partition, replica_id: int) -> None:
        if self.alter_partition is None or replica_id in part.isr or self.broker_epoch() < 0:
            return
        state = part.followers.get(replica_id)
        if state is None or not self.isr_eligible(replica_id, state.broker_epoch):
            return
        pending = part.maybe_expand_isr(replica_id, self.clock())
        if pending is not None:
            self._send_isr_change(part, pending)

    def _send_isr_change(self, part: Partition, pending: PendingIsrChange) -> None:
        self._tasks.start_soon(self._alter_isr, part, pending,
                               name=f"alter_isr-{part.topic}-{part.index}")

    async def _alter_isr(self, part: Partition, pending: PendingIsrChange) -> None:
        assert self.alter_partition is not None
        backoff = self.settings.alter_partition_backoff_ms
        if part.topic_id is None:
            part.apply_isr_result(pending, error=ErrorCode.unknown_topic_id,
                                  retry_after_ms=self.clock() + backoff)
            return
        own_epoch = self.broker_epoch()
        request = AlterPartitionRequest(
            broker_id=self.node_id, broker_epoch=own_epoch,
            topics=[(part.topic_id, [pending.item(part.index,
                                                  part.follower_broker_epochs(own_epoch))])],
        )
        error = ErrorCode.unknown_server_error
        try:
            reply = await asyncio.wait_for(self.alter_partition(request),
                                           self.settings.socket_timeout_ms / 1000)
            error = reply.error
            if error is ErrorCode.none:
                error = ErrorCode.unknown_topic_or_partition  # unless the reply names it
                for topic_id, items in reply.topics:
                    for item in items:
                        if topic_id == part.topic_id and item.partition_index == part.index:
                            error = item.error
                            if error is ErrorCode.none:
                                if pending.expand:
                                    self.isr_expands += 1
                                else:
                                    self.isr_shrinks += 1
                                changed = part.apply_isr_result(
                                    pending, error=error, isr=tuple(item.isr),
                                    leader_epoch=item.leader_epoch,
                                    partition_epoch=item.partition_epoch,
                                )
                                log.info("isr_changed", topic=part.topic, partition=part.index,
                                         isr=list(item.isr), applied=changed,
                                         partition_epoch=item.partition_epoch)
                                return
        except KafkaError as exc:
            error = exc.error_code
        except TimeoutError:
            error = ErrorCode.request_timed_out
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("alter_partition_failed", topic=part.topic, partition=part.index)
        # INVALID_UPDATE_VERSION, FENCED_LEADER_EPOCH, NOT_CONTROLLER, ...: drop the proposal;
        # the next metadata or the next check after the backoff proposes again.
        log.info("isr_change_refused", topic=part.topic, partition=part.index,
                 proposed=list(pending.new_isr), error=error.name)
        self.failed_isr_updates += 1
        part.apply_isr_result(pending, error=error, retry_after_ms=self.clock() + backoff)

    # ---- produce -----------------------------------------------------------------

    async def append(
        self, entries: dict[TopicPartition, bytes | memoryview], *, required_acks: int,
        timeout_ms: int,
        verification: Mapping[TopicPartition, Guard | None] | None = None,
    ) -> dict[TopicPartition, AppendResult | KafkaError]:
        router = self.shard_router
        if router is not None:
            return await router.append(entries, required_acks, timeout_ms, verification)
        return await self.append_local(entries, required_acks=required_acks,
                                       timeout_ms=timeout_ms, verification=verification)

    async def append_local(
        self, entries: dict[TopicPartition, bytes | memoryview], *, required_acks: int,
        timeout_ms: int,
        verification: Mapping[TopicPartition, Guard | None] | None = None,
    ) -> dict[TopicPartition, AppendResult | KafkaError]:
        """`verification` (KIP-890, a client's transactional produce with
        transaction.partition.verification.enable): the verification guard of each
        partition (None where none was needed); a transactional batch that opens a
        transaction without its current guard gets INVALID_TXN_STATE. None: no check."""
        results: dict[TopicPartition, AppendResult | KafkaError] = {}
        stats = self.topic_stats
        verify = verification is not None
        for (topic, index), records in entries.items():
            try:
                part = self.leader_partition(topic, index)
                held = verification.get((topic, index)) if verification is not None else None
                # a guard another worker holds is never this partition's
                guard = held if isinstance(held, VerificationGuard) else None
                try:
                    result = part.append_as_leader(records, required_acks, verify=verify,
                                                   guard=guard)
                except OSError as exc:
                    raise self.storage_failed(part, exc) from None
                results[(topic, index)] = result
                if stats is not None:
                    st = stats.topic(topic)
                    st.total_produce += 1
                    st.messages_in += result.records_count
                    st.bytes_in += len(records)
            except KafkaError as exc:
                results[(topic, index)] = exc
                if stats is not None:
                    count_failed_produce(stats.topic(topic), exc, len(records))
        if required_acks == -1:
            await self._wait_replicated(results, timeout_ms)
        return results

    def start_verification(self, topic: str, index: int, producer_id: int, sequence: int,
                           epoch: int, *, supports_epoch_bump: bool = False,
                           ) -> VerificationGuard | None:
        """KIP-890: the producer's verification guard on this leader's partition, or None
        when its transaction is already open there. Raises KafkaError (not the leader)."""
        return self.leader_partition(topic, index).start_verification(
            producer_id, sequence, epoch, supports_epoch_bump=supports_epoch_bump)

    async def start_verifications(
        self, producer_id: int, epoch: int, sequences: Mapping[TopicPartition, int], *,
        supports_epoch_bump: bool = False,
    ) -> dict[TopicPartition, Guard | None]:
        """`start_verification` for each partition (with the batch's first sequence); None
        where the transaction is open or this broker does not lead it (the append answers
        that). A broker of several workers asks each partition's owner."""
        router = self.shard_router
        if router is not None:
            return await router.start_verifications(producer_id, epoch, sequences,
                                                     supports_epoch_bump)
        return dict(self.start_verifications_local(producer_id, epoch, sequences,
                                                   supports_epoch_bump=supports_epoch_bump))

    def producers_local(self, keys: list[TopicPartition] | None
                        ) -> dict[TopicPartition, list[ProducerRow]]:
        """The producers of each partition this process leads (`keys`, None: every one):
        (producer id, epoch, last sequence, last timestamp, coordinator epoch, first offset
        of its open transaction or -1), by producer id."""
        parts = (self.partitions() if keys is None
                 else [p for k in keys if (p := self.get(*k)) is not None])
        out: dict[TopicPartition, list[ProducerRow]] = {}
        for part in parts:
            if part.role is Role.LEADER:
                out[(part.topic, part.index)] = [
                    (pid, e.epoch, e.last_seq, e.last_timestamp, e.coordinator_epoch,
                     e.current_txn_first_offset)
                    for pid, e in sorted(part.producer_state.producers.items())]
        return out

    def offsets_local(self, keys: list[TopicPartition]
                      ) -> dict[TopicPartition, tuple[int, int, int]]:
        """(log start, high watermark, log end) of each partition this process leads."""
        out: dict[TopicPartition, tuple[int, int, int]] = {}
        for topic, index in keys:
            part = self.get(topic, index)
            if part is not None and part.role is Role.LEADER:
                out[(topic, index)] = (int(part.log.log_start_offset),
                                       int(part.high_watermark), int(part.log.log_end_offset))
        return out

    def progress_local(self, keys: list[TopicPartition]
                       ) -> dict[TopicPartition, tuple[int, dict[int, int]]]:
        """(log end, each follower's log end as this leader last saw it) of each partition
        this process leads: a reassignment's copy progress."""
        out: dict[TopicPartition, tuple[int, dict[int, int]]] = {}
        for topic, index in keys:
            part = self.get(topic, index)
            if part is not None and part.role is Role.LEADER:
                out[(topic, index)] = (int(part.log.log_end_offset), {
                    int(r): int(f.log_end_offset) for r, f in part.followers.items()})
        return out

    def start_verifications_local(
        self, producer_id: int, epoch: int, sequences: Mapping[TopicPartition, int], *,
        supports_epoch_bump: bool = False,
    ) -> dict[TopicPartition, VerificationGuard | None]:
        guards: dict[TopicPartition, VerificationGuard | None] = {}
        for (topic, index), sequence in sequences.items():
            try:
                guards[(topic, index)] = self.start_verification(
                    topic, index, producer_id, sequence, epoch,
                    supports_epoch_bump=supports_epoch_bump)
            except KafkaError:
                guards[(topic, index)] = None
        return guards

    async def write_txn_marker(
        self, topic: str, partition: int, *, producer_id: int, producer_epoch: int,
        coordinator_epoch: int, committed: bool, timeout_ms: int,
    ) -> ErrorCode:
        """Write one end-transaction marker (COMMIT when `committed`, else ABORT) on this
        leader's replica of topic-partition and wait, at most `timeout_ms`, until the ISR
        holds it. Answers ErrorCode.none or the error for the coordinator:
        UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS,
        INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED, REQUEST_TIMED_OUT,
        KAFKA_STORAGE_ERROR. Never raises KafkaError."""
        router = self.shard_router
        if router is not None and not router.owns(topic, partition):
            return await router.write_txn_marker(topic, partition, producer_id, producer_epoch,
                                                 coordinator_epoch, committed, timeout_ms)
        results: dict[TopicPartition, AppendResult | KafkaError] = {}
        key = (topic, partition)
        try:
            part = self.leader_partition(topic, partition)
            try:
                results[key] = part.write_marker(
                    producer_id=producer_id, producer_epoch=producer_epoch,
                    coordinator_epoch=coordinator_epoch, committed=committed)
            except OSError as exc:
                raise self.storage_failed(part, exc) from None
        except KafkaError as exc:
            return exc.error_code
        await self._wait_replicated(results, timeout_ms)
        result = results[key]
        if isinstance(result, KafkaError):
            return result.error_code
        listener = self.txn_marker_listener
        if listener is not None:
            try:
                listener(topic, partition, producer_id, committed)
            except Exception:
                log.exception("txn_marker_listener_failed", topic=topic, partition=partition)
        return ErrorCode.none

    async def _wait_replicated(
        self, results: dict[TopicPartition, AppendResult | KafkaError], timeout_ms: int,
    ) -> None:
        deadline = -1.0  # read the loop's clock only once there is something to wait for
        while True:
            pending: list[asyncio.Future[None]] = []
            for key, result in results.items():
                if isinstance(result, KafkaError):
                    continue
                part = self._partitions.get(key)
                if part is None or part.role is not Role.LEADER:
                    results[key] = KafkaError(ErrorCode.not_leader_or_follower, f"{key}")
                elif part.high_watermark <= result.last_offset:
                    pending.append(part.new_waiter())
            if not pending:
                return
            now = asyncio.get_running_loop().time()
            if deadline < 0:
                deadline = now + timeout_ms / 1000
            remaining = deadline - now
            if remaining > 0:
                await wait_first(pending, remaining)
            if asyncio.get_running_loop().time() >= deadline:
                for key, result in results.items():
                    part = self._partitions.get(key)
                    if (
                        not isinstance(result, KafkaError) and part is not None
                        and part.high_watermark <= result.last_offset
                    ):
                        results[key] = KafkaError(
                            ErrorCode.request_timed_out, "not replicated to the ISR in time"
                        )
                return

    # ---- fetch -------------------------------------------------------------------

    def preferred_read_replica(self, part: Partition, fetch_offset: int, client_rack: str) -> int:
        """KIP-392 on the leader: an in-sync follower in the consumer's rack that holds
        `fetch_offset` (the one furthest ahead, then the lowest id), or -1 to read here.
        Only when this broker has a rack (broker.rack)."""
        own = self.settings.rack
        if not client_rack or own is None or own == client_rack:
            return -1
        best: tuple[int, int] | None = None
        for r in part.isr:
            state = part.followers.get(r)
            if state is None or state.log_end_offset < fetch_offset:
                continue
            if self.rack_of(r) != client_rack:
                continue
            if best is None or (state.log_end_offset, -r) > (best[0], -best[1]):
                best = (state.log_end_offset, r)
        return -1 if best is None else best[1]

    def _read_once(
        self, requests: list[FetchPartitionRequest], *, replica_id: int, max_bytes: int,
        replica_epoch: int = -1, client_rack: str | None = None,
        isolation_level: int = READ_UNCOMMITTED,
    ) -> list[FetchPartitionResult]:
        read_committed = isolation_level == READ_COMMITTED and replica_id < 0
        results: list[FetchPartitionResult] = []
        budget = max_bytes
        first_with_data = True
        for req in requests:
            res = FetchPartitionResult(topic=req.topic, partition=req.partition)
            results.append(res)
            part = self._partitions.get((req.topic, req.partition))
            if part is None:
                res.error_code = (ErrorCode.kafka_storage_error
                                  if (req.topic, req.partition) in self.offline
                                  else ErrorCode.unknown_topic_or_partition)
                continue
            res.leader_id, res.leader_epoch = part.leader_id, part.leader_epoch
            try:
                # Consumers that name a rack (Fetch v11+) may read from followers (KIP-392).
                part.require_readable(req.current_leader_epoch,
                                      leader_only=replica_id >= 0 or client_rack is None)
                res.high_watermark = part.high_watermark
                res.last_stable_offset = part.last_stable_offset
                res.log_start_offset = part.log.log_start_offset
                if req.last_fetched_epoch >= 0:
                    # Kafka's check (KIP-595 / KIP-320): the follower's last epoch must end
                    # here at or after its fetch offset, else it truncates first.
                    epoch, end = part.end_offset_for_epoch(req.last_fetched_epoch)
                    if epoch < req.last_fetched_epoch or end < req.fetch_offset:
                        res.diverging_epoch = (epoch, end)
                        continue
                if client_rack and part.role is Role.LEADER:
                    preferred = self.preferred_read_replica(part, req.fetch_offset, client_rack)
                    if preferred >= 0:
                        res.preferred_read_replica = preferred
                        continue
                if replica_id >= 0 and replica_id not in part.followers:
                    # Kafka: only assigned replicas fetch as followers (their fetches move
                    # the high watermark and read past it).
                    raise KafkaError(ErrorCode.not_leader_or_follower,
                                     f"broker {replica_id} is not a replica of "
                                     f"{req.topic}-{req.partition}")
                if replica_id >= 0 and req.fetch_offset <= part.log.log_end_offset:
                    part.update_follower(replica_id, req.fetch_offset, broker_epoch=replica_epoch)
                    res.high_watermark = part.high_watermark
                    self._maybe_expand_isr(part, replica_id)
                if budget <= 0 and not first_with_data:
                    continue
                try:
                    records = part.read(
                        req.fetch_offset, min(req.partition_max_bytes, max(budget, 0)),
                        for_replica=replica_id >= 0, min_one_batch=first_with_data,
                        read_committed=read_committed,
                    )
                except OSError as exc:
                    raise self.storage_failed(part, exc) from None
                res.records = records
                if read_committed:
                    res.aborted_transactions = [
                        (a.producer_id, a.first_offset) for a in part.aborted_transactions(
                            req.fetch_offset, res.last_stable_offset)
                    ] if records.length else []
                if records.length:
                    budget -= records.length
                    first_with_data = False
            except KafkaError as exc:
                res.error_code = exc.error_code
        return results

    def session_loud(self, entries: Iterable[tuple[int, str, int, SessionPartition]], *,
                     replica_id: int, replica_epoch: int = -1) -> list[int]:
        """Of an incremental fetch session's partitions (index, topic, partition, cached),
        the indexes of those that may have something to tell the client (KIP-227); the
        others are found quiet without reading: this broker leads them at the epoch the
        client knows, their high watermark, last stable offset and log start are those last
        answered, and the fetch offset is where there is nothing more to read (the high
        watermark for a consumer, the log end for a follower, whose fetch is still recorded
        as _read_once records it). One loop over the session, not a call per partition:
        this is what an idle round costs."""
        parts = self._partitions
        leader = Role.LEADER
        loud: list[int] = []
        for i, topic, index, cached in entries:
            part = parts.get((topic, index))
            data = cached.data
            if (part is None or part.role is not leader
                    or 0 <= data.current_leader_epoch != part.leader_epoch):
                loud.append(i)
                continue
            hw = part.high_watermark
            if (hw != cached.high_watermark or part.last_stable_offset != cached.last_stable_offset
                    or part.log.log_start_offset != cached.log_start_offset):
                loud.append(i)
            elif replica_id < 0:
                if data.fetch_offset != hw:
                    loud.append(i)
            elif (data.fetch_offset != part.log.log_end_offset
                  or replica_id not in part.followers
                  or 0 <= data.last_fetched_epoch != part.log.latest_epoch):
                loud.append(i)
            else:
                part.update_follower(replica_id, data.fetch_offset, broker_epoch=replica_epoch)
                self._maybe_expand_isr(part, replica_id)
                if part.high_watermark != hw:  # the follower's fetch moved it
                    loud.append(i)
        return loud

    async def wait_any(self, keys: Iterable[TopicPartition], *, for_log_end: bool,
                       timeout_s: float) -> bool:
        router = self.shard_router
        if router is not None:
            return await router.wait_any(list(keys), for_log_end, timeout_s)
        return await self.wait_any_local(keys, for_log_end=for_log_end, timeout_s=timeout_s)

    async def wait_any_local(self, keys: Iterable[TopicPartition], *, for_log_end: bool,
                             timeout_s: float) -> bool:
        """Until the high watermark (or, `for_log_end`, the log end) of one of `keys` moves,
        a role changes, or `timeout_s` passes: one future for all of them. False when the
        time ran out with none of them moved."""
        mark_remote_wait()  # the request's RemoteTimeMs starts (metrics)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        parts = self._partitions
        for key in keys:
            p = parts.get(key)
            if p is not None:
                p.add_waiter(future, for_log_end=for_log_end)
        timer = loop.call_later(timeout_s, _time_out, future)
        try:
            return await future is not _TIMED_OUT  # partitions complete it with None
        finally:
            timer.cancel()

    async def fetch(
        self, requests: list[FetchPartitionRequest], *, replica_id: int, max_wait_ms: int,
        min_bytes: int, max_bytes: int, replica_epoch: int = -1, client_rack: str | None = None,
        isolation_level: int = READ_UNCOMMITTED,
    ) -> list[FetchPartitionResult]:
        router = self.shard_router
        if router is not None:
            return await router.fetch(requests, replica_id, max_wait_ms, min_bytes, max_bytes,
                                      replica_epoch, client_rack, isolation_level)
        return await self.fetch_local(
            requests, replica_id=replica_id, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
            max_bytes=max_bytes, replica_epoch=replica_epoch, client_rack=client_rack,
            isolation_level=isolation_level)

    async def fetch_local(
        self, requests: list[FetchPartitionRequest], *, replica_id: int, max_wait_ms: int,
        min_bytes: int, max_bytes: int, replica_epoch: int = -1, client_rack: str | None = None,
        isolation_level: int = READ_UNCOMMITTED,
    ) -> list[FetchPartitionResult]:
        """`client_rack` is a consumer's rack_id (Fetch v11+, "" when it has none); None
        (older versions, followers) means leader-only reads. A consumer's READ_COMMITTED
        `isolation_level` (Fetch v4+) reads up to the last stable offset."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait_ms / 1000
        while True:
            results = self._read_once(requests, replica_id=replica_id, max_bytes=max_bytes,
                                      replica_epoch=replica_epoch, client_rack=client_rack,
                                      isolation_level=isolation_level)
            total = sum(r.size for r in results)
            errored = any(
                r.error_code != ErrorCode.none or r.diverging_epoch is not None
                or r.preferred_read_replica >= 0 for r in results
            )
            remaining = deadline - loop.time()
            if total >= min_bytes or errored or remaining <= 0:
                if self.topic_stats is not None:
                    count_fetch(self.topic_stats, results, replica_id >= 0)
                return results
            # Registered after the read with no await in between, so nothing is missed.
            # Followers wait for the log end to move, consumers for the high watermark.
            waiters = [
                p.new_waiter(for_log_end=replica_id >= 0) for r in requests
                if (p := self._partitions.get((r.topic, r.partition))) is not None
            ]
            if not waiters:
                if self.topic_stats is not None:
                    count_fetch(self.topic_stats, results, replica_id >= 0)
                return results
            await wait_first(waiters, remaining)


# Kafka's BytesRejectedPerSec: produce bytes refused for what they are, not where they went.
_REJECTING_ERRORS: Final = frozenset({
    ErrorCode.corrupt_message, ErrorCode.message_too_large, ErrorCode.record_list_too_large,
    ErrorCode.invalid_record, ErrorCode.invalid_timestamp,
})


def count_failed_produce(st: TopicStats, exc: KafkaError, size: int) -> None:
    st.total_produce += 1
    st.failed_produce += 1
    if exc.error_code in _REJECTING_ERRORS:
        st.bytes_rejected += size


def count_fetch(stats: BrokerTopicStats, results: list[FetchPartitionResult],
                replication: bool) -> None:
    """A fetch's answer, counted once (long-poll rereads are not)."""
    for r in results:
        st = stats.topic(r.topic)
        st.total_fetch += 1
        if r.error_code is not ErrorCode.none:
            st.failed_fetch += 1
        elif r.records is not None:
            if replication:
                st.replication_bytes_out += r.records.length
            else:
                st.bytes_out += r.records.length


async def wait_first(waiters: list[asyncio.Future[None]], timeout_s: float) -> None:
    """Until one of `waiters` (fresh Partition.new_waiter futures, owned by the caller) is
    done or `timeout_s` passes; then cancels the rest. asyncio.wait(FIRST_COMPLETED) does
    the same with a set, a future and callbacks per call: 20-30 us on every long poll and
    acks=all wait, once per follower round."""
    mark_remote_wait()  # the request's RemoteTimeMs starts (metrics)
    loop = asyncio.get_running_loop()
    target = waiters[0] if len(waiters) == 1 else loop.create_future()
    if target is not waiters[0]:
        def wake(_f: asyncio.Future[None]) -> None:
            if not target.done():
                target.set_result(None)

        for w in waiters:
            w.add_done_callback(wake)
    timer = loop.call_later(timeout_s, _expire, target)
    try:
        await target  # a cancellation of the caller comes through here
    finally:
        timer.cancel()
        for w in waiters:
            w.cancel()


_TIMED_OUT: Final = object()


def _time_out(target: asyncio.Future[Any]) -> None:
    if not target.done():
        target.set_result(_TIMED_OUT)


def _expire(target: asyncio.Future[None]) -> None:
    if not target.done():
        target.set_result(None)
