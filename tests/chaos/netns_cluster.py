"""A real Skiff cluster whose nodes each run in their own network namespace.

    net = TestNetwork.create()
    c = NetnsCluster(tmp_path, net, controllers=3, brokers=3)
    c.start()                       # as broker/testing/cluster.py, inside `ip netns exec`
    c.host_of(4)                    # "n4": the name to use with net.partition(...)
    c.in_client(fn, *args)          # run fn on the thread that lives in the client namespace
    c.quorum_views()                # {controller: (raft leader, raft epoch)} as each reports
    c.partition_views("t")          # {broker: {partition: (leader, leader epoch)}}

Node `i` is host `n<i>` at 10.213.0.(10+i), listening on 9092 (clients), 9093
(controller) and 9094 (admin gRPC) of that address only. The test process itself stays
in the root namespace, which has no route to the test subnet; every client (librdkafka
producers, consumers, admin clients, DescribeQuorum and Metadata probes) runs on one
thread that joined a client namespace (`client`, 10.213.0.2) with setns(2), or on
threads that thread started (a thread's network namespace is inherited by the threads it
creates, librdkafka's included). The client namespace is never cut off by the faults
unless a test says so: it sees every node, as a client next to the cluster would.

Processes are spawned by the parent class (kill, pause and stop by PID); `ip netns exec`
replaces itself with the node's python, so the PID is the node's.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from broker.testing.cluster import START_TIMEOUT_S, Cluster, ClusterNode
from tests.chaos.netns import TestNetwork

T = TypeVar("T")
CLONE_NEWNET = 0x40000000
CLIENT = "client"
BROKER_PORT, CONTROLLER_PORT, ADMIN_PORT = 9092, 9093, 9094


def _join_netns(netns: str) -> None:
    """setns(2) the calling thread (only it) into the named network namespace."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/run/netns/{netns}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns into {netns}: {os.strerror(err)}")
    finally:
        os.close(fd)


class NetnsCluster(Cluster):
    def __init__(self, tmp_path: Path, net: TestNetwork, controllers: int = 3,
                 brokers: int = 3, combined: bool = False,
                 overrides: Mapping[str, str] | None = None) -> None:
        super().__init__(tmp_path, controllers, brokers, combined, overrides)
        self.net = net
        for node_id, node in self.nodes.items():
            host = net.add_host(self.host_of(node_id), 10 + node_id)
            node.host = host.address
            node.client_port = BROKER_PORT if node.is_broker else None
            node.controller_port = CONTROLLER_PORT if node.is_controller else None
            node.admin_port = ADMIN_PORT
        client = net.add_host(CLIENT, 2)
        self._inside = threading.local()  # .yes on threads that live in the client namespace
        self._client = ThreadPoolExecutor(1, thread_name_prefix="netns-client",
                                          initializer=self._init_client, initargs=(client.netns,))

    def _init_client(self, netns: str) -> None:
        _join_netns(netns)
        self._inside.yes = True

    @staticmethod
    def host_of(node_id: int) -> str:
        return f"n{node_id}"

    def command_prefix(self, node: ClusterNode) -> list[str]:
        # SKIFF_* variables are configuration to a node: the harness's own are not for it
        unset = [f"--unset={k}" for k in os.environ if k.startswith("SKIFF_PARTITION_")]
        return [*self.net.hosts[self.host_of(node.node_id)].exec_prefix(),
                *(["env", *unset] if unset else [])]

    def sockets(self) -> str:
        """`ss -tnoi` in every node's namespace: TCP connections with their timers,
        retransmissions and queues (for failure reports)."""
        out = []
        for node_id in self.nodes:
            try:
                text = self.net.run_in(self.host_of(node_id), ["ss", "-tnoi"])
            except (RuntimeError, OSError) as exc:
                text = repr(exc)
            out.append(f"--- sockets of node {node_id} ---\n{text.strip()}")
        return "\n".join(out)

    def in_client(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """fn(*args, **kwargs) on the client namespace's thread (directly when already on it)."""
        if getattr(self._inside, "yes", False):
            return fn(*args, **kwargs)
        return self._client.submit(fn, *args, **kwargs).result()

    def start_client_thread(self, target: Callable[[], None], name: str) -> threading.Thread:
        """A daemon thread running `target` in the client namespace (started by the client
        thread, whose namespace it inherits); in_client calls on it run directly."""
        def body() -> None:
            self._inside.yes = True
            target()

        def spawn() -> threading.Thread:
            t = threading.Thread(target=body, name=name, daemon=True)
            t.start()
            return t
        return self.in_client(spawn)

    # ---- the parent's client-side calls, moved into the client namespace ------------------

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> None:
        self.in_client(super().wait_ready, timeout)

    def active_controller(self, timeout: float = 2.0) -> int:
        return self.in_client(super().active_controller, timeout)

    def admin(self, broker_id: int) -> Any:
        return self.in_client(super().admin, broker_id)

    def metadata(self, broker_id: int, timeout: float = 5.0) -> Any:
        return self.in_client(super().metadata, broker_id, timeout)

    def describe_cluster(self, node_id: int | None = None, timeout: float = 5.0) -> Any:
        raise NotImplementedError("gRPC runs its own threads outside the client namespace; "
                                  "use in_client with a Kafka-protocol probe instead")

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            self._admins.clear()
            self._client.shutdown(wait=True, cancel_futures=True)

    # ---- probes: what each node says about leaders and epochs ------------------------------

    def quorum_views(self, timeout: float = 1.0) -> dict[int, tuple[int, int]]:
        """{controller id: (Raft leader id, Raft epoch)} as each running controller answers
        DescribeQuorum; nodes that do not answer in time are left out."""
        targets = [(i, n.host, n.controller_port) for i, n in self.nodes.items()
                   if n.is_controller and n.running and n.controller_port is not None]
        return self.in_client(lambda: asyncio.run(_gather(
            {i: _describe_quorum(h, p, timeout) for i, h, p in targets})))

    def partition_views(self, topic: str, timeout: float = 1.0
                        ) -> dict[int, dict[int, tuple[int, int]]]:
        """{broker id: {partition: (leader id, leader epoch)}} from a Metadata v9 request to
        each running broker (its own metadata image), left out when it does not answer."""
        targets = [(i, n.host, n.client_port) for i, n in self.nodes.items()
                   if n.is_broker and n.running and n.client_port is not None]
        return self.in_client(lambda: asyncio.run(_gather(
            {i: _metadata_leaders(h, p, topic, timeout) for i, h, p in targets})))


async def _gather(coros: Mapping[int, Any]) -> dict[int, Any]:
    keys = list(coros)
    results = await asyncio.gather(*coros.values(), return_exceptions=True)
    return {k: r for k, r in zip(keys, results, strict=True)
            if not isinstance(r, BaseException) and r is not None}


async def _describe_quorum(host: str, port: int, timeout_s: float) -> tuple[int, int] | None:
    from kio.schema.describe_quorum.v0 import request as dq

    from broker.protocol.transport import KafkaConnection

    q: Any = dq
    conn = KafkaConnection(host, port, "skiff-partition-probe")
    try:
        resp = await conn.request(55, 0, q.DescribeQuorumRequest(topics=(
            q.TopicData(topic_name="__cluster_metadata",
                        partitions=(q.PartitionData(partition_index=0),)),)), timeout_s)
    finally:
        await conn.close()
    part = resp.topics[0].partitions[0]
    if int(part.error_code) != 0:
        return None
    return int(part.leader_id), int(part.leader_epoch)


async def _metadata_leaders(host: str, port: int, topic: str, timeout_s: float
                            ) -> dict[int, tuple[int, int]] | None:
    from kio.schema.metadata.v9 import request as mr

    from broker.protocol.transport import KafkaConnection

    m: Any = mr
    conn = KafkaConnection(host, port, "skiff-partition-probe")
    try:
        resp = await conn.request(3, 9, m.MetadataRequest(
            topics=(m.MetadataRequestTopic(name=topic),), allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False), timeout_s)
    finally:
        await conn.close()
    for t in resp.topics:
        if t.name == topic and int(t.error_code) == 0:
            return {int(p.partition_index): (int(p.leader_id), int(p.leader_epoch))
                    for p in t.partitions if int(p.error_code) == 0}
    return None
