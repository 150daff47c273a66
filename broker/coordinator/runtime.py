"""The IO shell that runs pure coordinators, one per partition of a compacted internal topic.

Kafka (3.6+) runs its group and transaction coordinators on one `CoordinatorRuntime`; this is
Skiff's. Both keep their state in an internal topic (__consumer_offsets,
__transaction_state) and run a pure state machine per partition on the broker that leads it.
The runtime does, for either:

- leadership: read from the metadata image (the publisher subscription, re-checked on every
  tick). Gaining a partition, or a new leader epoch of it, starts a load: the partition's log
  is replayed into a new core, in windows between yields to the event loop, while requests
  routed there get COORDINATOR_LOAD_IN_PROGRESS. Losing it unloads the core: its waiting
  requests are answered NOT_COORDINATOR, so are later ones, and the tasks started for that
  partition (a transaction's marker sends) are cancelled.
- the tick loop: the cores' timers (session timeouts, transaction timeouts, expirations).
- the write path: the records a core emits (through broker/coordinator/core.py's
  CoordinatorCore) are appended to its partition through the replica manager with acks=all;
  the core hears the outcome (`write_completed`) only once the append is replicated to the
  ISR, and its replies complete the requests waiting on them. Each write waits in a plain
  asyncio task the runtime keeps (stop cancels and awaits them before its task group):
  a write is milliseconds long and one per offset commit, and an anyio task of the group
  costs ~4x an asyncio task to start (offset commits/s fell by a quarter with them).
- routing: a key hashes to a partition (Kafka's partitionFor), then to the core loaded here
  or to the error a client retries on; FindCoordinator's answer (the partition leader's
  endpoint); the topic itself, created through the controller the first time it is needed.

What differs between the coordinators is given by a `CoordinatorShards`, which the service
(broker/group/shell.py, broker/txn/shell.py) implements: how a core is made, how a record
batch replays into it, what its writes look like on the log, what else its effects ask for.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar

import structlog
from kio.schema.errors import ErrorCode

from broker.coordinator.partitioning import partition_for
from broker.coordinator.services import CoordinatorNode, NodeSettings
from broker.errors import KafkaError
from broker.replication import Role
from broker.util.tasks import ServiceTasks, TaskHandle

log = structlog.get_logger(__name__)

LOAD_WINDOW = 4096  # offsets read per step while loading, between yields to the event loop
LEADER_WAIT_S = 30.0  # how long a load waits for the replica manager to see this leader epoch
LEADER_POLL_S = 0.02

# FindCoordinator's answer: (error, node id, host, port, message)
Located = tuple[ErrorCode, int, str, int, str | None]


class CoreEffects(Protocol):
    """What a pure core hands back: replies (each with `token` and `result`) to the requests
    waiting on them, and writes (each with `write_id`) to append."""

    @property
    def replies(self) -> Sequence[Any]: ...

    @property
    def writes(self) -> Sequence[Any]: ...


class Core(Protocol):
    """What the runtime calls on a pure core itself."""

    def tick(self, now_ms: int) -> Any: ...

    def write_completed(self, write_id: int, error: ErrorCode, now_ms: int) -> Any: ...


C = TypeVar("C", bound=Core)


class CoordinatorShards(Protocol[C]):
    """What one kind of coordinator tells the runtime (implemented by its service)."""

    def new_coordinator(self, partition: int, epoch: int, now_ms: int) -> C:
        """An empty core for `partition`, being loaded at leader `epoch`."""
        ...

    def replay(self, partition: int, coord: C, plog: Any, offset: int, upto: int) -> int:
        """Replays the partition log's records in [offset, upto) into the loading core
        (an unreadable record is logged and skipped); how many were applied."""
        ...

    def loaded(self, partition: int, coord: C, now_ms: int) -> CoreEffects | None:
        """The replay is over and `coord` now serves `partition` (it is in `coordinators`)."""
        ...

    def load_abandoned(self, partition: int) -> None:
        """A load of `partition` was cancelled before it ended (leadership moved on)."""
        ...

    def unloaded(self, partition: int, coord: C, now_ms: int) -> CoreEffects:
        """`coord` no longer serves `partition`: its effects answer what was waiting."""
        ...

    def log_counts(self, coord: C) -> dict[str, int]:
        """What the load and unload log lines count (e.g. groups=3)."""
        ...

    def record_batch(self, partition: int, write: Any, now_ms: int) -> bytes:
        """The record batch one write of the core appends (called right before the append,
        with no await in between)."""
        ...

    def more_effects(self, partition: int, coord: C, fx: Any) -> None:
        """Effects beyond replies and writes (the transaction markers to send)."""
        ...

    def new_topic(self, live_brokers: int) -> tuple[int, int, dict[str, str]]:
        """(partitions, replication factor, topic configs) of the internal topic to create
        now, with this many live brokers (at least one)."""
        ...


def internal_partition_count(node: NodeSettings, topic: str, config_key: str) -> int:
    """How many partitions an internal topic has: the image's count once it exists, else
    the configured count it will be created with."""
    image = node.metadata.topic(topic)
    if image is not None and image.num_partitions > 0:
        return int(image.num_partitions)
    return int(node.config[config_key])


class CoordinatorRuntime(Generic[C]):
    def __init__(
        self, node: CoordinatorNode, shards: CoordinatorShards[C], *, name: str, topic: str,
        partitions_key: str, topic_log_name: str, write_timeout_ms: int,
        tick_interval_s: float = 0.1,
    ) -> None:
        """`name` prefixes task and log names ("group", "txn"); `partitions_key` is the
        config key of the topic's partition count, `topic_log_name` the prefix of its
        creation's log lines ("offsets_topic")."""
        self.node = node
        self.shards = shards
        self.name = name
        self.topic = topic
        self.partitions_key = partitions_key
        self.topic_log_name = topic_log_name
        self.write_timeout_ms = write_timeout_ms
        self.tick_interval_s = tick_interval_s
        self.coordinators: dict[int, C] = {}
        self.loading: dict[int, tuple[int, TaskHandle]] = {}  # partition: (epoch, load)
        self._loaded_epoch: dict[int, int] = {}
        self._waiting: dict[Any, asyncio.Future[Any]] = {}
        self._tokens = itertools.count(1)
        # every task of the runtime: the tick loop, loads, writes, the partitions' tasks
        self._tasks = ServiceTasks(f"{name}_coordinator")
        self._partition_tasks: dict[int, set[TaskHandle]] = {}
        self._writes: set[asyncio.Task[None]] = set()  # see the write path above
        self._create_lock: asyncio.Lock | None = None
        self._stopped = False

    # ---- lifecycle --------------------------------------------------------------------

    def start(self) -> None:
        """Subscribe to metadata and start the tick loop (inside the running event loop)."""
        self.node.publisher.subscribe(self.on_metadata)
        self._tasks.start_soon(self._tick_loop, name=f"{self.name}_coordinator_tick")
        self.reconcile()

    async def stop(self) -> None:
        self._stopped = True
        writes = list(self._writes)
        for w in writes:
            w.cancel()
        await asyncio.gather(*writes, return_exceptions=True)
        await self._tasks.close()
        self._unload_all(list(self.coordinators), "shutdown")

    def now(self) -> int:
        return int(self.node.clock())

    def spawn(self, fn: Callable[..., Awaitable[None]], *args: Any, name: str) -> TaskHandle:
        """`fn(*args)` in the runtime's task group, cancelled (and awaited) by stop."""
        return self._tasks.start_soon(fn, *args, name=name)

    def spawn_for(self, p: int, fn: Callable[..., Awaitable[None]], *args: Any,
                  name: str) -> None:
        """A task that lives while partition `p` stays loaded: unloading cancels it."""
        handle = self._tasks.start_soon(fn, *args, name=name)
        tasks = self._partition_tasks.setdefault(p, set())
        tasks.add(handle)
        handle.add_done_callback(tasks.discard)

    # ---- leadership ---------------------------------------------------------------------

    def on_metadata(self, old: Any, new: Any, delta: Any) -> None:
        if not self._stopped:
            self.reconcile()

    def _wanted(self) -> dict[int, int]:
        """partition: leader epoch, of the topic's partitions this broker leads."""
        topic = self.node.metadata.topic(self.topic)
        if topic is None:
            return {}
        return {i: reg.leader_epoch for i, reg in topic.partitions.items()
                if reg.leader == self.node.node_id}

    def reconcile(self) -> None:
        """Load the partitions this broker leads (again at a new leader epoch); unload the
        others."""
        wanted = self._wanted()
        self._unload_all([p for p in self.coordinators
                          if wanted.get(p) != self._loaded_epoch.get(p)], "leadership moved")
        for p, (epoch, task) in list(self.loading.items()):
            if wanted.get(p) != epoch:
                task.cancel()
                del self.loading[p]
                self.shards.load_abandoned(p)
        for p, epoch in wanted.items():
            if p not in self.coordinators and p not in self.loading:
                self.loading[p] = (epoch, self._tasks.start_soon(
                    self._load, p, epoch, name=f"{self.name}_load_{p}"))

    def _unload_all(self, partitions: list[int], reason: str) -> None:
        """Unload `partitions` and log one line for them all: a shutdown or a leadership
        change unloads up to every partition of the topic (50 by default) at once."""
        if not partitions:
            return
        totals: dict[str, int] = {}
        for p in partitions:
            for k, v in self.unload(p).items():
                totals[k] = totals.get(k, 0) + v
        log.info(f"{self.name}_coordinator_unloaded", partitions=_ranges(sorted(partitions)),
                 count=len(partitions), reason=reason, **totals)

    def unload(self, p: int) -> dict[str, int]:
        """Unload partition `p`'s coordinator (its counts for the log are returned)."""
        coord = self.coordinators.pop(p)
        self._loaded_epoch.pop(p, None)
        for task in self._partition_tasks.pop(p, set()):
            task.cancel()
        counts = self.shards.log_counts(coord)
        self.dispatch(p, coord, self.shards.unloaded(p, coord, self.now()))
        return counts

    async def _load(self, p: int, epoch: int) -> None:
        loop = asyncio.get_running_loop()
        try:
            started = loop.time()
            while True:
                part = self.node.replicas.get(self.topic, p)
                if part is not None and part.role is Role.LEADER and part.leader_epoch >= epoch:
                    break
                if loop.time() - started > LEADER_WAIT_S:
                    log.warning(f"{self.name}_load_gave_up", partition=p, epoch=epoch)
                    return
                await asyncio.sleep(LEADER_POLL_S)
            coord = self.shards.new_coordinator(p, epoch, self.now())
            plog = part.log
            offset, end = plog.log_start_offset, plog.log_end_offset
            count = 0
            while offset < end:
                upto = min(end, offset + LOAD_WINDOW)
                count += self.shards.replay(p, coord, plog, offset, upto)
                offset = upto
                await asyncio.sleep(0)
            if self.loading.get(p, (None,))[0] != epoch:
                return
            self.coordinators[p] = coord
            self._loaded_epoch[p] = epoch
            fx = self.shards.loaded(p, coord, self.now())
            if fx is not None:
                self.dispatch(p, coord, fx)
            counts = self.shards.log_counts(coord)
            (log.info if any(counts.values()) else log.debug)(
                f"{self.name}_coordinator_loaded", partition=p, epoch=epoch, records=count,
                **counts, ms=int((loop.time() - started) * 1000))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception(f"{self.name}_load_failed", partition=p)
        finally:
            current = self.loading.get(p)
            if current is not None and current[0] == epoch:
                del self.loading[p]

    # ---- ticking and effects ---------------------------------------------------------------

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(self.tick_interval_s)
            try:
                self.tick()
            except Exception:
                log.exception(f"{self.name}_tick_failed")

    def tick(self) -> None:
        self.reconcile()
        now = self.now()
        for p, coord in list(self.coordinators.items()):
            self.dispatch(p, coord, coord.tick(now))

    def dispatch(self, p: int, coord: C, fx: Any) -> None:
        """Carry out a core's effects: complete the requests its replies answer, append its
        writes, and hand the rest to the service."""
        for reply in fx.replies:
            fut = self._waiting.pop(reply.token, None)
            if fut is not None and not fut.done():
                fut.set_result(reply.result)
        for w in fx.writes:
            task = asyncio.get_running_loop().create_task(
                self._write(p, coord, w), name=f"{self.name}_write_{p}")
            self._writes.add(task)
            task.add_done_callback(self._writes.discard)
        self.shards.more_effects(p, coord, fx)

    async def _write(self, p: int, coord: C, w: Any) -> None:
        batch = self.shards.record_batch(p, w, self.now())
        error = ErrorCode.none
        try:
            results = await self.node.replicas.append(
                {(self.topic, p): batch}, required_acks=-1, timeout_ms=self.write_timeout_ms)
            result = results[(self.topic, p)]
            if isinstance(result, KafkaError):
                error = result.error_code
        except KafkaError as exc:
            error = exc.error_code
        except asyncio.CancelledError:
            error = ErrorCode.not_coordinator
        except Exception:
            log.exception(f"{self.name}_write_failed", partition=p)
            error = ErrorCode.unknown_server_error
        if error is not ErrorCode.none:
            log.info(f"{self.name}_write_error", partition=p, write_id=w.write_id,
                     error=error.name)
        self.dispatch(p, coord, coord.write_completed(w.write_id, error, self.now()))

    async def call(self, key: str, call: Callable[[C, int, int], Any]) -> Any:
        """Runs `call(core, token, now)` on `key`'s core and waits for the reply carrying
        that token. Raises KafkaError when the core is not loaded here."""
        p, coord = self.coordinator_for(key)
        token = next(self._tokens)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[token] = fut
        fut.add_done_callback(lambda _f: self._waiting.pop(token, None))
        self.dispatch(p, coord, call(coord, token, self.now()))
        return await fut

    # ---- routing --------------------------------------------------------------------------

    def partition_count(self) -> int:
        return internal_partition_count(self.node, self.topic, self.partitions_key)

    def partition_of(self, key: str) -> int:
        return partition_for(key, self.partition_count())

    def coordinator_for(self, key: str) -> tuple[int, C]:
        """(partition, core) of `key`; KafkaError COORDINATOR_LOAD_IN_PROGRESS while its
        partition loads, NOT_COORDINATOR when this broker does not lead it."""
        p = self.partition_of(key)
        coord = self.coordinators.get(p)
        if coord is not None:
            return p, coord
        if p in self.loading:
            raise KafkaError(ErrorCode.coordinator_load_in_progress, f"{self.topic}-{p}")
        raise KafkaError(ErrorCode.not_coordinator, f"{self.topic}-{p}")

    async def locate(self, key: str, listener_name: str) -> Located:
        """FindCoordinator: the endpoint on `listener_name` of the leader of `key`'s
        partition, creating the topic first when it does not exist yet."""
        if self.node.metadata.topic(self.topic) is None:
            error = await self.ensure_topic()
            if error is not ErrorCode.none:
                return error, -1, "", -1, None
        image = self.node.metadata
        leader = image.leader_of(self.topic, self.partition_of(key))
        broker = image.broker(leader) if leader >= 0 else None
        endpoint = broker.endpoint(listener_name) if broker is not None else None
        if endpoint is None or broker is None or broker.fenced:
            return ErrorCode.coordinator_not_available, -1, "", -1, None
        return ErrorCode.none, leader, endpoint.host, endpoint.port, None

    async def ensure_topic(self) -> ErrorCode:
        """Creates the internal topic through the controller unless it exists (one creation
        at a time); COORDINATOR_NOT_AVAILABLE when it cannot be created now."""
        from broker.controller.requests import CreatableTopic

        if self._create_lock is None:
            self._create_lock = asyncio.Lock()
        async with self._create_lock:
            image = self.node.metadata
            if image.topic(self.topic) is not None:
                return ErrorCode.none
            live = len(image.unfenced_broker_ids)
            if live == 0:
                return ErrorCode.coordinator_not_available
            partitions, rf, configs = self.shards.new_topic(live)
            try:
                results = await self.node.controller.create_topics([CreatableTopic(
                    name=self.topic, num_partitions=partitions, replication_factor=rf,
                    configs=configs)])
            except KafkaError as exc:
                log.info(f"{self.topic_log_name}_create_failed", error=str(exc))
                return ErrorCode.coordinator_not_available
            error = results[0].error
            if error not in (ErrorCode.none, ErrorCode.topic_already_exists):
                log.warning(f"{self.topic_log_name}_create_refused", error=error.name,
                            message=results[0].message)
                return ErrorCode.coordinator_not_available
            return ErrorCode.none


def _ranges(ps: list[int]) -> str:
    """Sorted partition numbers as ranges: [0, 1, 2, 5] -> "0-2,5"."""
    out: list[str] = []
    i = 0
    while i < len(ps):
        j = i
        while j + 1 < len(ps) and ps[j + 1] == ps[j] + 1:
            j += 1
        out.append(str(ps[i]) if i == j else f"{ps[i]}-{ps[j]}")
        i = j + 1
    return ",".join(out)
