"""A real Prometheus server (Debian's) scrapes a 3 controller + 3 broker cluster every
second, with deploy/monitoring's rules loaded; PromQL through its HTTP API shows what an
operator would see: bytes in rising under load, consumer lag for a group that stopped,
one active controller, under-replicated partitions while a broker is down and none once it
is back, and data for every query of the Grafana dashboard."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.testing.cluster import Cluster, free_ports
from tests.support.requires import tool_mark

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.slow,
    tool_mark("prometheus", "Debian package prometheus (tests/run.sh installs it)"),
]
MONITORING = Path(__file__).resolve().parents[2] / "deploy" / "monitoring"
TOPIC = "load"
GROUP = "stopped-group"


class PrometheusServer:
    def __init__(self, directory: Path, targets: list[str]) -> None:
        self.port = free_ports(1)[0]
        self.url = f"http://127.0.0.1:{self.port}"
        directory.mkdir(parents=True, exist_ok=True)
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s",
                       "scrape_timeout": "1s"},
            "rule_files": [str(MONITORING / "rules" / "skiff-recording.yml"),
                           str(MONITORING / "rules" / "skiff-alerts.yml")],
            "scrape_configs": [{"job_name": "skiff",
                                "static_configs": [{"targets": targets}]}],
        }
        self.config_path = directory / "prometheus.yml"
        self.config_path.write_text(json.dumps(config))  # JSON is YAML
        self.log_path = directory / "prometheus.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={self.config_path}",
             f"--storage.tsdb.path={directory / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log_path.read_text()[-3000:]
            with contextlib.suppress(OSError), \
                    urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as resp:
                if resp.status == 200:
                    return
            time.sleep(0.2)
        raise TimeoutError(f"prometheus not ready\n{self.log_path.read_text()[-3000:]}")

    def api(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=10) as resp:
            doc = json.load(resp)
        assert doc["status"] == "success", doc
        return doc["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self.api("query", query=expr)
        assert data["resultType"] == "vector", data
        return list(data["result"])

    def scalar(self, expr: str) -> float | None:
        """The value of a one-series query, None when it has no series."""
        result = self.query(expr)
        assert len(result) <= 1, result
        return float(result[0]["value"][1]) if result else None

    def wait(self, expr: str, ok: Callable[[float | None], bool], timeout: float,
             what: str) -> float | None:
        deadline = time.monotonic() + timeout
        last: float | None = None
        while time.monotonic() < deadline:
            last = self.scalar(expr)
            if ok(last):
                return last
            time.sleep(0.5)
        raise AssertionError(f"{what}: {expr} = {last} after {timeout}s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("metrics-cluster"), controllers=3, brokers=3)
    try:
        c.start()
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def prom(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    server = PrometheusServer(tmp_path_factory.mktemp("prometheus"),
                              [n.metrics_address for n in cluster.nodes.values()])
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


class Load:
    """A librdkafka producer writing to TOPIC on a thread until stopped (bounded)."""

    def __init__(self, bootstrap: str, limit_s: float = 300) -> None:
        self.bootstrap = bootstrap
        self.limit_s = limit_s
        self._stop = threading.Event()
        self.sent = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5,
                             "acks": "all", "log_level": 3})
        payload = b"m" * 200
        deadline = time.monotonic() + self.limit_s
        while not self._stop.is_set() and time.monotonic() < deadline:
            for _ in range(50):
                with contextlib.suppress(BufferError):
                    producer.produce(TOPIC, value=payload)
                    self.sent += 1
            producer.poll(0)
            time.sleep(0.02)
        producer.flush(10)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(20)


def test_prometheus_sees_the_cluster(cluster: Cluster, prom: PrometheusServer) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 3})
    admin.create_topics([NewTopic(TOPIC, 3, 3)])[TOPIC].result(timeout=30)
    prom.wait('count(up{job="skiff"} == 1)', lambda v: v == 6, 60, "every node scraped")

    # one active controller, counted across the cluster
    prom.wait("sum(kafka_controller_kafkacontroller_activecontrollercount)",
              lambda v: v == 1, 60, "one active controller")
    assert prom.scalar("count(kafka_controller_kafkacontroller_activecontrollercount)") == 3

    load = Load(cluster.bootstrap_servers)
    try:
        # bytes in rising under load
        expr = f'sum(kafka_server_brokertopicmetrics_bytesin_total{{topic="{TOPIC}"}})'
        first = prom.wait(expr, lambda v: v is not None and v > 0, 60, "bytes in")
        assert first is not None
        prom.wait(expr, lambda v: v is not None and v > first, 60, "bytes in rising")
        prom.wait(f'sum(rate(kafka_server_brokertopicmetrics_bytesin_total{{topic="{TOPIC}"}}'
                  '[5s]))', lambda v: v is not None and v > 0, 60, "a bytes-in rate")
        # replication: followers fetch what the leaders took
        prom.wait("sum(kafka_server_brokertopicmetrics_replicationbytesin_total)",
                  lambda v: v is not None and v > 0, 60, "replication bytes in")

        # a group that consumes for a while and then stops: its lag grows
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                             "group.id": GROUP, "auto.offset.reset": "earliest",
                             "session.timeout.ms": 6000, "fetch.queue.backoff.ms": 1,
                             "auto.commit.interval.ms": 200, "log_level": 3})
        consumer.subscribe([TOPIC])
        got, deadline = 0, time.monotonic() + 90
        while got < 300 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got += 1
        assert got > 0, "the group consumed nothing"
        consumer.commit(asynchronous=False)
        consumer.close()
        lag = f'sum(kafka_consumergroup_lag{{consumergroup="{GROUP}"}})'
        before = prom.wait(lag, lambda v: v is not None and v > 0, 60, "consumer lag")
        assert before is not None
        prom.wait(lag, lambda v: v is not None and v > before, 60, "consumer lag growing")
    finally:
        load.stop()

    # a broker dies: its partitions' leaders shrink their ISRs (fencing), URP > 0 ...
    urp = "sum(kafka_server_replicamanager_underreplicatedpartitions)"
    assert prom.scalar(urp) == 0
    victim = cluster.broker_ids[-1]
    cluster.kill(victim)
    prom.wait(urp, lambda v: v is not None and v > 0, 60, "under-replicated partitions")
    # the alert rule sees it too (pending: it fires only after 5 minutes)
    prom.wait('count(ALERTS{alertname="SkiffUnderReplicatedPartitions",alertstate="pending"})',
              lambda v: v == 1, 60, "the under-replicated alert pending")
    # ... and back to 0 once it has returned and caught up
    cluster.restart(victim)
    prom.wait(urp, lambda v: v == 0, 60, "no under-replicated partition")
    prom.wait("sum(kafka_controller_kafkacontroller_activecontrollercount)",
              lambda v: v == 1, 60, "still one active controller")

    # every rule loaded and healthy; every dashboard query answers with data
    groups = prom.api("rules")["groups"]
    rules = [r for g in groups for r in g["rules"]]
    assert len(rules) >= 17
    assert all(r["health"] == "ok" for r in rules), [r for r in rules if r["health"] != "ok"]
    dashboard = json.loads((MONITORING / "grafana" / "skiff-cluster.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    # the group's lag is exported by its coordinator: after the kill and restart above the
    # group may have moved and be loading, and its series come back with the next scrape
    deadline = time.monotonic() + 60
    empty = [e for e in exprs if not prom.query(e)]
    while empty and time.monotonic() < deadline:
        time.sleep(1)
        empty = [e for e in empty if not prom.query(e)]
    assert not empty, f"dashboard queries without data for 60 s: {empty}"
