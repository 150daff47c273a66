"""A real Skiff cluster of OS processes on 127.0.0.1, for integration and chaos tests.

    cluster = Cluster(tmp_path, controllers=3, brokers=3)        # or combined=True
    cluster.start()                        # format, spawn, wait until every broker serves
    cluster.bootstrap_servers              # "127.0.0.1:p1,127.0.0.1:p2,..." (all brokers)
    cluster.live_bootstrap()               # only the running brokers
    cluster.broker_ids, cluster.controller_ids, cluster.nodes[4].pid / .log_path / .running
    cluster.kill(4)                        # SIGKILL, waits for the exit, returns its status
    cluster.terminate(4)                   # SIGTERM (controlled shutdown), returns its status
    cluster.pause(4); cluster.resume(4)    # SIGSTOP / SIGCONT
    cluster.start_node(4)                  # start a stopped node again (same dirs and ports)
    cluster.restart(4, kill=False)         # terminate (or kill) + start_node + wait_ready
    cluster.wait_ready()                   # quorum has a leader; running brokers unfenced
    cluster.wait_for(pred, 10, "what")     # poll pred() until truthy (returned), bounded
    cluster.active_controller()            # the quorum leader's id (DescribeQuorum), -1
    cluster.partition_leaders("t", via=5)  # {partition: leader} from a client of broker 5
    cluster.metadata(5), cluster.admin(5)  # librdkafka Metadata / AdminClient via broker 5
    cluster.describe_cluster(node_id)      # admin gRPC DescribeCluster (epochs, states)
    cluster.admin_address(node_id)         # a node's gRPC admin address
    cluster.stop()                         # SIGTERM everything (brokers first), then SIGKILL

Node ids: dedicated controllers are 1..controllers and brokers follow
(controllers+1 .. controllers+brokers); with `combined=True` there are `controllers`
nodes 1..n, each both broker and controller, and `brokers` is ignored. Every node has its
own directory `tmp_path/node-<id>` (server.properties, data, `node.log`) and fixed free
ports, so a restarted node comes back on the same addresses. `overrides` are properties
set on every node (e.g. {"broker.session.timeout.ms": "3000"}); `node_overrides={id: {}}`
per node. Nodes run `python -m broker.cli.main server start <server.properties>` with
PYTHONPATH set to this checkout.

The storage layout is Kafka's default: `metadata.log.dir` is unset, so the metadata log
lives in the first `log.dirs` entry next to the partitions (`node.metadata_dir`). Pass
`{"metadata.log.dir": ...}` in `overrides`/`node_overrides` only in a test about it
(the SEPARATE_METADATA_DIR marker value puts it in `node-<id>/metadata`).

Only processes this object started are signalled, by their PIDs. Every wait is bounded;
failures carry the tail of every node's log. Use as a context manager, or call stop() in a
finally block.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

from broker.testing.ports import free_ports as free_ports

REPO_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 40.0
T = TypeVar("T")
# the value of `metadata.log.dir` in overrides that means "node-<id>/metadata"
SEPARATE_METADATA_DIR = "<node>/metadata"


@dataclass
class ClusterNode:
    node_id: int
    roles: tuple[str, ...]
    directory: Path
    client_port: int | None       # broker listener (None on a dedicated controller)
    controller_port: int | None   # controller listener (None on a dedicated broker)
    admin_port: int
    metrics_port: int
    host: str = "127.0.0.1"      # the address every listener of this node binds
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    _log: IO[bytes] | None = field(default=None, repr=False)

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.directory / "node.log"

    @property
    def metadata_dir(self) -> Path:
        """Where `__cluster_metadata-0` and `quorum-state`'s directory live: the first
        log dir under Kafka's default layout, `node-<id>/metadata` if a test set it."""
        separate = self.directory / "metadata"
        return separate if separate.is_dir() else self.directory / "logs"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise RuntimeError(f"node {self.node_id} is not running")
        return self.proc.pid

    @property
    def bootstrap(self) -> str:
        if self.client_port is None:
            raise ValueError(f"node {self.node_id} is not a broker")
        return f"{self.host}:{self.client_port}"

    @property
    def admin_address(self) -> str:
        return f"{self.host}:{self.admin_port}"

    @property
    def metrics_address(self) -> str:
        return f"{self.host}:{self.metrics_port}"

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return f"(node {self.node_id}: no log)"
        tail = text.splitlines()[-lines:]
        return f"--- node {self.node_id}: last {len(tail)} lines of {self.log_path} ---\n" + \
            "\n".join(tail)


class Cluster:
    def __init__(self, tmp_path: Path, controllers: int = 3, brokers: int = 3,
                 combined: bool = False, overrides: Mapping[str, str] | None = None,
                 node_overrides: Mapping[int, Mapping[str, str]] | None = None,
                 client_config: Mapping[str, str] | None = None,
                 controller_ssl: ssl.SSLContext | None = None,
                 add_scram: Sequence[str] = (), dynamic_voters: bool = False,
                 release_version: str | None = None) -> None:
        """`client_config`: librdkafka settings for the harness's own clients (e.g.
        security.protocol=ssl when the overrides secure the listeners); `controller_ssl`:
        how the harness reaches controller listeners when they are TLS.
        `dynamic_voters` (KIP-853): no controller.quorum.voters; every node finds the quorum
        through controller.quorum.bootstrap.servers (controller 1), controller 1 is formatted
        --standalone and the other controllers --no-initial-controllers: they start as
        observers until `skiff quorum add-controller` makes them voters."""
        self.dynamic_voters = dynamic_voters
        self.release_version = release_version  # `storage format --release-version`
        self.base = Path(tmp_path)
        self.client_config = dict(client_config or {})
        self.controller_ssl = controller_ssl
        self.add_scram = list(add_scram)  # `storage format --add-scram` arguments
        self.combined = combined
        self.overrides = dict(overrides or {})
        self.node_overrides = {k: dict(v) for k, v in (node_overrides or {}).items()}
        self.cluster_id = ""
        self.nodes: dict[int, ClusterNode] = {}
        specs: list[tuple[int, tuple[str, ...]]]
        if combined:
            specs = [(i, ("broker", "controller")) for i in range(1, controllers + 1)]
        else:
            specs = [(i, ("controller",)) for i in range(1, controllers + 1)]
            specs += [(controllers + j, ("broker",)) for j in range(1, brokers + 1)]
        ports = iter(free_ports(4 * len(specs)))
        for node_id, roles in specs:
            self.nodes[node_id] = ClusterNode(
                node_id, roles, self.base / f"node-{node_id}",
                client_port=next(ports) if "broker" in roles else None,
                controller_port=next(ports) if "controller" in roles else None,
                admin_port=next(ports), metrics_port=next(ports))
        self._formatted = False
        self._admins: dict[int, Any] = {}

    # ---- who is who ------------------------------------------------------------------------

    @property
    def controller_ids(self) -> list[int]:
        return [i for i, n in self.nodes.items() if n.is_controller]

    @property
    def broker_ids(self) -> list[int]:
        return [i for i, n in self.nodes.items() if n.is_broker]

    @property
    def voters(self) -> str:
        return ",".join(f"{i}@{self.nodes[i].host}:{self.nodes[i].controller_port}"
                        for i in self.controller_ids)

    @property
    def bootstrap_servers(self) -> str:
        """Every broker's client address (running or not; clients skip dead ones)."""
        return ",".join(self.nodes[i].bootstrap for i in self.broker_ids)

    def live_bootstrap(self) -> str:
        return ",".join(self.nodes[i].bootstrap for i in self.broker_ids
                        if self.nodes[i].running)

    def admin_address(self, node_id: int | None = None) -> str:
        """A node's gRPC admin address (default: the first running node)."""
        if node_id is None:
            node_id = next(i for i, n in self.nodes.items() if n.running)
        return self.nodes[node_id].admin_address

    # ---- lifecycle -------------------------------------------------------------------------

    def properties(self, node: ClusterNode) -> dict[str, str]:
        listeners = []
        if node.client_port is not None:
            listeners.append(f"PLAINTEXT://{node.host}:{node.client_port}")
        if node.controller_port is not None:
            listeners.append(f"CONTROLLER://{node.host}:{node.controller_port}")
        props = {
            "process.roles": ",".join(node.roles),
            "node.id": str(node.node_id),
            "controller.listener.names": "CONTROLLER",
            "listeners": ",".join(listeners),
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(node.directory / "logs"),
            "admin.listeners": node.admin_address,
            "admin.allow.unauthenticated": "loopback",
            "metrics.listeners": node.metrics_address,
        }
        if self.dynamic_voters:
            first = self.nodes[self.controller_ids[0]]
            props["controller.quorum.bootstrap.servers"] = f"{first.host}:{first.controller_port}"
        else:
            props["controller.quorum.voters"] = self.voters
        if node.is_broker:
            props["advertised.listeners"] = f"PLAINTEXT://{node.host}:{node.client_port}"
            props["inter.broker.listener.name"] = "PLAINTEXT"
        props.update(self.overrides)
        props.update(self.node_overrides.get(node.node_id, {}))
        if props.get("metadata.log.dir") == SEPARATE_METADATA_DIR:
            props["metadata.log.dir"] = str(node.directory / "metadata")
        return props

    def format(self) -> None:
        """Write every node's properties file and format its storage (one cluster id)."""
        from broker.config import load_config
        from broker.metadata.storage import format_storage
        from broker.protocol.kafka_uuid import random_kafka_uuid

        self.cluster_id = random_kafka_uuid()
        for node in self.nodes.values():
            node.directory.mkdir(parents=True, exist_ok=True)
            node.config_path.write_text(
                "".join(f"{k}={v}\n" for k, v in self.properties(node).items()))
            cfg = load_config(str(node.config_path), [], {})
            dynamic = self.dynamic_voters and node.is_controller
            first = dynamic and node.node_id == self.controller_ids[0]
            format_storage(cfg, self.cluster_id, add_scram=self.add_scram,
                           standalone=first, no_initial_controllers=dynamic and not first,
                           release_version=self.release_version)
        self._formatted = True

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Format (first time), spawn every node, and wait until every broker is registered,
        unfenced and serving Metadata that lists all brokers."""
        if not self._formatted:
            self.format()
        for node_id in self.nodes:
            if not self.nodes[node_id].running:
                self.start_node(node_id)
        self.wait_ready(timeout)

    def start_node(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.running:
            raise RuntimeError(f"node {node_id} (pid {node.pid}) is already running")
        env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
        env.pop("SKIFF_TEST_BOOTSTRAP", None)
        profile_dir = os.environ.get("SKIFF_CLUSTER_CPROFILE_DIR")  # benchmarks, by hand
        prefix = ([sys.executable, "-m", "cProfile", "-o",
                   f"{profile_dir}/node{node_id}.{node.starts}.prof"]
                  if profile_dir else [sys.executable])
        cmd = [*self.command_prefix(node), *prefix,
               "-m", "broker.cli.main", "server", "start", str(node.config_path)]
        node._log = open(node.log_path, "ab")  # noqa: SIM115 - closed in _reap
        node._log.write(f"\n=== start #{node.starts + 1}: {' '.join(cmd)}\n".encode())
        node._log.flush()
        node.proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL,
                                     stdout=node._log, stderr=subprocess.STDOUT)
        node.starts += 1

    def command_prefix(self, node: ClusterNode) -> list[str]:
        """What a node's command runs under (e.g. `ip netns exec <ns>`); nothing here."""
        return []

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> None:
        """Until the quorum has a leader and every running broker serves Metadata listing
        exactly the running brokers (all registered and unfenced); nodes that are down are
        not waited for."""
        def ready() -> bool:
            self._check_alive()
            running = {i for i in self.broker_ids if self.nodes[i].running}
            # A broker opens its client listener only once registered and unfenced; the
            # Metadata check alone could be answered by another broker (librdkafka asks any
            # it knows) while a restarted one still waits for its old session to expire.
            return (self.active_controller() >= 0
                    and all(_accepts(self.nodes[i].bootstrap) for i in running)
                    and all(self.metadata_brokers(i, timeout=2.0) == running
                            for i in running))

        self.wait_for(ready, timeout, "the running brokers registered and unfenced")

    def kill(self, node_id: int) -> int:
        """SIGKILL; returns the exit status (-9)."""
        return self._signal_and_wait(node_id, signal.SIGKILL, 10.0)

    def terminate(self, node_id: int, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM (a broker shuts down in a controlled way first); returns the exit status."""
        return self._signal_and_wait(node_id, signal.SIGTERM, timeout)

    def pause(self, node_id: int) -> None:
        os.kill(self.nodes[node_id].pid, signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        os.kill(self.nodes[node_id].pid, signal.SIGCONT)

    def restart(self, node_id: int, *, kill: bool = False, wait: bool = True,
                timeout: float = START_TIMEOUT_S) -> None:
        """Stop the node if running (SIGTERM, or SIGKILL with kill=True), start it again on
        the same directories and ports; with `wait`, until the cluster is ready again."""
        if self.nodes[node_id].running:
            if kill:
                self.kill(node_id)
            else:
                self.terminate(node_id)
        self.start_node(node_id)
        if wait:
            self.wait_ready(timeout)

    def stop(self) -> None:
        """Stop every running node (SIGCONT first, in case one is paused, then SIGTERM):
        dedicated brokers together first, while the controllers can still answer their
        controlled shutdown, then the controllers; combined nodes one at a time, so the
        quorum keeps a majority for each one's controlled shutdown. Whatever is still up
        after STOP_TIMEOUT_S is killed."""
        brokers = [n for n in self.nodes.values() if n.running and not n.is_controller]
        rest = [n for n in self.nodes.values() if n.running and n.is_controller]
        self._stop_together(brokers)
        if self.combined:
            for node in rest:
                self._stop_together([node])
        else:
            self._stop_together(rest)

    def _stop_together(self, nodes: list[ClusterNode]) -> None:
        for node in nodes:
            assert node.proc is not None
            with _suppress_lookup():
                os.kill(node.proc.pid, signal.SIGCONT)
                node.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for node in nodes:
            assert node.proc is not None
            try:
                node.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                node.proc.kill()
                node.proc.wait(timeout=10)
            self._reap(node)

    def __enter__(self) -> Cluster:
        try:
            self.start()
        except BaseException:
            self.stop()  # __exit__ does not run when __enter__ raises: no node is left behind
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- observing -------------------------------------------------------------------------

    def wait_for(self, predicate: Callable[[], T], timeout: float, what: str,
                 interval: float = 0.05) -> T:
        """Poll `predicate` until it returns a truthy value (returned), bounded by `timeout`."""
        deadline = time.monotonic() + timeout
        last_error: Exception | None = None
        while True:
            try:
                value = predicate()
                if value:
                    return value
            except AssertionError:
                raise
            except Exception as exc:  # a node between states: try again
                last_error = exc
            if time.monotonic() >= deadline:
                raise TimeoutError(f"not within {timeout:.1f}s: {what}"
                                   f"{f' (last error: {last_error!r})' if last_error else ''}"
                                   f"\n{self.log_tails()}")
            time.sleep(interval)

    def admin(self, broker_id: int) -> Any:
        """A librdkafka AdminClient bootstrapped from one broker only (kept and reused)."""
        from confluent_kafka.admin import AdminClient

        client = self._admins.get(broker_id)
        if client is None:
            client = self._admins[broker_id] = AdminClient({
                "bootstrap.servers": self.nodes[broker_id].bootstrap, "log_level": 0,
                **self.client_config})
        return client

    def metadata(self, broker_id: int, timeout: float = 5.0) -> Any:
        """librdkafka's Metadata (ClusterMetadata) through the client bootstrapped from
        `broker_id` (librdkafka may ask any broker it has learnt of)."""
        return self.admin(broker_id).list_topics(timeout=timeout)

    def metadata_brokers(self, broker_id: int, timeout: float = 5.0) -> set[int]:
        return set(self.metadata(broker_id, timeout).brokers)

    def partition_leaders(self, topic: str, via: int | None = None,
                          timeout: float = 3.0) -> dict[int, int]:
        """partition -> leader id (-1: none) of `topic` in the Metadata a client of broker
        `via` (default: the first running broker) gets; {} while the topic is unknown."""
        if via is None:
            via = next(i for i in self.broker_ids if self.nodes[i].running)
        t = self.metadata(via, timeout).topics.get(topic)
        if t is None or t.error is not None:
            return {}
        return {p: pm.leader for p, pm in t.partitions.items()}

    def describe_cluster(self, node_id: int | None = None, timeout: float = 5.0) -> Any:
        """The admin gRPC DescribeCluster (registrations with epochs and fenced state)."""
        import grpc

        from broker.admin import pb

        with grpc.insecure_channel(self.admin_address(node_id)) as channel:
            stub = pb.cluster_grpc.ClusterServiceStub(channel)
            return stub.DescribeCluster(pb.cluster.DescribeClusterRequest(), timeout=timeout)

    def active_controller(self, timeout: float = 2.0) -> int:
        """The metadata quorum's leader as a running controller reports it (DescribeQuorum
        on its controller listener); -1 when none knows one."""
        for node_id in self.controller_ids:
            node = self.nodes[node_id]
            if not node.running or node.controller_port is None:
                continue
            try:
                leader = asyncio.run(_describe_quorum_leader(node.host, node.controller_port,
                                                             timeout, self.controller_ssl))
            except Exception:
                continue
            if leader >= 0:
                return leader
        return -1

    def log_tails(self, lines: int = 25) -> str:
        return "\n".join(n.log_tail(lines) for n in self.nodes.values())

    # ---- internals ------------------------------------------------------------------------

    def _check_alive(self) -> None:
        for node in self.nodes.values():
            if node.proc is not None and node.proc.poll() is not None:
                raise AssertionError(f"node {node.node_id} exited with {node.proc.returncode}"
                                     f"\n{node.log_tail()}")

    def _signal_and_wait(self, node_id: int, sig: int, timeout: float) -> int:
        node = self.nodes[node_id]
        proc = node.proc
        if proc is None:
            raise RuntimeError(f"node {node_id} is not running")
        if proc.poll() is None:
            if sig != signal.SIGKILL:
                os.kill(proc.pid, signal.SIGCONT)
            proc.send_signal(sig)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
            self._reap(node)
            raise TimeoutError(f"node {node_id} ignored signal {sig} for {timeout:.0f}s"
                               f"\n{node.log_tail()}") from None
        self._reap(node)
        return code

    @staticmethod
    def _reap(node: ClusterNode) -> None:
        node.proc = None
        if node._log is not None:
            node._log.close()
            node._log = None


class _suppress_lookup:
    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, *rest: object) -> bool:
        return exc_type is not None and issubclass(exc_type, ProcessLookupError)


def _accepts(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=0.5):
            return True
    except OSError:
        return False


async def _describe_quorum_leader(host: str, port: int, timeout_s: float,
                                  tls: ssl.SSLContext | None = None) -> int:
    from kio.schema.describe_quorum.v0 import request as dq

    from broker.protocol.transport import ConnectionSecurity, KafkaConnection

    q: Any = dq
    conn = KafkaConnection(host, port, "skiff-test",
                           security=None if tls is None else ConnectionSecurity(ssl=tls))
    try:
        resp = await conn.request(55, 0, q.DescribeQuorumRequest(topics=(
            q.TopicData(topic_name="__cluster_metadata",
                        partitions=(q.PartitionData(partition_index=0),)),)), timeout_s)
    finally:
        await conn.close()
    part = resp.topics[0].partitions[0]
    return int(part.leader_id) if int(part.error_code) == 0 else -1
