"""A node-like object for handler tests, built from the real parts.

Real: NodeConfig (build_config), MetadataPublisher, the pure Controller behind a real
ControllerService, LogManager + ReplicaManager in tmp_path. The one double is the metadata
quorum (`CommitOnAppendQuorum`): a single voter commits what it appends, so it assigns the
offsets and hands the batch to the publisher at once, without Raft.

The node registers itself through ControllerService.register_broker and is unfenced by a
heartbeat, as a real node does at startup.
"""

from __future__ import annotations

import asyncio
import io
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import kafka.protocol.admin as kp_admin
import kafka.protocol.metadata as kp_metadata
import pytest
from kio.serial import entity_reader, entity_writer

from broker.config import NodeConfig, build_config
from broker.controller import Controller, ControllerSettings
from broker.controller.requests import BrokerHeartbeatRequest, BrokerRegistrationRequest
from broker.controller.service import ControllerService
from broker.log import LogConfig, LogManager
from broker.metadata.image import MetadataImage, TopicImage
from broker.metadata.publisher import MetadataPublisher
from broker.protocol.api import BROKER_APIS
from broker.quotas.core import Quotas
from broker.replication import ReplicaManager
from broker.replication.sync import ReplicaSync
from broker.server.context import RequestContext
from broker.testing.quorum import CommitOnAppendQuorum
from broker.util.tasks import ServiceTasks

if TYPE_CHECKING:
    from broker.group.shell import GroupCoordinatorService
    from broker.handlers.init_producer_id import ProducerIdManager
    from broker.metrics.telemetry import TelemetryStore
    from broker.protocol.transport import ConnectionSecurity
    from broker.share.coordinator_shell import ShareCoordinatorService
    from broker.share.shell import ShareService
    from broker.txn.shell import TransactionCoordinatorService

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
NODE_ID = 1


class TestNode:
    """The attributes handlers rely on: node_id, cluster_id, config, metadata, controller,
    replicas, logs."""

    __test__ = False  # not a pytest test class

    def __init__(self, tmp: Path, overrides: dict[str, str] | None = None) -> None:
        raw = {
            "process.roles": "broker,controller",
            "node.id": str(NODE_ID),
            "controller.quorum.voters": f"{NODE_ID}@127.0.0.1:19093",
            "listeners": "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093",
            "controller.listener.names": "CONTROLLER",
            "log.dirs": str(tmp / "data"),
            # This node has no transaction coordinator: the data-path tests write the
            # transactions of a coordinator they play themselves, which KIP-890's check
            # would refuse. Tests of that check turn it back on (test_txn_verification.py).
            "transaction.partition.verification.enable": "false",
        }
        raw.update(overrides or {})
        self.config: NodeConfig = build_config(raw)
        self.node_id = self.config.node_id
        self.cluster_id = CLUSTER_ID
        self.publisher = MetadataPublisher(CLUSTER_ID)
        self.quorum = CommitOnAppendQuorum(self.publisher)
        self.controller = ControllerService(
            Controller(ControllerSettings.from_config(self.config, CLUSTER_ID), random.Random(5)),
            self.quorum, self.publisher, self.clock, commit_timeout_s=5.0,
        )
        self.logs = LogManager(self.config.log_dirs, LogConfig(), self.clock)
        self.replicas = ReplicaManager(self.node_id, self.logs, self.clock)
        self.publisher.subscribe(ReplicaSync(self.config, self.replicas))
        self.broker_epochs: dict[int, int] = {}
        self.quotas = Quotas()
        self.tasks = ServiceTasks("test_node")
        # members a real Node declares (broker/node) and this one runs none of
        self.broker_epoch = -1
        self.kraft_version = 0
        self.telemetry: TelemetryStore | None = None
        self.inter_broker_security: ConnectionSecurity | None = None
        self.group_coordinator: GroupCoordinatorService | None = None
        self.txn_coordinator: TransactionCoordinatorService | None = None
        self.share_coordinator: ShareCoordinatorService | None = None
        self.share_groups: ShareService | None = None
        self.producer_ids: ProducerIdManager | None = None

    @staticmethod
    def clock() -> int:
        return int(time.time() * 1000)

    @property
    def metadata(self) -> MetadataImage:
        return self.publisher.image

    def topic(self, name: str) -> TopicImage:
        t = self.metadata.topic(name)
        assert t is not None, f"no topic {name!r} in the image"
        return t

    async def register(self, broker_id: int, *, host: str = "127.0.0.1", port: int | None = None,
                       rack: str | None = None, listeners: tuple[str, ...] = ("PLAINTEXT",),
                       unfence: bool = True) -> None:
        """Register a broker (this node or a peer) and heartbeat it into the unfenced state."""
        reply = await self.controller.register_broker(BrokerRegistrationRequest(
            broker_id=broker_id, cluster_id=CLUSTER_ID,
            incarnation_id=uuid.UUID(int=broker_id + 1),
            listeners=[(name, host, port if port is not None else 19092 + 10 * broker_id,
                        "PLAINTEXT") for name in listeners],
            rack=rack,
        ))
        assert reply.error.name == "none", reply
        self.broker_epochs[broker_id] = reply.broker_epoch
        if unfence:
            hb = await self.controller.broker_heartbeat(BrokerHeartbeatRequest(
                broker_id=broker_id, broker_epoch=reply.broker_epoch,
                current_metadata_offset=self.metadata.offset))
            assert not hb.is_fenced, hb
            assert self.metadata.is_alive(broker_id)

    async def fence(self, broker_id: int) -> None:
        hb = await self.controller.broker_heartbeat(BrokerHeartbeatRequest(
            broker_id=broker_id, broker_epoch=self.broker_epochs[broker_id],
            current_metadata_offset=self.metadata.offset, want_fence=True))
        assert hb.is_fenced
        assert not self.metadata.is_alive(broker_id)

    def close(self) -> None:
        self.logs.shutdown()


def make_ctx(api_key: int, version: int, listener: str = "PLAINTEXT") -> RequestContext:
    return RequestContext(
        api_key=api_key, api_version=version, correlation_id=7, client_id="test-client",
        listener_name=listener, peer_host="127.0.0.1", peer_port=50000, received_ms=0,
        apis=BROKER_APIS,
    )


# kafka-python's own message classes (generated from Kafka's JSON schemas, independently
# of kio): a second, real client's parser for every response.
_KAFKA_PYTHON = {
    3: kp_metadata.MetadataResponse, 19: kp_admin.CreateTopicsResponse,
    20: kp_admin.DeleteTopicsResponse, 37: kp_admin.CreatePartitionsResponse,
    32: kp_admin.DescribeConfigsResponse, 33: kp_admin.AlterConfigsResponse,
    44: kp_admin.IncrementalAlterConfigsResponse, 60: kp_admin.DescribeClusterResponse,
}


def roundtrip(entity: Any) -> Any:
    """Encode with kio at the entity's version and decode again: proves it serialises, and
    the decoded entity must equal the original. Also parse the bytes with kafka-python's
    decoder for the same API and version and require its re-encoding to be byte-identical,
    so no field or tagged field is read differently by a real client."""
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    data = buf.getvalue()
    decoded, used = entity_reader(type(entity))(data, 0)
    assert used == len(data)
    client_cls = _KAFKA_PYTHON.get(int(entity.__api_key__))
    if client_cls is not None:
        parsed = client_cls.decode(data, version=int(entity.__version__))
        assert bytes(parsed.encode()) == data, parsed
    return decoded


@pytest.fixture
def node(tmp_path: Path) -> Iterator[TestNode]:
    n = TestNode(tmp_path)
    asyncio.run(n.register(NODE_ID))
    yield n
    n.close()


@pytest.fixture
def node_factory(tmp_path: Path) -> Iterator[Callable[..., TestNode]]:
    made: list[TestNode] = []

    def make(overrides: dict[str, str] | None = None, register: bool = True) -> TestNode:
        n = TestNode(tmp_path / f"n{len(made)}", overrides)
        if register:
            asyncio.run(n.register(NODE_ID))
        made.append(n)
        return n

    yield make
    for n in made:
        n.close()


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(coro)  # type: ignore[arg-type]
