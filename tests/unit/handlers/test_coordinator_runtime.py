"""The coordinator runtime (broker/coordinator/runtime.py) on its own, under a small key-value
core, on real logs and a real replica manager (here, beside the handler tests, for their node
helper GroupNode): FindCoordinator creates the topic, loads follow leadership and its epochs,
writes are appended before their reply, a reload replays the log, unloading answers the
waiting requests and cancels the partition's tasks."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from group_node import NODE_ID, GroupNode, anyio_backend_fixture  # noqa: F401
from kio.schema.errors import ErrorCode
from structlog.testing import capture_logs

from broker.coordinator.runtime import CoordinatorRuntime
from broker.errors import KafkaError
from broker.protocol.records import Record, build_batch

pytestmark = pytest.mark.anyio

TOPIC = "__kv_state"


@dataclass(frozen=True)
class Reply:
    token: int
    result: Any


@dataclass(frozen=True)
class Put:
    write_id: int
    key: str
    value: str


@dataclass
class Fx:
    replies: list[Reply] = field(default_factory=list)
    writes: list[Put] = field(default_factory=list)


class KvCore:
    """A pure core: put(k, v) writes a record and answers once the write completed; wait()
    answers only when unloaded."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.data: dict[str, str] = {}
        self.waiting: list[int] = []
        self.ticks = 0
        self._puts: dict[int, tuple[int, str, str]] = {}
        self._ids = itertools.count(1)

    def put(self, token: int, key: str, value: str) -> Fx:
        write_id = next(self._ids)
        self._puts[write_id] = (token, key, value)
        return Fx(writes=[Put(write_id, key, value)])

    def wait(self, token: int) -> Fx:
        self.waiting.append(token)
        return Fx()

    def write_completed(self, write_id: int, error: ErrorCode, now_ms: int) -> Fx:
        token, key, value = self._puts.pop(write_id)
        if error is ErrorCode.none:
            self.data[key] = value
        return Fx(replies=[Reply(token, error)])

    def tick(self, now_ms: int) -> Fx:
        self.ticks += 1
        return Fx()

    def unload(self) -> Fx:
        tokens = self.waiting + [t for t, _, _ in self._puts.values()]
        self.waiting, self._puts = [], {}
        return Fx(replies=[Reply(t, ErrorCode.not_coordinator) for t in tokens])


class KvShards:
    def __init__(self) -> None:
        self.loaded_at: list[tuple[int, int]] = []
        self.abandoned: list[int] = []

    def new_coordinator(self, partition: int, epoch: int, now_ms: int) -> KvCore:
        return KvCore(epoch)

    def replay(self, partition: int, coord: KvCore, plog: Any, offset: int, upto: int) -> int:
        records = [r for r in plog.read_records(offset, upto) if r.key is not None]
        for r in records:
            coord.data[r.key.decode()] = r.value.decode()
        return len(records)

    def loaded(self, partition: int, coord: KvCore, now_ms: int) -> None:
        self.loaded_at.append((partition, coord.epoch))

    def load_abandoned(self, partition: int) -> None:
        self.abandoned.append(partition)

    def unloaded(self, partition: int, coord: KvCore, now_ms: int) -> Fx:
        return coord.unload()

    def log_counts(self, coord: KvCore) -> dict[str, int]:
        return {"keys": len(coord.data)}

    def record_batch(self, partition: int, write: Put, now_ms: int) -> bytes:
        return build_batch([Record(timestamp=now_ms, key=write.key.encode(),
                                   value=write.value.encode())])

    def more_effects(self, partition: int, coord: KvCore, fx: Fx) -> None:
        return None

    def new_topic(self, live_brokers: int) -> tuple[int, int, dict[str, str]]:
        return 4, live_brokers, {"cleanup.policy": "compact"}


def runtime_on(node: GroupNode) -> CoordinatorRuntime[KvCore]:
    return CoordinatorRuntime(node, KvShards(), name="kv", topic=TOPIC,
                              partitions_key="offsets.topic.num.partitions",
                              topic_log_name="kv_topic", write_timeout_ms=2000,
                              tick_interval_s=0.02)


async def until(condition: Any, what: str, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.01)


async def put(rt: CoordinatorRuntime[KvCore], key: str, value: str) -> Any:
    return await rt.call(key, lambda c, token, now: c.put(token, key, value))


@pytest.fixture(name="kv")
async def kv_fixture(tmp_path: Path) -> Any:
    node = GroupNode(tmp_path)
    rt = runtime_on(node)
    rt.start()
    try:
        yield node, rt
    finally:
        await rt.stop()
        await node.stop()


async def test_locate_creates_the_topic_then_writes_are_logged_before_their_reply(
        kv: tuple[GroupNode, CoordinatorRuntime[KvCore]]) -> None:
    node, rt = kv
    with pytest.raises(KafkaError) as no_topic:
        rt.coordinator_for("k")
    assert no_topic.value.error_code is ErrorCode.not_coordinator
    assert await rt.locate("k", "PLAINTEXT") == (ErrorCode.none, NODE_ID, "127.0.0.1", 9092,
                                                 None)
    assert [(t.name, t.num_partitions) for t in node.controller.calls] == [(TOPIC, 4)]
    await rt.locate("k", "PLAINTEXT")
    assert len(node.controller.calls) == 1  # created once
    await until(lambda: len(rt.coordinators) == 4, "partitions not loaded")
    assert await put(rt, "k", "v1") is ErrorCode.none
    p, coord = rt.coordinator_for("k")
    assert coord.data == {"k": "v1"}
    part = node.replicas.get(TOPIC, p)
    assert part is not None and part.high_watermark == 1
    assert [(r.key, r.value) for r in part.log.read_records(0)] == [(b"k", b"v1")]
    ticks = coord.ticks
    await until(lambda: coord.ticks > ticks, "no tick")


async def test_a_new_leader_epoch_reloads_the_partition_from_its_log(
        kv: tuple[GroupNode, CoordinatorRuntime[KvCore]]) -> None:
    node, rt = kv
    await rt.ensure_topic()
    await until(lambda: len(rt.coordinators) == 4, "partitions not loaded")
    assert await put(rt, "k", "v1") is ErrorCode.none
    assert await put(rt, "k", "v2") is ErrorCode.none
    p, before = rt.coordinator_for("k")
    node.add_topic(TOPIC, 4, epoch=1)
    # unloaded at once; the load of epoch 1 has not run yet
    assert rt.coordinators == {} and set(rt.loading) == {0, 1, 2, 3}
    with pytest.raises(KafkaError) as loading:
        rt.coordinator_for("k")
    assert loading.value.error_code is ErrorCode.coordinator_load_in_progress
    await until(lambda: len(rt.coordinators) == 4, "partitions not reloaded")
    _, after = rt.coordinator_for("k")
    assert after is not before and after.epoch == 1 and after.data == {"k": "v2"}
    assert (p, 1) in rt.shards.loaded_at  # type: ignore[attr-defined]


async def test_a_load_overtaken_by_a_newer_epoch_is_abandoned(
        kv: tuple[GroupNode, CoordinatorRuntime[KvCore]]) -> None:
    node, rt = kv
    await rt.ensure_topic()
    await until(lambda: len(rt.coordinators) == 4, "partitions not loaded")
    node.add_topic(TOPIC, 4, epoch=1)
    node.add_topic(TOPIC, 4, epoch=2)
    assert sorted(rt.shards.abandoned) == [0, 1, 2, 3]  # type: ignore[attr-defined]
    await until(lambda: len(rt.coordinators) == 4, "partitions not reloaded")
    assert {c.epoch for c in rt.coordinators.values()} == {2}
    assert not [e for _, e in rt.shards.loaded_at if e == 1]  # type: ignore[attr-defined]


async def test_losing_leadership_answers_the_waiting_and_cancels_the_partitions_tasks(
        kv: tuple[GroupNode, CoordinatorRuntime[KvCore]]) -> None:
    node, rt = kv
    await rt.ensure_topic()
    await until(lambda: len(rt.coordinators) == 4, "partitions not loaded")
    p, _ = rt.coordinator_for("k")
    waiting = asyncio.ensure_future(rt.call("k", lambda c, token, now: c.wait(token)))
    side = asyncio.Event()
    rt.spawn_for(p, side.wait, name="kv_side")
    await asyncio.sleep(0.05)
    tasks = [t for t in asyncio.all_tasks() if t.get_name() == "kv_side"]
    assert not waiting.done() and len(tasks) == 1
    with capture_logs() as logs:
        node.add_topic(TOPIC, 4, leader=2, epoch=1)
    # one line for the four partitions unloaded at once, not one each (issue 31)
    unloaded = [e for e in logs if e["event"] == "kv_coordinator_unloaded"]
    assert [(e["partitions"], e["count"], e["reason"]) for e in unloaded] == [
        ("0-3", 4, "leadership moved")], logs
    assert await asyncio.wait_for(waiting, 5) is ErrorCode.not_coordinator
    await until(lambda: tasks[0].done(), "the partition's task was not cancelled")
    assert not side.is_set()
    await asyncio.sleep(0.1)  # ticks re-check leadership: nothing loads
    assert rt.coordinators == {} and rt.loading == {}
    with pytest.raises(KafkaError) as elsewhere:
        rt.coordinator_for("k")
    assert elsewhere.value.error_code is ErrorCode.not_coordinator
    assert await rt.locate("k", "PLAINTEXT") == (ErrorCode.coordinator_not_available, -1, "",
                                                 -1, None)  # broker 2 is not registered


async def test_a_failed_append_reaches_the_core_as_its_error(
        kv: tuple[GroupNode, CoordinatorRuntime[KvCore]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    node, rt = kv
    await rt.ensure_topic()
    await until(lambda: len(rt.coordinators) == 4, "partitions not loaded")

    class Refusing:  # the node's replicas, with every append refused
        def __init__(self, replicas: Any) -> None:
            self.replicas = replicas

        def __getattr__(self, name: str) -> Any:
            return getattr(self.replicas, name)

        async def append(self, *args: Any, **kwargs: Any) -> Any:
            raise KafkaError(ErrorCode.not_enough_replicas, "test")

    # a wrapper, not a patched method: ReplicaManager may be compiled (broker/native.py)
    monkeypatch.setattr(node, "replicas", Refusing(node.replicas))
    assert await put(rt, "k", "v") is ErrorCode.not_enough_replicas
    assert rt.coordinator_for("k")[1].data == {}


async def test_stop_unloads_everything(tmp_path: Path) -> None:
    node = GroupNode(tmp_path)
    rt = runtime_on(node)
    rt.start()
    try:
        await rt.ensure_topic()
        await until(lambda: len(rt.coordinators) == 4, "partitions not loaded")
        waiting = asyncio.ensure_future(rt.call("k", lambda c, token, now: c.wait(token)))
        await asyncio.sleep(0.02)
        with capture_logs() as logs:
            await rt.stop()
        assert rt.coordinators == {}
        unloaded = [e for e in logs if e["event"] == "kv_coordinator_unloaded"]
        assert [(e["partitions"], e["count"], e["reason"]) for e in unloaded] == [
            ("0-3", 4, "shutdown")], logs
        assert await asyncio.wait_for(waiting, 5) is ErrorCode.not_coordinator
        node.add_topic(TOPIC, 4, epoch=1)  # stopped: no longer follows the metadata
        assert rt.loading == {}
    finally:
        await node.stop()
