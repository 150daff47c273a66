"""A streams group (KIP-1071) across restarts of its coordinator node (issue 34): one member
joins over the wire with Kafka Streams' StreamsGroupHeartbeat (a word-count topology: input
-> repartition -> changelog, the broker creates the internal topics) and gets every task;
the node is then stopped with SIGTERM and, after that, killed -9, and started again each
time. The group's records in __consumer_offsets bring it back: StreamsGroupDescribe shows the
same group epoch, topology and assignment, and the member's next heartbeat with the epoch it
held is answered with that epoch (not UNKNOWN_MEMBER_ID, which a member of a forgotten group
gets)."""

from __future__ import annotations

import asyncio
import datetime
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.streams_group_describe.v0.request import StreamsGroupDescribeRequest
from kio.schema.streams_group_heartbeat.v0 import request as hb

from broker.protocol.transport import KafkaConnection
from tests.compat.kafka.tools_support import ok
from tests.support.node import SkiffNode, started_node

pytestmark = [pytest.mark.timeout(300)]

GROUP = "restart-app"
MEMBER = "member-1"
ALL_TASKS = {("0", p) for p in range(3)} | {("1", p) for p in range(3)}


@pytest.fixture
def node(tmp_path: Path) -> Iterator[SkiffNode]:
    n = started_node(tmp_path / "node", config_env={
        "SKIFF_GROUP_STREAMS_INITIAL_REBALANCE_DELAY_MS": "0"})
    try:
        yield n
    finally:
        n.close()


def _topology() -> hb.Topology:
    def info(name: str, configs: tuple[hb.KeyValue, ...] = ()) -> hb.TopicInfo:
        return hb.TopicInfo(name=name, partitions=0, replication_factor=0,
                            topic_configs=configs)

    return hb.Topology(epoch=1, subtopologies=(
        hb.Subtopology(subtopology_id="0", source_topics=("input",), source_topic_regex=(),
                       state_changelog_topics=(), repartition_sink_topics=("app-rep",),
                       repartition_source_topics=(), copartition_groups=()),
        hb.Subtopology(subtopology_id="1", source_topics=(), source_topic_regex=(),
                       state_changelog_topics=(info("app-changelog", (hb.KeyValue(
                           key="cleanup.policy", value="compact"),)),),
                       repartition_sink_topics=(), repartition_source_topics=(info("app-rep"),),
                       copartition_groups=()),
    ))


async def _call(bootstrap: str, api_key: int, request: Any, version: int = 0) -> Any:
    host, port = bootstrap.rsplit(":", 1)
    conn = KafkaConnection(host, int(port), "streams-restart-test")
    try:
        return await conn.request(api_key, version, request, 10.0)
    finally:
        await conn.close()


def _heartbeat(bootstrap: str, epoch: int, owned: set[tuple[str, int]]) -> Any:
    joining = epoch == 0
    tasks = tuple(hb.TaskIds(subtopology_id=s, partitions=tuple(sorted(
        p for t, p in owned if t == s))) for s in sorted({t for t, _ in owned}))
    return asyncio.run(_call(bootstrap, 88, hb.StreamsGroupHeartbeatRequest(
        group_id=GROUP, member_id=MEMBER, member_epoch=epoch, endpoint_information_epoch=0,
        instance_id=None, rack_id=None,
        rebalance_timeout=datetime.timedelta(seconds=30 if joining else -0.001),
        topology=_topology() if joining else None,
        active_tasks=None if joining else tasks, standby_tasks=None if joining else (),
        warmup_tasks=None if joining else (), process_id="process-1" if joining else None,
        user_endpoint=None, client_tags=None, task_offsets=None, task_end_offsets=None,
        shutdown_application=False)))


def _until(what: str, call: Any, done: Any, within_s: float = 30.0) -> Any:
    deadline = time.monotonic() + within_s
    while True:
        try:
            got = call()
        except (TimeoutError, OSError):
            got = None
        if got is not None and done(got):
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: last answer {got}")
        time.sleep(0.3)


def _described(bootstrap: str) -> Any:
    resp = asyncio.run(_call(bootstrap, 89, StreamsGroupDescribeRequest(
        group_ids=(GROUP,), include_authorized_operations=False)))
    [group] = resp.groups
    return group


def _summary(group: Any) -> tuple[Any, ...]:
    return (group.group_epoch, group.assignment_epoch, group.topology.epoch,
            [s.subtopology_id for s in group.topology.subtopologies],
            [(m.member_id, m.member_epoch, m.process_id,
              sorted((t.subtopology_id, tuple(t.partitions)) for t in m.assignment.active_tasks))
             for m in group.members])


def test_streams_group_survives_coordinator_restart(node: SkiffNode) -> None:
    described = ok("kafka-features", "--bootstrap-server", node.bootstrap, "describe").stdout
    assert re.search(r"Feature: streams\.version\s.*FinalizedVersionLevel: 1\b", described), \
        described  # on from the start: a new node is formatted at 4.4, as Kafka 4.4
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic("input", 3, 1)])["input"].result(30)
    del admin  # not to log connection failures through the restarts
    # FindCoordinator makes __consumer_offsets, as a client's first lookup does
    asyncio.run(_call(node.bootstrap, 10, FindCoordinatorRequest(
        key_type=0, coordinator_keys=(GROUP,)), version=4))
    r = _until("the member joins", lambda: _heartbeat(node.bootstrap, 0, set()),
               lambda resp: resp.error_code is ErrorCode.none)
    owned: set[tuple[str, int]] = set()

    def step() -> Any:
        nonlocal r, owned
        r = _heartbeat(node.bootstrap, r.member_epoch, owned)
        if r.error_code is ErrorCode.none and r.active_tasks is not None:
            owned = {(t.subtopology_id, p) for t in r.active_tasks for p in t.partitions}
        return r

    _until("the member holds every task", step,
           lambda resp: resp.error_code is ErrorCode.none and owned == ALL_TASKS)
    epoch = r.member_epoch
    before = _summary(_described(node.bootstrap))
    assert before[-1] == [(MEMBER, epoch, "process-1", sorted(
        (s, tuple(range(3))) for s in ("0", "1")))], before
    for restart in (node.stop, node.kill):
        restart()
        node.start()
        node.wait_ready()
        again = _until("the loaded coordinator answers", lambda: _heartbeat(
            node.bootstrap, epoch, owned),
            lambda resp: resp.error_code is not ErrorCode.coordinator_load_in_progress)
        assert (again.error_code, again.member_epoch) == (ErrorCode.none, epoch), again
        assert _summary(_described(node.bootstrap)) == before
