"""Load for chaos runs: a librdkafka producer that notes what was acknowledged, and a
reader that fetches every partition back to its high watermark.

The producer runs on its own thread so the test can inject faults meanwhile. Each record
goes to an explicit partition (round robin) with the value `<name>:<seq>`, `seq` rising
over the whole run; the delivery report of each one decides whether it counts as
acknowledged. Nothing here sleeps without a bound.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import defaultdict
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from tests.chaos.checker import RecordId, encode_value
from tests.support.records import end_offset


class ProducerWorkload:
    def __init__(
        self, bootstrap: str, topic: str, partitions: int, *, name: str = "p",
        idempotence: bool = False, rate_per_s: float = 400.0, extra: dict[str, Any] | None = None,
    ) -> None:
        self.topic = topic
        self.partitions = partitions
        self.name = name
        self.rate_per_s = rate_per_s
        conf: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": idempotence,
            "linger.ms": 5,
            "message.timeout.ms": 60_000,
            "retry.backoff.ms": 50,
            "topic.metadata.refresh.interval.ms": 1000,
            "log_level": 3,
            # the client's own view (idempotence state, per-broker queues), for failure reports
            "statistics.interval.ms": 1000,
            "stats_cb": self._on_stats,
        }
        self.last_stats: str | None = None
        if not idempotence:
            conf["retries"] = 1_000_000
            conf["max.in.flight.requests.per.connection"] = 1  # keep order without idempotence
        conf.update(extra or {})
        self.producer = Producer(conf)
        self.acknowledged: dict[int, list[RecordId]] = defaultdict(list)
        self.acked_offsets: dict[int, dict[RecordId, int]] = defaultdict(dict)
        self.failed: list[tuple[RecordId, str]] = []
        self.sent = 0
        self.misrouted = 0
        self._last_ack_produced: dict[int, float] = {}
        self.ack_times: dict[int, list[float]] = defaultdict(list)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"producer-{name}", daemon=True)
        self._lock = threading.Lock()

    def start(self) -> None:
        self._thread.start()

    def _on_stats(self, stats_json: str) -> None:
        self.last_stats = stats_json

    def client_state(self) -> str:
        """A summary of librdkafka's last statistics: the idempotence state, each broker's
        connection state with its queued, in-flight and waiting requests, and each
        partition's leader and queued messages."""
        if self.last_stats is None:
            return f"producer {self.name}: no statistics yet"
        try:
            st = json.loads(self.last_stats)
        except ValueError:
            return f"producer {self.name}: unreadable statistics"
        eos = st.get("eos", {})
        lines = [f"producer {self.name}: msg_cnt={st.get('msg_cnt')} eos={eos}"]
        for b in st.get("brokers", {}).values():
            lines.append(f"  broker {b.get('nodeid')} {b.get('state')} "
                         f"stateage={b.get('stateage', 0) // 1000}ms "
                         f"outbuf={b.get('outbuf_cnt')} waitresp={b.get('waitresp_cnt')} "
                         f"req_timeouts={b.get('req_timeouts')} "
                         f"toppars={sorted(b.get('toppars', {}))}")
        for t in st.get("topics", {}).values():
            for pid, part in sorted(t.get("partitions", {}).items()):
                if pid != "-1":
                    lines.append(f"  partition {pid} leader={part.get('leader')} "
                                 f"msgq={part.get('msgq_cnt')} xmit={part.get('xmit_msgq_cnt')} "
                                 f"inflight(txmsgs-ack)={part.get('txmsgs')}")
        return "\n".join(lines)

    def idempotence(self) -> str:
        """The producer id and epoch librdkafka's last statistics name, and how many producer
        ids it was assigned (epoch_cnt). An epoch above 0, or epoch_cnt above 1, means it
        bumped its epoch or took a new id, which renumbers every unacknowledged record of
        every partition: a record an old leader wrote whose acknowledgement was lost is then
        written again."""
        try:
            eos = json.loads(self.last_stats or "{}").get("eos", {})
        except ValueError:
            return f"producer {self.name}: unreadable statistics"
        return (f"producer {self.name}: id {eos.get('producer_id')} epoch "
                f"{eos.get('producer_epoch')} epoch_cnt {eos.get('epoch_cnt')}")

    def acked_count(self) -> int:
        with self._lock:
            return sum(len(v) for v in self.acknowledged.values())

    def acked_in(self, partition: int) -> int:
        with self._lock:
            return len(self.acknowledged.get(partition, ()))

    def last_ack_produced_at(self, partition: int) -> float:
        """time.monotonic() at which the newest acknowledged record of `partition` was
        handed to the producer (0.0 before any)."""
        with self._lock:
            return self._last_ack_produced.get(partition, 0.0)

    def _on_delivery(self, err: KafkaError | None, msg: Any, rid: RecordId, partition: int,
                     produced_at: float) -> None:
        with self._lock:
            if err is not None:
                self.failed.append((rid, str(err)))
            elif msg.partition() != partition:
                self.misrouted += 1
            else:
                self.acknowledged[partition].append(rid)
                offset = msg.offset()
                if offset is not None and offset >= 0:  # None: acknowledged implicitly, by a
                    self.acked_offsets[partition][rid] = offset  # later batch's (idempotence)
                self.ack_times[partition].append(time.monotonic())
                if produced_at > self._last_ack_produced.get(partition, 0.0):
                    self._last_ack_produced[partition] = produced_at

    def _run(self) -> None:
        interval = 1.0 / self.rate_per_s
        next_at = time.monotonic()
        seq = 0
        while not self._stop.is_set():
            partition = seq % self.partitions
            rid = (self.name, seq)
            now = time.monotonic()
            try:
                self.producer.produce(
                    self.topic, encode_value(*rid), partition=partition,
                    on_delivery=lambda err, msg, rid=rid, p=partition, t=now: self._on_delivery(
                        err, msg, rid, p, t),
                )
            except BufferError:
                self.producer.poll(0.05)
                continue
            seq += 1
            self.sent = seq
            self.producer.poll(0)
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)
            else:
                next_at = time.monotonic()

    def longest_ack_gap(self, start: float, end: float) -> float:
        """The longest time within [start, end] (time.monotonic()) in which some partition
        had no acknowledgement at all: how long the faults there kept it unavailable."""
        with self._lock:
            times = {p: list(ts) for p, ts in self.ack_times.items()}
        longest = 0.0
        for ts in times.values():
            inside = [start] + [t for t in ts if start < t < end] + [end]
            longest = max(longest, max(b - a for a, b in itertools.pairwise(inside)))
        return longest

    def stop(self, flush_timeout_s: float = 90.0) -> int:
        """Stops producing and waits for outstanding deliveries; returns how many remain."""
        self._stop.set()
        self._thread.join(timeout=10)
        return int(self.producer.flush(flush_timeout_s))


def read_all(bootstrap: str, topic: str, partitions: int, timeout_s: float = 60.0
             ) -> dict[int, list[bytes]]:
    """Every value in each partition, from its start up to the high watermark observed
    when reading began (producers have stopped by then)."""
    return {p: [value for _offset, _epoch, value in records] for p, records in
            read_records(bootstrap, topic, partitions, timeout_s).items()}


def read_records(bootstrap: str, topic: str, partitions: int, timeout_s: float = 60.0
                 ) -> dict[int, list[tuple[int, int, bytes]]]:
    """As read_all, with each record's offset and the leader epoch its batch carries:
    {partition: [(offset, leader epoch, value), ...]} in offset order."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"chaos-reader-{time.monotonic_ns()}",
        "enable.auto.commit": False, "log_level": 3, "fetch.wait.max.ms": 100,
    })
    try:
        ends: dict[int, int] = {}
        for p in range(partitions):
            ends[p] = end_offset(consumer, topic, p)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        # A log holds one record per offset: a consumer that delivers an offset again (its
        # position reset after a leader change) re-delivers, it does not show a duplicate in
        # the log. The same offset with another value would be replicas that diverged below
        # the high watermark, and fails the read.
        seen: dict[int, dict[int, tuple[int, bytes]]] = {p: {} for p in range(partitions)}
        redelivered = 0
        done = {p for p, end in ends.items() if end <= 0}
        deadline = time.monotonic() + timeout_s
        while len(done) < partitions and time.monotonic() < deadline:
            for msg in consumer.consume(500, timeout=0.5):
                if msg.error() is not None:
                    continue
                p, offset = msg.partition(), msg.offset()
                if offset < ends[p]:
                    epoch = msg.leader_epoch()
                    record = (-1 if epoch is None else epoch, msg.value())
                    before = seen[p].setdefault(offset, record)
                    if before is not record:
                        redelivered += 1
                        if before[1] != record[1]:
                            raise AssertionError(
                                f"partition {p} offset {offset} read as {before} and later as "
                                f"{record}: replicas diverged below the high watermark")
                if offset + 1 >= ends[p]:
                    done.add(p)
        if len(done) < partitions:
            missing = sorted(set(range(partitions)) - done)
            raise TimeoutError(f"could not read partitions {missing} to their ends {ends}")
        if redelivered:
            print(f"reader: {redelivered} records delivered again at the same offset (dropped)")
        return {p: [(o, e, v) for o, (e, v) in sorted(recs.items())]
                for p, recs in seen.items()}
    finally:
        consumer.close()
