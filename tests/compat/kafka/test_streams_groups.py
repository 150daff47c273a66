"""Streams groups (KIP-1071): Kafka Streams 4.4 with group.protocol=streams on Skiff.

The application of test_streams_app.py (tests/java/src/skiff/compat/streams/StreamsApp.java:
a word count and a windowed count per letter, each behind a repartition topic and a state
store with a changelog, exactly_once_v2) runs as three instances of one application id with
group.protocol=streams: the broker creates the internal topics and assigns the nine tasks
(three subtopologies of three partitions). On Skiff (three combined nodes, formatted at 4.4
so streams.version is 1, group.streams.session.timeout.ms 6 s) the instances are seen to
share the tasks, one instance is killed with -9 and its tasks are seen to move to the two
others; the outputs, read with read_committed, must then equal what test_streams_app.py
computes from the input, each key's counts 1, 2, ..., N. The same three instances run
against the reference Kafka 4.4 (its streams session timeout cannot go below 45 s there, so
no instance is killed) and must give the same outputs. Once caught up, Kafka 4.4's
kafka-streams-groups tool describes each group's members and their tasks on both.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from broker.testing.cluster import Cluster
from tests.compat.kafka.test_streams_app import (
    PARTITIONS,
    Updates,
    create_topics,
    expected,
    finals,
    in_sequence,
    input_lines,
    produce,
    read_committed,
)
from tests.support.kafka_ref import TOOL_JVM_OPTS, KafkaNode, java_program_classpath, tool

pytestmark = [pytest.mark.timeout(400), pytest.mark.slow]

PROGRAM = "skiff.compat.streams.StreamsApp"
INSTANCES = 3
ALL_TASKS = {f"{s}_{p}" for s in range(3) for p in range(PARTITIONS)}
SETTLE_S = 90.0
CATCH_UP_S = 120.0
SKIFF_OVERRIDES = {
    "group.streams.session.timeout.ms": "6000",
    "group.streams.min.session.timeout.ms": "6000",
    "group.streams.heartbeat.interval.ms": "1000",
    "group.streams.min.heartbeat.interval.ms": "1000",
}
TASKS_LINE = re.compile(r"^TASKS active=\[(.*?)\] standby=\[(.*?)\]$", re.M)


class Instance:
    """One instance of the application (a JVM), stopped by closing its stdin."""

    def __init__(self, bootstrap: str, app_id: str, topic: str, prefix: str, state_dir: Path,
                 replication: int, log_path: Path) -> None:
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            ["java", *TOOL_JVM_OPTS, "-cp", java_program_classpath(), PROGRAM, bootstrap,
             app_id, topic, prefix, str(state_dir), str(replication), "streams"],
            stdin=subprocess.PIPE, stdout=self._log, stderr=subprocess.STDOUT)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def active(self) -> set[str]:
        """The active tasks of the last TASKS line the instance printed."""
        lines = TASKS_LINE.findall(self.log())
        return {t for t in lines[-1][0].split(", ") if t} if lines else set()

    def check_alive(self) -> None:
        if self.proc.poll() is not None or "STATE ERROR" in self.log():
            raise AssertionError(f"a Streams instance failed:\n{self.log()[-6000:]}")

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


@dataclass
class GroupsRun:
    words: Updates = field(default_factory=dict)
    windows: Updates = field(default_factory=dict)
    shared: list[set[str]] = field(default_factory=list)  # each instance's active tasks
    after_kill: list[set[str]] = field(default_factory=list)  # the survivors'
    described: dict[str, Any] = field(default_factory=dict)
    tool: str = ""  # kafka-streams-groups --describe --members, once caught up
    internal_topics: list[str] = field(default_factory=list)
    seconds: float = 0.0


async def _describe(bootstrap: str, group_id: str) -> Any:
    """StreamsGroupDescribe v0 from the group's coordinator (the node that does not answer
    NOT_COORDINATOR)."""
    from kio.schema.errors import ErrorCode
    from kio.schema.streams_group_describe.v0.request import StreamsGroupDescribeRequest

    from broker.protocol.transport import KafkaConnection

    last: Any = None
    for address in bootstrap.split(","):
        host, port = address.rsplit(":", 1)
        conn = KafkaConnection(host, int(port), "streams-groups-test")
        try:
            resp = await conn.request(89, 0, StreamsGroupDescribeRequest(
                group_ids=(group_id,), include_authorized_operations=False), 10.0)
        except Exception:  # a killed or restarting node
            continue
        finally:
            await conn.close()
        [last] = resp.groups
        if last.error_code is not ErrorCode.not_coordinator:
            return last
    return last


def describe(bootstrap: str, group_id: str) -> Any:
    return asyncio.run(_describe(bootstrap, group_id))


def wait_shared(instances: list[Instance], deadline_s: float) -> list[set[str]]:
    """Until the instances' active tasks are disjoint, each non-empty, and cover all nine."""
    deadline = time.monotonic() + deadline_s
    while True:
        for i in instances:
            i.check_alive()
        tasks = [i.active() for i in instances]
        if all(tasks) and set().union(*tasks) == ALL_TASKS \
                and sum(len(t) for t in tasks) == len(ALL_TASKS):
            return tasks
        if time.monotonic() > deadline:
            raise AssertionError(f"tasks not shared in {deadline_s:.0f}s: {tasks}\n"
                                 + "\n".join(i.log()[-3000:] for i in instances))
        time.sleep(0.5)


def wait_caught_up(instances: list[Instance], bootstrap: str, prefix: str, words: Any,
                   windows: Any) -> None:
    deadline = time.monotonic() + CATCH_UP_S
    while True:
        for i in instances:
            i.check_alive()
        got_w = finals(read_committed(bootstrap, f"{prefix}-words", PARTITIONS))
        got_win = finals(read_committed(bootstrap, f"{prefix}-windows", PARTITIONS))
        if got_w == dict(words) and got_win == dict(windows):
            return
        if time.monotonic() > deadline:
            raise AssertionError(
                f"output not caught up in {CATCH_UP_S:.0f}s: {sum(got_w.values())} of "
                f"{sum(words.values())} words counted\n"
                + "\n".join(i.log()[-3000:] for i in instances))
        time.sleep(1.0)


def run_group(bootstrap: str, admin: AdminClient, replication: int, work: Path,
              kill_one: bool) -> GroupsRun:
    lines = input_lines()
    words, windows = expected(lines)
    tag = uuid.uuid4().hex[:8]
    topic, prefix, app_id = f"sg-in-{tag}", f"sg-out-{tag}", f"sg-app-{tag}"
    create_topics(admin, [topic, f"{prefix}-words", f"{prefix}-windows"], replication)
    half = len(lines) // 2
    produce(bootstrap, topic, lines[:half])
    started = time.monotonic()
    instances = [Instance(bootstrap, app_id, topic, prefix, work / f"state-{tag}-{n}",
                          replication, work / f"app-{tag}-{n}.log") for n in range(INSTANCES)]
    run = GroupsRun()
    try:
        run.shared = wait_shared(instances, SETTLE_S)
        if kill_one:
            deadline = time.monotonic() + SETTLE_S
            while not read_committed(bootstrap, f"{prefix}-words", PARTITIONS):
                assert time.monotonic() < deadline, "no output committed"
                time.sleep(0.5)
            instances[-1].kill()
            survivors = instances[:-1]
            produce(bootstrap, topic, lines[half:])
            run.after_kill = wait_shared(survivors, SETTLE_S)
        else:
            survivors = instances
            produce(bootstrap, topic, lines[half:])
        wait_caught_up(survivors, bootstrap, prefix, words, windows)
        run.seconds = time.monotonic() - started
        desc = describe(bootstrap, app_id)
        run.described = {
            "state": desc.group_state,
            "members": len(desc.members),
            "active": sorted(f"{t.subtopology_id}_{p}" for m in desc.members
                             for t in m.assignment.active_tasks for p in t.partitions),
        }
        out = tool("kafka-streams-groups", "--bootstrap-server", bootstrap, "--describe",
                   "--group", app_id, "--members")
        run.tool = out.stdout + out.stderr
    finally:
        for i in instances:
            i.stop()
    run.words = read_committed(bootstrap, f"{prefix}-words", PARTITIONS)
    run.windows = read_committed(bootstrap, f"{prefix}-windows", PARTITIONS)
    run.internal_topics = sorted(t.removeprefix(app_id) for t in admin.list_topics(
        timeout=10).topics if t.startswith(app_id))
    return run


@pytest.fixture(scope="module")
def runs(kafka_ref: KafkaNode, tmp_path_factory: pytest.TempPathFactory
         ) -> dict[str, GroupsRun]:
    ref_work = tmp_path_factory.mktemp("streams-groups-kafka")
    ref_admin = AdminClient({"bootstrap.servers": kafka_ref.bootstrap, "log_level": 0})
    work = tmp_path_factory.mktemp("streams-groups-skiff")
    with ThreadPoolExecutor(1) as pool:
        reference = pool.submit(run_group, kafka_ref.bootstrap, ref_admin, 1, ref_work, False)
        with Cluster(work / "cluster", controllers=3, combined=True, release_version="4.4",
                     overrides=SKIFF_OVERRIDES) as cluster:
            admin = cluster.admin(cluster.broker_ids[0])
            skiff = run_group(cluster.bootstrap_servers, admin, 3, work, True)
        return {"skiff": skiff, "kafka": reference.result(timeout=SETTLE_S + CATCH_UP_S + 60)}


def test_three_instances_share_the_tasks(runs: dict[str, GroupsRun]) -> None:
    for name, run in runs.items():
        assert len(run.shared) == INSTANCES and all(run.shared), name
        assert sorted(len(t) for t in run.shared) == [3, 3, 3], (name, run.shared)


def test_a_killed_instances_tasks_move_to_the_others(runs: dict[str, GroupsRun]) -> None:
    skiff = runs["skiff"]
    assert set().union(*skiff.after_kill) == ALL_TASKS
    assert sorted(len(t) for t in skiff.after_kill) in ([4, 5], [5, 4])
    # the survivors kept what they had (the assignor is sticky)
    for before, after in zip(skiff.shared, skiff.after_kill, strict=False):
        assert before <= after
    assert skiff.described == {"state": "Stable", "members": 2, "active": sorted(ALL_TASKS)}


def test_exactly_once_outputs_after_the_kill(runs: dict[str, GroupsRun]) -> None:
    words, windows = expected(input_lines())
    skiff = runs["skiff"]
    assert finals(skiff.words) == dict(words) and in_sequence(skiff.words) == {}
    assert finals(skiff.windows) == dict(windows) and in_sequence(skiff.windows) == {}


def tool_tasks(output: str) -> tuple[str, list[set[str]]]:
    """kafka-streams-groups --describe --members: its header and each member's active tasks
    ("ACTIVE: 0:[0,2]; 1:[1]; " is 0_0, 0_2, 1_1)."""
    lines = [x for x in output.splitlines() if x.strip()]
    members = []
    for line in lines[1:]:
        active = line.split("ACTIVE:", 1)[1] if "ACTIVE:" in line else ""
        members.append({f"{sub}_{p}" for sub, ps in re.findall(r"(\d+):\[([\d,]*)\]", active)
                        for p in ps.split(",") if p})
    return lines[0].split() if lines else "", members


def test_kafka_streams_groups_tool_describes_the_members(runs: dict[str, GroupsRun]) -> None:
    """Kafka 4.4's kafka-streams-groups (StreamsGroupCommand, through Admin's
    describeStreamsGroups) shows each group's members and their tasks alike."""
    skiff, kafka = tool_tasks(runs["skiff"].tool), tool_tasks(runs["kafka"].tool)
    assert skiff[0] == kafka[0] == ["GROUP", "MEMBER", "PROCESS", "CLIENT-ID", "ASSIGNMENTS"]
    for (_, members), count in ((skiff, 2), (kafka, 3)):
        assert len(members) == count
        assert set().union(*members) == ALL_TASKS
        assert sum(len(m) for m in members) == len(ALL_TASKS)


def test_same_as_kafka(runs: dict[str, GroupsRun]) -> None:
    skiff, kafka = runs["skiff"], runs["kafka"]
    assert kafka.words == skiff.words
    assert kafka.windows == skiff.windows
    assert kafka.internal_topics == skiff.internal_topics == [
        "-by-letter-repartition", "-by-word-repartition",
        "-letter-windows-changelog", "-word-counts-changelog"]
    assert kafka.described == {"state": "Stable", "members": 3, "active": sorted(ALL_TASKS)}
