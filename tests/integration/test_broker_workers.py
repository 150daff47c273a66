"""A broker of several workers (`skiff.broker.workers`, broker/node/shards.py), on a real
`skiff dev` process: client connections reach every worker and each answers them; a
partition's records stay in the order they were sent whichever worker received them; a
killed worker is replaced; librdkafka's producers, consumer groups and admin client work
across the workers.

Which process serves a connection is read from /proc: the server side of each client
socket is found in /proc/net/tcp by the client's port, and its owner by the socket inode
in /proc/<pid>/fd.
"""

from __future__ import annotations

import base64
import datetime
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.alter_client_quotas.v1.request import (
    AlterClientQuotasRequest,
)
from kio.schema.alter_client_quotas.v1.request import (
    EntityData as AlterClientQuotasEntity,
)
from kio.schema.alter_client_quotas.v1.request import (
    EntryData as AlterClientQuotasEntry,
)
from kio.schema.alter_client_quotas.v1.request import (
    OpData as AlterClientQuotasOp,
)
from kio.schema.errors import ErrorCode
from kio.schema.list_offsets.v7.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.static.primitive import Records, i8, i16, i32, i32Timedelta, i64
from prometheus_client.parser import text_string_to_metric_families

from broker.node.shards import owner_of
from broker.protocol.records import Record, build_batch
from broker.testing.node import REPO_ROOT, admin_answers
from broker.testing.ports import free_port
from broker.testing.tls import have_openssl, make_pki
from broker.testing.wire import (
    RawConnection,
    api_versions_request,
    decode_response,
    encode_request,
    recv_frame,
)
from tests.support.node import SkiffNode

WORKERS = 2
PARTITIONS = 6
WAIT_S = 30.0
pytestmark = pytest.mark.skipif(not Path("/proc/net/tcp").exists(),
                                reason="reads which process owns a socket from /proc")


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def worker_pids(node: SkiffNode) -> list[int]:
    """[node process, worker 1, ...]: the node's children running broker.node.worker."""
    found = []
    for child in _children(node.pid):
        try:
            cmd = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if b"broker.node.worker" in cmd:
            found.append(child)
    return [node.pid, *sorted(found)]


def _server_inode(server_port: int, client_port: int) -> int | None:
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = fields[1], fields[2]
        if (int(local.split(":")[1], 16) == server_port
                and int(remote.split(":")[1], 16) == client_port):
            return int(fields[9])
    return None


def owner_pid(sock: socket.socket, server_port: int, pids: list[int]) -> int | None:
    inode = _server_inode(server_port, sock.getsockname()[1])
    if inode is None:
        return None
    target = f"socket:[{inode}]"
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                try:
                    if os.readlink(fd) == target:
                        return pid
                except OSError:
                    continue
        except OSError:
            continue
    return None


class Conn(RawConnection):
    def __init__(self, bootstrap: str, client_id: str = "test") -> None:
        super().__init__(bootstrap, WAIT_S, client_id)
        self.throttle_ms = 0  # of the last Produce answer

    def produce(self, topic: str, partition: int, values: list[bytes]) -> tuple[ErrorCode, int]:
        batch = build_batch([Record(timestamp=int(time.time() * 1000), value=v) for v in values])
        resp = self.call(ProduceRequest(
            transactional_id=None, acks=i16(-1),
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
            topic_data=(TopicProduceData(name=topic, partition_data=(
                PartitionProduceData(index=i32(partition), records=Records(batch)),)),)))
        self.throttle_ms = int(resp.throttle_time.total_seconds() * 1000)
        part = resp.responses[0].partition_responses[0]
        return part.error_code, int(part.base_offset)


def wait_for_workers(n: SkiffNode) -> None:
    """Until the node has started all its workers (bounded; the tests check what they need)."""
    deadline = time.monotonic() + WAIT_S
    while len(worker_pids(n)) < WORKERS and time.monotonic() < deadline:
        time.sleep(0.1)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SkiffNode]:
    n = SkiffNode(tmp_path_factory.mktemp("workers"),
                  config_env={"SKIFF_SKIFF_BROKER_WORKERS": str(WORKERS)})
    n.start()
    try:
        n.wait_ready()
        wait_for_workers(n)
        yield n
    finally:
        n.stop()
    # the processes stopped cleanly: no exception escaped a worker's shutdown
    assert "Traceback" not in n.log_path.read_text(errors="replace")


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    """Created, and served by each partition's worker: CreateTopics answers once the
    controller has the topic, and a broker's workers take it from the metadata after
    that (a client retries NOT_LEADER_OR_FOLLOWER meanwhile; ListOffsets, split by owner,
    shows when every owner serves its partitions)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(WAIT_S)
    c = Conn(bootstrap)
    try:
        deadline = time.monotonic() + WAIT_S
        while True:
            resp = c.call(ListOffsetsRequest(
                replica_id=i32(-1), isolation_level=i8(0), topics=(ListOffsetsTopic(
                    name=topic, partitions=tuple(
                        ListOffsetsPartition(partition_index=i32(p), timestamp=i64(-1))
                        for p in range(partitions))),)))
            codes = [p.error_code for t in resp.topics for p in t.partitions]
            if len(codes) == partitions and all(code is ErrorCode.none for code in codes):
                return
            assert time.monotonic() < deadline, codes
            time.sleep(0.05)
    finally:
        c.close()


def connections_on_every_worker(node: SkiffNode, most: int = 64,
                                 client_id: str = "test") -> dict[int, Conn]:
    """One connection served by each process of the broker: connections are opened until
    the node has handed one to each (bounded)."""
    pids = worker_pids(node)
    assert len(pids) == WORKERS, pids
    by_pid: dict[int, Conn] = {}
    spare: list[Conn] = []
    for _ in range(most):
        c = Conn(node.bootstrap, client_id)
        c.call(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                               include_topic_authorized_operations=False))
        pid = owner_pid(c.sock, node.port, pids)
        if pid is not None and pid not in by_pid:
            by_pid[pid] = c
        else:
            spare.append(c)
        if len(by_pid) == len(pids):
            break
    for c in spare:
        c.close()
    assert set(by_pid) == set(pids), f"connections reached only {sorted(by_pid)} of {pids}"
    return by_pid


def read_partition(bootstrap: str, topic: str, partition: int, n: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}-{partition}",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        return got
    finally:
        c.close()


def test_the_partitions_are_split_over_the_workers() -> None:
    owners = [owner_of("orders", p, WORKERS) for p in range(PARTITIONS)]
    assert sorted(owners) == [0, 0, 0, 1, 1, 1]
    assert {owner_of("__consumer_offsets", p, WORKERS) for p in range(50)} == {0}


def test_requests_reach_every_worker_and_each_answers(node: SkiffNode) -> None:
    topic = "reach"
    create_topic(node.bootstrap, topic)
    conns = connections_on_every_worker(node)
    try:
        for pid, c in conns.items():
            for p in range(PARTITIONS):
                code, _ = c.produce(topic, p, [f"{pid}-{p}".encode()])
                assert code is ErrorCode.none, (pid, p, code)
    finally:
        for c in conns.values():
            c.close()
    for p in range(PARTITIONS):
        got = read_partition(node.bootstrap, topic, p, len(conns))
        assert sorted(got) == sorted(f"{pid}-{p}".encode() for pid in conns)


def test_a_partitions_records_stay_in_order_across_workers(node: SkiffNode) -> None:
    topic = "ordered"
    create_topic(node.bootstrap, topic)
    conns = list(connections_on_every_worker(node).items())
    rounds = 40
    try:
        expected: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        offsets: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
        for i in range(rounds):
            for pid, c in conns:  # each partition gets this round from every worker in turn
                for p in range(PARTITIONS):
                    value = f"{i}-{pid}".encode()
                    code, offset = c.produce(topic, p, [value])
                    assert code is ErrorCode.none, (pid, p, code)
                    expected[p].append(value)
                    offsets[p].append(offset)
    finally:
        for _, c in conns:
            c.close()
    for p in range(PARTITIONS):
        assert offsets[p] == list(range(rounds * len(conns))), p
        assert read_partition(node.bootstrap, topic, p, rounds * len(conns)) == expected[p]


def test_librdkafka_producers_and_a_consumer_group_across_workers(node: SkiffNode) -> None:
    topic = "rdkafka"
    create_topic(node.bootstrap, topic)
    n, producers = 600, 4
    for k in range(producers):  # each its own connections, wherever the kernel puts them
        prod = Producer({"bootstrap.servers": node.bootstrap, "enable.idempotence": True,
                         "linger.ms": 2})
        errors: list[Any] = []
        note = errors.append
        for i in range(n):
            prod.produce(topic, value=b"%d:%d" % (k, i), partition=i % PARTITIONS,
                         on_delivery=lambda e, _m, note=note: note(e) if e else None)
        assert prod.flush(WAIT_S) == 0
        assert not errors, errors[:3]
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "workers-group",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    seen: dict[int, list[tuple[int, int]]] = {}
    deadline = time.monotonic() + 60
    total = 0
    try:
        while total < n * producers and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None or m.error() is not None:
                continue
            k, i = map(int, m.value().split(b":"))
            seen.setdefault(m.partition(), []).append((k, i))
            total += 1
        c.commit(asynchronous=False)
        committed = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)],
                                timeout=WAIT_S)
    finally:
        c.close()
    assert total == n * producers
    for part, records in seen.items():
        for k in range(producers):
            mine = [i for kk, i in records if kk == k]
            assert mine == sorted(mine) == list(range(part, n, PARTITIONS)), (part, k)
    assert sum(tp.offset for tp in committed) == n * producers


def test_transactions_commit_and_abort_across_the_workers(node: SkiffNode) -> None:
    """KIP-890 verification (Kafka's default) with partitions of every worker in one
    transaction: the committed records are read once and in order, the aborted never."""
    topic = "txn-workers"
    create_topic(node.bootstrap, topic)
    assert {owner_of(topic, p, WORKERS) for p in range(PARTITIONS)} == set(range(WORKERS))
    prod = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": "t-workers",
                     "message.timeout.ms": 20000})
    prod.init_transactions(WAIT_S)
    errors: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err:
            errors.append(err)

    for txn, commit in enumerate((True, False, True)):
        prod.begin_transaction()
        for i in range(20):
            prod.produce(topic, value=f"{txn}-{i}".encode(), partition=i % PARTITIONS,
                         on_delivery=on_delivery)
        prod.flush(WAIT_S)
        assert not errors, errors
        if commit:
            prod.commit_transaction(WAIT_S)
        else:
            prod.abort_transaction(WAIT_S)
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "g-txn-workers",
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                  "enable.auto.commit": False})
    seen: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + WAIT_S
        while sum(map(len, seen.values())) < 40 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                seen[m.partition()].append(m.value().decode())
        # the read stops at the last stable offset, past the third commit's markers
        time.sleep(1.0)
        while (m := c.poll(0.2)) is not None:
            if not m.error():
                seen[m.partition()].append(m.value().decode())
    finally:
        c.close()
    for p, values in seen.items():
        assert values == [f"{txn}-{i}" for txn in (0, 2) for i in range(20)
                          if i % PARTITIONS == p], (p, values)
    # the admin plane (the node process) lists each partition's producer from its owner
    import grpc

    from broker.admin.pb import transactions as txn_pb
    from broker.admin.pb import transactions_grpc

    with grpc.insecure_channel(f"127.0.0.1:{node.admin_port}") as channel:
        stub = transactions_grpc.TransactionServiceStub(channel)
        for p in range(PARTITIONS):
            described = stub.DescribeProducers(
                txn_pb.DescribeProducersRequest(topic=topic, partition=p), timeout=WAIT_S)
            assert [s.current_txn_start_offset for s in described.producers] == [-1], (p, described)


def test_a_killed_worker_is_replaced_and_serves_its_partitions_again(node: SkiffNode) -> None:
    topic = "replaced"
    create_topic(node.bootstrap, topic)
    theirs = [p for p in range(PARTITIONS) if owner_of(topic, p, WORKERS) == 1]
    c = Conn(node.bootstrap)
    try:
        for p in theirs:
            assert c.produce(topic, p, [b"before"])[0] is ErrorCode.none
    finally:
        c.close()
    old = worker_pids(node)[1]
    os.kill(old, signal.SIGKILL)
    deadline = time.monotonic() + WAIT_S
    result: dict[int, ErrorCode] = {}
    while time.monotonic() < deadline:
        pids = worker_pids(node)
        if len(pids) == WORKERS and pids[1] != old:
            c = Conn(node.bootstrap)
            try:
                result = {p: c.produce(topic, p, [b"after"])[0] for p in theirs}
            finally:
                c.close()
            if all(code is ErrorCode.none for code in result.values()):
                break
        time.sleep(0.2)
    assert result and all(code is ErrorCode.none for code in result.values()), result
    for p in theirs:
        assert read_partition(node.bootstrap, topic, p, 2) == [b"before", b"after"]


def test_requests_split_by_owner_are_answered_while_a_worker_is_gone(
        node: SkiffNode) -> None:
    """ListOffsets, DeleteRecords and DescribeProducers name partitions of both workers; while
    worker 1 is gone (killed; the node starts another a second later) the node process
    answers its own partitions and NOT_LEADER_OR_FOLLOWER for worker 1's, as Produce does,
    DescribeLogDirs lists the replicas it holds, AlterReplicaLogDirs answers worker 1's
    KAFKA_STORAGE_ERROR, and the client's connection stays open."""
    from kio.schema.alter_replica_log_dirs.v2.request import (
        AlterReplicaLogDir,
        AlterReplicaLogDirsRequest,
        AlterReplicaLogDirTopic,
    )
    from kio.schema.delete_records.v2.request import (
        DeleteRecordsPartition,
        DeleteRecordsRequest,
        DeleteRecordsTopic,
    )
    from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest
    from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest

    topic = "owner-gone"
    create_topic(node.bootstrap, topic)
    theirs = {p for p in range(PARTITIONS) if owner_of(topic, p, WORKERS) == 1}
    assert theirs and len(theirs) < PARTITIONS
    everything = tuple(range(PARTITIONS))

    def list_offsets(c: Conn) -> dict[int, ErrorCode]:
        resp = c.call(ListOffsetsRequest(
            replica_id=i32(-1), isolation_level=i8(0), topics=(ListOffsetsTopic(
                name=topic, partitions=tuple(
                    ListOffsetsPartition(partition_index=i32(p), timestamp=i64(-1))
                    for p in everything)),)))
        return {int(p.partition_index): p.error_code for t in resp.topics for p in t.partitions}

    def delete_records(c: Conn) -> dict[int, ErrorCode]:
        resp = c.call(DeleteRecordsRequest(
            topics=(DeleteRecordsTopic(name=topic, partitions=tuple(
                DeleteRecordsPartition(partition_index=i32(p), offset=i64(0))
                for p in everything)),),
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=10))))
        return {int(p.partition_index): p.error_code for t in resp.topics for p in t.partitions}

    def log_dirs(c: Conn) -> dict[int, ErrorCode]:
        resp = c.call(DescribeLogDirsRequest(topics=None))
        return {int(p.partition_index): ErrorCode(r.error_code) for r in resp.results
                for t in r.topics if t.name == topic for p in t.partitions}

    def log_dir_of_topic(c: Conn) -> str:
        resp = c.call(DescribeLogDirsRequest(topics=None))
        (path,) = {r.log_dir for r in resp.results for t in r.topics if t.name == topic}
        return str(path)

    def alter_log_dirs(c: Conn, path: str) -> dict[int, ErrorCode]:
        resp = c.call(AlterReplicaLogDirsRequest(dirs=(AlterReplicaLogDir(
            path=path, topics=(AlterReplicaLogDirTopic(
                name=topic, partitions=tuple(i32(p) for p in everything)),)),)))
        return {int(p.partition_index): ErrorCode(p.error_code)
                for t in resp.results for p in t.partitions}

    def describe_producers(c: Conn) -> dict[int, ErrorCode]:
        resp = c.call(DescribeProducersRequest(topics=(TopicRequest(
            name=topic, partition_indexes=tuple(i32(p) for p in everything)),)))
        return {int(p.partition_index): p.error_code for t in resp.topics for p in t.partitions}

    expected = {p: ErrorCode.not_leader_or_follower if p in theirs else ErrorCode.none
                for p in everything}
    pids = worker_pids(node)
    conns = connections_on_every_worker(node)
    c = conns.pop(pids[0])
    for other in conns.values():
        other.close()
    try:
        assert list_offsets(c) == dict.fromkeys(everything, ErrorCode.none)
        log_dir = log_dir_of_topic(c)
        # to the dir they are in: nothing to move
        assert alter_log_dirs(c, log_dir) == dict.fromkeys(everything, ErrorCode.none)
        os.kill(pids[1], signal.SIGKILL)
        deadline = time.monotonic() + WAIT_S
        answers: list[dict[int, ErrorCode]] = []
        while time.monotonic() < deadline:
            first = list_offsets(c)
            if first != dict.fromkeys(everything, ErrorCode.none):
                answers = [first, delete_records(c), describe_producers(c), list_offsets(c)]
                held = log_dirs(c)
                moves = alter_log_dirs(c, log_dir)
                break
            time.sleep(0.05)
        assert answers, "worker 1's partitions were answered throughout"
        # the node restarts worker 1 a second after it died: these came before
        assert answers == [expected] * 4, answers
        # DescribeLogDirs lists the replicas the broker holds meanwhile: the node process's
        assert held == {p: ErrorCode.none for p in everything if p not in theirs}, held
        # AlterReplicaLogDirs: worker 1's replicas are offline meanwhile
        assert moves == {p: ErrorCode.kafka_storage_error if p in theirs else ErrorCode.none
                         for p in everything}, moves
    finally:
        c.close()
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            now = worker_pids(node)
            if len(now) == WORKERS and now[1] != pids[1]:
                break
            time.sleep(0.1)
    create_topic(node.bootstrap, f"{topic}-after")  # served by both workers again


def test_kill_9_of_the_node_takes_its_workers_with_it(tmp_path: Path) -> None:
    """kill -9 of the broker's PID ends the whole broker at once, as it ends a JVM: a
    worker left running would serve its clients half a broker, and a node started again
    on the same log dirs would open the partitions it still holds. Then the broker
    restarts whole and serves what every worker had written."""
    n = SkiffNode(tmp_path / "node", config_env={"SKIFF_SKIFF_BROKER_WORKERS": str(WORKERS)})
    n.start()
    try:
        n.wait_ready()
        wait_for_workers(n)
        topic = "killed"
        create_topic(n.bootstrap, topic)
        c = Conn(n.bootstrap)
        try:
            for p in range(PARTITIONS):
                assert c.produce(topic, p, [b"before"])[0] is ErrorCode.none
        finally:
            c.close()
        workers = worker_pids(n)[1:]
        n.kill()
        killed = time.monotonic()
        while any(_running(pid) for pid in workers) and time.monotonic() - killed < 5:
            time.sleep(0.01)
        left = [pid for pid in workers if _running(pid)]
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        # the kernel ends them with the node (PR_SET_PDEATHSIG); before, a worker served
        # on for its one-second grace and its clean stop
        assert not left and time.monotonic() - killed < 0.5, (left, time.monotonic() - killed)
        n.start()
        n.wait_ready()
        for p in range(PARTITIONS):
            assert read_partition(n.bootstrap, topic, p, 1) == [b"before"]
    finally:
        n.stop()


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan is reaped by init, not by this test)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_cluster_of_brokers_with_workers_replicates_and_fails_over(
        tmp_path: Path) -> None:
    """Three brokers of two workers each, RF=3: follower fetches reach each partition's
    owner whichever process holds the connection, the ISR stays full (workers send their
    ISR changes through their node), and after kill -9 of a leader's node (its worker
    exits with it) acks=all produce goes on at the new leaders."""
    from broker.testing.cluster import Cluster

    cluster = Cluster(tmp_path / "cluster", 3, combined=True,
                      overrides={"skiff.broker.workers": str(WORKERS)})
    cluster.start(timeout=120)
    try:
        bootstrap = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("replicated", PARTITIONS, 3)])["replicated"].result(WAIT_S)
        prod = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "message.timeout.ms": 60000})
        errors: list[Any] = []
        note = errors.append
        n = 1200
        for i in range(n):
            prod.produce("replicated", value=b"%d" % i, partition=i % PARTITIONS,
                         on_delivery=lambda e, _m, note=note: note(e) if e else None)
        assert prod.flush(60) == 0
        assert not errors, errors[:3]
        deadline = time.monotonic() + WAIT_S
        while True:  # every follower caught up: the ISR of each partition is full
            parts = admin.list_topics("replicated", timeout=10).topics["replicated"].partitions
            if all(sorted(p.isrs) == sorted(cluster.broker_ids) for p in parts.values()):
                break
            assert time.monotonic() < deadline, {k: p.isrs for k, p in parts.items()}
            time.sleep(0.2)
        # each broker's admin plane gives the copy progress of every partition, whichever
        # of the leader's processes owns it (followers' log ends as the leader last saw
        # them: at most the leader's)
        for node_id in cluster.broker_ids:
            progress = _reassignment_progress(cluster.admin_address(node_id), "replicated")
            assert sorted(progress) == list(range(PARTITIONS)), (node_id, progress)
            for p, (leader_end, ends) in progress.items():
                assert leader_end == n // PARTITIONS, (node_id, p, leader_end)
                assert sorted(ends) == sorted(cluster.broker_ids), (node_id, p, ends)
                assert all(0 <= e <= leader_end for e in ends.values()), (node_id, p, ends)
                assert ends[parts[p].leader] == leader_end, (node_id, p, ends)
        victim = parts[0].leader
        cluster.kill(victim)
        for i in range(n, n + 300):
            prod.produce("replicated", value=b"%d" % i, partition=i % PARTITIONS,
                         on_delivery=lambda e, _m, note=note: note(e) if e else None)
        assert prod.flush(60) == 0
        assert not errors, errors[:3]
        for p in range(PARTITIONS):
            got = read_partition(bootstrap, "replicated", p, (n + 300) // PARTITIONS)
            assert got == [b"%d" % i for i in range(p, n + 300, PARTITIONS)], p
    finally:
        cluster.stop()


def _reassignment_progress(admin_address: str, topic: str
                           ) -> dict[int, tuple[int, dict[int, int]]]:
    """ListPartitionReassignments (include_completed) of the topic's partitions, by gRPC:
    partition -> (leader's log end, each replica's log end); partitions without progress
    are left out."""
    import grpc

    from broker.admin.pb import partitions as P
    from broker.admin.pb import partitions_grpc as PG

    with grpc.insecure_channel(admin_address) as channel:
        listed = PG.PartitionServiceStub(channel).ListPartitionReassignments(
            P.ListPartitionReassignmentsRequest(include_completed=True, partitions=[
                P.TopicPartition(topic=topic, partition=p) for p in range(PARTITIONS)]),
            timeout=WAIT_S)
    return {s.partition: (s.leader_log_end_offset,
                          {r.replica_id: r.log_end_offset for r in s.progress})
            for s in listed.reassignments if s.HasField("leader_log_end_offset")}


def test_connection_limits_hold_with_workers(tmp_path: Path) -> None:
    """While a connection count or rate is bounded the node counts every connection, so it
    holds them all (the workers still own and serve their partitions through it), and the
    bound holds as for a broker of one process."""
    n = SkiffNode(tmp_path / "limited", config_env={
        "SKIFF_SKIFF_BROKER_WORKERS": str(WORKERS), "SKIFF_MAX_CONNECTIONS_PER_IP": "6"})
    n.start()
    conns: list[Conn] = []
    try:
        n.wait_ready()
        create_topic(n.bootstrap, "limited")
        wait_for_workers(n)
        pids = worker_pids(n)
        for _ in range(5):  # the sixth is the test's wait_ready/admin client, now closed
            c = Conn(n.bootstrap)
            conns.append(c)
            for p in range(PARTITIONS):  # every partition, whichever worker owns it
                assert c.produce("limited", p, [b"x"])[0] is ErrorCode.none
            assert owner_pid(c.sock, n.port, pids) == n.pid
        refused = 0
        for _ in range(3):  # held open: the sixth is admitted, the two after it are not
            extra = Conn(n.bootstrap)
            conns.append(extra)
            try:
                extra.produce("limited", 0, [b"y"])
            except (ConnectionError, OSError):
                refused += 1
        assert refused == 2, "max.connections.per.ip did not hold"
    finally:
        for c in conns:
            c.close()
        n.stop()


def test_admin_requests_over_partitions_see_every_worker(node: SkiffNode) -> None:
    """DescribeLogDirs lists the partitions of every worker; DeleteRecords and
    DescribeProducers are answered by each partition's owner."""
    from kio.schema.delete_records.v2.request import (
        DeleteRecordsPartition,
        DeleteRecordsRequest,
        DeleteRecordsTopic,
    )
    from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest
    from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest

    topic = "admin-spread"
    create_topic(node.bootstrap, topic)
    prod = Producer({"bootstrap.servers": node.bootstrap, "enable.idempotence": True})
    for i in range(60):
        prod.produce(topic, value=b"%d" % i, partition=i % PARTITIONS)
    assert prod.flush(WAIT_S) == 0
    assert {owner_of(topic, p, WORKERS) for p in range(PARTITIONS)} == {0, 1}
    c = Conn(node.bootstrap)
    try:
        dirs = c.call(DescribeLogDirsRequest(topics=None))
        held = {(t.name, p.partition_index) for r in dirs.results for t in r.topics
                for p in t.partitions if t.name == topic}
        assert held == {(topic, p) for p in range(PARTITIONS)}
        producers = c.call(DescribeProducersRequest(topics=(TopicRequest(
            name=topic, partition_indexes=tuple(i32(p) for p in range(PARTITIONS))),)))
        answered = {p.partition_index: p for t in producers.topics for p in t.partitions}
        assert sorted(answered) == list(range(PARTITIONS))
        assert all(p.error_code is ErrorCode.none and len(p.active_producers) == 1
                   for p in answered.values()), answered
        deleted = c.call(DeleteRecordsRequest(
            topics=(DeleteRecordsTopic(name=topic, partitions=tuple(
                DeleteRecordsPartition(partition_index=i32(p), offset=i64(4))
                for p in range(PARTITIONS))),),
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=10))))
        marks = {p.partition_index: (p.error_code, p.low_watermark)
                 for t in deleted.topics for p in t.partitions}
        assert marks == {p: (ErrorCode.none, 4) for p in range(PARTITIONS)}
    finally:
        c.close()


def test_an_incremental_fetch_session_spans_the_workers(node: SkiffNode) -> None:
    """KIP-227 over partitions of both workers: the session is kept where the connection
    is; an incremental fetch answers only the partitions with news, whichever worker owns
    them, and its long poll wakes when another worker's partition gets records."""
    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic

    topic = "sessions"
    create_topic(node.bootstrap, topic)
    remote = [p for p in range(PARTITIONS) if owner_of(topic, p, WORKERS) == 1]
    local = [p for p in range(PARTITIONS) if owner_of(topic, p, WORKERS) == 0]
    c = Conn(node.bootstrap)
    writer = Conn(node.bootstrap)
    try:
        full = c.call(FetchRequest(
            max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=0)), min_bytes=i32(0),
            session_id=i32(0), session_epoch=i32(0),
            topics=(FetchTopic(topic=topic, partitions=tuple(
                FetchPartition(partition=i32(p), fetch_offset=i64(0),
                               partition_max_bytes=i32(1 << 20))
                for p in range(PARTITIONS))),),
            forgotten_topics_data=()))
        assert full.error_code is ErrorCode.none and full.session_id != 0
        session = full.session_id
        pids = worker_pids(node)
        here = pids.index(owner_pid(c.sock, node.port, pids))  # the worker holding c
        elsewhere = [p for p in range(PARTITIONS) if owner_of(topic, p, WORKERS) != here]

        def incremental(epoch: int, wait_ms: int) -> Any:
            return c.call(FetchRequest(
                max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=wait_ms)),
                min_bytes=i32(1), session_id=session, session_epoch=i32(epoch), topics=(),
                forgotten_topics_data=()))

        quiet = incremental(1, 0)
        assert quiet.error_code is ErrorCode.none and quiet.responses == ()
        for p in (remote[0], local[0]):
            assert writer.produce(topic, p, [b"news-%d" % p])[0] is ErrorCode.none
        got: set[int] = set()
        epoch = 1
        for _ in range(2):  # the news of both workers, in one answer or two
            epoch += 1
            news = incremental(epoch, 2000)
            got |= {q.partition_index for t in news.responses for q in t.partitions
                    if q.records}
            if got == {remote[0], local[0]}:
                break
        assert got == {remote[0], local[0]}, got
        # the next fetch moves past what it read and long-polls, answered after a produce
        started = time.monotonic()
        c.sock.sendall(encode_request(FetchRequest(
            max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=5000)),
            min_bytes=i32(1), session_id=session, session_epoch=i32(epoch + 1),
            topics=(FetchTopic(topic=topic, partitions=tuple(
                FetchPartition(partition=i32(p), fetch_offset=i64(1),
                               partition_max_bytes=i32(1 << 20)) for p in sorted(got))),),
            forgotten_topics_data=()), 99))
        time.sleep(0.3)
        assert writer.produce(topic, elsewhere[-1], [b"late"])[0] is ErrorCode.none
        _, woke = decode_response(1, 12, recv_frame(c.sock))
        waited = time.monotonic() - started
        late = {q.partition_index for t in woke.responses for q in t.partitions}
        assert elsewhere[-1] in late, late
        assert waited < 4.0, f"the long poll did not wake on the records ({waited:.1f} s)"
    finally:
        c.close()
        writer.close()


def test_the_metrics_endpoint_gathers_every_worker(node: SkiffNode) -> None:
    """One scrape of the node process shows the broker: each partition's log from its owner,
    the topic's records and requests summed over the processes, and the workers' CPU."""
    topic = "metrics-workers"
    create_topic(node.bootstrap, topic)
    c = Conn(node.bootstrap)
    try:
        for p in range(PARTITIONS):
            assert c.produce(topic, p, [b"m"] * (p + 1))[0] is ErrorCode.none
    finally:
        c.close()
    url = f"http://127.0.0.1:{node.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=15) as resp:
        text = resp.read().decode()
    vals = {(s.name, frozenset(s.labels.items())): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}

    def get(name: str, **labels: str) -> float:
        return vals[(name, frozenset(labels.items()))]

    for w in range(WORKERS):
        assert get("skiff_broker_worker_up", worker=str(w)) == 1
    for p in range(PARTITIONS):
        assert get("kafka_log_log_logendoffset", topic=topic, partition=str(p)) == p + 1
    records = PARTITIONS * (PARTITIONS + 1) // 2
    assert get("kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == records
    # the connection's process counted its Produce requests once each
    produced = sum(v for (name, labels), v in vals.items()
                   if name == "kafka_network_requestmetrics_requests_total"
                   and ("request", "Produce") in labels)
    assert produced >= PARTITIONS
    # the processes' CPU is summed: more than the node process's own
    own_cpu = sum(float(x) for x in Path(f"/proc/{node.pid}/stat").read_text()
                  .rsplit(")", 1)[1].split()[11:13]) / os.sysconf("SC_CLK_TCK")
    assert get("process_cpu_seconds_total") > own_cpu
    # one series for what every process shares
    assert [v for (name, _), v in vals.items() if name == "python_info"] == [1]
    if shutil.which("promtool"):  # tests/run.sh installs it
        check = subprocess.run(["promtool", "check", "metrics"], input=text.encode(),
                               capture_output=True, timeout=30)
        assert check.returncode == 0, check.stdout + check.stderr


def test_a_client_quota_holds_for_the_broker_not_per_worker(node: SkiffNode) -> None:
    """producer_byte_rate bounds a client-id on the broker: what one process took counts
    in every other, so a connection of the same client-id on another worker is throttled
    at once (each process alone would have allowed the quota again)."""
    client_id, rate = "quota-shared", 100_000
    topic = "quota-workers"
    create_topic(node.bootstrap, topic)
    admin = Conn(node.bootstrap)
    try:
        resp = admin.call(AlterClientQuotasRequest(validate_only=False, entries=(
            AlterClientQuotasEntry(
                entity=(AlterClientQuotasEntity(entity_type="client-id", entity_name=client_id),),
                ops=(AlterClientQuotasOp(key="producer_byte_rate", value=float(rate),
                                         remove=False),)),)))
        assert [e.error_code for e in resp.entries] == [ErrorCode.none], resp
    finally:
        admin.close()
    conns = connections_on_every_worker(node, client_id=client_id)
    first, *others = conns.values()
    try:
        payload = [b"q" * 1000] * 16
        taken = 0
        deadline = time.monotonic() + WAIT_S
        while True:  # the quota's windows (11 of 1 s) let about 10 s of its rate through
            code, _ = first.produce(topic, 0, payload)
            assert code is ErrorCode.none
            taken += 16_000
            if first.throttle_ms > 0:
                break
            assert time.monotonic() < deadline, "never throttled: is the quota applied?"
        assert taken >= 5 * rate, taken
        time.sleep(0.2)  # the processes tell each other every 50 ms
        for other in others:
            # a tenth of what the quota let through: alone, this process would take it
            code, _ = other.produce(topic, 0, [b"q" * 1000] * (taken // 10_000))
            assert code is ErrorCode.none
            assert other.throttle_ms > 0, "another worker let the client-id take its quota again"
    finally:
        for c in conns.values():
            c.close()



PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret" '
              'user_alice="alice-secret";')


class SecureConn(Conn):
    """A connection to a SASL_SSL listener, authenticated with SASL/PLAIN."""

    def __init__(self, port: int, ca: str, user: str, password: str) -> None:
        raw = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
        self.sock = ssl.create_default_context(cafile=ca).wrap_socket(
            raw, server_hostname="127.0.0.1")
        self.correlation = 0
        self.client_id = "secure-test"
        self.throttle_ms = 0
        # what the Java client reads first: without SaslAuthenticate listed it falls back
        # to SaslHandshake v0 and raw tokens
        versions = self.call(api_versions_request(3))
        self.advertised = {int(k.api_key) for k in versions.api_keys}
        self.call(SaslHandshakeRequest(mechanism="PLAIN"))
        auth = self.call(SaslAuthenticateRequest(
            auth_bytes=b"\0" + user.encode() + b"\0" + password.encode()))
        self.auth_error = ErrorCode(auth.error_code)


@pytest.mark.skipif(not have_openssl(), reason="openssl not installed (tests/run.sh installs it)")
def test_a_sasl_ssl_listener_is_served_by_every_worker(tmp_path: Path) -> None:
    """TLS and SASL with workers: a connection is handed over before its TLS handshake,
    which the worker makes, as it then runs SASL; records produced through each process
    reach partitions of both and are read back by librdkafka over SASL_SSL."""
    pki = make_pki(tmp_path / "pki")
    port, secure, controller = free_port(), free_port(), free_port()
    props = {
        "process.roles": "broker,controller", "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SECURE://127.0.0.1:{secure},"
                     f"CONTROLLER://127.0.0.1:{controller}",
        "listener.security.protocol.map":
            "PLAINTEXT:PLAINTEXT,SECURE:SASL_SSL,CONTROLLER:PLAINTEXT",
        "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "PLAINTEXT",
        "listener.name.secure.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.secure.plain.sasl.jaas.config": PLAIN_JAAS,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.keystore("server"),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.ca,
        "log.dirs": str(tmp_path / "logs"), "admin.listeners": f"127.0.0.1:{free_port()}",
        "metrics.listeners": f"127.0.0.1:{free_port()}",
        "skiff.broker.workers": str(WORKERS),
    }
    path = tmp_path / "server.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), SKIFF_CLUSTER_ID=cluster_id)
    with open(tmp_path / "node.log", "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "broker.cli.main", "server", "start", str(path),
             "--auto-format"],
            cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    conns: dict[int, SecureConn] = {}
    try:
        deadline = time.monotonic() + 60
        while not admin_answers(f"127.0.0.1:{port}", 2.0):
            assert proc.poll() is None and time.monotonic() < deadline, \
                (tmp_path / "node.log").read_text(errors="replace")[-3000:]
        topic = "secure-workers"
        create_topic(f"127.0.0.1:{port}", topic)
        pids: list[int] = []
        while len(pids) < WORKERS and time.monotonic() < deadline:
            pids = worker_pids(proc)  # type: ignore[arg-type]
        bad = SecureConn(secure, pki.ca, "alice", "wrong")
        assert bad.auth_error is ErrorCode.sasl_authentication_failed
        bad.close()
        for _ in range(64):
            c = SecureConn(secure, pki.ca, "alice", "alice-secret")
            assert c.auth_error is ErrorCode.none
            assert {17, 36} <= c.advertised, sorted(c.advertised)
            owner = owner_pid(c.sock, secure, pids)
            if owner is not None and owner not in conns:
                conns[owner] = c
            else:
                c.close()
            if len(conns) == WORKERS:
                break
        assert set(conns) == set(pids), f"SASL_SSL connections reached {sorted(conns)} of {pids}"
        for pid, c in conns.items():
            for p in range(PARTITIONS):
                assert c.produce(topic, p, [f"{pid}-{p}".encode()])[0] is ErrorCode.none
        consumer = Consumer({
            "bootstrap.servers": f"127.0.0.1:{secure}", "group.id": "g-secure",
            "auto.offset.reset": "earliest", "security.protocol": "sasl_ssl",
            "sasl.mechanisms": "PLAIN", "sasl.username": "alice",
            "sasl.password": "alice-secret", "ssl.ca.location": pki.ca})
        got: list[str] = []
        try:
            consumer.subscribe([topic])
            while len(got) < WORKERS * PARTITIONS and time.monotonic() < deadline:
                m = consumer.poll(0.5)
                if m is not None and not m.error():
                    got.append(m.value().decode())
        finally:
            consumer.close()
        assert sorted(got) == sorted(f"{pid}-{p}" for pid in conns for p in range(PARTITIONS))
    finally:
        for c in conns.values():
            c.close()
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def test_log_dirs_are_placed_moved_and_cordoned_by_each_owner(tmp_path: Path) -> None:
    """JBOD with workers: each process places the partitions it owns over the log dirs
    (Kafka's fewest-first, counted per process), AlterReplicaLogDirs moves each
    partition in its owner, and cordoned.log.dirs (KIP-1066, set dynamically) keeps every
    process's new partitions off the cordoned dir."""
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType
    from kafka.admin import NewTopic as KpNewTopic
    from kafka.errors import NoError

    a, b = (tmp_path / "a").resolve(), (tmp_path / "b").resolve()
    n = SkiffNode(tmp_path / "node", config_env={
        "SKIFF_SKIFF_BROKER_WORKERS": str(WORKERS), "SKIFF_LOG_DIRS": f"{a},{b}"})
    n.start()
    admin = None
    try:
        n.wait_ready()
        admin = KafkaAdminClient(bootstrap_servers=n.bootstrap,
                                 request_timeout_ms=int(WAIT_S * 1000))

        def placed(topic: str) -> dict[int, str]:
            [answer] = admin.describe_log_dirs(brokers=[1])
            return {p["partition_index"]: d["log_dir"] for d in answer["log_dirs"]
                    for t in d["topics"] if t["name"] == topic for p in t["partitions"]}

        def settle(topic: str, want: dict[int, str]) -> dict[int, str]:
            deadline = time.monotonic() + WAIT_S
            while (got := placed(topic)) != want and time.monotonic() < deadline:
                time.sleep(0.2)
            return got

        topic = "jbod-workers"
        admin.create_topics([KpNewTopic(topic, PARTITIONS, 1)], timeout_ms=int(WAIT_S * 1000))
        deadline = time.monotonic() + WAIT_S
        while len(where := placed(topic)) < PARTITIONS and time.monotonic() < deadline:
            time.sleep(0.2)
        for w in range(WORKERS):  # each process spread its own partitions over both dirs
            dirs = [where[p] for p in range(PARTITIONS) if owner_of(topic, p, WORKERS) == w]
            assert abs(dirs.count(str(a)) - dirs.count(str(b))) <= 1, (w, where)
        target = {p: str(b) if d == str(a) else str(a) for p, d in where.items()}
        moved = admin.alter_replica_log_dirs({(topic, p, 1): d for p, d in target.items()})
        assert set(moved.values()) == {NoError}, moved
        assert settle(topic, target) == target

        admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "1",
                                            configs={"cordoned.log.dirs": str(a)})],
                            raise_on_unknown=False)
        time.sleep(1.0)  # every worker follows the config record
        admin.create_topics([KpNewTopic("jbod-cordoned", PARTITIONS, 1)],
                            timeout_ms=int(WAIT_S * 1000))
        want = dict.fromkeys(range(PARTITIONS), str(b))
        assert settle("jbod-cordoned", want) == want
    finally:
        if admin is not None:
            admin.close()
        n.stop()
    assert "Traceback" not in n.log_path.read_text(errors="replace")


def _skiff_cli(node: SkiffNode, *args: str, stdin: str | None = None) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    env.pop("SKIFF_ADMIN", None)
    done = subprocess.run(
        [sys.executable, "-m", "broker.cli.main", *args, "--bootstrap",
         f"127.0.0.1:{node.admin_port}"],
        capture_output=True, text=True, timeout=120, env=env, input=stdin, cwd=REPO_ROOT)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    return done.stdout


def test_the_admin_plane_serves_every_workers_partitions(node: SkiffNode) -> None:
    """The gRPC admin plane (the node process) produces to, consumes from and describes
    the partitions of every worker, and resets a group's offsets on them."""
    topic = "admin-workers"
    create_topic(node.bootstrap, topic)
    for p in range(PARTITIONS):
        assert _skiff_cli(node, "produce", "--topic", topic, "--partition", str(p),
                          stdin=f"a{p}\nb{p}\n").split() == [f"{topic}-{p}@0", f"{topic}-{p}@1"]
    for p in range(PARTITIONS):
        out = _skiff_cli(node, "consume", "--topic", topic, "--partition", str(p),
                         "--from-beginning", "--max-messages", "2", "--timeout-ms", "5000")
        assert out.split() == [f"a{p}", f"b{p}"], (p, out)
    rows = [line.split() for line in _skiff_cli(node, "topics", "describe", topic).splitlines()]
    offsets = {r[0]: r[-3:] for r in rows if r and r[0].isdigit()}
    assert offsets == {str(p): ["0", "2", "2"] for p in range(PARTITIONS)}, rows
    out = _skiff_cli(node, "groups", "reset-offsets", "g-admin-workers", "--topic", topic,
                     "--to-latest", "--execute")
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "g-admin-workers"})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=WAIT_S)
    finally:
        c.close()
    assert [tp.offset for tp in got] == [2] * PARTITIONS, out
