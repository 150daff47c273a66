"""Kafka Connect 4.4 in distributed mode on Skiff (issue 35, point 2).

Two Connect workers (connect-runtime 4.4.0; the FileStream connectors come from
connect-file 4.3.1, the newest tests/java/pom.xml resolves) form one Connect cluster whose
config, offset and status topics live on the session's Skiff node (replication factor 1;
Connect creates them itself, compacted). connect-file 4.3.1 calls
org.apache.kafka.common.utils.AppInfoParser, which kafka-clients 4.4.0 moved to
...utils.internals: the workers run with tests/java/src's classes on the classpath, where a
shim of that class delegates to the moved one. Through the REST API a FileStreamSource connector
reads a file into a Skiff topic and a FileStreamSink connector writes that topic to
another file; the second file must equal the first byte for byte. Then the worker running
the source task is killed -9 (once both connectors have flushed their offsets: FileStream
is at-least-once, so a kill in mid-flight may repeat lines), its connectors and tasks
move to the other worker (scheduled.rebalance.max.delay.ms=0, so at once), the REST API
lists both connectors and their tasks RUNNING there, and lines appended to the input
after the kill reach the output, which again equals the input byte for byte.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Broker
from tests.support.kafka_ref import TOOL_JVM_OPTS, java_program_classpath
from tests.support.node import free_port, tcp_connects

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

WORKER_CLASS = "org.apache.kafka.connect.cli.ConnectDistributed"
START_TIMEOUT_S = 120.0
FLOW_TIMEOUT_S = 120.0
FLUSH_MS = 1000


class Worker:
    """One Connect worker process, its REST listener on a free port."""

    def __init__(self, work: Path, name: str, props: dict[str, str]) -> None:
        self.port = free_port()
        self.name = name
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = work / f"{name}.properties"
        self.config.write_text("".join(f"{k}={v}\n" for k, v in {
            **props, "listeners": self.url, "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": str(self.port)}.items()))
        self.log_path = work / f"{name}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            ["java", *TOOL_JVM_OPTS, "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
             "-cp", java_program_classpath(), WORKER_CLASS, str(self.config)],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)

    @property
    def worker_id(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"worker {self.name} exited:\n{self.log()[-6000:]}")
            if tcp_connects("127.0.0.1", self.port):
                try:
                    if rest(self, "GET", "/connectors") == []:
                        return
                except (OSError, urllib.error.HTTPError):
                    pass
            time.sleep(0.5)
        raise AssertionError(f"worker {self.name} not ready:\n{self.log()[-6000:]}")

    def kill(self) -> int:
        self.proc.kill()
        return self.proc.wait(20)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


def rest(worker: Worker, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(worker.url + path, data=data, method=method,
                                 headers={"Content-Type": "application/json",
                                          "Accept": "application/json"})
    with urllib.request.urlopen(req, timeout=20) as resp:
        text = resp.read().decode()
    return json.loads(text) if text else None


def input_text(start: int, count: int) -> str:
    """Lines of ASCII text, each ending in a newline. (FileStreamSourceTask counts its
    offset in characters but skips bytes when a task starts again, so after a move it
    would resume early in a file with multi-byte UTF-8 and repeat lines, on Kafka too.)"""
    return "".join(f"line {i:05d} \t<{'x' * (i % 23)}> {{\"n\": {i}}} ~!@#$%^&*()\n"
                   for i in range(start, start + count))


def wait_for(what: str, predicate: Any, workers: list[Worker],
             timeout: float = FLOW_TIMEOUT_S) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
        except (OSError, urllib.error.HTTPError, ValueError) as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(0.5)
    logs = "\n".join(f"--- {w.name}\n{w.log()[-4000:]}" for w in workers)
    raise AssertionError(f"not within {timeout:.0f}s: {what} (last: {last!r})\n{logs}")


def status(worker: Worker, connector: str) -> dict[str, Any]:
    s: dict[str, Any] = rest(worker, "GET", f"/connectors/{connector}/status")
    return s


def all_running(worker: Worker, names: list[str], on: str | None = None) -> bool:
    for name in names:
        s = status(worker, name)
        states = [s["connector"]] + s["tasks"]
        if not s["tasks"] or any(x["state"] != "RUNNING" for x in states):
            return False
        if on is not None and any(x["worker_id"] != on for x in states):
            return False
    return True


@pytest.fixture(scope="module")
def connect(skiff_node: Broker, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[dict[str, Any]]:
    work = tmp_path_factory.mktemp("connect")
    tag = uuid.uuid4().hex[:8]
    props = {
        "bootstrap.servers": skiff_node.bootstrap,
        "group.id": f"connect-{tag}",
        "config.storage.topic": f"connect-configs-{tag}",
        "offset.storage.topic": f"connect-offsets-{tag}",
        "status.storage.topic": f"connect-status-{tag}",
        "config.storage.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "offset.storage.partitions": "5",
        "status.storage.partitions": "2",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        "offset.flush.interval.ms": str(FLUSH_MS),
        "scheduled.rebalance.max.delay.ms": "0",
        "session.timeout.ms": "6000",
        "heartbeat.interval.ms": "1000",
    }
    workers = [Worker(work, "worker-a", props), Worker(work, "worker-b", props)]
    try:
        for w in workers:
            w.wait_ready()
        yield {"work": work, "tag": tag, "workers": workers, "bootstrap": skiff_node.bootstrap}
    finally:
        for w in workers:
            w.stop()


def test_file_through_skiff_byte_for_byte_and_tasks_move_on_kill(connect: dict[str, Any]
                                                                ) -> None:
    work: Path = connect["work"]
    workers: list[Worker] = connect["workers"]
    a, b = workers
    tag = connect["tag"]
    topic = f"connect-data-{tag}"
    source_file, sink_file = work / "in.txt", work / "out.txt"
    source_file.write_text(input_text(0, 300), encoding="utf-8")
    names = ["file-sink", "file-source"]  # sorted
    rest(a, "POST", "/connectors", {"name": "file-source", "config": {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "tasks.max": "1", "file": str(source_file), "topic": topic}})
    rest(b, "POST", "/connectors", {"name": "file-sink", "config": {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
        "tasks.max": "1", "file": str(sink_file), "topics": topic}})
    assert sorted(rest(a, "GET", "/connectors")) == names
    assert sorted(rest(b, "GET", "/connectors")) == names
    wait_for("both connectors and their tasks RUNNING",
             lambda: all_running(a, names), workers)

    def caught_up() -> bool:
        return sink_file.exists() and sink_file.read_bytes() == source_file.read_bytes()

    wait_for("the sink file equals the source file", caught_up, workers)
    # both tasks flush their offsets (source offsets, sink consumer commits) every FLUSH_MS
    time.sleep(3 * FLUSH_MS / 1000)

    victim = a if status(a, "file-source")["tasks"][0]["worker_id"] == a.worker_id else b
    survivor = b if victim is a else a
    assert victim.kill() == -9
    wait_for(f"every connector and task RUNNING on {survivor.name}",
             lambda: all_running(survivor, names, on=survivor.worker_id), workers)
    listed = rest(survivor, "GET", "/connectors?expand=status")
    assert sorted(listed) == names
    for name in names:
        s = listed[name]["status"]
        assert s["connector"]["state"] == "RUNNING"
        assert [(t["id"], t["state"], t["worker_id"]) for t in s["tasks"]] == [
            (0, "RUNNING", survivor.worker_id)]
    with source_file.open("a", encoding="utf-8") as f:
        f.write(input_text(300, 200))
    wait_for("the lines written after the kill reach the sink file", caught_up, workers)
    assert sink_file.read_bytes() == source_file.read_bytes()
