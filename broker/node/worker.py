"""A worker process of a broker with several (`skiff.broker.workers`, broker/node/shards.py):
`python -m broker.node.worker`, started by the node process (broker/node/workers.py), which
writes the node's config and this worker's place on its stdin.

It owns the logs, producer state and replication of its share of the partitions: its
LogManager loads only those (with its own checkpoint files), its ReplicaManager and replica
fetchers serve and follow only those. It follows the metadata the node streams to it rather
than the quorum, and sends its ISR changes through the node, whose broker epoch they carry.
It serves the client connections the node hands it (broker/node/workers.py), Produce and
Fetch itself, handing other workers' partitions to them (broker/node/shard_routing.py);
ListOffsets and OffsetForLeaderEpoch are split by owner, and every other request goes whole
to the node process. It stops cleanly on SIGTERM, and at once when the node is gone.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import pickle
import signal
import socket
import sys
import time
from typing import Any

import structlog
from kio.schema.errors import ErrorCode

from broker.config import NodeConfig
from broker.controller import AssignReplicasToDirsRequest
from broker.controller.requests import (
    AlterPartitionReply,
    AlterPartitionRequest,
    AssignReplicasToDirsReply,
)
from broker.errors import KafkaError
from broker.handlers import BROKER_HANDLERS, broker_dispatcher
from broker.handlers._quotas import now_ms as quota_clock_ms
from broker.log import LogManager
from broker.metadata.image import MetadataImage
from broker.metadata.publisher import MetadataPublisher
from broker.metadata.snapshot import decode_snapshot
from broker.metrics.collectors import (
    fetcher_families,
    log_flush_families,
    network_families,
    quota_families,
    replica_families,
    request_families,
    topic_families,
)
from broker.metrics.exporter import METRICS_LISTENERS_KEY, parse_metrics_listeners
from broker.metrics.merge import FamilyValues, family_values, process_families
from broker.metrics.stats import NodeStats
from broker.node import (
    MetadataCredentials,
    assign_dirs_loop,
    cordoned_log_dirs,
    dynamic_broker_configs,
    quotas_for,
    server_config_for,
)
from broker.node.shard_channel import ShardChannelServer, ShardPeer
from broker.node.shard_routing import (
    ShardOps,
    ShardRoutes,
    sharded_dispatcher,
    transactional_to_node,
)
from broker.node.shards import ShardLayout
from broker.node.workers import (
    ConnectionReceiver,
    ShardPeers,
    hand_off_path,
    share_quota_usage,
    socket_path,
)
from broker.protocol.api import BROKER_APIS, ApiTable, floors_table
from broker.replication import (
    ClusterView,
    ReplicaFetcherManager,
    ReplicaManager,
    ReplicationSettings,
)
from broker.replication.fetcher import secured_connect
from broker.replication.sync import ReplicaSync, log_config_for
from broker.security.client import inter_broker_security
from broker.server import ListenerSpec, Server, advertised_apis
from broker.server.dispatch import BoundDispatcher
from broker.util.tasks import ServiceTasks

log = structlog.get_logger(__name__)
PRODUCE, FETCH = 0, 1


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class Worker:
    """One worker: the services its Produce, Fetch, ListOffsets and OffsetForLeaderEpoch
    handlers read (broker/handlers/services.py's BrokerServices)."""

    def __init__(self, config: NodeConfig, layout: ShardLayout, directory: str) -> None:
        self.config = config
        self.layout = layout
        self.node_id = config.node_id
        self.cluster_id = ""
        self.broker_epoch = -1  # the node's; ISR changes go through it
        self.directory = directory
        self.clock = wall_clock_ms
        self.tasks = ServiceTasks(f"worker-{layout.index}")
        self.quotas = quotas_for(config)
        self.txn_coordinator = None  # transactional produce goes to the node
        self.publisher = MetadataPublisher("")
        self.credentials = MetadataCredentials(config, lambda: self.metadata)
        self.peers = ShardPeers(layout, directory, on_event=self._on_event)
        self._has_metadata = asyncio.Event()
        self.logs: LogManager
        self.replicas: ReplicaManager
        self.server: Server | None = None
        self.channel: ShardChannelServer | None = None
        self.fetchers: ReplicaFetcherManager | None = None
        self.replica_sync: ReplicaSync | None = None
        self.receiver: ConnectionReceiver | None = None
        # counted when the node serves metrics, which gathers this worker's at each scrape
        self.stats: NodeStats | None = None
        if parse_metrics_listeners(config[METRICS_LISTENERS_KEY]):
            self.stats = NodeStats()

    @property
    def metadata(self) -> MetadataImage:
        return self.publisher.image

    @property
    def controller(self) -> Any:
        raise KafkaError(ErrorCode.unknown_server_error,
                         "a worker reaches the controller through the node process")

    def _on_event(self, index: int, event: tuple[Any, ...]) -> None:
        if index != 0:
            return
        kind = event[0]
        if kind == "snapshot":
            image = decode_snapshot(event[1])
            self.cluster_id = image.cluster_id
            self.publisher.load_snapshot(image)
            self._has_metadata.set()
        elif kind == "batch":
            self.publisher.apply_committed(event[1], event[2], event[3], event[4])
        elif kind == "advance":
            self.publisher.advance_offset(event[1], event[2], event[3])

    async def _assign_dirs(self, request: AssignReplicasToDirsRequest
                           ) -> AssignReplicasToDirsReply:
        channel = self.peers.channel_of(0)
        if channel is None:
            raise KafkaError(ErrorCode.not_controller, "the node process is not connected")
        reply: AssignReplicasToDirsReply = await channel.call("assign_replicas_to_dirs",
                                                              request)
        return reply

    async def _alter_partition(self, request: AlterPartitionRequest) -> AlterPartitionReply:
        channel = self.peers.channel_of(0)
        if channel is None:
            raise KafkaError(ErrorCode.not_controller, "the node process is not connected")
        reply: AlterPartitionReply = await channel.call("alter_partition", request)
        return reply

    def _listener_specs(self, listeners: list[tuple[str, str, int]]
                        ) -> tuple[list[ListenerSpec], dict[str, tuple[BoundDispatcher, ApiTable]]]:
        local = broker_dispatcher(BROKER_HANDLERS).bind(self)
        dispatcher = sharded_dispatcher(self.layout, self.peers.channel_of, local,
                                        frozenset({PRODUCE, FETCH}))
        produce = dispatcher.get(PRODUCE)
        assert produce is not None
        entries = {key: e for key in dispatcher.api_keys()
                   if (e := dispatcher.get(key)) is not None}
        entries[PRODUCE] = transactional_to_node(self.peers.channel_of, produce)
        dispatcher = BoundDispatcher(entries)
        apis = floors_table(BROKER_APIS, self.config["skiff.min.api.versions"])
        specs = [self.credentials.listener(name, host, port, apis, dispatcher)
                 for name, host, port in listeners]
        # the other workers' hand-overs (split or asked of every worker) run the own handlers
        return specs, {spec.name: (local, advertised_apis(spec)) for spec in specs}

    async def run(self, listeners: list[tuple[str, str, int]], stop: asyncio.Event) -> None:
        cfg, layout = self.config, self.layout
        self.logs = LogManager(
            list(cfg.log_dirs), log_config_for(cfg, {}), self.clock,
            retention_check_interval_ms=cfg["log.retention.check.interval.ms"],
            owns=layout.owns, file_suffix=layout.file_suffix)
        self.logs.load()
        self.logs.cordoned = lambda: cordoned_log_dirs(
            cfg, dynamic_broker_configs(self.metadata, self.node_id), self.logs.log_dirs)
        self.logs.start()
        cluster = ClusterView(lambda: self.metadata, cfg.inter_broker_listener_name)
        self.replicas = replicas = ReplicaManager(
            self.node_id, self.logs, self.clock, settings=ReplicationSettings.from_config(cfg),
            alter_partition=self._alter_partition, broker_epoch=lambda: self.broker_epoch,
            rack_of=cluster.rack_of, isr_eligible=cluster.isr_eligible)
        replicas.shard_router = ShardRoutes(layout, replicas, self.peers.channel_of)
        if self.stats is not None:
            replicas.topic_stats = self.stats.topics
        self.fetchers = ReplicaFetcherManager(replicas, address_of=cluster.address_of)
        security = inter_broker_security(cfg)
        if security is not None:
            self.fetchers.connect = secured_connect(security)
        self.replica_sync = ReplicaSync(cfg, replicas, owns=layout.owns)
        self.publisher.subscribe(self.replica_sync)
        specs, by_name = self._listener_specs(listeners)
        _, quota_usage = share_quota_usage(self.quotas, layout, self.peers.channel_of,
                                           quota_clock_ms)
        self.channel = ShardChannelServer(
            socket_path(self.directory, layout.index),
            ShardOps(replicas, by_name.get).ops() | {"metrics": self._metrics,
                                                     "quota_usage": quota_usage})
        await self.channel.start()
        others = [i for i in range(layout.count) if i != layout.index]
        self.peers.start(others)
        node = await self.peers.connected(0)
        await node.call("subscribe_metadata", layout.index)
        await self._has_metadata.wait()
        await self.replica_sync.wait_applied()
        replicas.start()
        self.fetchers.start()
        self.tasks.start_soon(assign_dirs_loop, lambda: self.replicas, self.node_id,
                              lambda: 0, self._assign_dirs,  # the node sets its epoch
                              name="assign_replicas_to_dirs")
        self.server = server = Server(
            specs, server_config_for(cfg),
            stats=self.stats.server if self.stats is not None else None)
        # no listening socket of its own: it serves the connections the node hands it

        def adopt(listener_name: str, sock: socket.socket) -> None:
            self.tasks.start_soon(server.adopt, listener_name, sock, name="adopt_connection")

        self.receiver = ConnectionReceiver(hand_off_path(self.directory, layout.index), adopt)
        self.receiver.start()
        for other in others:  # hand-overs to any of them work from the first request on
            await self.peers.connected(other)
        await node.call("worker_ready", layout.index)
        log.info("worker_serving", worker=layout.index, partitions=len(list(replicas.partitions())))
        gone = asyncio.ensure_future(self._node_gone())
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait({gone, stopping}, return_when=asyncio.FIRST_COMPLETED)
        gone.cancel()
        stopping.cancel()

    async def _metrics(self, peer: ShardPeer) -> list[FamilyValues]:
        """This worker's families for the node's scrape (broker/metrics/merge.py)."""
        families: list[Any] = []
        stats = self.stats
        if stats is not None:
            families += request_families(stats.server)
            servers = [self.server] if self.server is not None else []
            families += network_families(stats.server, servers)
            families += topic_families(stats.topics, self.metadata.topics_by_name.keys())
        families += replica_families(self.replicas, self.metadata)
        if self.fetchers is not None:
            families += fetcher_families(self.fetchers)
        families += quota_families(self.quotas, time.monotonic_ns() // 1_000_000)
        families += log_flush_families()
        families += process_families()
        return family_values(families)

    async def _node_gone(self) -> None:
        """Returns once the node process's channel has stayed closed for a second."""
        while True:
            channel = self.peers.channel_of(0)
            if channel is not None:
                await asyncio.shield(channel.closed)
            await asyncio.sleep(1.0)
            if self.peers.channel_of(0) is None:
                log.warning("worker_node_gone", worker=self.layout.index)
                return

    async def stop(self) -> None:
        if self.receiver is not None:
            self.receiver.close()
        await self.tasks.close()
        if self.server is not None:
            await self.server.stop()
        if self.fetchers is not None:
            await self.fetchers.stop()
        if getattr(self, "replicas", None) is not None:
            await self.replicas.stop()
        if self.replica_sync is not None:
            await self.replica_sync.close()
        if self.channel is not None:
            await self.channel.stop()
        await self.peers.close()
        if getattr(self, "replicas", None) is not None:
            for part in list(self.replicas.partitions()):
                part.close()
        if getattr(self, "logs", None) is not None:
            self.logs.stop()
            self.logs.shutdown()
        log.info("worker_stopped", worker=self.layout.index)


async def _main(params: dict[str, Any]) -> None:
    config: NodeConfig = params["config"]
    layout = ShardLayout(params["count"], params["index"])
    worker = Worker(config, layout, params["directory"])
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await worker.run(params["listeners"], stop)
    finally:
        await worker.stop()


# prctl(2): the signal this process gets when the thread that started it ends
_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """SIGKILL from the kernel when the node process ends, however it ends: after a kill -9
    of the broker's PID no worker serves on alone, or holds partitions a node started
    again on the same log dirs opens (the node starts its workers from its event loop's
    thread, which lives as long as it does). A node gone before this call is seen by
    the parent's PID, and this process exits."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:
        raise SystemExit(f"the node process {parent} ended before its worker started")


def main() -> int:
    params = pickle.loads(sys.stdin.buffer.read())
    die_with_parent(params["parent"])
    config: NodeConfig = params["config"]
    from broker.logsetup import configure_logging

    configure_logging(config["log.format"], config["log.level"])
    structlog.contextvars.bind_contextvars(worker=params["index"])
    from raft import eventloop

    eventloop.run(_main(params))
    return 0


if __name__ == "__main__":
    sys.exit(main())
