"""The plain counters the data path bumps.

Nothing here knows Prometheus: the hot path adds to integers (and a histogram's bucket
list) on objects it already holds, and the collectors (broker/metrics/collectors.py)
turn them into metric families when a scrape asks. Every object here is owned by the
node's event loop; only that loop reads or writes it (the exporter hops onto the loop to
collect).

Who bumps what:
  * broker/server/server.py: `ServerStats` (requests per API and version, top-level
    error codes, request times, connections and socket bytes per listener);
  * broker/replication/replica_manager.py: `BrokerTopicStats` (messages and bytes in and
    out per topic, failed and total produce/fetch requests, replication bytes out);
  * broker/replication/fetcher.py: replication bytes in per topic and fetcher bytes.
"""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_left
from collections import defaultdict
from typing import Any, Final

# Request times in milliseconds: from well under a millisecond (a metadata answer from
# memory) to a Fetch long poll's 30 s cap.
TIME_BUCKETS_MS: Final[tuple[float, ...]] = (
    0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0,
    1000.0, 2500.0, 5000.0, 10000.0, 30000.0,
)
FIRST_BOUND_MS: Final = TIME_BUCKETS_MS[0]

# Kafka's RequestMetrics name Fetch by who sends it (kafka.network RequestMetrics
# `FetchConsumer`, `FetchFollower`) as well as `Fetch`. A Fetch is counted here under one of
# these two keys only (never an API key); the collectors add the two up for `Fetch`.
FETCH_API_KEY: Final = 1
FETCH_CONSUMER_KEY: Final = -1
FETCH_FOLLOWER_KEY: Final = -2
SPLIT_REQUEST_NAMES: Final = {FETCH_CONSUMER_KEY: "FetchConsumer",
                               FETCH_FOLLOWER_KEY: "FetchFollower"}


# The requests being handled, by their handler's task (the server adds one when metrics
# are on and removes it when the task is done): the object whose `remote_from`
# (time.monotonic()) `mark_remote_wait` sets. A dict, not a context variable: setting a
# context variable in every request's task measured ~9% of a small produce's node CPU
# (under uvloop, each callback of that task then runs in a context of its own).
TASK_TIMING: Final[dict[Any, Any]] = {}
# The request whose handler takes its first step outside a task (server._start_eagerly).
EAGER_PENDING: Any = None


def mark_remote_wait() -> None:
    """A handler's path is about to wait for other replicas or for new records (acks=all
    replication, a Fetch long poll: what Kafka parks in its purgatories). Its request's time
    from here to the answer is Kafka's RemoteTimeMs, not LocalTimeMs; only the first wait
    counts. Nothing when metrics are off, outside a request's own task, or off a loop."""
    eager = EAGER_PENDING
    if eager is not None:
        if not eager.remote_from:
            eager.remote_from = time.monotonic()
        return
    if not TASK_TIMING:
        return
    try:
        task = asyncio.current_task()
    except RuntimeError:
        return
    timing = TASK_TIMING.get(task)
    if timing is not None and not timing.remote_from:
        timing.remote_from = time.monotonic()


def fetch_metric_key(request: object) -> int:
    """FETCH_FOLLOWER_KEY for a Fetch from a replica (a broker's follower or a Raft voter
    or observer: replica id >= 0, in `replica_state` from v15, else `replica_id`),
    FETCH_CONSUMER_KEY for a consumer's."""
    state = getattr(request, "replica_state", None)
    replica = getattr(state if state is not None else request, "replica_id", -1)
    return FETCH_FOLLOWER_KEY if int(replica) >= 0 else FETCH_CONSUMER_KEY


class Histogram:
    """Counts per bucket (not cumulative; the last one is +Inf) and the sum."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...] = TIME_BUCKETS_MS) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        # bisect_left: a value equal to a bound belongs to that bound's bucket (le)
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def merged(self, other: Histogram) -> Histogram:
        """A new histogram holding both one's and `other`'s observations (same bounds)."""
        out = Histogram(self.bounds)
        out.counts = [a + b for a, b in zip(self.counts, other.counts, strict=True)]
        out.sum = self.sum + other.sum
        return out

    def cumulative(self) -> list[tuple[str, float]]:
        """Prometheus buckets: (le, cumulative count), ending with +Inf."""
        out: list[tuple[str, float]] = []
        running = 0
        for bound, n in zip(self.bounds, self.counts, strict=False):
            running += n
            out.append((_le(bound), float(running)))
        running += self.counts[-1]
        out.append(("+Inf", float(running)))
        return out


def _le(bound: float) -> str:
    return repr(float(bound))


TOPIC_FIELDS: Final = (
    "bytes_in", "bytes_out", "bytes_rejected", "failed_fetch", "failed_produce",
    "failed_share_acknowledgement", "failed_share_fetch", "messages_in",
    "replication_bytes_in", "replication_bytes_out", "total_fetch", "total_produce",
    "total_share_acknowledgement", "total_share_fetch",
)


class TopicStats:
    """Kafka's BrokerTopicMetrics for one topic (or all of them)."""

    __slots__ = TOPIC_FIELDS

    def __init__(self) -> None:
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.bytes_rejected = 0
        self.failed_produce = 0
        self.failed_fetch = 0
        self.total_produce = 0
        self.total_fetch = 0
        self.replication_bytes_in = 0
        self.replication_bytes_out = 0
        self.total_share_fetch = 0
        self.failed_share_fetch = 0
        self.total_share_acknowledgement = 0
        self.failed_share_acknowledgement = 0



class BrokerTopicStats:
    """Per-topic counters; the all-topics figures are their sum at scrape time."""

    __slots__ = ("topics",)

    def __init__(self) -> None:
        self.topics: dict[str, TopicStats] = {}

    def topic(self, name: str) -> TopicStats:
        st = self.topics.get(name)
        if st is None:
            st = self.topics[name] = TopicStats()
        return st

    def total(self) -> TopicStats:
        out = TopicStats()
        for st in self.topics.values():
            for f in TOPIC_FIELDS:
                setattr(out, f, getattr(out, f) + getattr(st, f))
        return out


# records per in-flight batch: up to share.partition.max.record.locks' default (2000) and past
RECORD_COUNT_BUCKETS: Final[tuple[float, ...]] = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000,
                                           5000)


class ShareStats:
    """Kafka's ShareGroupMetrics (kafka.server): acknowledgements by type, as Kafka counts
    them (each type entry of an acknowledgement batch), the share-partition load time, the
    time share fetches took to find share-partitions to acquire from, per group, and the
    dead-letter queue's records and produce requests, per group (KIP-1191); and of
    SharePartitionMetrics what outlives a share-partition's reloads (lock timeouts, batch
    sizes)."""

    __slots__ = ("acknowledgements", "acquire_time", "batch_sizes", "dlq_produce_failed",
                 "dlq_produces", "dlq_records", "lock_timeouts", "partition_load_time")

    def __init__(self) -> None:
        self.acknowledgements: dict[str, int] = {}
        self.partition_load_time = Histogram()
        # (group, topic, partition) -> expired locks of share-partitions no longer loaded
        self.lock_timeouts: dict[tuple[str, str, int], int] = {}
        # group -> TopicPartitionsAcquireTimeMs
        self.acquire_time: dict[str, Histogram] = {}
        # group -> DeadLetterQueueRecordCount, ...TotalProduceRequests, ...FailedProduceRequests
        self.dlq_records: dict[str, int] = {}
        self.dlq_produces: dict[str, int] = {}
        self.dlq_produce_failed: dict[str, int] = {}
        # (group, topic, partition) -> SharePartitionMetrics InFlightBatchMessageCount
        self.batch_sizes: dict[tuple[str, str, int], Histogram] = {}

    def acknowledged(self, kind: str) -> None:
        self.acknowledgements[kind] = self.acknowledgements.get(kind, 0) + 1

    def acquire_waited(self, group_id: str, ms: float) -> None:
        hist = self.acquire_time.get(group_id)
        if hist is None:
            hist = self.acquire_time[group_id] = Histogram()
        hist.observe(ms)

    def batches_made(self, key: tuple[str, str, int], sizes: list[int]) -> None:
        """In-flight batches a share-partition made, by their record counts."""
        if not sizes:
            return
        hist = self.batch_sizes.get(key)
        if hist is None:
            hist = self.batch_sizes[key] = Histogram(RECORD_COUNT_BUCKETS)
        for n in sizes:
            hist.observe(n)

    def dead_letters_produced(self, group_id: str, records: int, failed: bool) -> None:
        """One produce request of dead letters to the group's dead-letter topic: its
        records count as written unless it failed."""
        self.dlq_produces[group_id] = self.dlq_produces.get(group_id, 0) + 1
        if failed:
            self.dlq_produce_failed[group_id] = self.dlq_produce_failed.get(group_id, 0) + 1
        else:
            self.dlq_records[group_id] = self.dlq_records.get(group_id, 0) + records


class ShareCoordinatorStats:
    """Kafka's share-coordinator-metrics: share-partition state writes (write-total, its
    rate write-rate) and their latency from the call to its answer, the record stored
    (write-latency-avg and -max; not windowed here: the average is a rate of the sum over a
    rate of the count, the maximum since the node started)."""

    __slots__ = ("write_latency_count", "write_latency_max", "write_latency_sum", "writes")

    def __init__(self) -> None:
        self.writes = 0
        self.write_latency_count = 0
        self.write_latency_sum = 0.0
        self.write_latency_max = 0.0

    def write_answered(self, seconds: float) -> None:
        self.write_latency_count += 1
        self.write_latency_sum += seconds
        self.write_latency_max = max(self.write_latency_max, seconds)


class ListenerStats:
    """Kafka's socket-server-metrics for one listener."""

    __slots__ = ("bytes_in", "bytes_out", "connections_closed", "connections_created")

    def __init__(self) -> None:
        self.connections_created = 0
        self.connections_closed = 0
        self.bytes_in = 0
        self.bytes_out = 0


class ServerStats:
    """Kafka's RequestMetrics (per API and version, error codes, times) and the socket
    server's counters, for every listener of one node."""

    __slots__ = ("_timers", "errors", "listeners", "local_time", "remote_time",
                 "request_queue_time", "requests", "response_queue_time", "response_send_time",
                 "total_time")

    def __init__(self) -> None:
        # (api key, version) -> count; (api key, error code) -> count
        self.requests: defaultdict[tuple[int, int], int] = defaultdict(int)
        self.errors: defaultdict[tuple[int, int], int] = defaultdict(int)
        self.total_time: dict[int, Histogram] = {}
        self.request_queue_time: dict[int, Histogram] = {}
        self.local_time: dict[int, Histogram] = {}
        self.remote_time: dict[int, Histogram] = {}
        self.response_queue_time: dict[int, Histogram] = {}
        self.response_send_time: dict[int, Histogram] = {}
        self._timers: dict[int, tuple[Histogram, Histogram, Histogram, Histogram,
                                      Histogram, Histogram]] = {}
        self.listeners: dict[str, ListenerStats] = {}

    def listener(self, name: str) -> ListenerStats:
        st = self.listeners.get(name)
        if st is None:
            st = self.listeners[name] = ListenerStats()
        return st

    def request(self, api_key: int, version: int) -> None:
        self.requests[(api_key, version)] += 1

    def error(self, api_key: int, code: int) -> None:
        self.errors[(api_key, code)] += 1

    def times(self, api_key: int, received: float, started: float, done: float,
              writing: float, sent: float, remote_from: float = 0.0) -> None:
        """Seconds from time.monotonic(), Kafka's request phases: the frame read
        (`received`), the handler's first step (`started`; before it: RequestQueueTimeMs),
        its first wait for other replicas or new records (`remote_from`, 0 if it never
        waited; before it: LocalTimeMs, after it: RemoteTimeMs), its answer (`done`), the
        response's write begun (`writing`, after the responses owed before it on the
        connection; before it: ResponseQueueTimeMs), and written (`sent`;
        ResponseSendTimeMs). Once per request: the observations are inlined (a call each
        cost more than the rest)."""
        timers = self._timers.get(api_key)
        if timers is None:
            timers = self._new_timers(api_key)
        total, rqueue, local, remote, squeue, send = timers
        # most phases take under the first bound (0.25 ms): a comparison spares the bisect
        ms = (sent - received) * 1000.0
        total.counts[0 if ms <= FIRST_BOUND_MS else bisect_left(TIME_BUCKETS_MS, ms)] += 1
        total.sum += ms
        ms = (started - received) * 1000.0
        rqueue.counts[0 if ms <= FIRST_BOUND_MS else bisect_left(TIME_BUCKETS_MS, ms)] += 1
        rqueue.sum += ms
        if remote_from:
            ms = (remote_from - started) * 1000.0
            local.counts[0 if ms <= FIRST_BOUND_MS else bisect_left(TIME_BUCKETS_MS, ms)] += 1
            local.sum += ms
            ms = (done - remote_from) * 1000.0
            remote.counts[0 if ms <= FIRST_BOUND_MS else bisect_left(TIME_BUCKETS_MS, ms)] += 1
            remote.sum += ms
        else:
            ms = (done - started) * 1000.0
            local.counts[0 if ms <= FIRST_BOUND_MS else bisect_left(TIME_BUCKETS_MS, ms)] += 1
            local.sum += ms
            remote.counts[0] += 1
        ms = (writing - done) * 1000.0
        squeue.counts[0 if ms <= FIRST_BOUND_MS else bisect_left(TIME_BUCKETS_MS, ms)] += 1
        squeue.sum += ms
        ms = (sent - writing) * 1000.0
        send.counts[0 if ms <= FIRST_BOUND_MS else bisect_left(TIME_BUCKETS_MS, ms)] += 1
        send.sum += ms

    def _new_timers(self, api_key: int) -> tuple[Histogram, Histogram, Histogram, Histogram,
                                                 Histogram, Histogram]:
        timers = (Histogram(), Histogram(), Histogram(), Histogram(), Histogram(), Histogram())
        (self.total_time[api_key], self.request_queue_time[api_key], self.local_time[api_key],
         self.remote_time[api_key], self.response_queue_time[api_key],
         self.response_send_time[api_key]) = timers
        self._timers[api_key] = timers
        return timers


# Kafka's LogFlushStats LogFlushRateAndTimeMs: one per process, as in Kafka. Flushes may run
# on the log manager's thread: an increment lost to a race is the price of no lock.
LOG_FLUSH_TIME: Final = Histogram()


class NodeStats:
    """Everything a node counts; `node.stats` when metrics are on, else None."""

    __slots__ = ("server", "topics")

    def __init__(self) -> None:
        self.server = ServerStats()
        self.topics = BrokerTopicStats()
