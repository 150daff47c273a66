"""Apache Kafka 4.4 as the tests' reference: its jars, its tools, and real Kafka nodes.

The jars come from Maven Central through `tests/java/pom.xml`; `tests/run.sh` copies them
into `tests/java/target/kafka-libs` (one directory, like Kafka's `libs/`), and
`kafka_classpath()` does the same when pytest runs on its own. Nothing else is downloaded.

- `run_tool(tool_class, *args)` runs one of Kafka's command-line tools the way its
  `kafka-*.sh` script does (`java -cp <libs> <class> args`).
- `KafkaNode` is one KRaft node (broker and controller in one process), formatted with
  `kafka-storage format --standalone` and started with `kafka.Kafka server.properties` on
  free loopback ports; it is stopped and killed by its own PID only.
- `KafkaCluster` is three such combined nodes with a static quorum (`controller.quorum.voters`).
- `java_program(name)` compiles the test programs in `tests/java/src` against the same jars.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import locale
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from tests.support.node import REPO_ROOT, free_port, tcp_connects

JAVA_DIR = REPO_ROOT / "tests" / "java"
POM = JAVA_DIR / "pom.xml"
LIBS_DIR = JAVA_DIR / "target" / "kafka-libs"
CLASSES_DIR = JAVA_DIR / "target" / "classes"
SOURCES_DIR = JAVA_DIR / "src"
KAFKA_VERSION = "4.4.0"
READY_TIMEOUT_S = 90.0
# Three JVMs electing a leader on a loaded 2-core machine (load average ~25, 2026-12-02)
# took longer than one node's 90 s: node 1 was still voting when its wait ended.
CLUSTER_READY_TIMEOUT_S = 240.0
STOP_TIMEOUT_S = 30.0
# What kafka-run-class.sh / kafka-server-start.sh give the JVM (KAFKA_HEAP_OPTS,
# KAFKA_JVM_PERFORMANCE_OPTS), with a smaller heap for the tools, which run many times in a suite.
BROKER_JVM_OPTS = ["-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                   "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                   "-Djava.awt.headless=true"]
TOOL_JVM_OPTS = ["-Xmx512M", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
                 "-Djava.awt.headless=true", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"]


class KafkaUnavailable(RuntimeError):
    """Java or Maven is missing, or the Kafka jars could not be resolved."""


def _locked(path: Path) -> IO[str]:
    """An exclusive lock on `path`, so parallel pytest workers resolve and compile once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "w")  # noqa: SIM115 - returned to the caller, closed after the work
    fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


def kafka_classpath() -> str:
    """The classpath of Kafka 4.4's jars, resolved with Maven on first use."""
    marker = LIBS_DIR / ".resolved"
    if not marker.exists() or marker.stat().st_mtime < POM.stat().st_mtime:
        with _locked(JAVA_DIR / "target" / ".resolve.lock"):
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


def java_program_classpath() -> str:
    """Kafka's jars plus the compiled test programs of tests/java/src (compiled when stale)."""
    cp = kafka_classpath()
    sources = sorted(SOURCES_DIR.rglob("*.java"))
    stamp = CLASSES_DIR / ".compiled"
    newest = max((s.stat().st_mtime for s in sources), default=0.0)
    if sources and (not stamp.exists() or stamp.stat().st_mtime < newest):
        with _locked(JAVA_DIR / "target" / ".compile.lock"):
            if not stamp.exists() or stamp.stat().st_mtime < newest:
                if CLASSES_DIR.exists():
                    shutil.rmtree(CLASSES_DIR)
                CLASSES_DIR.mkdir(parents=True)
                proc = subprocess.run(
                    ["javac", "-nowarn", "-encoding", "UTF-8", "-d", str(CLASSES_DIR), "-cp", cp,
                     *[str(s) for s in sources]],
                    capture_output=True, text=True, timeout=300, check=False)
                if proc.returncode != 0:
                    raise RuntimeError(f"javac failed:\n{proc.stdout}\n{proc.stderr}")
                stamp.write_text("ok\n")
    return f"{CLASSES_DIR}{os.pathsep}{cp}"


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


def run_tool(tool_class: str, *args: str, timeout: float = 120.0,
             input_text: str | None = None) -> subprocess.CompletedProcess[str]:
    """One of Kafka's command-line tools, as its kafka-*.sh script runs it.

    The tool's main runs in one of this process's tool servers (`ToolServer`, a JVM kept for
    many calls), which answers what a fresh `java -cp <libs> <class> args` would have: exit
    code, stdout, stderr. `KAFKA_TOOLS_FORK=1` starts one JVM per call instead."""
    if os.environ.get(TOOLS_FORK_ENV) == "1" or tool_class in FORKED_TOOLS:
        return run_java(tool_class, *args, timeout=timeout, input_text=input_text)
    return _run_in_server(tool_class, list(args), timeout, input_text)


def run_program(main_class: str, *args: str, timeout: float = 180.0,
                env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """One of the Java test programs in tests/java/src."""
    return run_java(main_class, *args, timeout=timeout, classpath=java_program_classpath(), env=env)


# -- the tool servers -------------------------------------------------------------------------
# A forked tool costs ~1.7 s wall and 2-3 s of CPU, nearly all of it loading and JIT-compiling
# the admin client; tests/java/src/skiff/tools/ToolServer.java runs the tools' main in one JVM
# kept for many calls and answers what a fork would have printed. Each pytest process (each
# xdist worker) keeps its own server, started on first use, replaced after
# TOOL_SERVER_MAX_CALLS calls, when a call times out (the server is killed by its PID), when it
# dies, or when tools left too many threads running in it.

TOOLS_FORK_ENV = "KAFKA_TOOLS_FORK"
TOOL_SERVER_CLASS = "skiff.tools.ToolServer"
# System.exit is caught with a SecurityManager (allowed on Java 17 with this flag); shutdown
# hooks a tool registers with Runtime are read from java.lang.ApplicationShutdownHooks.
TOOL_SERVER_OPTS = ["-Djava.security.manager=allow",
                    "--add-opens", "java.base/java.lang=ALL-UNNAMED"]
TOOL_SERVER_MAX_CALLS = 1000
TOOL_SERVER_MAX_LEFT_THREADS = 40
TOOL_SERVER_START_TIMEOUT_S = 60.0
# Tools that stay on the fork path: none so far (System.exit, Exit.exit/halt, threads, stdin and
# shutdown hooks are all handled in the server).
FORKED_TOOLS: frozenset[str] = frozenset()


class ToolServerDied(RuntimeError):
    """The tool server's JVM ended in the middle of a call."""


def _recv_exact(sock: socket.socket, n: int, deadline: float) -> bytes:
    chunks: list[bytes] = []
    while n > 0:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        sock.settimeout(remaining)
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


class ToolServer:
    """One JVM running skiff.tools.ToolServer, connected over a Unix socket."""

    def __init__(self) -> None:
        classpath = java_program_classpath()
        base = tempfile.gettempdir()
        self.dir = Path(tempfile.mkdtemp(prefix="kafka-tools-",
                                         dir=base if len(base) < 60 else "/tmp"))
        self.log_path = self.dir / "server.log"
        self.cwd = os.getcwd()
        self.calls = 0
        self.left_threads = 0
        path = self.dir / "socket"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(path))
            listener.listen(1)
            listener.settimeout(0.2)
            with open(self.log_path, "wb") as log:
                self.proc = subprocess.Popen(
                    ["java", *TOOL_JVM_OPTS, *TOOL_SERVER_OPTS, "-cp", classpath,
                     TOOL_SERVER_CLASS, str(path)],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + TOOL_SERVER_START_TIMEOUT_S
            while True:
                try:
                    self.sock, _ = listener.accept()
                    break
                except TimeoutError:
                    if self.proc.poll() is not None or time.monotonic() > deadline:
                        self.kill()
                        raise ToolServerDied(
                            f"the tool server did not start\n{self.log_tail()}") from None
        finally:
            listener.close()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def call(self, tool_class: str, args: Sequence[str], timeout: float,
             input_text: str | None) -> tuple[int, bytes, bytes]:
        """(exit code, stdout, stderr); TimeoutError after `timeout` (the server is then
        killed), ToolServerDied if the JVM ended."""
        fields: list[bytes | None] = [
            tool_class.encode(),
            None if input_text is None else input_text.encode(locale.getpreferredencoding(False)),
            *(a.encode() for a in args)]
        request = [struct.pack(">i", len(fields))]
        for f in fields:
            request.append(struct.pack(">i", -1 if f is None else len(f)))
            if f is not None:
                request.append(f)
        deadline = time.monotonic() + timeout
        self.calls += 1
        try:
            self.sock.settimeout(timeout)
            self.sock.sendall(b"".join(request))
            code, left, out_len = struct.unpack(">iii", _recv_exact(self.sock, 12, deadline))
            out = _recv_exact(self.sock, out_len, deadline)
            (err_len,) = struct.unpack(">i", _recv_exact(self.sock, 4, deadline))
            err = _recv_exact(self.sock, err_len, deadline)
        except TimeoutError:
            self.kill()
            raise TimeoutError from None
        except (EOFError, OSError) as exc:
            self.kill()
            raise ToolServerDied(f"the tool server (pid {self.pid}) ended during "
                                 f"{tool_class} {' '.join(args)}: {exc!r}\n{self.log_tail()}") \
                from None
        self.left_threads = left
        return code, out, err

    @property
    def worn(self) -> bool:
        return (self.calls >= TOOL_SERVER_MAX_CALLS
                or self.left_threads > TOOL_SERVER_MAX_LEFT_THREADS)

    def stop(self) -> None:
        """Closing the socket ends the server; killed by its PID if it does not end in 5 s."""
        with contextlib.suppress(OSError, subprocess.TimeoutExpired, AttributeError):
            self.sock.close()
            self.proc.wait(timeout=5)
        self.kill()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        sock = getattr(self, "sock", None)
        if sock is not None:
            sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)


# One server per process, one call at a time: two calls that run together (BrokerPair's, one
# per broker) wait for each other (each takes 0.02-0.3 s) rather than run in two JVMs, because
# some of the tools' output follows identity hash codes, which differ between two JVMs but not
# between two calls in one (kafka-acls --help lists the operations from a HashSet of enum
# constants: forks agree, as each JVM starts alike; two servers with different pasts did not).
_server_lock = threading.Lock()
_server: ToolServer | None = None
_server_owner = os.getpid()


@atexit.register
def stop_tool_servers() -> None:
    """This process's tool server, stopped (at interpreter exit, or by a test)."""
    global _server
    if _server_owner != os.getpid():
        return
    server, _server = _server, None
    if server is not None:
        server.stop()


def tool_server_pids() -> list[int]:
    """The PID of this process's running tool server, if any."""
    server = _server
    return [server.pid] if server is not None and server.proc.poll() is None else []


def _decode(data: bytes) -> str:
    """As subprocess.run(text=True) decodes a child's output."""
    return data.decode(locale.getpreferredencoding(False)).replace("\r\n", "\n").replace("\r", "\n")


def _run_in_server(tool_class: str, args: list[str], timeout: float,
                   input_text: str | None) -> subprocess.CompletedProcess[str]:
    global _server, _server_owner
    argv = ["java", *TOOL_JVM_OPTS, "-cp", kafka_classpath(), tool_class, *args]
    started = time.monotonic()
    if not _server_lock.acquire(timeout=timeout):
        raise subprocess.TimeoutExpired(argv, timeout)
    try:
        if _server_owner != os.getpid():  # a forked child: the server is its parent's
            _server, _server_owner = None, os.getpid()
        if _server is not None and (_server.worn or _server.proc.poll() is not None
                                    or _server.cwd != os.getcwd()):
            _server.stop()
            _server = None
        if _server is None:
            _server = ToolServer()
        server = _server
        try:
            code, out, err = server.call(tool_class, args,
                                         max(0.1, timeout - (time.monotonic() - started)),
                                         input_text)
        except TimeoutError:
            _server = None  # killed by call()
            raise subprocess.TimeoutExpired(argv, timeout) from None
        except BaseException:
            _server = None
            server.kill()
            raise
    finally:
        _server_lock.release()
    return subprocess.CompletedProcess(argv, code, _decode(out), _decode(err))


# Kafka's tool classes, by the name of the script that runs each.
TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-streams-groups": "org.apache.kafka.tools.streams.StreamsGroupCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-dump-log": "org.apache.kafka.tools.DumpLogSegments",
    "kafka-delegation-tokens": "org.apache.kafka.tools.DelegationTokenCommand",
    "kafka-client-metrics": "org.apache.kafka.tools.ClientMetricsCommand",
    "kafka-storage": "kafka.tools.StorageTool",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
}


def tool(script: str, *args: str, timeout: float = 120.0,
         input_text: str | None = None) -> subprocess.CompletedProcess[str]:
    """`tool("kafka-topics", "--bootstrap-server", b, "--list")`, like the script of that name."""
    return run_tool(TOOLS[script], *args, timeout=timeout, input_text=input_text)


def random_cluster_id() -> str:
    proc = tool("kafka-storage", "random-uuid", timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(f"kafka-storage random-uuid failed: {proc.stderr}")
    return proc.stdout.strip().splitlines()[-1]


class KafkaNode:
    """One Kafka 4.4 KRaft node (broker and controller), on free loopback ports."""

    def __init__(self, data_dir: Path, node_id: int = 1, port: int | None = None,
                 controller_port: int | None = None, overrides: Mapping[str, str] | None = None,
                 listeners: Mapping[str, tuple[str, int]] | None = None,
                 jvm_opts: Sequence[str] = ()) -> None:
        """`listeners`: extra client listeners, NAME -> (security protocol, port);
        `jvm_opts`: added to the broker's JVM options (system properties such as
        org.apache.kafka.sasl.oauthbearer.allowed.urls)."""
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

    def properties(self) -> dict[str, str]:
        listeners = [f"PLAINTEXT://127.0.0.1:{self.port}", f"CONTROLLER://127.0.0.1:{self.controller_port}"]
        advertised = [f"PLAINTEXT://127.0.0.1:{self.port}"]
        protocol_map = ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"]
        for name, (protocol, port) in self.extra_listeners.items():
            listeners.append(f"{name}://127.0.0.1:{port}")
            advertised.append(f"{name}://127.0.0.1:{port}")
            protocol_map.append(f"{name}:{protocol}")
        props = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "listeners": ",".join(listeners),
            "advertised.listeners": ",".join(advertised),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": ",".join(protocol_map),
            "log.dirs": str(self.data_dir / "data"),
            # Kafka's sample server.properties for a single node: internal topics at RF 1.
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
        }
        if self.quorum_voters is not None:
            props["controller.quorum.voters"] = self.quorum_voters
        else:
            props["controller.quorum.bootstrap.servers"] = self.controller_bootstrap
        props.update(self.overrides)
        return props

    def format(self, cluster_id: str, standalone: bool = True) -> None:
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        args = ["format", "-t", cluster_id, "-c", str(self.config_path)]
        if standalone:
            args.append("--standalone")
        proc = tool("kafka-storage", *args, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed:\n{proc.stdout}\n{proc.stderr}")
        self.formatted = True

    def start(self) -> None:
        if self.running:
            raise RuntimeError(f"kafka node pid {self.pid} is already running")
        if not self.formatted:
            self.format(random_cluster_id())
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in _reap
        self._proc = subprocess.Popen(
            ["java", *BROKER_JVM_OPTS, *self.jvm_opts,
             "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
             "-cp", kafka_classpath(), "kafka.Kafka", str(self.config_path)],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, cwd=self.data_dir)

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Until the node logs that it started and its client port accepts connections."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                raise RuntimeError(f"kafka node exited before it was ready\n{self.log_tail()}")
            if tcp_connects("127.0.0.1", self.port) and "Kafka Server started" in self._log_text():
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

    def __init__(self, data_dir: Path, size: int = 3,
                 overrides: Mapping[str, str] | None = None) -> None:
        self.nodes = [KafkaNode(Path(data_dir) / f"kafka-{i}", node_id=i, overrides=overrides)
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

    def start(self, timeout: float = CLUSTER_READY_TIMEOUT_S) -> None:
        """Format and start the nodes; wait until every one is ready, within one deadline
        for the three (a node is ready once the quorum has elected a leader and it has
        registered, so the three get ready together)."""
        cluster_id = random_cluster_id()
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
