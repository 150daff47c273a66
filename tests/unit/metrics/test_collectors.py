"""The metric families built from counters and node state (broker/metrics)."""

from __future__ import annotations

import subprocess
import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from broker.metrics.collectors import (
    ElectionCounter,
    controller_families,
    group_families,
    metadata_families,
    raft_families,
    replica_families,
    request_families,
    request_label,
    share_coordinator_families,
    share_families,
    topic_families,
)
from broker.metrics.stats import (
    FETCH_CONSUMER_KEY,
    FETCH_FOLLOWER_KEY,
    BrokerTopicStats,
    Histogram,
    ServerStats,
    ShareCoordinatorStats,
    fetch_metric_key,
)
from broker.replication import Role
from tests.support.requires import tool_mark


def samples(families: list[Metric]) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for fam in families for s in fam.samples}


def value(families: list[Metric], name: str, **labels: str) -> float:
    return samples(families)[(name, frozenset(labels.items()))]


class _Static(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families


def exposition(families: list[Metric]) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Static(families))
    return generate_latest(registry)


def test_histogram_buckets_are_le_and_cumulative() -> None:
    h = Histogram((1.0, 10.0))
    for v in (0.5, 1.0, 1.5, 10.0, 11.0):
        h.observe(v)
    assert h.cumulative() == [("1.0", 2.0), ("10.0", 4.0), ("+Inf", 5.0)]
    assert h.count == 5
    assert h.sum == pytest.approx(24.0)


def test_request_label_is_kafkas_api_name() -> None:
    assert request_label("produce") == "Produce"
    assert request_label("api_versions") == "ApiVersions"
    assert request_label("offset_for_leader_epoch") == "OffsetForLeaderEpoch"


def test_topic_metrics_per_topic_and_total_without_topic_label() -> None:
    stats = BrokerTopicStats()
    stats.topic("a").messages_in += 3
    stats.topic("a").bytes_in += 300
    stats.topic("b").bytes_in += 50
    stats.topic("gone").bytes_in += 7
    stats.topic("b").replication_bytes_in += 9
    fams = topic_families(stats, live_topics=["a", "b"])
    assert value(fams, "kafka_server_brokertopicmetrics_bytesin_total", topic="a") == 300
    assert value(fams, "kafka_server_brokertopicmetrics_bytesin_total", topic="b") == 50
    # a deleted topic's series goes, its bytes stay in the all-topics total (as in Kafka)
    assert ("kafka_server_brokertopicmetrics_bytesin_total",
            frozenset({("topic", "gone")})) not in samples(fams)
    assert value(fams, "kafka_server_brokertopicmetrics_bytesin_total") == 357
    assert value(fams, "kafka_server_brokertopicmetrics_messagesin_total") == 3
    # replication bytes are all-topics only, as Kafka's
    assert value(fams, "kafka_server_brokertopicmetrics_replicationbytesin_total") == 9
    assert ("kafka_server_brokertopicmetrics_replicationbytesin_total",
            frozenset({("topic", "b")})) not in samples(fams)


def test_request_metrics_per_api_version_error_and_time() -> None:
    stats = ServerStats()
    stats.request(0, 9)
    stats.request(0, 9)
    stats.request(3, 12)
    stats.error(3, 0)
    stats.error(0, 6)
    stats.times(0, received=1.0, started=1.0005, done=1.002, writing=1.0022, sent=1.003)
    fams = request_families(stats)
    assert value(fams, "kafka_network_requestmetrics_requests_total",
                 request="Produce", version="9") == 2
    assert value(fams, "kafka_network_requestmetrics_requests_total",
                 request="Metadata", version="12") == 1
    assert value(fams, "kafka_network_requestmetrics_errors_total",
                 request="Metadata", error="NONE") == 1
    assert value(fams, "kafka_network_requestmetrics_errors_total",
                 request="Produce", error="NOT_LEADER_OR_FOLLOWER") == 1
    assert value(fams, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == 1
    assert value(fams, "kafka_network_requestmetrics_totaltimems_sum",
                 request="Produce") == pytest.approx(3.0)
    # Kafka's phases: request queue, local (remote included), response queue, send
    assert value(fams, "kafka_network_requestmetrics_requestqueuetimems_sum",
                 request="Produce") == pytest.approx(0.5)
    assert value(fams, "kafka_network_requestmetrics_localtimems_sum",
                 request="Produce") == pytest.approx(1.5)
    assert value(fams, "kafka_network_requestmetrics_responsequeuetimems_sum",
                 request="Produce") == pytest.approx(0.2)
    assert value(fams, "kafka_network_requestmetrics_responsesendtimems_sum",
                 request="Produce") == pytest.approx(0.8)
    assert value(fams, "kafka_network_requestmetrics_responsesendtimems_bucket",
                 request="Produce", le="1.0") == 1


def test_remote_time_from_the_first_wait_as_kafkas_purgatory() -> None:
    import asyncio

    from broker.metrics.stats import TASK_TIMING, mark_remote_wait

    timing = SimpleNamespace(remote_from=0.0)
    mark_remote_wait()  # outside a request: nothing to mark, no error

    async def handler() -> float:
        task = asyncio.current_task()
        TASK_TIMING[task] = timing  # as the server registers a request's task
        try:
            mark_remote_wait()
            first = timing.remote_from
            mark_remote_wait()  # a long poll's second wait: the first one counts
            assert timing.remote_from == first
            return first
        finally:
            del TASK_TIMING[task]

    async def other_task() -> float:  # a task that is not a registered request
        TASK_TIMING[object()] = SimpleNamespace(remote_from=0.0)
        try:
            mark_remote_wait()
        finally:
            TASK_TIMING.clear()
        return 0.0

    assert asyncio.run(handler()) > 0
    asyncio.run(other_task())
    assert not TASK_TIMING

    stats = ServerStats()
    # acks=all: 1 ms local, 4 ms waiting for the followers
    stats.times(0, 1.0, 1.0, 1.005, 1.005, 1.005, remote_from=1.001)
    stats.times(0, 2.0, 2.0, 2.001, 2.001, 2.001)  # acks=1: never waits
    fams = request_families(stats)
    assert value(fams, "kafka_network_requestmetrics_localtimems_sum",
                 request="Produce") == pytest.approx(2.0)
    assert value(fams, "kafka_network_requestmetrics_remotetimems_sum",
                 request="Produce") == pytest.approx(4.0)
    # Kafka records 0 remote time for a request that never waited
    assert value(fams, "kafka_network_requestmetrics_remotetimems_count", request="Produce") == 2
    assert value(fams, "kafka_network_requestmetrics_remotetimems_bucket",
                 request="Produce", le="0.25") == 1


def test_fetch_named_by_its_sender_and_counted_as_fetch_too() -> None:
    # Kafka's RequestMetrics: request=FetchConsumer or FetchFollower, and request=Fetch
    assert fetch_metric_key(SimpleNamespace(replica_id=-1)) == FETCH_CONSUMER_KEY
    assert fetch_metric_key(SimpleNamespace(replica_id=3)) == FETCH_FOLLOWER_KEY
    # v15+: the replica id moved into replica_state
    assert fetch_metric_key(SimpleNamespace(
        replica_state=SimpleNamespace(replica_id=2, replica_epoch=7))) == FETCH_FOLLOWER_KEY
    assert fetch_metric_key(SimpleNamespace(
        replica_state=SimpleNamespace(replica_id=-1, replica_epoch=-1))) == FETCH_CONSUMER_KEY
    stats = ServerStats()
    stats.request(FETCH_CONSUMER_KEY, 16)
    stats.request(FETCH_CONSUMER_KEY, 16)
    stats.request(FETCH_FOLLOWER_KEY, 16)
    stats.request(FETCH_FOLLOWER_KEY, 12)
    stats.error(1, 0)
    stats.times(FETCH_CONSUMER_KEY, 1.0, 1.0, 1.5, 1.5, 1.5)  # a 500 ms long poll
    stats.times(FETCH_FOLLOWER_KEY, 2.0, 2.0, 2.0001, 2.0001, 2.0002)
    fams = request_families(stats)
    req = "kafka_network_requestmetrics_requests_total"
    assert value(fams, req, request="FetchConsumer", version="16") == 2
    assert value(fams, req, request="FetchFollower", version="16") == 1
    assert value(fams, req, request="FetchFollower", version="12") == 1
    assert value(fams, req, request="Fetch", version="16") == 3
    assert value(fams, req, request="Fetch", version="12") == 1
    assert value(fams, "kafka_network_requestmetrics_errors_total",
                 request="Fetch", error="NONE") == 1
    total = "kafka_network_requestmetrics_totaltimems"
    assert value(fams, total + "_count", request="FetchConsumer") == 1
    assert value(fams, total + "_count", request="FetchFollower") == 1
    assert value(fams, total + "_count", request="Fetch") == 2
    assert value(fams, total + "_sum", request="Fetch") == pytest.approx(500.2)
    assert value(fams, total + "_bucket", request="Fetch", le="0.25") == 1
    assert value(fams, total + "_bucket", request="Fetch", le="500.0") == 2
    # the per-sender histograms are not changed by the sum
    assert value(fams, total + "_bucket", request="FetchConsumer", le="0.25") == 0


def _part(topic: str, index: int, role: Role, isr: tuple[int, ...],
          replicas: tuple[int, ...], min_isr: int = 2, hw: int = 0) -> Any:
    log = SimpleNamespace(size_in_bytes=100 * (index + 1), segments=(1, 2),
                          log_start_offset=5, log_end_offset=hw)
    return SimpleNamespace(topic=topic, index=index, role=role, isr=isr, replicas=replicas,
                           min_insync_replicas=min_isr, log=log, high_watermark=hw)


class _Replicas:
    def __init__(self, parts: list[Any]) -> None:
        self.parts = {(p.topic, p.index): p for p in parts}
        self.isr_shrinks, self.isr_expands, self.failed_isr_updates = 2, 1, 0

    def partitions(self) -> list[Any]:
        return list(self.parts.values())

    def get(self, topic: str, index: int) -> Any:
        return self.parts.get((topic, index))


def test_partition_state_counts_as_kafkas_replica_manager() -> None:
    replicas = _Replicas([
        _part("t", 0, Role.LEADER, (1, 2, 3), (1, 2, 3)),  # healthy
        _part("t", 1, Role.LEADER, (1, 2), (1, 2, 3)),  # under-replicated, at min ISR
        _part("t", 2, Role.LEADER, (1,), (1, 2, 3)),  # under-replicated, under min ISR
        _part("t", 3, Role.FOLLOWER, (2,), (1, 2)),  # a follower counts in partitions only
        _part("t", 4, Role.OFFLINE, (), (1,)),
    ])
    fams = replica_families(replicas, image=None)
    p = "kafka_server_replicamanager_"
    assert value(fams, p + "partitioncount") == 5
    assert value(fams, p + "leadercount") == 3
    assert value(fams, p + "underreplicatedpartitions") == 2
    assert value(fams, p + "underminisrpartitioncount") == 1
    assert value(fams, p + "atminisrpartitioncount") == 1
    assert value(fams, p + "offlinereplicacount") == 1
    assert value(fams, p + "isrshrinks_total") == 2
    assert value(fams, "kafka_cluster_partition_underreplicated", topic="t", partition="1") == 1
    assert value(fams, "kafka_cluster_partition_underreplicated", topic="t", partition="0") == 0
    assert value(fams, "kafka_log_log_size", topic="t", partition="2") == 300
    assert value(fams, "kafka_log_log_numlogsegments", topic="t", partition="3") == 2


def _image(partitions: dict[str, list[tuple[int, tuple[int, ...], int]]],
           fenced: tuple[int, ...], live: tuple[int, ...]) -> Any:
    topics = {}
    for name, parts in partitions.items():
        topics[name] = SimpleNamespace(
            name=name, topic_id=uuid.uuid4(),
            partitions={i: SimpleNamespace(leader=leader, replicas=reps, leader_recovery_state=0)
                        for i, reps, leader in parts})
    brokers = {b: SimpleNamespace(fenced=True) for b in fenced}
    brokers.update({b: SimpleNamespace(fenced=False) for b in live})

    def iter_partitions() -> Any:
        for t in topics.values():
            for i, p in t.partitions.items():
                yield t, i, p

    return SimpleNamespace(brokers=brokers, topics_by_name=topics, offset=41,
                           topics_by_id={t.topic_id: t for t in topics.values()},
                           iter_partitions=iter_partitions)


def test_controller_figures_only_on_the_active_controller() -> None:
    image = _image({"a": [(0, (1, 2), 1), (1, (2, 1), 1), (2, (3,), -1)]},
                   fenced=(3,), live=(1, 2))
    p = "kafka_controller_kafkacontroller_"
    active = controller_families(image, True, raft_hw=43, elections=None)
    assert value(active, p + "activecontrollercount") == 1
    assert value(active, p + "globaltopiccount") == 1
    assert value(active, p + "globalpartitioncount") == 3
    assert value(active, p + "offlinepartitionscount") == 1
    assert value(active, p + "preferredreplicaimbalancecount") == 1
    assert value(active, p + "fencedbrokercount") == 1
    assert value(active, p + "activebrokercount") == 2
    assert value(active, p + "lastappliedrecordoffset") == 41
    assert value(active, p + "lastcommittedrecordoffset") == 42
    # nothing applied yet: no timestamp or lag series rather than "1970"
    assert (p + "lastappliedrecordlagms", frozenset()) not in samples(active)
    applied = controller_families(image, True, 43, None, applied_ts=1_000_000,
                                  now_ms=1_000_250)
    assert value(applied, p + "lastappliedrecordtimestamp") == 1_000_000
    assert value(applied, p + "lastappliedrecordlagms") == 250
    m = "kafka_server_broker_metadata_metrics_"
    fams = metadata_families(image, 1_000_000, 1_000_900)
    assert value(fams, m + "last_applied_record_offset") == 41
    assert value(fams, m + "last_applied_record_timestamp") == 1_000_000
    assert value(fams, m + "last_applied_record_lag_seconds") == pytest.approx(0.9)
    standby = controller_families(image, False, raft_hw=43, elections=None)
    assert value(standby, p + "activecontrollercount") == 0
    assert value(standby, p + "offlinepartitionscount") == 0


def test_election_counter_counts_leader_changes_while_active() -> None:
    old = _image({"a": [(0, (1, 2), 1), (1, (1, 2), 1)]}, fenced=(), live=(1, 2))
    tid = next(iter(old.topics_by_id))
    moved = SimpleNamespace(leader=2, replicas=(1, 2), leader_recovery_state=0)
    unclean = SimpleNamespace(leader=2, replicas=(1, 2), leader_recovery_state=1)
    same = SimpleNamespace(leader=1, replicas=(1, 2), leader_recovery_state=0)
    active = [True]
    counter = ElectionCounter(lambda: active[0])
    counter(old, None, SimpleNamespace(changed_partitions={(tid, 0): moved, (tid, 1): same}))
    assert (counter.elections, counter.unclean) == (1, 0)
    counter(old, None, SimpleNamespace(changed_partitions={(tid, 1): unclean}))
    assert (counter.elections, counter.unclean) == (2, 1)
    active[0] = False
    counter(old, None, SimpleNamespace(changed_partitions={(tid, 0): moved}))
    assert counter.elections == 2
    counter(old, None, None)  # a snapshot: nothing to count
    assert counter.elections == 2


def test_groups_by_state_members_offsets_and_lag() -> None:
    committed = SimpleNamespace(offset=40)
    stable = SimpleNamespace(state=SimpleNamespace(value="Stable"), members={"m1": 1, "m2": 2},
                             offsets={("t", 0): committed, ("t", 9): SimpleNamespace(offset=3)})
    empty = SimpleNamespace(state=SimpleNamespace(value="Empty"), members={}, offsets={})
    kip848 = SimpleNamespace(state=SimpleNamespace(value="Reconciling"), members={"x": 1},
                             offsets={})
    coord = SimpleNamespace(groups={"g1": stable, "g2": empty},
                            consumer_groups={"g3": kip848}, rebalances=4,
                            consumer_rebalances=7)
    replicas = _Replicas([_part("t", 0, Role.LEADER, (1,), (1,), hw=100)])
    fams = group_families([coord], replicas)
    p = "kafka_coordinator_group_groupmetadatamanager_"
    assert value(fams, p + "numgroups") == 2
    assert value(fams, p + "numgroupsstable") == 1
    assert value(fams, p + "numgroupsempty") == 1
    assert value(fams, p + "numoffsets") == 2
    assert value(fams, "kafka_server_group_coordinator_metrics_consumer_groups",
                 state="Reconciling") == 1
    assert value(fams, "kafka_server_group_coordinator_metrics_group_rebalance_total") == 4
    assert value(fams,
                 "kafka_server_group_coordinator_metrics_consumer_group_rebalance_total") == 7
    assert value(fams, "kafka_consumergroup_members", consumergroup="g1") == 2
    assert value(fams, "kafka_consumergroup_current_offset",
                 consumergroup="g1", topic="t", partition="0") == 40
    assert value(fams, "kafka_consumergroup_lag",
                 consumergroup="g1", topic="t", partition="0") == 60
    # no replica of t-9 here: no lag series rather than a made-up one
    assert ("kafka_consumergroup_lag", frozenset(
        {("consumergroup", "g1"), ("topic", "t"), ("partition", "9")})) not in samples(fams)


def _driver() -> Any:
    from random import Random

    from raft.config import RaftConfig, parse_voters
    from raft.driver import RaftDriver
    from raft.store import MemoryLogStore, MemoryQuorumStateStore

    cfg = RaftConfig(node_id=1, voters=parse_voters("1@h:1,2@h:2,3@h:3"))
    return RaftDriver(cfg, MemoryLogStore(), MemoryQuorumStateStore(), rng=Random(1))


def test_raft_metrics_from_the_drivers_counters() -> None:
    driver = _driver()
    p = "kafka_server_raftmetrics_"
    fams = raft_families(driver)
    assert value(fams, p + "election_latency_seconds_count") == 0
    assert value(fams, p + "fetch_records_total") == 0
    st = driver.stats
    st.fetched_records = 12
    st.election_latency_sum, st.election_latency_count, st.election_latency_max = 0.9, 2, 0.6
    fams = raft_families(driver)
    assert value(fams, p + "fetch_records_total") == 12
    assert value(fams, p + "election_latency_seconds_count") == 2
    assert value(fams, p + "election_latency_seconds_sum") == pytest.approx(0.9)
    assert value(fams, p + "election_latency_max_seconds") == pytest.approx(0.6)
    assert value(fams, p + "current_state", state="unattached") == 1


@tool_mark("promtool", "Debian package prometheus (tests/run.sh installs it)")
def test_promtool_accepts_every_family() -> None:
    server = ServerStats()
    server.request(1, 16)
    server.error(1, 0)
    server.times(1, 0.0, 0.1, 0.5, 0.55, 0.6)
    topics = BrokerTopicStats()
    topics.topic("a").bytes_out += 5
    image = _image({"a": [(0, (1,), 1)]}, fenced=(), live=(1,))
    replicas = _Replicas([_part("a", 0, Role.LEADER, (1,), (1, 2))])
    coord = SimpleNamespace(groups={}, consumer_groups={}, rebalances=0,
                            consumer_rebalances=0)
    fams = [*request_families(server), *topic_families(topics, None),
            *share_families(_share()), *share_coordinator_families(ShareCoordinatorStats()),
            *replica_families(replicas, image),
            *controller_families(image, True, 1, ElectionCounter(lambda: True),
                                 applied_ts=1000, now_ms=1500),
            *metadata_families(image, 1000, 1500), *raft_families(_driver()),
            *group_families([coord], replicas)]
    out = subprocess.run(["promtool", "check", "metrics"], input=exposition(fams),
                         capture_output=True, timeout=30)
    assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()


def test_controller_operations_timed_while_queued_and_running() -> None:
    import asyncio

    from broker.config import build_config
    from broker.controller.service import ControllerService

    cfg = build_config({"process.roles": "controller", "node.id": "1",
                        "controller.quorum.voters": "1@127.0.0.1:19093",
                        "listeners": "CONTROLLER://127.0.0.1:19093",
                        "controller.listener.names": "CONTROLLER",
                        "log.dirs": "/nonexistent/skiff"}, warn=lambda m: None)
    controller = SimpleNamespace(settings=SimpleNamespace(node_config=cfg))
    service = ControllerService(controller, None, None, lambda: 0)  # type: ignore[arg-type]

    async def op(hold_s: float) -> None:
        async with service._timed_lock():
            await asyncio.sleep(hold_s)

    async def main() -> None:
        await asyncio.gather(op(0.05), op(0.0))

    asyncio.run(main())
    assert service.event_queue_time.count == 2
    assert service.event_processing_time.count == 2
    assert service.event_queue_time.sum >= 40  # the second waited for the first (ms)
    assert service.event_processing_time.sum >= 40
    image = _image({"a": [(0, (1,), 1)]}, fenced=(), live=(1,))
    fams = controller_families(image, True, 1, None, service)
    name = "kafka_controller_controllereventmanager_eventqueuetimems"
    assert value(fams, name + "_count") == 2
    assert value(fams, name + "_bucket", le="+Inf") == 2


def test_request_phase_buckets_match_histogram_observe() -> None:
    """ServerStats.times files each phase in the bucket Histogram.observe would (its
    shortcut for the first bucket included: at, below and just above 0.25 ms)."""
    stats = ServerStats()
    phases = [0.0, 0.1, 0.25, 0.2500001, 0.3, 7.0, 40000.0]
    reference = Histogram()
    for ms in phases:
        start = 100.0
        stats.times(1, start, start + ms / 1000, start + ms / 1000, start + ms / 1000,
                    start + ms / 1000)
        reference.observe(ms)
    assert stats.total_time[1].counts == pytest.approx(reference.counts)
    assert stats.request_queue_time[1].counts == pytest.approx(reference.counts)
    assert stats.local_time[1].counts == [len(phases)] + [0] * 16
def test_quota_metrics_per_sensor_and_throttle_counts() -> None:
    from broker.metrics.collectors import quota_families
    from broker.quotas.core import Quotas, entity

    q = Quotas()
    quotas = {entity(user="alice"): {"producer_byte_rate": 100.0}}
    q.produce.record(quotas, "alice", "app", 500, 0)
    q.produce.record(quotas, "alice", "app", 2000, 0)  # over: throttled
    fams = quota_families(q, 0)
    # shared by alice's clients: no client id in the series
    assert value(fams, "kafka_server_produce_byte_rate", user="alice", client_id="") == 250.0
    assert value(fams, "skiff_quota_throttled_total", type="produce") == 1
    assert value(fams, "skiff_quota_throttle_seconds_total", type="produce") > 0
    assert value(fams, "skiff_quota_throttled_total", type="fetch") == 0
    exposition(fams)


def _share() -> Any:
    """A share service as share_families reads it: two groups, one loaded share-partition
    with a lock expired, one dropped earlier with two."""
    from broker.metrics.stats import ShareStats
    from broker.share.partition import ShareLimits, SharePartition

    stats = ShareStats()
    for kind in ("Accept", "Accept", "Release", "Renew"):
        stats.acknowledged(kind)
    stats.partition_load_time.observe(3.0)
    stats.acquire_waited("g1", 0.5)
    stats.acquire_waited("g1", 400.0)
    stats.dead_letters_produced("g1", 3, failed=False)
    stats.dead_letters_produced("g1", 2, failed=True)
    sp = SharePartition(10, ShareLimits(record_lock_duration_ms=5, delivery_count_limit=3,
                                        max_record_locks=100))
    sp.acquire("m", [(10, 14)], 100, 0)
    sp.expire(100)
    stats.batches_made(("g1", "t", 0), sp.take_new_batches())
    stats.lock_timeouts[("g2", "t", 1)] = 2
    partitions = {("g1", "t", 0): sp}

    def lock_timeouts() -> dict[tuple[str, str, int], int]:
        out = dict(stats.lock_timeouts)
        for key, part in partitions.items():
            out[key] = out.get(key, 0) + part.lock_timeouts
        return out

    groups = SimpleNamespace(listed=lambda: [("g1", "Stable"), ("g2", "Empty")], rebalances=4)
    return SimpleNamespace(groups=groups, stats=stats, partitions=partitions,
                           lock_timeouts=lock_timeouts)


def test_share_families_under_kafkas_names() -> None:
    fams = share_families(_share())
    g = "kafka_server_group_coordinator_metrics_share_groups"
    assert [value(fams, g, state=s) for s in ("Empty", "Stable", "Dead")] == [1, 1, 0]
    assert value(fams, "kafka_server_group_coordinator_metrics_share_group_rebalance_total") == 4
    acks = "kafka_server_sharegroupmetrics_recordacknowledgements_total"
    assert [value(fams, acks, acktype=k) for k in ("Accept", "Release", "Reject", "Renew")] \
        == [2, 1, 0, 1]
    assert value(fams, "kafka_server_sharegroupmetrics_partitionloadtimems_count") == 1
    labels = {"group": "g1", "topic": "t", "partition": "0"}
    assert value(fams, "kafka_server_sharepartitionmetrics_inflightmessagecount",
                 **labels) == 5
    assert value(fams, "kafka_server_sharepartitionmetrics_inflightbatchcount", **labels) == 1
    sizes = "kafka_server_sharepartitionmetrics_inflightbatchmessagecount"
    assert value(fams, sizes + "_count", **labels) == 1
    assert value(fams, sizes + "_sum", **labels) == 5
    assert value(fams, sizes + "_bucket", le="5.0", **labels) == 1
    assert value(fams, sizes + "_bucket", le="2.0", **labels) == 0
    timeouts = "kafka_server_sharepartitionmetrics_acquisitionlocktimeout_total"
    assert value(fams, timeouts, **labels) == 5
    assert value(fams, timeouts, group="g2", topic="t", partition="1") == 2
    acquire = "kafka_server_sharegroupmetrics_topicpartitionsacquiretimems"
    assert value(fams, acquire + "_count", group="g1") == 2
    assert value(fams, acquire + "_sum", group="g1") == pytest.approx(400.5)
    assert value(fams, acquire + "_bucket", group="g1", le="1.0") == 1
    dlq = "kafka_server_sharegroupmetrics_deadletterqueue"
    assert value(fams, dlq + "recordcount_total", group="g1") == 3
    assert value(fams, dlq + "totalproducerequests_total", group="g1") == 2
    assert value(fams, dlq + "failedproducerequests_total", group="g1") == 1


def test_share_coordinator_families_under_kafkas_names() -> None:
    stats = ShareCoordinatorStats()
    stats.writes = 3
    for seconds in (0.002, 0.010, 0.004):
        stats.write_answered(seconds)
    fams = share_coordinator_families(stats)
    p = "kafka_server_share_coordinator_metrics_"
    assert value(fams, p + "write_total") == 3
    assert value(fams, p + "write_latency_seconds_count") == 3
    assert value(fams, p + "write_latency_seconds_sum") == pytest.approx(0.016)
    assert value(fams, p + "write_latency_max_seconds") == pytest.approx(0.010)
