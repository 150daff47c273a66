"""A big metadata change reaches the replicas in slices that yield to the event loop, so
a broker applying thousands of new partitions keeps heartbeating (issue 17: every broker
of a 3+3 cluster was fenced while applying the deltas of 100,000 partitions)."""

from __future__ import annotations

import asyncio
import time
import uuid
from types import SimpleNamespace
from typing import Any

from broker.config import build_config
from broker.metadata.image import PartitionRegistration
from broker.replication import sync as sync_mod
from broker.replication.sync import ReplicaSync

CFG = build_config({
    "process.roles": "broker", "node.id": "4",
    "controller.quorum.voters": "1@127.0.0.1:19093",
    "listeners": "PLAINTEXT://127.0.0.1:19092", "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "log.dirs": "/nonexistent/skiff"}, warn=lambda m: None)


class SlowReplicas:
    """Each partition costs 0.2 ms of CPU, as creating its log does (more, really)."""

    def __init__(self) -> None:
        self.applied: list[tuple[str, int]] = []
        self.removed: list[tuple[str, int]] = []

    def apply_partition(self, *, topic: str, index: int, **_: Any) -> None:
        end = time.perf_counter() + 0.0002
        while time.perf_counter() < end:
            pass
        self.applied.append((topic, index))

    def remove(self, topic: str, index: int, *, delete_log: bool) -> None:
        self.removed.append((topic, index))

    def partitions(self) -> list[Any]:
        return []


def image_with(topics: dict[str, int],
               broker_configs: dict[str, dict[str, str]] | None = None) -> Any:
    reg = PartitionRegistration(leader=4, leader_epoch=0, partition_epoch=0, replicas=(4,),
                                isr=(4,))
    by_id = {uuid.uuid4(): SimpleNamespace(name=n, topic_id=None,
                                           partitions=dict.fromkeys(range(p), reg))
             for n, p in topics.items()}
    for tid, t in by_id.items():
        t.topic_id = tid
    by_name = {t.name: t for t in by_id.values()}
    configs = broker_configs or {}
    return SimpleNamespace(
        topics_by_id=by_id, topic=by_name.get, topic_config=lambda name: {},
        broker_config=lambda broker_id=None: configs.get(
            "" if broker_id is None else str(broker_id), {}))


def delta_creating(image: Any, deleted: dict[str, int] | None = None) -> Any:
    return SimpleNamespace(
        deleted_topics={i: SimpleNamespace(name=n, partitions=range(p))
                        for i, (n, p) in enumerate((deleted or {}).items())},
        changed_partitions={(tid, p) for tid, t in image.topics_by_id.items()
                            for p in t.partitions},
        changed_configs=set())


def test_a_small_delta_is_applied_within_the_publish() -> None:
    replicas = SlowReplicas()
    sync = ReplicaSync(CFG, replicas)  # type: ignore[arg-type]
    img = image_with({"small": 10})

    async def go() -> None:
        sync(img, img, delta_creating(img))
        assert len(replicas.applied) == 10 and sync.pending == 0

    asyncio.run(go())


def test_a_big_delta_is_applied_in_slices_and_in_order() -> None:
    replicas = SlowReplicas()
    sync = ReplicaSync(CFG, replicas)  # type: ignore[arg-type]
    big = image_with({f"t{i}": 100 for i in range(30)})  # 3,000 partitions, ~0.6 s

    async def go() -> int:
        ticks_while_pending = 0
        stop = False

        async def heartbeat() -> None:
            # stands for the broker's heartbeat: it runs whenever the loop is free
            nonlocal ticks_while_pending
            while not stop:
                await asyncio.sleep(0)
                if sync.pending:
                    ticks_while_pending += 1

        beat = asyncio.create_task(heartbeat())
        await asyncio.sleep(0)
        sync(big, big, delta_creating(big))
        assert len(replicas.applied) < 3000 and sync.pending > 0  # not all at once
        # a later, small change queues behind the backlog: replicas never go back
        sync(big, big, delta_creating(image_with({}), deleted={"t0": 100}))
        await sync.wait_applied()
        stop = True
        await beat
        return ticks_while_pending

    ticks = asyncio.run(go())
    assert len(replicas.applied) == 3000 and sync.pending == 0
    # each slice lasts at most SLICE_S of work (3,000 x 0.2 ms = 0.6 s: many slices), and
    # the loop ran other tasks between every two of them
    assert sync.slices >= 0.6 / sync_mod.SLICE_S / 2
    assert ticks >= sync.slices - 1
    assert replicas.removed == [("t0", i) for i in range(100)]
    assert sync_mod.SLICE_S <= 0.02


class RecordingReplicas(SlowReplicas):
    def __init__(self) -> None:
        super().__init__()
        self.log_configs: dict[tuple[str, int], Any] = {}

    def apply_partition(self, *, topic: str, index: int, **kw: Any) -> None:
        self.log_configs[(topic, index)] = kw["log_config"]


def test_a_dynamic_broker_default_reaches_every_topic_log() -> None:
    """kafka-configs --alter --entity-type brokers --entity-name 4 --add-config
    log.retention.bytes=...: Kafka applies it to every log of that broker whose topic does not
    override it (and the cluster default, --entity-default, to every broker's)."""
    from broker.metadata.records import RESOURCE_BROKER

    replicas = RecordingReplicas()
    sync = ReplicaSync(CFG, replicas)  # type: ignore[arg-type]
    img = image_with({"a": 2, "b": 1})
    sync(img, img, delta_creating(img))
    assert {c.retention_bytes for c in replicas.log_configs.values()} == {-1}
    for name, configs, want in (
            ("", {"": {"log.retention.bytes": "5000"}}, 5000),
            ("4", {"": {"log.retention.bytes": "5000"}, "4": {"log.retention.bytes": "7000"}},
             7000),
            ("5", {"5": {"log.retention.bytes": "9000"}}, -1)):
        replicas.log_configs.clear()
        new = image_with({}, configs)
        new.topics_by_id, new.topic = img.topics_by_id, img.topic
        delta = SimpleNamespace(deleted_topics={}, changed_partitions=set(),
                                changed_configs={(RESOURCE_BROKER, name)})
        sync(img, new, delta)
        if name == "5":  # another broker's own config: nothing here changes
            assert replicas.log_configs == {}
        else:
            assert {c.retention_bytes for c in replicas.log_configs.values()} == {want}
            assert len(replicas.log_configs) == 3
