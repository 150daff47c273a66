"""MirrorMaker 2 as the migration path between Kafka 4.4 and Skiff (issue 35, point 3).

MirrorMaker 2 runs in its dedicated mode (`org.apache.kafka.connect.mirror.MirrorMaker
mm2.properties --clusters <target>`, what `connect-mirror-maker.sh` starts), one JVM started
here and stopped by its PID. The connectors are connect-mirror 4.3.1 (Maven Central serves no
4.4.0, see tests/java/pom.xml) on the 4.4.0 Connect runtime, with tests/java/src's shims first
on the classpath. The properties are the ones docs/operations.md ("Migrating from Kafka with
MirrorMaker 2") tells a user to write:

- `IdentityReplicationPolicy`: a topic keeps its name on the target, so producers and
  consumers move without renaming anything (the default policy would write `kafka.orders`);
- `offset-syncs.topic.location=target`: MirrorMaker 2 writes nothing to the cluster being
  left (its Connect config/offset/status topics, the offset syncs, checkpoints and heartbeats
  all live on the target; the test checks that it created no topic on the source);
- topic configs synced every 5 s (a change on the source is followed on the target; the
  sync found a Skiff bug, see below);
- `sync.group.offsets.enabled=true` with checkpoints and group offset syncs every second;
- `plugin.discovery=service_load`, top level (MirrorMakerConfig's plugins) and with the
  target's prefix (the herder's: MirrorMaker 2 gives a herder the target's prefixed settings
  and ignores other top-level worker settings): every plugin has a ServiceLoader manifest,
  and the class-path scans took ~20 s each on the loaded machine.

The test, once in each direction (Kafka -> Skiff, then Skiff -> Kafka):

1. On the source: two topics (3 and 2 partitions) get records with keys (some null), values,
   headers and CreateTime timestamps; a consumer group subscribed to both processes each
   partition up to a stop offset (the end of some partitions, part-way for others, nothing
   of one) and commits those offsets, then leaves the group.
2. MirrorMaker 2 starts. Every record reaches the target at the same partition and offset (a
   fresh topic under the identity policy), in order: the per-partition sequences of key,
   value, headers and timestamp are equal. A retention.ms set on a source topic reaches the
   target topic, and MirrorMaker 2 never logs that it could not alter a topic's configs
   (Skiff refused the DELETE of errors.deadletterqueue.group.enable, a Kafka 4.4 topic
   config it does not serve, that MirrorMaker 2's sync sends for every default config).
3. The group's committed offsets on the target (read with the admin API, and as
   kafka-consumer-groups --describe prints them; kafka-get-offsets prints the same end
   offsets on both sides) are the translated ones, exactly as MirrorMaker 2 documents its
   translation (OffsetSyncStore.translateDownstream): the target offset of the nearest sync
   at or below the group's offset, plus one when the sync is below it. For a group at 130 of
   150 records that is 102 (28 records read twice), at 60 it is 1 (59), at the end of a
   partition it is the end (the sync of a partition's last record is written at the task's
   first offset commit, offset.flush.interval.ms after its start: 60 s, Connect's default).
   The bound also asserted is Kafka's own (MirrorConnectorsIntegrationBaseTest:
   waitForConsumerGroupFullSync, assertDownstreamRedeliveriesBoundedByMaxLag): for each
   partition committed - offset.lag.max < translated <= committed, never past the source
   position (no record skipped) and fewer than offset.lag.max (100, the default) records
   read twice.
   Why 10 syncs: MirrorMaker 2 queues a sync every offset.lag.max records but keeps one
   pending sync per partition and at most 10 in flight, and each offset commit replaces a
   pending sync with the partition's latest record. With more syncs in the backlog's burst
   (13, and offset.flush.interval.ms=1000 in an earlier version of this test) a sync was
   merged away once: the sync of offset 101 replaced by one of 106, so a group at 140 went
   to 107 instead of 102. Then a group between two syncs can re-read more than
   offset.lag.max; the bound holds where every sync was written.
4. A consumer of the group, subscribed on the target, starts each partition at the translated
   offset and reads the rest of the source's records in order.
5. Cut-over of the producers: records produced on the source while the group already reads
   on the target arrive through MirrorMaker 2; MirrorMaker 2 is stopped (SIGTERM to its PID,
   exit 143 after its shutdown hook logged "Kafka MirrorMaker stopped."), and records
   produced on the target reach the consumer.

The module uses `kafka_ref`, so tests/conftest.py puts it in its own xdist group,
`kafka-ref:tests/compat/kafka/test_mirror_maker.py`: one worker runs both tests and starts
the reference node and the Skiff node once.
"""

from __future__ import annotations

import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from tests.conftest import Broker
from tests.support.kafka_ref import TOOL_JVM_OPTS, KafkaNode, java_program_classpath, tool

pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]

MIRROR_MAKER_CLASS = "org.apache.kafka.connect.mirror.MirrorMaker"
OFFSET_LAG_MAX = 100  # MirrorMaker 2's default, written out in mm2.properties
FLOW_TIMEOUT_S = 240.0
STOP_TIMEOUT_S = 60.0
# topic -> (partitions, records per partition). Copying the backlog, MirrorMaker 2 writes an
# offset sync for each partition's first record and one offset.lag.max + 1 records later
# (offsets 0 and 101): 10 syncs, as many as it lets be in flight, and its first offset commit
# comes offset.flush.interval.ms (60 s) after the task starts, after the burst: so none is
# merged away (see the module's docstring) and the translations are exact.
TOPICS = {"orders": (3, 150), "events": (2, 120)}
# where the source group stops, per (topic, partition): at the end, part-way, and nothing
# consumed (no committed offset)
STOPS = {("orders", 0): 150, ("orders", 1): 130, ("orders", 2): 60,
         ("events", 0): 120, ("events", 1): None}
LATE_RECORDS = 20  # per partition, produced on the source after the consumers moved
TARGET_RECORDS = 15  # per partition, produced on the target after MirrorMaker 2 stopped


def translation(group_offset: int, records: int) -> int:
    """Where MirrorMaker 2 puts a group at `group_offset` of a partition of `records` records
    copied in one go (target offsets equal to the source's): the offset syncs are at 0, every
    offset.lag.max + 1 records, and at the last record; the nearest sync at or below the
    group's offset, plus one when below (OffsetSyncStore.translateDownstream)."""
    syncs = {*range(0, records, OFFSET_LAG_MAX + 1), records - 1}
    nearest = max(x for x in syncs if x <= group_offset)
    return nearest if nearest == group_offset else nearest + 1


@dataclass(frozen=True)
class Rec:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int

    def content(self) -> tuple[Any, ...]:
        return (self.key, self.value, self.headers, self.timestamp)


def wait_for(what: str, predicate: Callable[[], Any], timeout: float = FLOW_TIMEOUT_S,
             log: Callable[[], str] | None = None) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
        except KafkaException as exc:  # a coordinator still loading, a topic not there yet
            last = exc
        else:
            if last:
                return last
        time.sleep(0.5)
    tail = f"\n{log()}" if log is not None else ""
    raise AssertionError(f"not within {timeout:.0f}s: {what} (last: {last!r}){tail}")


class MirrorMakerProcess:
    """`MirrorMaker mm2.properties --clusters TARGET` in its own JVM, stopped by its PID."""

    def __init__(self, work: Path, props: dict[str, str], target: str) -> None:
        self.config = work / "mm2.properties"
        self.config.write_text("".join(f"{k} = {v}\n" for k, v in props.items()))
        self.log_path = work / "mm2.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            ["java", *TOOL_JVM_OPTS, "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
             "-Dorg.slf4j.simpleLogger.showDateTime=true",
             "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
             "-cp", java_program_classpath(), MIRROR_MAKER_CLASS, str(self.config),
             "--clusters", target],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)

    def log(self, chars: int = 8000) -> str:
        text = self.log_path.read_text(errors="replace")
        return f"--- mm2 (pid {self.proc.pid}) log tail ---\n{text[-chars:]}"

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(f"MirrorMaker 2 exited with {self.proc.returncode}\n{self.log()}")

    def stop(self) -> int | None:
        """SIGTERM to its PID (what Ctrl-C or `kill PID` does); SIGKILL if it hangs."""
        code = self.proc.poll()
        if code is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                code = self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                code = None
        self._log.close()
        return code


def mm2_properties(source: str, source_bootstrap: str, target: str, target_bootstrap: str,
                   topics: str, groups: str) -> dict[str, str]:
    """The mm2.properties of docs/operations.md's migration guide, for one direction."""
    return {
        "clusters": f"{source}, {target}",
        f"{source}.bootstrap.servers": source_bootstrap,
        f"{target}.bootstrap.servers": target_bootstrap,
        f"{source}->{target}.enabled": "true",
        f"{target}->{source}.enabled": "false",
        f"{source}->{target}.topics": topics,
        f"{source}->{target}.groups": groups,
        "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        "offset-syncs.topic.location": "target",
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": "1",
        "emit.checkpoints.interval.seconds": "1",
        "emit.heartbeats.interval.seconds": "1",
        "refresh.topics.interval.seconds": "5",
        "refresh.groups.interval.seconds": "5",
        "sync.topic.configs.interval.seconds": "5",
        "offset.lag.max": str(OFFSET_LAG_MAX),
        # every plugin on the classpath has a ServiceLoader manifest (Connect says so): no
        # class-path scan, ~20 s each on a loaded machine, neither for MirrorMakerConfig's
        # plugins (top level) nor for the herder's (the target's prefix)
        "plugin.discovery": "service_load",
        f"{target}.plugin.discovery": "service_load",
        "sync.topic.acls.enabled": "false",
        # one broker on each side here; a production cluster keeps the defaults (3)
        "replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
    }


def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, num_partitions=n, replication_factor=1)
                                   for t, n in topics.items()], operation_timeout=30)
    for f in futures.values():
        f.result(60)


def produce(bootstrap: str, topic: str, partitions: int, count: int, label: str
            ) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})
    base_ts = int(time.time() * 1000) - 60_000
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    for i in range(count):
        for p in range(partitions):
            key = None if i % 9 == 4 else f"{label}-{topic}-{p}-k{i}".encode()
            value = f"{label}|{topic}|{p}|{i}|".encode() * (1 + i % 5)
            headers = [("seq", str(i).encode()), ("src", label.encode())]
            if i % 6 == 0:
                headers.append(("seq", b""))  # a repeated name, an empty value
            producer.produce(topic, value=value, key=key, partition=p, headers=headers,
                             timestamp=base_ts + i, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors


_PROBES: dict[str, Any] = {}
_ADMINS: dict[str, AdminClient] = {}


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """The partitions' high watermarks, asked by one consumer per cluster kept for the run."""
    c = _PROBES.get(bootstrap)
    if c is None:
        c = _PROBES[bootstrap] = Consumer({"bootstrap.servers": bootstrap,
                                           "group.id": f"probe-{uuid.uuid4().hex[:6]}",
                                           "enable.auto.commit": False})
    return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=20)[1]
            for p in range(partitions)}


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    """The probe consumers and admin clients end with the test, not with the nodes."""
    yield
    while _PROBES:
        _PROBES.popitem()[1].close()
    _ADMINS.clear()


def read_all(bootstrap: str, topic: str, partitions: int) -> dict[int, list[Rec]]:
    """Every record of `topic`, per partition, from offset 0 to the end (no group)."""
    ends = end_offsets(bootstrap, topic, partitions)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    out: dict[int, list[Rec]] = {p: [] for p in range(partitions)}
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + 120
        while any(len(out[p]) < ends[p] for p in out):
            assert time.monotonic() < deadline, {p: (len(out[p]), ends[p]) for p in out}
            for m in c.consume(500, timeout=1.0):
                assert m.error() is None, m.error()
                out[m.partition()].append(to_rec(m))
    finally:
        c.close()
    return out


def to_rec(m: Any) -> Rec:
    return Rec(m.partition(), m.offset(), m.key(), m.value(),
               tuple((k, v) for k, v in (m.headers() or [])), m.timestamp()[1])


def consume_as_group(bootstrap: str, group: str, topics: list[str],
                     stops: dict[tuple[str, int], int | None]) -> None:
    """The source application: subscribed as `group`, it processes each partition up to
    its stop offset, commits what it processed, and leaves the group."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    processed: dict[tuple[str, int], int] = {}
    wanted = {tp: stop for tp, stop in stops.items() if stop is not None}
    try:
        c.subscribe(topics)
        deadline = time.monotonic() + 120
        while any(processed.get(tp, 0) < stop for tp, stop in wanted.items()):
            assert time.monotonic() < deadline, (processed, wanted)
            for m in c.consume(500, timeout=1.0):
                assert m.error() is None, m.error()
                tp = (m.topic(), m.partition())
                if m.offset() < (stops.get(tp) or 0):
                    processed[tp] = m.offset() + 1
        c.commit(offsets=[TopicPartition(t, p, off) for (t, p), off in wanted.items()],
                 asynchronous=False)
    finally:
        c.close()


def admin_of(bootstrap: str) -> AdminClient:
    if bootstrap not in _ADMINS:
        _ADMINS[bootstrap] = AdminClient({"bootstrap.servers": bootstrap})
    return _ADMINS[bootstrap]


def committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets, read with the admin API (OffsetFetch)."""
    admin = admin_of(bootstrap)
    result = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=20)[group].result(30)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions
            if tp.offset >= 0}


def group_state(bootstrap: str, group: str) -> str:
    futures = admin_of(bootstrap).describe_consumer_groups([group], request_timeout=20)
    desc = futures[group].result(30)
    return str(desc.state.name)


def get_offsets(bootstrap: str, topic: str) -> list[str]:
    """`kafka-get-offsets --bootstrap-server B --topic T`: `topic:partition:end` lines."""
    proc = tool("kafka-get-offsets", "--bootstrap-server", bootstrap, "--topic", topic)
    assert proc.returncode == 0, proc.stderr
    return sorted(proc.stdout.split())


def described_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int | None]:
    """CURRENT-OFFSET per partition in `kafka-consumer-groups --describe --group G`."""
    proc = tool("kafka-consumer-groups", "--bootstrap-server", bootstrap, "--describe",
                "--group", group)
    assert proc.returncode == 0, proc.stderr
    out: dict[tuple[str, int], int | None] = {}
    for line in proc.stdout.splitlines():
        cols = line.split()
        if len(cols) >= 4 and cols[0] == group:
            out[(cols[1], int(cols[2]))] = None if cols[3] == "-" else int(cols[3])
    return out


@dataclass
class Side:
    alias: str
    bootstrap: str


@pytest.fixture
def work(tmp_path: Path) -> Path:
    return tmp_path


def migrate(source: Side, target: Side, work: Path) -> dict[str, float]:
    tag = uuid.uuid4().hex[:8]
    names = {base: f"mm2-{base}-{tag}" for base in TOPICS}
    group = f"mm2-app-{tag}"
    stops = {(names[t], p): stop for (t, p), stop in STOPS.items()}
    timings: dict[str, float] = {}

    create_topics(source.bootstrap, {names[t]: n for t, (n, _) in TOPICS.items()})
    for base, (parts, count) in TOPICS.items():
        produce(source.bootstrap, names[base], parts, count, "before")
    consume_as_group(source.bootstrap, group, list(names.values()), stops)
    source_committed = committed(source.bootstrap, group)
    assert source_committed == {tp: s for tp, s in stops.items() if s is not None}
    before = {names[t]: read_all(source.bootstrap, names[t], n) for t, (n, _) in TOPICS.items()}

    topics_before = set(admin_of(source.bootstrap).list_topics(timeout=30).topics)
    props = mm2_properties(source.alias, source.bootstrap, target.alias, target.bootstrap,
                           topics=f"mm2-.*-{tag}", groups=f"mm2-app-{tag}")
    mm2 = MirrorMakerProcess(work, props, target.alias)
    t0 = time.monotonic()
    try:
        # 2. every record arrives, at the same partition and offset, in order
        def all_copied() -> bool:
            mm2.check_alive()
            return all(end_offsets(target.bootstrap, names[t], n)
                       == {p: c for p in range(n)} for t, (n, c) in TOPICS.items())

        wait_for("every record copied to the target", all_copied, log=mm2.log)
        timings["records copied"] = time.monotonic() - t0
        for t, (n, _) in TOPICS.items():
            copied = read_all(target.bootstrap, names[t], n)
            for p in range(n):
                src, dst = before[names[t]][p], copied[p]
                assert [r.offset for r in dst] == list(range(len(src)))
                assert [r.content() for r in dst] == [r.content() for r in src], (
                    f"{names[t]}-{p}: records differ")

        # a topic config changed on the source follows (MirrorMaker 2's topic-config sync)
        orders = names["orders"]
        res = ConfigResource(ResourceType.TOPIC, orders, incremental_configs=[ConfigEntry(
            "retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
        admin_of(source.bootstrap).incremental_alter_configs([res])[res].result(30)
        t1 = time.monotonic()

        def retention_synced() -> bool:
            mm2.check_alive()
            r = ConfigResource(ResourceType.TOPIC, orders)
            entries = admin_of(target.bootstrap).describe_configs([r])[r].result(30)
            return bool(entries["retention.ms"].value == "3600000")

        wait_for("retention.ms of the source topic on the target", retention_synced,
                 log=mm2.log)
        timings["topic config synced"] = time.monotonic() - t1

        # 3. the group's offsets on the target, translated
        def translated() -> dict[tuple[str, int], int] | None:
            mm2.check_alive()
            got = committed(target.bootstrap, group)
            want = {tp: s for tp, s in stops.items() if s is not None}
            if set(got) != set(want):
                return None
            at_end = {tp for tp in want if want[tp] == TOPICS[tp[0].split("-")[1]][1]}
            if any(got[tp] != want[tp] for tp in at_end):
                return None  # the sync of the partition's last record is not applied yet
            return got

        target_committed = wait_for("the group's translated offsets committed on the target",
                                    translated, log=mm2.log)
        timings["group offsets synced"] = time.monotonic() - t0
        for tp, offset in target_committed.items():
            assert source_committed[tp] - OFFSET_LAG_MAX < offset <= source_committed[tp], (
                tp, offset, source_committed[tp])
        assert target_committed == {
            tp: translation(g, TOPICS[tp[0].split("-")[1]][1])
            for tp, g in source_committed.items()}
        assert group_state(target.bootstrap, group) == "EMPTY"
        # the guide's checks with Kafka's tools: the same end offsets on both sides, and the
        # group's offsets on the target as kafka-consumer-groups shows them
        for name in names.values():
            assert get_offsets(source.bootstrap, name) == get_offsets(target.bootstrap, name)
        # (an Empty group's description lists only the partitions it has offsets for)
        assert described_offsets(target.bootstrap, group) == target_committed

        # 4. the application moves: a consumer of the group on the target
        c = Consumer({"bootstrap.servers": target.bootstrap, "group.id": group,
                      "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        try:
            c.subscribe(list(names.values()))
            got: dict[tuple[str, int], list[Rec]] = {}
            ends = {(names[t], p): c_ for t, (n, c_) in TOPICS.items() for p in range(n)}
            position = {tp: target_committed.get(tp, 0) for tp in ends}

            def read_up_to(ends: dict[tuple[str, int], int]) -> Callable[[], bool]:
                def step() -> bool:
                    for m in c.consume(500, timeout=1.0):
                        assert m.error() is None, m.error()
                        tp = (m.topic(), m.partition())
                        got.setdefault(tp, []).append(to_rec(m))
                        position[tp] = m.offset() + 1
                    return all(position[tp] >= e for tp, e in ends.items())
                return step

            wait_for("the moved consumer reads to the end", read_up_to(ends), log=mm2.log)
            for tp, recs in got.items():
                start = target_committed.get(tp, 0)
                assert [r.offset for r in recs] == list(range(start, ends[tp])), tp
                assert [r.content() for r in recs] == [
                    r.content() for r in before[tp[0]][tp[1]][start:]], tp
            reread = {tp: (source_committed.get(tp, 0) - target_committed.get(tp, 0))
                      for tp in ends}
            assert all(0 <= n < OFFSET_LAG_MAX for n in reread.values()), reread
            c.commit(asynchronous=False)

            # 5. producers move: the last records written on the source still arrive,
            # then MirrorMaker 2 stops and the producers write to the target
            got.clear()
            for base, (parts, _) in TOPICS.items():
                produce(source.bootstrap, names[base], parts, LATE_RECORDS, "late")
            ends = {tp: e + LATE_RECORDS for tp, e in ends.items()}
            t1 = time.monotonic()
            wait_for("records produced on the source after the move", read_up_to(ends),
                     log=mm2.log)
            timings["late records through MM2"] = time.monotonic() - t1
            for tp, recs in got.items():
                assert [r.offset for r in recs] == list(range(ends[tp] - LATE_RECORDS,
                                                              ends[tp])), tp
                assert all(r.value is not None and r.value.startswith(b"late|")
                           for r in recs), tp
            assert "Could not alter configuration" not in mm2.log(10**9), mm2.log()
            # the JVM ends on SIGTERM with 128 + 15 once its shutdown hook has run
            assert mm2.stop() == 143, mm2.log()
            assert "Kafka MirrorMaker stopped." in mm2.log(2000), mm2.log()
            # offset-syncs.topic.location=target: MirrorMaker 2 created nothing on the source
            assert set(admin_of(source.bootstrap).list_topics(timeout=30).topics) \
                == topics_before
            got.clear()
            for base, (parts, _) in TOPICS.items():
                produce(target.bootstrap, names[base], parts, TARGET_RECORDS, "target")
            ends = {tp: e + TARGET_RECORDS for tp, e in ends.items()}
            wait_for("records produced on the target", read_up_to(ends))
            for tp, recs in got.items():
                assert [r.offset for r in recs] == list(range(ends[tp] - TARGET_RECORDS,
                                                              ends[tp])), tp
                assert all(r.value is not None and r.value.startswith(b"target|")
                           for r in recs), tp
            c.commit(asynchronous=False)
        finally:
            c.close()
        print(f"{source.alias} -> {target.alias}: committed on the source -> translated on "
              "the target (re-read): " + ", ".join(
                  f"{t.split('-')[1]}-{p}: {source_committed.get((t, p), '-')} -> "
                  f"{target_committed.get((t, p), '-')} ({reread[(t, p)]})"
                  for t, p in sorted(reread)))
    finally:
        mm2.stop()
    return timings


@pytest.fixture
def sides(kafka_ref: KafkaNode, skiff_node: Broker) -> Iterator[tuple[Side, Side]]:
    yield Side("kafka", kafka_ref.bootstrap), Side("skiff", skiff_node.bootstrap)


# each direction in its own xdist group: ~95 s apiece (most of it the 60 s to the first offset
# commit), on two workers rather than one after the other; each worker has its own nodes
@pytest.mark.xdist_group("kafka-ref:tests/compat/kafka/test_mirror_maker.py::to-skiff")
def test_kafka_to_skiff(sides: tuple[Side, Side], work: Path) -> None:
    kafka, skiff = sides
    timings = migrate(kafka, skiff, work)
    print("kafka -> skiff:", {k: round(v, 1) for k, v in timings.items()})


@pytest.mark.xdist_group("kafka-ref:tests/compat/kafka/test_mirror_maker.py::to-kafka")
def test_skiff_to_kafka(sides: tuple[Side, Side], work: Path) -> None:
    kafka, skiff = sides
    timings = migrate(skiff, kafka, work)
    print("skiff -> kafka:", {k: round(v, 1) for k, v in timings.items()})
