"""Shared by the admin tests (unit, and the CLI integration test).

An admin server over a TestNode (the handler tests' node built from the real parts, with a
single-voter commit double), and a client with every admin stub. Each unit test body is one
coroutine: `serve(node, body)` starts the AdminServer on an ephemeral loopback port inside a
fresh event loop, runs `body(admin)` and stops it. `ServerThread` keeps a node and its admin
server running in a background event loop, for clients in other processes (the CLI, grpcurl).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

import grpc
import pytest

from broker.admin import AdminServer, QuorumDescriber
from broker.admin import pb as admin_pb
from broker.controller.requests import BrokerHeartbeatRequest, CreatableTopic
from tests.unit.handlers.conftest import NODE_ID, CommitOnAppendQuorum, TestNode

pb = admin_pb


class LeaderView:
    """The Raft driver as the admin plane reads it (broker/admin/services.QuorumHandle): this
    node leads, at the commit double's epoch, while the double says it is the leader."""

    def __init__(self, quorum: CommitOnAppendQuorum, node_id: int) -> None:
        self.quorum = quorum
        self.node_id = node_id

    @property
    def leader_and_epoch(self) -> tuple[int, int]:
        return (self.node_id if self.quorum.is_leader else -1), self.quorum.epoch


class AdminTestNode(TestNode):
    """TestNode plus what the admin server reads (broker/admin/services.AdminServices): a
    single broker-and-controller without coordinators or secured peers."""

    __test__ = False

    def __init__(self, tmp: Path, overrides: dict[str, str] | None = None) -> None:
        # the admin plane's loopback development policy: these tests call without credentials
        super().__init__(tmp, {"admin.allow.unauthenticated": "loopback", **(overrides or {})})
        self.ready = asyncio.Event()
        self.quorum.driver = LeaderView(self.quorum, self.node_id)  # type: ignore[attr-defined]
        # the node's controller here is the ControllerService itself, not a channel: no other
        # controller listener is known (ControllerChannel.voters)
        self.controller.voters = {}  # type: ignore[attr-defined]
        self.group_coordinator = None
        self.txn_coordinator = None
        self.inter_broker_security = None
        self.controller_security = None

    async def create_topic(self, name: str, partitions: int = 1, rf: int = 1,
                           assignments: dict[int, list[int]] | None = None,
                           **configs: str) -> None:
        [res] = await self.controller.create_topics([CreatableTopic(
            name, -1 if assignments else partitions, -1 if assignments else rf,
            assignments=assignments, configs=configs)])
        assert res.error.name == "none", res

    async def shut_down(self, broker_id: int) -> None:
        """Heartbeat want_shut_down: an unfenced broker enters controlled shutdown."""
        await self.controller.broker_heartbeat(BrokerHeartbeatRequest(
            broker_id=broker_id, broker_epoch=self.broker_epochs[broker_id],
            current_metadata_offset=self.metadata.offset, want_shut_down=True))


class Admin:
    def __init__(self, channel: grpc.aio.Channel, server: AdminServer) -> None:
        self.channel = channel
        self.server = server
        self.cluster = pb.cluster_grpc.ClusterServiceStub(channel)
        self.quorum = pb.cluster_grpc.QuorumServiceStub(channel)
        self.topics = pb.topics_grpc.TopicServiceStub(channel)
        self.partitions = pb.partitions_grpc.PartitionServiceStub(channel)
        self.groups = pb.groups_grpc.GroupServiceStub(channel)
        self.configs = pb.configs_grpc.ConfigServiceStub(channel)
        self.records = pb.records_grpc.RecordServiceStub(channel)
        self.features = pb.features_grpc.FeatureServiceStub(channel)


async def _serve(node: Any, body: Callable[[Admin], Awaitable[Any]],
                 describe_quorum: QuorumDescriber | None) -> Any:
    server = AdminServer(node, ["127.0.0.1:0"], describe_quorum=describe_quorum, grace_s=0)
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.ports[0]}") as ch:
            return await asyncio.wait_for(body(Admin(ch, server)), 30)
    finally:
        await server.stop()


def serve(node: Any, body: Callable[[Admin], Awaitable[Any]],
          describe_quorum: QuorumDescriber | None = None) -> Any:
    return asyncio.run(_serve(node, body, describe_quorum))


async def status_of(call: Awaitable[Any]) -> tuple[grpc.StatusCode, str]:
    """The status of a call that must fail."""
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    return info.value.code(), info.value.details() or ""


class ServerThread:
    """A registered, ready AdminTestNode and its AdminServer in a background event loop."""

    def __init__(self, tmp: Path, describe_quorum: QuorumDescriber | None = None,
                 overrides: dict[str, str] | None = None) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="admin-server",
                                       daemon=True)
        self.thread.start()
        self.node = AdminTestNode(tmp, overrides)
        self.server = AdminServer(self.node, ["127.0.0.1:0"], describe_quorum=describe_quorum,
                                  grace_s=0)

        async def start() -> None:
            await self.node.register(NODE_ID)
            self.node.ready.set()
            await self.server.start()

        self.run(start())
        self.address = f"127.0.0.1:{self.server.ports[0]}"

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        try:
            self.run(self.server.stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.node.close()
            self.loop.close()
