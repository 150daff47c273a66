"""JBOD on real processes (KIP-113, KIP-858): a 3-node cluster whose node 1 keeps its
partitions in two log dirs.

1. A replica moves between node 1's dirs (AlterReplicaLogDirs) while librdkafka producers
   write to it with acks=all: every acknowledged record is read back afterwards, from the
   new dir.
2. Node 1 loses its second dir (the directory is renamed away and a plain file takes its
   path, so whatever the broker creates there fails, as root or not). Node 1 keeps running
   and serving the partitions of its first dir; the partitions of the lost dir get leaders
   on the other nodes; DescribeLogDirs reports the dir with KAFKA_STORAGE_ERROR; producers
   writing all along lose no acknowledged record.
DescribeLogDirs and AlterReplicaLogDirs are sent as kio builds them (no client here has
them); everything else is librdkafka.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from kio.schema.errors import ErrorCode

from broker.protocol.kio_build import build
from broker.testing.cluster import Cluster
from broker.testing.wire import decode_response, encode_request, recv_frame
from tests.unit.handlers.datapath import schema_module

pytestmark = pytest.mark.timeout(300)
TOPIC = "jbod"
PARTITIONS = 6


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("jbod")
    n1 = base / "node-1"
    c = Cluster(base, controllers=3, combined=True, node_overrides={
        1: {"log.dirs": f"{n1 / 'logs'},{n1 / 'logs2'}"}})
    try:
        c.start()
        [fut] = c.admin(1).create_topics([NewTopic(
            TOPIC, num_partitions=PARTITIONS,
            replica_assignment=[[1, 2, 3]] * PARTITIONS)]).values()
        fut.result(30)
        c.wait_for(lambda: set(c.partition_leaders(TOPIC).values()) == {1}, 30,
                   "node 1 leads every partition")
        # the metadata names node 1 before node 1 has made its replicas: DescribeLogDirs
        # once listed none of them right after the wait above
        c.wait_for(lambda: len(placement(c)) == PARTITIONS, 30,
                   "node 1 holds a replica of every partition in a log dir")
        yield c
    finally:
        c.stop()


def kio_call(c: Cluster, node_id: int, api: str, key: int, version: int, request: Any) -> Any:
    host, port = c.nodes[node_id].bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(encode_request(request, 1, client_id="jbod-test"))
        corr, resp = decode_response(key, version, recv_frame(sock))
    assert corr == 1
    return resp


def log_dirs(c: Cluster) -> Any:
    m = schema_module("describe_log_dirs", 4)
    return kio_call(c, 1, "describe_log_dirs", 35, 4, build(m.DescribeLogDirsRequest,
                                                            topics=None)).results


def placement(c: Cluster) -> dict[int, str]:
    """partition -> log dir on node 1 (current replicas only)."""
    return {p.partition_index: r.log_dir for r in log_dirs(c) for t in r.topics
            if t.name == TOPIC for p in t.partitions if not p.is_future_key}


class Writer:
    """librdkafka producers with acks=all in a thread until stopped; acked values per
    partition."""

    def __init__(self, c: Cluster, partitions: list[int], tag: str) -> None:
        self.acked: dict[int, set[bytes]] = {p: set() for p in partitions}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all",
                                   "enable.idempotence": True, "linger.ms": 2,
                                   "message.timeout.ms": 30000, "log_level": 0})
        self._thread = threading.Thread(target=self._run, args=(partitions, tag), daemon=True)
        self._thread.start()

    def _run(self, partitions: list[int], tag: str) -> None:
        def done(err: Any, msg: Any) -> None:
            if err is None:
                self.acked[msg.partition()].add(msg.value())
            else:
                self.errors.append(str(err))

        i = 0
        while not self._stop.is_set():
            for p in partitions:
                self._producer.produce(TOPIC, value=b"%s-%d-%08d" % (tag.encode(), p, i),
                                       partition=p, on_delivery=done)
            i += 1
            self._producer.poll(0.005)
        self._producer.flush(60)

    def stop(self) -> dict[int, set[bytes]]:
        self._stop.set()
        self._thread.join(90)
        assert not self._thread.is_alive()
        return self.acked

    def count(self) -> int:
        return sum(len(v) for v in self.acked.values())


def read_partition(c: Cluster, partition: int) -> set[bytes]:
    cons = Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": f"jbod-{partition}",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "log_level": 0})
    try:
        end = cons.get_watermark_offsets(TopicPartition(TOPIC, partition), timeout=20)[1]
        cons.assign([TopicPartition(TOPIC, partition, 0)])
        seen: set[bytes] = set()
        last = -1
        deadline = time.monotonic() + 60
        while last < end - 1 and time.monotonic() < deadline:
            msg = cons.poll(1.0)
            if msg is None or msg.error():
                continue
            seen.add(msg.value())
            last = msg.offset()
        assert last >= end - 1, f"partition {partition}: read to {last}, end {end}"
        return seen
    finally:
        cons.close()


def wait_until(what: str, pred: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"not within {timeout}s: {what}"
        time.sleep(0.2)


def test_1_replica_moves_between_dirs_while_producing(cluster: Cluster) -> None:
    dirs = placement(cluster)
    first, second = sorted(set(dirs.values()))
    assert first.endswith("/logs") and second.endswith("/logs2")
    assert len([p for p, d in dirs.items() if d == second]) == PARTITIONS // 2  # fewest first
    mover = next(p for p, d in sorted(dirs.items()) if d == first)
    writer = Writer(cluster, [mover], "move")
    wait_until("records acknowledged", lambda: writer.count() >= 2000, 60)
    m = schema_module("alter_replica_log_dirs", 2)
    resp = kio_call(cluster, 1, "alter_replica_log_dirs", 34, 2, build(
        m.AlterReplicaLogDirsRequest, dirs=(build(m.AlterReplicaLogDir, path=second, topics=(
            build(m.AlterReplicaLogDirTopic, name=TOPIC, partitions=(mover,)),)),)))
    assert [(p.partition_index, p.error_code) for t in resp.results for p in t.partitions] == [
        (mover, ErrorCode.none)]
    wait_until("the replica is in its new dir",
               lambda: placement(cluster).get(mover) == second and not any(
                   p.is_future_key for r in log_dirs(cluster) for t in r.topics
                   for p in t.partitions), 120)
    before = writer.count()
    wait_until("writes go on after the move", lambda: writer.count() >= before + 1000, 60)
    acked = writer.stop()[mover]
    assert acked and not writer.errors, writer.errors[:5]
    missing = acked - read_partition(cluster, mover)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:3]}"
    assert not (Path(first) / f"{TOPIC}-{mover}").exists()
    assert (Path(second) / f"{TOPIC}-{mover}").is_dir()


def test_2_a_lost_log_dir_is_taken_offline_and_its_leaders_move(cluster: Cluster) -> None:
    dirs = placement(cluster)
    first = next(d for d in dirs.values() if d.endswith("/logs"))
    second = next(d for d in dirs.values() if d.endswith("/logs2"))
    kept = sorted(p for p, d in dirs.items() if d == first)
    lost = sorted(p for p, d in dirs.items() if d == second)
    assert kept and lost
    writer = Writer(cluster, list(range(PARTITIONS)), "fail")
    wait_until("records acknowledged", lambda: writer.count() >= 3000, 60)

    gone = Path(second)
    os.rename(gone, gone.with_name("logs2.lost"))
    gone.write_text("this disk is gone\n")

    def moved() -> bool:
        leaders = cluster.partition_leaders(TOPIC)
        return (len(leaders) == PARTITIONS and all(leaders[p] in (2, 3) for p in lost)
                and all(leaders[p] == 1 for p in kept))

    # replica.high.watermark.checkpoint.interval.ms (5 s) finds the dir at the latest
    wait_until("the lost dir's leaders moved away, the others stayed", moved, 60)
    assert cluster.nodes[1].running, "the broker must keep running"
    results = {r.log_dir: r for r in log_dirs(cluster)}
    assert results[second].error_code is ErrorCode.kafka_storage_error
    assert results[first].error_code is ErrorCode.none
    assert sorted(p.partition_index for t in results[first].topics if t.name == TOPIC
                  for p in t.partitions) == kept
    before = {p: len(writer.acked[p]) for p in range(PARTITIONS)}
    wait_until("every partition takes writes again", lambda: all(
        len(writer.acked[p]) >= before[p] + 200 for p in range(PARTITIONS)), 90)
    acked = writer.stop()
    assert cluster.nodes[1].running
    for p in range(PARTITIONS):
        missing = acked[p] - read_partition(cluster, p)
        assert not missing, (f"partition {p}: {len(missing)} acknowledged records lost, "
                             f"e.g. {sorted(missing)[:3]}")
    log_text = cluster.nodes[1].log_path.read_text(errors="replace")
    assert "log_dir_failed" in log_text and "node_halting" not in log_text


def in_sync(c: Cluster) -> set[int]:
    """Partitions of TOPIC whose ISR holds node 1 (librdkafka's Metadata; none while the
    client is still reconnecting after a restart)."""
    try:
        t = c.metadata(2).topics.get(TOPIC)
    except KafkaException:
        return set()
    return set() if t is None else {p for p, pm in t.partitions.items() if 1 in pm.isrs}


def test_3_restarts_with_the_dir_still_lost_then_with_a_new_disk(cluster: Cluster) -> None:
    """After test 2: node 1 restarts with its second dir still a file (the dir is offline
    from the start and node 1 runs on the first, its lost replicas made again there), then
    with an empty directory in its place (a new disk: formatted with a new directory id at
    start). Node 1 ends in every partition's ISR again, and writes and reads go on."""
    first = next(r.log_dir for r in log_dirs(cluster) if r.log_dir.endswith("/logs"))
    second = next(r.log_dir for r in log_dirs(cluster) if r.log_dir.endswith("/logs2"))
    old_id = (Path(second).with_name("logs2.lost") / "meta.properties").read_text()
    cluster.restart(1)
    results = {r.log_dir: r for r in log_dirs(cluster)}
    assert results[second].error_code is ErrorCode.kafka_storage_error
    assert results[first].error_code is ErrorCode.none
    log_text = cluster.nodes[1].log_path.read_text(errors="replace")
    assert "log_dir_offline_at_start" in log_text
    wait_until("node 1 back in every ISR", lambda: in_sync(cluster) == set(range(PARTITIONS)),
               120)
    assert set(placement(cluster).values()) == {first}

    Path(second).unlink()
    Path(second).mkdir()  # the new, empty disk
    cluster.restart(1)
    meta = (Path(second) / "meta.properties").read_text()
    assert "directory.id=" in meta and meta != old_id
    assert all(r.error_code is ErrorCode.none for r in log_dirs(cluster))
    wait_until("node 1 back in every ISR", lambda: in_sync(cluster) == set(range(PARTITIONS)),
               120)
    writer = Writer(cluster, list(range(PARTITIONS)), "new-disk")
    wait_until("every partition takes writes", lambda: all(
        len(v) >= 100 for v in writer.acked.values()), 90)
    acked = writer.stop()
    for p in range(PARTITIONS):
        assert acked[p] <= read_partition(cluster, p), p


def test_4_a_move_cut_short_by_a_crash_goes_on_after_the_restart(cluster: Cluster) -> None:
    """Node 1 is killed while one of its replicas has a future copy in the other dir (the
    copy's directory is made as AlterReplicaLogDirs makes it, with part of the log and a
    stale file in it). After the restart the move goes on, as in Kafka: the replica ends in
    the other dir with every acknowledged record and no future directory is left."""
    dirs = placement(cluster)
    first = next(d for d in set(dirs.values()) if d.endswith("/logs"))
    second = next(r.log_dir for r in log_dirs(cluster) if r.log_dir.endswith("/logs2"))
    mover = min(p for p, d in dirs.items() if d == first)
    writer = Writer(cluster, [mover], "resume")
    wait_until("records acknowledged", lambda: writer.count() >= 2000, 60)
    acked = writer.stop()[mover]
    cluster.kill(1)
    src = Path(first) / f"{TOPIC}-{mover}"
    future = Path(second) / f"{TOPIC}-{mover}.{'ab' * 16}-future"
    future.mkdir()
    log_file = min(src.glob("*.log"))
    (future / log_file.name).write_bytes(log_file.read_bytes()[: log_file.stat().st_size // 2])
    (future / f"{10**12:020d}.log").write_bytes(b"stale bytes of an older copy")
    cluster.restart(1)
    wait_until("the move finished in the other dir", lambda: placement(cluster).get(mover)
               == second and not future.exists() and not any(
                   p.is_future_key for r in log_dirs(cluster) for t in r.topics
                   for p in t.partitions), 120)
    log_text = cluster.nodes[1].log_path.read_text(errors="replace")
    assert "replica_move_resumed" in log_text and "replica_moved" in log_text
    assert not src.exists()
    wait_until("node 1 back in every ISR", lambda: in_sync(cluster) == set(range(PARTITIONS)),
               120)
    missing = acked - read_partition(cluster, mover)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:3]}"
