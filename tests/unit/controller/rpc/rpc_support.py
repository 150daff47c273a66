"""A controller node for the controller-RPC tests, built from the real parts.

Real: the pure Controller behind a real ControllerService, the MetadataPublisher, the kio
encoders and decoders (every request and response crosses the wire format). The one
double is the metadata quorum: a single voter that commits what it appends.
"""

from __future__ import annotations

import asyncio
import io
import random
import time
import uuid
from collections.abc import Awaitable
from types import ModuleType
from typing import Any, TypeVar

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from broker.config import build_config
from broker.controller import Controller, ControllerSettings
from broker.controller.requests import BrokerHeartbeatRequest, BrokerRegistrationRequest
from broker.controller.service import ControllerService
from broker.metadata.image import MetadataImage
from broker.metadata.publisher import MetadataPublisher

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
T = TypeVar("T")


class CommitOnAppendQuorum:
    def __init__(self, publisher: MetadataPublisher) -> None:
        self.publisher = publisher
        self.next_offset = 0
        self.is_leader = True

    async def append(self, records: list[bytes]) -> int:
        if not self.is_leader:
            raise RuntimeError("not the leader")
        last = self.next_offset + len(records) - 1
        self.next_offset = last + 1
        self.publisher.apply_committed(last, 1, records)
        return last


class ControllerNode:
    """What the RPC handlers use of a node: node_id and controller_service."""

    def __init__(self, node_id: int = 1, *, active: bool = True, **overrides: str) -> None:
        raw = {
            "process.roles": "controller", "node.id": str(node_id),
            "controller.quorum.voters": f"{node_id}@127.0.0.1:19093",
            "listeners": "CONTROLLER://127.0.0.1:19093",
            "controller.listener.names": "CONTROLLER",
            "default.replication.factor": "1", "num.partitions": "1",
        }
        raw.update(overrides)
        self.config = build_config(raw)
        self.node_id = node_id
        self.publisher = MetadataPublisher(CLUSTER_ID)
        self.quorum = CommitOnAppendQuorum(self.publisher)
        self.quorum.is_leader = active
        self.controller_service: ControllerService | None = ControllerService(
            Controller(ControllerSettings.from_config(self.config, CLUSTER_ID),
                       random.Random(3)),
            self.quorum, self.publisher, lambda: int(time.time() * 1000),
            commit_timeout_s=5.0)
        self.epochs: dict[int, int] = {}

    @property
    def metadata(self) -> MetadataImage:
        return self.publisher.image

    async def add_broker(self, broker_id: int, unfence: bool = True) -> int:
        assert self.controller_service is not None
        reply = await self.controller_service.register_broker(BrokerRegistrationRequest(
            broker_id=broker_id, cluster_id=CLUSTER_ID, incarnation_id=uuid.uuid4(),
            listeners=[("PLAINTEXT", "127.0.0.1", 20000 + broker_id, "PLAINTEXT")]))
        assert reply.error is ErrorCode.none, reply
        self.epochs[broker_id] = reply.broker_epoch
        if unfence:
            beat = await self.controller_service.broker_heartbeat(BrokerHeartbeatRequest(
                broker_id, reply.broker_epoch, self.metadata.offset))
            assert not beat.is_fenced
        return reply.broker_epoch


def _encode(entity: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def over_the_wire(entity: Any, api_key: int, version: int, *, response: bool) -> Any:
    """Encode with kio and decode again at the RPC's version: what the peer would read."""
    schema = (load_response_schema if response else load_request_schema)(api_key, version)
    assert type(entity) is schema, (type(entity), schema)
    data = _encode(entity)
    decoded, size = entity_reader(schema)(data, 0)
    assert size == len(data)
    return decoded


async def call(rpc: ModuleType, node: Any, request: Any) -> Any:
    """Send `request` (built by rpc.request) through the wire to rpc.handle and back."""
    wire_req = over_the_wire(request, rpc.API_KEY, rpc.VERSION, response=False)
    response = await rpc.handle(node, None, wire_req)
    return over_the_wire(response, rpc.API_KEY, rpc.VERSION, response=True)


def run(coro: Awaitable[T]) -> T:
    return asyncio.run(coro)  # type: ignore[arg-type]
