"""A ReplicaFetcher against a leader reached through a connection double that calls the
real ApiVersions and Fetch handlers in process (and decodes their bytes with kio): version
negotiation, topics without ids, and stopping when a cancellation gets lost."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import time
from pathlib import Path
from typing import Any

from kio.serial import entity_reader

from broker.config import build_config
from broker.handlers import api_versions, fetch
from broker.log import LogConfig, LogManager
from broker.metadata.image import MetadataImage
from broker.protocol.api import BROKER_APIS, FETCH, ApiTable, request_schema, response_schema
from broker.replication import ReplicaManager, Role
from broker.replication.fetcher import ReplicaFetcherManager
from broker.server.context import RequestContext
from broker.testing.inprocess_cluster import FAST, batch, eventually, run


def now_ms() -> int:
    return int(time.time() * 1000)


class LeaderNode:
    def __init__(self, replicas: ReplicaManager) -> None:
        self.replicas = replicas
        self.node_id = replicas.node_id
        self.metadata = MetadataImage.empty()
        self.cluster_id = ""
        self.kraft_version = 0
        self.telemetry = None
        self.config = build_config({
            "process.roles": "broker,controller", "node.id": str(self.node_id),
            "controller.quorum.voters": "1@127.0.0.1:19093",
            "listeners": "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093",
            "controller.listener.names": "CONTROLLER", "log.dirs": "/nonexistent/skiff"})


class DirectConnection:
    """Calls the leader's handlers; answers ApiVersions from `apis`."""

    def __init__(self, leader: LeaderNode, apis: ApiTable = BROKER_APIS) -> None:
        self.leader = leader
        self.apis = apis
        self.versions_used: list[int] = []
        self.swallow_next_cancel = False
        self.in_fetch = False
        self.closed = False

    async def request(self, api_key: int, version: int, request: Any, timeout_s: float) -> Any:
        ctx = RequestContext(api_key=api_key, api_version=version, correlation_id=1,
                             client_id="test", listener_name="PLAINTEXT", peer_host="127.0.0.1",
                             peer_port=1, received_ms=0, apis=self.apis)
        if api_key == 18:
            return await api_versions.handle(self.leader, ctx, request)
        assert api_key == FETCH
        self.versions_used.append(version)
        if isinstance(request, bytes):  # the fetcher's narrow encoder; the handler takes kio's
            raw = request
            request, used = entity_reader(request_schema(FETCH, version))(raw, 0)
            assert used == len(raw)
        self.in_fetch = True
        try:
            body = (await fetch.handle(self.leader, ctx, request)).to_bytes()
        except asyncio.CancelledError:
            if not self.swallow_next_cancel:
                raise
            # What asyncio.wait_for can do on Python < 3.12 when a result and a cancel race.
            self.swallow_next_cancel = False
            body = (await fetch.handle(self.leader, ctx, dataclasses.replace(
                request, max_wait=datetime.timedelta(0)))).to_bytes()
        finally:
            self.in_fetch = False
        decoded, used = entity_reader(response_schema(FETCH, version))(body, 0)
        assert used == len(body)
        return decoded

    async def close(self) -> None:
        self.closed = True


async def pair(tmp: Path, apis: ApiTable = BROKER_APIS) -> tuple[Any, ...]:
    managers = []
    for node in (1, 2):
        logs = LogManager([tmp / f"n{node}"], LogConfig(), now_ms)
        logs.load()
        rm = ReplicaManager(node, logs, now_ms, settings=FAST)
        rm.apply_partition(topic="t", topic_id=None, index=0, leader=1, leader_epoch=0,
                           partition_epoch=0, replicas=(1, 2), isr=(1, 2),
                           min_insync_replicas=1, log_config=LogConfig())
        managers.append((logs, rm))
    leader = LeaderNode(managers[0][1])
    conn = DirectConnection(leader, apis)
    fetchers = ReplicaFetcherManager(managers[1][1], address_of=lambda b: ("leader", b),
                                     connect=lambda host, port: conn)
    return managers, conn, fetchers


def test_topics_without_ids_replicate_with_fetch_v12(tmp_path: Path) -> None:
    async def main() -> None:
        managers, conn, fetchers = await pair(tmp_path)
        leader, follower = managers[0][1], managers[1][1]
        fetchers.start()
        try:
            await leader.append({("t", 0): batch(b"a", b"b")}, required_acks=-1,
                                timeout_ms=5000)
            fp = follower.get("t", 0)
            assert fp.role is Role.FOLLOWER
            await eventually(lambda: fp.high_watermark == 2, what="follower high watermark")
            assert set(conn.versions_used) == {12}
        finally:
            await fetchers.stop()
            for logs, _ in managers:
                logs.shutdown()

    run(main)


def test_a_leader_without_fetch_v12_is_not_replicated_from(tmp_path: Path) -> None:
    async def main() -> None:
        managers, conn, fetchers = await pair(tmp_path, BROKER_APIS.with_api(FETCH, 4, 11))
        leader, follower = managers[0][1], managers[1][1]
        fetchers.start()
        try:
            await leader.append({("t", 0): batch(b"a")}, required_acks=1, timeout_ms=1000)
            await asyncio.sleep(0.3)
            assert conn.versions_used == []  # no Fetch without DivergingEpoch
            assert follower.get("t", 0).log.log_end_offset == 0
        finally:
            await fetchers.stop()
            for logs, _ in managers:
                logs.shutdown()

    run(main)


def test_stop_ends_the_fetcher_even_if_its_cancellation_is_lost(tmp_path: Path) -> None:
    async def main() -> None:
        managers, conn, fetchers = await pair(tmp_path)
        fetchers.start()
        try:
            await eventually(lambda: len(conn.versions_used) >= 2 and conn.in_fetch,
                             what="a long poll in progress")
            conn.swallow_next_cancel = True
            [fetcher] = fetchers.fetchers.values()
            task = fetcher._task
            assert task is not None
            started = time.monotonic()
            await fetchers.stop()
            assert time.monotonic() - started < 3.0
            assert task.done() and conn.closed
            assert not conn.swallow_next_cancel  # the cancel really was swallowed once
        finally:
            for logs, _ in managers:
                logs.shutdown()

    run(main)


def test_leader_behind_on_metadata_is_retried_soon_not_after_the_backoff(tmp_path: Path) -> None:
    async def main() -> None:
        managers, _conn, fetchers = await pair(tmp_path)
        leader, follower = managers[0][1], managers[1][1]
        fetchers.settings = dataclasses.replace(FAST, fetch_backoff_ms=5000)
        # The follower learns of leader epoch 1 before the leader does.
        follower.apply_partition(topic="t", topic_id=None, index=0, leader=1, leader_epoch=1,
                                 partition_epoch=1, replicas=(1, 2), isr=(1, 2),
                                 min_insync_replicas=1, log_config=LogConfig())
        fetchers.start()
        try:
            await asyncio.sleep(0.3)  # its fetches meet UNKNOWN_LEADER_EPOCH meanwhile
            leader.apply_partition(topic="t", topic_id=None, index=0, leader=1, leader_epoch=1,
                                   partition_epoch=1, replicas=(1, 2), isr=(1, 2),
                                   min_insync_replicas=1, log_config=LogConfig())
            loop = asyncio.get_running_loop()
            started = loop.time()
            await leader.append({("t", 0): batch(b"a")}, required_acks=1, timeout_ms=1000)
            fp = follower.get("t", 0)
            await eventually(lambda: fp.log.log_end_offset == 1, timeout_s=4.0,
                             what="follower fetch after the leader caught up")
            assert loop.time() - started < 1.0  # not the 5 s replica.fetch.backoff.ms
        finally:
            await fetchers.stop()
            for logs, _ in managers:
                logs.shutdown()

    run(main)
