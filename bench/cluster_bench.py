"""Cluster benchmarks (issue 5), on a real 3-controller + 3-broker Skiff cluster on
127.0.0.1 (broker/testing/cluster.py), run by hand:

  failover     kill -9 the broker leading a partition (RF=3, min.insync.replicas=2) while a
               librdkafka producer (acks=all) writes every few ms; the time from the kill
               until a record produced after it is acknowledged. --rounds times; median.
  replication  produce throughput (librdkafka, acks as stated, 100 B records, 3 partitions
               led by the 3 brokers) to RF=1, RF=3 acks=1 and RF=3 acks=all topics in the
               same cluster and run, as ratios to RF=1, after one uncounted warm-up round
               of every case. The load comes from confluent-kafka driven by a Python loop,
               or with --producer kcat from kcat reading a file (half the CPU per record).
               --pin runs the cluster on CPU 1 and the producer on CPU 0, as a producer on
               its own machine would run; by default all share both cores.
  roles        the same RF=3 acks=1 load on one topic whose partitions are all led by one
               broker: CPU per 100k records of the leader and of each follower.
  failover --combined
               the same on 3 combined broker+controller nodes, killing the node that is
               both the active controller and the partition's leader (each round a new
               topic whose preferred leader is the active controller): the new controller
               has no heartbeat history of the dead broker (issue 31 point 3).
  metadata     create --partitions partitions (topics of 100), the time until every broker
               serves Metadata for all of them; the controller's failover time with them
               (kill -9 the active controller until a CreateTopics through a broker
               succeeds); and the memory of the metadata image per 10,000 partitions
               (tracemalloc, in this process, built by the pure controller).

    python bench/cluster_bench.py failover --rounds 5
    python bench/cluster_bench.py failover --combined --rounds 5
    python bench/cluster_bench.py replication --messages 1500000 --repeats 5
    python bench/cluster_bench.py replication --messages 1500000 --repeats 5 \
        -C replica.fetch.min.bytes=1048576 -C replica.fetch.wait.max.ms=20
    python bench/cluster_bench.py replication --messages 1500000 --repeats 9 --pin
    python bench/cluster_bench.py replication --messages 1500000 --repeats 15 --producer kcat
    python bench/cluster_bench.py roles --messages 1500000 --repeats 5
    python bench/cluster_bench.py metadata --partitions 10000
"""

from __future__ import annotations

import argparse
import functools
import gc
import multiprocessing as mp
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.keyvalue import key_value  # noqa: E402
from bench.perf import proc_user_system_s  # noqa: E402
from broker.testing.cluster import Cluster  # noqa: E402


def create_topic(c: Cluster, name: str, partitions: int, rf: int,
                 configs: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import NewTopic

    broker = c.broker_ids[0]
    c.admin(broker).create_topics([NewTopic(name, partitions, rf, config=configs or {})],
                                  operation_timeout=60)[name].result(120)
    c.wait_for(lambda: len(c.metadata(broker).topics.get(name).partitions) == partitions
               and all(p.leader >= 0 for p in c.metadata(broker).topics[name].partitions.values()),
               60, f"{name} led")


def full_isr(c: Cluster, name: str) -> bool:
    md = c.metadata(c.broker_ids[0]).topics[name]
    return all(len(p.isrs) == len(p.replicas) for p in md.partitions.values())


# ---------------------------------------------------------------------------- failover

def bench_failover(rounds: int, client_overrides: dict[str, str]) -> None:
    from confluent_kafka import Producer

    with tempfile.TemporaryDirectory() as tmp, Cluster(Path(tmp), 3, 3) as c:
        create_topic(c, "failover", 1, 3, {"min.insync.replicas": "2"})
        acked_produced_at = [0.0]
        lock = threading.Lock()
        stop = threading.Event()

        def produce() -> None:
            p = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all",
                          "linger.ms": 0, "retry.backoff.ms": 20, "log_level": 0,
                          "topic.metadata.refresh.interval.ms": 1000,
                          "message.timeout.ms": 30000, **client_overrides})

            def on_delivery(err: Any, msg: Any, t: float) -> None:
                if err is None:
                    with lock:
                        acked_produced_at[0] = max(acked_produced_at[0], t)

            while not stop.is_set():
                t = time.monotonic()
                p.produce("failover", b"x" * 100, partition=0,
                          on_delivery=lambda err, msg, t=t: on_delivery(err, msg, t))
                p.poll(0.005)
            p.flush(30)

        thread = threading.Thread(target=produce, daemon=True)
        thread.start()
        times = []
        try:
            time.sleep(2)
            for _ in range(rounds):
                leader = c.metadata(c.broker_ids[0]).topics["failover"].partitions[0].leader
                since = time.monotonic()
                c.kill(leader)
                while time.monotonic() - since < 60:
                    with lock:
                        if acked_produced_at[0] > since:
                            break
                    time.sleep(0.002)
                elapsed = time.monotonic() - since
                times.append(elapsed)
                print(f"  killed broker {leader}: acknowledged again after {elapsed:.2f} s",
                      flush=True)
                c.restart(leader)
                c.wait_for(lambda: full_isr(c, "failover"), 60, "ISR full again")
                time.sleep(1)
        finally:
            stop.set()
            thread.join(30)
    print(f"failover: median {statistics.median(times):.2f} s over {len(times)} kills "
          f"(min {min(times):.2f}, max {max(times):.2f}); goal <= 2 s; Kafka's default "
          f"broker.session.timeout.ms alone is 9 s")


def bench_failover_combined(rounds: int, client_overrides: dict[str, str],
                            node_config: dict[str, str]) -> None:
    """kill -9 the combined node that is the active controller AND leads the partition."""
    times = []
    with tempfile.TemporaryDirectory() as tmp, \
            Cluster(Path(tmp), 3, combined=True, overrides=node_config) as c:
        for n in range(rounds):
            times.append(_combined_failover_round(c, f"failover-{n}", client_overrides))
    print(f"combined failover: median {statistics.median(times):.2f} s over {len(times)} "
          f"kills (min {min(times):.2f}, max {max(times):.2f}); goal <= 2 s; "
          f"broker.session.timeout.ms is {node_config.get('broker.session.timeout.ms', '9000')}"
          f" ms; load average {load_average()}")


def _combined_failover_round(c: Cluster, topic: str, client_overrides: dict[str, str]) -> float:
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    victim = c.wait_for(lambda: max(c.active_controller(), 0), 30, "an active controller")
    others = [i for i in c.broker_ids if i != victim]
    via = others[0]
    c.admin(via).create_topics([NewTopic(
        topic, 1, replica_assignment=[[victim, *others]], config={"min.insync.replicas": "2"})],
        operation_timeout=60)[topic].result(120)
    c.wait_for(lambda: c.partition_leaders(topic, via=via).get(0) == victim
               and full_isr(c, topic), 60, f"{topic} led by {victim}, ISR full")
    acked_produced_at = [0.0]
    lock = threading.Lock()
    stop = threading.Event()

    def produce() -> None:
        p = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all",
                      "linger.ms": 0, "retry.backoff.ms": 20, "log_level": 0,
                      "topic.metadata.refresh.interval.ms": 1000,
                      "message.timeout.ms": 30000, **client_overrides})

        def on_delivery(err: Any, msg: Any, t: float) -> None:
            if err is None:
                with lock:
                    acked_produced_at[0] = max(acked_produced_at[0], t)

        while not stop.is_set():
            t = time.monotonic()
            p.produce(topic, b"x" * 100, partition=0,
                      on_delivery=lambda err, msg, t=t: on_delivery(err, msg, t))
            p.poll(0.005)
        p.flush(30)

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    try:
        c.wait_for(lambda: acked_produced_at[0] > 0, 30, "first acknowledgement")
        time.sleep(1)
        since = time.monotonic()
        c.kill(victim)
        while time.monotonic() - since < 60:
            with lock:
                if acked_produced_at[0] > since:
                    break
            time.sleep(0.002)
        elapsed = time.monotonic() - since
    finally:
        stop.set()
        thread.join(30)
    print(f"  killed node {victim} (active controller, leader of {topic}-0): "
          f"acknowledged again after {elapsed:.2f} s", flush=True)
    c.restart(victim)
    time.sleep(1)
    return elapsed


# -------------------------------------------------------------------------- replication

def producer_proc(bootstrap: str, topic: str, partitions: int, count: int, acks: str,
                  out: Any) -> None:
    import os

    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                  "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
                  "log_level": 3, "delivery.report.only.error": True})
    payload = os.urandom(100)
    errors = [0]

    def cb(err: Any, msg: Any) -> None:
        errors[0] += 1

    t0 = time.perf_counter()
    for i in range(count):
        while True:
            try:
                p.produce(topic, payload, partition=i % partitions, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.001)
        if i % 1000 == 0:
            p.poll(0)
    left = p.flush(300)
    out.put({"elapsed_s": time.perf_counter() - t0, "undelivered": left, "errors": errors[0],
             "cpu_s": time.process_time()})


def run_producer(bootstrap: str, topic: str, count: int, acks: str,
                 cpu: int | None = None) -> tuple[float, float]:
    """(messages/s, the producer process's CPU seconds); `cpu`: the one CPU it may run on."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    proc = ctx.Process(target=producer_proc, args=(bootstrap, topic, 3, count, acks, q))
    mine = os.sched_getaffinity(0)
    if cpu is not None:  # the spawned child inherits this process's affinity
        os.sched_setaffinity(0, {cpu})
    try:
        proc.start()
    finally:
        os.sched_setaffinity(0, mine)
    res = q.get(timeout=600)
    proc.join(30)
    if res["undelivered"] or res["errors"]:
        raise RuntimeError(f"{topic}: {res}")
    return float(count / res["elapsed_s"]), float(res["cpu_s"])


def kcat_lines(count: int, directory: Path) -> Path:
    """A file of `count` lines of 99 random hex characters: kcat -l sends each line (without
    its newline) as one 99 B record."""
    path = directory / "kcat-records"
    line = os.urandom(50).hex()[:99].encode() + b"\n"
    with open(path, "wb") as f:
        for _ in range(count // 10_000):
            f.write(line * 10_000)
        f.write(line * (count % 10_000))
    return path


def run_kcat(bootstrap: str, topic: str, lines: Path, count: int, acks: str,
             cpu: int | None = None) -> tuple[float, float]:
    """The same load from kcat (librdkafka driven from C, about half the producer CPU per
    record of the Python loop): (messages/s, kcat's CPU seconds). No key, so
    sticky.partitioning.linger.ms=0 spreads records over the partitions as the Python
    producer's round robin does."""
    cmd = ["kcat", "-P", "-b", bootstrap, "-t", topic, "-l", str(lines),
           "-X", f"acks={acks}", "-X", "linger.ms=5", "-X", "batch.size=1000000",
           "-X", "queue.buffering.max.messages=1000000",
           "-X", "sticky.partitioning.linger.ms=0", "-X", "log_level=3"]
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu), *cmd]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd)
    _pid, status, usage = os.wait4(proc.pid, 0)  # reaps it, with its CPU use
    elapsed = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{topic}: kcat exited with {proc.returncode}")
    return count / elapsed, usage.ru_utime + usage.ru_stime


def end_offsets(bootstrap: str, topic: str, partitions: int = 3) -> int:
    """The sum of the topic's partitions' high watermarks."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cluster-bench",
                         "log_level": 3})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, i), timeout=30)[1]
                   for i in range(partitions))
    finally:
        consumer.close()


def user_system_s(c: Cluster, ids: list[int]) -> tuple[float, float]:
    """The nodes' summed (user, system) CPU seconds, one /proc read each (node processes
    run no children)."""
    user = system = 0.0
    for i in ids:
        pid = c.nodes[i].pid
        if pid is not None:
            u, s = proc_user_system_s(pid)
            user, system = user + u, system + s
    return user, system


def bench_replication(messages: int, repeats: int, broker_config: dict[str, str],
                      producer: str = "python", pin: bool = False) -> None:
    """`pin`: the cluster's processes on CPU 1 and the producer on CPU 0, so neither takes
    the other's core."""
    mine = os.sched_getaffinity(0)
    producer_cpu = 0 if pin else None
    with tempfile.TemporaryDirectory() as tmp:
        lines = kcat_lines(messages, Path(tmp)) if producer == "kcat" else None

        if pin:
            os.sched_setaffinity(0, {1})  # the nodes started below inherit it
        try:
            with Cluster(Path(tmp), 3, 3, overrides=broker_config) as c:
                os.sched_setaffinity(0, mine)
                bootstrap = c.bootstrap_servers

                def produce(topic: str, acks: str) -> tuple[float, float]:
                    if lines is None:  # producer_proc counts undelivered records itself
                        return run_producer(bootstrap, topic, messages, acks, producer_cpu)
                    before = end_offsets(bootstrap, topic)
                    result = run_kcat(bootstrap, topic, lines, messages, acks, producer_cpu)
                    # acks=1: the high watermark may still trail the leaders for a moment.
                    c.wait_for(lambda: end_offsets(bootstrap, topic) - before == messages,
                               30, f"all {messages} records of kcat in {topic}")
                    return result

                _replication_cases(c, messages, repeats, produce)
        finally:
            os.sched_setaffinity(0, mine)
    print(f"load generator: {producer}" + (", pinned: cluster on CPU 1, producer on CPU 0"
                                           if pin else ", cores shared"))
    print("goals: RF=3 acks=1 >= 0.9, RF=3 acks=all >= 0.6 (LinkedIn's Kafka: 0.96 / 0.51)")


def _replication_cases(c: Cluster, messages: int, repeats: int,
                       produce: Callable[[str, str], tuple[float, float]]) -> None:
    create_topic(c, "rf1", 3, 1)
    create_topic(c, "rf3", 3, 3, {"min.insync.replicas": "2"})
    cases = [("RF=1 acks=1", "rf1", "1"), ("RF=3 acks=1", "rf3", "1"),
             ("RF=3 acks=all", "rf3", "all")]
    results: dict[str, list[float]] = {name: [] for name, _, _ in cases}
    brokers, controllers = list(c.broker_ids), list(c.controller_ids)
    # One round of every case first, not counted: the first rounds of a fresh cluster
    # ran 10-20% slower for every case (connections, metadata, the allocators' and the
    # page cache's first use), and would otherwise enter the medians.
    for name, topic, acks in cases:
        rate, _ = produce(topic, acks)
        print(f"  warm-up, not counted: {name}: {rate:,.0f} msg/s", flush=True)
        c.wait_for(lambda topic=topic: full_isr(c, topic), 60, "ISR full")
    for _ in range(repeats):
        for name, topic, acks in cases:
            # Write back what earlier cases left dirty: the kernel's flusher would
            # otherwise take CPU from whichever case runs 30 s later (dirty_expire).
            os.sync()
            (u0, s0), c0 = user_system_s(c, brokers), sum(user_system_s(c, controllers))
            rate, producer_cpu = produce(topic, acks)
            (u1, s1), c1 = user_system_s(c, brokers), sum(user_system_s(c, controllers))
            b0, b1 = u0 + s0, u1 + s1
            results[name].append(rate)
            # CPU-ms per 100k records: where the two cores (shared, or one each with --pin)
            # went in this case. Broker figures include the ~1 s of the producer's startup
            # and flush.
            per = 100_000 / messages * 1000
            print(f"  {name}: {rate:,.0f} msg/s ({rate * 100 / 1e6:.1f} MB/s); CPU-ms per "
                  f"100k records: brokers {(b1 - b0) * per:.1f} (user {(u1 - u0) * per:.1f}), "
                  f"controllers {(c1 - c0) * per:.1f}, producer {producer_cpu * per:.1f}",
                  flush=True)
            c.wait_for(lambda topic=topic: full_isr(c, topic), 60, "ISR full")
    base = statistics.median(results["RF=1 acks=1"])
    for name, rates in results.items():
        rounds = " ".join(f"{r / b:.2f}" for r, b in zip(rates, results["RF=1 acks=1"],
                                                         strict=True))
        print(f"replication: {name:14s} ratio to RF=1 of the same round: {rounds}")
    for name, rates in results.items():
        med = statistics.median(rates)
        print(f"replication: {name:14s} median {med:,.0f} msg/s  ratio to RF=1 {med / base:.2f}")


def bench_roles(messages: int, repeats: int) -> None:
    """Where replication's CPU goes, per role: one RF=3 topic whose 3 partitions are all led
    by the first broker, so that broker only leads (Produce, serving follower fetches) and
    the other two only follow (one fetcher each, multiplexing the 3 partitions)."""
    from confluent_kafka.admin import NewTopic

    with tempfile.TemporaryDirectory() as tmp, Cluster(Path(tmp), 3, 3) as c:
        b = list(c.broker_ids)
        c.admin(b[0]).create_topics(new_topics=[NewTopic(
            "roles", 3, replica_assignment=[b] * 3,
            config={"min.insync.replicas": "2"})])["roles"].result(60)
        c.wait_for(lambda: len(c.metadata(b[0]).topics["roles"].partitions) == 3 and all(
            p.leader == b[0] for p in c.metadata(b[0]).topics["roles"].partitions.values()),
            60, "roles led by the first broker")
        run_producer(c.bootstrap_servers, "roles", 300_000, "1")  # warm-up
        leader_ms: list[float] = []
        follower_ms: list[float] = []
        pids = [c.nodes[x].pid for x in b]  # node processes run no children
        for _ in range(repeats):
            os.sync()
            before = [proc_user_system_s(pid) for pid in pids]
            rate, producer_cpu = run_producer(c.bootstrap_servers, "roles", messages, "1")
            after = [proc_user_system_s(pid) for pid in pids]
            # (user, system) CPU-ms per 100k records for each broker
            split = [((a[0] - z[0]) * 1e8 / messages, (a[1] - z[1]) * 1e8 / messages)
                     for a, z in zip(after, before, strict=True)]
            per = [u + s for u, s in split]
            leader_ms.append(per[0])
            follower_ms.append((per[1] + per[2]) / 2)
            roles = ", ".join(f"{name} {u + s:.1f} (user {u:.1f})" for name, (u, s) in zip(
                ("leader", "follower", "follower"), split, strict=True))
            print(f"  {rate:,.0f} msg/s; CPU-ms per 100k records: {roles}, producer "
                  f"{producer_cpu * 1e8 / messages:.1f}", flush=True)
    print(f"roles (RF=3 acks=1): median CPU-ms per 100k records: leader "
          f"{statistics.median(leader_ms):.1f}, follower {statistics.median(follower_ms):.1f}")


# ----------------------------------------------------------------------------- metadata

def image_memory_per_10k() -> tuple[int, float]:
    from broker.controller import Controller, ControllerSettings
    from broker.controller.requests import (
        BrokerHeartbeatRequest,
        BrokerRegistrationRequest,
        CreatableTopic,
    )
    from broker.metadata import records as rec
    from broker.metadata.delta import MetadataDelta
    from broker.metadata.image import MetadataImage

    def apply(image: MetadataImage, records: list[Any]) -> MetadataImage:
        delta = MetadataDelta(image)
        for payload in rec.encode_all(records):
            delta.replay(rec.decode(payload))
        return delta.apply()

    controller = Controller(ControllerSettings(cluster_id="bench"), rng=random.Random(1))
    image = MetadataImage.empty("bench")
    for b in (1, 2, 3):
        reg = controller.register_broker(image, BrokerRegistrationRequest(
            b, "bench", uuid.uuid4(), [("PLAINTEXT", "127.0.0.1", 9000 + b, "PLAINTEXT")]), 0)
        image = apply(image, reg.records)
        beat = controller.broker_heartbeat(image, BrokerHeartbeatRequest(
            b, reg.response.broker_epoch, 1 << 40), 0)
        image = apply(image, beat.records)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    t0 = time.perf_counter()
    for i in range(100):
        res = controller.create_topics(image, [CreatableTopic(f"t{i}", 100, 3)], False)
        image = apply(image, res.records)
    elapsed = time.perf_counter() - t0
    del res
    gc.collect()
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return used, elapsed


def direct_metadata(host: str, port: int, timeout_s: float = 60.0,
                    ) -> tuple[dict[str, dict[int, int]], int, float]:
    """A Metadata v12 request for every topic sent to one broker itself (librdkafka may ask
    any broker it knows of): {topic: {partition: leader}}, the response's size and the
    seconds it took."""
    import asyncio
    import io

    from kio.schema.metadata.v12 import request as mreq
    from kio.serial import entity_writer

    from broker.protocol.transport import KafkaConnection

    async def go() -> tuple[dict[str, dict[int, int]], int, float]:
        conn = KafkaConnection(host, port, "cluster-bench")
        try:
            t0 = time.monotonic()
            response = await conn.request(3, 12, mreq.MetadataRequest(
                topics=None, allow_auto_topic_creation=False,
                include_topic_authorized_operations=False), timeout_s)
            took = time.monotonic() - t0
        finally:
            await conn.close()
        buf = io.BytesIO()
        entity_writer(type(response))(buf, response)
        out = {str(t.name): {int(p.partition_index): int(p.leader_id) for p in t.partitions}
               for t in response.topics}
        return out, len(buf.getvalue()), took

    return asyncio.run(go())


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def load_average() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def sample_roundtrip(c: Cluster, leaders: dict[tuple[str, int], int], per_broker: int) -> None:
    """Produce one record to `per_broker` partitions led by each broker (acks=all) and read
    each back from its partition: every broker leads and serves some of them."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    by_leader: dict[int, list[tuple[str, int]]] = {}
    for tp, leader in sorted(leaders.items()):
        by_leader.setdefault(leader, []).append(tp)
    assert set(by_leader) == set(c.broker_ids), f"leaders: {sorted(by_leader)}"
    rng = random.Random(7)
    sample = [tp for b in c.broker_ids for tp in rng.sample(by_leader[b], per_broker)]
    acked: list[Any] = []
    p = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all", "log_level": 0,
                  "message.timeout.ms": 120_000})
    for topic, part in sample:
        p.produce(topic, value=f"{topic}/{part}".encode(), partition=part,
                  on_delivery=lambda err, msg: acked.append(err))
    t0 = time.monotonic()
    while len(acked) < len(sample) and time.monotonic() - t0 < 600:
        p.flush(5)
        print(f"    produce: {len(acked)} of {len(sample)} acknowledged after "
              f"{time.monotonic() - t0:.0f} s", flush=True)
    assert len(acked) == len(sample) and not any(acked), acked[:5]
    consumer = Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": "bench",
                         "enable.auto.commit": False, "log_level": 0})
    consumer.assign([TopicPartition(t, i, 0) for t, i in sample])
    got: set[tuple[str, int]] = set()
    deadline = time.monotonic() + 120
    while len(got) < len(sample) and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and msg.error() is None:
            assert msg.value() == f"{msg.topic()}/{msg.partition()}".encode()
            got.add((msg.topic(), msg.partition()))
    consumer.close()
    assert got == set(sample), f"read back {len(got)} of {len(sample)}"


def bench_metadata(partitions: int, rf: int, failovers: int, skip_image: bool,
                   node_config: dict[str, str]) -> None:
    if not skip_image:
        used, elapsed = image_memory_per_10k()
        print(f"metadata image: {used / 1e6:.2f} MB per 10,000 partitions (RF=3, 3 brokers), "
              f"built by the pure controller in {elapsed:.2f} s", flush=True)
    per_topic = 100
    topics = [f"scale-{i}" for i in range(partitions // per_topic)]
    print(f"load average before: {load_average()}", flush=True)
    tmp = tempfile.mkdtemp(prefix="skiff-metadata-bench-")
    c = Cluster(Path(tmp), 3, 3, overrides=node_config)
    try:
        c.start(timeout=300)  # a shared 2-core machine may start it slowly
        _bench_metadata_cluster(c, partitions, rf, failovers, topics, per_topic)
    except BaseException:
        c.stop()
        print(f"failed: the nodes' directories and logs are kept in {tmp}", flush=True)
        raise
    c.stop()
    shutil.rmtree(tmp, ignore_errors=True)


# what a client retries of a CreateTopics (librdkafka leaves these to the application)
RETRIED = {"_TIMED_OUT", "NOT_CONTROLLER", "REQUEST_TIMED_OUT"}


def caught_up_controller(c: Cluster, node_id: int) -> bool:
    """The node's admin API answers from a metadata image in which every broker of the
    cluster is registered and unfenced (it has loaded and caught up with the log)."""
    try:
        d = c.describe_cluster(node_id, timeout=2.0)
    except Exception:
        return False
    unfenced = 2  # skiff.admin.v1.BrokerState
    return sorted(b.registration.broker_id for b in d.brokers
                  if b.state == unfenced) == sorted(c.broker_ids)


def _bench_metadata_cluster(c: Cluster, partitions: int, rf: int, failovers: int,
                            topics: list[str], per_topic: int) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic

    print("  pids: " + ", ".join(f"{i}={c.nodes[i].pid}" for i in c.nodes), flush=True)
    admin = c.admin(c.broker_ids[0])
    t0 = time.monotonic()
    retries = 0
    for i in range(0, len(topics), 10):
        batch = topics[i:i + 10]
        for attempt in range(11):
            futures = admin.create_topics([NewTopic(t, per_topic, rf) for t in batch],
                                          operation_timeout=120, request_timeout=150)
            failed = []
            for name, f in futures.items():
                try:
                    f.result(300)
                except KafkaException as exc:
                    err = exc.args[0]
                    if err.name() == "TOPIC_ALREADY_EXISTS" and attempt > 0:
                        continue  # an earlier attempt got through
                    if (not err.retriable() and err.name() not in RETRIED) or attempt == 10:
                        raise
                    print(f"    {name}: {err.name()} ({err.str()}), retrying", flush=True)
                    failed.append(name)
            if not failed:
                break
            retries += 1
            batch = failed
        if (i // 10) % 10 == 9:
            print(f"    {(i + 10) * per_topic} partitions created at "
                  f"{time.monotonic() - t0:.1f} s (load {load_average()})", flush=True)
    created = time.monotonic() - t0
    print(f"  CreateTopics answered for {partitions} partitions in {created:.1f} s "
          f"({retries} retried requests)", flush=True)
    wanted = set(topics)
    last: dict[int, Any] = {}

    def all_serve() -> bool:
        for b in c.broker_ids:
            node = c.nodes[b]
            md, size, took = direct_metadata(node.host, int(node.client_port or 0))
            have = sum(1 for t in wanted if t in md for leader in md[t].values()
                       if leader >= 0)
            last[b] = (have, size, took, md)
            if have != partitions:
                return False
        return True

    c.wait_for(all_serve, 900, "every broker serves every partition with a leader",
               interval=1.0)
    served = time.monotonic() - t0
    print(f"metadata: {partitions} partitions (RF={rf}) created and served with leaders "
          f"by every broker in {served:.1f} s (load {load_average()})", flush=True)
    for b in c.broker_ids:
        _, size, took, _ = last[b]
        print(f"  broker {b}: Metadata for all topics {size / 1e6:.1f} MB in {took:.2f} s",
              flush=True)
    md = last[c.broker_ids[0]][3]
    leaders = {(t, i): leader for t in wanted for i, leader in md[t].items()}
    t1 = time.monotonic()
    try:
        sample_roundtrip(c, leaders, 5)
        print(f"  produce+consume of 5 partitions led by each broker: ok in "
              f"{time.monotonic() - t1:.1f} s", flush=True)
    except AssertionError as exc:
        print(f"  produce+consume of 5 partitions led by each broker FAILED after "
              f"{time.monotonic() - t1:.1f} s: {exc}", flush=True)
    print("  RSS MB: " + ", ".join(f"{i}={rss_mb(c.nodes[i].pid):.0f}"
                                   for i in c.nodes), flush=True)
    times = []
    for _ in range(failovers):
        controller = c.active_controller()
        since = time.monotonic()
        c.kill(controller)
        def new_leader(dead: int = controller) -> int:
            a = c.active_controller()
            return a if a not in (-1, dead) else 0

        new = c.wait_for(new_leader, 120, "a new active controller", interval=0.05)
        elected = time.monotonic() - since
        name = f"after-failover-{uuid.uuid4().hex[:6]}"
        admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=60)[name].result(120)
        times.append(time.monotonic() - since)
        print(f"  killed controller {controller}: {new} leads the quorum after "
              f"{elected:.2f} s, CreateTopics answered after {times[-1]:.2f} s "
              f"(load {load_average()})", flush=True)
        t2 = time.monotonic()
        c.start_node(controller)
        # Not Cluster.wait_ready: its probe lists every topic through librdkafka with a 2 s
        # timeout, and an all-topics Metadata answer over 100,000 partitions takes longer
        # than that on a loaded machine, so it measured the probe (or never passed).
        c.wait_for(functools.partial(caught_up_controller, c, controller), 600,
                   f"controller {controller} back with every broker unfenced")
        print(f"  controller {controller} restarted: answers DescribeCluster with every "
              f"broker unfenced after {time.monotonic() - t2:.1f} s", flush=True)
        time.sleep(2)
    if times:
        print(f"controller failover with {partitions} partitions: median "
              f"{statistics.median(times):.2f} s (kill -9 to a committed CreateTopics)")
    print("  RSS MB: " + ", ".join(f"{i}={rss_mb(c.nodes[i].pid):.0f}"
                                   for i in c.nodes), flush=True)
    print(f"load average after: {load_average()}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("failover")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("-X", dest="client", action="append", default=[], type=key_value,
                   metavar="KEY=VALUE",
                   help="a librdkafka producer setting, e.g. retry.backoff.max.ms=100")
    p.add_argument("--combined", action="store_true",
                   help="3 combined nodes; kill the active controller that leads the partition")
    p.add_argument("-C", dest="node_config", action="append", default=[],
                   type=key_value, metavar="KEY=VALUE",
                   help="a setting for every node (--combined)")
    p = sub.add_parser("replication")
    p.add_argument("--messages", type=int, default=300_000)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("-C", dest="broker_config", action="append", default=[],
                   type=key_value, metavar="KEY=VALUE",
                   help="a setting for every node, e.g. replica.fetch.min.bytes=1048576")
    p.add_argument("--producer", choices=("python", "kcat"), default="python",
                   help="the load generator: confluent-kafka driven from a Python loop "
                        "(default), or kcat reading a file of records")
    p.add_argument("--pin", action="store_true",
                   help="run the cluster on CPU 1 and the producer on CPU 0")
    p = sub.add_parser("roles")
    p.add_argument("--messages", type=int, default=1_500_000)
    p.add_argument("--repeats", type=int, default=5)
    p = sub.add_parser("metadata")
    p.add_argument("--partitions", type=int, default=10_000)
    p.add_argument("--replication-factor", type=int, default=1)
    p.add_argument("--failovers", type=int, default=3)
    p.add_argument("--skip-image", action="store_true",
                   help="skip the in-process image memory measurement")
    p.add_argument("-C", dest="node_config", action="append", default=[],
                   type=key_value, metavar="KEY=VALUE",
                   help="a setting for every node, e.g. broker.session.timeout.ms=9000")
    args = parser.parse_args()
    if args.what == "failover" and args.combined:
        bench_failover_combined(args.rounds, dict(args.client), dict(args.node_config))
    elif args.what == "failover":
        bench_failover(args.rounds, dict(args.client))
    elif args.what == "replication":
        bench_replication(args.messages, args.repeats,
                          dict(args.broker_config),
                          args.producer, args.pin)
    elif args.what == "roles":
        bench_roles(args.messages, args.repeats)
    else:
        bench_metadata(args.partitions, args.replication_factor, args.failovers,
                       args.skip_image, dict(args.node_config))


if __name__ == "__main__":
    main()
