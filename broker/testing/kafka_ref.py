"""Apache Kafka 4.4 nodes for the tests and the benchmarks: its jars, real KRaft nodes.

The jars come from Maven Central through `tests/java/pom.xml` (resolved into
`tests/java/target/kafka-libs`, one directory like Kafka's `libs/`, on first use). Nothing else
is downloaded.

- `run_java(main_class, *args)` runs a class of those jars as `kafka-run-class.sh` does, in a
  fresh JVM (the tests' tool server, tests/support/kafka_ref.py, runs tools in one kept JVM).
- `KafkaNode` is one KRaft node (broker and controller in one process, or either alone),
  formatted with `kafka-storage format --standalone` (or as a dynamic quorum's other nodes
  are) and started with `kafka.Kafka server.properties` on free loopback ports, with the JVM
  settings of `kafka-server-start.sh`; it is stopped and killed by its own PID only.
- `KafkaCluster` is three such combined nodes with a static quorum (`controller.quorum.voters`).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, ClassVar

from broker.protocol.kafka_uuid import random_kafka_uuid
from broker.testing.node import REPO_ROOT, free_port, tcp_connects

JAVA_DIR = REPO_ROOT / "tests" / "java"
POM = JAVA_DIR / "pom.xml"
LIBS_DIR = JAVA_DIR / "target" / "kafka-libs"
KAFKA_VERSION = "4.4.0"
READY_TIMEOUT_S = 90.0
# Three JVMs electing a leader on a loaded 2-core machine (load average ~25, 2026-12-02)
# took longer than one node's 90 s: node 1 was still voting when its wait ended.
CLUSTER_READY_TIMEOUT_S = 240.0
STOP_TIMEOUT_S = 30.0
# What kafka-server-start.sh / kafka-run-class.sh give the broker's JVM (KAFKA_HEAP_OPTS,
# KAFKA_JVM_PERFORMANCE_OPTS).
BROKER_JVM_OPTS = ["-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                   "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                   "-Djava.awt.headless=true"]
# What kafka-producer-perf-test.sh / kafka-consumer-perf-test.sh give theirs (-Xmx512M and
# kafka-run-class.sh's performance options).
PERF_TOOL_JVM_OPTS = ["-Xmx512M", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                      "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                      "-Djava.awt.headless=true"]
# A smaller, quickly started JVM for the tools, which run many times in a test suite.
TOOL_JVM_OPTS = ["-Xmx512M", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
                 "-Djava.awt.headless=true", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"]
STORAGE_TOOL = "kafka.tools.StorageTool"


class KafkaUnavailable(RuntimeError):
    """Java or Maven is missing, or the Kafka jars could not be resolved."""


def locked(path: Path) -> IO[str]:
    """An exclusive lock on `path`, so parallel processes resolve and compile once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "w")  # noqa: SIM115 - returned to the caller, closed after the work
    fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


def kafka_classpath() -> str:
    """The classpath of Kafka 4.4's jars, resolved with Maven on first use."""
    marker = LIBS_DIR / ".resolved"
    if not marker.exists() or marker.stat().st_mtime < POM.stat().st_mtime:
        with locked(JAVA_DIR / "target" / ".resolve.lock"):
            if not marker.exists() or marker.stat().st_mtime < POM.stat().st_mtime:
                _resolve()
    jars = sorted(LIBS_DIR.glob("*.jar"))
    return os.pathsep.join(str(j) for j in jars)


def _resolve() -> None:
    mvn = shutil.which("mvn")
    if mvn is None or shutil.which("java") is None:
        raise KafkaUnavailable("Java 17 and Maven are needed for the Kafka 4.4 reference; "
                               "tests/run.sh installs them "
                               "(apt-get install maven openjdk-17-jdk-headless)")
    if LIBS_DIR.exists():
        shutil.rmtree(LIBS_DIR)
    proc = subprocess.run(
        [mvn, "-q", "-B", "-f", str(POM), "dependency:copy-dependencies",
         f"-DoutputDirectory={LIBS_DIR}", "-DincludeScope=runtime"],
        capture_output=True, text=True, timeout=900, check=False)
    if proc.returncode != 0:
        raise KafkaUnavailable(f"mvn could not resolve Kafka {KAFKA_VERSION}:\n"
                               f"{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}")
    (LIBS_DIR / ".resolved").write_text(KAFKA_VERSION + "\n")


def run_java(main_class: str, *args: str, timeout: float = 120.0, classpath: str | None = None,
             jvm_opts: Sequence[str] = TOOL_JVM_OPTS, input_text: str | None = None,
             env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`java -cp <classpath> <main_class> args`, captured, bounded in time."""
    cp = classpath if classpath is not None else kafka_classpath()
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        ["java", *jvm_opts, "-cp", cp, main_class, *args],
        capture_output=True, text=True, timeout=timeout, check=False, input=input_text,
        stdin=None if input_text is not None else subprocess.DEVNULL, env=full_env)


class KafkaNode:
    """One Kafka 4.4 KRaft node (broker and controller), on free loopback ports."""

    # kafka-server-start.sh's JVM settings: what the benchmarks measure Kafka with.
    broker_jvm_opts: Sequence[str] = BROKER_JVM_OPTS

    def __init__(self, data_dir: Path, node_id: int = 1, port: int | None = None,
                 controller_port: int | None = None, overrides: Mapping[str, str] | None = None,
                 listeners: Mapping[str, tuple[str, int]] | None = None,
                 jvm_opts: Sequence[str] = (), roles: Sequence[str] = ("broker", "controller"),
                 quorum_bootstrap: str | None = None,
                 release_version: str | None = None) -> None:
        """`listeners`: extra client listeners, NAME -> (security protocol, port);
        `jvm_opts`: added to the broker's JVM options (system properties such as
        org.apache.kafka.sasl.oauthbearer.allowed.urls); `roles`: process.roles (a
        dedicated broker has no controller listener, a dedicated controller no client one);
        `quorum_bootstrap`: controller.quorum.bootstrap.servers (default its own controller
        listener); `release_version`: `kafka-storage format --release-version`."""
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.node_id = node_id
        self.port = port if port is not None else free_port()
        self.controller_port = controller_port if controller_port is not None else free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        self.extra_listeners = dict(listeners or {})
        self.overrides = dict(overrides or {})
        self.jvm_opts = list(jvm_opts)
        self.roles = tuple(roles)
        self.quorum_bootstrap = quorum_bootstrap
        self.release_version = release_version
        self.quorum_voters: str | None = None  # set by KafkaCluster
        self.config_path = self.data_dir / "server.properties"
        self.log_path = self.data_dir / "kafka.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.formatted = False

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def controller_bootstrap(self) -> str:
        return f"127.0.0.1:{self.controller_port}"

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise RuntimeError("kafka node is not running")
        return self._proc.pid

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def command(self) -> list[str]:
        """The broker's command line: its JVM settings (`broker_jvm_opts`), then our own."""
        return ["java", *self.broker_jvm_opts, *self.jvm_opts,
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
                "-cp", kafka_classpath(), "kafka.Kafka", str(self.config_path)]

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    def properties(self) -> dict[str, str]:
        listeners = [f"PLAINTEXT://127.0.0.1:{self.port}"] if self.is_broker else []
        if self.is_controller:
            listeners.append(f"CONTROLLER://127.0.0.1:{self.controller_port}")
        advertised = [f"PLAINTEXT://127.0.0.1:{self.port}"] if self.is_broker else []
        protocol_map = ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"]
        for name, (protocol, port) in self.extra_listeners.items():
            listeners.append(f"{name}://127.0.0.1:{port}")
            advertised.append(f"{name}://127.0.0.1:{port}")
            protocol_map.append(f"{name}:{protocol}")
        props = {
            "process.roles": ",".join(self.roles),
            "node.id": str(self.node_id),
            "listeners": ",".join(listeners),
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": ",".join(protocol_map),
            "log.dirs": str(self.data_dir / "data"),
            # Kafka's sample server.properties for a single node: internal topics at RF 1.
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
        }
        if self.is_broker:
            props["advertised.listeners"] = ",".join(advertised)
            props["inter.broker.listener.name"] = "PLAINTEXT"
        if self.quorum_voters is not None:
            props["controller.quorum.voters"] = self.quorum_voters
        else:
            props["controller.quorum.bootstrap.servers"] = \
                self.quorum_bootstrap or self.controller_bootstrap
        props.update(self.overrides)
        return props

    def storage_tool(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`kafka-storage args` (a fresh JVM here; the tests run it in their tool server)."""
        return run_java(STORAGE_TOOL, *args, timeout=120)

    def format(self, cluster_id: str, standalone: bool = True,
               no_initial_controllers: bool = False) -> None:
        """`kafka-storage format`: --standalone (the first controller of a dynamic quorum),
        --no-initial-controllers (a controller that joins one as an observer), or neither (a
        static quorum's nodes, a dedicated broker)."""
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        args = ["format", "-t", cluster_id, "-c", str(self.config_path)]
        if standalone:
            args.append("--standalone")
        elif no_initial_controllers:
            args.append("--no-initial-controllers")
        if self.release_version is not None:
            args += ["--release-version", self.release_version]
        proc = self.storage_tool(*args)
        if proc.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed:\n{proc.stdout}\n{proc.stderr}")
        self.formatted = True

    def start(self) -> None:
        if self.running:
            raise RuntimeError(f"kafka node pid {self.pid} is already running")
        if not self.formatted:
            self.format(random_kafka_uuid())
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in _reap
        self._proc = subprocess.Popen(
            self.command(), stdin=subprocess.DEVNULL, stdout=self._log,
            stderr=subprocess.STDOUT, cwd=self.data_dir)

    def is_ready(self) -> bool:
        """The node logged that it started and its client port (a dedicated controller's
        controller port) accepts connections."""
        port = self.port if self.is_broker else self.controller_port
        return tcp_connects("127.0.0.1", port) and "Kafka Server started" in self._log_text()

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Until is_ready(), bounded."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                raise RuntimeError(f"kafka node exited before it was ready\n{self.log_tail()}")
            if self.is_ready():
                return
            time.sleep(0.2)
        raise TimeoutError(
            f"kafka node on {self.bootstrap} not ready after {timeout:.0f}s\n{self.log_tail()}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT_S) -> int:
        proc = self._proc
        if proc is None:
            raise RuntimeError("kafka node was never started")
        if proc.poll() is None:
            proc.send_signal(sig)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait(timeout=10)
        self._reap()
        return code

    def kill(self) -> int:
        return self.stop(signal.SIGKILL, timeout=10)

    def close(self) -> None:
        if self._proc is not None:
            self.stop()

    def _log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 60) -> str:
        tail = self._log_text().splitlines()[-lines:]
        return f"--- last {len(tail)} lines of {self.log_path} ---\n" + "\n".join(tail)

    def _reap(self) -> None:
        self._proc = None
        if self._log is not None:
            self._log.close()
            self._log = None


def started_kafka(data_dir: Path, **kwargs: object) -> KafkaNode:
    node = KafkaNode(data_dir, **kwargs)  # type: ignore[arg-type]
    node.start()
    try:
        node.wait_ready()
    except BaseException:
        node.close()
        raise
    return node


class KafkaCluster:
    """Three combined Kafka 4.4 nodes with a static quorum, started together."""

    node_class: ClassVar[type[KafkaNode]] = KafkaNode

    def __init__(self, data_dir: Path, size: int = 3,
                 overrides: Mapping[str, str] | None = None) -> None:
        self.nodes = [self.node_class(Path(data_dir) / f"kafka-{i}", node_id=i,
                                      overrides=overrides)
                      for i in range(1, size + 1)]
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        for n in self.nodes:
            n.quorum_voters = voters
            n.overrides = {
                "offsets.topic.replication.factor": str(min(3, size)),
                "transaction.state.log.replication.factor": str(min(3, size)),
                "transaction.state.log.min.isr": str(min(2, size)),
                "share.coordinator.state.topic.replication.factor": str(min(3, size)),
                "share.coordinator.state.topic.min.isr": str(min(2, size)),
                **dict(overrides or {}),
            }

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    def new_cluster_id(self) -> str:
        return random_kafka_uuid()

    def start(self, timeout: float = CLUSTER_READY_TIMEOUT_S) -> None:
        """Format and start the nodes; wait until every one is ready, within one deadline
        for the three (a node is ready once the quorum has elected a leader and it has
        registered, so the three get ready together)."""
        cluster_id = self.new_cluster_id()
        for n in self.nodes:
            n.format(cluster_id, standalone=False)
        for n in self.nodes:
            n.start()
        deadline = time.monotonic() + timeout
        for n in self.nodes:
            n.wait_ready(max(1.0, deadline - time.monotonic()))

    def close(self) -> None:
        for n in self.nodes:
            n.close()
