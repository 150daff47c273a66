"""Several brokers in one event loop, replicating over real loopback sockets.

Real: the pure Controller behind a ControllerService (its AlterPartition checks the
partition epoch and answers INVALID_UPDATE_VERSION as the active controller does), one
MetadataPublisher every broker subscribes to with its own ReplicaSync, and per broker a
LogManager in a tmp dir, a ReplicaManager, a ReplicaFetcherManager using
broker/protocol/transport.py's KafkaConnection, and a broker Server on 127.0.0.1:0 serving the
real Fetch, Produce, ListOffsets, OffsetForLeaderEpoch and ApiVersions handlers.

The one double is the metadata quorum (CommitOnAppendQuorum): metadata records are
committed and published to every broker the moment the controller appends them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker.config import NodeConfig, build_config
from broker.controller import Controller, ControllerSettings
from broker.controller.requests import (
    AlterPartitionReply,
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    CreatableTopic,
)
from broker.controller.service import ControllerService
from broker.handlers import api_versions, fetch, list_offsets, offset_for_leader_epoch, produce
from broker.log import LogConfig, LogManager
from broker.metadata.delta import MetadataDelta
from broker.metadata.image import MetadataImage
from broker.metadata.publisher import MetadataPublisher
from broker.protocol.api import BROKER_APIS
from broker.protocol.records import Record, build_batch
from broker.quotas.core import Quotas
from broker.replication import ReplicaManager
from broker.replication.cluster_view import ClusterView
from broker.replication.fetcher import ReplicaFetcherManager
from broker.replication.replica_manager import ReplicationSettings
from broker.replication.sync import ReplicaSync
from broker.server import Dispatcher, ListenerSpec, Server
from broker.testing.quorum import CommitOnAppendQuorum

if TYPE_CHECKING:
    from broker.metrics.telemetry import TelemetryStore
    from broker.txn.shell import TransactionCoordinatorService

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
FAST = ReplicationSettings(
    lag_time_max_ms=400, fetch_wait_max_ms=100, fetch_backoff_ms=50,
    socket_timeout_ms=5000, alter_partition_backoff_ms=50,
)


def now_ms() -> int:
    return int(time.time() * 1000)


def batch(*values: bytes, ts: int | None = None) -> bytes:
    base = now_ms() if ts is None else ts
    return build_batch([Record(timestamp=base + i, key=b"k", value=v)
                        for i, v in enumerate(values)])


class Broker:
    """The node-shaped object handlers see: node_id, metadata, replicas, config."""

    def __init__(self, cluster: Cluster, node_id: int, settings: ReplicationSettings) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.config = cluster.config
        self.cluster_id = CLUSTER_ID
        self.broker_epoch = -1
        self.rack = f"rack{node_id}"
        self.quotas = Quotas()
        # members a real Node declares (broker/node) and this broker runs none of
        self.kraft_version = 0
        self.telemetry: TelemetryStore | None = None
        self.txn_coordinator: TransactionCoordinatorService | None = None
        self.logs = LogManager([cluster.tmp / f"b{node_id}"], LogConfig(), now_ms)
        self.logs.load()
        # Wired as the Node does.
        view = ClusterView(lambda: cluster.metadata, "PLAINTEXT")
        self.replicas = ReplicaManager(
            node_id, self.logs, now_ms, settings=dataclasses.replace(settings, rack=self.rack),
            alter_partition=cluster.alter_partition, broker_epoch=lambda: self.broker_epoch,
            rack_of=view.rack_of, isr_eligible=view.isr_eligible,
        )
        self.fetchers = ReplicaFetcherManager(self.replicas, address_of=view.address_of)
        self.sync = ReplicaSync(cluster.config, self.replicas)
        self.incarnation = 0
        self.running = False
        dispatcher = Dispatcher.from_modules(
            [api_versions, fetch, produce, list_offsets, offset_for_leader_epoch])
        self.server = Server([ListenerSpec("PLAINTEXT", "127.0.0.1", 0, BROKER_APIS,
                                           dispatcher.bind(self))])

    @property
    def metadata(self) -> MetadataImage:
        return self.cluster.metadata

    @property
    def port(self) -> int:
        return self.server.address("PLAINTEXT")[1]

    async def start(self) -> None:
        await self.server.start()
        self.replicas.start()
        self.fetchers.start()

    async def stop(self, *, clean: bool = True) -> None:
        """`clean=False` is a crash: no producer snapshots, checkpoints or clean-shutdown
        marker, so the next open recovers the logs."""
        await self.fetchers.stop()
        await self.replicas.stop()
        await self.server.stop()
        if clean:
            for part in list(self.replicas.partitions()):
                part.close()
            self.logs.shutdown()
        else:
            self.logs.stop()
            for plog in self.logs.all_logs():
                plog.close()


class Cluster:
    def __init__(self, tmp: Path, ids: tuple[int, ...] = (1, 2, 3),
                 settings: ReplicationSettings = FAST) -> None:
        self.tmp = tmp
        self.config: NodeConfig = build_config({
            "process.roles": "broker,controller", "node.id": "1",
            "controller.quorum.voters": "1@127.0.0.1:19093",
            "listeners": "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093",
            "controller.listener.names": "CONTROLLER", "log.dirs": str(tmp / "unused"),
        })
        self.publisher = MetadataPublisher(CLUSTER_ID)
        self.quorum = CommitOnAppendQuorum(self.publisher)
        self.controller = ControllerService(
            Controller(ControllerSettings.from_config(self.config, CLUSTER_ID),
                       random.Random(7)),
            self.quorum, self.publisher, now_ms, commit_timeout_s=5.0,
        )
        self.alter_calls: list[AlterPartitionRequest] = []
        self.alter_replies: list[AlterPartitionReply] = []
        # A test may replace the controller's answer (delay it, refuse it).
        self.alter_hook: Callable[[AlterPartitionRequest], Awaitable[AlterPartitionReply]] | None
        self.alter_hook = None
        self.settings = settings
        self.brokers = {i: Broker(self, i, settings) for i in ids}
        self.publisher.subscribe(self._publish)

    def _publish(self, old: MetadataImage, new: MetadataImage, delta: MetadataDelta | None) -> None:
        for b in list(self.brokers.values()):
            if b.running:
                b.sync(old, new, delta)

    @property
    def metadata(self) -> MetadataImage:
        return self.publisher.image

    async def controller_alter_partition(self, req: AlterPartitionRequest) -> AlterPartitionReply:
        return await self.controller.alter_partition(req)

    async def alter_partition(self, req: AlterPartitionRequest) -> AlterPartitionReply:
        self.alter_calls.append(req)
        if self.alter_hook is not None:
            reply = await self.alter_hook(req)
        else:
            reply = await self.controller_alter_partition(req)
        self.alter_replies.append(reply)
        return reply

    async def start(self) -> None:
        for b in self.brokers.values():
            await self._start_broker(b)

    async def _start_broker(self, b: Broker) -> None:
        await b.start()
        b.running = True
        b.sync(self.metadata, self.metadata, None)  # what the node replays at startup
        reply = await self.controller.register_broker(BrokerRegistrationRequest(
            broker_id=b.node_id, cluster_id=CLUSTER_ID,
            incarnation_id=uuid.UUID(int=b.node_id * 1000 + b.incarnation),
            listeners=[("PLAINTEXT", "127.0.0.1", b.port, "PLAINTEXT")],
            rack=b.rack,
        ))
        assert reply.error.name == "none", reply
        b.broker_epoch = reply.broker_epoch
        await self.heartbeat(b.node_id)

    async def crash(self, node_id: int) -> None:
        b = self.brokers[node_id]
        b.running = False
        await b.stop(clean=False)

    async def restart(self, node_id: int) -> Broker:
        """A new process on the same log directory: recovery, a new incarnation and broker
        epoch, then registration and unfencing."""
        old = self.brokers[node_id]
        b = Broker(self, node_id, self.settings)
        b.incarnation = old.incarnation + 1
        self.brokers[node_id] = b
        await self._start_broker(b)
        return b

    async def heartbeat(self, node_id: int, *, want_fence: bool = False) -> Any:
        b = self.brokers[node_id]
        return await self.controller.broker_heartbeat(BrokerHeartbeatRequest(
            broker_id=node_id, broker_epoch=b.broker_epoch,
            current_metadata_offset=self.metadata.offset, want_fence=want_fence))

    async def stop(self) -> None:
        running = [b for b in self.brokers.values() if b.running]
        for b in running:
            b.running = False
            await b.fetchers.stop()
        for b in running:
            await b.stop()

    async def create_topic(self, name: str, replicas: list[int], *, min_isr: int = 1,
                           partitions: int = 1) -> None:
        [res] = await self.controller.create_topics([CreatableTopic(
            name=name, assignments={i: replicas for i in range(partitions)},
            configs={"min.insync.replicas": str(min_isr)},
        )])
        assert res.error.name == "none", res

    def leader(self, topic: str, index: int = 0) -> Broker:
        return self.brokers[self.metadata.leader_of(topic, index)]


async def eventually(check: Callable[[], bool], timeout_s: float = 5.0,
                     what: str = "condition") -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def run(coro_fn: Callable[[], Awaitable[Any]], timeout_s: float = 20) -> Any:
    async def bounded() -> Any:
        return await asyncio.wait_for(coro_fn(), timeout_s)

    return asyncio.run(bounded())
