"""A real `skiff dev` node's metrics endpoint, scraped after librdkafka produced and
consumed: the figures match what was done, both formats parse, promtool accepts it; for a
broker of one process and for one of two workers (skiff.broker.workers)."""

from __future__ import annotations

import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from tests.support.node import SkiffNode
from tests.support.requires import tool_mark

pytestmark = pytest.mark.timeout(120)
RECORDS = 200
COMMITTED = 150


@pytest.fixture(scope="module", params=[1, 2], ids=["one-process", "two-workers"])
def node(tmp_path_factory: pytest.TempPathFactory,
         request: pytest.FixtureRequest) -> Iterator[SkiffNode]:
    # skiff.broker.workers=2: the node process gathers the worker's figures at each scrape
    n = SkiffNode(tmp_path_factory.mktemp("metrics-node"),
                  config_env={"SKIFF_SKIFF_BROKER_WORKERS": str(request.param)})
    n.start()
    try:
        n.wait_ready()
        yield n
    finally:
        n.close()


def scrape(node: SkiffNode, accept: str | None = None) -> tuple[str, str]:
    req = urllib.request.Request(f"http://127.0.0.1:{node.metrics_port}/metrics",
                                 headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.headers["Content-Type"], resp.read().decode()


def values(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def get(vals: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str,
        **labels: str) -> float:
    return vals[(name, frozenset(labels.items()))]


@pytest.fixture(scope="module")
def worked(node: SkiffNode) -> dict[str, int]:
    """Produce RECORDS records, consume them in group `g`, commit COMMITTED."""
    topic = "metrics-t"
    producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 5})
    payload = b"x" * 100
    for i in range(RECORDS):
        producer.produce(topic, value=payload, key=str(i).encode())
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "g",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 6000, "fetch.queue.backoff.ms": 1})
    try:
        consumer.subscribe([topic])
        got, deadline = 0, time.monotonic() + 30
        while got < RECORDS and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got += 1
        assert got == RECORDS
        consumer.commit(offsets=[TopicPartition(topic, 0, COMMITTED)], asynchronous=False)
    finally:
        consumer.close()
    # a KIP-848 consumer group (the consumer protocol): its rebalances are counted apart
    kip848 = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "g848",
                       "group.protocol": "consumer", "auto.offset.reset": "earliest",
                       "enable.auto.commit": False, "fetch.queue.backoff.ms": 1})
    try:
        kip848.subscribe([topic])
        got, deadline = 0, time.monotonic() + 30
        while got == 0 and time.monotonic() < deadline:
            msg = kip848.poll(0.5)
            if msg is not None and msg.error() is None:
                got += 1
        assert got, "the KIP-848 consumer got nothing"
    finally:
        kip848.close()
    return {"bytes": len(payload) * RECORDS}


def test_figures_match_what_was_done(node: SkiffNode, worked: dict[str, int]) -> None:
    ctype, text = scrape(node)
    assert ctype.startswith("text/plain; version=0.0.4")
    v = values(text)
    t = {"topic": "metrics-t"}
    assert get(v, "kafka_server_brokertopicmetrics_messagesin_total", **t) == RECORDS
    assert get(v, "kafka_server_brokertopicmetrics_messagesin_total") >= RECORDS
    # batch framing and headers come on top of the values
    assert get(v, "kafka_server_brokertopicmetrics_bytesin_total", **t) > worked["bytes"]
    assert get(v, "kafka_server_brokertopicmetrics_bytesout_total", **t) >= \
        get(v, "kafka_server_brokertopicmetrics_bytesin_total", **t)
    assert get(v, "kafka_server_brokertopicmetrics_failedproducerequests_total", **t) == 0
    assert get(v, "kafka_log_log_logendoffset", topic="metrics-t", partition="0") == RECORDS
    assert get(v, "kafka_log_log_size", topic="metrics-t", partition="0") > worked["bytes"]
    produce = sum(n for (name, labels), n in v.items()
                  if name == "kafka_network_requestmetrics_requests_total"
                  and ("request", "Produce") in labels)
    assert produce >= 1
    assert get(v, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == produce
    # Kafka's request phases, each observed once per request
    for phase in ("requestqueuetimems", "localtimems", "remotetimems", "responsequeuetimems",
                  "responsesendtimems"):
        assert get(v, f"kafka_network_requestmetrics_{phase}_count", request="Produce") == \
            produce, phase
    assert get(v, "kafka_network_requestmetrics_localtimems_sum", request="Produce") <= \
        get(v, "kafka_network_requestmetrics_totaltimems_sum", request="Produce")
    assert get(v, "kafka_network_requestmetrics_errors_total",
               request="ApiVersions", error="NONE") >= 1

    # Kafka names a Fetch by its sender as well: the consumers' fetches are FetchConsumer
    def requests(name: str) -> float:
        return sum(n for (metric, labels), n in v.items()
                   if metric == "kafka_network_requestmetrics_requests_total"
                   and ("request", name) in labels)

    assert requests("FetchConsumer") >= 1
    assert requests("Fetch") == requests("FetchConsumer") + requests("FetchFollower")
    # timed when answered: a long poll cut short by the consumer's close never is
    fetch_timed = get(v, "kafka_network_requestmetrics_totaltimems_count", request="Fetch")
    assert 1 <= fetch_timed <= requests("Fetch")
    assert fetch_timed == \
        get(v, "kafka_network_requestmetrics_totaltimems_count", request="FetchConsumer")
    assert get(v, "kafka_server_replicamanager_leadercount") >= 1
    assert get(v, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert get(v, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert get(v, "kafka_server_raftmetrics_current_state", state="leader") == 1
    # the single voter stood for election once, at its start, and won at once
    assert get(v, "kafka_server_raftmetrics_election_latency_seconds_count") == 1
    # metadata applied: its append time, and a lag of a few seconds at most (heartbeats and
    # the topic's creation wrote records moments ago)
    applied = get(v, "kafka_server_broker_metadata_metrics_last_applied_record_timestamp")
    assert abs(applied / 1000 - time.time()) < 120
    assert 0 <= get(v, "kafka_controller_kafkacontroller_lastappliedrecordlagms") < 120_000
    assert get(v, "kafka_server_socket_server_metrics_connection_creation_total",
               listener="PLAINTEXT") >= 2
    g = {"consumergroup": "g", "topic": "metrics-t", "partition": "0"}
    assert get(v, "kafka_consumergroup_current_offset", **g) == COMMITTED
    assert get(v, "kafka_consumergroup_lag", **g) == RECORDS - COMMITTED
    # group "g" (classic) joined once; "g848" got a target assignment when it joined
    assert get(v, "kafka_server_group_coordinator_metrics_group_rebalance_total") >= 1
    assert get(v, "kafka_server_group_coordinator_metrics_consumer_group_rebalance_total") >= 1
    # the controller served registration, heartbeats and the topic's creation
    assert get(v, "kafka_controller_controllereventmanager_eventqueueprocessingtimems_count") > 0
    assert ("kafka_log_logflushstats_logflushrateandtimems_count", frozenset()) in v
    assert get(v, "process_resident_memory_bytes") > 0
    assert get(v, "process_cpu_seconds_total") > 0


def test_openmetrics_when_asked(node: SkiffNode, worked: dict[str, int]) -> None:
    ctype, text = scrape(node, "application/openmetrics-text; version=1.0.0")
    assert ctype.startswith("application/openmetrics-text")
    assert text.endswith("# EOF\n")
    assert "# TYPE kafka_server_brokertopicmetrics_messagesin counter" in text


@tool_mark("promtool", "Debian package prometheus (tests/run.sh installs it)")
def test_promtool_check_metrics_passes(node: SkiffNode, worked: dict[str, int],
                                       tmp_path: Path) -> None:
    _ctype, text = scrape(node)
    out = subprocess.run(["promtool", "check", "metrics"], input=text.encode(),
                         capture_output=True, timeout=30)
    assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()


def test_long_polls_are_remote_time(node: SkiffNode, worked: dict[str, int]) -> None:
    """A consumer caught up on its partition long-polls: Kafka counts the wait for records
    as RemoteTimeMs (the fetch purgatory), not LocalTimeMs."""
    def remote_ms() -> float:
        v = values(scrape(node)[1])
        return v.get(("kafka_network_requestmetrics_remotetimems_sum",
                      frozenset({("request", "FetchConsumer")})), 0.0)

    before = remote_ms()
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "long-poll",
                         "fetch.wait.max.ms": 100, "fetch.queue.backoff.ms": 1})
    try:
        # past the last record: every fetch waits its 100 ms for records that never come
        consumer.assign([TopicPartition("metrics-t", 0, RECORDS)])
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            consumer.poll(0.2)
    finally:
        consumer.close()
    # several answered long polls of ~100 ms each
    assert remote_ms() - before >= 150
