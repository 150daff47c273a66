"""Apache Kafka 4.4 as the tests' reference: its jars, its tools, and real Kafka nodes.

The jars, `run_java`, the nodes and the cluster are broker/testing/kafka_ref.py's (the
benchmarks use them too, and bench/ imports nothing of tests/); this module re-exports them
and adds the tests' side: Kafka's tools run in one kept JVM (the tool server), which the
nodes here also use to format their storage, and the compiled Java test programs.

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
import locale
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from broker.testing.kafka_ref import (
    BROKER_JVM_OPTS,
    JAVA_DIR,
    KAFKA_VERSION,
    LIBS_DIR,
    PERF_TOOL_JVM_OPTS,
    POM,
    READY_TIMEOUT_S,
    STOP_TIMEOUT_S,
    TOOL_JVM_OPTS,
    KafkaUnavailable,
    kafka_classpath,
    locked,
    run_java,
)
from broker.testing.kafka_ref import KafkaCluster as _KafkaCluster
from broker.testing.kafka_ref import KafkaNode as _KafkaNode

__all__ = [
    "BROKER_JVM_OPTS", "JAVA_DIR", "KAFKA_VERSION", "LIBS_DIR", "PERF_TOOL_JVM_OPTS", "POM",
    "READY_TIMEOUT_S", "STOP_TIMEOUT_S", "TOOLS", "TOOL_JVM_OPTS", "KafkaCluster", "KafkaNode",
    "KafkaUnavailable", "java_program_classpath", "kafka_classpath", "random_cluster_id",
    "run_java", "run_program", "run_tool", "started_kafka", "tool", "tool_server_pids",
]

CLASSES_DIR = JAVA_DIR / "target" / "classes"
SOURCES_DIR = JAVA_DIR / "src"


def java_program_classpath() -> str:
    """Kafka's jars plus the compiled test programs of tests/java/src (compiled when stale)."""
    cp = kafka_classpath()
    sources = sorted(SOURCES_DIR.rglob("*.java"))
    stamp = CLASSES_DIR / ".compiled"
    newest = max((s.stat().st_mtime for s in sources), default=0.0)
    if sources and (not stamp.exists() or stamp.stat().st_mtime < newest):
        with locked(JAVA_DIR / "target" / ".compile.lock"):
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


# The tests' reference nodes compare behaviour, not speed: C1 only and the serial collector
# cost ~35% less CPU to start and idle (2.6-3.7 s to ready and 2.6% of a core idle, against
# 4.6-4.9 s and 4.0% with kafka-server-start.sh's G1 and C2, 2026-12-03), in a suite whose
# first part is CPU-bound. The benchmarks keep Kafka's own settings.
TEST_BROKER_JVM_OPTS = ["-Xmx1G", "-Xms256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                        "-Xshare:auto", "-Djava.awt.headless=true"]


class KafkaNode(_KafkaNode):
    """broker/testing's KafkaNode, formatted through this process's tool server, on a JVM
    set for the tests (`TEST_BROKER_JVM_OPTS`)."""

    broker_jvm_opts = TEST_BROKER_JVM_OPTS

    def storage_tool(self, *args: str) -> subprocess.CompletedProcess[str]:
        return tool("kafka-storage", *args, timeout=120)


def started_kafka(data_dir: Path, **kwargs: object) -> KafkaNode:
    node = KafkaNode(data_dir, **kwargs)  # type: ignore[arg-type]
    node.start()
    try:
        node.wait_ready()
    except BaseException:
        node.close()
        raise
    return node


class KafkaCluster(_KafkaCluster):
    """broker/testing's KafkaCluster of this module's nodes, its cluster id from the tool."""

    node_class = KafkaNode

    def new_cluster_id(self) -> str:
        return random_cluster_id()
