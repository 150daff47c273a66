"""Group coordinator: rebalance time and offset-commit throughput / p99.

Run by hand, two ways:

  python bench/group_bench.py --clients [--tansu --tansu-bin PATH] [--members 10] [--rounds 3]
         [--commits 2000] [--heartbeat-ms 500]
      Real librdkafka consumers (confluent-kafka, one thread each) against a `skiff dev` node it
      starts in a temp dir (and then against Tansu, printing skiff/tansu ratios): time until a
      10-member group on 60 partitions is balanced again after an 11th member is created
      (classic eager range, and group.protocol=consumer), judged by the members' own
      assign/revoke callbacks; synchronous commit throughput, p50 and p99, and asynchronous
      commit throughput. Figures: docs/benchmarks.md.

  python bench/group_bench.py [--members 10] [--commits 5000] [--heartbeat-ms 100]
      In-process, no network: simulated members call the GroupCoordinatorService the way
      clients drive the protocol, on a real LogManager and ReplicaManager (acks=all, one
      replica) in a temporary directory:

  classic   10 members Stable; an 11th joins; time until every member has its SyncGroup answer
            for the new generation. Members learn of the rebalance from their heartbeat
            (REBALANCE_IN_PROGRESS) every --heartbeat-ms, as clients do.
  KIP-848   10 members Stable on a 60-partition topic; an 11th joins; time until every member is
            at the new epoch and owns exactly its target (revocations acknowledged on the next
            heartbeat, as clients do), heartbeats every --heartbeat-ms.
  commits   sequential and 16-way concurrent OffsetCommit of one partition each: throughput and
            p99, against the limit measured in the same run: the raw acks=all append of the same
            record through the ReplicaManager, with no coordinator in front.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import structlog
from kio.schema.errors import ErrorCode

from broker.group.consumer import ConsumerHeartbeatRequest
from broker.group.records import OFFSETS_TOPIC, encode_offset_commit_key
from broker.group.shell import GroupCoordinatorService
from broker.group.types import (
    CommitPartition,
    HeartbeatRequest,
    JoinGroupRequest,
    OffsetCommitRequest,
    SyncGroupRequest,
)
from broker.log import LogConfig, LogManager
from broker.metadata.image import (
    BrokerRegistration,
    Endpoint,
    PartitionRegistration,
    TopicImage,
)
from broker.metadata.publisher import MetadataPublisher
from broker.protocol.records import Record, build_batch
from broker.replication import ReplicaManager

CONFIG = {
    "offsets.topic.num.partitions": 1, "offsets.topic.replication.factor": 1,
    "offsets.topic.segment.bytes": 1 << 26, "offsets.commit.timeout.ms": 5000,
    "offsets.retention.minutes": 10080, "offsets.retention.check.interval.ms": 600000,
    "offset.metadata.max.bytes": 4096, "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 10, "group.max.session.timeout.ms": 600000,
    "group.max.size": 1000,
}


class BenchNode:
    def __init__(self, path: Path, heartbeat_ms: int) -> None:
        self.node_id = 1
        self.config = {**CONFIG, "group.consumer.heartbeat.interval.ms": heartbeat_ms}
        self.clock = lambda: time.time_ns() // 1_000_000
        self.logs = LogManager([path], LogConfig(), self.clock)
        self.logs.load()
        self.replicas = ReplicaManager(1, self.logs, self.clock)
        self.publisher = MetadataPublisher("bench")
        self.publisher.subscribe(self._apply)
        broker = BrokerRegistration(1, 1, uuid.uuid4(), (Endpoint("PLAINTEXT", "h", 1),),
                                    fenced=False)
        topics = {OFFSETS_TOPIC: 1, "t": 60, "raw": 1}
        by_id, by_name = {}, {}
        for name, n in topics.items():
            t = TopicImage(name, uuid.uuid4(), {i: PartitionRegistration((1,), (1,), leader=1)
                                                for i in range(n)})
            by_id[t.topic_id] = t
            by_name[name] = t
        self.publisher.load_snapshot(replace(self.publisher.image, offset=0, brokers={1: broker},
                                             topics_by_id=by_id, topics_by_name=by_name))
        self.group_coordinator = GroupCoordinatorService(self, rng=random.Random(1),
                                                         tick_interval_s=0.01)

    @property
    def metadata(self) -> Any:
        return self.publisher.image

    def _apply(self, old: Any, new: Any, delta: Any) -> None:
        for topic in new.topics_by_id.values():
            for index, reg in topic.partitions.items():
                self.replicas.apply_partition(
                    topic=topic.name, topic_id=topic.topic_id, index=index, leader=1,
                    leader_epoch=reg.leader_epoch, partition_epoch=0, replicas=(1,), isr=(1,),
                    min_insync_replicas=1, log_config=LogConfig())

    async def start(self) -> None:
        self.group_coordinator.start()
        while not self.group_coordinator.coordinators:  # noqa: ASYNC110 (polls state that no event signals)
            await asyncio.sleep(0.005)

    async def stop(self) -> None:
        await self.group_coordinator.stop()
        for p in list(self.replicas.partitions()):
            p.close()
        self.logs.shutdown()


# ---- classic ------------------------------------------------------------------------------


class ClassicMember:
    def __init__(self, svc: GroupCoordinatorService, group: str, heartbeat_ms: int) -> None:
        self.svc, self.group, self.heartbeat_ms = svc, group, heartbeat_ms
        self.member_id = ""
        self.generation = -1
        self.synced = asyncio.Event()

    def _join_req(self) -> JoinGroupRequest:
        return JoinGroupRequest(self.group, self.member_id, None, "bench", "/h", 30_000, 30_000,
                                "consumer", (("range", b"meta"),))

    async def join_and_sync(self) -> None:
        while True:
            r = await self.svc.join_group(self._join_req())
            if r.error is ErrorCode.member_id_required:
                self.member_id = r.member_id
                continue
            if r.error is not ErrorCode.none:
                await asyncio.sleep(0.001)
                continue
            self.member_id, self.generation = r.member_id, r.generation_id
            assignments = tuple((m.member_id, b"a") for m in r.members)
            s = await self.svc.sync_group(SyncGroupRequest(
                self.group, self.generation, self.member_id, None, "consumer", "range",
                assignments))
            if s.error is ErrorCode.none:
                self.synced.set()
                return

    async def run(self) -> None:
        await self.join_and_sync()
        while True:
            await asyncio.sleep(self.heartbeat_ms / 1000)
            err = self.svc.heartbeat(HeartbeatRequest(self.group, self.generation,
                                                      self.member_id, None))
            if err is ErrorCode.rebalance_in_progress:
                self.synced.clear()
                await self.join_and_sync()


async def classic_rebalance(svc: GroupCoordinatorService, n: int, heartbeat_ms: int,
                            group: str) -> float:
    members = [ClassicMember(svc, group, heartbeat_ms) for _ in range(n)]
    tasks = [asyncio.ensure_future(m.run()) for m in members]
    await asyncio.wait_for(asyncio.gather(*(m.synced.wait() for m in members)), 60)
    while len({m.generation for m in members}) != 1:  # noqa: ASYNC110 (polls state that no event signals)
        await asyncio.sleep(0.01)
    await asyncio.sleep(heartbeat_ms / 1000 * 1.5)
    start = time.perf_counter()
    new = ClassicMember(svc, group, heartbeat_ms)
    tasks.append(asyncio.ensure_future(new.run()))
    everyone = [*members, new]
    gen0 = members[0].generation
    while not (all(m.synced.is_set() and m.generation > gen0 for m in everyone)  # noqa: ASYNC110 (polls state that no event signals)
               and len({m.generation for m in everyone}) == 1):
        await asyncio.sleep(0.001)
    elapsed = time.perf_counter() - start
    for t in tasks:
        t.cancel()
    return elapsed


# ---- KIP-848 --------------------------------------------------------------------------------


async def consumer_rebalance(svc: GroupCoordinatorService, n: int, heartbeat_ms: int,
                             group: str) -> float:
    state: dict[str, tuple[int, Any]] = {}

    def beat(member: str, epoch: int, owned: Any, topics: Any = None) -> None:
        r = svc.consumer_group_heartbeat(ConsumerHeartbeatRequest(
            group, member, epoch, rebalance_timeout_ms=30_000, subscribed_topic_names=topics,
            owned_partitions=owned))
        assert r.error is ErrorCode.none, r
        prev = state.get(member, (0, ()))[1]
        state[member] = (r.member_epoch, r.assignment if r.assignment is not None else prev)

    async def member_loop(member: str) -> None:
        beat(member, 0, (), ("t",))
        while True:
            await asyncio.sleep(heartbeat_ms / 1000)
            epoch, owned = state[member]
            beat(member, epoch, owned)

    def settled() -> bool:
        _, coord = svc.coordinator_for(group)
        g = coord.consumer_groups[group]
        return g.state.value == "Stable" and all(
            state[m][0] == g.assignment_epoch for m in g.members)

    ids = [f"m{i}" for i in range(n)]
    tasks = [asyncio.ensure_future(member_loop(m)) for m in ids]
    while len(state) < n or not settled():  # noqa: ASYNC110 (polls state that no event signals)
        await asyncio.sleep(0.005)
    start = time.perf_counter()
    tasks.append(asyncio.ensure_future(member_loop("new")))
    while "new" not in state or not settled():  # noqa: ASYNC110 (polls state that no event signals)
        await asyncio.sleep(0.001)
    elapsed = time.perf_counter() - start
    for t in tasks:
        t.cancel()
    owned = [p for m in state for _, ps in state[m][1] for p in ps]
    assert len(owned) == len(set(owned)) == 60, "every partition owned once"
    return elapsed


# ---- commits ---------------------------------------------------------------------------------


async def commits(svc: GroupCoordinatorService, count: int, concurrency: int,
                  ) -> tuple[float, float]:
    latencies: list[float] = []
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with sem:
            t0 = time.perf_counter()
            r = await svc.commit_offsets(OffsetCommitRequest(
                "commit-group", -1, "", None, (CommitPartition("t", i % 60, i),)))
            assert r.partitions[0][1] is ErrorCode.none, r
            latencies.append(time.perf_counter() - t0)

    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(count)))
    elapsed = time.perf_counter() - start
    return count / elapsed, statistics.quantiles(latencies, n=100)[98] * 1000


async def raw_appends(node: BenchNode, count: int, concurrency: int) -> tuple[float, float]:
    latencies: list[float] = []
    sem = asyncio.Semaphore(concurrency)
    key = encode_offset_commit_key("commit-group", "t", 0)
    value = b"\x00\x03" + b"\x00" * 26

    async def one(i: int) -> None:
        async with sem:
            t0 = time.perf_counter()
            batch = build_batch([Record(timestamp=node.clock(), key=key, value=value)])
            res = await node.replicas.append({("raw", 0): batch}, required_acks=-1,
                                             timeout_ms=5000)
            assert not isinstance(res[("raw", 0)], Exception)
            latencies.append(time.perf_counter() - t0)

    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(count)))
    elapsed = time.perf_counter() - start
    return count / elapsed, statistics.quantiles(latencies, n=100)[98] * 1000


# ---- real clients: librdkafka (confluent-kafka) against a `skiff dev` node, and Tansu -----------


class ClientMember(threading.Thread):
    """One librdkafka consumer in its own thread, owning what its callbacks say it owns."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str, protocol: str,
                 heartbeat_ms: int) -> None:
        super().__init__(name=name, daemon=True)
        self.conf: dict[str, Any] = {
            "bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
            "enable.auto.commit": False, "log_level": 0,
        }
        if protocol == "consumer":
            self.conf["group.protocol"] = "consumer"
        else:
            self.conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": heartbeat_ms,
                              "partition.assignment.strategy": "range"})
        self.topic = topic
        self.owned: set[int] = set()
        self.lock = threading.Lock()
        self.halt = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Consumer

        c = Consumer(self.conf)

        def add(_c: Any, ps: list[Any]) -> None:
            with self.lock:
                self.owned |= {tp.partition for tp in ps}

        def drop(_c: Any, ps: list[Any]) -> None:
            with self.lock:
                self.owned -= {tp.partition for tp in ps}

        c.subscribe([self.topic], on_assign=add, on_revoke=drop, on_lost=drop)
        while not self.halt.is_set():
            c.poll(0.05)
        c.close()


def _balanced(members: list[ClientMember], partitions: int) -> bool:
    sets = []
    for m in members:
        with m.lock:
            sets.append(set(m.owned))
    lo = partitions // len(members)
    return (sum(len(x) for x in sets) == partitions
            and set().union(*sets) == set(range(partitions))
            and all(lo <= len(x) <= lo + 1 for x in sets))


def _wait(pred: Any, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return time.monotonic()
        time.sleep(0.005)
    raise TimeoutError("group did not settle")


def client_rebalance(bootstrap: str, topic: str, partitions: int, members: int,
                     protocol: str, heartbeat_ms: int, tag: str) -> float:
    group = f"bench-{protocol}-{tag}-{time.time_ns()}"
    ms = [ClientMember(f"m{i}", bootstrap, group, topic, protocol, heartbeat_ms)
          for i in range(members)]
    try:
        for m in ms:
            m.start()
        _wait(lambda: _balanced(ms, partitions), 120)
        time.sleep(1.0)  # settled
        t0 = time.monotonic()
        new = ClientMember(f"m{members}", bootstrap, group, topic, protocol, heartbeat_ms)
        ms.append(new)
        new.start()
        return _wait(lambda: _balanced(ms, partitions), 120) - t0
    finally:
        for m in ms:
            m.halt.set()
        for m in ms:
            m.join(timeout=30)


def client_commits(bootstrap: str, topic: str, count: int) -> tuple[float, float, float, float]:
    """Synchronous commits one after another: (per second, p50 ms, p99 ms); then `count`
    asynchronous commits in flight together: per second."""
    from confluent_kafka import Consumer, TopicPartition

    done = [0]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-commit-{time.time_ns()}",
                  "enable.auto.commit": False, "log_level": 0,
                  "on_commit": lambda err, _ps: done.__setitem__(0, done[0] + 1)})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        c.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)  # coordinator found
        lat = []
        t0 = time.perf_counter()
        for i in range(1, count + 1):
            t = time.perf_counter()
            c.commit(offsets=[TopicPartition(topic, 0, i)], asynchronous=False)
            lat.append(time.perf_counter() - t)
        sync_rate = count / (time.perf_counter() - t0)
        q = statistics.quantiles(lat, n=100)
        done[0] = 0
        t0 = time.perf_counter()
        for i in range(count):
            c.commit(offsets=[TopicPartition(topic, 0, count + i)], asynchronous=True)
        deadline = time.monotonic() + 120
        while done[0] < count and time.monotonic() < deadline:
            c.poll(0.01)
        async_rate = done[0] / (time.perf_counter() - t0)
        return sync_rate, q[49] * 1000, q[98] * 1000, async_rate
    finally:
        c.close()


def clients_main(args: argparse.Namespace) -> None:
    import os
    from unittest import mock

    from perf import find_tansu, start_tansu

    from broker.testing import admin as adm
    from broker.testing.node import SkiffNode

    partitions = 60
    results: dict[str, dict[str, float]] = {}
    targets = ["skiff"] + (["tansu"] if args.tansu else [])
    for target in targets:
        with tempfile.TemporaryDirectory() as tmp:
            if target == "skiff":
                env = {"SKIFF_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS": str(args.heartbeat_ms),
                       "SKIFF_GROUP_CONSUMER_SESSION_TIMEOUT_MS": "6000",
                       "SKIFF_OFFSETS_TOPIC_NUM_PARTITIONS": "8"}
                node = SkiffNode(Path(tmp) / "skiff")
                with mock.patch.dict(os.environ, env):
                    node.start()
                node.wait_ready()
                bootstrap, stop = node.bootstrap, node.close
            else:
                broker = start_tansu(find_tansu(args.tansu_bin), Path(tmp))
                bootstrap, stop = broker.bootstrap, broker.stop
            try:
                topic = "bench-groups"
                adm.create_topic(bootstrap, topic, partitions)
                adm.wait_topic_ready(bootstrap, topic, partitions)
                r: dict[str, float] = {}
                protocols = ["classic", "consumer"] if target == "skiff" else ["classic"]
                for proto in protocols:
                    times = [client_rebalance(bootstrap, topic, partitions, args.members, proto,
                                              args.heartbeat_ms, str(i))
                             for i in range(args.rounds)]
                    r[f"rebalance {proto} ms"] = statistics.median(times) * 1000
                    print(f"[{target}] {proto:8s} {args.members}+1 members: "
                          + ", ".join(f"{t * 1000:.0f}" for t in times) + " ms", flush=True)
                sync_rate, p50, p99, async_rate = client_commits(bootstrap, topic, args.commits)
                r.update({"sync commits/s": sync_rate, "sync commit p50 ms": p50,
                          "sync commit p99 ms": p99, "async commits/s": async_rate})
                print(f"[{target}] commits: sync {sync_rate:.0f}/s p50 {p50:.2f} ms "
                      f"p99 {p99:.2f} ms; async {async_rate:.0f}/s", flush=True)
                results[target] = r
            finally:
                stop()
    print(f"\n{'measure':28s}{'skiff':>12s}" + (f"{'tansu':>12s}{'skiff/tansu':>14s}"
                                               if "tansu" in results else ""))
    for k, v in results["skiff"].items():
        line = f"{k:28s}{v:12.1f}"
        other = results.get("tansu", {}).get(k)
        if other is not None:
            line += f"{other:12.1f}{v / other:14.2f}"
        print(line)


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", action="store_true",
                    help="real librdkafka consumers (threads) against a `skiff dev` node")
    ap.add_argument("--tansu", action="store_true", help="with --clients: also run on Tansu")
    ap.add_argument("--tansu-bin", help="path to the tansu binary")
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--commits", type=int, default=5000)
    ap.add_argument("--heartbeat-ms", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if args.clients:
        clients_main(args)
        return
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    with tempfile.TemporaryDirectory() as tmp:
        node = BenchNode(Path(tmp), args.heartbeat_ms)
        await node.start()
        svc = node.group_coordinator
        try:
            hb = args.heartbeat_ms
            classic = [await classic_rebalance(svc, args.members, hb, f"classic-{i}")
                       for i in range(args.rounds)]
            kip848 = [await consumer_rebalance(svc, args.members, hb, f"consumer-{i}")
                      for i in range(args.rounds)]
            print(f"rebalance after 1 join, {args.members}+1 members, heartbeat {hb} ms "
                  f"(median of {args.rounds}):")
            print(f"  classic  {statistics.median(classic) * 1000:8.1f} ms "
                  f"= {statistics.median(classic) * 1000 / hb:.2f} heartbeat intervals")
            print(f"  KIP-848  {statistics.median(kip848) * 1000:8.1f} ms "
                  f"= {statistics.median(kip848) * 1000 / hb:.2f} heartbeat intervals")
            for conc in (1, 16):
                limit_tput, limit_p99 = await raw_appends(node, args.commits, conc)
                tput, p99 = await commits(svc, args.commits, conc)
                print(f"offset commits, concurrency {conc:2d}: {tput:8.0f}/s p99 {p99:6.2f} ms"
                      f" | raw acks=all append {limit_tput:8.0f}/s p99 {limit_p99:6.2f} ms"
                      f" | ratio {tput / limit_tput:.2f}")
        finally:
            await node.stop()


if __name__ == "__main__":
    asyncio.run(main())
