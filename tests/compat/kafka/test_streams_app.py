"""A Kafka Streams 4.4 application with exactly_once_v2 on Skiff (issue 35, point 1).

The application (tests/java/src/skiff/compat/streams/StreamsApp.java) reads lines of words
and keeps two aggregations, each behind a repartition topic and a state store with its
changelog topic: a word count (grouped by word) and a count per first letter in 10 s
tumbling windows (grouped by the letter). Its record cache is off, so every input word
makes exactly one update in each output topic, and a read_committed reader sees, for each
key, the counts 1, 2, ..., N in order: a lost update shows as a gap or a short final
count, a double-counted one (a replayed batch after an abort that leaked, or a commit that
counted twice) as a repeat or a too-high final count, and an uncommitted update as a value
out of sequence.

On Skiff it runs against three combined nodes (one cluster for the module). The first half
of the input is written, the application starts, and once it has committed output the
broker coordinating its consumer group (which also holds the offsets committed inside its
transactions) is killed with -9; the second half is written while that broker is down, and
it is started again. The outputs and the word-count store's changelog, read with
read_committed once the application has caught up, must equal what this module computes
from the input (the changelog is compacted, so there only its last value per word and
that its values only count up). The same application on the reference Kafka 4.4 (the
session's one node, with replication.factor=1 for Streams' internal topics) must give the
same outputs; the two runs go at once.
"""

from __future__ import annotations

import random
import struct
import subprocess
import time
import uuid
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.testing.cluster import Cluster
from tests.support.kafka_ref import TOOL_JVM_OPTS, KafkaNode, java_program_classpath

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

PROGRAM = "skiff.compat.streams.StreamsApp"
PARTITIONS = 3
LINES = 240
WINDOW_MS = 10_000
# Record timestamps start at a window boundary, so both runs' windows line up; they are
# recent, or retention (7 days by the record timestamps) would delete the input under them.
BASE_TS = (int(time.time() * 1000) // 60_000 - 10) * 60_000
WORDS = ["apple", "avocado", "banana", "blueberry", "cherry", "cranberry", "date", "elder",
         "fig", "grape", "guava", "kiwi", "lemon", "lime", "mango", "melon", "nectarine",
         "olive", "orange", "papaya", "peach", "pear", "plum", "quince", "raspberry"]
CATCH_UP_S = 240.0
START_TIMEOUT_S = 150.0
Updates = dict[str, list[int]]  # key -> the values read, in offset order


def input_lines() -> list[tuple[str, str, int]]:
    """(key, line, timestamp) of the input: LINES lines of 1-6 words, 250 ms apart."""
    rng = random.Random(35)
    out = []
    for i in range(LINES):
        words = [rng.choice(WORDS) for _ in range(rng.randint(1, 6))]
        sep = rng.choice([" ", ", ", "  ", "; "])
        text = sep.join(w.capitalize() if rng.random() < 0.3 else w for w in words)
        out.append((f"line-{i}", text, BASE_TS + i * 250))
    return out


def expected(lines: list[tuple[str, str, int]]) -> tuple[Counter[str], Counter[str]]:
    """The final word counts and counts per letter@windowStart, computed here."""
    words: Counter[str] = Counter()
    windows: Counter[str] = Counter()
    for _key, text, ts in lines:
        for w in text.lower().replace(",", " ").replace(";", " ").split():
            words[w] += 1
            windows[f"{w[0]}@{ts - ts % WINDOW_MS}"] += 1
    return words, windows


@dataclass
class StreamsRun:
    words: Updates = field(default_factory=dict)
    windows: Updates = field(default_factory=dict)
    changelog: Updates = field(default_factory=dict)
    internal_topics: list[str] = field(default_factory=list)
    seconds: float = 0.0
    log: str = ""


def read_committed(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> Updates:
    """Every record of `topic` up to its last stable offset, read_committed: key -> values."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "enable.partition.eof": True, "auto.offset.reset": "earliest",
                         "log_level": 0})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        at_end: set[int] = set()
        out: Updates = defaultdict(list)
        deadline = time.monotonic() + timeout
        while len(at_end) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: only partitions {sorted(at_end)} read to the end")
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                    continue
                raise RuntimeError(f"{topic}: {err}")
            at_end.discard(msg.partition())
            value = msg.value()
            assert value is not None and len(value) >= 8, (topic, value)
            # a Long, big-endian (the changelog of a timestamped store ends with it too)
            out[msg.key().decode()].append(struct.unpack(">q", value[-8:])[0])
        return dict(out)
    finally:
        consumer.close()


def finals(updates: Updates) -> dict[str, int]:
    return {k: v[-1] for k, v in updates.items()}


def produce(bootstrap: str, topic: str, lines: list[tuple[str, str, int]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "log_level": 0})
    for key, text, ts in lines:
        producer.produce(topic, value=text.encode(), key=key.encode(), timestamp=ts)
    assert producer.flush(60) == 0, f"{topic}: records left unsent"


def create_topics(admin: AdminClient, names: list[str], replication: int) -> None:
    futures = admin.create_topics([NewTopic(n, PARTITIONS, replication) for n in names],
                                  operation_timeout=20)
    for f in futures.values():
        f.result(30)


class App:
    """The Java application as a child process; stops when its stdin closes."""

    def __init__(self, bootstrap: str, app_id: str, topic: str, prefix: str, state_dir: Path,
                 replication: int, log_path: Path) -> None:
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            ["java", *TOOL_JVM_OPTS, "-cp", java_program_classpath(), PROGRAM, bootstrap,
             app_id, topic, prefix, str(state_dir), str(replication)],
            stdin=subprocess.PIPE, stdout=self._log, stderr=subprocess.STDOUT)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def check_alive(self) -> None:
        if self.proc.poll() is not None or "STATE ERROR" in self.log():
            raise AssertionError(f"the Streams application failed:\n{self.log()[-6000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(90)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


def wait_caught_up(app: App, bootstrap: str, prefix: str, words: Counter[str],
                   windows: Counter[str]) -> None:
    deadline = time.monotonic() + CATCH_UP_S
    while True:
        app.check_alive()
        got_w = finals(read_committed(bootstrap, f"{prefix}-words", PARTITIONS))
        got_win = finals(read_committed(bootstrap, f"{prefix}-windows", PARTITIONS))
        if got_w == dict(words) and got_win == dict(windows):
            return
        if time.monotonic() > deadline:
            raise AssertionError(
                f"output not caught up in {CATCH_UP_S:.0f}s: {sum(got_w.values())} of "
                f"{sum(words.values())} words counted\n{app.log()[-6000:]}")
        time.sleep(1.0)


def run_app(bootstrap: str, admin: AdminClient, replication: int, work: Path,
            fault: Cluster | None) -> StreamsRun:
    """Write the input, run the application until its outputs hold every word, and read
    the outputs and the changelog back with read_committed. With `fault`, the group
    coordinator is killed -9 after the first commit and restarted after the second half."""
    lines = input_lines()
    words, windows = expected(lines)
    tag = uuid.uuid4().hex[:8]
    topic, prefix, app_id = f"streams-in-{tag}", f"streams-out-{tag}", f"streams-app-{tag}"
    create_topics(admin, [topic, f"{prefix}-words", f"{prefix}-windows"], replication)
    half = len(lines) // 2
    produce(bootstrap, topic, lines[:half])
    started = time.monotonic()
    app = App(bootstrap, app_id, topic, prefix, work / f"state-{tag}", replication,
              work / f"app-{tag}.log")
    try:
        if fault is not None:
            deadline = time.monotonic() + START_TIMEOUT_S
            while not read_committed(bootstrap, f"{prefix}-words", PARTITIONS):
                app.check_alive()
                assert time.monotonic() < deadline, f"no output committed\n{app.log()[-6000:]}"
                time.sleep(0.5)
            group = admin.describe_consumer_groups([app_id])[app_id].result(20)
            victim = group.coordinator.id
            assert fault.kill(victim) == -9
            produce(fault.live_bootstrap(), topic, lines[half:])
            fault.start_node(victim)
            fault.wait_ready(START_TIMEOUT_S)
        else:
            produce(bootstrap, topic, lines[half:])
        wait_caught_up(app, bootstrap, prefix, words, windows)
        seconds = time.monotonic() - started
    finally:
        app.stop()
    internal = sorted(t for t in admin.list_topics(timeout=10).topics if t.startswith(app_id))
    return StreamsRun(
        words=read_committed(bootstrap, f"{prefix}-words", PARTITIONS),
        windows=read_committed(bootstrap, f"{prefix}-windows", PARTITIONS),
        changelog=read_committed(bootstrap, f"{app_id}-word-counts-changelog", PARTITIONS),
        internal_topics=[t.removeprefix(app_id) for t in internal], seconds=seconds,
        log=app.log())


@pytest.fixture(scope="module")
def runs(kafka_ref: KafkaNode, tmp_path_factory: pytest.TempPathFactory
         ) -> dict[str, StreamsRun]:
    """Both runs at once (the reference's in a thread): the module's wall time is the
    longer of the two, not their sum. The Skiff cluster is stopped as soon as its run is
    read back."""
    ref_work = tmp_path_factory.mktemp("streams-kafka")
    ref_admin = AdminClient({"bootstrap.servers": kafka_ref.bootstrap, "log_level": 0})
    work = tmp_path_factory.mktemp("streams-skiff")
    with ThreadPoolExecutor(1) as pool:
        reference = pool.submit(run_app, kafka_ref.bootstrap, ref_admin, 1, ref_work, None)
        with Cluster(work / "cluster", controllers=3, combined=True) as cluster:
            admin = cluster.admin(cluster.broker_ids[0])
            skiff = run_app(cluster.bootstrap_servers, admin, 3, work, cluster)
        return {"skiff": skiff, "kafka": reference.result(timeout=CATCH_UP_S + 120)}


@pytest.fixture(scope="module")
def skiff_run(runs: dict[str, StreamsRun]) -> StreamsRun:
    return runs["skiff"]


@pytest.fixture(scope="module")
def reference_run(runs: dict[str, StreamsRun]) -> StreamsRun:
    return runs["kafka"]


def in_sequence(updates: Updates) -> dict[str, list[int]]:
    """The keys whose values are not exactly 1, 2, ..., N (with what was read)."""
    return {k: v for k, v in updates.items() if v != list(range(1, len(v) + 1))}


def test_word_counts_survive_a_broker_killed_mid_run(skiff_run: StreamsRun) -> None:
    words, _ = expected(input_lines())
    assert finals(skiff_run.words) == dict(words)
    assert in_sequence(skiff_run.words) == {}


def test_windowed_counts_survive_a_broker_killed_mid_run(skiff_run: StreamsRun) -> None:
    _, windows = expected(input_lines())
    assert finals(skiff_run.windows) == dict(windows)
    assert in_sequence(skiff_run.windows) == {}


def test_changelog_holds_only_committed_updates(skiff_run: StreamsRun) -> None:
    """The word-count store's changelog, read_committed, ends at each word's count and
    only ever counts up: an aborted or duplicated update would show as a repeat or a step
    back. (It is a compacted topic, so the cleaner may have dropped earlier values of a
    key, as Kafka's does: gaps are allowed here, not in the output topics.)"""
    words, _ = expected(input_lines())
    assert finals(skiff_run.changelog) == dict(words)
    assert {k: v for k, v in skiff_run.changelog.items() if v != sorted(set(v))} == {}


def test_streams_created_its_internal_topics(skiff_run: StreamsRun) -> None:
    assert skiff_run.internal_topics == [
        "-by-letter-repartition", "-by-word-repartition",
        "-letter-windows-changelog", "-word-counts-changelog"]


def test_same_outputs_as_kafka(skiff_run: StreamsRun, reference_run: StreamsRun) -> None:
    words, windows = expected(input_lines())
    assert finals(reference_run.words) == dict(words)
    assert finals(reference_run.windows) == dict(windows)
    assert reference_run.words == skiff_run.words
    assert reference_run.windows == skiff_run.windows
    assert finals(reference_run.changelog) == finals(skiff_run.changelog)
    assert reference_run.internal_topics == skiff_run.internal_topics
