"""Dead-letter queues for share groups (KIP-1191, `share.version` 2), as Kafka 4.4 writes
them.

A share group names its dead-letter topic with the group config
`errors.deadletterqueue.topic.name` (none when blank). When one of its records is archived
because a consumer REJECTed it, or because its delivery count reached
`share.delivery.count.limit` (a RELEASE, a lock that expired, or the owner's session
closing), the partition leader appends a dead letter to that topic: a record with the
record's key and value when the group sets `errors.deadletterqueue.copy.record.enable`
(else neither), the time it was written (CreateTime), and the headers

    __dlq.errors.topic            the record's topic
    __dlq.errors.partition        its partition
    __dlq.errors.offset           its offset
    __dlq.errors.group            the share group
    __dlq.errors.delivery.count   its delivery count
    __dlq.errors.message          "Offset rejected by client." or "Offset delivery count
                                  exceeded the threshold."

(the record's own headers are not copied), on partition (record's partition) mod (the
dead-letter topic's partition count). The topic must start with the broker's
`errors.deadletterqueue.topic.name.prefix` (default `dlq.`; "" allows any name), must not
start with `__`, and must set `errors.deadletterqueue.group.enable=true`; when it does not
exist it is created only with `errors.deadletterqueue.auto.create.topics.enable` (with that
topic config and CreateTime). A dead letter that cannot be written is logged with Kafka's
words and the record stays archived, as Kafka's "proceeding to ARCHIVED regardless".

Unlike Kafka, which holds such records ARCHIVING until the dead letter is written, Skiff
archives them at once and writes the dead letters after, in order, from one queue per
node: a leader that dies in between loses those dead letters (never the archiving).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import structlog
from kio.schema.errors import ErrorCode

from broker.config.resource_configs import DLQ_COPY_RECORD_ENABLE, DLQ_TOPIC_NAME, group_flag
from broker.coordinator.services import NodeSettings
from broker.errors import KafkaError
from broker.metrics.stats import ShareStats
from broker.protocol.records import (
    Record,
    build_batch,
    decode_records,
    iter_batch_headers,
    whole_batches_length,
)
from broker.share.partition import DeadRun
from broker.util.tasks import ServiceTasks, TaskHandle

if TYPE_CHECKING:
    from broker.controller.api import ControllerApi
    from broker.replication import ReplicaManager

log = structlog.get_logger(__name__)

HEADER_TOPIC = "__dlq.errors.topic"
HEADER_PARTITION = "__dlq.errors.partition"
HEADER_OFFSET = "__dlq.errors.offset"
HEADER_GROUP = "__dlq.errors.group"
HEADER_DELIVERY_COUNT = "__dlq.errors.delivery.count"
HEADER_MESSAGE = "__dlq.errors.message"
REJECTED_MESSAGE = "Offset rejected by client."
DELIVERY_LIMIT_MESSAGE = "Offset delivery count exceeded the threshold."
TOPIC_ENABLE_CONFIG = "errors.deadletterqueue.group.enable"
PREFIX_CONFIG = "errors.deadletterqueue.topic.name.prefix"
AUTO_CREATE_CONFIG = "errors.deadletterqueue.auto.create.topics.enable"
WRITE_TIMEOUT_MS = 30000
CREATE_WAIT_S = 10.0
CREATE_POLL_S = 0.05
# what is read of a partition another worker owns for the originals of dead letters
ORIGINALS_READ_BYTES = 4 << 20


@dataclass(frozen=True, slots=True)
class DeadLetters:
    group_id: str
    topic: str
    partition: int
    runs: tuple[DeadRun, ...]


def topic_problem(group_id: str, name: str, prefix: str) -> str | None:
    """Why `name` cannot be the group's dead-letter topic (Kafka's words), or None."""
    if not name:
        return f"Configured DLQ topic name in share group: {group_id} is empty."
    if name.startswith("__"):
        return (f"Configured DLQ topic name in share group: {group_id} cannot start with __, "
                f"topic: {name}.")
    if prefix and not name.startswith(prefix):
        return (f"Configured DLQ topic name does not comply with the DLQ topic prefix in share "
                f"group: {group_id}, topic: {name}, prefix: {prefix}.")
    return None


def dead_letter_records(letters: DeadLetters, originals: Mapping[int, Record] | None,
                        now_ms: int) -> list[Record]:
    """One dead letter per archived offset, in offset order. `originals`: the records by
    offset when the group copies them (an offset the log no longer holds gets neither key
    nor value)."""
    out: list[Record] = []
    for run in letters.runs:
        message = REJECTED_MESSAGE if run.rejected else DELIVERY_LIMIT_MESSAGE
        for offset in range(run.first, run.last + 1):
            original = originals.get(offset) if originals is not None else None
            out.append(Record(
                timestamp=now_ms,
                key=original.key if original is not None else None,
                value=original.value if original is not None else None,
                headers=(
                    (HEADER_TOPIC, letters.topic.encode()),
                    (HEADER_PARTITION, str(letters.partition).encode()),
                    (HEADER_OFFSET, str(offset).encode()),
                    (HEADER_GROUP, letters.group_id.encode()),
                    (HEADER_DELIVERY_COUNT, str(run.delivery_count).encode()),
                    (HEADER_MESSAGE, message.encode()),
                )))
    return out


def _setting(node: NodeSettings, key: str) -> Any:
    """A broker setting the cluster may change at run time: this broker's dynamic value, the
    cluster's, the node's file, else Kafka's default."""
    from broker.config import BROKER_CONFIGS

    image = node.metadata
    for layer in (image.broker_config(int(node.node_id)), image.broker_config()):
        if key in layer:
            return BROKER_CONFIGS[key].parse(layer[key])
    try:
        return node.config[key]
    except KeyError:
        return BROKER_CONFIGS[key].default


Produce = Callable[[str, int, bytes], Any]  # (topic, partition, batch) -> awaitable ErrorCode


class DeadLetterNode(NodeSettings, Protocol):
    """What the dead-letter queue uses of its node: the dead-letter topics' leaders here,
    and the controller that creates a missing topic."""

    @property
    def replicas(self) -> ReplicaManager: ...

    @property
    def controller(self) -> ControllerApi: ...


class DeadLetterQueue:
    """Writes the dead letters of this node's share-partitions, one at a time in the order
    they were archived. `produce(topic, partition, batch)` appends a batch on the
    partition's leader (here or over the inter-broker listener)."""

    def __init__(self, node: DeadLetterNode, group_config: Callable[[str], Mapping[str, str]],
                 produce: Produce, clock: Callable[[], int],
                 stats: ShareStats | None = None) -> None:
        self.node = node
        self.group_config = group_config
        self.produce = produce
        self.clock = clock
        # Kafka's ShareGroupMetrics DeadLetterQueue* meters, per group
        self.stats = stats if stats is not None else ShareStats()
        self._queue: asyncio.Queue[DeadLetters] = asyncio.Queue()
        self._tasks = ServiceTasks("share_dlq")
        self._worker: TaskHandle | None = None
        self.written = 0

    def enabled(self, group_id: str) -> bool:
        """share.version 2 and a dead-letter topic named by the group."""
        if self.node.metadata.finalized_level("share.version") < 2:
            return False
        return bool(self.group_config(group_id).get(DLQ_TOPIC_NAME, "").strip())

    def offer(self, letters: DeadLetters) -> None:
        if not letters.runs or not self.enabled(letters.group_id):
            return
        self._queue.put_nowait(letters)
        if self._worker is None or self._worker.done():
            self._worker = self._tasks.start_soon(self._run, name="dlq_writer")

    async def drain(self) -> None:
        """Waits until every dead letter offered so far was written or given up (tests)."""
        await self._queue.join()

    async def close(self) -> None:
        await self._tasks.close()

    async def _run(self) -> None:
        while True:
            letters = await self._queue.get()
            try:
                await self._write(letters)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # never let one group's dead letters stop the others
                log.warning("dlq_write_failed", group=letters.group_id, topic=letters.topic,
                            partition=letters.partition, error=repr(exc))
            finally:
                self._queue.task_done()

    async def _write(self, letters: DeadLetters) -> None:
        gid = letters.group_id
        configs = self.group_config(gid)
        name = configs.get(DLQ_TOPIC_NAME, "").strip()
        problem = topic_problem(gid, name, str(_setting(self.node, PREFIX_CONFIG)))
        if problem is None:
            problem = await self._check_topic(gid, name)
        if problem is not None:
            log.warning("dlq_not_written", reason=problem, group=gid, topic=letters.topic,
                        partition=letters.partition,
                        records=sum(r.last - r.first + 1 for r in letters.runs))
            return
        originals = (await self._originals(letters)
                     if group_flag(configs, DLQ_COPY_RECORD_ENABLE) else None)
        records = dead_letter_records(letters, originals, self.clock())
        topic = self.node.metadata.topic(name)
        assert topic is not None  # _check_topic found it, and nothing has run since
        partition = letters.partition % topic.num_partitions
        try:
            error = await self.produce(name, partition, build_batch(records))
        except asyncio.CancelledError:
            raise
        except Exception:
            self.stats.dead_letters_produced(gid, len(records), failed=True)
            raise
        self.stats.dead_letters_produced(gid, len(records), failed=error is not ErrorCode.none)
        if error is not ErrorCode.none:
            log.warning("dlq_not_written", group=gid, topic=letters.topic,
                        partition=letters.partition, dlq_topic=name, error=error.name,
                        reason="Failed to write to DLQ, proceeding to ARCHIVED regardless.")
            return
        self.written += len(records)

    async def _check_topic(self, group_id: str, name: str) -> str | None:
        image = self.node.metadata
        if image.topic(name) is None:
            if not bool(_setting(self.node, AUTO_CREATE_CONFIG)):
                return (f"DLQ topic does not exist and auto create is disabled on cluster for "
                        f"share group: {group_id}, topic: {name}.")
            await self._create(name)
            image = self.node.metadata
            if image.topic(name) is None:
                return (f"DLQ topic id could not be found for share group {group_id} with DLQ "
                        f"topic {name}.")
        if str(image.topic_config(name).get(TOPIC_ENABLE_CONFIG, "false")).strip().lower() \
                != "true":
            return (f"DLQ is not enabled on configured DLQ topic for share group: {group_id}, "
                    f"topic: {name}.")
        return None

    async def _create(self, name: str) -> None:
        from broker.controller.requests import CreatableTopic

        try:
            await self.node.controller.create_topics([CreatableTopic(name, configs={
                TOPIC_ENABLE_CONFIG: "true", "message.timestamp.type": "CreateTime"})])
        except KafkaError as exc:
            log.info("dlq_topic_not_created", topic=name, error=exc.error_code.name)
            return
        for _ in range(int(CREATE_WAIT_S / CREATE_POLL_S)):  # until this node's image has it
            if self.node.metadata.topic(name) is not None:
                return
            await asyncio.sleep(CREATE_POLL_S)

    async def _originals(self, letters: DeadLetters) -> dict[int, Record]:
        first = min(r.first for r in letters.runs)
        last = max(r.last for r in letters.runs)
        replicas = self.node.replicas
        router = replicas.shard_router
        try:
            if router is not None and not router.owns(letters.topic, letters.partition):
                # another worker of this broker owns it: the records from its view
                view = await router.partition_view(letters.topic, letters.partition, first,
                                                   ORIGINALS_READ_BYTES, False)
                data = view.log.read(first, ORIGINALS_READ_BYTES, last + 1).read_bytes()
                records: Sequence[Record] = records_in(data, first)
            else:
                part = replicas.leader_partition(letters.topic, letters.partition)
                # not bounded by last + 1: a log read stops before the batch holding its
                # bound, which may be the batch of the records themselves
                records = part.log.read_records(first, max_records=last - first + 1)
        except KafkaError:
            return {}
        return {r.offset: r for r in records if first <= r.offset <= last}


def records_in(data: bytes, first: int) -> list[Record]:
    """The records of the whole batches of `data` at or after `first`, control ones left
    out."""
    mv = memoryview(data)[:whole_batches_length(data)]
    out: list[Record] = []
    for pos, h in iter_batch_headers(mv, validate_crc=True):
        if not h.is_control:
            out += [r for r in decode_records(mv[pos:pos + h.size]) if r.offset >= first]
    return out
